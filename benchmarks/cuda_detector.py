#!/usr/bin/python3
"""A detector with data-dependent shapes on one GPU: SSDlite320's cuda package against PyTorch.

One command on a machine with an NVIDIA GPU and the CUDA Toolkit (nvcc):

    benchmarks/cuda_detector.py KILN MODELS_DIR     # MODELS_DIR/ssdlite from scripts/export_models.py

It compiles the exported ssdlite320_mobilenet_v3_large (NMS in the graph) with
`kiln compile --target=cuda` at fp32 and fp16, runs the package with `kiln run
--repeat=N` (the backbone and heads on the GPU, the post-processing over values
sized at run time as host tasks) and compares its detections with PyTorch's
(the export's expected_*.npy) as the host emulation's test does: as many
detections, and the same scores, labels and boxes up to the first tied score
(random weights leave positions with identical features, which top-k and NMS
may order either way). Prints the latency (median, with the host copies), the
host tasks and the copies the placement states, and where PyTorch with CUDA
and torchvision are installed, the eager module's latency on the same GPU.

Exits 1 when a precision disagrees (fp32; fp16 prints its first difference).
"""
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stdout[-3000:]}")
    return p.stdout


def first_tie(scores):
    for i in range(1, len(scores)):
        if abs(scores[i] - scores[i - 1]) <= 1e-6 * abs(scores[i]):
            return i - 1
    return len(scores)


def compare(got, want, score_tol, box_tol):
    """None when the detections agree up to the first tie, else the first difference."""
    boxes, scores, labels = got
    wboxes, wscores, wlabels = want
    if scores.shape != wscores.shape:
        return f"{scores.shape[0]} detections, PyTorch {wscores.shape[0]}"
    tie = first_tie(wscores.ravel())
    for i in range(tie):
        if abs(scores[i] - wscores[i]) > score_tol or labels[i] != wlabels[i] or \
                abs(boxes[i] - wboxes[i]).max() > box_tol:
            return (f"detection {i}: score {scores[i]:.6f} label {labels[i]} box {boxes[i].tolist()}, "
                    f"PyTorch {wscores[i]:.6f} {wlabels[i]} {wboxes[i].tolist()}")
    return None


def torch_latency(models_dir, iters):
    try:
        import importlib.util
        import torch
        if not torch.cuda.is_available():
            return None
        spec = importlib.util.spec_from_file_location("export_models", os.path.join(ROOT, "scripts/export_models.py"))
        exp = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(exp)
        import numpy as np
        module, _ = exp.build("ssdlite")
        module = module.to("cuda").eval()
        x = torch.from_numpy(np.load(os.path.join(models_dir, "ssdlite", "input_0.npy"))).to("cuda")
        times = []
        with torch.no_grad():
            for i in range(iters + 5):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                module(x)
                end.record()
                end.synchronize()
                if i >= 5:
                    times.append(start.elapsed_time(end))
        return statistics.median(times)
    except Exception as e:  # PyTorch's side only; kiln's figures stand
        print(f"(PyTorch eager not timed: {str(e).splitlines()[0][:100]})")
        return None


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    iters = int(next((a.split("=")[1] for a in sys.argv[1:] if a.startswith("--repeat=")), "20"))
    arch = next((a.split("=")[1] for a in sys.argv[1:] if a.startswith("--arch=")), "")
    work = next((a.split("=")[1] for a in sys.argv[1:] if a.startswith("--work=")), "/tmp/kiln_detector")
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    kiln, models = args
    import numpy as np
    src = os.path.join(models, "ssdlite")
    want = [np.load(os.path.join(src, f"expected_{i}.npy")) for i in range(3)]
    print(f"ssdlite: {want[1].shape[0]} detections from PyTorch, the first {first_tie(want[1].ravel())} before a tie")
    print(f"{'precision':>9} {'kiln ms':>8} {'host tasks':>10} {'launches':>9} {'D2H B/run':>10} {'H2D B/run':>10}  "
          f"agreement")
    bad = 0
    # fp32's convolutions run in tf32 on TensorCores (10-bit mantissas), as
    # PyTorch's cuDNN does by default: scores within 2e-3, boxes (pixels) 0.5.
    for precision, score_tol, box_tol in (("fp32", 2e-3, 0.5), ("fp16", 2e-2, 2.0)):
        pkg = os.path.join(work, f"ssdlite_{precision}")
        cmd = [kiln, "compile", os.path.join(src, "model.onnx"), "--target=cuda", "-o", pkg,
               f"--precision={precision}"] + ([f"--arch={arch}"] if arch else [])
        try:
            run(cmd)
            placement = open(os.path.join(pkg, "placement.txt")).read()
            host = re.search(r"host tasks: (\d+)", placement)
            launches = re.search(r"kernels: (\d+) launches", placement)
            d2h = re.search(r"\((\d+) bytes device -> host", placement)
            h2d = re.search(r"(\d+) bytes host -> device", placement)
            out = os.path.join(pkg, "out")
            text = run([kiln, "run", pkg, f"--input=input_0={os.path.join(src, 'input_0.npy')}",
                        f"--output-dir={out}", f"--repeat={iters}"])
            ms = float(re.search(r"median ([\d.]+) ms", text).group(1))
            got = [np.load(os.path.join(out, f"output_{i}.npy")) for i in range(3)]
            diff = compare(got, want, score_tol, box_tol)
        except (RuntimeError, AttributeError, OSError) as e:
            print(f"{precision:>9} FAILED: {e}")
            bad += precision == "fp32"
            continue
        agree = "agrees up to the first tie" if diff is None else diff
        bad += diff is not None and precision == "fp32"
        g = lambda m: m.group(1) if m else "?"
        print(f"{precision:>9} {ms:>8.3f} {g(host):>10} {g(launches):>9} {g(d2h):>10} {g(h2d):>10}  {agree}",
              flush=True)
    ms_torch = torch_latency(models, iters)
    if ms_torch is not None:
        print(f"PyTorch eager (torchvision, fp32, the same input on the GPU): {ms_torch:.3f} ms")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
