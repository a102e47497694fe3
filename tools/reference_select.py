"""PyTorch reference cases of issue 21's scatters and searches (run by
gen_reference.py): scatter, scatter_reduce, index_put, masked_select,
masked_scatter, nonzero, searchsorted, bucketize, unique, repeat_interleave
with a count per element, rot90. Duplicate targets appear only where PyTorch
defines the result (reductions, index_put with accumulate): its plain scatter
leaves the winner of a duplicate to the device."""

import warnings

import torch

from reference_common import EXACT, T_RED, Gen, T, add_case, i32, i64

warnings.filterwarnings("ignore", message="scatter_reduce")


def select_cases():
    g = Gen("select21")
    x = g.uniform([5, 4])
    xi = g.ints([5, 4], -5, 6, i32)
    index = T([0, 2, 2, 4, 0, 2, 1, 2, 0, 0, 3, 2], i64, shape=[3, 4])
    src, srci = g.uniform([3, 4]), g.ints([3, 4], -3, 4, i32)
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for self in (True, False):
            tag = f"{reduce}{'' if self else '_noself'}"
            attrs = {"dim": 0, "reduce": reduce, "include_self": self}
            add_case(f"scatter_reduce_f32_{tag}", "scatter_reduce", [x, index, src],
                     x.scatter_reduce(0, index, src, reduce, include_self=self), attrs, T_RED)
            add_case(f"scatter_reduce_i32_{tag}", "scatter_reduce", [xi, index, srci],
                     xi.scatter_reduce(0, index, srci, reduce, include_self=self), attrs, EXACT)
    distinct = T([3, 0, 1, 2, 2, 3], i64, shape=[3, 2])
    add_case("scatter_f32", "scatter", [x, distinct, src], x.scatter(1, distinct, src),
             {"dim": 1, "reduce": ""}, EXACT)
    add_case("scatter_add_f32", "scatter", [x, index, src], x.scatter(0, index, src, reduce="add"),
             {"dim": 0, "reduce": "add"}, T_RED)
    add_case("scatter_multiply_i32", "scatter", [xi, index, srci],
             xi.scatter(0, index, srci, reduce="multiply"), {"dim": 0, "reduce": "multiply"}, EXACT)
    rows = T([0, 3, 3, -1], i64)
    vals = g.uniform([4, 4])
    add_case("index_put_accumulate", "index_put", [x, vals, rows],
             x.index_put((rows,), vals, accumulate=True), {"accumulate": True}, T_RED)
    r2, c2 = T([0, 4, 2], i64), T([1, 3, 0], i64)
    add_case("index_put_2d", "index_put", [x, T([7.0, 8.0, 9.0]), r2, c2],
             x.index_put((r2, c2), T([7.0, 8.0, 9.0])), {"accumulate": False}, EXACT)
    mask = T([True, False, True, True], torch.bool)
    add_case("masked_select_f32", "masked_select", [x, mask], torch.masked_select(x, mask), {},
             EXACT)
    add_case("masked_scatter_f32", "masked_scatter", [x, mask, vals.reshape(-1)],
             x.masked_scatter(mask, vals.reshape(-1)), {}, EXACT)
    add_case("nonzero_i32", "nonzero", [xi], torch.nonzero(xi), {}, EXACT)
    seq = torch.sort(g.uniform([3, 6]), 1).values
    v = g.uniform([3, 4])
    for right in (False, True):
        add_case(f"searchsorted_rows_{'right' if right else 'left'}", "searchsorted", [seq, v],
                 torch.searchsorted(seq, v, right=right), {"right": right}, EXACT)
    bnd = T([-2.0, -0.5, 0.0, 0.5, 2.0])
    xb = T([-3.0, -2.0, -0.5, 0.1, 0.5, 2.0, 9.0, 0.0])
    for right in (False, True):
        add_case(f"bucketize_{'right' if right else 'left'}", "bucketize", [xb, bnd],
                 torch.bucketize(xb, bnd, right=right), {"right": right}, EXACT)
    vals_u, inverse, counts = torch.unique(xi, return_inverse=True, return_counts=True)
    for name, out in (("values", vals_u), ("inverse", inverse), ("counts", counts)):
        add_case(f"unique_i32_{name}", "unique", [xi], out, {"output": name}, EXACT)
    reps = T([2, 0, 1, 3, 1], i64)
    add_case("repeat_interleave_tensor", "repeat_interleave", [x, reps],
             torch.repeat_interleave(x, reps, dim=0), {"dim": 0}, EXACT)
    x3 = g.uniform([2, 3, 4])
    for k, dims in ((1, [0, 1]), (2, [1, 2]), (-1, [2, 0])):
        add_case(f"rot90_k{str(k).replace('-', 'm')}", "rot90", [x3],
                 torch.rot90(x3, k, dims).contiguous(), {"k": k, "dims": dims}, EXACT)
