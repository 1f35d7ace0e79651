#!/usr/bin/python3
"""Every flag of every command either acts or is refused (issue: an honest CLI).

For each command `kiln --help` lists, the flags its `--help` lists (the
entry lines of its "flags:" section, as the driver reads them) are each
given in a context where they cannot act, and the command must refuse with
one line on stderr and exit status 1. A flag that acts wherever a command
accepts it is listed with the reason. The table must name every listed flag
and no other, so a new flag cannot arrive without its case.

usage: flag_sweep.py KILN SOURCE_DIR
"""
import os
import re
import subprocess
import sys
import tempfile

KILN, SRC = sys.argv[1], sys.argv[2]
TINY = os.path.join(SRC, "examples", "models", "tiny_cnn")
MODEL = os.path.join(TINY, "model.onnx")
X = "input_0=" + os.path.join(TINY, "input_0.npy")
KASM = os.path.join(SRC, "examples", "npu", "gemm_double_buffer.kasm")
TIR = os.path.join(SRC, "tests", "tile", "gemm.tir")
GEARS = os.path.join(SRC, "tests", "target", "compile-gears.kir")


def kiln(*args):
    return subprocess.run([KILN, *args], capture_output=True, text=True)


def listed_flags(command):
    help_text = kiln(command, "--help").stdout
    section = help_text.split("\nflags:\n", 1)
    names = set()
    if len(section) < 2:
        return names
    for line in section[1].splitlines():
        stripped = line.lstrip(" ")
        if len(line) - len(stripped) > 4 or not stripped.startswith("-"):
            continue
        head = stripped.split("  ", 1)[0]
        for m in re.finditer(r"(?:^|(?<= ))--?([a-z][a-z0-9-]*)", head):
            names.add(m.group(1))
    return names


def main():
    work = tempfile.mkdtemp(prefix="kiln-flags-")
    npu = os.path.join(work, "t.kiln")
    ref = os.path.join(work, "r.kiln")
    out = os.path.join(work, "o")
    for target, path in (("npusim", npu), ("reference", ref)):
        r = kiln("compile", MODEL, f"--target={target}", "-o", path)
        assert r.returncode == 0, r.stderr
    r = kiln("run", npu, "--input", X, "--timing-only", f"--report-tasks={work}/a.csv")
    assert r.returncode == 0, r.stderr
    csv = os.path.join(work, "a.csv")
    o = ["-o", os.path.join(work, "x.kir")]
    ok = ["-o", os.path.join(work, "x.kiln")]

    # command -> flag -> (arguments where it cannot act, what the refusal says) or "acts: why"
    cases = {
        "compile": {
            "target": "acts: chooses the target (default reference, said on stderr)",
            "o": "acts: names the artifact",
            "precision": "acts: narrows the graph on every target, the reference one included",
            "mixed-type": ([MODEL, "--mixed-type=bf16"] + ok, "apply to --precision=mixed only"),
            "mixed-allow": ([MODEL, "--mixed-allow=MatMul"] + ok, "apply to --precision=mixed only"),
            "mixed-infer": ([MODEL, "--mixed-infer=Add"] + ok, "apply to --precision=mixed only"),
            "mixed-clear": ([MODEL, "--mixed-clear=Add"] + ok, "apply to --precision=mixed only"),
            "mixed-deny": ([MODEL, "--mixed-deny=Add"] + ok, "apply to --precision=mixed only"),
            "mixed-min-macs-per-cast": ([MODEL, "--mixed-min-macs-per-cast=4"] + ok, "apply to --precision=mixed only"),
            "explain-placement": "acts: prints the placement",
            "fusion": ([MODEL, "--fusion=false"] + ok, "forms no fusion groups"),
            "plugin": "acts: loads the plugin",
            "passes": "acts: chooses the pipeline",
            "outputs": "acts: prunes the graph to those outputs",
            "print-after": ([MODEL, "--print-after=gears"] + ok, "no pass named 'gears' runs"),
            "print-after-all": ([MODEL, "--passes=none", "--print-after-all"] + ok, "runs no pass"),
            "time-passes": ([MODEL, "--passes=none", "--time-passes"] + ok, "runs no pass"),
            "stats": ([MODEL, "--passes=none", "--stats"] + ok, "runs no pass"),
            "verify-each": ([MODEL, "--passes=none", "--verify-each"] + ok, "runs no pass"),
            "fold-max-elements": ([MODEL, "--passes=cse", "--fold-max-elements=5"] + ok, "fold-constants pass"),
            "dynamic-batch": ([GEARS, "--target=cuda", "--dynamic-batch=1,2"] + ok, "does not bundle gears"),
            "dynamic-dims": ([GEARS, "--target=cuda", "--dynamic-dims=batch=1,2"] + ok, "does not bundle gears"),
        },
        "run": {
            "input": ([npu, "--input", "nope=" + X.split("=", 1)[1]], "has no input named 'nope'"),
            "output-dir": ([npu, "--input", X, "--timing-only", f"--output-dir={out}"], "computes no outputs"),
            "trace": ([MODEL, "--input", X, f"--trace={work}/t.json"], "does not take"),
            "trace-window": ([npu, "--input", X, "--trace-window=0:100"], "give --trace=FILE too"),
            "trace-kernels": ([npu, "--input", X, "--trace-kernels=conv"], "give --trace=FILE too"),
            "report": ([ref, "--input", X, "--report"], "do not take"),
            "report-csv": ([ref, "--input", X, f"--report-csv={work}/r.csv"], "do not take"),
            "report-tasks": ([ref, "--input", X, f"--report-tasks={work}/r.csv"], "do not take"),
            "roofline": ([ref, "--input", X, f"--roofline={work}/r.svg"], "do not take"),
            "batches": ([ref, "--input", X, "--batches=2"], "do not take"),
            "timing-only": ([ref, "--input", X, "--timing-only"], "do not take"),
            "cycle-limit": ([ref, "--input", X, "--cycle-limit=100"], "do not take"),
            "repeat": ([npu, "--input", X, "--repeat=2"], "do not take"),
            "steps": ([npu, "--input", X, "--steps=3"], "--steps needs a model"),
            "plugin": "acts: loads the plugin",
        },
        "diff": {
            "input": ([csv, csv, "--input", X], "nothing runs"),
            "timing-only": ([MODEL, npu, "--input", X, "--timing-only"], "has no timing"),
            "plugin": "acts: loads the plugin",
        },
        "opt": {
            "o": "acts: names the output",
            "passes": "acts: chooses the pipeline",
            "list-passes": ([MODEL, "--list-passes"], "takes no model"),
            "outputs": "acts: prunes the graph to those outputs",
            "emit": "acts: chooses the output form",
            "inline-constants": ([MODEL, "--emit=dot", "--inline-constants"], "prints no constants"),
            "print-after": ([MODEL, "--passes=dce", "--print-after=cse"] + o, "no pass named 'cse' runs"),
            "print-after-all": ([MODEL, "--passes=none", "--print-after-all"] + o, "runs no pass"),
            "time-passes": ([MODEL, "--passes=none", "--time-passes"] + o, "runs no pass"),
            "stats": ([MODEL, "--passes=none", "--stats"] + o, "runs no pass"),
            "verify-each": ([MODEL, "--passes=none", "--verify-each"] + o, "runs no pass"),
            "fold-max-elements": ([MODEL, "--passes=cse", "--fold-max-elements=5"] + o, "fold-constants pass"),
            "dynamic-batch": ([MODEL, "--dynamic-batch=1,2"] + o, "gears pass"),
            "dynamic-dims": ([MODEL, "--dynamic-dims=b=1,2"] + o, "gears pass"),
        },
        "sim": {
            "machine": "acts: the machine the program runs on",
            "trace": "acts: writes the trace",
            "trace-window": ([KASM, "--trace-window=0:100"], "give --trace=FILE too"),
            "trace-kernels": ([KASM, "--trace-kernels=gemm"], "give --trace=FILE too"),
            "report": "acts: prints the report",
            "report-csv": "acts: writes the report",
            "roofline": "acts: writes the roofline",
            "timing-only": "acts: skips the arithmetic",
            "cycle-limit": "acts: bounds the run",
            "output-dir": ([KASM, "--timing-only", f"--output-dir={out}"], "computes no outputs"),
        },
        "tile": {
            "target": "acts: the target the kernels are tiled and verified for",
            "plugin": "acts: loads the plugin",
            "precision": ([TIR, "--precision=fp16"], "acts on models"),
            "passes": ([TIR, "--passes=cse"], "acts on models"),
            "outputs": ([TIR, "--outputs=y"], "acts on models"),
            "print-after": ([TIR, "--print-after=cse"], "acts on models"),
            "print-after-all": ([TIR, "--print-after-all"], "acts on models"),
            "time-passes": ([TIR, "--time-passes"], "acts on models"),
            "stats": ([TIR, "--stats"], "acts on models"),
            "verify-each": ([TIR, "--verify-each"], "acts on models"),
            "fold-max-elements": ([TIR, "--fold-max-elements=5"], "acts on models"),
        },
        "conformance": {
            "target": "acts: the target the models run on",
            "plugin": "acts: loads the plugin",
            "filter": "acts: selects tests",
            "data-dir": "acts: where the test data is",
            "verbose": "acts: prints passing tests",
            "noisolate": "acts: runs tests in-process",
            "nocheck-roundtrip": "acts: skips the round trip check",
            "timeout": (["--noisolate", "--timeout=5", "--filter=test_relu$"], "--noisolate runs them in-process"),
            "optimize": "acts: optimizes each imported model first",
            "passes": "acts: the pipeline every target runs each model through",
            "print-after": (["--filter=test_relu$", "--passes=dce", "--print-after=cse"], "no pass named 'cse'"),
            "print-after-all": (["--filter=test_relu$", "--passes=none", "--print-after-all"], "runs no pass"),
            "time-passes": (["--filter=test_relu$", "--passes=none", "--time-passes"], "runs no pass"),
            "stats": (["--filter=test_relu$", "--passes=none", "--stats"], "runs no pass"),
            "verify-each": (["--filter=test_relu$", "--passes=none", "--verify-each"], "runs no pass"),
            "fold-max-elements": (["--filter=test_relu$", "--passes=cse", "--fold-max-elements=5"], "fold-constants"),
        },
        "targets": {
            "plugin": "acts: loads the plugin",
        },
        "sweep": {
            "target": "acts: the target each point compiles for",
            "set": "acts: an axis of the grid",
            "machine": "acts: the base machine",
            "precision": "acts: passed to each compile",
            "input": "acts: an input of each run",
            "o": "acts: where the points go",
            "jobs": ([MODEL, "--target=npusim", "--set", "core.l1_kib=512", "--job-list", "--jobs=2", "-o",
                      os.path.join(work, "sw")], "--job-list only writes them"),
            "job-list": (["--collect", os.path.join(work, "sw"), "--job-list"], "give it alone"),
            "collect": "acts: gathers a sweep's results",
            "max-points": (["--collect", os.path.join(work, "sw"), "--max-points=5"], "give it alone"),
        },
    }
    for flag in ("mixed-type", "mixed-allow", "mixed-infer", "mixed-clear", "mixed-deny", "mixed-min-macs-per-cast"):
        cases["opt"][flag] = ([MODEL, f"--{flag}={'bf16' if flag == 'mixed-type' else '4' if 'macs' in flag else 'MatMul' if flag == 'mixed-allow' else 'Add'}"] + o,
                              "mixed-precision pass")
    for flag, value in (("loss", "y"), ("params", "w"), ("learning-rate", "0.1"), ("optimizer", "adam"),
                        ("momentum", "0.9"), ("weight-decay", "0.1"), ("betas", "0.8,0.9"),
                        ("epsilon", "1e-6"), ("state", "inputs"), ("loss-scale", "dynamic"),
                        ("loss-scale-growth-interval", "7"), ("replicas", "2")):
        cases["opt"][flag] = ([MODEL, f"--{flag}={value}"] + o, "training-step pass")
    cases["opt"]["nesterov"] = ([MODEL, "--momentum=0.9", "--nesterov"] + o, "training-step pass")

    failures = []
    commands = re.findall(r"^  ([a-z]+) {2,}", kiln("--help").stdout, re.M)
    if sorted(commands) != sorted(cases):
        failures.append(f"commands {sorted(commands)} against the table's {sorted(cases)}")
    refused = 0
    for command in commands:
        flags = listed_flags(command)
        table = cases.get(command, {})
        for flag in sorted(flags - set(table)):
            failures.append(f"kiln {command} --{flag}: no case in this table (give it a context where it cannot act)")
        for flag in sorted(set(table) - flags):
            failures.append(f"kiln {command} --{flag}: in the table but not in `kiln {command} --help`")
        for flag, case in sorted(table.items()):
            if isinstance(case, str):
                continue
            args, says = case
            r = kiln(command, *args)
            lines = r.stderr.splitlines()
            refused += 1
            if r.returncode != 1 or len(lines) != 1 or not lines[0].startswith("kiln: error:") or says not in lines[0]:
                failures.append(f"kiln {command} {' '.join(args)}: exit {r.returncode}, stderr {r.stderr!r}; "
                                f"expected one line saying {says!r}")
    for f in failures:
        print("FAIL:", f)
    print(f"{refused} refusals checked over {len(commands)} commands; {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
