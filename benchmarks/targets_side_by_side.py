#!/usr/bin/python3
"""Two kiln binaries side by side on the exported PyTorch models.

For each model of scripts/export_models.py and each precision this compiles
it with both binaries for npusim and for cuda and prints one Markdown table
row: npusim's simulated cycles (a timing-only run), whether the two .kiln
artifacts are byte-identical, the cuda package's kernel launches and
distinct kernels, whether the two packages' files are byte-identical, and
whether their kernels (kernels.cu) are. A compile a binary refuses shows
as "refused". It is how a restructuring shows it kept every figure.

usage: benchmarks/targets_side_by_side.py OLD_KILN NEW_KILN MODELS_DIR [NAME ...]
"""
import filecmp
import os
import re
import subprocess
import sys
import tempfile


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return p.stdout


def npusim(kiln, model, inputs, precision, out):
    run([kiln, "compile", model, "--target=npusim", f"--precision={precision}", "-o", out])
    report = run([kiln, "run", out, "--timing-only", "--report"] + inputs)
    return int(re.search(r"^total: (\d+) cycles", report, re.M).group(1))


def cuda(kiln, model, precision, out):
    try:
        explain = run([kiln, "compile", model, "--target=cuda", f"--precision={precision}", "-o", out,
                       "--explain-placement"])
    except RuntimeError:
        return "refused"
    m = re.search(r"(\d+) launches(?: of|,) (\d+) distinct kernels", explain)
    if m:
        return f"{m.group(1)} / {m.group(2)}"
    m = re.search(r"launches: (\d+)", explain)
    return m.group(1) if m else "?"


def same_file(a, b):
    return os.path.exists(a) and os.path.exists(b) and filecmp.cmp(a, b, shallow=False)


def same_tree(a, b):
    if not (os.path.isdir(a) and os.path.isdir(b)):
        return False
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files:
        return False
    for sub in cmp.common_dirs:
        if not same_tree(os.path.join(a, sub), os.path.join(b, sub)):
            return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not mismatch and not errors


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    old, new, models = sys.argv[1:4]
    names = sys.argv[4:] or sorted(os.listdir(models))
    print("| model | precision | npusim cycles before | after | .kiln identical | cuda launches / kernels before | "
          "after | package identical | kernels.cu identical |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            d = os.path.join(models, name)
            model = os.path.join(d, "model.onnx")
            if not os.path.exists(model):
                continue
            with open(os.path.join(d, "inputs.txt")) as f:
                inputs = [f"--input={n}={os.path.join(d, n + '.npy')}" for n in f.read().split()]
            for precision in ("fp32", "fp16"):
                a, b = os.path.join(tmp, "old.kiln"), os.path.join(tmp, "new.kiln")
                ca, cb = npusim(old, model, inputs, precision, a), npusim(new, model, inputs, precision, b)
                same = filecmp.cmp(a, b, shallow=False)
                pa, pb = os.path.join(tmp, "old.cuda"), os.path.join(tmp, "new.cuda")
                la, lb = cuda(old, model, precision, pa), cuda(new, model, precision, pb)
                psame = same_tree(pa, pb)
                ksame = same_file(os.path.join(pa, "kernels.cu"), os.path.join(pb, "kernels.cu"))
                print(f"| {name} | {precision} | {ca:,} | {cb:,} | {'yes' if same else 'NO'} | {la} | {lb} | "
                      f"{'yes' if psame else 'NO'} | {'yes' if ksame else 'NO'} |", flush=True)
                for p in (pa, pb):
                    subprocess.run(["rm", "-rf", p])
    return 0


if __name__ == "__main__":
    sys.exit(main())
