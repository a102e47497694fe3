#!/usr/bin/env python3
"""Generate tests/data/training/*.safetensors: short PyTorch training runs that ferry must
reproduce step for step (tests/test_training_parity.cpp).

Regenerate (from the repository root), with Debian's PyTorch and the safetensors package:

    apt-get install -y python3-torch python3-venv   # Debian 12: python3-torch 1.13.1+dfsg-4
    /usr/bin/python3 -m venv --system-site-packages /tmp/refvenv
    /tmp/refvenv/bin/pip install safetensors==0.4.5
    /tmp/refvenv/bin/python tools/gen_training_reference.py

The committed files were made with torch 1.13.0a0 (python3-torch 1.13.1+dfsg-4) and
safetensors 0.4.5, on the CPU with one thread. The numbers are deterministic; the bytes
of two runs may still differ, because the safetensors package writes the __metadata__
keys in hash-map order.

Each file is written by PyTorch's safetensors package, so the test also proves that
ferry loads PyTorch's files. It holds:
  init.<name>    the model's parameters before training (named_parameters: a tied
                 parameter once, under its first name)
  data.<name>    the inputs: every batch, stacked (data.x / data.y, or data.tokens)
  loss           f32 [steps]: the loss of each step, computed before that step's update
  final.<name>   the parameters after the last step
and __metadata__ with the model, the optimizer and its options, the number of steps and
the torch version.

Runs:
  mlp_adam       Linear(20, 32) - GELU - Linear(32, 5), cross_entropy, Adam(lr=1e-2),
                 20 steps over 4 batches of 16
  mlp_sgd        the same model, SGD(lr=0.1, momentum=0.9, nesterov, weight_decay=1e-3)
  tied_adamw     Embedding(50, 16) - LayerNorm(16) - a bias-free Linear(16, 50) whose weight
                 is the embedding's (tied), next-token cross_entropy, AdamW(lr=1e-2,
                 weight_decay=0.01), 15 steps over 3 batches of 4 sequences of 8 tokens
"""

import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                       "training")


def mlp():
    return nn.Sequential(nn.Linear(20, 32), nn.GELU(), nn.Linear(32, 5))


class Tied(nn.Module):
    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight  # one tensor, two names

    def forward(self, tokens):
        return self.head(self.norm(self.emb(tokens)))


def params(model, prefix):
    return {prefix + n: p.detach().clone().contiguous() for n, p in model.named_parameters()}


def train(name, model, opt, batches, loss_fn, steps, meta):
    tensors = params(model, "init.")
    losses = []
    for step in range(steps):
        inputs = batches[step % len(batches)]
        opt.zero_grad()
        loss = loss_fn(model, *inputs)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    tensors.update(params(model, "final."))
    tensors["loss"] = torch.tensor(losses, dtype=torch.float32)
    return tensors, dict(meta, steps=str(steps), torch_version=torch.__version__)


def mlp_runs():
    torch.manual_seed(0)
    x = torch.randn(4, 16, 20)
    y = torch.randint(0, 5, (4, 16))
    batches = [(x[i], y[i]) for i in range(4)]
    loss = lambda m, xb, yb: F.cross_entropy(m(xb), yb)  # noqa: E731
    data = {"data.x": x, "data.y": y}
    runs = {}
    for name, make_opt, meta in [
        ("mlp_adam", lambda p: torch.optim.Adam(p, lr=1e-2),
         {"optimizer": "Adam", "options": json.dumps({"lr": 1e-2})}),
        ("mlp_sgd", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                              weight_decay=1e-3),
         {"optimizer": "SGD", "options": json.dumps(
             {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3})}),
    ]:
        torch.manual_seed(1)
        model = mlp()
        tensors, md = train(name, model, make_opt(model.parameters()), batches, loss, 20,
                            dict(meta, model="Linear(20, 32) - GELU - Linear(32, 5)"))
        tensors.update(data)
        runs[name] = (tensors, md)
    return runs


def tied_run():
    torch.manual_seed(2)
    tokens = torch.randint(0, 50, (3, 4, 9))
    batches = [(tokens[i],) for i in range(3)]

    def loss(m, t):
        logits = m(t[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t[:, 1:].reshape(-1))

    torch.manual_seed(3)
    model = Tied()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    tensors, md = train("tied_adamw", model, opt, batches, loss, 15, {
        "optimizer": "AdamW", "options": json.dumps({"lr": 1e-2, "weight_decay": 0.01}),
        "model": "Embedding(50, 16) - LayerNorm(16) - Linear(16, 50, bias=False) tied to "
                 "the embedding"})
    tensors["data.tokens"] = tokens
    return {"tied_adamw": (tensors, md)}


def main():
    torch.set_num_threads(1)
    os.makedirs(OUT_DIR, exist_ok=True)
    runs = mlp_runs()
    runs.update(tied_run())
    for name, (tensors, meta) in runs.items():
        path = os.path.join(OUT_DIR, name + ".safetensors")
        save_file({k: v.contiguous() for k, v in tensors.items()}, path, metadata=meta)
        losses = tensors["loss"].tolist()
        print(f"{name}: {len(losses)} steps, loss {losses[0]:.5f} -> {losses[-1]:.5f}, "
              f"{os.path.getsize(path)} bytes -> {os.path.normpath(path)}")


if __name__ == "__main__":
    sys.exit(main())
