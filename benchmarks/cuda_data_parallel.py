#!/usr/bin/python3
"""A data-parallel step's NCCL buckets on the cuda target, strategy by strategy.

For each training model of scripts/export_training_models.py this makes its
data-parallel step (`kiln opt --passes=training-step,default --replicas=N`),
compiles it for cuda with each --buckets strategy and prints one Markdown
row per strategy from `--explain-placement`: the buckets, the gradient
bytes, when the compute tasks end by the compile-time estimates, when the
last bucket ends, the collectives' time on the links, and what of it the
step waits for after its last compute task (exposed). No GPU is needed: these are the planner's estimates (NVLink 4 and
NCCL's ring latencies, docs/cuda-target.md, "Data-parallel steps"); on a
machine with GPUs the package runs them (kiln_model_run_replicas).

usage: benchmarks/cuda_data_parallel.py KILN TRAINING_MODELS_DIR [--replicas=N] [NAME ...]
"""
import os
import re
import subprocess
import sys
import tempfile

STRATEGIES = ("search", "ddp", "single", "per-tensor")


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return p.stdout


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--replicas=")]
    replicas = [int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("--replicas=")] or [8]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    kiln, models = args[:2]
    names = args[2:] or ["mlp_classifier", "cnn_classifier", "gpt2_regression", "bert_mlm"]
    print(f"data parallel over {replicas[0]} GPUs (the planner's estimates)\n")
    print("| model | --buckets | buckets | gradient bytes | compute ends (us) | last bucket ends (us) | "
          "collectives (us) | exposed (us) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            d = os.path.join(models, name)
            if not os.path.exists(os.path.join(d, "model.onnx")):
                continue
            with open(os.path.join(d, "params.txt")) as f:
                params = ",".join(f.read().split())
            step = os.path.join(tmp, f"{name}.kir")
            run([kiln, "opt", os.path.join(d, "model.onnx"), "--passes=training-step,default",
                 f"--replicas={replicas[0]}", f"--params={params}", "-o", step])
            for strategy in STRATEGIES:
                explain = run([kiln, "compile", step, "--target=cuda", f"--buckets={strategy}", "-o",
                               os.path.join(tmp, f"{name}.cuda"), "--explain-placement"])
                buckets = re.findall(r"bucket \d+: \d+ tensors, (\d+) bytes, after task -?\d+, before [^,]+, "
                                     r"estimated ([\d.]+)-([\d.]+) us", explain)
                total = sum(int(b) for b, _, _ in buckets)
                busy = sum(float(e) - float(s) for _, s, e in buckets)
                last = max(float(e) for _, _, e in buckets)
                compute = float(re.search(r"compute tasks end at ([\d.]+) us", explain).group(1))
                exposed = max(0.0, last - compute)
                print(f"| {name} | {strategy} | {len(buckets)} | {total:,} | {compute:,.1f} | {last:,.1f} | "
                      f"{busy:,.1f} | {exposed:,.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
