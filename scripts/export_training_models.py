#!/usr/bin/python3
"""Exports kiln's training models: PyTorch models with their loss, and PyTorch's gradients.

Each model computes a scalar loss from its inputs (data and labels), so that
`kiln opt --passes=training-step` can append the backward pass. Weights are
random from a fixed seed (nothing is downloaded). For each model NAME this
writes, under OUT_DIR/NAME/:
  model.onnx          the exported model (its parameters are initializers)
  input_<i>.npy       its inputs (named in inputs.txt, one per line)
  expected_0.npy      PyTorch's loss for those inputs
  params.txt          the parameters' names, one per line (PyTorch's names)
  running.txt         models in training mode: the BatchNorm running statistics' names
  running_<i>.npy     ... and their values after the step's forward pass
  grad_<i>.npy        PyTorch's gradient of the loss for parameter i
  optimizers.txt      torch.optim runs, one per line: NAME STEPS key=value ...
  <NAME>_<i>.npy      parameter i after STEPS steps of that optimizer on the
                      same inputs (models of up to 1 M parameters)

usage: export_training_models.py OUT_DIR [NAME ...]    (default: every model)
"""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models  # noqa: E402
from export_models import MLP, BertEncoder, GPT2Block  # noqa: E402


class MLPClassifier(nn.Module):
    """The MLP (GELU, tanh) under a cross-entropy loss."""

    def __init__(self):
        super().__init__()
        self.mlp = MLP()

    def forward(self, x, labels):
        return F.cross_entropy(self.mlp(x), labels)


class CNNClassifier(nn.Module):
    """Conv-BN-ReLU, overlapping max pooling, a depthwise conv with ReLU6, average pooling and a classifier
    under a cross-entropy loss."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.dw = nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16)
        self.pw = nn.Conv2d(16, 32, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32, 10)

    def forward(self, x, labels):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, stride=2, padding=1)
        x = F.relu6(self.dw(x))
        x = F.avg_pool2d(F.relu(self.bn2(self.pw(x))), 2)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return F.cross_entropy(self.fc(x), labels)


class BertMaskedLM(nn.Module):
    """The BERT-style encoder with a token head under a cross-entropy loss."""

    def __init__(self):
        super().__init__()
        self.encoder = BertEncoder(vocab=256, layers=1, seq=16)
        self.head = nn.Linear(128, 256)

    def forward(self, ids, labels):
        logits = self.head(self.encoder(ids))
        return F.cross_entropy(logits.reshape(-1, 256), labels.reshape(-1))


class GPT2Regression(nn.Module):
    """The GPT-2-style block under a mean squared error."""

    def __init__(self):
        super().__init__()
        self.block = GPT2Block()

    def forward(self, x, target):
        return ((self.block(x) - target) ** 2).mean()


class WideMLPClassifier(nn.Module):
    """Eight 1024 -> 1024 Linear layers with ReLU between them and a 1024 -> 10 classifier under a
    cross-entropy loss: 8.4 M parameters, 32 MiB of f32 gradients, more than one 25 MiB DDP bucket (so
    the data-parallel steps' AllReduce bucketings differ)."""

    def __init__(self):
        super().__init__()
        layers = [m for _ in range(8) for m in (nn.Linear(1024, 1024), nn.ReLU())]
        self.net = nn.Sequential(*layers, nn.Linear(1024, 10))

    def forward(self, x, labels):
        return F.cross_entropy(self.net(x), labels)


MODELS = {
    "cnn_classifier": (CNNClassifier, lambda: [torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))]),
    "mlp_classifier": (MLPClassifier, lambda: [torch.randn(8, 64), torch.randint(0, 10, (8,))]),
    "bert_mlm": (BertMaskedLM, lambda: [torch.randint(0, 256, (2, 16)), torch.randint(0, 256, (2, 16))]),
    "gpt2_regression": (GPT2Regression, lambda: [torch.randn(1, 16, 128), torch.randn(1, 16, 128)]),
    "mlp_wide": (WideMLPClassifier, lambda: [torch.randn(64, 1024), torch.randint(0, 10, (64,))]),
    # The CNN in training mode: BatchNorm normalizes by the batch's statistics and updates its running ones.
    "cnn_train_bn": (CNNClassifier, lambda: [torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))]),
}

# Models exported and run in training mode (BatchNorm on batch statistics).
TRAINING_MODE = {"cnn_train_bn"}


# torch.optim runs whose parameters kiln's training steps must reproduce:
# (name, steps, class, keyword arguments). Adam's epsilon is raised from its
# default 1e-8 so that gradients that are zero up to rounding (a key bias
# under softmax) do not turn rounding noise into steps of +-lr.
OPTIMIZERS = [
    ("sgd_nesterov", 3, torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("adam", 3, torch.optim.Adam, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-4, weight_decay=0.01)),
    ("adamw", 3, torch.optim.AdamW, dict(lr=0.01, eps=1e-4, weight_decay=0.1)),
]


def optimizer_flags(cls, kwargs):
    flags = [f"optimizer={cls.__name__.lower()}", f"learning-rate={kwargs['lr']!r}"]
    for key, value in kwargs.items():
        if key == "betas":
            flags.append(f"betas={value[0]!r},{value[1]!r}")
        elif key == "eps":
            flags.append(f"epsilon={value!r}")
        elif key == "nesterov":
            flags.append(f"nesterov={str(value).lower()}")
        elif key != "lr":
            flags.append(f"{key.replace('_', '-')}={value!r}")
    return flags


def run_optimizers(make_model, inputs, d):
    """Writes each OPTIMIZERS run's parameters (a fresh model each) and optimizers.txt."""
    lines = []
    for name, steps, cls, kwargs in OPTIMIZERS:
        model = make_model()
        opt = cls(model.parameters(), **kwargs)
        for _ in range(steps):
            opt.zero_grad()
            model(*inputs).backward()
            opt.step()
        for i, (_, p) in enumerate(model.named_parameters()):
            np.save(os.path.join(d, f"{name}_{i}.npy"), p.detach().numpy())
        lines.append(" ".join([name, str(steps)] + optimizer_flags(cls, kwargs)))
    with open(os.path.join(d, "optimizers.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def fresh_model(ctor, train=False, running=None):
    """The model from seed 0, in training or inference mode; `running` overrides BatchNorm running statistics."""
    torch.manual_seed(0)
    model = ctor().train(train)
    # Distinct normalization parameters (the exporter merges identical ones)
    # and non-trivial running statistics.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.LayerNorm, nn.BatchNorm2d)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
        for key, value in (running or {}).items():
            model.get_buffer(key).copy_(torch.from_numpy(value.copy()))
    return model


def export(name, out_dir):
    ctor, make_inputs = MODELS[name]
    train = name in TRAINING_MODE
    fresh_model(ctor)
    inputs = make_inputs()
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    names = [f"input_{i}" for i in range(len(inputs))]
    # Tracing a model in training mode runs its forward pass, which updates
    # the BatchNorm running statistics that are then exported: the model is
    # exported first, and PyTorch's runs start from the statistics exported.
    torch.onnx.export(fresh_model(ctor, train), tuple(inputs), os.path.join(d, "model.onnx"), opset_version=14,
                      input_names=names, output_names=["loss"], do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING if train else torch.onnx.TrainingMode.PRESERVE)
    running = None
    if train:
        initializers = {i.name: numpy_helper.to_array(i) for i in onnx.load(os.path.join(d, "model.onnx")).graph.initializer}
        running = {k: initializers[k] for k, _ in fresh_model(ctor).named_buffers() if "running_" in k}
    model = fresh_model(ctor, train, running)
    loss = model(*inputs)
    params = list(model.named_parameters())
    grads = torch.autograd.grad(loss, [p for _, p in params])
    if train:
        # The running statistics after the step's forward pass (PyTorch's
        # running variance uses the batch's unbiased variance, ONNX's the
        # population variance).
        stats = [(k, b) for k, b in model.named_buffers() if "running_" in k]
        for i, (_, b) in enumerate(stats):
            np.save(os.path.join(d, f"running_{i}.npy"), b.detach().numpy())
        with open(os.path.join(d, "running.txt"), "w") as f:
            f.write("\n".join(k for k, _ in stats) + "\n")
    for i, t in enumerate(inputs):
        np.save(os.path.join(d, f"input_{i}.npy"), t.numpy())
    np.save(os.path.join(d, "expected_0.npy"), loss.detach().numpy())
    for i, g in enumerate(grads):
        np.save(os.path.join(d, f"grad_{i}.npy"), g.numpy())
    with open(os.path.join(d, "inputs.txt"), "w") as f:
        f.write("\n".join(names) + "\n")
    with open(os.path.join(d, "params.txt"), "w") as f:
        f.write("\n".join(n for n, _ in params) + "\n")
    if sum(p.numel() for _, p in params) <= 1 << 20:
        run_optimizers(lambda: fresh_model(ctor, train, running), inputs, d)


if __name__ == "__main__":
    sys.exit(export_models.main(__doc__, MODELS, export, "export_training_models.py"))
