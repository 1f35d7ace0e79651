#!/usr/bin/python3
"""Greedy generation on one GPU: kiln's cuda packages against PyTorch eager, side by side.

One command on a machine with an NVIDIA GPU, PyTorch with CUDA and the CUDA
Toolkit (nvcc), after building kiln:

    benchmarks/cuda_decode_bench.py                      # GPT-2 small: fp32 (tf32), fp32-3xtf32, fp16
    benchmarks/cuda_decode_bench.py --compile-only       # the packages only (no GPU needed)

For each precision it exports the decoder (scripts/export_decoders.py: the
prefill and decode steps with a static KV cache, random weights), compiles
both steps with `kiln compile --target=cuda`, builds them with nvcc, and
runs the prompt and then --steps decode steps through the packages' C API
on device memory (kiln_model_run_device): each cache is passed as one
pointer for k_L and k_L.next (the package computes k_L.next over k_L), the
token and the position swap between two buffers. The same model runs in
PyTorch eager on the GPU with the same static cache (the module the export
traced). It prints the time to the first token, the time per output token
(the median decode step, CUDA events), tokens per second, kiln's ratio to
PyTorch, and whether the tokens equal PyTorch's; where they diverge, which
steps choose differently when fed PyTorch's tokens (a near-tie flipped by
rounding changes one step, a fault many). fp32 runs its products in tf32, as
cuBLAS with TF32 allowed; fp32-3xtf32 (--fp32-products=3xtf32) in f32's
accuracy, as PyTorch does by default, and must equal PyTorch's tokens (exit
1 otherwise); fp16 reports its first divergence.

Exits 1 with one line when there is no GPU, no nvcc or no kiln binary.
"""
import argparse
import copy
import importlib.util
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.abspath(os.path.dirname(__file__)))


def fail(msg):
    print(f"cuda_decode_bench: {msg}", file=sys.stderr)
    sys.exit(1)


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compile_step(cuda_bench, kiln, onnx_path, out_dir, precision, arch, nvcc):
    """Compiles one step (and builds it when nvcc is given); its placement's host-tasks line.
    Precision fp32-3xtf32 is fp32 with --fp32-products=3xtf32 (f32-accurate products)."""
    extra = ["--fp32-products=3xtf32"] if precision == "fp32-3xtf32" else []
    precision = "fp32" if precision == "fp32-3xtf32" else precision
    if nvcc:
        placement = cuda_bench.compile_package(kiln, onnx_path, out_dir, precision, arch, nvcc, extra)
    else:
        cuda_bench.run([kiln, "compile", onnx_path, "--target=cuda", "-o", out_dir, f"--precision={precision}"] + extra)
        with open(os.path.join(out_dir, "placement.txt")) as f:
            placement = f.read()
    host = [line for line in placement.splitlines() if line.startswith("host tasks:")]
    return host[0] if host else "host tasks: ?"


def cuda_ms(torch, fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def generate_kiln(torch, prefill, decode, prompt, layers, heads, cache_len, dh, steps, forced=None):
    """kiln's tokens, the prefill's and each step's milliseconds. With `forced`
    (another run's tokens), each step is fed forced[i] instead of its own
    token: whether a step's choice differs, whatever the steps before chose."""
    dev = "cuda"
    caches = [torch.zeros(1, heads, cache_len, dh, device=dev) for _ in range(2 * layers)]
    tok = [torch.zeros(1, 1, dtype=torch.int64, device=dev) for _ in range(2)]
    pos = [torch.zeros((), dtype=torch.int64, device=dev) for _ in range(2)]
    generated = torch.zeros(1, 1, dtype=torch.int64, device=dev)
    # Outputs: token.next, generated, pos.next, then each cache over itself.
    # One prefill first, untimed (the first launches load the kernels); it
    # writes the positions the timed one writes, and the mask hides the rest.
    prefill([prompt.to(dev), pos[0]] + caches, [tok[0], generated, pos[1]] + caches)
    first_ms = cuda_ms(torch, lambda: prefill([prompt.to(dev), pos[0]] + caches, [tok[0], generated, pos[1]] + caches))
    tokens, step_ms = [int(tok[0].item())], []
    t, q = 0, 1  # the buffers holding the current token and position
    for i in range(steps - 1):
        if forced is not None:
            tok[t].fill_(forced[i])
        step_ms.append(cuda_ms(torch, lambda: decode([tok[t], pos[q]] + caches,
                                                     [tok[1 - t], generated, pos[1 - q]] + caches)))
        t, q = 1 - t, 1 - q
        tokens.append(int(tok[t].item()))
    return tokens, first_ms, step_ms


def generate_torch(torch, model, prompt, layers, heads, cache_len, dh, steps, dtype):
    dev = "cuda"
    m = copy.deepcopy(model).to(dev).to(dtype)
    caches = [torch.zeros(1, heads, cache_len, dh, device=dev, dtype=dtype) for _ in range(2 * layers)]
    pos = torch.zeros((), dtype=torch.int64, device=dev)
    tokens, step_ms = [], []
    with torch.no_grad():
        out = {}

        def prefill():
            out["r"] = m(prompt.to(dev), pos, *caches)

        prefill()  # untimed: PyTorch's first call initializes its kernels
        first_ms = cuda_ms(torch, prefill)
        token, _, p, *caches = out["r"]
        tokens.append(int(token.item()))
        for _ in range(steps - 1):
            def step():
                out["r"] = m(token, p, *caches)

            step_ms.append(cuda_ms(torch, step))
            token, _, p, *caches = out["r"]
            tokens.append(int(token.item()))
    return tokens, first_ms, step_ms


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kiln", default=os.path.join(ROOT, "build/tools/kiln/kiln"))
    p.add_argument("--work", default="/tmp/kiln_decode_bench")
    p.add_argument("--decoder", default="gpt2_small_decoder", help="a decoder of scripts/export_decoders.py")
    p.add_argument("--steps", type=int, default=32, help="tokens to generate (the first from the prompt)")
    p.add_argument("--precisions", default="fp32,fp32-3xtf32,fp16",
                   help="fp32 (tf32 products), fp32-3xtf32 (--fp32-products=3xtf32), fp16")
    p.add_argument("--compile-only", action="store_true", help="export and compile the packages, no GPU")
    args = p.parse_args()
    if not os.access(args.kiln, os.X_OK):
        fail(f"no kiln binary at {args.kiln} (build kiln first, or pass --kiln)")
    cuda_bench = load("cuda_bench", os.path.join(ROOT, "benchmarks/cuda_bench.py"))
    dec = load("export_decoders", os.path.join(ROOT, "scripts/export_decoders.py"))
    import torch
    vocab, d, heads, layers, cache_len, batch, prompt_len, _ = dec.DECODERS[args.decoder]
    dh = d // heads
    os.makedirs(args.work, exist_ok=True)
    src = os.path.join(args.work, args.decoder)
    if not os.path.exists(os.path.join(src, "tokens.npy")):  # an earlier export is reused
        dec.export(args.decoder, args.work)
    gpu = not args.compile_only
    nvcc = None
    arch = ""
    if gpu:
        if not torch.cuda.is_available():
            fail("no CUDA GPU: torch.cuda.is_available() is False (or pass --compile-only)")
        nvcc = cuda_bench.find_nvcc()
        if not nvcc:
            fail("no nvcc: install the CUDA Toolkit or set NVCC / CUDA_HOME")
        arch = cuda_bench.arch_flag(torch)
        print(f"GPU: {torch.cuda.get_device_name()}, PyTorch {torch.__version__}, {nvcc}")
    model, prompt = dec.build(args.decoder)
    print(f"{args.decoder}: {layers} layers, d_model {d}, {heads} heads, vocabulary {vocab}, cache {cache_len}, "
          f"prompt {prompt_len}, {args.steps} tokens")
    print(f"{'precision':>9} {'step':>8} {'placement':>60}")
    rows = []
    for precision in [s for s in args.precisions.split(",") if s]:
        pk = {}
        for step in ("prefill", "decode"):
            out = os.path.join(args.work, f"{step}_{precision}")
            try:
                host = compile_step(cuda_bench, args.kiln, os.path.join(src, f"{step}.onnx"), out, precision, arch,
                                    nvcc)
            except cuda_bench.StepFailed as e:
                fail(str(e))
            print(f"{precision:>9} {step:>8} {host:>60}")
            pk[step] = out
        if not gpu:
            continue
        try:
            prefill, decode = cuda_bench.Package(pk["prefill"]), cuda_bench.Package(pk["decode"])
            kt, k_first, k_steps = generate_kiln(torch, prefill.run_device, decode.run_device, prompt, layers, heads,
                                                 cache_len, dh, args.steps)
        except cuda_bench.StepFailed as e:
            fail(str(e))
        dtype = torch.float16 if precision == "fp16" else torch.float32
        tt, t_first, t_steps = generate_torch(torch, model, prompt, layers, heads, cache_len, dh, args.steps, dtype)
        diverge = next((i for i, (a, b) in enumerate(zip(kt, tt)) if a != b), None)
        if diverge is not None:
            # A near-tie that the precision flips changes one step; a fault
            # changes many. Fed PyTorch's tokens, which of kiln's steps differ:
            forced, _, _ = generate_kiln(torch, prefill.run_device, decode.run_device, prompt, layers, heads,
                                         cache_len, dh, args.steps, forced=tt)
            differ = [i for i, (a, b) in enumerate(zip(forced, tt)) if a != b]
            print(f"{precision}: kiln {kt}\n{precision}: torch {tt}\n{precision}: fed PyTorch's tokens, "
                  f"{len(differ)} of {len(tt)} steps choose differently: {differ}")
        cpu = os.path.join(src, "tokens.npy")
        if precision.startswith("fp32") and os.path.exists(cpu):
            import numpy as np
            want = [int(x) for x in np.load(cpu).ravel()[:len(tt)]]
            print(f"PyTorch on the GPU {'equals' if want == tt else 'differs from'} PyTorch on the CPU (the export's "
                  f"tokens){'' if want == tt else ': ' + str(want)}")
        rows.append((precision, k_first, statistics.median(k_steps), t_first, statistics.median(t_steps), diverge))
    if gpu:
        print(f"\n{'precision':>9} {'kiln TTFT ms':>13} {'kiln ms/token':>14} {'kiln tok/s':>11} {'torch TTFT ms':>14} "
              f"{'torch ms/token':>15} {'torch/kiln':>11} {'tokens':>22}")
        for precision, kf, ks, tf, ts, diverge in rows:
            same = "equal PyTorch's" if diverge is None else f"first differ at {diverge}"
            print(f"{precision:>9} {kf:>13.3f} {ks:>14.3f} {1000 / ks:>11.1f} {tf:>14.3f} {ts:>15.3f} {ts / ks:>11.2f} "
                  f"{same:>22}")
        bad = [r for r in rows if r[0] == "fp32-3xtf32" and r[5] is not None]
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
