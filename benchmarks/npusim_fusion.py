#!/usr/bin/python3
"""What fusion buys on npusim: each graph with its fusion groups and without.

For each exported model (scripts/export_models.py) and three small graphs of
memory-bound groups written here (SiLU with a residual and a bias row; a
residual Add with the LayerNormalization after it, both results written;
a scale, an f16 round trip and a Tanh), this compiles the graph for npusim
twice, as `kiln compile` does by default and with `--fusion=false` (every op
a kernel of its own), runs both on the SystemC model (timing only) and
prints one Markdown table row: the tasks and the simulated kernel cycles of
each, and their ratio. Total cycles add the PCIe transfers, which fusion
does not change; kernel cycles are the report's per-engine sums.

usage: benchmarks/npusim_fusion.py KILN MODELS_DIR [--precision=fp16] [NAME ...]
  KILN        the kiln binary (build/tools/kiln/kiln)
  MODELS_DIR  the output directory of scripts/export_models.py
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

GROUPS = {
    "silu_residual_bias": ("""graph @g(%x: f32[4,64,256], %r: f32[4,64,256], %b: f32[256]) {
  %s = Sigmoid(%x)
  %m = Mul(%x, %s)
  %a = Add(%m, %r)
  %y = Add(%a, %b)
  return %y
}
""", {"x": (4, 64, 256), "r": (4, 64, 256), "b": (256,)}),
    "add_layernorm": ("""graph @g(%x: f32[64,256], %r: f32[64,256], %w: f32[256], %bb: f32[256]) {
  %a = Add(%x, %r)
  %y = LayerNormalization(%a, %w, %bb) {axis = -1, epsilon = 1e-05}
  return %y, %a
}
""", {"x": (64, 256), "r": (64, 256), "w": (256,), "bb": (256,)}),
    "scale_round_tanh": ("""graph @g(%x: f32[64,160], %k: f32[1]) {
  %three = const f32[] dense [3.0]
  %e = Mul(%x, %k)
  %e16 = Cast(%e) {to = 10}
  %e32 = Cast(%e16) {to = 1}
  %q = Div(%e32, %three)
  %y = Tanh(%q)
  return %y
}
""", {"x": (64, 160), "k": (1,)}),
}


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return p.stdout


def measure(kiln, model, inputs, tmp, tag, flags):
    art = os.path.join(tmp, tag + ".kiln")
    run([kiln, "compile", model, "--target=npusim", "-o", art, *flags])
    args = []
    for name, path in inputs:
        args += ["--input", f"{name}={path}"]
    report = run([kiln, "run", art, *args, "--report", "--timing-only"])
    engines = re.findall(r"^\s+(\w+)\s+(\d+) tasks\s+(\d+) kernel cycles", report, re.M)
    tasks = sum(int(t) for e, t, _ in engines if e != "view")
    cycles = sum(int(c) for _, _, c in engines)
    return tasks, cycles


def main():
    argv = [a for a in sys.argv[1:] if not a.startswith("--precision=")]
    precision = [a for a in sys.argv[1:] if a.startswith("--precision=")] or ["--precision=fp32"]
    if len(argv) < 2:
        sys.exit(__doc__)
    kiln, models = argv[0], argv[1]
    names = argv[2:]
    print(f"| graph ({precision[0][12:]}) | tasks fused / unfused | kernel cycles fused | unfused | unfused / fused |")
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        work = []
        rng = np.random.default_rng(0)
        for name, (text, shapes) in GROUPS.items():
            if names and name not in names:
                continue
            path = os.path.join(tmp, name + ".kir")
            with open(path, "w") as f:
                f.write(text)
            inputs = []
            for inp, shape in shapes.items():
                p = os.path.join(tmp, f"{name}.{inp}.npy")
                np.save(p, rng.standard_normal(shape).astype(np.float32))
                inputs.append((inp, p))
            work.append((name, path, inputs))
        for name in sorted(os.listdir(models)) if os.path.isdir(models) else []:
            d = os.path.join(models, name)
            if (names and name not in names) or not os.path.exists(os.path.join(d, "model.onnx")):
                continue
            listed = [l.strip() for l in open(os.path.join(d, "inputs.txt")) if l.strip()]
            work.append((name, os.path.join(d, "model.onnx"),
                         [(inp, os.path.join(d, f"input_{i}.npy")) for i, inp in enumerate(listed)]))
        for name, path, inputs in work:
            ft, fc = measure(kiln, path, inputs, tmp, name, precision)
            ut, uc = measure(kiln, path, inputs, tmp, name + ".unfused", [*precision, "--fusion=false"])
            print(f"| {name} | {ft} / {ut} | {fc:,} | {uc:,} | {uc / fc:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
