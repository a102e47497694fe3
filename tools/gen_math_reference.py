#!/usr/bin/python3
"""Generate tests/data/pytorch_math_reference.json: PyTorch's logaddexp, logaddexp2, logit,
sinc, kron, diff, nansum, nanmean, bincount, histc, dist, pdist and renorm, and the products
cross, linalg.cross, vdot, linalg.vecdot, addr, linalg.multi_dot and chain_matmul, with the
gradient of every floating input (tests/test_math_ops.cpp).

Regenerate (from the repository root), as tools/gen_cnn_reference.py:

    /usr/bin/python3 tools/gen_math_reference.py

Format: that of tools/gen_conv_reference.py (reference_common.op_case); attrs are the op's
keyword arguments under PyTorch's names. bincount and histc have no gradient, so their cases
hold no upstream and no grads.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (Gen, tensor_json)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_math_reference.json")
TOL = {"rtol": 1e-4, "atol": 1e-5}
CASES = []


def case(name, op, inputs, fn, **attrs):
    """inputs: tensors (floating ones are made leaves requiring grad) or (shape, lo, hi)."""
    ref.leaf_case(CASES, name, op, inputs, fn, TOL, attrs)


with_values = ref.with_values


def main():
    nan = float("nan")
    case("logaddexp_broadcast", "logaddexp", [([3, 4], -3, 3), ([4], -3, 3)], torch.logaddexp)
    case("logaddexp_far_apart", "logaddexp", [([5], -50, 50), ([5], -1, 1)], torch.logaddexp)
    case("logaddexp2", "logaddexp2", [([2, 3], -4, 4), ([2, 3], -4, 4)], torch.logaddexp2)
    case("logit", "logit", [([3, 4], 0.05, 0.95)], torch.logit)
    case("logit_eps", "logit", [([12], 0.01, 0.99)], lambda x: torch.logit(x, eps=0.2), eps=0.2)
    case("sinc", "sinc", [with_values([9], -3, 3, "sinc", {4: 0.0, 7: 1.0})], torch.sinc)
    case("kron_2d_1d", "kron", [([2, 3], -1, 1), ([4], -1, 1)], torch.kron)
    case("kron_2d_3d", "kron", [([2, 2], -1, 1), ([3, 1, 2], -1, 1)], torch.kron)
    case("diff", "diff", [([3, 5], -2, 2)], torch.diff, n=1, dim=-1)
    case("diff_n2_dim0_prepend_append", "diff", [([4, 3], -2, 2), ([1, 3], -2, 2), ([2, 3], -2, 2)],
         lambda x, p, a: torch.diff(x, n=2, dim=0, prepend=p, append=a), n=2, dim=0)
    case("diff_past_the_length", "diff", [([2, 3], -2, 2)], lambda x: torch.diff(x, n=4, dim=1),
         n=4, dim=1)
    nans = with_values([3, 4], -2, 2, "nans", {1: nan, 6: nan, 7: nan})
    case("nansum", "nansum", [nans], torch.nansum)
    case("nansum_dim_keepdim", "nansum", [nans], lambda x: torch.nansum(x, 1, keepdim=True),
         dim=[1], keepdim=True)
    case("nanmean", "nanmean", [nans], torch.nanmean)
    case("nanmean_dim0", "nanmean", [nans], lambda x: torch.nanmean(x, 0), dim=[0], keepdim=False)
    idx = torch.tensor([3, 0, 5, 3, 3, 1, 5, 0, 2, 6])
    case("bincount", "bincount", [idx], torch.bincount, minlength=0)
    case("bincount_weights_minlength", "bincount", [idx, ([10], 0, 2)],
         lambda x, w: torch.bincount(x, w.detach(), minlength=9), minlength=9)
    # Values on the edges and past them. No NaN: PyTorch 1.13's CPU histc counts NaN in the
    # first bin (pytorch/pytorch#85853, fixed by #85870 to leave NaN out, as its CUDA path and
    # ferry do; tests/test_math_ops.cpp checks that).
    edges = with_values([4, 5], -2, 2, "histc", {0: -1.0, 3: 0.5, 7: 1.0, 9: 2.0, 12: 0.0})
    case("histc", "histc", [edges], lambda x: torch.histc(x.detach(), 4, -1, 1), bins=4, min=-1.0,
         max=1.0)
    case("histc_data_range", "histc", [([30], -3, 3)], lambda x: torch.histc(x.detach(), 7),
         bins=7, min=0.0, max=0.0)
    case("dist", "dist", [([3, 4], -1, 1), ([4], -1, 1)], torch.dist, p=2.0)
    case("dist_p1", "dist", [([5], -1, 1), ([5], -1, 1)], lambda a, b: torch.dist(a, b, 1), p=1.0)
    case("dist_p3", "dist", [([2, 3], -1, 1), ([2, 3], -1, 1)], lambda a, b: torch.dist(a, b, 3),
         p=3.0)
    case("pdist", "pdist", [([5, 3], -1, 1)], torch.pdist, p=2.0)
    case("pdist_p1", "pdist", [([4, 6], -1, 1)], lambda x: torch.pdist(x, 1), p=1.0)
    case("pdist_p3", "pdist", [([3, 2], -1, 1)], lambda x: torch.pdist(x, 3), p=3.0)
    case("renorm", "renorm", [([4, 3], -2, 2)], lambda x: torch.renorm(x, 2, 0, 1.5), p=2.0,
         dim=0, maxnorm=1.5)
    case("renorm_p1_dim1", "renorm", [([2, 3, 4], -1, 1)], lambda x: torch.renorm(x, 1, 1, 4.0),
         p=1.0, dim=1, maxnorm=4.0)
    case("cross_default_dim", "cross", [([3, 2], -1, 1), ([3, 2], -1, 1)], torch.cross)
    case("linalg_cross_broadcast", "linalg_cross", [([2, 1, 3], -1, 1), ([1, 4, 3], -1, 1)],
         torch.linalg.cross, dim=-1)
    case("cross_dim1", "cross", [([2, 3, 2], -1, 1), ([2, 3, 2], -1, 1)],
         lambda a, b: torch.cross(a, b, dim=1), dim=1)
    case("vdot", "vdot", [([6], -1, 1), ([6], -1, 1)], torch.vdot)
    case("vecdot", "vecdot", [([3, 4], -1, 1), ([4], -1, 1)], torch.linalg.vecdot, dim=-1)
    case("vecdot_dim1", "vecdot", [([2, 3, 4], -1, 1), ([2, 3, 4], -1, 1)],
         lambda x, y: torch.linalg.vecdot(x, y, dim=1), dim=1)
    case("addr", "addr", [([3, 4], -1, 1), ([3], -1, 1), ([4], -1, 1)],
         lambda i, a, b: torch.addr(i, a, b, beta=0.5, alpha=2.0), beta=0.5, alpha=2.0)
    case("addr_broadcast", "addr", [([4], -1, 1), ([3], -1, 1), ([4], -1, 1)], torch.addr,
         beta=1.0, alpha=1.0)
    case("multi_dot_vectors_at_the_ends", "multi_dot",
         [([3], -1, 1), ([3, 4], -1, 1), ([4, 5], -1, 1), ([5], -1, 1)],
         lambda *m: torch.linalg.multi_dot(m))
    case("multi_dot_reordered", "multi_dot",
         [([2, 6], -1, 1), ([6, 3], -1, 1), ([3, 7], -1, 1), ([7, 2], -1, 1)],
         lambda *m: torch.linalg.multi_dot(m))
    case("chain_matmul", "chain_matmul", [([2, 3], -1, 1), ([3, 4], -1, 1), ([4, 2], -1, 1)],
         lambda *m: torch.chain_matmul(*m))
    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    sys.exit(main())
