#!/usr/bin/python3
"""The exported PyTorch models on the npusim target: compile, simulate, compare.

For each model of scripts/export_models.py this compiles it for npusim, runs
it on the SystemC model (functional, so outputs are checked against
PyTorch's), runs it again with --batches=8, and prints one Markdown table
row: compile time, tasks per engine, simulated cycles and the code
generators' estimate, images per second at the machine's clock, pipelined
throughput against the max(compute, transfer) bound, device memory, and the
largest relative error against PyTorch.

usage: benchmarks/npusim_models.py KILN MODELS_DIR [NAME ...]
  KILN        the kiln binary (build/tools/kiln/kiln)
  MODELS_DIR  the output directory of scripts/export_models.py
"""
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return p.stdout


def exported(models, names):
    """(name, directory) of each model named (all of MODELS_DIR when none) that was exported."""
    for name in names or sorted(os.listdir(models)):
        d = os.path.join(models, name)
        if os.path.exists(os.path.join(d, "model.onnx")):
            yield name, d


def feed(d):
    """A model directory's input names and the `kiln run --input` arguments for them."""
    inputs = [l.strip() for l in open(os.path.join(d, "inputs.txt")) if l.strip()]
    args = []
    for i, inp in enumerate(inputs):
        args += ["--input", f"{inp}={os.path.join(d, f'input_{i}.npy')}"]
    return inputs, args


def max_rel_error(d, out):
    """The largest |got - want| / max(1, |want|) of the outputs in `out` against `d`'s expected_*.npy."""
    err = 0.0
    for i, f in enumerate(sorted(x for x in os.listdir(d) if x.startswith("expected_"))):
        want = np.load(os.path.join(d, f))
        got = [np.load(os.path.join(out, g)) for g in sorted(os.listdir(out))][i]
        err = max(err, float(np.max(np.abs(got.astype(np.float64) - want) / np.maximum(1, np.abs(want)))))
    return err


def max_gradient_error(wants, gots):
    """The largest max |got - want| / max |want| over pairs of gradients. A gradient that is zero but for
    rounding (a conv bias under a training-mode BatchNorm, which subtracts the batch mean) is measured
    against a thousandth of the largest gradient instead."""
    wants = [np.asarray(w, dtype=np.float64) for w in wants]
    largest = max(float(np.max(np.abs(w))) for w in wants)
    err = 0.0
    for want, got in zip(wants, gots):
        scale = max(float(np.max(np.abs(want))), 1e-3 * largest)
        err = max(err, float(np.max(np.abs(np.asarray(got, dtype=np.float64) - want))) / scale)
    return err


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    kiln, models = sys.argv[1], sys.argv[2]
    print("| model | compile s | cube / vector / aicpu / view tasks | cycles | estimated (kernels) | "
          "images/s at 1 GHz | --batches=8: % of max(compute, transfer) | device memory (no reuse) | max rel. error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name, d in exported(models, sys.argv[3:]):
            art = os.path.join(tmp, name + ".kiln")
            t0 = time.time()
            explain = run([kiln, "compile", os.path.join(d, "model.onnx"), "--target=npusim", "-o", art,
                           "--explain-placement"])
            compile_s = time.time() - t0
            engines = dict(re.findall(r"^\s+(\w+)\s+(\d+) tasks", explain, re.M))
            inputs, args = feed(d)
            out = os.path.join(tmp, name + "_out")
            report = run([kiln, "run", art, *args, "--output-dir", out, "--report"])
            total = float(re.search(r"^total: (\d+) cycles", report, re.M).group(1))
            est = float(re.search(r"estimate of the kernels: (\d+) cycles", report).group(1))
            mem = re.search(r"device memory: (\d+) B activations \((\d+) B without reuse\)", report)
            err = max_rel_error(d, out)
            batched = run([kiln, "run", art, *args, "--batches=8", "--report", "--timing-only"])
            pipe = re.search(r"([\d.]+)% of the bound's throughput", batched)
            batch = np.load(os.path.join(d, "input_0.npy")).shape[0] if inputs else 1
            print(f"| {name} | {compile_s:.2f} | {engines.get('cube', 0)} / {engines.get('vector', 0)} / "
                  f"{engines.get('aicpu', 0)} / {engines.get('view', 0)} | {total:,.0f} | {est:,.0f} | "
                  f"{batch * 1e9 / total:,.0f} | {pipe.group(1) if pipe else '-'}% | "
                  f"{int(mem.group(1)):,} ({int(mem.group(2)):,}) | {err:.1e} |", flush=True)


if __name__ == "__main__":
    main()
