#!/usr/bin/python3
"""Training loops on npusim: the loop on the device against a loop from the host.

For each model of scripts/export_training_models.py this makes an Adam
training step whose parameters and optimizer state are inputs (`kiln opt
--passes=training-step,default --state=inputs`, with the "adam" run of the
model's optimizers.txt), compiles it for npusim, and prints one Markdown
table row:

- host loop: the cycles of one step run alone (what a loop from the host
  pays per step: every parameter and moment crosses PCIe both ways);
- device loop: the cycles per step of `kiln run --steps=8` (the loop sunk
  onto the device: the variables stay in HBM, the data of the next step
  crosses PCIe while this one computes);
- the same two without the P.grad outputs (pruned with --outputs);
- the largest relative error of the parameters after 3 steps on the device
  against torch.optim.Adam's after 3 steps (max |got - want| / max |want|
  over each parameter).

usage: benchmarks/npusim_training_loop.py KILN MODELS_DIR [NAME ...] [--loss-scale=S] [--precision=P]
  KILN          the kiln binary (build/tools/kiln/kiln)
  MODELS_DIR    the output directory of scripts/export_training_models.py
  --loss-scale  passed to `kiln opt` (training-step's loss scaling)
  --precision   passed to `kiln compile` (fp32, fp16, bf16, mixed)
"""
import os
import re
import sys
import tempfile

import numpy as np

from npusim_models import exported, feed, run

STEPS = 8


def total_cycles(report):
    return int(re.search(r"^total: (\d+) cycles", report, re.M).group(1))


OPT_FLAGS = [a for a in sys.argv[3:] if a.startswith("--loss-scale")]
COMPILE_FLAGS = [a for a in sys.argv[3:] if a.startswith("--precision")]


def step_graph(kiln, d, params, flags, out, drop_grads):
    run([kiln, "opt", os.path.join(d, "model.onnx"), "--passes=training-step,default", "--state=inputs",
         "--params=" + ",".join(params), *flags, *OPT_FLAGS, "-o", out])
    if not drop_grads:
        return out
    text = open(out).read()
    outputs = [o.strip().lstrip("%").strip('"') for o in re.findall(r"^  return (.*)$", text, re.M)[-1].split(",")]
    kept = [o for o in outputs if not o.endswith(".grad")]
    pruned = out.replace(".kir", "_pruned.kir")
    run([kiln, "opt", out, "--passes=prune", "--outputs=" + ",".join(kept), "-o", pruned])
    return pruned


def per_step(kiln, graph, args, tmp, tag):
    art = os.path.join(tmp, tag + ".kiln")
    run([kiln, "compile", graph, "--target=npusim", "-o", art, *COMPILE_FLAGS])
    one = total_cycles(run([kiln, "run", art, *args, "--report"]))
    loop = total_cycles(run([kiln, "run", art, *args, "--report", f"--steps={STEPS}"]))
    return art, one, loop / STEPS


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    kiln, models = sys.argv[1], sys.argv[2]
    print("| model | variables | host loop (cycles/step) | device loop | speedup | without P.grad: host | device "
          "| speedup | max rel. error after 3 Adam steps vs torch.optim |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name, d in exported(models, [a for a in sys.argv[3:] if not a.startswith("--")]):
            # Models too large for the export's torch.optim runs: Adam at lr 0.01, no reference.
            opt_file = os.path.join(d, "optimizers.txt")
            runs = {l.split()[0]: l.split() for l in open(opt_file) if l.strip()} if os.path.exists(opt_file) else {}
            flags = ["--" + f for f in runs["adam"][2:]] if "adam" in runs else ["--optimizer=adam", "--learning-rate=0.01"]
            _, args = feed(d)
            params = [l.strip() for l in open(os.path.join(d, "params.txt")) if l.strip()]
            full = step_graph(kiln, d, params, flags, os.path.join(tmp, name + ".kir"), False)
            pruned = step_graph(kiln, d, params, flags, os.path.join(tmp, name + ".kir"), True)
            art, host, device = per_step(kiln, full, args, tmp, name)
            _, host_p, device_p = per_step(kiln, pruned, args, tmp, name + "_pruned")
            out = os.path.join(tmp, name + "_out")
            run([kiln, "run", art, *args, "--steps=3", "--output-dir", out])
            err, variables = 0.0, 0
            for i, p in enumerate(params):
                got = np.load(os.path.join(out, re.sub(r"[^A-Za-z0-9_.-]", "_", p) + ".next.npy"))
                variables += 3 * got.nbytes  # the parameter and its two moments
                if "adam" in runs:
                    want = np.load(os.path.join(d, f"adam_{i}.npy")).astype(np.float64)
                    err = max(err, float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)))
            print(f"| {name} | {variables / (1 << 20):.2f} MiB | {host:,} | {device:,.0f} | {host / device:.2f}x | "
                  f"{host_p:,} | {device_p:,.0f} | {host_p / device_p:.2f}x | "
                  f"{f'{err:.1e}' if 'adam' in runs else '(no torch.optim run)'} |", flush=True)


if __name__ == "__main__":
    main()
