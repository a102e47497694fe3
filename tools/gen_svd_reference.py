#!/usr/bin/python3
"""Generate tests/data/pytorch_svd_reference.json: PyTorch's torch.linalg.svd, svdvals, pinv,
matrix_rank, matrix_norm and lstsq, in f32 with the gradient of every input, batched, tall,
wide and square, each option (tests/test_linalg_svd.cpp).

Regenerate (from the repository root), as tools/gen_linalg_reference.py:

    /usr/bin/python3 tools/gen_svd_reference.py

Format: that of tools/gen_conv_reference.py (reference_common.op_case). svd's output is S, U and
Vh flattened and joined, each singular pair's sign chosen so that U's column has its entry of
largest magnitude positive (LAPACK's and ferry's signs are arbitrary; Vh's row takes the same
sign); its matrices have singular values apart (a diagonal 0, 20, 40, ... added), so that the
singular vectors and their gradient are defined. matrix_rank's output is the ranks as floats
(no gradient); matrix_norm's every order side by side; lstsq's the solution, the residuals, the
rank and the singular values flattened and joined (those the driver gives).
"""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (leaf_case, op_case, write_case_file)
from reference_common import Gen  # noqa: E402

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_svd_reference.json")
TOL = {"rtol": 2e-4, "atol": 2e-5}
CASES = []
ORDERS = ["fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf]


def case(name, op, inputs, fn, tol=TOL, **attrs):
    ref.leaf_case(CASES, name, op, inputs, fn, tol, attrs)


def random(name, shape, lo=-1, hi=1):
    return Gen(name).uniform(shape, lo, hi)


def spread(name, shape):
    """Random entries plus 0, 20, 40, ... on the diagonal: singular values apart."""
    k = min(shape[-2], shape[-1])
    d = torch.zeros(shape[-2], shape[-1])
    d[range(k), range(k)] = 20.0 * torch.arange(k, dtype=torch.float32)
    return random(name, shape) + d


def svd_joined(full):
    def f(a):
        u, s, vh = torch.linalg.svd(a, full_matrices=full)
        k = s.shape[-1]
        u, vh = u[..., :k], vh[..., :k, :]
        at = u.abs().argmax(-2, keepdim=True)
        sign = torch.sign(torch.gather(u, -2, at))
        return torch.cat([s, (u * sign).flatten(-2), (vh * sign.transpose(-2, -1)).flatten(-2)], -1)
    return f


def lstsq_joined(driver):
    def f(a, b):
        r = torch.linalg.lstsq(a, b, driver=driver)
        return torch.cat([r.solution.flatten(), r.residuals.flatten(), r.rank.flatten().float(),
                          r.singular_values.flatten()])
    return f


def main():
    la = torch.linalg
    for name, shape, full in [("svd_tall", [5, 3], False), ("svd_wide", [3, 5], False),
                              ("svd_batched", [2, 4, 4], False), ("svd_full", [4, 4], True),
                              ("svd_full_tall", [5, 2], True)]:
        case(name, "svd", [spread(name, shape)], svd_joined(full), full_matrices=full)
    case("svdvals_wide", "svdvals", [random("svdvals_wide", [2, 3, 5])], la.svdvals)
    case("svdvals_tall", "svdvals", [random("svdvals_tall", [6, 4])], la.svdvals)

    # pinv: tall, wide, batched, and hermitian (symmetric, indefinite: eigenvalues of either
    # sign), reading the lower triangle.
    for name, shape in [("pinv_tall", [5, 3]), ("pinv_wide", [3, 4]), ("pinv_batched", [2, 3, 3])]:
        case(name, "pinv", [spread(name, shape) + 2.5 * torch.eye(shape[-2], shape[-1])],
             la.pinv, hermitian=False)
    sym = random("pinv_hermitian", [4, 4])
    sym = sym + sym.T + torch.diag(torch.tensor([-6.0, -3.0, 3.0, 6.0]))
    case("pinv_hermitian", "pinv", [sym], lambda a: la.pinv(a, hermitian=True), hermitian=True)
    # Rank 1 (values only): the zero singular value is left out.
    singular = torch.tensor([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    CASES.append(ref.op_case("pinv_rank_one", "pinv", [singular], la.pinv(singular),
                             {"hermitian": False}, TOL))

    # matrix_rank: a rank-2 product of small integers (exact in f32), and the tolerance rule.
    low = (torch.tensor([[1.0, 0.0], [2.0, 1.0], [0.0, 3.0], [1.0, 1.0], [2.0, -1.0]]) @
           torch.tensor([[1.0, 2.0, 0.0, -1.0], [0.0, 1.0, 3.0, 2.0]]))
    diag = torch.diag(torch.tensor([3.0, 2.0, 1.0, 0.1]))
    rotation = la.qr(random("matrix_rank/q", [4, 4]))[0]
    spectrum = rotation @ diag @ rotation.T
    for name, a, attrs in [("matrix_rank_low", low, {}),
                           ("matrix_rank_rtol", spectrum, {"rtol": 0.1}),
                           ("matrix_rank_atol", spectrum, {"atol": 1.5}),
                           ("matrix_rank_both", spectrum, {"atol": 0.05, "rtol": 0.5}),
                           ("matrix_rank_hermitian",
                            rotation @ torch.diag(torch.tensor([-3.0, 1.0, 0.0, 0.0])) @ rotation.T,
                            {"hermitian": True})]:
        out = la.matrix_rank(a, **attrs).float()
        CASES.append(ref.op_case(name, "matrix_rank", [a], out, attrs, TOL))

    # matrix_norm: every order of one matrix, and over other dims with keepdim.
    def norms(a):
        return torch.stack([la.matrix_norm(a, o) for o in ORDERS], -1)
    case("matrix_norm_orders", "matrix_norm", [spread("matrix_norm_orders", [2, 3, 4])], norms)
    case("matrix_norm_dims", "matrix_norm", [random("matrix_norm_dims", [3, 2, 4])],
         lambda a: la.matrix_norm(a, -math.inf, dim=(2, 0), keepdim=True), ord="-inf",
         dim=[2, 0], keepdim=True)

    # lstsq: each driver on a tall A (residuals where the driver gives them), a wide A, a vector
    # B, broadcast batches, and A of rank 2 (a column repeated) where the solution is the one of
    # least norm.
    for driver in ["gelsy", "gels", "gelsd", "gelss"]:
        name = "lstsq_" + driver
        case(name, "lstsq", [random(name, [6, 3]), random(name + "/b", [6, 2])],
             lstsq_joined(driver), driver=driver)
    case("lstsq_wide", "lstsq", [random("lstsq_wide", [3, 5]), random("lstsq_wide/b", [3, 2])],
         lstsq_joined("gelsd"), driver="gelsd")
    # (Values only: PyTorch 1.13's lstsq backward fails where B is a vector.)
    av, bv = random("lstsq_vector", [5, 3]), random("lstsq_vector/b", [5])
    CASES.append(ref.op_case("lstsq_vector", "lstsq", [av, bv], lstsq_joined("gels")(av, bv),
                             {"driver": "gels"}, TOL))
    case("lstsq_broadcast", "lstsq", [random("lstsq_broadcast", [1, 5, 3]),
                                      random("lstsq_broadcast/b", [2, 5, 2])],
         lstsq_joined("gelsd"), driver="gelsd")
    a = random("lstsq_rank2", [5, 2])
    case("lstsq_rank2", "lstsq", [torch.cat([a, a[:, :1]], 1), random("lstsq_rank2/b", [5, 2])],
         lstsq_joined("gelsd"), driver="gelsd")

    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    main()
