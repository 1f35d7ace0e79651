#!/usr/bin/python3
"""What the L2 changes: models on npusim with and without it, side by side.

For a 1024^3 and a 2048^3 fp16 MatMul (one ONNX MatMul with the weight as
an initializer, written here) and the exported models given (default
resnet50 and bert_encoder), this compiles each for npusim on the
ascend910-like machine with its 32 MiB L2 and on the same machine with
`chip { l2_size_mib: 0 }` (the model as it was before the L2: every DMA
byte to HBM), runs each once timing-only, and prints one Markdown row per
model: the kernels' cycles (the tasks' sum), the HBM bytes read and
written, and the L2's hit rate.

usage: benchmarks/npusim_l2.py KILN MODELS_DIR [NAME ...] [--precision=fp32]
"""
import os
import re
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from npusim_models import exported, feed, run

TOTAL = re.compile(r"^total: (\d+) cycles.*HBM read (\d+) B, write (\d+) B", re.M)
HIT = re.compile(r"^L2 \d+ MiB: ([0-9.]+)% of reads hit", re.M)


def gemm(tmp, n):
    w = numpy_helper.from_array((np.random.RandomState(0).randn(n, n) * 0.01).astype(np.float16), "W")
    g = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"])], f"gemm{n}",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT16, [n, n])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT16, [n, n])], [w])
    path = os.path.join(tmp, f"gemm{n}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    x = os.path.join(tmp, f"x{n}.npy")
    np.save(x, (np.random.RandomState(1).randn(n, n) * 0.1).astype(np.float16))
    return path, [f"--input=X={x}"]


def kernel_cycles(tasks_csv):
    lines = open(tasks_csv).read().splitlines()
    header = lines[0].split(",")
    c = header.index("cycles")
    return sum(float(l.split(",")[c]) for l in lines[1:] if not l.startswith("total,"))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    precision = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--precision=")), "fp32")
    if len(args) < 2:
        sys.exit(__doc__)
    kiln, models, names = args[0], args[1], args[2:] or ["resnet50", "bert_encoder"]
    print("| model | kernel cycles, no L2 | kernel cycles, L2 | ratio | HBM read, no L2 | HBM read, L2 | "
          "HBM write, no L2 | HBM write, L2 | L2 hit rate |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        no_l2 = os.path.join(tmp, "no_l2.textproto")
        with open(no_l2, "w") as f:
            f.write("chip { l2_size_mib: 0 }\n")
        cases = [(f"MatMul {n}^3 fp16", *gemm(tmp, n), "fp32") for n in (1024, 2048)]
        cases += [(name, os.path.join(d, "model.onnx"), feed(d)[1], precision) for name, d in exported(models, names)]
        for name, model, inputs, prec in cases:
            row = []
            for machine in ([f"--machine={no_l2}"], []):
                out = os.path.join(tmp, "m.kiln")
                csv = os.path.join(tmp, "tasks.csv")
                run([kiln, "compile", model, "--target=npusim", f"--precision={prec}", "-o", out] + machine)
                text = run([kiln, "run", out, "--timing-only", "--report", f"--report-tasks={csv}"] + inputs)
                _, read, write = TOTAL.search(text).groups()
                hit = HIT.search(text)
                row.append((kernel_cycles(csv), int(read), int(write), hit.group(1) + "%" if hit else "-"))
            (c0, r0, w0, _), (c1, r1, w1, h1) = row
            print(f"| {name} | {c0:,.0f} | {c1:,.0f} | {c1 / c0:.3f} | {r0:,} | {r1:,} | {w0:,} | {w1:,} | {h1} |")


if __name__ == "__main__":
    main()
