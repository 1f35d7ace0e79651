#!/usr/bin/python3
"""The exported PyTorch models on npusim under the machine's roofs.

For each model of scripts/export_models.py and each precision given (fp32
and fp16 by default), this compiles the model for npusim, runs it
timing-only with `kiln run --roofline=FILE.csv`, and prints one Markdown
table row: the kernels' cycles, the share of them spent in kernels limited
by HBM, the cube and the vector unit, the cycle-weighted efficiency (the
roofline's lower bound over the cycles taken: 100% is a kernel on its
roof), the largest efficiency, and the longest kernel with its own. It
also checks the roofline's rule: no kernel beats its roofs.

usage: benchmarks/npusim_roofline.py KILN MODELS_DIR [NAME ...] [--precision=P,P]
  KILN        the kiln binary (build/tools/kiln/kiln)
  MODELS_DIR  the output directory of scripts/export_models.py
"""
import csv
import os
import sys
import tempfile

from npusim_models import exported, feed, run


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--precision=")]
    precisions = ["fp32", "fp16"]
    for a in sys.argv[1:]:
        if a.startswith("--precision="):
            precisions = a.split("=", 1)[1].split(",")
    if len(args) < 2:
        sys.exit(__doc__)
    kiln, models = args[0], args[1]
    print("| model | precision | kernels | kernel cycles | HBM-bound | cube-bound | vector-bound | "
          "efficiency (cycle-weighted) | best | longest kernel (efficiency) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name, d in exported(models, args[2:]):
            _, inputs = feed(d)
            for p in precisions:
                art = os.path.join(tmp, f"{name}.{p}.kiln")
                run([kiln, "compile", os.path.join(d, "model.onnx"), "--target=npusim", f"--precision={p}", "-o", art])
                table = os.path.join(tmp, f"{name}.{p}.csv")
                run([kiln, "run", art, *inputs, "--timing-only", f"--roofline={table}"])
                rows = list(csv.DictReader(open(table)))
                cycles = sum(float(r["cycles"]) for r in rows)
                by_limit = {"HBM": 0.0, "cube": 0.0, "vector": 0.0}
                weighted = 0.0
                for r in rows:
                    eff = float(r["efficiency"])
                    if eff > 1 + 1e-9:
                        sys.exit(f"{name} {p}: kernel {r['kernel']} beats its roofs ({eff:.4f})")
                    by_limit[r["limit"]] = by_limit.get(r["limit"], 0.0) + float(r["cycles"])
                    weighted += eff * float(r["cycles"])
                longest = max(rows, key=lambda r: float(r["cycles"]))
                best = max(float(r["efficiency"]) for r in rows)
                share = {k: f"{100 * v / cycles:.0f}%" for k, v in by_limit.items()}
                print(f"| {name} | {p} | {len(rows)} | {cycles:,.0f} | {share['HBM']} | {share['cube']} | "
                      f"{share['vector']} | {100 * weighted / cycles:.1f}% | {100 * best:.1f}% | "
                      f"`{longest['kernel']}` {float(longest['cycles']):,.0f} cycles ({100 * float(longest['efficiency']):.1f}%) |",
                      flush=True)


if __name__ == "__main__":
    main()
