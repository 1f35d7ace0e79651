#!/usr/bin/python3
"""kiln's cuda target against cuBLAS, PyTorch eager and torch.compile, on one GPU.

One command on a machine with an NVIDIA GPU, PyTorch with CUDA and the CUDA
Toolkit (nvcc), after building kiln (build/tools/kiln/kiln):

    benchmarks/cuda_bench.py                 # everything below
    benchmarks/cuda_bench.py --skip-models --skip-attention   # the GEMM sweep only

1. GEMM sweep: Y = A x B, square 1024^3 .. 8192^3, fp16 and bf16. Each size is
   an ONNX MatMul compiled with `kiln compile --target=cuda` (for the GPU's
   architecture: sm_90a on Hopper), built with nvcc, loaded with ctypes and
   run in place on device memory (kiln_model_run_device); cuBLAS is
   torch.matmul on the same tensors. Prints TFLOPS and kiln/cuBLAS.
2. Models: those --names picks from scripts/export_models.py's set
   (default ResNet-50 and the BERT-style encoder; exported into the work
   directory unless --models names an export), compiled at fp32 and fp16,
   run with `kiln run DIR --repeat=N` (latency with the model's host input
   and output copies); PyTorch eager and torch.compile on the same module and
   input shapes, inputs on the device. Prints latencies and kiln's ratio to
   each. On Hopper each package also runs its sm_80 (mma.sync) variants
   (KILN_CUDA_SM=80): latency and agreement.
3. Attention: causal fp16 attention over 8 heads, sequence 128 .. 4096,
   head sizes 64 and 128, an ONNX graph of MatMul, Softmax and MatMul that
   kiln recognizes as kiln.Attention. kiln's fused kernel (the default) and
   the same graph compiled with --fused-attention=false (split back: the
   scores through HBM), side by side with PyTorch's
   scaled_dot_product_attention (is_causal; a masked softmax where PyTorch
   has none) on the same tensors. Prints milliseconds, TFLOPS (the causal
   half of 4 S^2 d flops per head) and the ratios.
4. Agreement: each kiln model's outputs against PyTorch's (expected_*.npy of
   the export): fp32 (tf32 matrix products) within 2e-3 and fp16 within 1e-2
   relative to the largest reference magnitude; each GEMM against
   torch.matmul within 1e-2.

Exits 1 with one line when there is no GPU, no nvcc or no kiln binary.
"""
import argparse
import ctypes
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# fp32 matrix products run on TensorCores in tf32 (10-bit mantissa, f32
# accumulation), as cuBLAS does with TF32 enabled: agreement within 2e-3.
FP32_TOLERANCE = 2e-3
# The GEMM sweep's products per call in its back-to-back column.
BACK_TO_BACK = 8


def fail(msg):
    print(f"cuda_bench: {msg}", file=sys.stderr)
    sys.exit(1)


class StepFailed(Exception):
    """One measurement could not be taken; the others go on."""


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        raise StepFailed(f"{' '.join(cmd)} failed:\n{r.stdout[-4000:]}")
    return r.stdout


def find_nvcc():
    for c in [os.environ.get("NVCC", ""), os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin/nvcc"),
              "/usr/local/cuda/bin/nvcc", shutil.which("nvcc") or ""]:
        if c and os.path.exists(c):
            return c
    return None


def arch_flag(torch):
    major, minor = torch.cuda.get_device_capability()
    if major == 9:
        return "sm_90a"
    if major == 8:
        return f"sm_{major}{minor}" if minor in (0, 6, 9) else "sm_80"
    return ""  # other GPUs: both, with PTX for the JIT


def compile_package(kiln, onnx_path, out_dir, precision, arch, nvcc, extra=()):
    cmd = [kiln, "compile", onnx_path, "--target=cuda", "-o", out_dir, f"--precision={precision}"] + list(extra)
    if arch:
        cmd.append(f"--arch={arch}")
    run(cmd)
    env = dict(os.environ, NVCC=nvcc)
    run(["sh", os.path.join(out_dir, "build.sh")], env=env)
    with open(os.path.join(out_dir, "placement.txt")) as f:
        return f.read()


class Package:
    """A built package driven through its C API (kiln_model.h)."""

    def __init__(self, directory, device_only=True):
        lib = ctypes.CDLL(os.path.join(directory, "libkiln_model.so"))
        lib.kiln_model_load.restype = ctypes.c_void_p
        lib.kiln_model_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        for name in ("kiln_model_run", "kiln_model_run_device"):
            getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                           ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_size_t]
        lib.kiln_model_num_host_tasks.argtypes = [ctypes.c_void_p]
        lib.kiln_model_free.argtypes = [ctypes.c_void_p]
        self.lib = lib
        self.err = ctypes.create_string_buffer(2048)
        self.model = lib.kiln_model_load(directory.encode(), self.err, len(self.err))
        if not self.model:
            raise StepFailed(f"loading {directory}: {self.err.value.decode()}")
        if device_only and lib.kiln_model_num_host_tasks(self.model):
            raise StepFailed(f"{directory} has host tasks; a GEMM package should run entirely on the GPU")

    def run_device(self, inputs, outputs):
        ins = (ctypes.c_void_p * len(inputs))(*[t.data_ptr() for t in inputs])
        outs = (ctypes.c_void_p * len(outputs))(*[t.data_ptr() for t in outputs])
        if self.lib.kiln_model_run_device(self.model, ins, outs, self.err, len(self.err)) != 0:
            raise StepFailed(f"kiln_model_run_device: {self.err.value.decode()}")


def time_cuda(torch, fn, warmup, iters):
    """Median milliseconds of fn() (which may synchronize itself), timed with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def gemm_onnx(path, n, dtype_name, copies=0):
    """Y = A x B; with copies=R, R products Y_i = A x B_i in one graph (launched back to back)."""
    import onnx
    from onnx import TensorProto, helper
    et = {"fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}[dtype_name]
    bs = [f"B{i}" for i in range(copies)] if copies else ["B"]
    ys = [f"Y{i}" for i in range(copies)] if copies else ["Y"]
    g = helper.make_graph([helper.make_node("MatMul", ["A", b], [y]) for b, y in zip(bs, ys)], f"gemm_{n}",
                          [helper.make_tensor_value_info("A", et, [n, n])] +
                          [helper.make_tensor_value_info(b, et, [n, n]) for b in bs],
                          [helper.make_tensor_value_info(y, et, [n, n]) for y in ys])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def gemm_sweep(torch, args, kiln, nvcc, arch, rows):
    # On Hopper the package's kernels run their sm_90a variants (wgmma fed by
    # TMA; warp-specialized and persistent by default); the same package
    # loaded again with KILN_CUDA_SM=80 runs the mma.sync variants, and one
    # compiled with --sm90a-gemm=uniform the sm_90a kernel in which every
    # warp computes, a block per tile: each path's ratio on one GPU.
    hopper = arch == "sm_90a"
    print(f"\n== GEMM: kiln vs cuBLAS (torch.matmul), {torch.cuda.get_device_name()} ==")
    extra = f" {'mma.sync/cuBLAS':>16} {'uniform/cuBLAS':>15}" if hopper else ""
    # One call runs one GEMM and waits for it (kiln_model_run_device returns
    # with the outputs ready), so the call's launch and synchronization are
    # part of the time; R products in one package (launched back to back on
    # its stream, one wait) against R torch.matmul calls leave them out.
    print(f"{'size':>6} {'dtype':>5} {'kiln TFLOPS':>12} {'cuBLAS TFLOPS':>14} {'kiln/cuBLAS':>12} "
          f"{f'x{BACK_TO_BACK} kiln/cuBLAS':>17} {'max rel err':>12}{extra}")

    def one(n, dt):
        tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dt]
        d = os.path.join(args.work, f"gemm_{n}_{dt}")
        os.makedirs(d, exist_ok=True)
        gemm_onnx(os.path.join(d, "gemm.onnx"), n, dt)
        compile_package(kiln, os.path.join(d, "gemm.onnx"), os.path.join(d, "pkg"), "fp32", arch, nvcc)
        pkg = Package(os.path.join(d, "pkg"))
        a = torch.randn(n, n, device="cuda").to(tdt)
        b = torch.randn(n, n, device="cuda").to(tdt)
        y = torch.empty(n, n, device="cuda", dtype=tdt)
        iters = max(5, min(100, int(2e12 / (2 * n ** 3))))
        ms_kiln = time_cuda(torch, lambda: pkg.run_device([a, b], [y]), 3, iters)
        ms_ref = time_cuda(torch, lambda: torch.matmul(a, b), 3, iters)
        ref = torch.matmul(a.float(), b.float())
        pkg.run_device([a, b], [y])
        rel = ((y.float() - ref).abs().max() / ref.abs().max()).item()
        tk, tr = 2 * n ** 3 / ms_kiln / 1e9, 2 * n ** 3 / ms_ref / 1e9
        ok = "" if rel <= 1e-2 else "  DISAGREES"
        # Back to back: R products per call.
        gemm_onnx(os.path.join(d, "gemm_r.onnx"), n, dt, BACK_TO_BACK)
        compile_package(kiln, os.path.join(d, "gemm_r.onnx"), os.path.join(d, "pkg_r"), "fp32", arch, nvcc)
        pkg_r = Package(os.path.join(d, "pkg_r"))
        bs = [torch.randn(n, n, device="cuda").to(tdt) for _ in range(BACK_TO_BACK)]
        ys = [torch.empty(n, n, device="cuda", dtype=tdt) for _ in range(BACK_TO_BACK)]
        iters_r = max(3, iters // BACK_TO_BACK)
        ms_kiln_r = time_cuda(torch, lambda: pkg_r.run_device([a] + bs, ys), 2, iters_r)

        def torch_r():
            for bi, yi in zip(bs, ys):
                torch.matmul(a, bi, out=yi)
        ms_ref_r = time_cuda(torch, torch_r, 2, iters_r)
        pkg_r.run_device([a] + bs, ys)
        ref_r = torch.matmul(a.float(), bs[-1].float())
        rel_r = ((ys[-1].float() - ref_r).abs().max() / ref_r.abs().max()).item()
        if rel_r > 1e-2:
            ok += f"  (x{BACK_TO_BACK} package DISAGREES: {rel_r:.2e})"
        del bs, ys, ref_r
        extra = ""
        if hopper:
            os.environ["KILN_CUDA_SM"] = "80"
            try:
                sm80 = Package(os.path.join(d, "pkg"))
            finally:
                del os.environ["KILN_CUDA_SM"]
            ms_sm80 = time_cuda(torch, lambda: sm80.run_device([a, b], [y]), 3, iters)
            rel80 = ((y.float() - ref).abs().max() / ref.abs().max()).item()
            extra = f" {(2 * n ** 3 / ms_sm80 / 1e9) / tr:>16.2f}"
            if rel80 > 1e-2:
                ok += "  (mma.sync path DISAGREES)"
            compile_package(kiln, os.path.join(d, "gemm.onnx"), os.path.join(d, "pkg_uniform"), "fp32", arch, nvcc,
                            ["--sm90a-gemm=uniform"])
            uniform = Package(os.path.join(d, "pkg_uniform"))
            ms_uniform = time_cuda(torch, lambda: uniform.run_device([a, b], [y]), 3, iters)
            rel_uniform = ((y.float() - ref).abs().max() / ref.abs().max()).item()
            extra += f" {(2 * n ** 3 / ms_uniform / 1e9) / tr:>15.2f}"
            if rel_uniform > 1e-2:
                ok += "  (uniform sm_90a path DISAGREES)"
        print(f"{n:>6} {dt:>5} {tk:>12.1f} {tr:>14.1f} {tk / tr:>12.2f} {ms_ref_r / ms_kiln_r:>17.2f} {rel:>12.2e}"
              f"{extra}{ok}")
        rows.append(("gemm", n, dt, tk, tr, rel))

    for n in args.sizes:
        for dt in ("fp16", "bf16"):
            try:
                one(n, dt)
            except StepFailed as e:
                print(f"{n:>6} {dt:>5} FAILED: {e}")
                rows.append(("gemm", n, dt, 0.0, 0.0, float("inf")))


def attention_onnx(path, heads, s, d):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    f16 = TensorProto.FLOAT16
    shape = [1, heads, s, d]
    tri = numpy_helper.from_array(np.triu(np.full((s, s), -np.inf), 1).astype(np.float16), "tri")
    scale = numpy_helper.from_array(np.array(1 / np.sqrt(d), dtype=np.float16), "scale")
    nodes = [helper.make_node("Transpose", ["K"], ["Kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["Q", "Kt"], ["S0"]), helper.make_node("Mul", ["S0", "scale"], ["S1"]),
             helper.make_node("Add", ["S1", "tri"], ["S2"]), helper.make_node("Softmax", ["S2"], ["P"], axis=-1),
             helper.make_node("MatMul", ["P", "V"], ["Y"])]
    g = helper.make_graph(nodes, f"attention_{s}_{d}",
                          [helper.make_tensor_value_info(n, f16, shape) for n in ("Q", "K", "V")],
                          [helper.make_tensor_value_info("Y", f16, shape)], [tri, scale])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def attention_sweep(torch, args, kiln, nvcc, arch, rows):
    heads = 8
    print(f"\n== Attention (causal, fp16, {heads} heads): kiln fused vs split back vs PyTorch ==")
    print(f"{'seq':>6} {'head':>5} {'fused ms':>9} {'split ms':>9} {'torch ms':>9} {'fused TFLOPS':>13} "
          f"{'fused/split':>12} {'fused/torch':>12} {'max rel err':>12}")
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)

    def reference(q, k, v):
        if sdpa is not None:
            return sdpa(q, k, v, is_causal=True)
        s = q.shape[-2]
        mask = torch.triu(torch.full((s, s), float("-inf"), device="cuda"), 1)
        return torch.softmax((q @ k.transpose(-1, -2)).float() / q.shape[-1] ** 0.5 + mask, -1).half() @ v

    for d in (64, 128):
        for s in args.attention_lengths:
            try:
                w = os.path.join(args.work, f"attention_{s}_{d}")
                os.makedirs(w, exist_ok=True)
                attention_onnx(os.path.join(w, "attention.onnx"), heads, s, d)
                placement = compile_package(kiln, os.path.join(w, "attention.onnx"), os.path.join(w, "fused"), "fp32",
                                            arch, nvcc)
                if "kiln.Attention" not in placement:
                    raise StepFailed("the attention was not kept whole:\n" + placement)
                run([kiln, "compile", os.path.join(w, "attention.onnx"), "--target=cuda", "-o", os.path.join(w, "split"),
                     "--fused-attention=false"] + ([f"--arch={arch}"] if arch else []))
                run(["sh", os.path.join(w, "split", "build.sh")], env=dict(os.environ, NVCC=nvcc))
                fused = Package(os.path.join(w, "fused"))
                # At S = 4,096 the split-back mask is built by host tasks.
                split = Package(os.path.join(w, "split"), device_only=False)
                q, k, v = (torch.randn(1, heads, s, d, device="cuda").half() for _ in range(3))
                y = torch.empty_like(q)
                iters = max(10, min(200, int(4e11 / (heads * s * s * d))))
                ms_f = time_cuda(torch, lambda: fused.run_device([q, k, v], [y]), 3, iters)
                ms_s = time_cuda(torch, lambda: split.run_device([q, k, v], [y]), 3, iters)
                ms_t = time_cuda(torch, lambda: reference(q, k, v), 3, iters)
                fused.run_device([q, k, v], [y])
                ref = reference(q.float(), k.float(), v.float()) if sdpa is not None else reference(q, k, v).float()
                rel = ((y.float() - ref).abs().max() / ref.abs().max()).item()
                tflops = 2 * heads * s * s * d / ms_f / 1e9  # causal: half of 4 S^2 d
                ok = "" if rel <= 1e-2 else "  DISAGREES"
                print(f"{s:>6} {d:>5} {ms_f:>9.3f} {ms_s:>9.3f} {ms_t:>9.3f} {tflops:>13.1f} {ms_s / ms_f:>12.2f} "
                      f"{ms_t / ms_f:>12.2f} {rel:>12.2e}{ok}")
                rows.append(("attention", s, d, ms_f, ms_t, rel))
            except StepFailed as e:
                print(f"{s:>6} {d:>5} FAILED: {e}")
                rows.append(("attention", s, d, 0.0, 0.0, float("inf")))


def load_export_module():
    spec = importlib.util.spec_from_file_location("export_models", os.path.join(ROOT, "scripts/export_models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def model_latency(torch, args, kiln, nvcc, arch, rows):
    import numpy as np
    exp = load_export_module()
    models_dir = args.models or os.path.join(args.work, "models")
    names = []
    for name in args.names:
        if not os.path.exists(os.path.join(models_dir, name, "model.onnx")):
            print(f"exporting {name} into {models_dir} ...", flush=True)
            try:
                run([sys.executable, os.path.join(ROOT, "scripts/export_models.py"), models_dir, name])
            except StepFailed as e:
                print(f"{name}: export FAILED: {e}")
                rows.append(("model", name, "export", 0.0, 0.0, 0.0, float("inf")))
                continue
        names.append(name)
    print(f"\n== Models: kiln vs PyTorch eager and torch.compile, {torch.cuda.get_device_name()} ==")
    hopper = arch == "sm_90a"
    extra = f" {'sm80 ms':>8} {'sm80 err':>9}" if hopper else ""
    print(f"{'model':>13} {'prec':>5} {'kiln ms':>9} {'eager ms':>9} {'compile ms':>11} {'eager/kiln':>11} "
          f"{'compile/kiln':>13} {'rel err':>9} {'host tasks':>10}{extra}")
    for name in names:
        src = os.path.join(models_dir, name)
        with open(os.path.join(src, "inputs.txt")) as f:
            input_names = f.read().split()
        module, _ = exp.build(name)
        host_inputs = [np.load(os.path.join(src, f"input_{i}.npy")) for i in range(len(input_names))]
        expected = np.load(os.path.join(src, "expected_0.npy"))

        def one(precision, tol):
            d = os.path.join(args.work, f"{name}_{precision}")
            placement = compile_package(kiln, os.path.join(src, "model.onnx"), d, precision, arch, nvcc)
            host_tasks = placement.count("  ->  host:")

            def kiln_run(env_sm=None):
                out_dir = os.path.join(d, "out" if env_sm is None else f"out_sm{env_sm}")
                cmd = [kiln, "run", d, f"--output-dir={out_dir}", f"--repeat={args.iters}"]
                for i, n in enumerate(input_names):
                    cmd += ["--input", f"{n}={os.path.join(src, f'input_{i}.npy')}"]
                env = dict(os.environ)
                if env_sm is not None:
                    env["KILN_CUDA_SM"] = str(env_sm)
                text = run(cmd, env=env)
                line = [l for l in text.splitlines() if l.startswith("latency:")][0]
                got = np.load(os.path.join(out_dir, "output_0.npy")).astype(np.float64)
                return (float(line.split("median ")[1].split(" ms")[0]),
                        float(np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-30)))

            ms_kiln, rel = kiln_run()
            extra = ""
            if hopper:
                ms80, rel80 = kiln_run(80)
                extra = f" {ms80:>8.3f} {rel80:>9.1e}"
                rows.append(("model", name, precision + "/sm80", ms80, 0.0, 0.0, rel80))
            # PyTorch at the same precision, inputs on the device.
            dt = torch.float16 if precision == "fp16" else torch.float32
            mod = module.to("cuda").to(dt) if precision == "fp16" else module.to("cuda").float()
            tin = [torch.from_numpy(x).to("cuda") for x in host_inputs]
            tin = [t.to(dt) if t.is_floating_point() else t for t in tin]
            ms_eager = ms_compiled = float("nan")
            note = ""
            try:
                with torch.no_grad():
                    ms_eager = time_cuda(torch, lambda: mod(*tin), 5, args.iters)
                    if not args.skip_torch_compile:
                        compiled = torch.compile(mod, mode=args.compile_mode)
                        ms_compiled = time_cuda(torch, lambda: compiled(*tin), 5, args.iters)
            except RuntimeError as e:  # PyTorch's side; kiln's figures stand
                note = f"  (PyTorch: {str(e).splitlines()[0][:80]})"
            ok = ("" if rel <= tol else f"  DISAGREES (tolerance {tol})") + note
            print(f"{name:>13} {precision:>5} {ms_kiln:>9.3f} {ms_eager:>9.3f} {ms_compiled:>11.3f} "
                  f"{ms_eager / ms_kiln:>11.2f} {ms_compiled / ms_kiln:>13.2f} {rel:>9.1e} {host_tasks:>10}{extra}{ok}")
            rows.append(("model", name, precision, ms_kiln, ms_eager, ms_compiled, rel))

        for precision, tol in (("fp32", FP32_TOLERANCE), ("fp16", 1e-2)):
            try:
                one(precision, tol)
            except (StepFailed, RuntimeError) as e:
                print(f"{name:>13} {precision:>5} FAILED: {e}")
                rows.append(("model", name, precision, 0.0, 0.0, 0.0, float("inf")))
            module = module.float().cpu()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kiln", default=os.path.join(ROOT, "build/tools/kiln/kiln"), help="the kiln binary")
    p.add_argument("--work", default="/tmp/kiln_cuda_bench", help="where packages and exports go")
    p.add_argument("--models", default="", help="a directory of exported models (default: export into --work)")
    p.add_argument("--sizes", default="1024,2048,4096,8192", help="GEMM sizes (M = N = K)")
    p.add_argument("--iters", type=int, default=50, help="timed runs per model")
    p.add_argument("--names", default="resnet50,bert_encoder",
                   help="exported models to compile and time (scripts/export_models.py's names)")
    p.add_argument("--skip-torch-compile", action="store_true", help="time PyTorch eager only")
    p.add_argument("--compile-mode", default=None,
                   help="torch.compile's mode (default, reduce-overhead, max-autotune, ...)")
    p.add_argument("--skip-gemm", action="store_true")
    p.add_argument("--skip-models", action="store_true")
    p.add_argument("--skip-attention", action="store_true")
    p.add_argument("--attention-lengths", default="128,512,1024,2048,4096", help="attention sequence lengths")
    args = p.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.names = [n for n in args.names.split(",") if n]
    args.attention_lengths = [int(s) for s in args.attention_lengths.split(",") if s]
    try:
        import torch
    except ImportError as e:
        fail(f"PyTorch is not installed ({e})")
    if not torch.cuda.is_available():
        fail("no CUDA GPU: torch.cuda.is_available() is False (run this on a machine with an NVIDIA GPU and driver)")
    nvcc = find_nvcc()
    if not nvcc:
        fail("no nvcc: install the CUDA Toolkit or set NVCC / CUDA_HOME")
    if not os.access(args.kiln, os.X_OK):
        fail(f"no kiln binary at {args.kiln} (build kiln first, or pass --kiln)")
    os.makedirs(args.work, exist_ok=True)
    arch = arch_flag(torch)
    cap = torch.cuda.get_device_capability()
    print(f"GPU: {torch.cuda.get_device_name()} (sm_{cap[0]}{cap[1]}), packages built with "
          f"--arch={arch or 'default'}, PyTorch {torch.__version__}, {nvcc}")
    rows = []
    if not args.skip_gemm:
        gemm_sweep(torch, args, os.path.abspath(args.kiln), nvcc, arch, rows)
    if not args.skip_models:
        model_latency(torch, args, os.path.abspath(args.kiln), nvcc, arch, rows)
    if not args.skip_attention:
        attention_sweep(torch, args, os.path.abspath(args.kiln), nvcc, arch, rows)
    bad = [r for r in rows if (r[0] in ("gemm", "attention") and r[5] > 1e-2) or
           (r[0] == "model" and r[6] > (FP32_TOLERANCE if r[2].startswith("fp32") else 1e-2))]
    print(f"\n{len(rows)} measurements, {len(bad)} outside their tolerance")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
