#!/usr/bin/env python3
"""The NPU model against measured Ascend 910B figures (msKPP's tables).

benchmarks/calibration/mskpp_910b.csv holds the single-core figures msKPP
publishes for the Ascend 910B1 (its header says where each comes from).
For each row this script writes the micro-program the figure measures, runs
it with `kiln sim --timing-only` on the 910B-like machine, and prints the
modeled figure beside the measured one:

  mmad      one core issuing mmads of M x K x N (fp16, fp32 accumulation):
            2*M*K*N ops over the cycles the CUBE pipe spends per mmad.
  vector    one vector instruction over N elements: the bytes of one input
            operand over the cycles the VECTOR pipe spends on it.
  transfer  one core moving B bytes at a time, one transfer after the other
            (each waits for the one before, as the measured loop does):
            B over the cycles each transfer adds, in GB/s of 2^30 bytes at
            the machine's clock. GM is read again and again, so after the
            first transfer the L2 holds it, as on the measured chip.

The 910B pairs each cube core with two vector cores (msKPP's arch figures:
25 and 50 on the 910B1); a core of the 910B-like machine has one vector
unit standing for the pair. So a vector-side figure (vector instructions,
GM -> UB, UB -> GM) at size S is compared with the pair doing half each:
twice the measured figure at S / 2 (interpolated in the table; rows whose
half falls below the table are not run).

Rows the model has no path for (layout-converting moves, the bias and
fixpipe buffers, GM straight to L0A/L0B) and sizes past the 910B-like
machine's buffers are counted, not run.

  benchmarks/npusim_calibration.py build/tools/kiln/kiln [--machine FILE] [--rows all|some]
      [--only INSTR,...] [--require-within FRACTION]

prints one line per path (rows, within 10%, the worst error) and, with
--rows all, every row: size, measured, modeled, error. --only keeps the
rows of those instructions (mmad, GM_L1, vadd, ...); --require-within
exits 1 when a path has fewer of its rows within 10% than that share (the
ctest npusim.calibration holds three paths to it).
"""
import argparse
import collections
import csv
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "calibration", "mskpp_910b.csv")
MACHINE = os.path.join(HERE, "..", "sim", "machines", "ascend910b-like.textproto")

ES = {"fp16": 2, "fp32": 4}
KASM_DT = {"fp16": "f16", "fp32": "f32"}


def rows(table):
    with open(table) as f:
        lines = [l for l in f if not l.startswith("#")]
    for r in csv.DictReader(lines):
        if r["kind"] in ("mmad", "vector", "transfer") and "910b1" in r["source"]:
            yield r


def pair_tables(table):
    """(kind, instr, dtype) -> sorted [(size, measured)] of the vector-side rows."""
    out = collections.defaultdict(list)
    for r in rows(table):
        if r["size"].isdigit() and (r["kind"] == "vector" or r["instr"] in ("GM_UB", "UB_GM")):
            out[(r["kind"], r["instr"], r["dtype"])].append((int(r["size"]), float(r["measured"])))
    for v in out.values():
        v.sort()
    return out


def interp(points, x):
    if x < points[0][0] or x > points[-1][0]:
        return None
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y0
    return points[-1][1]


def machine_field(path, name, default):
    text = open(path).read()
    m = re.search(r"\b%s:\s*([0-9.]+)" % name, text)
    return float(m.group(1)) if m else default


class Sim:
    def __init__(self, kiln, machine, workdir):
        self.kiln, self.machine, self.dir = kiln, machine, workdir
        self.cache = {}
        self.n = 0

    def run(self, body, args):
        """Runs a program; returns (total cycles, {pipe: busy cycles})."""
        key = (body, args)
        if key in self.cache:
            return self.cache[key]
        self.n += 1
        path = os.path.join(self.dir, "p.kasm")
        csv_path = os.path.join(self.dir, "r.csv")
        with open(path, "w") as f:
            f.write(".program calib\n.regs 2\n.block_dim 1\n" + args + body)
        out = subprocess.run([self.kiln, "sim", path, "--timing-only", "--machine=" + self.machine,
                              "--report-csv=" + csv_path], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip() or out.stdout.strip())
        total = float(re.search(r"calib: ([0-9.]+) cycles", out.stdout).group(1))
        busy = {}
        with open(csv_path) as f:
            for r in csv.DictReader(f):
                busy[r["pipe"]] = float(r["busy_cycles"])
        self.cache[key] = (total, busy)
        return total, busy


def per_transfer(sim, one, arg, repeats=8):
    """Cycles each transfer adds, one after the other: (T(1 + R) - T(1)) / R."""
    barrier_pipe = "MTE3" if one.startswith("copy_ub_gm") else ("FIXP" if one.startswith("fixp") else
                   ("MTE1" if one.startswith("load_l0") else "MTE2"))
    step = "  %s\n  pipe_barrier %s\n" % (one, barrier_pipe)
    t1, _ = sim.run(step, arg)
    tn, _ = sim.run(step * (1 + repeats), arg)
    return (tn - t1) / repeats


def model(sim, r, clock_hz, caps):
    kind, instr, dt = r["kind"], r["instr"], r["dtype"]
    if kind == "mmad":
        M, K, N = (int(x) for x in r["size"].split("x"))
        reps = 16
        mm = "  mmad.f16 L0C[0], L0A[0], L0B[0], m=%d, k=%d, n=%d\n" % (M // 16, K // 16, N // 16)
        if (M * K + K * N) * 2 > caps["L0A"] or M * N * 4 > caps["L0C"]:
            return None, "past the buffers"
        _, busy = sim.run(mm * reps, "")
        return 2.0 * M * K * N / (busy["Cube"] / reps), ""
    if kind == "vector":
        n = int(r["size"])
        es = ES[dt]
        per_repeat = 256 // es
        repeat = -(-n // per_repeat)
        if repeat > 255:
            return None, "past one instruction's repeats"
        span = repeat * 256
        if 3 * span > caps["UB"]:
            return None, "past the buffers"
        mask = "" if n % per_repeat == 0 or repeat > 1 else ", mask=%d" % n
        op = instr
        if op in ("vexp", "vln"):
            ins = "  %s.%s UB[0], UB[%d], repeat=%d%s\n" % (op, KASM_DT[dt], span, repeat, mask)
        else:
            ins = "  %s.%s UB[0], UB[%d], UB[%d], repeat=%d%s\n" % (op, KASM_DT[dt], span, 2 * span, repeat, mask)
        _, busy = sim.run(ins, "")
        return es * n / busy["VECTOR"], ""
    # transfers
    b = int(r["size"]) if r["size"].isdigit() else None
    if b is None:
        return None, "indexed by repeats"
    if instr == "GM_L1":
        if b > caps["L1"]:
            return None, "past the buffers"
        one, arg = "copy_gm_l1 L1[0], x[0], len=%d" % b, ".arg x f16[%d]\n" % (b // 2)
    elif instr == "GM_UB":
        if b > caps["UB"]:
            return None, "past the buffers"
        one, arg = "copy_gm_ub UB[0], x[0], len=%d" % b, ".arg x f16[%d]\n" % (b // 2)
    elif instr == "UB_GM":
        if b > caps["UB"]:
            return None, "past the buffers"
        one, arg = "copy_ub_gm x[0], UB[0], len=%d" % b, ".arg x f16[%d]\n" % (b // 2)
    elif instr in ("L1_L0A", "L1_L0B"):
        if b % 512 or b > caps["L0A"]:
            return None, "past the buffers" if b > caps["L0A"] else "not whole fractals"
        which = "l0a" if instr == "L1_L0A" else "l0b"
        one, arg = "load_%s.f16 %s[0], L1[0], cols=%d" % (which, which.upper(), b // 512), ""
    elif instr == "L0C_GM":
        if b % 1024 or b > caps["L0C"]:
            return None, "past the buffers" if b > caps["L0C"] else "not whole fractals"
        n = b // 1024
        one, arg = "fixp.f32.f32 y[0], L0C[0], m=1, n=%d" % n, ".arg y f32[%d]\n" % (256 * n)
    else:
        return None, "no such path in the model"
    cycles = per_transfer(sim, one, arg)
    return b / cycles * clock_hz / 2**30, ""


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("kiln")
    p.add_argument("--machine", default=MACHINE)
    p.add_argument("--table", default=TABLE)
    p.add_argument("--rows", default="some", choices=["all", "some"],
                   help="all: print every row; some: one line per path")
    p.add_argument("--only", default="", help="comma-separated instructions (mmad, GM_L1, vadd, ...)")
    p.add_argument("--require-within", type=float, default=0,
                   help="exit 1 when a path has fewer of its run rows within 10%% than this share")
    a = p.parse_args()
    only = set(filter(None, a.only.split(",")))
    clock_hz = machine_field(a.machine, "clock_mhz", 1000) * 1e6
    caps = {k: int(machine_field(a.machine, k.lower() + "_kib", d)) << 10
            for k, d in (("L1", 1024), ("UB", 256), ("L0A", 64), ("L0C", 256))}
    by_path = collections.OrderedDict()
    pairs = pair_tables(a.table)
    with tempfile.TemporaryDirectory(prefix="kiln-calib-", dir=os.environ.get("TMPDIR")) as d:
        sim = Sim(os.path.abspath(a.kiln), os.path.abspath(a.machine), d)
        for r in rows(a.table):
            if only and r["instr"] not in only:
                continue
            pair = pairs.get((r["kind"], r["instr"], r["dtype"]))
            if pair:
                half = interp(pair, int(r["size"]) / 2)
                if half is None:
                    by_path.setdefault("%s %s %s" % (r["kind"], r["instr"], r["dtype"]), []).append(
                        (r, None, "half below the table"))
                    continue
                r = dict(r, measured=str(2 * half))
            modeled, why = model(sim, r, clock_hz, caps)
            key = "%s %s %s" % (r["kind"], r["instr"], r["dtype"])
            by_path.setdefault(key, []).append((r, modeled, why))
    print("msKPP 910B1 (single core) against the model on %s" % os.path.basename(a.machine))
    print("%-24s %6s %6s %10s %10s  %s" % ("path", "rows", "run", "within10%", "worst", "unit / not run"))
    for key, items in by_path.items():
        ran = [(r, m) for r, m, _ in items if m is not None]
        errs = [(m - float(r["measured"])) / float(r["measured"]) for r, m in ran]
        within = sum(abs(e) <= 0.10 for e in errs)
        worst = max(errs, key=abs) if errs else 0
        skipped = collections.Counter(w for _, m, w in items if m is None)
        unit = items[0][0]["unit"]
        note = unit + ("; " + ", ".join("%d %s" % (n, w) for w, n in skipped.items()) if skipped else "")
        print("%-24s %6d %6d %10s %+9.1f%%  %s" % (key, len(items), len(ran), "%d/%d" % (within, len(ran)),
                                                 100 * worst, note))
        if a.rows == "all":
            for r, m in ran:
                e = (m - float(r["measured"])) / float(r["measured"])
                print("    %-12s measured %10.2f modeled %10.2f  %+6.1f%%" % (r["size"], float(r["measured"]), m,
                                                                           100 * e))
    print("(%d simulator runs)" % sim.n)
    short = []
    for key, items in by_path.items():
        ran = [(r, m) for r, m, _ in items if m is not None]
        within = sum(abs((m - float(r["measured"])) / float(r["measured"])) <= 0.10 for r, m in ran)
        if ran and within < a.require_within * len(ran):
            short.append("%s: %d of %d within 10%%" % (key, within, len(ran)))
    if short:
        print("below --require-within %.2f: %s" % (a.require_within, "; ".join(short)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
