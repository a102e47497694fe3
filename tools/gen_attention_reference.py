#!/usr/bin/python3
"""Generate tests/data/pytorch_attention_reference.json: PyTorch's results and gradients of
scaled_dot_product_attention (tests/test_attention.cpp runs them with ferry on every device and
compares).

Regenerate (from the repository root), as tools/gen_cnn_reference.py:

    /usr/bin/python3 tools/gen_attention_reference.py

The reference is PyTorch's documented math for F.scaled_dot_product_attention (the "equivalent"
code of its docs, 2.5: scale, is_causal's top-left triangle, a bool or additive attn_mask,
enable_gqa's repeat_interleave of the key/value heads, and 0 for a row with every key masked),
computed in float64 from float32 inputs. Where PyTorch 1.13's own
F._scaled_dot_product_attention takes the case (no scale, no grouped-query heads, no fully
masked row), the script checks the math against it first.

Format as tools/gen_cnn_reference.py's ({"torch_version", "cases": [{"name", "op", "attrs",
"inputs", "upstream", "output", "grads", "tol"}]}); attrs: is_causal, scale (optional),
enable_gqa, and a bool mask as "bool_mask" {"shape", "data" (0/1)}; an additive mask is the
fourth input (and gets a gradient).
"""

import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (Gen, tensor_json)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_attention_reference.json")
TOL = {"rtol": 1e-4, "atol": 2e-5}
CASES = []


def sdpa(q, k, v, attn_mask=None, is_causal=False, scale=None, enable_gqa=False):
    """PyTorch 2.5's documented reference, with its safe softmax for fully masked rows."""
    L, S = q.size(-2), k.size(-2)
    scale_factor = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=q.dtype)
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool).tril(diagonal=0)
        bias = bias.masked_fill(keep.logical_not(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            bias = bias.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            bias = attn_mask + bias
    if enable_gqa:
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    s = q @ k.transpose(-2, -1) * scale_factor + bias
    all_masked = (s == float("-inf")).all(dim=-1, keepdim=True)
    p = torch.softmax(s.masked_fill(all_masked, 0.0), dim=-1).masked_fill(all_masked, 0.0)
    return p @ v


def case(name, shapes, is_causal=False, scale=None, enable_gqa=False, bool_mask=None,
         masked_rows=()):
    g = ref.Gen(name)
    inputs = [g.uniform(s, -1.0, 1.0) for s in shapes]
    mask = None
    attrs = {"is_causal": is_causal, "enable_gqa": enable_gqa}
    if scale is not None:
        attrs["scale"] = scale
    if bool_mask is not None:
        mask = g.uniform(bool_mask, -1.0, 1.0) > -0.5
        for r in masked_rows:
            mask[..., r, :] = False
        attrs["bool_mask"] = {"shape": list(mask.shape),
                              "data": [int(x) for x in mask.reshape(-1).tolist()]}
    x64 = [t.double().requires_grad_(True) for t in inputs]
    m = x64[3] if len(x64) > 3 else mask
    out = sdpa(x64[0], x64[1], x64[2], m, is_causal, scale, enable_gqa)
    if scale is None and not enable_gqa and not masked_rows:
        torch_out = F._scaled_dot_product_attention(x64[0], x64[1], x64[2], m, 0.0, False,
                                                    is_causal)[0]
        assert torch.allclose(out, torch_out, rtol=1e-12, atol=1e-12), name
    upstream = g.uniform(list(out.shape), -1.0, 1.0)
    out.backward(upstream.double())
    j = lambda ts: ",".join(ref.tensor_json(t) for t in ts)  # noqa: E731
    CASES.append('{"name":%s,"op":"scaled_dot_product_attention","attrs":%s,"inputs":[%s],'
                 '"upstream":%s,"output":%s,"grads":[%s],"tol":%s}'
                 % (json.dumps(name), json.dumps(attrs), j(inputs), ref.tensor_json(upstream),
                    ref.tensor_json(out.detach().float()),
                    j([t.grad.float() for t in x64]), json.dumps(TOL)))


def main():
    case("plain_odd_lengths", [[2, 3, 7, 8], [2, 3, 9, 8], [2, 3, 9, 5]])
    case("causal_square_across_blocks", [[1, 2, 70, 8]] * 3, is_causal=True)
    case("causal_more_keys", [[1, 2, 5, 4], [1, 2, 9, 4], [1, 2, 9, 4]], is_causal=True)
    case("causal_more_queries", [[1, 1, 9, 4], [1, 1, 5, 4], [1, 1, 5, 6]], is_causal=True)
    case("scale", [[2, 2, 6, 8], [2, 2, 6, 8], [2, 2, 6, 8]], scale=0.35)
    case("bool_mask_broadcast", [[2, 2, 6, 4], [2, 2, 7, 4], [2, 2, 7, 4]], bool_mask=[6, 7])
    case("bool_mask_fully_masked_rows", [[1, 2, 6, 4], [1, 2, 7, 4], [1, 2, 7, 4]],
         bool_mask=[2, 6, 7], masked_rows=(1, 4))
    case("additive_mask", [[2, 2, 5, 4], [2, 2, 6, 4], [2, 2, 6, 4], [1, 2, 5, 6]])
    case("grouped_query", [[2, 4, 5, 8], [2, 2, 6, 8], [2, 2, 6, 8]], enable_gqa=True)
    case("grouped_query_causal_scale", [[1, 6, 8, 4], [1, 2, 8, 4], [1, 2, 8, 4]],
         enable_gqa=True, is_causal=True, scale=0.5)
    case("length_one", [[2, 3, 1, 8], [2, 3, 1, 8], [2, 3, 1, 8]])
    case("one_query_many_keys", [[1, 2, 1, 8], [1, 2, 40, 8], [1, 2, 40, 8]])
    case("three_dims", [[3, 6, 4], [3, 5, 4], [3, 5, 2]])
    case("long_causal", [[1, 1, 130, 4]] * 3, is_causal=True)
    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    sys.exit(main())
