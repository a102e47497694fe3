#!/usr/bin/python3
"""Generate tests/data/pytorch_conv_reference.json: PyTorch's results and gradients for
conv1d, conv2d, conv3d, unfold and fold (F.*), which tests/test_conv.cpp runs with ferry's
ops on every device and compares.

Regenerate (from the repository root):

    apt-get install -y python3-torch            # Debian 12: python3-torch 1.13.1+dfsg-4
    /usr/bin/python3 tools/gen_conv_reference.py

Use Debian's /usr/bin/python3 (the one python3-torch installs into). The committed file
was made with python3-torch 1.13.1+dfsg-4 (torch.__version__ == "1.13.0a0"). Inputs come
from tools/gen_reference.py's per-case generator (seeded with crc32 of the case name,
rounded to three decimals), so two runs write identical bytes.

Format: {"torch_version": str, "cases": [{"name": str, "op": str, "attrs": {...},
"inputs": [tensor...], "upstream": tensor, "output": tensor, "grads": [tensor...],
"tol": {...}}]}, tensors as in pytorch_reference.json. The output is F.<op>(*inputs,
**attrs) in f32, and grads[i] is d/d inputs[i] of sum(output * upstream). attrs hold
PyTorch's keyword arguments (stride, padding, dilation, groups; kernel_size and
output_size for unfold and fold), each size an int or a list, padding also "same"/"valid".
"""

import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (Gen, tensor_json)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_conv_reference.json")
TOL = {"rtol": 1e-4, "atol": 1e-5}
CASES = []


def case(name, op, shapes, attrs, bias=True):
    g = ref.Gen(name)
    inputs = [g.uniform(s, -1.0, 1.0) for s in shapes]
    if op.startswith("conv") and not bias:
        inputs = inputs[:2]
    for t in inputs:
        t.requires_grad_(True)
    fn = getattr(F, op)
    out = fn(*inputs, **attrs)
    upstream = g.uniform(list(out.shape), -1.0, 1.0)
    grads = torch.autograd.grad((out * upstream).sum(), inputs, allow_unused=True)
    grads = [torch.zeros_like(t) if gr is None else gr for t, gr in zip(inputs, grads)]
    CASES.append('{"name":%s,"op":%s,"attrs":%s,"inputs":[%s],"upstream":%s,"output":%s,'
                 '"grads":[%s],"tol":%s}' % (
                     json.dumps(name), json.dumps(op), json.dumps(attrs, sort_keys=True),
                     ",".join(ref.tensor_json(t) for t in inputs), ref.tensor_json(upstream),
                     ref.tensor_json(out.detach()),
                     ",".join(ref.tensor_json(gr) for gr in grads), json.dumps(TOL)))


def conv_cases():
    case("conv1d_basic", "conv1d", [[2, 3, 9], [4, 3, 3], [4]], {})
    case("conv1d_stride2_pad1", "conv1d", [[2, 3, 10], [5, 3, 4], [5]],
         {"stride": 2, "padding": 1})
    case("conv1d_dilation2_nobias", "conv1d", [[1, 2, 11], [3, 2, 3]], {"dilation": 2},
         bias=False)
    case("conv1d_depthwise", "conv1d", [[2, 3, 8], [6, 1, 3], [6]], {"groups": 3, "padding": 2})
    case("conv1d_same_even_kernel", "conv1d", [[2, 2, 7], [3, 2, 4], [3]], {"padding": "same"})
    case("conv1d_valid_unbatched", "conv1d", [[3, 6], [2, 3, 2], [2]], {"padding": "valid"})
    case("conv2d_basic", "conv2d", [[2, 3, 7, 6], [4, 3, 3, 3], [4]], {"padding": 1})
    case("conv2d_stride_dilation", "conv2d", [[2, 2, 9, 8], [3, 2, 3, 2], [3]],
         {"stride": [2, 1], "padding": [1, 0], "dilation": [1, 2]})
    case("conv2d_groups2", "conv2d", [[2, 4, 5, 5], [6, 2, 3, 3], [6]], {"groups": 2})
    case("conv2d_depthwise", "conv2d", [[1, 4, 6, 7], [8, 1, 3, 3], [8]],
         {"groups": 4, "padding": 1, "stride": 2})
    case("conv2d_same", "conv2d", [[1, 3, 6, 5], [2, 3, 2, 3], [2]],
         {"padding": "same", "dilation": [2, 1]})
    case("conv2d_1x1_nobias", "conv2d", [[2, 5, 4, 3], [3, 5, 1, 1]], {}, bias=False)
    case("conv2d_unbatched", "conv2d", [[2, 5, 5], [3, 2, 3, 3], [3]], {"stride": 2})
    case("conv2d_kernel_is_input", "conv2d", [[3, 2, 4, 3], [2, 2, 4, 3], [2]], {})
    case("conv2d_empty_batch", "conv2d", [[0, 2, 5, 5], [3, 2, 3, 3], [3]], {"padding": 1})
    case("conv3d_basic", "conv3d", [[1, 2, 4, 5, 4], [3, 2, 2, 3, 2], [3]],
         {"stride": [1, 2, 1], "padding": [1, 0, 1]})
    case("conv3d_groups2_nobias", "conv3d", [[2, 4, 3, 4, 3], [2, 2, 2, 2, 2]], {"groups": 2},
         bias=False)


def unfold_fold_cases():
    case("unfold_basic", "unfold", [[2, 3, 5, 6]],
         {"kernel_size": [2, 3], "dilation": [1, 2], "padding": 1, "stride": [2, 1]})
    case("unfold_unbatched", "unfold", [[3, 4, 4]], {"kernel_size": 2})
    # fold of unfold-shaped columns: [N, C * 2 * 3, L] onto 5 x 6 with the same geometry.
    case("fold_basic", "fold", [[2, 3 * 6, 12]],
         {"output_size": [5, 6], "kernel_size": [2, 3], "dilation": [1, 2], "padding": 1,
          "stride": [2, 1]})
    case("fold_overlap_unbatched", "fold", [[2 * 4, 9]], {"output_size": [4, 4],
                                                        "kernel_size": 2})


def main():
    conv_cases()
    unfold_fold_cases()
    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    sys.exit(main())
