#!/usr/bin/python3
"""Generate tests/data/pytorch_matrix_functions_reference.json: PyTorch's torch.linalg.matrix_exp
and matrix_power, in f32 with the gradient of the input (tests/test_linalg_matrix_functions.cpp).

Regenerate (from the repository root), as tools/gen_linalg_reference.py:

    /usr/bin/python3 tools/gen_matrix_functions_reference.py

Format: that of tools/gen_conv_reference.py (reference_common.op_case). matrix_exp's cases span
the norms that pick different numbers of squarings (none, a few, many; a batch whose matrices
need different numbers), a nilpotent matrix (a closed form: I + N + N^2 / 2), a 1 x 1 and a
rotation generator; matrix_power's every sign of n, 0 and 1 included.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (leaf_case, op_case, write_case_file)
from reference_common import Gen  # noqa: E402

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_matrix_functions_reference.json")
TOL = {"rtol": 2e-4, "atol": 2e-5}
CASES = []


def case(name, op, inputs, fn, tol=TOL, **attrs):
    ref.leaf_case(CASES, name, op, inputs, fn, tol, attrs)


def random(name, shape, lo=-1, hi=1):
    return Gen(name).uniform(shape, lo, hi)


def main():
    la = torch.linalg
    # matrix_exp: 1-norms from 0.05 to some 60 (no squaring, one, four), a batch of mixed
    # norms, a strictly upper triangular (nilpotent) matrix, 1 x 1, a skew-symmetric generator
    # (exp is a rotation).
    for name, shape, scale in [("matrix_exp_small", [3, 3], 0.02), ("matrix_exp_unit", [4, 4], 1.0),
                               ("matrix_exp_large", [3, 3], 12.0), ("matrix_exp_1x1", [2, 1, 1], 2.0)]:
        case(name, "matrix_exp", [random(name, shape) * scale], la.matrix_exp)
    mixed = random("matrix_exp_mixed", [3, 3, 3]) * torch.tensor([0.05, 2.0, 20.0]).view(3, 1, 1)
    case("matrix_exp_mixed", "matrix_exp", [mixed], la.matrix_exp)
    case("matrix_exp_nilpotent", "matrix_exp", [torch.triu(random("matrix_exp_nilpotent", [4, 4]), 1)],
         la.matrix_exp)
    w = random("matrix_exp_skew", [3, 3])
    case("matrix_exp_skew", "matrix_exp", [w - w.T], la.matrix_exp)

    # matrix_power: n = 0, 1, 2, 5, -1, -3 (of a well-conditioned A), batched.
    for n in [0, 1, 2, 5, -1, -3]:
        name = "matrix_power_%s" % (("m%d" % -n) if n < 0 else n)
        a = random(name, [2, 3, 3]) * 0.5 + torch.eye(3) * 1.5
        case(name, "matrix_power", [a], lambda x, n=n: la.matrix_power(x, n), n=n)

    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    main()
