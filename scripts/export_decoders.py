#!/usr/bin/python3
"""Exports kiln's decoder LLMs with a static KV cache, and PyTorch's greedy tokens.

Each decoder is GPT-2-shaped (learned positions, pre-LN blocks, tanh-GELU
MLP, the output projection tied to the token embedding) with random weights
from a fixed seed (nothing is downloaded). Its cache is a fixed-size tensor
per layer, K and V each [batch, heads, cache_len, head_dim]; the position of
the first new token is an input, the new K and V are written at it, and
attention is masked beyond it. One exported step reads T tokens and gives:

  token.next          the greedy next token (ArgMax of the last position's logits), i64[batch, 1]
  generated           the same token again, an output no input takes (so a loop prints it each step)
  pos.next            pos + T
  k_<l>.next, v_<l>.next   the caches with the step's K and V written

so every output NAME.next feeds input NAME of the next step: `kiln run
--steps=N` on the decode step (T = 1) is greedy generation.

For each decoder NAME this writes, under OUT_DIR/NAME/:
  prefill.onnx        the step over the whole prompt (T = prompt length)
  decode.onnx         the step over one token (T = 1)
  prompt.npy          the prompt, i64[batch, prompt]
  pos0.npy            i64 0 (the prompt's position)
  cache0.npy          one zero cache tensor [batch, heads, cache_len, head_dim]
  tokens.npy          PyTorch's greedy tokens after the prompt, i64[batch, steps]
  config.txt          key=value lines (layers, d_model, heads, vocab, cache_len, prompt, steps)
  inputs.txt          the decode step's inputs, in order, one name per line

usage: export_decoders.py OUT_DIR [NAME ...]    (default: every decoder)
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_models import TRACING_EXPORTER  # noqa: E402


class CachedAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x, pos, k_cache, v_cache):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.view(b, t, self.h, self.dh).transpose(1, 2)
        k = k.view(b, t, self.h, self.dh).transpose(1, 2)
        v = v.view(b, t, self.h, self.dh).transpose(1, 2)
        # The step's K and V written at positions pos .. pos+t-1.
        where = (pos + torch.arange(t, device=x.device)).view(1, 1, t, 1).expand(b, self.h, t, self.dh)
        k_all = k_cache.scatter(2, where, k)
        v_all = v_cache.scatter(2, where, v)
        att = (q @ k_all.transpose(-2, -1)) * (1.0 / math.sqrt(self.dh))
        # Query i (at pos + i) sees keys 0 .. pos + i.
        keys = torch.arange(k_cache.shape[2], device=x.device).view(1, -1)
        queries = (pos + torch.arange(t, device=x.device)).view(-1, 1)
        att = att.masked_fill(keys > queries, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v_all).transpose(1, 2).reshape(b, t, d)
        return self.proj(y), k_all, v_all


class Decoder(nn.Module):
    def __init__(self, vocab, d, heads, layers, cache_len):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(cache_len, d)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict(dict(
                ln1=nn.LayerNorm(d), att=CachedAttention(d, heads), ln2=nn.LayerNorm(d),
                fc1=nn.Linear(d, 4 * d), fc2=nn.Linear(4 * d, d))))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, token, pos, *caches):
        t = token.shape[1]
        x = self.wte(token) + self.wpe(pos + torch.arange(t, device=token.device)).unsqueeze(0)
        new_caches = []
        for i, blk in enumerate(self.blocks):
            a, k_all, v_all = blk["att"](blk["ln1"](x), pos, caches[2 * i], caches[2 * i + 1])
            x = x + a
            x = x + blk["fc2"](F.gelu(blk["fc1"](blk["ln2"](x)), approximate="tanh"))
            new_caches += [k_all, v_all]
        logits = self.ln_f(x[:, -1:, :]) @ self.wte.weight.t()
        next_token = torch.argmax(logits, dim=-1)
        return (next_token, next_token, pos + t, *new_caches)


# name -> (vocab, d_model, heads, layers, cache_len, batch, prompt, steps)
DECODERS = {
    # Small enough for the test suite on the simulator.
    "tiny_decoder": (256, 64, 2, 2, 32, 1, 8, 8),
    # Heads of 64 over a cache of four 64-key tiles: the decode attention
    # kernel, whose live tiles a timing-only run must find as a functional
    # one does.
    "tiny_cache_decoder": (256, 128, 2, 1, 256, 1, 8, 4),
    # GPT-2 small's shape.
    "gpt2_small_decoder": (50257, 768, 12, 12, 1024, 1, 64, 32),
}


def input_names(layers):
    return ["token", "pos"] + [f"{kv}_{l}" for l in range(layers) for kv in ("k", "v")]


def build(name):
    """The decoder `name` with its weights and its prompt, as export() makes them."""
    vocab, d, heads, layers, cache_len, batch, prompt_len, steps = DECODERS[name]
    torch.manual_seed(0)
    model = Decoder(vocab, d, heads, layers, cache_len).eval()
    # Blocks that move the residual stream (PyTorch's default init leaves it
    # to the token's own embedding, and greedy decoding repeats one token).
    for pname, p in model.named_parameters():
        if p.dim() == 2 and not pname.startswith(("wte", "wpe")):
            nn.init.normal_(p, std=0.4 / math.sqrt(d / 64))
    prompt = torch.randint(0, vocab, (batch, prompt_len))
    return model, prompt


def export(name, out_dir):
    vocab, d, heads, layers, cache_len, batch, prompt_len, steps = DECODERS[name]
    model, prompt = build(name)
    out = os.path.join(out_dir, name)
    os.makedirs(out, exist_ok=True)
    pos0 = torch.tensor(0, dtype=torch.int64)
    cache = torch.zeros(batch, heads, cache_len, d // heads)
    names = input_names(layers)
    outputs = ["token.next", "generated"] + [n + ".next" for n in names[1:]]
    for file, tokens in (("prefill.onnx", prompt), ("decode.onnx", prompt[:, :1])):
        torch.onnx.export(model, (tokens, pos0, *[cache] * (2 * layers)), os.path.join(out, file),
                          opset_version=14, input_names=names, output_names=outputs,
                          do_constant_folding=False, **TRACING_EXPORTER)
    # PyTorch's greedy generation: the prompt in one step, then one token a step.
    generated = []
    with torch.no_grad():
        token, _, pos, *caches = model(prompt, pos0, *[cache.clone() for _ in range(2 * layers)])
        generated.append(token)
        for _ in range(steps - 1):
            token, _, pos, *caches = model(token, pos, *caches)
            generated.append(token)
    np.save(os.path.join(out, "prompt.npy"), prompt.numpy())
    np.save(os.path.join(out, "pos0.npy"), pos0.numpy())
    np.save(os.path.join(out, "cache0.npy"), cache.numpy())
    np.save(os.path.join(out, "tokens.npy"), torch.cat(generated, dim=1).numpy())
    with open(os.path.join(out, "config.txt"), "w") as f:
        for k, v in zip(("vocab", "d_model", "heads", "layers", "cache_len", "batch", "prompt", "steps"),
                        DECODERS[name]):
            f.write(f"{k}={v}\n")
    with open(os.path.join(out, "inputs.txt"), "w") as f:
        f.write("\n".join(names) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import export_models  # noqa: E402
    sys.exit(export_models.main(__doc__, DECODERS, export, "export_decoders.py"))
