#!/usr/bin/python3
"""Generate tests/data/pytorch_grad_reference.json: PyTorch's gradients for composite
computations (several ops chained, broadcasting, reused inputs), which
tests/test_grad_reference.cpp rebuilds with ferry's ops and compares.

Regenerate (from the repository root):

    apt-get install -y python3-torch            # Debian 12: python3-torch 1.13.1+dfsg-4
    /usr/bin/python3 tools/gen_grad_reference.py

Use Debian's /usr/bin/python3 (the one python3-torch installs into). The committed file
was made with python3-torch 1.13.1+dfsg-4 (torch.__version__ == "1.13.0a0"). Inputs come
from tools/gen_reference.py's per-case generator (seeded with crc32 of the case name,
rounded to three decimals), so two runs write identical bytes.

Format: {"torch_version": str, "cases": [{"name": str, "inputs": [tensor...],
"upstream": tensor, "output": tensor, "grads": [tensor or null, ...], "tol": {...}}]},
tensors as in pytorch_reference.json. For each case the output is f(inputs) computed in
f32 and grads[i] is d/d inputs[i] of sum(output * upstream) (null for integer inputs).
The C++ side has one function per case name computing the same f with ferry's ops; the
definitions below and in the test must stay in step.
"""

import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (Gen, tensor_json)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_grad_reference.json")
TOL = {"rtol": 1e-4, "atol": 1e-5}


def cross_entropy_by_ops(logits, target):
    # The mean negative log-likelihood of the target class, as the test writes it.
    return -torch.gather(torch.log_softmax(logits, 1), 1, target.unsqueeze(1)).mean()


def mlp_gelu_cross_entropy(x, w1, b1, w2, b2, target):
    h = F.gelu(x @ w1.t() + b1)
    return cross_entropy_by_ops(h @ w2.t() + b2, target)


def attention(q, k, v):
    s = torch.softmax(q @ k.transpose(-1, -2) / 8 ** 0.5, -1)
    return s @ v


def layer_norm_residual(x, w, b):
    return x + F.layer_norm(x * 2, [6], w, b)


def embedding_pool(e, idx, w):
    return torch.tanh(F.embedding(idx, e).sum(1) @ w)


def standardize(x):
    m = x.mean(1, keepdim=True)
    return (x - m) / torch.sqrt(x.var(1, keepdim=True) + 1e-5)


def pow_where_max(a, b):
    return torch.where(a > 0, torch.pow(a.abs() + 1, b), torch.maximum(a, b)) + \
        torch.amax(a * b, 1, keepdim=True)


def gather_cat_stack(x, idx):
    g = torch.gather(x, 1, idx)
    return torch.stack([torch.cat([g, x[:, 1:3]], 1), torch.cat([x[:, ::2], g * 2], 1)], 0)


def matmul_broadcast(a, b, v):
    return (a @ b) @ v


def activations(x):
    return F.silu(x) * torch.sigmoid(x) + torch.relu(x - 0.5) + F.gelu(x, approximate="tanh")


def transcendental(x):
    return torch.log(torch.exp(x) + 1) * torch.rsqrt(x * x + 1) + torch.sin(x) * torch.cos(x) \
        + torch.sqrt(x * x + 2) - x.min()


def logits_through_embedding(e, idx, w, b):
    # A tied-embedding language model's head: embed, normalise, score against every row.
    h = F.layer_norm(F.embedding(idx, e), [e.shape[1]], w, b)
    return cross_entropy_by_ops(h.reshape(-1, e.shape[1]) @ e.t(), idx.reshape(-1))


def kinks_and_zeros(a, b, c, d, e, p):
    # Where a composition's chain rule and PyTorch's formulas part: std of a constant row,
    # the cosine of a zero vector, xlogy at x = 0, a logit of exactly 0, probabilities of
    # exactly 0 and 1. Fixed inputs: random ones would never land on these points.
    return torch.cat([
        torch.std(a, 1),
        F.cosine_similarity(b, a, dim=1),
        torch.xlogy(c, d),
        F.binary_cross_entropy_with_logits(e, torch.tensor([0.5, 1.0, 0.0, 0.3]), reduction="none"),
        F.binary_cross_entropy(p, torch.tensor([1.0, 0.6, 0.5, 0.2]), reduction="none"),
    ])


CASES = [
    ("mlp_gelu_cross_entropy", mlp_gelu_cross_entropy,
     lambda g: [g.uniform([8, 5], -2, 2), g.uniform([7, 5], -0.5, 0.5), g.uniform([7], -0.5, 0.5),
                g.uniform([3, 7], -0.5, 0.5), g.uniform([3], -0.5, 0.5), g.ints([8], 0, 3)]),
    ("attention", attention,
     lambda g: [g.uniform([2, 4, 8], -1, 1), g.uniform([2, 4, 8], -1, 1), g.uniform([2, 4, 8], -1, 1)]),
    ("layer_norm_residual", layer_norm_residual,
     lambda g: [g.uniform([3, 6], -2, 2), g.uniform([6], 0.5, 1.5), g.uniform([6], -1, 1)]),
    ("embedding_pool", embedding_pool,
     lambda g: [g.uniform([10, 4], -1, 1), g.ints([2, 3], 0, 10), g.uniform([4, 3], -1, 1)]),
    ("standardize", standardize, lambda g: [g.uniform([4, 5], -2, 2)]),
    ("pow_where_max", pow_where_max,
     lambda g: [g.uniform([3, 4], -2, 2), g.uniform([3, 4], -2, 2)]),
    ("gather_cat_stack", gather_cat_stack,
     lambda g: [g.uniform([3, 4], -2, 2), g.ints([3, 2], 0, 4)]),
    ("matmul_broadcast", matmul_broadcast,
     lambda g: [g.uniform([2, 1, 3, 4], -1, 1), g.uniform([3, 4, 5], -1, 1), g.uniform([5], -1, 1)]),
    ("activations", activations, lambda g: [g.uniform([3, 5], -3, 3)]),
    ("transcendental", transcendental, lambda g: [g.uniform([2, 5], -2, 2)]),
    ("kinks_and_zeros", kinks_and_zeros,
     lambda g: [torch.tensor([[2.0, 2.0, 2.0], [1.0, -0.5, 3.0]]),
                torch.tensor([[0.0, 0.0, 0.0], [0.5, -1.0, 2.0]]), torch.tensor([0.0, 1.5, 0.3]),
                torch.tensor([2.0, 0.5, 0.7]), torch.tensor([0.0, 0.0, 3.0, -2.0]),
                torch.tensor([1.0, 0.0, 0.5, 0.999])]),
    ("logits_through_embedding", logits_through_embedding,
     lambda g: [g.uniform([7, 6], -1, 1), g.ints([2, 5], 0, 7), g.uniform([6], 0.5, 1.5),
                g.uniform([6], -0.5, 0.5)]),
]


def main():
    lines = ['{"torch_version": %s,' % json.dumps(torch.__version__), '"cases": [']
    for k, (name, fn, make) in enumerate(CASES):
        g = ref.Gen(name)
        inputs = make(g)
        leaves = [t.clone().requires_grad_() if t.is_floating_point() else t for t in inputs]
        out = fn(*leaves)
        upstream = g.uniform(list(out.shape), -1, 1)
        (out * upstream).sum().backward()
        grads = [ref.tensor_json(t.grad) if t.is_floating_point() else "null" for t in leaves]
        s = ('{"name":%s,"inputs":[%s],"upstream":%s,"output":%s,"grads":[%s],"tol":%s}'
             % (json.dumps(name), ",".join(ref.tensor_json(t) for t in inputs),
                ref.tensor_json(upstream), ref.tensor_json(out.detach()), ",".join(grads),
                json.dumps(TOL, sort_keys=True)))
        lines.append(s + ("," if k + 1 < len(CASES) else ""))
    lines.append("]}")
    text = "\n".join(lines) + "\n"
    json.loads(text)
    with open(OUT_PATH, "w") as f:
        f.write(text)
    print(f"wrote {len(CASES)} cases, {len(text)} bytes, torch {torch.__version__} -> "
          f"{os.path.normpath(OUT_PATH)}")
    assert len(text) < 100_000, "keep the reference file small"


if __name__ == "__main__":
    sys.exit(main())
