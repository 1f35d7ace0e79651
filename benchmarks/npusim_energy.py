#!/usr/bin/python3
"""The exported PyTorch models' energy on npusim, by precision.

For each model of scripts/export_models.py and each precision (fp32, fp16),
this compiles the model for npusim, runs it once on the SystemC model
(timing only) and once with --batches=8, and prints one Markdown table row:
the simulated cycles of one inference, its energy (the kernels' actions,
the static power over its time, the host link's bytes), its average power,
and the energy per inference when 8 batches stream through the chip (where
the static power is shared by overlapping batches). The figures are the
machine's `energy` block (docs/npu.md, "Energy").

usage: benchmarks/npusim_energy.py KILN MODELS_DIR [NAME ...] [--machine=FILE]
"""
import os
import re
import sys
import tempfile

from npusim_models import exported, feed, run

ENERGY = re.compile(r"^energy: ([0-9.]+) uJ \(kernels ([0-9.]+), static ([0-9.]+)(?:, host link ([0-9.]+))?"
                    r".*average power ([0-9.]+) W$", re.M)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--machine=")]
    machine = [a for a in sys.argv[1:] if a.startswith("--machine=")]
    if len(args) < 2:
        sys.exit(__doc__)
    kiln, models, names = args[0], args[1], args[2:]
    print("| model | precision | cycles | energy (uJ) | kernels (uJ) | static (uJ) | host link (uJ) | "
          "average power (W) | per inference, 8 batches (uJ) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, d in exported(models, names):
            _, inputs = feed(d)
            for precision in ["fp32", "fp16"]:
                out = os.path.join(tmp, f"{name}.{precision}.kiln")
                run([kiln, "compile", os.path.join(d, "model.onnx"), "--target=npusim", f"--precision={precision}",
                     "-o", out] + machine)
                one = run([kiln, "run", out, "--timing-only", "--report"] + inputs)
                cycles = int(re.search(r"^total: (\d+) cycles", one, re.M).group(1))
                total, kernels, static, link, watts = ENERGY.search(one).groups()
                eight = run([kiln, "run", out, "--timing-only", "--report", "--batches=8"] + inputs)
                per = float(re.search(r"^energy per batch: ([0-9.]+) uJ", eight, re.M).group(1))
                print(f"| {name} | {precision} | {cycles:,} | {float(total):,.1f} | {float(kernels):,.1f} | "
                      f"{float(static):,.1f} | {float(link or 0):,.1f} | {float(watts):.1f} | {per:,.1f} |")


if __name__ == "__main__":
    main()
