"""PyTorch reference cases of issue 21's indexing and shape ops (run by
gen_reference.py): flip, roll, repeat, tile, repeat_interleave, triu, tril,
diagonal, diag, trace, pad, one_hot, masked_fill, index_fill, take_along_dim."""

import torch
import torch.nn.functional as F

from reference_common import EXACT, Gen, T, T_F32, add_case, boolean, i32, i64


def shape_cases():
    g = Gen("shape21")
    x = g.uniform([3, 4, 5])
    m = g.uniform([4, 6])
    xi = g.ints([3, 5], -9, 9, i32)
    add_case("flip_f32", "flip", [x], torch.flip(x, [0, 2]), {"dims": [0, 2]}, EXACT)
    add_case("flip_i32", "flip", [xi], torch.flip(xi, [-1]), {"dims": [-1]}, EXACT)
    add_case("roll_f32", "roll", [x], torch.roll(x, (2, -7), (0, 2)),
             {"shifts": [2, -7], "dims": [0, 2]}, EXACT)
    add_case("roll_f32_flat", "roll", [m], torch.roll(m, 5), {"shifts": [5], "dims": []}, EXACT)
    add_case("repeat_f32", "repeat", [m], m.repeat(2, 1, 3), {"sizes": [2, 1, 3]}, EXACT)
    add_case("tile_i32", "tile", [xi], torch.tile(xi, (2,)), {"reps": [2]}, EXACT)
    add_case("repeat_interleave_f32", "repeat_interleave", [m],
             torch.repeat_interleave(m, 3, dim=1), {"repeats": 3, "dim": 1}, EXACT)
    add_case("repeat_interleave_flat", "repeat_interleave", [xi],
             torch.repeat_interleave(xi, 2), {"repeats": 2, "dim": None}, EXACT)
    for k in (0, 2, -1):
        tag = str(k).replace("-", "m")
        add_case(f"triu_f32_{tag}", "triu", [x], torch.triu(x, k), {"diagonal": k}, EXACT)
        add_case(f"tril_f32_{tag}", "tril", [m], torch.tril(m, k), {"diagonal": k}, EXACT)
        add_case(f"diagonal_f32_{tag}", "diagonal", [m], torch.diagonal(m, k).contiguous(),
                 {"offset": k, "dim1": 0, "dim2": 1}, EXACT)
        v = g.uniform([4])
        add_case(f"diag_1d_{tag}", "diag", [v], torch.diag(v, k), {"diagonal": k}, EXACT)
    add_case("diagonal_3d", "diagonal", [x], torch.diagonal(x, 1, 2, 0).contiguous(),
             {"offset": 1, "dim1": 2, "dim2": 0}, EXACT)
    add_case("trace_f32", "trace", [m], torch.trace(m), {}, T_F32)
    add_case("trace_i32", "trace", [xi], torch.trace(xi).to(torch.int64), {}, EXACT)
    x4 = g.uniform([2, 3, 5])
    for mode, pads in (("constant", [1, 2, 0, 3]), ("reflect", [2, 4]), ("replicate", [3, 1]),
                       ("circular", [5, 2])):
        add_case(f"pad_{mode}", "pad", [x4],
                 F.pad(x4, pads, mode=mode, value=1.5) if mode == "constant" else
                 F.pad(x4, pads, mode=mode), {"pads": pads, "mode": mode, "value": 1.5}, EXACT)
    add_case("pad_crop", "pad", [x4], F.pad(x4, [-1, 2, 1, -2]),
             {"pads": [-1, 2, 1, -2], "mode": "constant", "value": 0.0}, EXACT)
    idx = T([0, 3, 1, 1, 2], i64)
    add_case("one_hot_5", "one_hot", [idx], F.one_hot(idx, 5), {"num_classes": 5}, EXACT)
    add_case("one_hot_auto", "one_hot", [idx.reshape(1, 5)], F.one_hot(idx.reshape(1, 5)),
             {"num_classes": -1}, EXACT)
    mask = g.bools([4, 1])
    add_case("masked_fill_f32", "masked_fill", [m, mask], m.masked_fill(mask, -2.5),
             {"value": -2.5}, EXACT)
    mask5 = g.bools([5])
    add_case("masked_fill_i32", "masked_fill", [xi, mask5], xi.masked_fill(mask5, 7),
             {"value": 7}, EXACT)
    index = T([0, 4, 2], i64)
    add_case("index_fill_f32", "index_fill", [m, index], m.index_fill(1, index, 9.0),
             {"dim": 1, "value": 9.0}, EXACT)
    ind = T([[3, 0], [1, 1], [0, 2], [2, 3]], i64)
    add_case("take_along_dim_f32", "take_along_dim", [m, ind], torch.take_along_dim(m, ind, 1),
             {"dim": 1}, EXACT)
    ind = T([[1], [0], [2], [3]], i64)
    add_case("take_along_dim_bcast", "take_along_dim", [m, ind.reshape(1, 4)],
             torch.take_along_dim(m, ind.reshape(1, 4), 1), {"dim": 1}, EXACT)
    xb = T([True, False, True, True, False, False], boolean, shape=[2, 3])
    add_case("triu_bool", "triu", [xb], torch.triu(xb), {"diagonal": 0}, EXACT)
