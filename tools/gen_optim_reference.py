#!/usr/bin/python3
"""Generate tests/data/pytorch_optim_reference.json: SGD, Adam, AdamW, RMSprop, Adagrad,
Adamax, NAdam and RAdam trajectories
as PyTorch computes them, for tests/test_optim_pytorch.cpp.

Regenerate (from the repository root):

    apt-get install -y python3-torch              # Debian 12: python3-torch 1.13.1+dfsg-4
    /usr/bin/python3 tools/gen_optim_reference.py # writes tests/data/pytorch_optim_reference.json

Use Debian's /usr/bin/python3 (the one python3-torch installs into). The committed
file was made with python3-torch 1.13.1+dfsg-4 (torch.__version__ == "1.13.0a0"),
on the CPU, with foreach=False: PyTorch's `_single_tensor_sgd`/`_single_tensor_adam`/
`_single_tensor_adamw`, the rules ferry implements. The output is deterministic:
every case draws its parameters and gradients from its own torch.Generator seeded
with crc32(case name), and two runs write identical bytes.

Format:

    {"torch_version": str,
     "cases": [{"name": str, "optimizer": "sgd"|"adam"|"adamw",
                "groups": [{"params": [parameter indices], "options": {ferry's option names}}],
                "params": [{"shape": [...], "data": [flat f32 values]}],   # before the first step
                "steps": [{"grads": [flat f32 values, or null: no gradient this step],
                           "params": [flat values after the step],
                           "state": {"<param index>": {"step": n, "<name>": [flat values]}}}]}]}

Options use ferry's names: SGD {lr, momentum, dampening, weight_decay, nesterov,
maximize}; Adam/AdamW {lr, beta1, beta2, eps, weight_decay, amsgrad, maximize}.
State names are PyTorch's (exp_avg, exp_avg_sq, max_exp_avg_sq, momentum_buffer).
Values are f32, written as the shortest decimals that read back to the same f32.
"""

import json
import os
import zlib

import numpy as np
import torch

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_optim_reference.json")

SHAPES = [[3], [2, 2], [2, 1]]
STEPS = 5
# (step, parameter) pairs that get no gradient: skipped, their step does not advance.
NO_GRAD = {(2, 1), (3, 2)}

SGD_DEFAULTS = dict(lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                    maximize=False)
ADAM_DEFAULTS = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, amsgrad=False,
                     maximize=False)
ADAMW_DEFAULTS = dict(ADAM_DEFAULTS, weight_decay=1e-2)

# name, optimizer, options of each group (parameter i goes to group i * len(groups) // 3).
CASES = [
    ("sgd_plain", "sgd", [dict(lr=0.1)]),
    ("sgd_momentum", "sgd", [dict(lr=0.05, momentum=0.9)]),
    ("sgd_dampening", "sgd", [dict(lr=0.05, momentum=0.9, dampening=0.25)]),
    ("sgd_nesterov_weight_decay", "sgd",
     [dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)]),
    ("sgd_maximize", "sgd", [dict(lr=0.1, momentum=0.5, weight_decay=0.1, maximize=True)]),
    ("sgd_groups", "sgd", [dict(lr=0.1), dict(lr=0.02, momentum=0.8, dampening=0.1)]),
    ("adam_default", "adam", [dict(lr=1e-2)]),
    ("adam_weight_decay", "adam", [dict(lr=1e-2, weight_decay=0.1)]),
    ("adam_amsgrad", "adam", [dict(lr=1e-2, amsgrad=True, beta1=0.8, beta2=0.95)]),
    ("adam_maximize", "adam", [dict(lr=1e-2, maximize=True, weight_decay=0.05, eps=1e-6)]),
    ("adam_groups", "adam", [dict(lr=1e-2), dict(lr=5e-2, amsgrad=True, weight_decay=0.1)]),
    ("adamw_default", "adamw", [dict(lr=1e-2)]),
    ("adamw_amsgrad_maximize", "adamw",
     [dict(lr=1e-2, weight_decay=0.1, amsgrad=True, maximize=True)]),
    ("rmsprop_default", "rmsprop", [dict(lr=1e-2)]),
    ("rmsprop_centered_momentum", "rmsprop",
     [dict(lr=1e-2, momentum=0.9, centered=True, weight_decay=0.1, maximize=True)]),
    ("adagrad_default", "adagrad", [dict(lr=1e-1)]),
    ("adagrad_decay", "adagrad",
     [dict(lr=1e-1, lr_decay=0.1, weight_decay=0.05, initial_accumulator_value=0.5)]),
    ("adamax_default", "adamax", [dict(lr=1e-2)]),
    ("adamax_weight_decay_maximize", "adamax", [dict(lr=1e-2, weight_decay=0.1, maximize=True)]),
    ("nadam_default", "nadam", [dict(lr=1e-2)]),
    ("nadam_weight_decay", "nadam", [dict(lr=1e-2, weight_decay=0.1, momentum_decay=0.01)]),
    ("radam_default", "radam", [dict(lr=1e-2)]),
    ("radam_rectified", "radam", [dict(lr=1e-2, beta2=0.9, weight_decay=0.1)]),
]

# The other optimizers take ferry's option names as they are, betas but as a pair.
OTHER = {"rmsprop": torch.optim.RMSprop, "adagrad": torch.optim.Adagrad,
         "adamax": torch.optim.Adamax, "nadam": torch.optim.NAdam, "radam": torch.optim.RAdam}


def torch_group(kind, options):
    if kind in OTHER:
        o = dict(options)
        if "beta1" in o or "beta2" in o:
            o["betas"] = (o.pop("beta1", 0.9), o.pop("beta2", 0.999))
        return dict(o, foreach=False)
    if kind == "sgd":
        o = dict(SGD_DEFAULTS, **options)
        return dict(lr=o["lr"], momentum=o["momentum"], dampening=o["dampening"],
                    weight_decay=o["weight_decay"], nesterov=o["nesterov"],
                    maximize=o["maximize"], foreach=False)
    o = dict(ADAMW_DEFAULTS if kind == "adamw" else ADAM_DEFAULTS, **options)
    return dict(lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                weight_decay=o["weight_decay"], amsgrad=o["amsgrad"], maximize=o["maximize"],
                foreach=False)


def fmt_f32(v):
    f = np.float32(v)
    s = str(f)  # the shortest decimal that reads back as this f32
    if s.endswith(".0") and s != "-0.0":
        s = s[:-2]
    assert np.float32(float(s)) == f
    return s


def values(t):
    return "[" + ",".join(fmt_f32(v) for v in t.detach().reshape(-1).tolist()) + "]"


def run_case(name, kind, group_options):
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    params = [torch.randn(s, generator=g).requires_grad_() for s in SHAPES]
    initial = [values(p) for p in params]
    n_groups = len(group_options)
    members = [[i for i in range(len(params)) if i * n_groups // len(params) == k]
               for k in range(n_groups)]
    groups = [dict(params=[params[i] for i in m], **torch_group(kind, o))
              for m, o in zip(members, group_options)]
    cls = dict(OTHER, sgd=torch.optim.SGD, adam=torch.optim.Adam, adamw=torch.optim.AdamW)[kind]
    # Adagrad fills its state from the constructor's initial_accumulator_value, not the
    # group's (ferry's is per group): pass the one group's to both.
    extra = {}
    if kind == "adagrad" and len(group_options) == 1:
        extra["initial_accumulator_value"] = group_options[0].get("initial_accumulator_value", 0.0)
    opt = cls(groups, lr=1e-3, **extra)
    steps = []
    for s in range(STEPS):
        grads = []
        for i, p in enumerate(params):
            if (s, i) in NO_GRAD:
                p.grad = None
                grads.append("null")
            else:
                p.grad = torch.randn(p.shape, generator=g)
                grads.append(values(p.grad))
        opt.step()
        state = []
        for i, p in enumerate(params):
            st = opt.state.get(p, {})
            fields = []
            if "step" in st:
                fields.append('"step":%d' % int(st["step"]))
            for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer", "square_avg",
                        "grad_avg", "sum", "exp_inf"):
                if st.get(key) is not None:
                    fields.append('"%s":%s' % (key, values(st[key])))
            if fields:
                state.append('"%d":{%s}' % (i, ",".join(fields)))
        steps.append('{"grads":[%s],"params":[%s],"state":{%s}}'
                     % (",".join(grads), ",".join(values(p) for p in params), ",".join(state)))
    group_json = ",".join(
        '{"params":%s,"options":%s}' % (json.dumps(m), json.dumps(o, sort_keys=True))
        for m, o in zip(members, group_options))
    param_json = ",".join('{"shape":%s,"data":%s}' % (json.dumps(s), d)
                          for s, d in zip(SHAPES, initial))
    return ('{"name":%s,"optimizer":"%s","groups":[%s],"params":[%s],\n "steps":[\n  %s]}'
            % (json.dumps(name), kind, group_json, param_json, ",\n  ".join(steps)))


def main():
    torch.set_num_threads(1)
    cases = [run_case(*c) for c in CASES]
    text = ('{"torch_version": %s,\n"cases": [\n%s\n]}\n'
            % (json.dumps(torch.__version__), ",\n".join(cases)))
    json.loads(text)  # well-formed
    with open(OUT_PATH, "w") as f:
        f.write(text)
    print("wrote %s: %d cases, %d bytes" % (OUT_PATH, len(cases), len(text)))


if __name__ == "__main__":
    main()
