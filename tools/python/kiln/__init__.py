"""kiln from Python: compile ONNX models and PyTorch modules for a target, run them.

    import kiln
    m = kiln.compile("model.onnx", target=NAME, precision="fp16")  # NAME: one of kiln.targets()
    y = m(x)                  # NumPy arrays or torch tensors in, the same kind out
    print(m.report())         # per-task cycles, utilization and bound (targets whose runs report them)
    m.trace("run.json", x)    # a run with its trace written (Perfetto, chrome://tracing)
    print(m.explain())        # where each node runs, and why

    net = torchvision.models.resnet18().eval()
    m = kiln.compile(net, [torch.randn(1, 3, 224, 224)], target=NAME)

A model is an ONNX file path (or a .kir file), the bytes of an ONNX model,
or a torch.nn.Module with example inputs (exported with torch.onnx.export).
Settings a target declares (`kiln compile --target=NAME --help`) are keyword
arguments: kiln.compile(path, target=NAME, SETTING=VALUE).
Every failure raises kiln.Error with kiln's one-line message.
"""
import difflib
import os
import shutil
import sys
import tempfile
import weakref

from . import _kiln

Error = _kiln.Error
__version__ = _kiln.version
target_api_version = _kiln.target_api_version

__all__ = ["Error", "CompiledModel", "compile", "load", "targets", "register_torch_backend"]


def targets():
    """The registered targets' names."""
    return list(_kiln.targets())


def _did_you_mean(name, candidates, prefix=""):
    """" (did you mean 'x'?)" for the candidate nearest a misspelled name, else ""."""
    near = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{prefix}{near[0]}'?)" if near else ""


def _is_torch_module(obj):
    try:
        import torch
    except ImportError:
        return False
    return isinstance(obj, torch.nn.Module)


def _export_module(module, example_inputs, path, opset):
    import inspect

    import torch

    if example_inputs is None:
        raise Error("compiling a torch.nn.Module needs example_inputs (a list of tensors it takes)")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = [example_inputs]
    example_inputs = tuple(example_inputs)
    with torch.no_grad():
        outputs = module(*example_inputs)
    count = 1 if isinstance(outputs, torch.Tensor) else len(outputs)
    # The tracing exporter where PyTorch offers a choice (2.9 and later
    # default to torch.export).
    extra = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(module, example_inputs, path, opset_version=opset,
                      input_names=[f"input_{i}" for i in range(len(example_inputs))],
                      output_names=[f"output_{i}" for i in range(count)], **extra)


def compile(model, example_inputs=None, *, target=None, precision="fp32", fusion=True,
            passes="default", opset=14, **settings):
    """Compiles `model` for `target`; returns a CompiledModel.

    model: a path to a .onnx or .kir file, the bytes of an ONNX model, or a
    torch.nn.Module (then `example_inputs`, the tensors it takes, are
    required, and `opset` is the ONNX opset it is exported at).
    precision: fp32, fp16, bf16 or mixed. fusion=False gives every op a
    kernel of its own. passes: the optimizer pipeline ("default": the
    target's; "none"). Other keyword arguments are the target's settings.
    target: a name from kiln.targets(); None is the golden target (kiln's
    reference executor).
    """
    if target is None:
        target = _kiln.default_target()
    workdir = tempfile.mkdtemp(prefix="kiln-")
    try:
        if isinstance(model, (bytes, bytearray, memoryview)):
            path = os.path.join(workdir, "model.onnx")
            with open(path, "wb") as f:
                f.write(bytes(model))
        elif _is_torch_module(model):
            path = os.path.join(workdir, "model.onnx")
            _export_module(model, example_inputs, path, opset)
        elif isinstance(model, (str, os.PathLike)):
            path = os.fspath(model)
            if not os.path.exists(path):
                raise Error(f"{path}: cannot open file")
        else:
            raise Error(f"a model is a path, ONNX bytes or a torch.nn.Module, not {type(model).__name__}")
        # A misspelled keyword of compile() itself would otherwise reach the
        # target as a setting it does not take.
        for key in settings:
            hint = _did_you_mean(key, ["target", "precision", "fusion", "passes", "opset", "example_inputs"])
            if hint:
                raise Error(f"compile() has no argument '{key}'{hint}")
        out = os.path.join(workdir, "model" + _kiln.artifact_suffix(target))
        pairs = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in settings.items()]
        explanation = _kiln.compile(path, out, target, precision, fusion, passes, pairs, True)
        compiled = CompiledModel(out, explanation=explanation)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    compiled._own(workdir)
    return compiled


def load(path):
    """An artifact compiled earlier (`kiln compile`, CompiledModel.save)."""
    return CompiledModel(os.fspath(path))


class CompiledModel:
    """A compiled model on its target's runtime: call it with its inputs."""

    def __init__(self, path, explanation=None):
        self._compiled = _kiln.Compiled(path)
        self._path = path
        self._explanation = explanation
        self._traced = False

    def _own(self, workdir):
        self._finalizer = weakref.finalize(self, shutil.rmtree, workdir, True)

    @property
    def path(self):
        """The artifact's path (a temporary one for kiln.compile: save() keeps it)."""
        return self._path

    @property
    def target(self):
        return self._compiled.target

    @property
    def inputs(self):
        """(name, dtype, dims) of each input; -1 for a dim known only at run time."""
        return list(self._compiled.inputs)

    @property
    def outputs(self):
        return list(self._compiled.outputs)

    def _arrays(self, args, kwargs):
        names = [name for name, _, _ in self._compiled.inputs]
        if len(args) > len(names):
            raise Error(f"the model takes {len(names)} inputs, got {len(args)}")
        values = list(args) + [None] * (len(names) - len(args))
        for key, value in kwargs.items():
            if key not in names:
                raise Error(f"the model has no input named '{key}'{_did_you_mean(key, names)}; "
                            f"it takes {', '.join(names)}")
            i = names.index(key)
            if i < len(args):
                raise Error(f"input '{key}' is given twice")
            values[i] = value
        as_torch = False
        arrays = []
        for v in values:
            if v is not None and type(v).__module__.startswith("torch"):
                as_torch = True
                v = v.detach().cpu().numpy()
            arrays.append(v)
        return arrays, as_torch

    def run(self, *args, timing_only=False, **kwargs):
        """Runs the inputs (positional in the model's order, or by name);
        returns the output, or a tuple of them. An input left out reads its
        initial value (a training step's parameters). With timing_only (a
        simulated target), nothing is computed and the outputs are None."""
        return self._run(args, kwargs, timing_only=timing_only, trace=False)

    __call__ = run

    def _run(self, args, kwargs, timing_only, trace):
        arrays, as_torch = self._arrays(args, kwargs)
        outputs = self._compiled.run(arrays, timing_only, trace)
        self._traced = trace
        if as_torch:
            import torch
            outputs = [None if o is None else torch.from_numpy(o) for o in outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def report(self, kind="text"):
        """The last run's report: text (the table `kiln run --report` prints),
        tasks (CSV, one row per task: what `kiln diff` compares), csv (per
        kernel and pipe), roofline_csv or roofline_svg."""
        return self._compiled.report(kind).decode()

    def trace(self, path, *args, timing_only=False, **kwargs):
        """Writes the trace of a run to `path`: of a run of the inputs given,
        or, with none, of the last run made by trace(). Its form follows the
        name, as `kiln run --trace`: Perfetto's protobuf for .pftrace,
        gzip'd JSON for .gz, Chrome trace-event JSON otherwise."""
        if args or kwargs:
            self._run(args, kwargs, timing_only=timing_only, trace=True)
        elif not self._traced:
            raise Error("trace() needs the inputs of a run to trace")
        with open(path, "wb") as f:
            f.write(self._compiled.report(_kiln.trace_kind(str(path))))

    def explain(self):
        """Where each node runs and why (`kiln compile --explain-placement`)."""
        if self._explanation is None:
            raise Error("explain() needs a model compiled by kiln.compile (this one was loaded)")
        return self._explanation

    def save(self, path):
        """Copies the artifact to `path` (kiln.load and `kiln run` read it)."""
        if os.path.isdir(self._path):
            shutil.copytree(self._path, path, dirs_exist_ok=True)
        else:
            shutil.copyfile(self._path, path)

    def __repr__(self):
        return f"<kiln.CompiledModel {self.target} {os.path.basename(self._path)}>"


def _torch_compile_backend(gm, example_inputs, **options):
    """torch.compile(m, backend="kiln"): the FX graph through ONNX into kiln."""
    compiled = compile(gm, list(example_inputs), **options)

    def run(*args):
        out = compiled(*args)
        return out if isinstance(out, tuple) else (out,)

    return run


def register_torch_backend():
    """Makes torch.compile(m, backend="kiln") available; False where this
    PyTorch has no torch.compile (before 2.0). Done on import when torch was
    imported first."""
    try:
        import torch
        register = torch._dynamo.register_backend
    except (ImportError, AttributeError):
        return False
    try:
        register(name="kiln")(_torch_compile_backend)
    except Exception:  # registered already
        pass
    return True


if "torch" in sys.modules:
    register_torch_backend()
