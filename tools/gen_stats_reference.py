#!/usr/bin/python3
"""Generate tests/data/pytorch_stats_reference.json: PyTorch's aminmax, cov, corrcoef, quantile,
nanquantile, logcumsumexp, trapezoid, cumulative_trapezoid, fmax, fmin, heaviside and
float_power, and the assembling ops take, index_copy, diag_embed, block_diag and
cartesian_prod, with the gradient of every floating input (tests/test_stats_ops.cpp).

Regenerate (from the repository root), as tools/gen_math_reference.py:

    /usr/bin/python3 tools/gen_stats_reference.py

Format: that of tools/gen_conv_reference.py (reference_common.op_case); attrs are the op's
keyword arguments under PyTorch's names. aminmax's two outputs are two cases ("which": "min"
or "max"). heaviside has no gradient, so its cases hold no upstream and no grads. float_power's
f64 result is written as f32 (the format has no f64); the test compares it so.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (Gen, tensor_json)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_stats_reference.json")
TOL = {"rtol": 1e-4, "atol": 1e-5}
CASES = []


def case(name, op, inputs, fn, **attrs):
    """inputs: tensors (floating ones are made leaves requiring grad) or (shape, lo, hi)."""
    ref.leaf_case(CASES, name, op, inputs, fn, TOL, attrs)


with_values = ref.with_values


def main():
    nan = float("nan")
    i64 = lambda v: torch.tensor(v, dtype=torch.int64)  # noqa: E731
    # Assembling.
    case("take", "take", [([3, 4], -1, 1), i64([[0, -1, 5], [11, 2, -12]])], torch.take)
    case("index_copy_dim0", "index_copy", [([4, 3], -1, 1), i64([2, 0]), ([2, 3], -1, 1)],
         lambda x, i, s: x.index_copy(0, i, s), dim=0)
    case("index_copy_last_dim", "index_copy", [([2, 5], -1, 1), i64([4, 1, 3]), ([2, 3], -1, 1)],
         lambda x, i, s: x.index_copy(-1, i, s), dim=-1)
    case("diag_embed", "diag_embed", [([2, 3], -1, 1)], torch.diag_embed, offset=0, dim1=-2,
         dim2=-1)
    case("diag_embed_offset_dims", "diag_embed", [([2, 3], -1, 1)],
         lambda x: torch.diag_embed(x, offset=1, dim1=0, dim2=2), offset=1, dim1=0, dim2=2)
    case("diag_embed_below", "diag_embed", [([3], -1, 1)],
         lambda x: torch.diag_embed(x, offset=-2), offset=-2, dim1=-2, dim2=-1)
    case("block_diag", "block_diag", [([2, 2], -1, 1), ([3], -1, 1), torch.tensor(0.5), ([2, 1], -1, 1)],
         torch.block_diag)
    case("cartesian_prod", "cartesian_prod", [([2], -1, 1), ([3], -1, 1), ([2], -1, 1)],
         torch.cartesian_prod)
    # Statistics. Ties in aminmax share the gradient. PyTorch 1.13 has no derivative for
    # aminmax (2.0 added one: amin's and amax's), so its values are checked against aminmax and
    # its gradients come from amin and amax.
    def aminmax(which, **kw):
        def fn(x):
            both = torch.aminmax(x.detach(), **kw)
            part = (torch.amin if which == "min" else torch.amax)(x, **kw) if kw else \
                (torch.amin if which == "min" else torch.amax)(x)
            assert torch.equal(part.detach(), getattr(both, which))
            return part
        return fn

    ties = with_values([3, 4], -1, 1, "aminmax", {1: 0.95, 3: 0.95, 8: -0.97, 10: -0.97})
    case("aminmax_min_dim1_keepdim", "aminmax", [ties],
         aminmax("min", dim=1, keepdim=True), which="min", dim=1, keepdim=True)
    case("aminmax_max_dim1", "aminmax", [ties], aminmax("max", dim=1),
         which="max", dim=1, keepdim=False)
    case("aminmax_max_all", "aminmax", [ties], aminmax("max"), which="max")
    case("cov", "cov", [([3, 5], -1, 1)], torch.cov, correction=1)
    case("cov_correction0_one_variable", "cov", [([6], -2, 2)],
         lambda x: torch.cov(x, correction=0), correction=0)
    case("cov_weights", "cov", [([2, 5], -1, 1), i64([1, 3, 2, 1, 2]), ([5], 0.2, 1.5)],
         lambda x, f, a: torch.cov(x, correction=2, fweights=f, aweights=a), correction=2)
    case("cov_fweights", "cov", [([2, 4], -1, 1), i64([2, 1, 0, 3])],
         lambda x, f: torch.cov(x, fweights=f), correction=1)
    case("corrcoef", "corrcoef", [([3, 6], -1, 1)], torch.corrcoef)
    case("quantile_dim_keepdim", "quantile", [([3, 6], -1, 1), torch.tensor([0.1, 0.5, 0.93])],
         lambda x, q: torch.quantile(x, q, dim=1, keepdim=True), dim=1, keepdim=True)
    case("quantile_scalar_all", "quantile", [([4, 5], -1, 1)], lambda x: torch.quantile(x, 0.3),
         q=0.3)
    case("quantile_scalar_all_keepdim", "quantile", [([2, 3], -1, 1)],
         lambda x: torch.quantile(x, 0.75, keepdim=True), q=0.75, keepdim=True)
    # These modes' results do not depend on q differentiably (PyTorch's gradient for q is
    # zeros through floor / ceil / round / a constant weight): q is an attribute here.
    for mode in ["lower", "higher", "midpoint", "nearest"]:
        q = [0.25, 0.5, 0.6]
        case("quantile_" + mode, "quantile", [([7, 2], -1, 1)],
             lambda x, m=mode, q=q: torch.quantile(x, torch.tensor(q), dim=0, interpolation=m),
             q=q, dim=0, interpolation=mode)
    nans = with_values([3, 5], -1, 1, "quantile_nan", {2: nan, 10: nan, 11: nan, 12: nan,
                                                       13: nan, 14: nan})
    case("quantile_nan", "quantile", [nans, torch.tensor([0.2, 0.7])],
         lambda x, q: torch.quantile(x, q, dim=1), dim=1)
    case("nanquantile_nan", "nanquantile", [nans, torch.tensor([0.2, 0.7])],
         lambda x, q: torch.nanquantile(x, q, dim=1), dim=1)
    case("logcumsumexp", "logcumsumexp", [([3, 6], -30, 30)],
         lambda x: torch.logcumsumexp(x, 1), dim=1)
    case("logcumsumexp_far_apart", "logcumsumexp",
         [torch.tensor([[-1000.0, 0.0], [3.0, 1000.0], [-5.0, -4.0]])],
         lambda x: torch.logcumsumexp(x, 0), dim=0)
    case("trapezoid_dx", "trapezoid", [([3, 5], -1, 1)],
         lambda y: torch.trapezoid(y, dx=0.5), dx=0.5, dim=-1)
    case("trapezoid_x_1d_dim0", "trapezoid", [([4, 3], -1, 1), ([4], 0, 3)],
         lambda y, x: torch.trapezoid(y, x, dim=0), dim=0)
    case("trapezoid_x_broadcast", "trapezoid", [([2, 4], -1, 1), ([1, 4], 0, 3)],
         lambda y, x: torch.trapezoid(y, x), dim=-1)
    case("trapezoid_int", "trapezoid", [i64([1, 4, 9, 16])], torch.trapezoid, dx=1.0, dim=-1)
    case("cumulative_trapezoid_dx", "cumulative_trapezoid", [([2, 5], -1, 1)],
         lambda y: torch.cumulative_trapezoid(y, dx=2.0), dx=2.0, dim=-1)
    case("cumulative_trapezoid_x", "cumulative_trapezoid", [([4, 3], -1, 1), ([4], 0, 3)],
         lambda y, x: torch.cumulative_trapezoid(y, x, dim=0), dim=0)
    # Element-wise.
    a = with_values([3, 4], -1, 1, "fmax_a", {0: nan, 5: nan, 6: 0.5})
    b = with_values([4], -1, 1, "fmax_b", {1: nan, 2: 0.5})
    case("fmax", "fmax", [a, b], torch.fmax)
    case("fmin", "fmin", [a, b], torch.fmin)
    x = with_values([2, 4], -1, 1, "heaviside", {1: 0.0, 6: 0.0, 7: nan})
    case("heaviside", "heaviside", [x, ([4], -1, 1)],
         lambda x, v: torch.heaviside(x.detach(), v.detach()))
    case("float_power", "float_power", [([2, 3], 0.5, 2), ([3], -2, 2)],
         lambda p, q: torch.float_power(p, q).float())
    case("float_power_scalar", "float_power", [([4], -2, 2)],
         lambda p: torch.float_power(p, 3).float(), exponent=3.0)
    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    sys.exit(main())
