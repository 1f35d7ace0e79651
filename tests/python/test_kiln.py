"""The Python module (tools/python): models from paths, ONNX bytes and
torch.nn.Modules compiled for the reference and npusim targets, their
outputs against PyTorch's, reports, traces, placement, and errors as
kiln.Error. Run by ctest (label python) with PYTHONPATH at the build's
python/ folder, under Debian's /usr/bin/python3."""
import gzip
import json
import os
import sys
import tempfile
import unittest

import numpy as np
import torch

import kiln

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TINY = os.path.join(ROOT, "examples", "models", "tiny_cnn")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import export_models  # noqa: E402  (the model set's PyTorch definitions)


def module(name):
    """A model of scripts/export_models.py as it is exported, and its example inputs."""
    return export_models.build(name)


class Models(unittest.TestCase):
    def test_onnx_path_and_bytes(self):
        x = np.load(os.path.join(TINY, "input_0.npy"))
        expected = np.load(os.path.join(TINY, "expected_0.npy"))
        with open(os.path.join(TINY, "model.onnx"), "rb") as f:
            data = f.read()
        for target in ("reference", "npusim"):
            for model in (os.path.join(TINY, "model.onnx"), data):
                m = kiln.compile(model, target=target)
                self.assertEqual(m.target, target)
                y = m(x)
                self.assertIsInstance(y, np.ndarray)
                np.testing.assert_allclose(y, expected, rtol=1e-3, atol=1e-5)

    def test_torch_modules_against_pytorch(self):
        # ResNet-18 and the BERT encoder of the exported model set, from
        # their nn.Modules, on both targets; torch tensors in and out.
        for name in ("resnet18", "bert_encoder"):
            net, inputs = module(name)
            with torch.no_grad():
                expected = net(*inputs)
            for target in ("reference", "npusim"):
                with self.subTest(model=name, target=target):
                    m = kiln.compile(net, inputs, target=target)
                    y = m(*inputs)
                    self.assertIsInstance(y, torch.Tensor)
                    torch.testing.assert_close(y, expected, rtol=1e-3, atol=1e-4)

    def test_inputs_by_name_and_outputs(self):
        m = kiln.compile(os.path.join(TINY, "model.onnx"))
        (name, dtype, dims), = m.inputs
        self.assertEqual((name, dtype, dims), ("input_0", "f32", [1, 3, 32, 32]))
        x = np.load(os.path.join(TINY, "input_0.npy"))
        np.testing.assert_array_equal(m(input_0=x), m(x))
        self.assertEqual(m.outputs[0][0], "output_0")

    def test_fp16_and_settings(self):
        x = np.load(os.path.join(TINY, "input_0.npy"))
        expected = np.load(os.path.join(TINY, "expected_0.npy"))
        machine = os.path.join(ROOT, "sim", "machines", "ascend910b-like.textproto")
        m = kiln.compile(os.path.join(TINY, "model.onnx"), target="npusim", precision="fp16", machine=machine)
        np.testing.assert_allclose(m(x), expected, rtol=5e-2, atol=5e-2)
        self.assertIn("910b", m.report().splitlines()[0].lower())


class Reports(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.x = np.load(os.path.join(TINY, "input_0.npy"))
        cls.m = kiln.compile(os.path.join(TINY, "model.onnx"), target="npusim")
        cls.m(cls.x)

    def test_report_and_tasks(self):
        text = self.m.report()
        self.assertIn("task (first batch)", text)
        self.assertIn("total:", text)
        tasks = self.m.report("tasks").splitlines()
        self.assertTrue(tasks[0].startswith("task,engine,cycles"))
        self.assertTrue(tasks[-1].startswith("total,"))

    def test_trace(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.json")
            self.m.trace(path, self.x)
            with open(path) as f:
                events = json.load(f)
            events = events["traceEvents"] if isinstance(events, dict) else events
            self.assertGreater(len(events), 10)
            self.m.trace(path + ".gz", self.x)
            with gzip.open(path + ".gz", "rt") as f:
                self.assertIn("traceEvents", json.load(f))
            # Perfetto's protobuf: packets (field 1, length-delimited), the
            # first a track descriptor of the chip's root track.
            self.m.trace(os.path.join(d, "run.pftrace"))
            with open(os.path.join(d, "run.pftrace"), "rb") as f:
                raw = f.read()
            self.assertEqual(raw[0], 0x0A)
            self.assertIn(b"simulated chip", raw)
            with open(path, "rb") as f:
                self.assertLess(len(raw), len(f.read()))

    def test_explain(self):
        self.assertIn("cube", self.m.explain())

    def test_timing_only(self):
        self.assertIsNone(self.m(self.x, timing_only=True))
        self.assertIn("total:", self.m.report())

    def test_save_and_load(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "tiny.kiln")
            self.m.save(path)
            loaded = kiln.load(path)
            np.testing.assert_array_equal(loaded(self.x), self.m(self.x))
            with self.assertRaisesRegex(kiln.Error, "loaded"):
                loaded.explain()


class Errors(unittest.TestCase):
    def test_each_is_a_kiln_error_of_one_line(self):
        tiny = os.path.join(TINY, "model.onnx")
        x = np.load(os.path.join(TINY, "input_0.npy"))
        cases = [
            (lambda: kiln.compile("no_such_model.onnx"), "cannot open file"),
            (lambda: kiln.compile(tiny, target="nosuch"), "nosuch"),
            (lambda: kiln.compile(tiny, target="npusim", precision="fp8"), "precision must be"),
            (lambda: kiln.compile(tiny, target="npusim", no_such_setting=1), "no_such_setting"),
            (lambda: kiln.compile(tiny, target="reference", machine="m.textproto"), "machine"),
            (lambda: kiln.compile(b"not an onnx model"), "not a valid ONNX model"),
            (lambda: kiln.compile(torch.nn.Linear(2, 2)), "example_inputs"),
            (lambda: kiln.compile(42), "not int"),
            (lambda: kiln.compile(tiny)(np.zeros((2, 2), np.float32)), "expects f32[1,3,32,32]"),
            (lambda: kiln.compile(tiny)(x, x), "takes 1 inputs"),
            (lambda: kiln.compile(tiny)(nope=x), "no input named 'nope'"),
            (lambda: kiln.compile(tiny)(inptu_0=x), "(did you mean 'input_0'?)"),
            (lambda: kiln.compile(tiny, target="npusim", precison="fp16"), "no argument 'precison' (did you mean"),
            (lambda: kiln.compile(tiny).report(), "no reports"),
            (lambda: kiln.compile(tiny, target="npusim").report("pie"), "report kind"),
            (lambda: kiln.compile(tiny, target="npusim").trace("t.json"), "inputs of a run"),
            (lambda: kiln.load("no_such.kiln"), "cannot open file"),
        ]
        for call, message in cases:
            with self.subTest(message=message):
                with self.assertRaises(kiln.Error) as caught:
                    call()
                self.assertIn(message, str(caught.exception))
                self.assertNotIn("\n", str(caught.exception))
        self.assertTrue(issubclass(kiln.Error, RuntimeError))


class TorchCompile(unittest.TestCase):
    @unittest.skipUnless(hasattr(torch, "compile"),
                         f"PyTorch {torch.__version__} has no torch.compile (it came with 2.0; Debian's is 1.13)")
    def test_backend(self):
        self.assertTrue(kiln.register_torch_backend())
        net, inputs = module("tiny_cnn")
        with torch.no_grad():
            expected = net(*inputs)
            got = torch.compile(net, backend="kiln")(*inputs)
        torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-5)


if __name__ == "__main__":
    unittest.main()
