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

With --run=R (a machine with R GPUs and nvcc) it also runs each model's
step on R ranks: `kiln run PACKAGE` on inputs of R shards (rank r's input
is the exported input plus r/100), and checks every output but the loss
against the mean of the reference executor's one-rank steps on the shards
(`kiln run STEP.kir`), printing the largest difference.

usage: benchmarks/cuda_data_parallel.py KILN TRAINING_MODELS_DIR [--replicas=N] [--run=R] [NAME ...]
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


def run_ranks(kiln, step, d, ranks, tmp):
    """The step's package on `ranks` GPUs against the reference's mean; each output's largest difference."""
    import numpy as np
    tmp = tempfile.mkdtemp(dir=tmp)  # nothing of another model's run is read
    with open(os.path.join(d, "inputs.txt")) as f:
        names = f.read().split()
    base = [np.load(os.path.join(d, f"input_{i}.npy")) for i in range(len(names))]
    shards = [[x + (r / 100 if x.dtype.kind == "f" else 0) for x in base] for r in range(ranks)]
    want = None
    for r, shard in enumerate(shards):
        out = os.path.join(tmp, f"ref{r}")
        args = []
        for n, x in zip(names, shard):
            path = os.path.join(tmp, f"{n}_{r}.npy")
            np.save(path, x)
            args.append(f"--input={n}={path}")
        run([kiln, "run", step, f"--output-dir={out}"] + args)
        got = {f: np.load(os.path.join(out, f)) for f in sorted(os.listdir(out))}
        want = got if want is None else {f: want[f] + got[f] for f in want}
    want = {f: v / ranks for f, v in want.items()}
    pkg = os.path.join(tmp, "ranks.cuda")
    run([kiln, "compile", step, "--target=cuda", "-o", pkg])
    args = []
    for i, n in enumerate(names):
        path = os.path.join(tmp, f"{n}_all.npy")
        np.save(path, np.concatenate([s[i] for s in shards]))
        args.append(f"--input={n}={path}")
    out = os.path.join(tmp, "gpu")
    run([kiln, "run", pkg, f"--output-dir={out}"] + args)
    diffs = {}
    for f, v in want.items():
        if f.startswith("loss"):
            continue  # rank 0's own
        diffs[f[:-4]] = float(np.max(np.abs(np.load(os.path.join(out, f)).astype(np.float64) - v)))
    return diffs


def main():
    runs = [int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("--run=")]
    args = [a for a in sys.argv[1:] if not a.startswith("--replicas=") and not a.startswith("--run=")]
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
            if runs:
                diffs = run_ranks(kiln, step, d, runs[0], tmp)
                worst = max(diffs, key=diffs.get)
                print(f"{name}: {runs[0]} ranks on the GPU, largest difference from the reference's mean "
                      f"{diffs[worst]:.3g} ({worst})", flush=True)
                if diffs[worst] > 1e-2:
                    print("  " + ", ".join(f"{k} {v:.3g}" for k, v in sorted(diffs.items(), key=lambda kv: -kv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
