#!/usr/bin/python3
"""The exported PyTorch models on npusim under each --precision, side by side.

For each model of scripts/export_models.py and each precision (fp32, fp16,
bf16, mixed, and whatever extra `kiln compile` flags are given after --),
this compiles the model for npusim, runs it on the SystemC model and prints
one Markdown table row: the simulated cycles, the ratio to fp32, the Cast
tasks in the artifact, and the largest relative error against PyTorch
(|got - want| / max(1, |want|)).

usage: benchmarks/npusim_precision.py KILN MODELS_DIR [NAME ...] [-- FLAG ...]
  KILN        the kiln binary (build/tools/kiln/kiln)
  MODELS_DIR  the output directory of scripts/export_models.py
"""
import os
import re
import sys
import tempfile

from npusim_models import exported, feed, max_rel_error, run

PRECISIONS = ["fp32", "fp16", "bf16", "mixed"]


def main():
    args = sys.argv[1:]
    extra = args[args.index("--") + 1:] if "--" in args else []
    args = args[:args.index("--")] if "--" in args else args
    if len(args) < 2:
        sys.exit(__doc__)
    kiln, models = args[0], args[1]
    print("| model | precision | cycles | vs fp32 | Cast tasks | max rel. error |")
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name, d in exported(models, args[2:]):
            _, inputs = feed(d)
            fp32 = None
            for p in PRECISIONS:
                art = os.path.join(tmp, f"{name}.{p}.kiln")
                flags = extra if p == "mixed" else []
                explain = run([kiln, "compile", os.path.join(d, "model.onnx"), "--target=npusim", f"--precision={p}",
                               "-o", art, "--explain-placement", *flags])
                casts = len(re.findall(r"^\S+ = Cast\s+->", explain, re.M))
                out = os.path.join(tmp, f"{name}.{p}.out")
                report = run([kiln, "run", art, *inputs, "--output-dir", out, "--report"])
                total = float(re.search(r"^total: (\d+) cycles", report, re.M).group(1))
                fp32 = fp32 or total
                err = max_rel_error(d, out)
                print(f"| {name} | {p}{' ' + ' '.join(flags) if flags else ''} | {total:,.0f} | {total / fp32:.2f} | "
                      f"{casts} | {err:.1e} |", flush=True)


if __name__ == "__main__":
    main()
