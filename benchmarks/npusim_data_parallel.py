#!/usr/bin/python3
"""Data-parallel training steps on the npusim target: AllReduce bucketing strategies.

For each model of scripts/export_training_models.py this makes the SGD step
(`kiln opt --passes=training-step,default`) once for one chip and once with
`--replicas=N`, compiles the data-parallel step for npusim with each
`--buckets` strategy (single, ddp, per-tensor, search) and the 1-chip step
as the reference, simulates each with --timing-only (inputs of one chip's
size: every chip holds the same data, which does not change the cycles), and
prints one Markdown table row per model and strategy: the gradients' size,
the AllReduce buckets, the simulated step cycles and their ratio to the
1-chip step's, the cycles the chip links were busy, when the last AllReduce
was done (the compile-time estimate that --buckets=search minimizes against
the simulated cycle), and the exposed communication, the step's cycles minus
the 1-chip step's.

Then, unless --no-check, a functional check of the `search` step per model:
inputs N times the batch (the model's own inputs tiled, float ones perturbed
and integer ones redrawn in their range, from a fixed seed) run sharded over
the chips, each `*.grad.npy` against the mean of the 1-chip step's gradients
on each shard (the reference executor: `kiln run STEP.kir`), as max |got -
want| / max |want| over each gradient.

usage: benchmarks/npusim_data_parallel.py KILN MODELS_DIR [--chips=N] [--no-check] [NAME ...]
  KILN        the kiln binary (build/tools/kiln/kiln)
  MODELS_DIR  the output directory of scripts/export_training_models.py
  --chips=N   the chips of the data-parallel step (default 8)
  --no-check  skip the functional check (a full simulation of chip 0)
"""
import os
import re
import sys
import tempfile
import time

import numpy as np

from npusim_models import exported, feed, max_gradient_error, run

STRATEGIES = ("single", "ddp", "per-tensor", "search")


def simulate(kiln, step, strategy, args, tmp, tag):
    """Compiles `step` for npusim (with --buckets=strategy unless None) and simulates it timing-only:
    (total cycles, buckets, bytes, links busy cycles, last AllReduce done (simulated), its estimate)."""
    art = os.path.join(tmp, tag + ".kiln")
    explain = run([kiln, "compile", step, "--target=npusim", "-o", art, "--explain-placement",
                   *(["--buckets=" + strategy] if strategy else [])])
    report = run([kiln, "run", art, *args, "--report", "--timing-only"])
    cycles = int(re.search(r"^total: (\d+) cycles", report, re.M).group(1))
    if strategy is None:
        return cycles, None, None, None, None, None
    dp = re.search(r"^data parallel: (\d+) chips, (\d+) AllReduce buckets \(([\w-]+)\) per batch, (\d+) B; "
                   r"the chip links busy (\d+) cycles, the last AllReduce done at cycle (\d+)", report, re.M)
    if not dp:
        raise RuntimeError(f"{tag}: no data-parallel line in the report")
    estimates = re.findall(r"^\s+bucket \d+: .*estimated \d+-(\d+) cycles", explain, re.M)
    if len(estimates) != int(dp.group(2)):
        raise RuntimeError(f"{tag}: {len(estimates)} buckets at compile time, {dp.group(2)} in the report")
    return cycles, int(dp.group(2)), int(dp.group(4)), int(dp.group(5)), int(dp.group(6)), int(estimates[-1])


def sharded_inputs(d, inputs, chips, tmp, name):
    """Inputs `chips` times the model's batch, from its own inputs; the `--input` arguments for the whole and
    for each shard."""
    rng = np.random.default_rng(0)
    whole, shards = [], [[] for _ in range(chips)]
    for i, inp in enumerate(inputs):
        x = np.load(os.path.join(d, f"input_{i}.npy"))
        big = np.concatenate([x] * chips)
        if np.issubdtype(x.dtype, np.floating):
            big = (big + 0.5 * rng.standard_normal(big.shape)).astype(x.dtype)
        else:  # labels or token ids: redrawn within the range the model's own input takes
            big = rng.integers(x.min(), x.max() + 1, size=big.shape).astype(x.dtype)
        f = os.path.join(tmp, f"{name}_{inp}_x{chips}.npy")
        np.save(f, big)
        whole += ["--input", f"{inp}={f}"]
        for c, part in enumerate(np.split(big, chips)):
            f = os.path.join(tmp, f"{name}_{inp}_shard{c}.npy")
            np.save(f, part)
            shards[c] += ["--input", f"{inp}={f}"]
    return whole, shards


def check(kiln, d, name, inputs, params, step1, art, chips, tmp):
    """The data-parallel step's gradients on sharded inputs against the mean of the 1-chip step's on each
    shard: the largest max |got - want| / max |want| and the seconds it took."""
    t0 = time.time()
    whole, shards = sharded_inputs(d, inputs, chips, tmp, name)
    out = os.path.join(tmp, name + "_dp_out")
    run([kiln, "run", art, *whole, "--output-dir", out])
    files = [re.sub(r"[^A-Za-z0-9_.-]", "_", p) + ".grad.npy" for p in params]
    want = [0.0] * len(files)
    for c, args in enumerate(shards):
        ref = os.path.join(tmp, f"{name}_shard{c}_out")
        run([kiln, "run", step1, *args, "--output-dir", ref])
        want = [w + np.load(os.path.join(ref, f)).astype(np.float64) / chips for w, f in zip(want, files)]
    err = max_gradient_error(want, [np.load(os.path.join(out, f)) for f in files])
    return err, time.time() - t0


def main():
    argv = sys.argv[1:]
    chips, do_check = 8, True
    for a in [a for a in argv if a.startswith("--")]:
        if a.startswith("--chips="):
            chips = int(a.split("=", 1)[1])
        elif a == "--no-check":
            do_check = False
        else:
            sys.exit(f"unknown flag {a}\n{__doc__}")
        argv.remove(a)
    if len(argv) < 2 or chips < 2:
        sys.exit(__doc__)
    kiln, models = argv[0], argv[1]
    print(f"| model | gradients MiB | strategy | buckets | step cycles ({chips} chips) | step / 1-chip step "
          "| chip links busy cycles | last AllReduce done: estimated / simulated cycle | exposed cycles |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    checks = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, d in exported(models, argv[2:]):
            inputs, args = feed(d)
            params = [l.strip() for l in open(os.path.join(d, "params.txt")) if l.strip()]
            step1 = os.path.join(tmp, name + "_step1.kir")
            stepn = os.path.join(tmp, f"{name}_step{chips}.kir")
            opt = [kiln, "opt", os.path.join(d, "model.onnx"), "--passes=training-step,default",
                   "--params=" + ",".join(params)]
            run([*opt, "-o", step1])
            run([*opt, f"--replicas={chips}", "-o", stepn])
            base = simulate(kiln, step1, None, args, tmp, name + "_1chip")[0]
            print(f"| {name} | | 1 chip | - | {base:,} | 1.000x | - | - | - |", flush=True)
            for s in STRATEGIES:
                cycles, buckets, nbytes, busy, done, est = simulate(kiln, stepn, s, args, tmp, f"{name}_{s}")
                print(f"| {name} | {nbytes / 2**20:.2f} | {s} | {buckets} | {cycles:,} | {cycles / base:.3f}x "
                      f"| {busy:,} | {est:,} / {done:,} | {cycles - base:,} |", flush=True)
            if do_check:
                err, secs = check(kiln, d, name, inputs, params, step1,
                                  os.path.join(tmp, f"{name}_search.kiln"), chips, tmp)
                checks.append(f"{name}: {len(params)} gradients, max rel. error {err:.1e} ({secs:.0f} s)")
    if checks:
        print(f"\nsearch step on inputs of {chips} x the batch, sharded, against the mean of the 1-chip step's "
              "gradients on each shard (reference executor):")
        for c in checks:
            print("  " + c)


if __name__ == "__main__":
    main()
