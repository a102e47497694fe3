#!/usr/bin/python3
"""Generate tests/data/pytorch_grid_sample_reference.json: PyTorch's F.grid_sample over every
mode, padding mode and align_corners, in 2 and 3 spatial dims, and F.affine_grid, with the
gradients of the input, the grid and theta (tests/test_grid_sample.cpp).

Regenerate (from the repository root), as tools/gen_cnn_reference.py:

    /usr/bin/python3 tools/gen_grid_sample_reference.py

Format: that of tools/gen_conv_reference.py (reference_common.op_case), ops "grid_sample",
"affine_grid" and "affine_grid_sample" (affine_grid's grid sampled, bilinear), attrs as
F.grid_sample and F.affine_grid take them; nearest's grid gradient is PyTorch's zeros.
"""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (Gen, tensor_json)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_grid_sample_reference.json")
TOL = {"rtol": 1e-4, "atol": 2e-5}
CASES = []


def sample(name, in_shape, grid_shape, mode, padding, align, spread=1.25):
    g = ref.Gen(name)
    x = g.uniform(in_shape, -1.0, 1.0).requires_grad_(True)
    grid = g.uniform(grid_shape, -spread, spread).requires_grad_(True)
    out = F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align)
    CASES.append(ref.op_case(name, "grid_sample", [x, grid], out,
                             {"mode": mode, "padding_mode": padding, "align_corners": align},
                             TOL))


def affine(name, size, align, then_sample=None):
    g = ref.Gen(name)
    dims = len(size) - 2
    eye = torch.eye(dims, dims + 1).expand(size[0], dims, dims + 1)
    theta = (eye + g.uniform([size[0], dims, dims + 1], -0.4, 0.4)).detach().requires_grad_(True)
    grid = F.affine_grid(theta, size, align_corners=align)
    attrs = {"size": size, "align_corners": align}
    if then_sample is None:
        CASES.append(ref.op_case(name, "affine_grid", [theta], grid, attrs, TOL))
        return
    x = g.uniform(size, -1.0, 1.0).requires_grad_(True)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode=then_sample, align_corners=align)
    CASES.append(ref.op_case(name, "affine_grid_sample", [x, theta], out,
                             dict(attrs, padding_mode=then_sample), TOL))


def main():
    for mode in ("bilinear", "nearest", "bicubic"):
        for padding in ("zeros", "border", "reflection"):
            for align in (False, True):
                sample("2d_%s_%s_%s" % (mode, padding, "align" if align else "edges"),
                       [2, 3, 5, 6], [2, 4, 3, 2], mode, padding, align)
    for mode in ("bilinear", "nearest"):
        for padding in ("zeros", "border", "reflection"):
            for align in (False, True):
                sample("3d_%s_%s_%s" % (mode, padding, "align" if align else "edges"),
                       [1, 2, 3, 4, 5], [1, 2, 3, 2, 3], mode, padding, align)
    # Far outside: reflection folds several times; a size-1 dim (twice_low == twice_high).
    sample("2d_bilinear_reflection_far", [1, 2, 4, 3], [1, 5, 5, 2], "bilinear", "reflection",
           False, spread=4.0)
    sample("2d_bicubic_reflection_far_align", [1, 1, 4, 5], [1, 3, 4, 2], "bicubic",
           "reflection", True, spread=3.0)
    sample("2d_bilinear_border_size1", [2, 2, 1, 4], [2, 3, 2, 2], "bilinear", "border", True)
    for align in (False, True):
        suffix = "align" if align else "edges"
        affine("affine_2d_" + suffix, [2, 3, 4, 5], align)
        affine("affine_3d_" + suffix, [2, 1, 2, 3, 4], align)
        affine("affine_sample_2d_" + suffix, [2, 2, 5, 4], align, then_sample="zeros")
    affine("affine_size1", [1, 1, 1, 3], False)
    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    sys.exit(main())
