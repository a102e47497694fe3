#!/usr/bin/python3
"""Generate tests/data/pytorch_special_reference.json: PyTorch's lgamma, digamma, polygamma
(n = 1, 2, 3) and mvlgamma in f32 (with the gradient of the input) over their recurrence,
series and reflection ranges, at their poles, zeros and infinities (values only), and in bf16
(tests/test_special_functions.cpp). f64 is held to mpmath's values there.

Regenerate (from the repository root), as tools/gen_math_reference.py:

    /usr/bin/python3 tools/gen_special_reference.py

Format: that of tools/gen_conv_reference.py (reference_common.op_case); attrs: polygamma's n,
mvlgamma's p.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (leaf_case, op_case, write_case_file)
from reference_common import Gen, T  # noqa: E402

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_special_reference.json")
# f32: absolute near the zeros of lgamma (1, 2) and digamma (1.4616...), where the error of any
# float evaluation is absolute.
TOL = {"rtol": 2e-5, "atol": 2e-5}
CASES = []

FUNCTIONS = {
    "lgamma": (torch.lgamma, {}),
    "digamma": (torch.digamma, {}),
    "polygamma1": (lambda x: torch.polygamma(1, x), {"n": 1}),
    "polygamma2": (lambda x: torch.polygamma(2, x), {"n": 2}),
    "polygamma3": (lambda x: torch.polygamma(3, x), {"n": 3}),
}


# Through the reflection PyTorch's float trigamma takes sin of pi x unreduced: 3e-5 off at
# -6.031, where ferry's is within 1e-8 of mpmath's at the same float.
TOL_REFLECTED = {"rtol": 1e-4, "atol": 2e-5}


def case(name, op, inputs, fn, tol=TOL, **attrs):
    ref.leaf_case(CASES, name, op, inputs, fn, tol, attrs)


def values_case(name, op, x, fn, tol=TOL, **attrs):
    """Values only (no gradient): the poles, infinities and NaN."""
    CASES.append(ref.op_case(name, op, [x], fn(x), attrs, tol))


def main():
    inf, nan = float("inf"), float("nan")
    for key, (fn, attrs) in FUNCTIONS.items():
        op = "polygamma" if key.startswith("polygamma") else key
        # Small, through the recurrence; large, the series alone; negative, the reflection.
        case(f"{key}_small", op, [([3, 7], 0.05, 16)], fn, **attrs)
        case(f"{key}_large", op, [([9], 16, 300)], fn, **attrs)
        case(f"{key}_negative", op, [([8], -6.95, -0.05)], fn, tol=TOL_REFLECTED, **attrs)
        edges = T([0.5, 1.0, 1.5, 2.0, 3.0, 10.0, 15.999, 16.0, 16.001, 1e-3, 1e3, 1e5,
                       -0.5, -1.5, -2.5, -10.5])
        values_case(f"{key}_edges", op, edges, fn, **attrs)
        bf = Gen(f"{key}_bf16").uniform([6], 0.1, 8, dtype=torch.bfloat16)
        values_case(f"{key}_bf16", op, bf, lambda x, fn=fn: fn(x.float()).to(torch.bfloat16),
                    tol={"rtol": 1e-2, "atol": 1e-2}, **attrs)
    # Where the functions are not finite: the poles (0, -0, the negative integers), ±inf, NaN.
    # polygamma(n >= 1) at the negative integers is left out: PyTorch's trigamma gives the
    # finite 1/sin(pi x)^2 of a rounded sin there (1.29e15 at -1), ferry +inf.
    special = T([0.0, -0.0, -1.0, -3.0, inf, -inf, nan, 1e-30, 1e30])
    values_case("lgamma_special", "lgamma", special, torch.lgamma)
    values_case("digamma_special", "digamma", special, torch.digamma)
    # +inf is left out for n >= 2: PyTorch's zeta gives NaN there, ferry the limit 0.
    for n in [1, 2, 3]:
        tail = T([0.0, nan, 1e-30, 1e30] + ([inf] if n == 1 else []))
        values_case(f"polygamma{n}_special", "polygamma", tail,
                    lambda x, n=n: torch.polygamma(n, x), n=n)
    # Integers give f32.
    ints = torch.tensor([1, 2, 5, 30], dtype=torch.int64)
    values_case("lgamma_i64", "lgamma", ints, torch.lgamma)
    values_case("digamma_i64", "digamma", ints, torch.digamma)
    # mvlgamma: p = 1 is lgamma; larger p over x > (p - 1) / 2, and integers.
    for p, lo in [(1, 0.1), (2, 0.6), (4, 1.6)]:
        case(f"mvlgamma_p{p}", "mvlgamma", [([2, 5], lo, lo + 6)],
             lambda x, p=p: torch.mvlgamma(x, p), p=p)
    values_case("mvlgamma_i64", "mvlgamma", torch.tensor([3, 4, 9]),
                lambda x: torch.mvlgamma(x, 3), p=3)
    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    sys.exit(main())
