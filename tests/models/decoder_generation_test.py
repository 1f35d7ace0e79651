#!/usr/bin/python3
"""Greedy generation with a static KV cache, token for token against PyTorch.

usage: decoder_generation_test.py KILN DECODER_DIR WORK_DIR TARGET [--decode-attention]

DECODER_DIR is one decoder exported by scripts/export_decoders.py. The
prefill step runs the prompt; the decode step then runs as a loop
(`kiln run --steps`), each step's token.next, pos.next and caches feeding
the next. Every step's token (the `generated` output the loop prints) must
be PyTorch's. On npusim the caches are donated: each step writes its new
position in place, so the loop copies nothing but the token and the
position from step to step. With --decode-attention the decode step must
run npusim's decode attention kernel, and its timing-only loop must take the
functional loop's branches.
"""
import os
import re
import subprocess
import sys

import numpy as np


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAILED ({p.returncode}): {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def main():
    kiln, d, work, target = sys.argv[1:5]
    decode_attention = sys.argv[5:] == ["--decode-attention"]
    if sys.argv[5:] and not decode_attention:
        sys.exit(f"unknown arguments {sys.argv[5:]} (the only option is --decode-attention)")
    os.makedirs(work, exist_ok=True)
    cfg = dict(line.strip().split("=") for line in open(os.path.join(d, "config.txt")))
    layers, steps = int(cfg["layers"]), int(cfg["steps"])
    expected = np.load(os.path.join(d, "tokens.npy"))
    caches = [f"{kv}_{l}" for l in range(layers) for kv in ("k", "v")]
    arts = {}
    for step in ("prefill", "decode"):
        arts[step] = os.path.join(work, f"{step}.{target}.kiln")
        run([kiln, "compile", os.path.join(d, f"{step}.onnx"), f"--target={target}", "-o", arts[step]])
    # The prompt.
    pre = os.path.join(work, f"prefill.{target}")
    cache0 = os.path.join(d, "cache0.npy")
    run([kiln, "run", arts["prefill"], f"--input=token={os.path.join(d, 'prompt.npy')}",
         f"--input=pos={os.path.join(d, 'pos0.npy')}"] + [f"--input={c}={cache0}" for c in caches] +
        [f"--output-dir={pre}"])
    got = [int(np.load(os.path.join(pre, "generated.npy")).reshape(-1)[0])]
    # The rest, one token a step.
    report = ["--report"] if target == "npusim" else []
    out = run([kiln, "run", arts["decode"], f"--steps={steps - 1}"] + report +
              [f"--input=token={os.path.join(pre, 'token.next.npy')}",
               f"--input=pos={os.path.join(pre, 'pos.next.npy')}"] +
              [f"--input={c}={os.path.join(pre, c + '.next.npy')}" for c in caches])
    got += [int(float(m)) for m in re.findall(r"^step \d+: generated = (\S+)", out, re.M)]
    want = expected.reshape(-1).tolist()
    if got != want:
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        sys.exit(f"{target}: tokens {got}\n  PyTorch {want}\n  first difference at token {first}")
    if target == "npusim":
        # The caches never cross HBM from step to step: only the token and the position are copied.
        m = re.search(r"D2D (\d+) B", out)
        copied = int(m.group(1)) if m else 0
        if copied > 16 * (steps - 2):
            sys.exit(f"npusim: {copied} B copied within HBM over {steps - 1} steps; the caches should be donated\n{out}")
        if "computed in place (donated" not in out:
            sys.exit(f"npusim: the report does not say the caches were donated\n{out}")
        # A timing-only loop takes the functional loop's branches: the decode
        # attention reads the mask to find the live tiles, so it and the
        # tasks that make the mask compute in timing-only runs too, and
        # nothing else does.
        explain = run([kiln, "compile", os.path.join(d, "decode.onnx"), "--target=npusim", "-o", arts["decode"],
                       "--explain-placement"])
        lines = explain.splitlines()
        decode = [l for l in lines if "[decode attention:" in l]
        if decode_attention and not decode:
            sys.exit(f"npusim: the decode step runs no decode attention kernel\n{explain}")
        steered = [l for l in lines if "its control flow reads its mask's values" in l]
        feeding = [l for l in lines if "a later kernel's control flow reads its values" in l]
        if steered != decode or (decode and not feeding) or (feeding and not decode):
            sys.exit(f"npusim: the decode attentions and their masks' producers are not all marked as computed "
                     f"in timing-only runs\n{explain}")
        if any("MatMul" in l.split("=")[1] for l in feeding):
            sys.exit(f"npusim: a MatMul is marked as computed in timing-only runs\n{explain}")
        timed = run([kiln, "run", arts["decode"], f"--steps={steps - 1}", "--report", "--timing-only"] +
                    [f"--input=token={os.path.join(pre, 'token.next.npy')}",
                     f"--input=pos={os.path.join(pre, 'pos.next.npy')}"] +
                    [f"--input={c}={os.path.join(pre, c + '.next.npy')}" for c in caches])
        per_step = [float(re.search(r"^per step: (\d+) cycles", t, re.M).group(1)) for t in (out, timed)]
        if abs(per_step[1] - per_step[0]) > 0.01 * per_step[0]:
            sys.exit(f"npusim: a timing-only step takes {per_step[1]:.0f} cycles, a functional one {per_step[0]:.0f}")
    print(f"{target}: {len(got)} tokens as PyTorch's: {got}")


if __name__ == "__main__":
    main()
