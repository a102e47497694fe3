#!/usr/bin/python3
"""Generate tests/data/pytorch_products_reference.json: PyTorch's torch.einsum (explicit and
implicit outputs, ellipses that broadcast, diagonals, sums, three operands), tensordot, outer,
dot, mm, bmm, mv, addmm, addmv, baddbmm and addbmm, with the gradient of every operand
(tests/test_products.cpp).

Regenerate (from the repository root), as tools/gen_cnn_reference.py:

    /usr/bin/python3 tools/gen_products_reference.py

Format: that of tools/gen_conv_reference.py (reference_common.op_case); attrs "equation"
(einsum), "dims" (tensordot: an int or two lists), "beta" and "alpha" (the add* forms).
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (Gen, tensor_json)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_products_reference.json")
TOL = {"rtol": 1e-4, "atol": 1e-5}
CASES = []


def case(name, op, shapes, fn, **attrs):
    g = ref.Gen(name)
    inputs = [g.uniform(s, -1.0, 1.0).requires_grad_(True) for s in shapes]
    CASES.append(ref.op_case(name, op, inputs, fn(*inputs), attrs, TOL))


def einsum(name, equation, *shapes):
    case(name, "einsum", list(shapes), lambda *xs: torch.einsum(equation, *xs), equation=equation)


def main():
    einsum("matmul", "ij,jk->ik", [3, 4], [4, 5])
    einsum("attention_scores", "bhqd,bhkd->bhqk", [2, 3, 4, 5], [2, 3, 6, 5])
    einsum("attention_values_spaces", "b h q k, b h k d -> b q h d", [2, 3, 4, 6], [2, 3, 6, 5])
    einsum("implicit_output", "ij,jk", [3, 4], [4, 2])
    einsum("implicit_alphabetical", "ba,ac", [3, 4], [4, 2])
    einsum("diagonal", "ii->i", [4, 4])
    einsum("trace", "ii", [4, 4])
    einsum("diagonal_then_sum", "iij->j", [3, 3, 5])
    einsum("sum_all", "ij->", [3, 4])
    einsum("row_sums", "ij->i", [3, 4])
    einsum("transpose3", "ijk->kji", [2, 3, 4])
    einsum("inner", "i,i->", [7], [7])
    einsum("outer", "i,j->ij", [3], [4])
    einsum("hadamard_sum", "ab,ab->a", [3, 5], [3, 5])
    einsum("broadcast_label", "ij,ij->ij", [3, 1], [3, 4])
    einsum("ellipsis_batch_broadcast", "...ij,...jk->...ik", [2, 1, 3, 4], [5, 4, 2])
    einsum("ellipsis_middle", "a...c,c->a...", [2, 3, 4, 5], [5])
    einsum("ellipsis_dropped", "...ij->ij", [2, 3, 4])
    einsum("three_operands", "bij,bjk,bkl->bil", [2, 3, 4], [2, 4, 5], [2, 5, 3])
    einsum("bilinear_form", "i,ij,j->", [3], [3, 4], [4])
    einsum("uppercase", "Ab,bC->AC", [2, 3], [3, 4])
    einsum("batch_kept_label_in_one", "bi,bj->bij", [2, 3], [2, 4])
    case("tensordot_2", "tensordot", [[3, 4, 5], [4, 5, 2]], lambda a, b: torch.tensordot(a, b, 2),
         dims=2)
    case("tensordot_lists", "tensordot", [[3, 4, 5], [5, 2, 3]],
         lambda a, b: torch.tensordot(a, b, ([0, 2], [2, 0])), dims=[[0, 2], [2, 0]])
    case("tensordot_0", "tensordot", [[2, 3], [4]], lambda a, b: torch.tensordot(a, b, 0), dims=0)
    case("outer", "outer", [[3], [5]], torch.outer)
    case("dot", "dot", [[6], [6]], torch.dot)
    case("mm", "mm", [[3, 4], [4, 5]], torch.mm)
    case("bmm", "bmm", [[2, 3, 4], [2, 4, 5]], torch.bmm)
    case("mv", "mv", [[3, 4], [4]], torch.mv)
    case("addmm", "addmm", [[3, 5], [3, 4], [4, 5]],
         lambda i, a, b: torch.addmm(i, a, b, beta=0.5, alpha=2.0), beta=0.5, alpha=2.0)
    case("addmm_broadcast_bias", "addmm", [[5], [3, 4], [4, 5]], torch.addmm, beta=1.0, alpha=1.0)
    case("addmv", "addmv", [[3], [3, 4], [4]],
         lambda i, a, v: torch.addmv(i, a, v, beta=2.0, alpha=-1.0), beta=2.0, alpha=-1.0)
    case("baddbmm", "baddbmm", [[2, 3, 5], [2, 3, 4], [2, 4, 5]],
         lambda i, a, b: torch.baddbmm(i, a, b, beta=0.25, alpha=0.5), beta=0.25, alpha=0.5)
    case("addbmm", "addbmm", [[3, 5], [2, 3, 4], [2, 4, 5]], torch.addbmm, beta=1.0, alpha=1.0)
    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    sys.exit(main())
