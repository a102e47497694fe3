#!/usr/bin/python3
"""Generate tests/data/pytorch_nn_reference.json: PyTorch reference results for ferry's nn layers
and losses, forward and backward.

Regenerate (from the repository root):

    apt-get install -y python3-torch           # Debian 12: python3-torch 1.13.1+dfsg-4
    /usr/bin/python3 tools/gen_nn_reference.py # writes tests/data/pytorch_nn_reference.json

Use Debian's /usr/bin/python3 (the one python3-torch installs into); a pyenv `python3`
earlier on PATH has no torch. The committed file was made with python3-torch 1.13.1+dfsg-4
(torch.__version__ == "1.13.0a0") on the CPU. The inputs are deterministic (each case draws
from its own torch.Generator seeded with crc32(case name), through tools/gen_reference.py's
Gen, and values are rounded to a few decimals to keep the file small), so two runs write
identical bytes and adding a case leaves the others alone.

The file is read by tests/test_nn_reference.cpp. Each case builds one layer or loss in
PyTorch, copies the inputs and parameters into it, runs the forward, and then the backward
of sum(output * R) for a fixed R of the output's shape (a 0-d R for a reduced loss).
Format:

    {"torch_version": str,
     "cases": [{"name": unique str,
                "kind": "linear" | "layer_norm" | "batch_norm" | "embedding" | "activation" |
                        "cross_entropy" | "mse_loss" | "loss",
                "attrs": {...},             # the layer's or loss's options, per kind below
                "tensors": {name: {"shape": [...], "dtype": "f32"|"i64"|"i32", "data": [...]}},
                "tol": {"rtol": r, "atol": a}}]}

A "loss" case runs torch.nn.functional.<attrs.fn> with the other attrs as keyword arguments
on x (and x2), target, weight and pos_weight. Tensor names: "x" (input), "target", "R", the parameters under their state_dict names
("weight", "bias", "running_mean", ...), "out", and "grad_<name>" for the gradient of
sum(out * R) with respect to an input or parameter. batch_norm cases run two training steps
(or one evaluation step) and name per-step tensors with a suffix: x1, out1, grad_x1, ... and
the running statistics after both steps. Embedding cases with max_norm also hold "weight_after",
the weight as the forward's in-place renormalisation left it. Values are JSON numbers; NaN and the infinities are
the strings "nan", "inf" and "-inf" (tools/gen_reference.py's encoding). A value passes when
|actual - expected| <= atol + rtol * |expected|.
"""

import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_reference import Gen, tensor_json  # noqa: E402  (shared encoding and inputs)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_nn_reference.json")

T_F32 = {"rtol": 1e-5, "atol": 1e-6}   # a single op and its backward
T_COMP = {"rtol": 1e-5, "atol": 1e-5}  # composed of reductions (summation order differs)

CASES = []
NAMES = set()


def add_case(name, kind, attrs, tensors, tol=T_F32):
    assert name not in NAMES, name
    NAMES.add(name)
    CASES.append((name, kind, attrs, tensors, tol))


def dump(path):
    lines = ['{"torch_version": %s,' % json.dumps(torch.__version__), '"cases": [']
    for k, (name, kind, attrs, tensors, tol) in enumerate(CASES):
        ts = ",".join("%s:%s" % (json.dumps(n), tensor_json(t)) for n, t in tensors.items())
        s = ('{"name":%s,"kind":%s,"attrs":%s,"tensors":{%s},"tol":{"rtol":%r,"atol":%r}}'
             % (json.dumps(name), json.dumps(kind),
                json.dumps(attrs, sort_keys=True, separators=(",", ":")), ts,
                float(tol["rtol"]), float(tol["atol"])))
        lines.append(s + ("," if k + 1 < len(CASES) else ""))
    lines.append("]}")
    text = "\n".join(lines) + "\n"
    json.loads(text, parse_constant=lambda c: 1 / 0)  # must parse, strictly (no Infinity)
    with open(path, "w") as f:
        f.write(text)
    return len(text)


def backward(out, g, leaves):
    """Gradients of sum(out * R) with R drawn from g; returns (R, {name: grad})."""
    R = g.uniform(list(out.shape), -1, 1, decimals=2)
    (out * R).sum().backward()
    return R, {"grad_" + n: t.grad.detach().clone() for n, t in leaves.items() if t.grad is not None}


def leaf(t):
    return t.clone().requires_grad_()


# ---------------------------------------------------------------- layers

def linear_cases():
    for name, shape, i, o, bias in (("linear_bias", [5, 4], 4, 3, True),
                                    ("linear_nobias_3d", [2, 3, 6], 6, 2, False),
                                    ("linear_1d", [4], 4, 5, True)):
        g = Gen(name)
        m = nn.Linear(i, o, bias=bias)
        with torch.no_grad():
            m.weight.copy_(g.uniform([o, i], -1, 1))
            if bias:
                m.bias.copy_(g.uniform([o], -1, 1))
        x = leaf(g.uniform(shape))
        out = m(x)
        leaves = {"x": x, "weight": m.weight}
        if bias:
            leaves["bias"] = m.bias
        R, grads = backward(out, g, leaves)
        tensors = {"x": x, "weight": m.weight}
        if bias:
            tensors["bias"] = m.bias
        tensors.update({"R": R, "out": out, **grads})
        add_case(name, "linear", {"in_features": i, "out_features": o, "bias": bias}, tensors,
                 T_COMP)


def layer_norm_cases():
    for name, shape, ns, affine in (("layer_norm_last", [4, 6], [6], True),
                                    ("layer_norm_2d", [2, 3, 4], [3, 4], True),
                                    ("layer_norm_no_affine", [3, 5], [5], False)):
        g = Gen(name)
        m = nn.LayerNorm(ns, eps=1e-5, elementwise_affine=affine)
        if affine:
            with torch.no_grad():
                m.weight.copy_(g.uniform(ns, 0.5, 1.5))
                m.bias.copy_(g.uniform(ns, -0.5, 0.5))
        x = leaf(g.uniform(shape))
        out = m(x)
        leaves = {"x": x}
        tensors = {"x": x}
        if affine:
            leaves.update({"weight": m.weight, "bias": m.bias})
            tensors.update({"weight": m.weight, "bias": m.bias})
        R, grads = backward(out, g, leaves)
        tensors.update({"R": R, "out": out, **grads})
        add_case(name, "layer_norm",
                 {"normalized_shape": ns, "eps": 1e-5, "elementwise_affine": affine}, tensors,
                 T_COMP)


def batch_norm_cases():
    """Two training steps (output, gradients and running statistics after each), or one
    evaluation step from given running statistics."""
    for name, shape, momentum, affine, train in (
            ("batch_norm_2d_train", [6, 3], 0.1, True, True),
            ("batch_norm_3d_train", [4, 3, 5], 0.1, True, True),
            ("batch_norm_cumulative_train", [5, 2], None, True, True),
            ("batch_norm_no_affine_train", [4, 2, 3], 0.3, False, True),
            ("batch_norm_2d_eval", [4, 3], 0.1, True, False),
            ("batch_norm_3d_eval", [3, 2, 4], 0.1, True, False)):
        g = Gen(name)
        C = shape[1]
        m = nn.BatchNorm1d(C, eps=1e-5, momentum=momentum, affine=affine)
        tensors = {}
        if affine:
            with torch.no_grad():
                m.weight.copy_(g.uniform([C], 0.5, 1.5))
                m.bias.copy_(g.uniform([C], -0.5, 0.5))
            tensors.update({"weight": m.weight.detach().clone(), "bias": m.bias.detach().clone()})
        if not train:
            with torch.no_grad():
                m.running_mean.copy_(g.uniform([C], -1, 1))
                m.running_var.copy_(g.uniform([C], 0.5, 2))
                m.num_batches_tracked.fill_(7)
            tensors.update({"running_mean_in": m.running_mean.clone(),
                            "running_var_in": m.running_var.clone()})
            m.eval()
        for step in (1, 2) if train else (1,):
            m.zero_grad()
            x = leaf(g.uniform(shape) * step)  # a second batch of another scale
            out = m(x)
            leaves = {"x": x}
            if affine:
                leaves.update({"weight": m.weight, "bias": m.bias})
            R, grads = backward(out, g, leaves)
            tensors.update({f"x{step}": x, f"R{step}": R, f"out{step}": out})
            tensors.update({f"{k}{step}": v for k, v in grads.items()})
        tensors.update({"running_mean": m.running_mean, "running_var": m.running_var,
                        "num_batches_tracked": m.num_batches_tracked})
        add_case(name, "batch_norm",
                 {"num_features": C, "eps": 1e-5, "momentum": momentum, "affine": affine,
                  "train": train}, tensors, T_COMP)


def embedding_cases():
    for name, idx_dtype in (("embedding_i64", torch.int64), ("embedding_i32", torch.int32)):
        g = Gen(name)
        m = nn.Embedding(7, 3)
        with torch.no_grad():
            m.weight.copy_(g.uniform([7, 3], -1, 1))
        idx = g.ints([2, 4], 0, 7)
        idx[0, 0] = idx[1, 3] = 5  # a repeated index: its gradient rows add up
        out = m(idx)
        R, grads = backward(out, g, {"weight": m.weight})
        add_case(name, "embedding", {"num_embeddings": 7, "embedding_dim": 3},
                 {"x": idx.to(idx_dtype), "weight": m.weight, "R": R, "out": out, **grads})


def index_counts(idx, rows):
    """How often each of `rows` rows is looked up: scale_grad_by_freq's divisor."""
    return torch.bincount(idx.reshape(-1).long(), minlength=rows).to(torch.float32)


def embedding_option_cases():
    """nn.Embedding's max_norm (the looked-up rows renormalised in place before the lookup:
    "weight_after"), norm_type and scale_grad_by_freq, alone and with padding_idx."""
    specs = (("embedding_max_norm", {"max_norm": 1.0}, torch.int64),
             ("embedding_max_norm_p1_padding", {"max_norm": 1.5, "norm_type": 1.0,
                                                "padding_idx": 2}, torch.int64),
             ("embedding_max_norm_p3_i32", {"max_norm": 0.9, "norm_type": 3.0}, torch.int32),
             ("embedding_scale_grad_by_freq", {"scale_grad_by_freq": True}, torch.int64),
             ("embedding_freq_padding_max_norm", {"scale_grad_by_freq": True, "padding_idx": -1,
                                                  "max_norm": 1.2}, torch.int64))
    for name, opts, idx_dtype in specs:
        g = Gen(name)
        m = nn.Embedding(7, 3, **opts)
        with torch.no_grad():
            m.weight.copy_(g.uniform([7, 3], -2, 2))
        before = m.weight.detach().clone()
        idx = g.ints([3, 4], 0, 7)
        idx[0, 0] = idx[1, 3] = idx[2, 1] = 5  # index 5 three times: a third of each gradient
        idx[2, 2] = 6  # the last row (padding_idx -1 in one case) is looked up
        out = m(idx.to(idx_dtype))
        R, grads = backward(out, g, {"weight": m.weight})
        if opts.get("scale_grad_by_freq"):  # the rule embedding_bag_cases relies on
            plain = torch.zeros(7, 3).index_add_(0, idx.reshape(-1), R.reshape(-1, 3))
            if "padding_idx" in opts:
                plain[opts["padding_idx"]] = 0
            expect = plain / index_counts(idx, 7).clamp(min=1).unsqueeze(1)
            assert torch.allclose(grads["grad_weight"], expect, atol=1e-6), name
        add_case(name, "embedding", dict(opts, num_embeddings=7, embedding_dim=3),
                 {"x": idx.to(idx_dtype), "weight": before, "R": R, "out": out,
                  "weight_after": m.weight, **grads})


def activation_cases():
    specs = (("gelu_none", nn.GELU("none"), {"fn": "gelu", "approximate": "none"}),
             ("gelu_tanh", nn.GELU("tanh"), {"fn": "gelu", "approximate": "tanh"}),
             ("silu", nn.SiLU(), {"fn": "silu"}),
             ("tanh", nn.Tanh(), {"fn": "tanh"}),
             ("sigmoid", nn.Sigmoid(), {"fn": "sigmoid"}),
             ("relu", nn.ReLU(), {"fn": "relu"}),
             ("hardshrink", nn.Hardshrink(0.7), {"fn": "hardshrink", "lambd": 0.7}),
             ("softshrink", nn.Softshrink(1.5), {"fn": "softshrink", "lambd": 1.5}),
             ("tanhshrink", nn.Tanhshrink(), {"fn": "tanhshrink"}),
             ("softsign", nn.Softsign(), {"fn": "softsign"}),
             ("threshold", nn.Threshold(0.3, -2.0), {"fn": "threshold", "threshold": 0.3,
                                                      "value": -2.0}))
    for name, m, attrs in specs:
        g = Gen(name)
        x = leaf(g.uniform([3, 5], -4, 4))
        out = m(x)
        R, grads = backward(out, g, {"x": x})
        add_case("act_" + name, "activation", attrs, {"x": x, "R": R, "out": out, **grads})


# ---------------------------------------------------------------- losses

def cross_entropy_case(name, shape, weighted, ignore, smoothing, reduction, all_ignored=False,
                       target_dtype=torch.int64):
    g = Gen(name)
    class_dim = 0 if len(shape) == 1 else 1
    C = shape[class_dim]
    tshape = shape[:class_dim] + shape[class_dim + 1:]
    x = leaf(g.uniform(shape))
    target = g.ints(tshape, 0, C)
    ignore_index = -100
    if ignore:
        ignore_index = 1  # a real class: its targets are ignored, its logits still count
        if all_ignored:
            target.fill_(ignore_index)
        elif target.dim() > 0:
            flat = target.view(-1)
            flat[0] = ignore_index
            flat[-1] = ignore_index
    weight = g.uniform([C], 0.2, 2.0) if weighted else None
    out = F.cross_entropy(x, target, weight=weight, ignore_index=ignore_index,
                          reduction=reduction, label_smoothing=smoothing)
    R, grads = backward(out, g, {"x": x})
    tensors = {"x": x, "target": target.to(target_dtype)}
    if weighted:
        tensors["weight"] = weight
    tensors.update({"R": R, "out": out, **grads})
    add_case(name, "cross_entropy",
             {"ignore_index": ignore_index, "reduction": reduction, "label_smoothing": smoothing},
             tensors, T_COMP)


def cross_entropy_cases():
    for weighted in (False, True):
        for ignore in (False, True):
            for smoothing in (0.0, 0.1):
                for reduction in ("mean", "sum", "none"):
                    name = "ce_2d_%s_%s_ls%s_%s" % ("w" if weighted else "now",
                                                   "ign" if ignore else "noign",
                                                   smoothing, reduction)
                    cross_entropy_case(name, [6, 4], weighted, ignore, smoothing, reduction)
    # The [N, C, d1, d2] form, and the unbatched [C] form.
    for weighted, ignore, smoothing, reduction in ((False, False, 0.0, "mean"),
                                                   (True, True, 0.2, "mean"),
                                                   (True, True, 0.0, "none"),
                                                   (False, True, 0.1, "sum")):
        name = "ce_4d_%s_%s_ls%s_%s" % ("w" if weighted else "now", "ign" if ignore else "noign",
                                        smoothing, reduction)
        cross_entropy_case(name, [2, 3, 2, 2], weighted, ignore, smoothing, reduction)
    for weighted, smoothing, reduction in ((False, 0.0, "mean"), (True, 0.1, "mean"),
                                           (True, 0.0, "none")):
        name = "ce_1d_%s_ls%s_%s" % ("w" if weighted else "now", smoothing, reduction)
        cross_entropy_case(name, [5], weighted, False, smoothing, reduction)
    # Every target ignored: the mean is 0/0 = NaN.
    cross_entropy_case("ce_all_ignored_mean", [3, 4], False, True, 0.0, "mean", all_ignored=True)
    cross_entropy_case("ce_all_ignored_w_ls_mean", [3, 4], True, True, 0.1, "mean",
                       all_ignored=True)
    cross_entropy_case("ce_all_ignored_sum", [3, 4], True, True, 0.1, "sum", all_ignored=True)
    # Class probabilities as the target, with and without weights and smoothing.
    for name, weighted, smoothing, reduction in (("ce_prob_mean", False, 0.0, "mean"),
                                                 ("ce_prob_w_ls_sum", True, 0.2, "sum"),
                                                 ("ce_prob_none", False, 0.1, "none")):
        g = Gen(name)
        x = leaf(g.uniform([4, 5]))
        target = F.softmax(g.uniform([4, 5]), 1)
        weight = g.uniform([5], 0.2, 2.0) if weighted else None
        out = F.cross_entropy(x, target, weight=weight, reduction=reduction,
                              label_smoothing=smoothing)
        R, grads = backward(out, g, {"x": x})
        tensors = {"x": x, "target": target}
        if weighted:
            tensors["weight"] = weight
        tensors.update({"R": R, "out": out, **grads})
        add_case(name, "cross_entropy",
                 {"ignore_index": -100, "reduction": reduction, "label_smoothing": smoothing},
                 tensors, T_COMP)
    # i32 targets (PyTorch needs i64; the values are the same).
    cross_entropy_case("ce_2d_i32_target", [4, 5], True, True, 0.05, "mean",
                       target_dtype=torch.int32)


def mse_cases():
    for reduction, shape in (("mean", [3, 4]), ("sum", [5]), ("none", [2, 3, 2])):
        name = "mse_" + reduction
        g = Gen(name)
        x, t = leaf(g.uniform(shape)), leaf(g.uniform(shape))
        out = F.mse_loss(x, t, reduction=reduction)
        R, grads = backward(out, g, {"x": x, "target": t})
        add_case(name, "mse_loss", {"reduction": reduction},
                 {"x": x, "target": t, "R": R, "out": out, **grads}, T_COMP)


def loss_cases():
    """The losses and functional ops of issue 21, each through F.<fn> with the
    attrs as its keyword arguments; tensors x (and x2), target, weight,
    pos_weight; the gradients of every floating input."""
    def case(name, fn, attrs, inputs, tol=T_COMP):
        g = Gen(name)
        leaves = {k: leaf(v) for k, v in inputs.items() if k in ("x", "x2", "x3", "var")}
        args = dict(inputs, **leaves)
        f = getattr(F, fn) if hasattr(F, fn) else getattr(torch, fn)  # torch.cdist
        kw = {k: float(v) if v == "inf" else v for k, v in attrs.items()}  # JSON has no inf
        if fn in ("margin_ranking_loss", "cosine_embedding_loss"):
            out = f(args["x"], args["x2"], args["target"], **kw)
        elif fn in ("normalize", "softmin", "glu"):
            out = f(args["x"], **kw)
        elif fn in ("cosine_similarity", "pairwise_distance", "cdist"):
            out = f(args["x"], args["x2"], **kw)
        elif fn == "triplet_margin_loss":
            out = f(args["x"], args["x2"], args["x3"], **kw)
        elif fn == "gaussian_nll_loss":
            out = f(args["x"], args["target"], args["var"], **kw)
        else:
            extra = {k: args[k] for k in ("weight", "pos_weight") if k in args}
            if fn == "hinge_embedding_loss" or fn == "soft_margin_loss":
                extra = {}
            out = f(args["x"], args["target"], **extra, **kw)
        R, grads = backward(out, g, leaves)
        add_case(name, "loss", dict(attrs, fn=fn),
                 {**{k: v for k, v in args.items()}, "R": R, "out": out, **grads}, tol)

    g = Gen("losses21")
    x, t = g.uniform([4, 5]), g.uniform([4, 5])
    for red in ("mean", "sum", "none"):
        case(f"l1_{red}", "l1_loss", {"reduction": red}, {"x": x, "target": t})
        case(f"smooth_l1_{red}", "smooth_l1_loss", {"reduction": red, "beta": 0.5},
             {"x": x, "target": t})
        case(f"huber_{red}", "huber_loss", {"reduction": red, "delta": 0.7}, {"x": x, "target": t})
    case("smooth_l1_beta0", "smooth_l1_loss", {"reduction": "mean", "beta": 0.0},
         {"x": x, "target": t})
    lp = F.log_softmax(g.uniform([3, 6]), 1)
    q = F.softmax(g.uniform([3, 6]), 1)
    for red in ("batchmean", "sum", "mean", "none"):
        case(f"kl_div_{red}", "kl_div", {"reduction": red, "log_target": False},
             {"x": lp, "target": q})
    q0 = q.clone()
    q0[0, 1] = 0.0
    case("kl_div_zero_target", "kl_div", {"reduction": "sum", "log_target": False},
         {"x": lp, "target": q0})
    case("kl_div_log_target", "kl_div", {"reduction": "batchmean", "log_target": True},
         {"x": lp, "target": q.log()})
    p, y = g.uniform([4, 3], 0.02, 0.98), g.bools([4, 3]).float()
    w = g.uniform([3], 0.5, 2)
    case("bce_mean", "binary_cross_entropy", {"reduction": "mean"}, {"x": p, "target": y})
    case("bce_weight_sum", "binary_cross_entropy", {"reduction": "sum"},
         {"x": p, "target": y, "weight": w})
    logits = g.uniform([4, 3], -30, 30)
    case("bce_logits_mean", "binary_cross_entropy_with_logits", {"reduction": "mean"},
         {"x": logits, "target": y})
    case("bce_logits_pos_weight", "binary_cross_entropy_with_logits", {"reduction": "none"},
         {"x": logits, "target": g.uniform([4, 3], 0, 1), "weight": w, "pos_weight": w * 1.5})
    a, b = g.uniform([6]), g.uniform([6])
    ysign = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0, -1.0])
    case("margin_ranking", "margin_ranking_loss", {"margin": 0.3, "reduction": "mean"},
         {"x": a, "x2": b, "target": ysign})
    a2, b2 = g.uniform([6, 4]), g.uniform([6, 4])
    case("cosine_embedding", "cosine_embedding_loss", {"margin": 0.1, "reduction": "sum"},
         {"x": a2, "x2": b2, "target": ysign})
    case("normalize_p2", "normalize", {"p": 2.0, "dim": 1}, {"x": a2})
    case("normalize_p1_dim0", "normalize", {"p": 1.0, "dim": 0}, {"x": a2})
    case("cosine_similarity", "cosine_similarity", {"dim": 1}, {"x": a2, "x2": b2})
    case("pairwise_distance", "pairwise_distance", {"p": 2.0}, {"x": a2, "x2": b2})
    case("pairwise_distance_p1_keep", "pairwise_distance", {"p": 1.0, "keepdim": True},
         {"x": a2, "x2": b2})
    lsm = F.log_softmax(g.uniform([5, 4]), 1)
    cls = torch.tensor([0, 3, 1, 1, 2])
    case("nll_mean", "nll_loss", {"reduction": "mean", "ignore_index": -100},
         {"x": lsm, "target": cls})
    case("nll_weight_ignore", "nll_loss", {"reduction": "mean", "ignore_index": 1},
         {"x": lsm, "target": cls, "weight": g.uniform([4], 0.5, 2)})
    case("softmin", "softmin", {"dim": 1}, {"x": a2})
    case("glu", "glu", {"dim": -1}, {"x": a2})

    # The margin and likelihood losses of torch.nn.functional.
    g = Gen("losses_more")
    x, y = g.uniform([4, 5]), torch.where(g.bools([4, 5]), 1.0, -1.0)
    for red in ("mean", "sum", "none"):
        case(f"soft_margin_{red}", "soft_margin_loss", {"reduction": red}, {"x": x, "target": y})
    case("hinge_embedding_mean", "hinge_embedding_loss", {"margin": 1.0, "reduction": "mean"},
         {"x": x, "target": y})
    case("hinge_embedding_m2_none", "hinge_embedding_loss", {"margin": 2.0, "reduction": "none"},
         {"x": x, "target": y})
    y01 = g.bools([4, 5]).float()
    case("multilabel_soft_margin_mean", "multilabel_soft_margin_loss", {"reduction": "mean"},
         {"x": x, "target": y01})
    case("multilabel_soft_margin_weight_none", "multilabel_soft_margin_loss",
         {"reduction": "none"}, {"x": x, "target": y01, "weight": g.uniform([5], 0.5, 2)})
    an, po, ne = g.uniform([6, 4]), g.uniform([6, 4]), g.uniform([6, 4])
    case("triplet_margin_mean", "triplet_margin_loss", {"margin": 1.0, "p": 2.0, "swap": False,
                                                         "reduction": "mean"},
         {"x": an, "x2": po, "x3": ne})
    case("triplet_margin_p1_swap_none", "triplet_margin_loss",
         {"margin": 0.5, "p": 1.0, "swap": True, "reduction": "none"},
         {"x": an, "x2": po, "x3": ne})
    case("triplet_margin_1d_sum", "triplet_margin_loss", {"margin": 2.0, "p": 2.0, "swap": False,
                                                           "reduction": "sum"},
         {"x": an[0], "x2": po[0], "x3": ne[0]})
    counts = g.ints([4, 5], 0, 6).float()
    case("poisson_nll_log_mean", "poisson_nll_loss",
         {"log_input": True, "full": False, "reduction": "mean"}, {"x": x * 0.5, "target": counts})
    case("poisson_nll_full_sum", "poisson_nll_loss",
         {"log_input": True, "full": True, "reduction": "sum"}, {"x": x * 0.5, "target": counts})
    case("poisson_nll_rate_full_none", "poisson_nll_loss",
         {"log_input": False, "full": True, "reduction": "none"},
         {"x": g.uniform([4, 5], 0.1, 4), "target": counts})
    mu, tg = g.uniform([4, 3]), g.uniform([4, 3])
    var = g.uniform([4, 3], 0.05, 2)
    var[0, 0] = 1e-8  # below eps: clamped in the forward, its gradient unclamped
    case("gaussian_nll_mean", "gaussian_nll_loss", {"full": False, "eps": 1e-6,
                                                     "reduction": "mean"},
         {"x": mu, "target": tg, "var": var})
    case("gaussian_nll_full_sum", "gaussian_nll_loss", {"full": True, "eps": 1e-6,
                                                         "reduction": "sum"},
         {"x": mu, "target": tg, "var": var})
    case("gaussian_nll_row_var_none", "gaussian_nll_loss",
         {"full": False, "eps": 1e-6, "reduction": "none"},
         {"x": mu, "target": tg, "var": g.uniform([4], 0.1, 2)})
    case("gaussian_nll_last1_var_mean", "gaussian_nll_loss",
         {"full": False, "eps": 1e-6, "reduction": "mean"},
         {"x": mu, "target": tg, "var": g.uniform([4, 1], 0.1, 2)})
    # torch.cdist: the norm of the differences, and for p = 2 past 25 rows the matrix-product
    # form; a row of x2 equal to one of x1 checks the zero distance's zero gradient in both.
    gd = Gen("cdist")
    a3, b3 = gd.uniform([2, 4, 3]), gd.uniform([2, 5, 3])
    b3[0, 2] = a3[0, 1]
    case("cdist_p2", "cdist", {"p": 2.0}, {"x": a3, "x2": b3})
    case("cdist_p1_broadcast", "cdist", {"p": 1.0}, {"x": a3, "x2": b3[1]})
    case("cdist_pinf", "cdist", {"p": "inf"}, {"x": a3, "x2": b3})
    case("cdist_p3", "cdist", {"p": 3.0}, {"x": a3, "x2": b3})
    big1, big2 = gd.uniform([30, 3]), gd.uniform([6, 3])
    big2[4] = big1[7]
    case("cdist_p2_mm", "cdist", {"p": 2.0}, {"x": big1, "x2": big2})
    case("cdist_p2_mm_forced", "cdist", {"p": 2.0, "compute_mode": "use_mm_for_euclid_dist"},
         {"x": a3, "x2": b3})
    case("cdist_p2_mm_never", "cdist", {"p": 2.0,
                                        "compute_mode": "donot_use_mm_for_euclid_dist"},
         {"x": big1, "x2": big2})
    scores, cls = g.uniform([5, 4]), torch.tensor([0, 3, 1, 1, 2])
    case("multi_margin_mean", "multi_margin_loss", {"p": 1, "margin": 1.0, "reduction": "mean"},
         {"x": scores, "target": cls})
    case("multi_margin_p2_weight_none", "multi_margin_loss",
         {"p": 2, "margin": 0.5, "reduction": "none"},
         {"x": scores, "target": cls, "weight": g.uniform([4], 0.5, 2)})
    case("multi_margin_1d_sum", "multi_margin_loss", {"p": 1, "margin": 1.0, "reduction": "sum"},
         {"x": scores[0], "target": cls[1:2].reshape([])})


def embedding_bag_cases():
    """nn.EmbeddingBag: bags from offsets (with an empty one) or a 2-D input, each mode,
    per_sample_weights, include_last_offset and padding_idx; the gradients of the weight and
    of per_sample_weights."""
    flat = torch.tensor([1, 4, 4, 0, 6, 2, 3, 5, 1])
    offsets = torch.tensor([0, 3, 3, 7])  # bags of 3, 0, 4 and 2 entries
    specs = (("embedding_bag_mean", "mean", flat, offsets, {}, False),
             ("embedding_bag_sum_weights", "sum", flat, offsets, {}, True),
             ("embedding_bag_max", "max", flat, offsets, {}, False),
             ("embedding_bag_sum_last_offset", "sum", flat, torch.tensor([0, 2, 5, 8]),
              {"include_last_offset": True}, False),
             ("embedding_bag_mean_padding", "mean", flat, offsets, {"padding_idx": 4}, False),
             ("embedding_bag_2d_max_padding", "max", flat[:8].reshape(2, 4), None,
              {"padding_idx": 1}, False),
             ("embedding_bag_2d_sum_i32", "sum", flat[:6].reshape(3, 2).int(), None, {}, True),
             ("embedding_bag_sum_max_norm_freq", "sum", flat, offsets,
              {"max_norm": 0.8, "scale_grad_by_freq": True}, True),
             ("embedding_bag_mean_freq_padding", "mean", flat, offsets,
              {"scale_grad_by_freq": True, "padding_idx": 1}, False),
             ("embedding_bag_2d_mean_max_norm_p3", "mean", flat[:8].reshape(2, 4), None,
              {"max_norm": 0.5, "norm_type": 3.0}, False))
    for name, mode, inp, offs, extra, weighted in specs:
        g = Gen(name)
        # PyTorch 1.13's CPU embedding_bag backward divides by the wrong index's count under
        # scale_grad_by_freq (pytorch/pytorch#190063, fixed by #190264; its CUDA path and
        # F.embedding's are right). Each lookup of row r is divided by the same count(r), so the
        # right gradient is the unscaled one divided by count(r): PyTorch runs without the flag,
        # and the division follows (embedding_option_cases checks that rule on F.embedding).
        freq = extra.get("scale_grad_by_freq", False)
        m = nn.EmbeddingBag(7, 3, mode=mode, **dict(extra, scale_grad_by_freq=False))
        with torch.no_grad():
            m.weight.copy_(g.uniform([7, 3]))
            if "padding_idx" in extra:
                m.weight[extra["padding_idx"]] = 0
        before = m.weight.detach().clone()
        psw = leaf(g.uniform(list(inp.shape), 0.1, 2)) if weighted else None
        out = m(inp, offs, per_sample_weights=psw)
        leaves = {"weight": m.weight}
        if weighted:
            leaves["per_sample_weights"] = psw
        R, grads = backward(out, g, leaves)
        if freq:
            grads["grad_weight"] /= index_counts(inp, 7).clamp(min=1).unsqueeze(1)
        tensors = {"x": inp, "weight": before}
        if "max_norm" in extra:
            tensors["weight_after"] = m.weight
        if offs is not None:
            tensors["offsets"] = offs
        if weighted:
            tensors["per_sample_weights"] = psw
        add_case(name, "embedding_bag", dict(extra, mode=mode, num_embeddings=7, embedding_dim=3),
                 {**tensors, "R": R, "out": out, **grads}, T_COMP)


def bilinear_cases():
    for name, s1, s2, i1, i2, o, bias in (("bilinear_bias", [4, 3], [4, 5], 3, 5, 2, True),
                                          ("bilinear_nobias_3d", [2, 3, 2], [2, 3, 4], 2, 4, 3,
                                           False),
                                          ("bilinear_1d", [3], [2], 3, 2, 4, True)):
        g = Gen(name)
        m = nn.Bilinear(i1, i2, o, bias=bias)
        with torch.no_grad():
            m.weight.copy_(g.uniform([o, i1, i2], -1, 1))
            if bias:
                m.bias.copy_(g.uniform([o], -1, 1))
        x1, x2 = leaf(g.uniform(s1)), leaf(g.uniform(s2))
        out = m(x1, x2)
        leaves = {"x": x1, "x2": x2, "weight": m.weight}
        if bias:
            leaves["bias"] = m.bias
        R, grads = backward(out, g, leaves)
        tensors = {"x": x1, "x2": x2, "weight": m.weight}
        if bias:
            tensors["bias"] = m.bias
        add_case(name, "bilinear", {"in1_features": i1, "in2_features": i2, "out_features": o,
                                    "bias": bias},
                 {**tensors, "R": R, "out": out, **grads}, T_COMP)


def main():
    torch.set_default_dtype(torch.float32)
    linear_cases()
    layer_norm_cases()
    batch_norm_cases()
    embedding_cases()
    embedding_option_cases()
    activation_cases()
    cross_entropy_cases()
    mse_cases()
    loss_cases()
    bilinear_cases()
    embedding_bag_cases()
    size = dump(OUT_PATH)
    print(f"wrote {len(CASES)} cases, {size} bytes, torch {torch.__version__} -> "
          f"{os.path.normpath(OUT_PATH)}")
    assert size < 200_000, "keep the reference file small"


if __name__ == "__main__":
    sys.exit(main())
