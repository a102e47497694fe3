#!/usr/bin/python3
"""Generate tests/data/pytorch_nn_functional_reference.json: PyTorch's F.lp_pool1d/2d,
F.multilabel_margin_loss, F.triplet_margin_with_distance_loss (with the default distance and
with a cosine distance) and the evaluation forms of F.rrelu and F.alpha_dropout, with the
gradient of every floating input (tests/test_nn_functional_reference.cpp).

Regenerate (from the repository root), as tools/gen_math_reference.py:

    /usr/bin/python3 tools/gen_nn_functional_reference.py

Format: that of tools/gen_conv_reference.py (reference_common.op_case); attrs are the
function's keyword arguments under PyTorch's names.
"""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (leaf_case, write_case_file)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_nn_functional_reference.json")
TOL = {"rtol": 1e-4, "atol": 1e-5}
CASES = []


def case(name, op, inputs, fn, **attrs):
    """inputs: tensors (floating ones are made leaves requiring grad) or (shape, lo, hi)."""
    ref.leaf_case(CASES, name, op, inputs, fn, TOL, attrs)


def main():
    i64 = lambda v: torch.tensor(v, dtype=torch.int64)  # noqa: E731
    case("lp_pool1d_p2", "lp_pool1d", [([2, 3, 8], -1, 1)],
         lambda x: F.lp_pool1d(x, 2, 3), norm_type=2.0, kernel_size=[3])
    case("lp_pool1d_p3_stride_ceil", "lp_pool1d", [([1, 2, 9], 0.1, 1)],
         lambda x: F.lp_pool1d(x, 3, 4, stride=2, ceil_mode=True), norm_type=3.0,
         kernel_size=[4], stride=[2], ceil_mode=True)
    case("lp_pool2d_p2", "lp_pool2d", [([2, 2, 6, 5], -1, 1)],
         lambda x: F.lp_pool2d(x, 2, (3, 2)), norm_type=2.0, kernel_size=[3, 2])
    case("lp_pool2d_p1_5_stride", "lp_pool2d", [([1, 3, 7, 7], 0.1, 1)],
         lambda x: F.lp_pool2d(x, 1.5, 3, stride=2), norm_type=1.5, kernel_size=[3], stride=[2])
    # Targets: a -1 ends each row's list; what follows it is ignored, a class may repeat.
    y = i64([[3, 0, -1, 1, 2], [1, 4, 2, 1, -1], [-1, 2, 3, 0, 1]])
    for red in ["mean", "sum", "none"]:
        case("multilabel_margin_" + red, "multilabel_margin_loss", [([3, 5], -1, 1), y],
             lambda x, t, r=red: F.multilabel_margin_loss(x, t, reduction=r), reduction=red)
    case("multilabel_margin_1d", "multilabel_margin_loss", [([4], -1, 1), i64([2, 1, -1, 0])],
         lambda x, t: F.multilabel_margin_loss(x, t), reduction="mean")
    case("triplet_distance_default", "triplet_margin_with_distance_loss",
         [([4, 6], -1, 1), ([4, 6], -1, 1), ([4, 6], -1, 1)],
         lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, margin=0.5),
         distance="pairwise", margin=0.5, swap=False, reduction="mean")
    cosine = lambda a, b: 1.0 - F.cosine_similarity(a, b)  # noqa: E731
    case("triplet_distance_cosine_swap", "triplet_margin_with_distance_loss",
         [([5, 3], -1, 1), ([5, 3], -1, 1), ([5, 3], -1, 1)],
         lambda a, p, n: F.triplet_margin_with_distance_loss(
             a, p, n, distance_function=cosine, margin=1.0, swap=True, reduction="none"),
         distance="cosine", margin=1.0, swap=True, reduction="none")
    case("rrelu_eval", "rrelu", [([3, 4], -2, 2)], lambda x: F.rrelu(x, 0.1, 0.3, False),
         lower=0.1, upper=0.3)
    case("alpha_dropout_eval", "alpha_dropout", [([3, 4], -2, 2)],
         lambda x: F.alpha_dropout(x, 0.3, False), p=0.3)
    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    sys.exit(main())
