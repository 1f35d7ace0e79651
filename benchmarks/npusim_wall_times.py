#!/usr/bin/python3
"""Wall time of kiln's npusim compile and runs, two builds side by side.

    benchmarks/npusim_wall_times.py OLD_KILN NEW_KILN [MODELS_DIR] [--rounds=N]

Cases, each timed N times (default 5) with the two binaries alternated, the
median and the range printed as a Markdown table:

- `kiln compile MODELS_DIR/resnet50/model.onnx --target=npusim` (fp32);
- that artifact run `--timing-only` and functionally (`kiln run`);
- a single fp16 ONNX MatMul, [n, n] x [n, n] with the weight an initializer,
  n = 1024 and 2048, compiled once per binary and run timing-only and
  functionally; the timing-only runs are set against ONNXim's on this
  machine class as issue 41 states them (simple DRAM: 0.54 s and 2.58 s).

Wall time is the process's, from exec to exit (`time.perf_counter` around
the subprocess), so it counts loading the artifact and the simulator's
set-up as a user waits for them.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

ONNXIM_S = {1024: 0.54, 2048: 2.58}


def gemm_onnx(path, n):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.random.RandomState(0).randn(n, n).astype(np.float16), "W")
    g = helper.make_graph([helper.make_node("MatMul", ["A", "W"], ["Y"])], f"gemm_{n}",
                          [helper.make_tensor_value_info("A", TensorProto.FLOAT16, [n, n])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT16, [n, n])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    a = os.path.splitext(path)[0] + "_A.npy"
    np.save(a, np.random.RandomState(1).randn(n, n).astype(np.float16))
    return a


def timed(cmd):
    start = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return wall


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rounds = int(next((a.split("=")[1] for a in sys.argv[1:] if a.startswith("--rounds=")), "5"))
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    old, new = args[:2]
    models = args[2] if len(args) > 2 else "build/models"
    r50 = os.path.join(models, "resnet50")
    with tempfile.TemporaryDirectory() as tmp:
        gemms = {n: (os.path.join(tmp, f"gemm_{n}.onnx"), None) for n in (1024, 2048)}
        for n in gemms:
            gemms[n] = (gemms[n][0], gemm_onnx(gemms[n][0], n))
        times = {}

        def add(case, b, t):
            times.setdefault((case, b), []).append(t)

        for b, kiln in (("old", old), ("new", new)):  # the GEMMs' artifacts, once per binary
            for n, (onnx_path, _) in gemms.items():
                subprocess.run([kiln, "compile", onnx_path, "--target=npusim", "-o", os.path.join(tmp, f"g{n}_{b}.kiln")],
                               check=True, stdout=subprocess.DEVNULL)
        for _ in range(rounds):
            for b, kiln in (("old", old), ("new", new)):
                art = os.path.join(tmp, f"r50_{b}.kiln")
                if os.path.exists(art):
                    os.remove(art)
                add("ResNet-50 fp32 kiln compile", b, timed([kiln, "compile", os.path.join(r50, "model.onnx"),
                                                             "--target=npusim", "-o", art]))
                x = f"--input=input_0={os.path.join(r50, 'input_0.npy')}"
                add("ResNet-50 run --timing-only", b, timed([kiln, "run", art, "--timing-only", x]))
                add("ResNet-50 run (functional)", b, timed([kiln, "run", art, x, f"--output-dir={tmp}/o_{b}"]))
                for n, (_, a) in gemms.items():
                    g = os.path.join(tmp, f"g{n}_{b}.kiln")
                    add(f"{n}^3 fp16 MatMul --timing-only", b, timed([kiln, "run", g, "--timing-only", f"--input=A={a}"]))
                    add(f"{n}^3 fp16 MatMul (functional)", b,
                        timed([kiln, "run", g, f"--input=A={a}", f"--output-dir={tmp}/go_{b}"]))
    print(f"| case | before s, median ({rounds}; range) | after s | after/before | ONNXim s / after |")
    print("|---|---:|---:|---:|---:|")
    for case in dict.fromkeys(c for c, _ in times):
        o, n = times[(case, "old")], times[(case, "new")]
        mo, mn = statistics.median(o), statistics.median(n)
        size = int(case.split("^")[0]) if "MatMul --timing-only" in case else None
        onnxim = f"{ONNXIM_S[size] / mn:.1f}x" if size else ""
        print(f"| {case} | {mo:.3f} ({min(o):.3f}-{max(o):.3f}) | {mn:.3f} ({min(n):.3f}-{max(n):.3f}) | "
              f"{mn / mo:.2f} | {onnxim} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
