#!/usr/bin/python3
"""Exports kiln's set of PyTorch models to ONNX, with inputs and PyTorch's outputs.

Every model gets random weights from a fixed seed (nothing is downloaded).
For each model NAME this writes, under OUT_DIR/NAME/:
  model.onnx          the exported model
  input_<i>.npy       its inputs (named in inputs.txt, one per line)
  expected_<i>.npy    PyTorch's outputs for those inputs

usage: export_models.py OUT_DIR [NAME ...]    (default: every model)
"""
import inspect
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyCNN(nn.Module):
    """Conv-BN-ReLU blocks, pooling and a classifier: the bundled example."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return F.softmax(self.fc(x), dim=-1)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.Tanh(),
                                 nn.Linear(256, 10))

    def forward(self, x):
        return self.net(x)


class SelfAttention(nn.Module):
    def __init__(self, d, heads, causal):
        super().__init__()
        self.h, self.causal = heads, causal
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.view(b, t, self.h, d // self.h).transpose(1, 2)
        k = k.view(b, t, self.h, d // self.h).transpose(1, 2)
        v = v.view(b, t, self.h, d // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / (d // self.h) ** 0.5
        if self.causal:
            mask = torch.tril(torch.ones(t, t, dtype=torch.bool, device=x.device))
            att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.proj(y)


class BertEncoder(nn.Module):
    """A BERT-style encoder: embeddings, post-LN attention and GELU MLP layers."""

    def __init__(self, vocab=1000, d=128, heads=4, layers=2, seq=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.ln0 = nn.LayerNorm(d)
        self.layers = nn.ModuleList()
        for _ in range(layers):
            self.layers.append(nn.ModuleDict(dict(
                att=SelfAttention(d, heads, causal=False), ln1=nn.LayerNorm(d),
                fc1=nn.Linear(d, 4 * d), fc2=nn.Linear(4 * d, d), ln2=nn.LayerNorm(d))))

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        x = self.ln0(self.tok(ids) + self.pos(pos))
        for l in self.layers:
            x = l["ln1"](x + l["att"](x))
            x = l["ln2"](x + l["fc2"](F.gelu(l["fc1"](x))))
        return x


class GPT2Block(nn.Module):
    """A GPT-2-style decoder block: pre-LN causal attention and tanh-GELU MLP."""

    def __init__(self, d=128, heads=4):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.att = SelfAttention(d, heads, causal=True)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.att(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


def torchvision_model(name):
    import torchvision
    return getattr(torchvision.models, name)(weights=None)


class SSDLite(nn.Module):
    """torchvision's SSDlite320 detector (MobileNetV3 backbone): its post-processing
    (score threshold, per-class top-k, NMS) gives outputs whose length depends
    on the data."""

    def __init__(self):
        super().__init__()
        import torchvision
        self.detector = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None,
                                                                                   weights_backbone=None)
        # Random weights give near-uniform class scores, ranked by rounding
        # alone; wider logits make the detections' order the model's.
        with torch.no_grad():
            for block in self.detector.head.classification_head.module_list:
                block[-1].weight.mul_(8.0)

    def forward(self, x):
        d = self.detector(list(x))[0]
        return d["boxes"], d["scores"], d["labels"]


# PyTorch 2.9 and later export through torch.export unless told otherwise;
# the set is defined by the tracing exporter's graphs (the shape plumbing the
# optimizer's tests expect), so ask for it where the choice exists.
TRACING_EXPORTER = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}

# name -> (constructor, example inputs, opset)
MODELS = {
    "tiny_cnn": (TinyCNN, lambda: [torch.randn(1, 3, 32, 32)], 13),
    "mlp": (MLP, lambda: [torch.randn(4, 64)], 13),
    "bert_encoder": (BertEncoder, lambda: [torch.randint(0, 1000, (2, 32))], 14),
    "gpt2_block": (GPT2Block, lambda: [torch.randn(1, 16, 128)], 14),
    "resnet18": (lambda: torchvision_model("resnet18"), lambda: [torch.randn(1, 3, 224, 224)], 13),
    "resnet50": (lambda: torchvision_model("resnet50"), lambda: [torch.randn(1, 3, 224, 224)], 13),
    "mobilenet_v2": (lambda: torchvision_model("mobilenet_v2"), lambda: [torch.randn(1, 3, 224, 224)], 13),
    "ssdlite": (SSDLite, lambda: [torch.rand(1, 3, 320, 320)], 13),
}


def build(name):
    """Model `name` in eval mode, seeded as exported, and its example inputs."""
    ctor, make_inputs, _ = MODELS[name]
    torch.manual_seed(0)
    model = ctor().eval()
    # Give BatchNorm layers non-trivial statistics so folding them is tested.
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return model, make_inputs()


def export(name, out_dir):
    opset = MODELS[name][2]
    model, inputs = build(name)
    with torch.no_grad():
        outputs = model(*inputs)
    if isinstance(outputs, torch.Tensor):
        outputs = [outputs]
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    names = [f"input_{i}" for i in range(len(inputs))]
    torch.onnx.export(model, tuple(inputs), os.path.join(d, "model.onnx"), opset_version=opset,
                      input_names=names, output_names=[f"output_{i}" for i in range(len(outputs))],
                      do_constant_folding=False, **TRACING_EXPORTER)
    for i, t in enumerate(inputs):
        np.save(os.path.join(d, f"input_{i}.npy"), t.numpy())
    for i, t in enumerate(outputs):
        np.save(os.path.join(d, f"expected_{i}.npy"), t.numpy())
    with open(os.path.join(d, "inputs.txt"), "w") as f:
        f.write("\n".join(names) + "\n")


def main(doc=__doc__, models=MODELS, export_one=None, prog="export_models.py"):
    """Exports the models named on the command line (all of `models` when none)."""
    if len(sys.argv) < 2:
        print(doc, file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    names = sys.argv[2:] or list(models)
    for n in names:
        if n not in models:
            print(f"{prog}: unknown model '{n}' (known: {', '.join(models)})", file=sys.stderr)
            return 2
        (export_one or export)(n, out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
