#!/usr/bin/python3
"""Training steps on the npusim target: the forward pass against the whole step.

For each model of scripts/export_training_models.py this compiles the loss
graph alone (forward) and the training step (`kiln opt
--passes=training-step,default`, then `kiln compile`) for npusim, runs both
on the SystemC model, and prints one Markdown table row: nodes and tasks per
engine of each, simulated cycles of each and their ratio, and the largest
relative error of the simulated gradients against PyTorch's
(torch.autograd.grad), as max |got - want| / max |want| over each gradient.

usage: benchmarks/npusim_training.py KILN MODELS_DIR [NAME ...]
  KILN        the kiln binary (build/tools/kiln/kiln)
  MODELS_DIR  the output directory of scripts/export_training_models.py
"""
import os
import re
import sys
import tempfile

import numpy as np

from npusim_models import exported, feed, max_gradient_error, run


def simulate(kiln, graph, args, tmp, tag):
    art = os.path.join(tmp, tag + ".kiln")
    explain = run([kiln, "compile", graph, "--target=npusim", "-o", art, "--explain-placement"])
    engines = dict(re.findall(r"^\s+(\w+)\s+(\d+) tasks", explain, re.M))
    out = os.path.join(tmp, tag + "_out")
    report = run([kiln, "run", art, *args, "--output-dir", out, "--report"])
    cycles = int(re.search(r"^total: (\d+) cycles", report, re.M).group(1))
    tasks = "/".join(engines.get(e, "0") for e in ("cube", "vector", "aicpu"))
    return cycles, tasks, out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    kiln, models = sys.argv[1], sys.argv[2]
    print("| model | parameters | forward: cube / vector / aicpu tasks | cycles | step: cube / vector / aicpu tasks "
          "| cycles | step / forward | max rel. error of the gradients vs PyTorch |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name, d in exported(models, sys.argv[3:]):
            _, args = feed(d)
            params = [l.strip() for l in open(os.path.join(d, "params.txt")) if l.strip()]
            fwd = os.path.join(tmp, name + "_fwd.kir")
            step = os.path.join(tmp, name + "_step.kir")
            run([kiln, "opt", os.path.join(d, "model.onnx"), "-o", fwd])
            run([kiln, "opt", os.path.join(d, "model.onnx"), "--passes=training-step,default",
                 "--params=" + ",".join(params), "-o", step])
            f_cycles, f_tasks, _ = simulate(kiln, fwd, args, tmp, name + "_fwd")
            s_cycles, s_tasks, out = simulate(kiln, step, args, tmp, name + "_step")
            err = max_gradient_error(
                [np.load(os.path.join(d, f"grad_{i}.npy")) for i in range(len(params))],
                [np.load(os.path.join(out, re.sub(r"[^A-Za-z0-9_.-]", "_", p) + ".grad.npy")) for p in params])
            print(f"| {name} | {len(params)} | {f_tasks} | {f_cycles:,} | {s_tasks} | {s_cycles:,} | "
                  f"{s_cycles / f_cycles:.2f}x | {err:.1e} |", flush=True)


if __name__ == "__main__":
    main()
