#!/usr/bin/python3
"""Bad input of every kind through the kiln driver.

Mutates seed inputs of each kind kiln reads (.kir text, .kasm programs,
machine descriptions, ONNX models, .kiln artifacts) with a fixed random
seed, runs the command that reads each one, and fails on anything but a
clean outcome: success, or a non-zero exit with exactly one line on stderr.
A signal, a hang (past --timeout seconds), a sanitizer report or an error
of another shape is a failure, and the input that caused it is kept.

Usage: cli_mutation_sweep.py KILN SOURCE_DIR [--cases N] [--seed S]
                             [--timeout SECONDS] [--keep DIR]
Every file is written under a scratch directory, which is also the working
directory of every command (a program's outputs land there).
"""
import argparse
import glob
import os
import random
import shutil
import subprocess
import sys
import tempfile

TEXT_CHARS = b'0123456789-+.,:;[]{}()<>=%"xXfe \n_abcdiz'
EXTREMES = [b"0", b"1", b"65535", b"2147483648", b"4294967296", b"9223372036854775807",
            b"99999999999999999999", b"3"]


def mutate(rng, data, text):
    b = bytearray(data)
    for _ in range(1 + rng.randrange(6)):
        if not b:
            break
        p = rng.randrange(len(b))
        kind = rng.randrange(6)
        if kind == 0:
            b[p] ^= 1 << rng.randrange(8)
        elif kind == 1:
            b[p] = rng.choice(TEXT_CHARS) if text else rng.randrange(256)
        elif kind == 2:
            del b[p:]
        elif kind == 3:
            q = rng.randrange(len(b))
            b[p:p] = b[q:q + rng.randrange(40)]
        elif kind == 4:
            del b[p:p + rng.randrange(20)]
        elif text:
            # A number replaced by an extreme one (sizes, counts, offsets).
            i = p
            while i < len(b) and not chr(b[i]).isdigit():
                i += 1
            j = i
            while j < len(b) and chr(b[j]).isdigit():
                j += 1
            if i < len(b):
                b[i:j] = rng.choice(EXTREMES)
    return bytes(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("source_dir")
    ap.add_argument("--cases", type=int, default=30, help="mutations per kind of input")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--keep", default="", help="directory for the inputs that fail")
    args = ap.parse_args()
    kiln = os.path.abspath(args.kiln)
    src = os.path.abspath(args.source_dir)
    rng = random.Random(args.seed)
    scratch = tempfile.mkdtemp(prefix="kiln_sweep_")
    try:
        def path(name):
            return os.path.join(scratch, name)

        tiny = os.path.join(src, "examples/models/tiny_cnn/model.onnx")
        seeds_kiln = []
        for name, model, extra in (("seed.kiln", tiny, []),
                                   ("seed_gears.kiln", os.path.join(src, "tests/target/compile-gears.kir"),
                                    ["--dynamic-batch=1,2"])):
            subprocess.run([kiln, "compile", model, "--target=npusim", "-o", path(name)] + extra,
                           check=True, capture_output=True, cwd=scratch)
            seeds_kiln.append(path(name))
        sigmoid = os.path.join(src, "examples/npu/vector_sigmoid.kasm")
        kinds = [
            ("kir", sorted(glob.glob(os.path.join(src, "tests/passes/*.kir"))), True,
             lambda f: [kiln, "opt", f, "-o", path("out.kir")]),
            ("kir-compile", sorted(glob.glob(os.path.join(src, "tests/target/*.kir"))), True,
             lambda f: [kiln, "compile", f, "--target=npusim", "-o", path("out.kiln")]),
            ("kasm", sorted(glob.glob(os.path.join(src, "examples/npu/*.kasm")) +
                            glob.glob(os.path.join(src, "tests/sim/*.kasm"))), True,
             lambda f: [kiln, "sim", f, "--output-dir", path("sim_out")]),
            ("machine", sorted(glob.glob(os.path.join(src, "sim/machines/*.textproto"))), True,
             lambda f: [kiln, "sim", sigmoid, "--machine=" + f, "--output-dir", path("sim_out")]),
            ("onnx", [tiny], False,
             lambda f: [kiln, "compile", f, "--target=npusim", "-o", path("out.kiln")]),
            ("kiln", seeds_kiln, False,
             lambda f: [kiln, "run", f, "--output-dir", path("run_out")]),
        ]
        failures = 0
        runs = 0
        for kind, files, text, command in kinds:
            datas = [(f, open(f, "rb").read()) for f in files]
            ext = os.path.splitext(files[0])[1]
            for i in range(args.cases):
                origin, data = datas[rng.randrange(len(datas))]
                case = path("case" + ext)
                with open(case, "wb") as out:
                    out.write(mutate(rng, data, text))
                try:
                    p = subprocess.run(command(case), capture_output=True, timeout=args.timeout, cwd=scratch)
                    rc, err = p.returncode, p.stderr.decode(errors="replace")
                except subprocess.TimeoutExpired:
                    rc, err = None, ""
                runs += 1
                lines = [line for line in err.splitlines() if line.strip()]
                problem = None
                if rc is None:
                    problem = "no answer within %gs" % args.timeout
                elif rc < 0 or rc >= 128:
                    problem = "killed by a signal (exit %d)" % rc
                elif "Sanitizer" in err or "runtime error:" in err or "terminate called" in err:
                    problem = "sanitizer report"
                elif rc != 0 and len(lines) != 1:
                    problem = "an error of %d lines" % len(lines)
                if problem:
                    failures += 1
                    kept = case
                    if args.keep:
                        os.makedirs(args.keep, exist_ok=True)
                        kept = os.path.join(args.keep, "%s_%d%s" % (kind, i, ext))
                        shutil.copy(case, kept)
                    print("FAIL %s #%d (from %s): %s; input %s; stderr: %s" %
                          (kind, i, os.path.basename(origin), problem, kept, " | ".join(lines[:3])[:300]))
        print("%d mutated inputs over %d kinds, %d failures" % (runs, len(kinds), failures))
        return 1 if failures else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
