#!/usr/bin/python3
"""Generate tests/data/pytorch_double_backward_reference.json: PyTorch's second-order
gradients (create_graph=True), which tests/test_higher_order_grad.cpp rebuilds with ferry's
ops and compares.

Regenerate (from the repository root):

    apt-get install -y python3-torch            # Debian 12: python3-torch 1.13.1+dfsg-4
    /usr/bin/python3 tools/gen_double_backward_reference.py

The committed file was made with python3-torch 1.13.1+dfsg-4 (torch.__version__ ==
"1.13.0a0"). Inputs come from tools/gen_reference.py's per-case generator (seeded with crc32
of the case name, rounded to three decimals), so two runs write identical bytes.

Two kinds of case:
- "second": a function f of tools/gen_grad_reference.py (the same name, the same f). With
  L = sum(f(inputs) * upstream), first[i] = dL/d inputs[i] (computed with create_graph) and
  second[j] = d/d inputs[j] of sum_i sum(first[i] * directions[i]): a Hessian-vector product
  of L along the directions.
- "penalty": a critic's gradient penalty (WGAN-GP): output = mean((|dD/dx| - 1)^2) over the
  samples of x (inputs[0]), and grads[i] = d output / d inputs[i], a backward through a
  gradient; an MLP critic and a CNN one.
Tensors as in pytorch_reference.json; null for integer inputs and unused gradients.
"""

import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_grad_reference as first_order  # noqa: E402  (the functions of the "second" cases)
import gen_reference as ref  # noqa: E402  (Gen, tensor_json, write_case_file)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_double_backward_reference.json")
TOL = {"rtol": 2e-4, "atol": 2e-5}

# Cases of gen_grad_reference.py (all but gather_cat_stack, which is linear, so its first
# gradients are constants, and kinks_and_zeros, whose points are where the second derivatives
# of the two libraries' formulas may part).
SECOND = ["mlp_gelu_cross_entropy", "attention", "layer_norm_residual", "embedding_pool",
          "standardize", "pow_where_max", "matmul_broadcast", "activations", "transcendental",
          "logits_through_embedding"]


def critic(x, w1, b1, w2, b2, w3, b3):
    h = torch.tanh(x @ w1.t() + b1)
    h = F.silu(h @ w2.t() + b2)
    h = F.gelu(h) + torch.sigmoid(h) + torch.relu(h - 0.1)
    return h @ w3.t() + b3


def critic_inputs(g):
    return [g.uniform([5, 4], -1, 1), g.uniform([6, 4], -0.8, 0.8), g.uniform([6], -0.5, 0.5),
            g.uniform([6, 6], -0.8, 0.8), g.uniform([6], -0.5, 0.5), g.uniform([1, 6], -0.8, 0.8),
            g.uniform([1], -0.5, 0.5)]


def cnn_critic(x, w1, b1, w2, b2, gamma, beta, w3, b3):
    # Every CNN layer whose backward kernel has derivatives of its own in ferry.
    h = torch.tanh(F.conv2d(x, w1, b1, padding=1))
    h = F.max_pool2d(h, 2, stride=1)
    h = F.conv2d(h, w2, b2, stride=2, padding=1)
    h = F.batch_norm(h, None, None, gamma, beta, training=True)
    h = F.silu(F.interpolate(h, size=(3, 4), mode="bilinear", align_corners=False))
    h = F.layer_norm(F.avg_pool2d(h, 2, stride=1, padding=1), [4, 5])
    return F.adaptive_avg_pool2d(h, 1).flatten(1) @ w3.t() + b3


def cnn_critic_inputs(g):
    return [g.uniform([3, 2, 6, 6], -1, 1), g.uniform([3, 2, 3, 3], -0.5, 0.5),
            g.uniform([3], -0.3, 0.3), g.uniform([4, 3, 3, 3], -0.5, 0.5),
            g.uniform([4], -0.3, 0.3), g.uniform([4], 0.5, 1.5), g.uniform([4], -0.5, 0.5),
            g.uniform([1, 4], -1, 1), g.uniform([1], -0.5, 0.5)]


def gradient_penalty(d, x):
    (gx,) = torch.autograd.grad(d.sum(), x, create_graph=True)
    return ((gx.flatten(1).norm(dim=1) - 1) ** 2).mean()


PENALTIES = [("gradient_penalty", critic, critic_inputs),
             ("cnn_gradient_penalty", cnn_critic, cnn_critic_inputs)]


def js(t):
    return ref.tensor_json(t.detach()) if t is not None else "null"


def second_case(name):
    fn, make = next((f, m) for n, f, m in first_order.CASES if n == name)
    g = ref.Gen(name)
    inputs = make(g)
    leaves = [t.clone().requires_grad_() if t.is_floating_point() else t for t in inputs]
    floats = [t for t in leaves if t.is_floating_point()]
    out = fn(*leaves)
    upstream = g.uniform(list(out.shape), -1, 1)
    first = torch.autograd.grad((out * upstream).sum(), floats, create_graph=True,
                                allow_unused=True)
    directions = [g.uniform(list(t.shape), -1, 1) for t in floats]
    s = sum((f * d).sum() for f, d in zip(first, directions) if f is not None)
    second = torch.autograd.grad(s, floats, allow_unused=True)
    it = iter(range(len(floats)))
    idx = [next(it) if t.is_floating_point() else None for t in leaves]

    def per_input(ts):
        return ",".join(js(ts[i]) if i is not None else "null" for i in idx)
    return ('{"name":%s,"kind":"second","inputs":[%s],"upstream":%s,"directions":[%s],'
            '"first":[%s],"second":[%s],"tol":%s}'
            % (json.dumps(name), ",".join(ref.tensor_json(t) for t in inputs), js(upstream),
               ",".join(js(d) for d in directions), per_input(first), per_input(second),
               json.dumps(TOL, sort_keys=True)))


def penalty_case(name, critic_fn, make):
    g = ref.Gen(name)
    inputs = make(g)
    leaves = [t.clone().requires_grad_() for t in inputs]
    out = gradient_penalty(critic_fn(*leaves), leaves[0])
    grads = torch.autograd.grad(out, leaves, allow_unused=True)  # b3: none
    return ('{"name":%s,"kind":"penalty","inputs":[%s],"output":%s,"grads":[%s],"tol":%s}'
            % (json.dumps(name), ",".join(ref.tensor_json(t) for t in inputs), js(out),
               ",".join(js(t) for t in grads), json.dumps(TOL, sort_keys=True)))


def main():
    ref.write_case_file(OUT_PATH, [second_case(n) for n in SECOND] +
                        [penalty_case(*p) for p in PENALTIES], limit=100_000)


if __name__ == "__main__":
    sys.exit(main())
