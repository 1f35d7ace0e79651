#!/usr/bin/python3
"""Fused attention on npusim against the same attention split back, side by side.

For each sequence length and head size, one kiln.Attention over f16 (or
--dtype=f32) Q, K, V [1, HEADS, S, D] (a KIR model written here; causal with
--causal) is
compiled for npusim twice, with the fused kernel (the default) and with
`--fused-attention=false` (MatMul, Softmax and MatMul, the scores through
HBM), and each runs once timing-only. One Markdown row each: the kernels'
cycles (the tasks' sum) and HBM bytes (read + written) of both, the ratio,
and the fused kernel against its cube bound (its multiply-adds at the
whole chip's fp16 rate) and against its vector bound (the vector unit's busy
cycles spread over the cores the kernel used).

With --overlap, instead: the fused kernel of S = 1024, D = 128 runs once
with a trace, and the script reads the trace's AI core 0: how long its cube
and its vector unit computed, and for how much of the cube's time the
vector unit computed too.

usage: benchmarks/npusim_attention.py KILN [--heads=16] [--seqs=128,...] [--dims=64,128] [--causal]
                                       [--dtype=f16|f32] [--overlap]
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

CORES = 32
MACS_PER_CYCLE = 16 * 16 * 16  # one AI core's cube, fp16 (ascend910-like)


def flag(name, default):
    return next((a.split("=", 1)[1] for a in sys.argv[2:] if a.startswith(f"--{name}=")), default)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def tasks(csv):
    lines = open(csv).read().splitlines()
    h = lines[0].split(",")
    rows = [dict(zip(h, l.split(","))) for l in lines[1:] if not l.startswith("total,")]
    cycles = sum(float(r["cycles"]) for r in rows)
    hbm = sum(float(r["hbm_read_bytes"] or 0) + float(r["hbm_write_bytes"] or 0) for r in rows)
    return cycles, hbm


def vector_busy(pipes_csv):
    lines = open(pipes_csv).read().splitlines()
    h = lines[0].split(",")
    return sum(float(dict(zip(h, l.split(",")))["busy_cycles"]) for l in lines[1:]
               if dict(zip(h, l.split(",")))["pipe"] == "VECTOR")


def attention_model(tmp, heads, s, d, causal, dtype="f16"):
    """A KIR model of one attention over [1, heads, s, d] of `dtype`, and its --input flags."""
    shape = f"{dtype}[1,{heads},{s},{d}]"
    kir = os.path.join(tmp, "a.kir")
    with open(kir, "w") as f:
        f.write(f"graph @main(%q: {shape}, %k: {shape}, %v: {shape}) {{\n"
                f"  %y = kiln.Attention(%q, %k, %v){' {causal = 1}' if causal else ''} : {shape}\n"
                f"  return %y\n}}\n")
    ins = []
    for i, n in enumerate("qkv"):
        path = os.path.join(tmp, f"{n}.npy")
        np.save(path, np.random.RandomState(i).randn(1, heads, s, d).astype(np.float16 if dtype == "f16" else np.float32))
        ins.append(f"--input={n}={path}")
    return kir, ins


def busy_intervals(events, names, track):
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("ph") == "X" and names.get((e["pid"], e["tid"])) == track
                   and not e["name"].startswith(("set_flag", "wait_flag", "pipe_barrier")))
    merged = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def overlap(kiln, tmp, heads):
    s, d = 1024, 128
    kir, ins = attention_model(tmp, heads, s, d, False)
    art, trace = os.path.join(tmp, "a.kiln"), os.path.join(tmp, "a.json")
    run([kiln, "compile", kir, "--target=npusim", "-o", art])
    run([kiln, "run", art, "--timing-only", f"--trace={trace}"] + ins)
    data = json.load(open(trace))
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    pid = next(p for (p, t), n in names.items() if n == "Cube")
    names = {k: v for k, v in names.items() if k[0] == pid}
    cube, vec = busy_intervals(events, names, "Cube"), busy_intervals(events, names, "VECTOR")
    both = 0.0
    j = 0
    for a, b in cube:
        while j < len(vec) and vec[j][1] <= a:
            j += 1
        k = j
        while k < len(vec) and vec[k][0] < b:
            both += min(b, vec[k][1]) - max(a, vec[k][0])
            k += 1
    total_cube = sum(b - a for a, b in cube)
    total_vec = sum(b - a for a, b in vec)
    us = 1000  # the trace's microseconds, in cycles at 1 GHz
    print(f"S={s} D={d}, AI core 0: cube computing {total_cube * us:,.0f} cycles, vector {total_vec * us:,.0f}; "
          f"{both / total_cube:.0%} of the cube's time the vector unit computed too")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if "--overlap" in sys.argv:
        with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
            overlap(sys.argv[1], tmp, int(flag("heads", "16")))
        return
    kiln = sys.argv[1]
    heads = int(flag("heads", "16"))
    seqs = [int(s) for s in flag("seqs", "128,256,512,1024,2048,4096").split(",")]
    dims = [int(d) for d in flag("dims", "64,128").split(",")]
    causal = "--causal" in sys.argv
    dtype = flag("dtype", "f16")
    macs_per_cycle = MACS_PER_CYCLE / (2 if dtype == "f32" else 1)  # the cube's fp32 rate is half its fp16
    print(f"| S | D | split cycles | fused cycles | speed-up | split HBM MB | fused HBM MB | fused / cube bound | "
          f"fused / vector bound |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        for d in dims:
            for s in seqs:
                kir, ins = attention_model(tmp, heads, s, d, causal, dtype)
                got = {}
                for mode in ("split", "fused"):
                    art = os.path.join(tmp, f"{mode}.kiln")
                    run([kiln, "compile", kir, "--target=npusim", "-o", art] +
                        (["--fused-attention=false"] if mode == "split" else []))
                    csv = os.path.join(tmp, f"{mode}.csv")
                    pipes = os.path.join(tmp, f"{mode}.pipes.csv")
                    run([kiln, "run", art, "--timing-only", f"--report-tasks={csv}", f"--report-csv={pipes}"] + ins)
                    got[mode] = tasks(csv) + (pipes,)
                macs = 2 * heads * s * s * d * (0.5 if causal else 1)
                cube_bound = macs / (CORES * macs_per_cycle)
                # The fused kernel's vector busy cycles (summed over its blocks) spread over the cores.
                blocks = min(CORES, heads * s // 64)
                vector = vector_busy(got["fused"][2]) / blocks
                fused_c, split_c = got["fused"][0], got["split"][0]
                vec = f"{fused_c / vector:.2f}"
                print(f"| {s} | {d} | {split_c:,.0f} | {fused_c:,.0f} | {split_c / fused_c:.2f}x | "
                      f"{got['split'][1] / 1e6:.1f} | {got['fused'][1] / 1e6:.1f} | {fused_c / cube_bound:.2f} | {vec} |",
                      flush=True)


if __name__ == "__main__":
    main()
