#!/usr/bin/python3
"""Generate tests/data/pytorch_linalg_reference.json: PyTorch's torch.linalg.cholesky,
solve_triangular, solve, inv, det, slogdet, qr, eigh, eigvalsh, lu_factor, lu and lu_solve, and
torch.logdet, torch.cholesky_solve and torch.lu_unpack, in f32 with the gradient of every input, batched and broadcast, each
option (tests/test_linalg.cpp).

Regenerate (from the repository root), as tools/gen_math_reference.py:

    /usr/bin/python3 tools/gen_linalg_reference.py

Format: that of tools/gen_conv_reference.py (reference_common.op_case). The matrices are the
inputs themselves (the gradients are with respect to them): positive-definite ones X X^T + I
for cholesky and logdet, triangular factors with junk in the triangle the op does not read, and
random ones for solve, inv and det (those pivot). attrs: the ops' flags; slogdet's output is
stack([sign, logabsdet]); qr's and eigh's outputs are joined into one tensor as main() says;
cholesky_solve's factor goes through tril (upper: triu), as below.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (leaf_case, op_case, write_case_file)
from reference_common import Gen  # noqa: E402

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_linalg_reference.json")
TOL = {"rtol": 2e-4, "atol": 2e-5}
CASES = []


def case(name, op, inputs, fn, tol=TOL, **attrs):
    ref.leaf_case(CASES, name, op, inputs, fn, tol, attrs)


def spd(name, shape):
    """X X^T + I, rounded to the file's digits after it is made."""
    x = Gen(name + "/x").uniform(shape, -1, 1)
    a = x @ x.transpose(-2, -1) + torch.eye(shape[-1])
    return torch.round(a * 1000) / 1000


def random(name, shape, lo=-1, hi=1):
    return Gen(name).uniform(shape, lo, hi)


def triangular(name, shape, upper):
    """A triangular factor with a diagonal in [1, 2] and junk in the other triangle."""
    a = random(name, shape)
    diag = torch.diag_embed(Gen(name + "/d").uniform(shape[:-1], 1, 2))
    keep = torch.triu(a, 1) if upper else torch.tril(a, -1)
    junk = (torch.tril(a, -1) if upper else torch.triu(a, 1)) * 50
    return keep + diag + junk


def main():
    la = torch.linalg
    # cholesky: one matrix, a batch of batches, upper, and a matrix that is not symmetric
    # (only the lower triangle is read; PyTorch's gradient is symmetric all the same).
    case("cholesky_4", "cholesky", [spd("cholesky_4", [4, 4])], la.cholesky)
    case("cholesky_batched", "cholesky", [spd("cholesky_batched", [2, 3, 5, 5])], la.cholesky)
    case("cholesky_upper", "cholesky", [spd("cholesky_upper", [3, 3])],
         lambda a: la.cholesky(a, upper=True), upper=True)
    lopsided = spd("cholesky_lopsided", [4, 4]) + torch.triu(random("lopsided/junk", [4, 4]), 1)
    case("cholesky_lopsided", "cholesky", [lopsided], la.cholesky)
    case("cholesky_upper_lopsided", "cholesky", [lopsided.transpose(0, 1).contiguous()],
         lambda a: la.cholesky(a, upper=True), upper=True)
    case("cholesky_1x1", "cholesky", [torch.tensor([[2.25]])], la.cholesky)

    # solve_triangular: each triangle, each side, unitriangular, broadcast batches.
    for upper in [False, True]:
        for left in [True, False]:
            for unit in [False, True]:
                name = "solve_triangular_%s_%s%s" % ("upper" if upper else "lower",
                                                     "left" if left else "right",
                                                     "_unit" if unit else "")
                a = triangular(name, [4, 4], upper)
                b = random(name + "/b", [4, 3] if left else [3, 4])
                case(name, "solve_triangular", [a, b],
                     lambda a, b, upper=upper, left=left, unit=unit: la.solve_triangular(
                         a, b, upper=upper, left=left, unitriangular=unit),
                     upper=upper, left=left, unitriangular=unit)
    a = triangular("solve_triangular_broadcast", [2, 1, 3, 3], False)
    b = random("solve_triangular_broadcast/b", [3, 3, 2])
    case("solve_triangular_broadcast", "solve_triangular", [a, b],
         lambda a, b: la.solve_triangular(a, b, upper=False), upper=False, left=True,
         unitriangular=False)

    # solve: random matrices (they pivot), a vector, a batch of vectors, broadcast, the right.
    case("solve_4", "solve", [random("solve_4", [4, 4]), random("solve_4/b", [4, 2])], la.solve)
    case("solve_vector", "solve", [random("solve_vector", [3, 3]),
                                   random("solve_vector/b", [3])], la.solve)
    case("solve_batched_vectors", "solve", [random("solve_bv", [2, 3, 3]),
                                            random("solve_bv/b", [2, 3])], la.solve)
    case("solve_broadcast", "solve", [random("solve_broadcast", [2, 1, 3, 3]),
                                      random("solve_broadcast/b", [4, 3, 2])], la.solve)
    case("solve_right", "solve", [random("solve_right", [3, 3]),
                                  random("solve_right/b", [2, 3])],
         lambda a, b: la.solve(a, b, left=False), left=False)
    swapped = torch.tensor([[0.0, 2.0, 1.0], [1.0, 0.0, 3.0], [4.0, 1.0, 0.0]])
    case("solve_zero_diagonal", "solve", [swapped, random("solve_zero_diagonal/b", [3, 1])],
         la.solve)

    # inv, det, slogdet, logdet.
    case("inv_4", "inv", [random("inv_4", [4, 4])], la.inv)
    case("inv_batched", "inv", [random("inv_batched", [3, 2, 2])], la.inv)
    case("det_4", "det", [random("det_4", [4, 4], -2, 2)], la.det)
    case("det_batched", "det", [random("det_batched", [2, 3, 3])], la.det)
    case("det_swapped", "det", [swapped], la.det)
    case("det_1x1", "det", [torch.tensor([[-0.75]])], la.det)
    slog = lambda a: torch.stack(la.slogdet(a))  # noqa: E731
    case("slogdet_batched", "slogdet", [random("slogdet_batched", [4, 3, 3], -2, 2)], slog)
    case("logdet_spd", "logdet", [spd("logdet_spd", [2, 4, 4])], torch.logdet)
    # Values only: a negative determinant (NaN) and a singular matrix (-inf), sign 0.
    negative = torch.tensor([[[0.0, 1.0], [1.0, 0.0]], [[1.0, 2.0], [2.0, 4.0]]])
    CASES.append(ref.op_case("logdet_negative_singular", "logdet", [negative],
                             torch.logdet(negative), {}, TOL))
    CASES.append(ref.op_case("slogdet_singular", "slogdet", [negative], slog(negative), {}, TOL))
    CASES.append(ref.op_case("det_singular", "det", [negative], la.det(negative), {}, TOL))

    # cholesky_solve: B and the factor (lower and upper) as leaves, the factor through tril (triu):
    # PyTorch's gradient treats the factor as a full matrix, so its triangle that cholesky_solve
    # does not read gets a gradient, which changes nothing the op computes; ferry's is zero
    # there, and the two agree on the triangle read (the C++ side masks too).
    factor = la.cholesky(spd("cholesky_solve", [4, 4]))
    factor = torch.round(factor * 1000) / 1000
    case("cholesky_solve_lower", "cholesky_solve", [random("cholesky_solve/b", [4, 2]), factor],
         lambda b, l: torch.cholesky_solve(b, torch.tril(l)), upper=False)
    case("cholesky_solve_upper", "cholesky_solve",
         [random("cholesky_solve_upper/b", [2, 4, 3]), factor.transpose(0, 1).contiguous()],
         lambda b, u: torch.cholesky_solve(b, torch.triu(u), upper=True), upper=True)

    # qr: Q and R flattened and joined ([..., m k + k n]; complete: m m + m n), square, tall,
    # wide and batched; "r" mode's R is reduced mode's (PyTorch differentiates only the latter).
    # Complete mode where m > n is left out: PyTorch gives it no gradient.
    def qr_joined(mode):
        def f(a):
            q, r = la.qr(a, mode="reduced" if mode == "r" else mode)
            parts = [r] if mode == "r" else [q, r]
            return torch.cat([t.flatten(-2) for t in parts], -1)
        return f
    for name, shape, mode in [("qr_4", [4, 4], "reduced"), ("qr_tall", [5, 3], "reduced"),
                              ("qr_wide", [3, 5], "reduced"), ("qr_batched", [2, 3, 3], "reduced"),
                              ("qr_complete_wide", [2, 4], "complete"),
                              ("qr_complete_square", [3, 3], "complete"),
                              ("qr_r", [4, 3], "r")]:
        case(name, "qr", [random(name, shape)], qr_joined(mode), mode=mode)
    # An upper-triangular A: its reflections are all skipped, and its zeros below the diagonal
    # still have a gradient (PyTorch's closed form).
    case("qr_triangular", "qr", [torch.triu(random("qr_triangular", [4, 4])) + 2 * torch.eye(4)],
         qr_joined("reduced"), mode="reduced")

    # eigh: the eigenvalues as a first row over the eigenvectors, each column's sign chosen so that
    # its entry of largest magnitude is positive (LAPACK's and ferry's signs are arbitrary);
    # symmetric matrices, and ones with junk in the triangle not read (the gradient is symmetric
    # all the same, as cholesky's).
    def eigh_joined(uplo):
        def f(a):
            values, vectors = la.eigh(a, UPLO=uplo)
            at = vectors.abs().argmax(-2, keepdim=True)
            vectors = vectors * torch.sign(torch.gather(vectors, -2, at))
            return torch.cat([values.unsqueeze(-2), vectors], -2)
        return f
    def symmetric(name, shape):
        x = random(name, shape)
        return x + x.transpose(-2, -1)
    case("eigh_4", "eigh", [symmetric("eigh_4", [4, 4])], eigh_joined("L"), uplo="L")
    case("eigh_batched_upper", "eigh", [symmetric("eigh_batched_upper", [2, 3, 3])],
         eigh_joined("U"), uplo="U")
    lopsided = symmetric("eigh_lopsided", [5, 5]) + 3 * torch.triu(random("eigh/junk", [5, 5]), 1)
    case("eigh_lopsided", "eigh", [lopsided], eigh_joined("L"), uplo="L")
    case("eigh_lopsided_upper", "eigh", [lopsided.transpose(0, 1).contiguous()],
         eigh_joined("U"), uplo="U")
    case("eigh_1x1", "eigh", [torch.tensor([[-1.5]])], eigh_joined("L"), uplo="L")
    case("eigvalsh_6", "eigvalsh", [lopsided[:4, :4].contiguous()],
         lambda a: la.eigvalsh(a), uplo="L")
    case("eigvalsh_batched", "eigvalsh", [symmetric("eigvalsh_batched", [3, 2, 2])],
         lambda a: la.eigvalsh(a, UPLO="U"), uplo="U")

    # The LU family. lu_factor: LU flattened and the pivots (as floats) joined, [..., m n + k];
    # lu: P, L and U flattened and joined; square, tall, wide and batched, every one pivoting.
    # lu_solve, from: "A": the factorization made from A in the case (the gradient goes through
    # lu_factor to A); "LU": a packed LU and pivots given (the gradient is with respect to LU:
    # random, U's diagonal moved away from zero). lu_unpack: from a packed LU and pivots.
    def lu_factor_joined(a):
        lu, pivots = la.lu_factor(a)
        return torch.cat([lu.flatten(-2), pivots.to(lu.dtype)], -1)
    def plu_joined(plu):
        return torch.cat([t.flatten(-2) for t in plu], -1)
    for name, shape in [("lu_factor_4", [4, 4]), ("lu_factor_batched", [2, 3, 3]),
                        ("lu_factor_tall", [5, 3]), ("lu_factor_wide", [3, 5])]:
        case(name, "lu_factor", [random(name, shape)], lu_factor_joined)
    for name, shape in [("lu_4", [4, 4]), ("lu_batched", [2, 3, 3]), ("lu_tall", [5, 3]),
                        ("lu_wide", [3, 5])]:
        case(name, "lu", [random(name, shape)], lambda a: plu_joined(la.lu(a)))
    for name, a_shape, b_shape, left, adjoint in [
            ("lu_solve_A", [4, 4], [4, 2], True, False),
            ("lu_solve_A_adjoint", [4, 4], [4, 2], True, True),
            ("lu_solve_A_right", [4, 4], [3, 4], False, False),
            ("lu_solve_A_right_adjoint", [4, 4], [3, 4], False, True),
            ("lu_solve_A_broadcast", [2, 3, 3], [3, 2], True, False)]:
        case(name, "lu_solve", [random(name + "/a", a_shape), random(name + "/b", b_shape)],
             lambda a, b, left=left, adjoint=adjoint: la.lu_solve(*la.lu_factor(a), b, left=left,
                                                                  adjoint=adjoint),
             **{"from": "A", "left": left, "adjoint": adjoint})
    packed = random("lu_solve_LU", [4, 4]) + 2 * torch.eye(4)
    pivots = torch.tensor([3, 3, 4, 4], dtype=torch.int32)
    for name, b_shape, left, adjoint in [("lu_solve_LU", [4, 3], True, False),
                                         ("lu_solve_LU_adjoint", [4, 3], True, True),
                                         ("lu_solve_LU_right", [2, 4], False, False)]:
        case(name, "lu_solve", [packed, pivots, random(name + "/b", b_shape)],
             lambda lu, p, b, left=left, adjoint=adjoint: la.lu_solve(lu, p, b, left=left,
                                                                      adjoint=adjoint),
             **{"from": "LU", "left": left, "adjoint": adjoint})
    for name, shape, piv in [("lu_unpack_tall", [4, 3], [[2, 4, 3]]),
                             ("lu_unpack_wide", [3, 5], [[3, 2, 3]]),
                             ("lu_unpack_batched", [2, 3, 3], [[1, 3, 3], [2, 2, 3]])]:
        p = torch.tensor(piv, dtype=torch.int32).reshape(shape[:-2] + [-1])
        case(name, "lu_unpack", [random(name, shape), p],
             lambda lu, p: plu_joined(torch.lu_unpack(lu, p)))

    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    main()
