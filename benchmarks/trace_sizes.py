#!/usr/bin/python3
"""A model's trace in each form kiln writes: size, events and load time.

Compiles MODEL for npusim, runs it once (timing only) with --trace in each
form (.json, .json.gz, .pftrace) and prints one Markdown table row per form:
the file's size, the wall time of the traced run, the events it holds and
the seconds Python takes to load it (json.load; gzip + json.load; the
protobuf messages of sim/model/perfetto_trace.proto, generated here with
protoc, parsing the Perfetto trace), with the slices, flows and counters
counted from what was loaded, so the forms can be seen to hold the same.

usage: benchmarks/trace_sizes.py KILN MODEL_DIR   (e.g. build/models/resnet50)
"""
import collections
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def count_json(events):
    n = collections.Counter(e["ph"] for e in events)
    return n["X"], n["s"], n["C"]


def load_json(path):
    with open(path) as f:
        return count_json(json.load(f)["traceEvents"])


def load_gz(path):
    with gzip.open(path, "rt") as f:
        return count_json(json.load(f)["traceEvents"])


def load_perfetto(path):
    from sim.model import perfetto_trace_pb2 as pf

    trace = pf.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    slices = flows = counters = 0
    for p in trace.packet:
        if p.HasField("track_event"):
            e = p.track_event
            slices += e.type == pf.TrackEvent.TYPE_SLICE_BEGIN
            flows += len(e.flow_ids)
            counters += e.type == pf.TrackEvent.TYPE_COUNTER
    return slices, flows, counters


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    kiln, model_dir = sys.argv[1:]
    with open(os.path.join(model_dir, "inputs.txt")) as f:
        names = f.read().split()
    inputs = [f"--input={n}={os.path.join(model_dir, f'input_{i}.npy')}" for i, n in enumerate(names)]
    with tempfile.TemporaryDirectory() as d:
        artifact = os.path.join(d, "m.kiln")
        subprocess.run([kiln, "compile", os.path.join(model_dir, "model.onnx"), "--target=npusim", "-o", artifact],
                       check=True, capture_output=True)
        # The Perfetto messages for Python, made before anything is timed.
        subprocess.run(["protoc", f"--python_out={d}", "-I", ROOT,
                        os.path.join(ROOT, "sim/model/perfetto_trace.proto")], check=True)
        sys.path.insert(0, d)
        print("| form | size (MB) | traced run (s) | slices | flows | counter samples | load (s) |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, load in [("trace.json", load_json), ("trace.json.gz", load_gz),
                           ("trace.pftrace", load_perfetto)]:
            path = os.path.join(d, name)
            start = time.perf_counter()
            subprocess.run([kiln, "run", artifact, "--timing-only", f"--trace={path}"] + inputs, check=True,
                           capture_output=True)
            run_s = time.perf_counter() - start
            start = time.perf_counter()
            slices, flows, counters = load(path)
            load_s = time.perf_counter() - start
            print(f"| {name} | {os.path.getsize(path) / 1e6:.1f} | {run_s:.2f} | {slices:,} | {flows:,} | "
                  f"{counters:,} | {load_s:.2f} |")


if __name__ == "__main__":
    main()
