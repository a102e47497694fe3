"""What the PyTorch reference generators share: dtypes, tolerances, the
per-case seeded inputs, and the JSON encoding of tensors and cases (the format
is described in gen_reference.py)."""

import json
import math
import os
import zlib

import numpy as np
import torch


DTYPE_NAMES = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "i32",
    torch.int64: "i64", torch.uint8: "u8", torch.int8: "i8", torch.int16: "i16",
    torch.bool: "bool",
}
f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
i32, i64, u8, boolean = torch.int32, torch.int64, torch.uint8, torch.bool
i8, i16 = torch.int8, torch.int16
NAN, INF = float("nan"), float("inf")

# Tolerances.
EXACT = {"rtol": 0.0, "atol": 0.0}
T_F32 = {"rtol": 1e-5, "atol": 1e-6}       # arithmetic, comparisons' float inputs, copies
T_TRANS = {"rtol": 5e-6, "atol": 1e-6}     # exp log sqrt rsqrt sin cos tanh sigmoid
T_ACT = {"rtol": 1e-5, "atol": 1e-6}       # gelu silu pow softmax
T_RED = {"rtol": 1e-5, "atol": 1e-5}       # sum mean log_softmax (summation order)
T_LOOSE = {"rtol": 1e-4, "atol": 1e-5}     # matmul var layer_norm
T_F16 = {"rtol": 1e-3, "atol": 1e-5}
T_BF16 = {"rtol": 1e-2, "atol": 1e-4}


def tol_for(dtype, f32_tol):
    if dtype == f16:
        return T_F16
    if dtype == bf16:
        return T_BF16
    if dtype in (f32,):
        return f32_tol
    return EXACT


# ---------------------------------------------------------------- inputs

class Gen:
    """Per-case random source: seeded from the case name."""

    def __init__(self, name):
        self.g = torch.Generator().manual_seed(zlib.crc32(name.encode()))

    def uniform(self, shape, lo=-3.0, hi=3.0, dtype=f32, decimals=3):
        x = torch.rand(shape, generator=self.g, dtype=torch.float64) * (hi - lo) + lo
        x = torch.round(x * 10**decimals) / 10**decimals  # short decimals keep the file small
        return x.to(dtype)

    def normal(self, shape, mean=0.0, std=1.0, dtype=f32, decimals=3):
        x = torch.randn(shape, generator=self.g, dtype=torch.float64) * std + mean
        x = torch.round(x * 10**decimals) / 10**decimals
        return x.to(dtype)

    def ints(self, shape, lo, hi, dtype=i64):
        return torch.randint(lo, hi, shape, generator=self.g, dtype=torch.int64).to(dtype)

    def bools(self, shape):
        return torch.randint(0, 2, shape, generator=self.g).to(boolean)


def T(values, dtype=f32, shape=None):
    t = torch.tensor(values, dtype=torch.float64 if dtype.is_floating_point else torch.int64)
    t = t.to(dtype)
    return t.reshape(shape) if shape is not None else t


def ref_upcast(fn, inputs, out_dtype):
    """f16/bf16 reference: compute in f32 from the (exact) half inputs, round once."""
    ups = [t.float() if t.dtype in (f16, bf16) else t for t in inputs]
    return fn(*ups).to(out_dtype)


# ---------------------------------------------------------------- serialisation

def fmt_float(v):
    if math.isnan(v):
        return '"nan"'
    if math.isinf(v):
        return '"inf"' if v > 0 else '"-inf"'
    f = np.float32(v)
    s = str(f)  # shortest decimal that reads back as this f32
    if s.endswith(".0") and s != "-0.0":  # "-0" would read back as the integer 0
        s = s[:-2]
    if not (np.float32(float(s)) == f and math.copysign(1, float(s)) == math.copysign(1, v)):
        s = repr(float(f))  # the exact double: reads back exactly, whatever the reader
    return s


def tensor_json(t):
    dt = DTYPE_NAMES[t.dtype]
    flat = t.detach().reshape(-1)
    if t.dtype in (f32, f16, bf16):
        vals = [float(np.float32(v)) for v in flat.float().tolist()]
        data = "[" + ",".join(fmt_float(v) for v in vals) + "]"
    elif t.dtype == boolean:
        data = "[" + ",".join("true" if v else "false" for v in flat.tolist()) + "]"
    else:
        data = "[" + ",".join(str(int(v)) for v in flat.tolist()) + "]"
    return '{"shape":%s,"dtype":"%s","data":%s}' % (json.dumps(list(t.shape)), dt, data)


CASES = []
NAMES = set()


def add_case(name, op, inputs, out, attrs=None, tol=None):
    assert name not in NAMES, name
    NAMES.add(name)
    if tol is None:
        tol = tol_for(out.dtype, T_F32)
    CASES.append((name, op, list(inputs), attrs or {}, out, tol))


def dump(path):
    lines = ['{"torch_version": %s,' % json.dumps(torch.__version__), '"cases": [']
    for k, (name, op, inputs, attrs, out, tol) in enumerate(CASES):
        s = ('{"name":%s,"op":%s,"inputs":[%s],"attrs":%s,"output":%s,"tol":{"rtol":%r,"atol":%r}}'
             % (json.dumps(name), json.dumps(op), ",".join(tensor_json(t) for t in inputs),
                json.dumps(attrs, sort_keys=True, separators=(",", ":")), tensor_json(out),
                float(tol["rtol"]), float(tol["atol"])))
        lines.append(s + ("," if k + 1 < len(CASES) else ""))
    lines.append("]}")
    text = "\n".join(lines) + "\n"
    json.loads(text)  # must parse
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return len(text)


SPECIAL = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0]


def op_case(name, op, inputs, out, attrs, tol):
    """One case, as JSON text, in the format tests/torch_reference.hpp's run_reference_file
    reads (that of gen_conv_reference.py): the inputs (the floating ones requiring grad, `out`
    computed from them), the output, an upstream drawn by Gen(name + "/upstream"), and each
    input's gradient of sum(out * upstream), zeros where PyTorch gives none. An output that
    does not require grad (an op without a gradient: bincount, histc) has no upstream and no
    gradients."""
    j = lambda ts: ",".join(tensor_json(t) for t in ts)  # noqa: E731
    head = '{"name":%s,"op":%s,"attrs":%s,"inputs":[%s],' % (
        json.dumps(name), json.dumps(op), json.dumps(attrs, sort_keys=True),
        j(t.detach() for t in inputs))
    if not out.requires_grad:
        return head + '"output":%s,"tol":%s}' % (tensor_json(out.detach()), json.dumps(tol))
    upstream = Gen(name + "/upstream").uniform(list(out.shape), -1.0, 1.0)
    wanted = [t for t in inputs if t.requires_grad]
    found = iter(torch.autograd.grad((out * upstream).sum(), wanted, allow_unused=True))
    grads = [next(found) if t.requires_grad else None for t in inputs]
    grads = [torch.zeros_like(t) if g is None else g for t, g in zip(inputs, grads)]
    return head + '"upstream":%s,"output":%s,"grads":[%s],"tol":%s}' % (
        tensor_json(upstream), tensor_json(out.detach()), j(grads), json.dumps(tol))


def leaf_case(cases, name, op, inputs, fn, tol, attrs):
    """Appends to `cases` the op_case of fn(*inputs): each input a tensor (cloned) or a
    (shape, lo, hi) drawn uniformly by Gen(name), the floating ones made leaves that require
    grad (the gen_*_reference.py scripts' case())."""
    g = Gen(name)
    made = []
    for x in inputs:
        t = g.uniform(x[0], x[1], x[2]) if isinstance(x, tuple) else x.clone()
        made.append(t.requires_grad_(True) if t.is_floating_point() else t)
    cases.append(op_case(name, op, made, fn(*made), attrs, tol))


def with_values(shape, lo, hi, name, at):
    """Uniform values drawn by Gen(name), with some set exactly (at: {flat index: value})."""
    t = Gen(name).uniform(shape, lo, hi).reshape(-1)
    for i, v in at.items():
        t[i] = v
    return t.reshape(shape)


def write_case_file(path, cases, limit=300_000):
    """Writes {"torch_version", "cases": [...]} to path, the cases given as JSON texts (the
    format of gen_conv_reference.py and the files after it), checked to parse and kept under
    `limit` bytes."""
    text = ('{"torch_version": %s,\n"cases": [\n' % json.dumps(torch.__version__) +
            ",\n".join(cases) + "\n]}\n")
    json.loads(text)
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {len(cases)} cases, {len(text)} bytes -> {os.path.normpath(path)}")
    assert len(text) < limit, "keep the reference file small"
