"""PyTorch reference cases of the reductions, matmul, softmax, layer_norm and
the indexing ops (run by gen_reference.py)."""

import torch
import torch.nn.functional as F

from reference_common import (
    DTYPE_NAMES, EXACT, Gen, INF, NAN, T, T_ACT, T_F32, T_LOOSE, T_RED, add_case, bf16,
    f16, f32, i32, i64, ref_upcast, tol_for)


def reduction_cases():
    def red(op, fn, x, dims, keepdim, tol, extra=None, tag=""):
        attrs = {"dims": dims, "keepdim": keepdim}
        if extra:
            attrs.update(extra)
        dname = "all" if not dims else "d" + "_".join(str(d).replace("-", "m") for d in dims)
        name = f"{op}_{DTYPE_NAMES[x.dtype]}_{dname}{'_keep' if keepdim else ''}{tag}"
        add_case(name, op, [x], fn(x, dims, keepdim), attrs, tol_for(x.dtype, tol) if
                 x.dtype in (f32, f16, bf16) else EXACT)

    # dims == [] means every dim (ferry's convention), spelled out for torch.
    def t_sum(x, dims, k):
        return x.sum(dim=dims or list(range(x.dim())), keepdim=k)

    def t_mean(x, dims, k):
        return x.mean(dim=dims or list(range(x.dim())), keepdim=k)

    def t_max(x, dims, k):
        return x.amax(dim=dims or list(range(x.dim())), keepdim=k)

    def t_min(x, dims, k):
        return x.amin(dim=dims or list(range(x.dim())), keepdim=k)

    x3 = Gen("reduce_x3").uniform([2, 3, 4])
    x2 = Gen("reduce_x2").uniform([3, 5])
    for op, fn, tol in (("sum", t_sum, T_RED), ("mean", t_mean, T_RED), ("max", t_max, T_F32),
                        ("min", t_min, T_F32)):
        red(op, fn, x3, [], False, tol)
        red(op, fn, x3, [], True, tol)
        red(op, fn, x3, [1], True, tol)
        red(op, fn, x3, [0, 2], False, tol)
        red(op, fn, x3, [-1], False, tol)
        red(op, fn, x2, [0], False, tol)
    xn = T([1.0, NAN, 3.0, -1.0, 2.0, 0.5, INF, -INF], shape=[2, 4])
    for op, fn in (("max", t_max), ("min", t_min), ("sum", t_sum), ("mean", t_mean)):
        red(op, fn, xn, [1], False, T_RED, tag="_nan")
        red(op, fn, xn, [], False, T_RED, tag="_nan")
    xi = Gen("reduce_i32").ints([3, 4], -1000, 1000, i32)
    red("sum", t_sum, xi, [], False, EXACT)  # i32 sums are i64
    red("sum", t_sum, xi, [1], False, EXACT)
    red("sum", t_sum, Gen("reduce_i64").ints([2, 5], -10**12, 10**12, i64), [0], True, EXACT)
    red("sum", t_sum, Gen("reduce_bool").bools([3, 5]), [-1], False, EXACT)
    red("max", t_max, xi, [1], False, EXACT)
    red("min", t_min, xi, [0], True, EXACT)
    red("max", t_max, xi, [], False, EXACT)
    xh = Gen("reduce_f16").uniform([3, 8], dtype=f16)
    for op, fn in (("sum", t_sum), ("mean", t_mean), ("max", t_max)):
        name = f"{op}_f16_dm1"
        add_case(name, op, [xh], ref_upcast(lambda t: fn(t, [-1], False), [xh], f16),
                 {"dims": [-1], "keepdim": False})
    xb = Gen("reduce_bf16").uniform([4, 6], dtype=bf16)
    add_case("sum_bf16_all", "sum", [xb], ref_upcast(lambda t: t_sum(t, [], False), [xb], bf16),
             {"dims": [], "keepdim": False})

    # var
    for x, dims, corr, keep in ((x3, [], 1, False), (x3, [1], 0, True), (x3, [0, 2], 1, False),
                                (x2, [-1], 1, False), (x2, [0], 0, False), (x3, [], 0, True)):
        dname = "all" if not dims else "d" + "_".join(str(d).replace("-", "m") for d in dims)
        name = f"var_f32_{list(x.shape)[0]}d{x.dim()}_{dname}_c{corr}{'_keep' if keep else ''}"
        out = torch.var(x, dims if dims else None, correction=corr, keepdim=keep)
        add_case(name, "var", [x], out, {"dims": dims, "keepdim": keep, "correction": corr},
                 T_LOOSE)
    xv = Gen("var_offset").normal([4, 6], mean=1000.0, std=1.0)
    add_case("var_f32_offset1000_dm1", "var", [xv], torch.var(xv, [-1], correction=1),
             {"dims": [-1], "keepdim": False, "correction": 1}, T_LOOSE)
    xh = Gen("var_f16").uniform([2, 6], dtype=f16)
    add_case("var_f16_dm1", "var", [xh], ref_upcast(lambda t: torch.var(t, [-1]), [xh], f16),
             {"dims": [-1], "keepdim": False, "correction": 1})

    # argmax
    def am(name, x, dim, keep):
        out = torch.argmax(x) if dim is None else torch.argmax(x, dim, keepdim=keep)
        if dim is None and keep:
            out = torch.argmax(x, keepdim=False).reshape([1] * x.dim())
        add_case(name, "argmax", [x], out, {"dim": dim, "keepdim": keep}, EXACT)

    am("argmax_f32_flat", x3, None, False)
    am("argmax_f32_d1", x3, 1, False)
    am("argmax_f32_dm1_keep", x3, -1, True)
    am("argmax_f32_d0", x2, 0, False)
    am("argmax_f32_nan", T([1.0, NAN, 3.0, NAN, 2.0, 0.5, INF, -INF], shape=[2, 4]), 1, False)
    am("argmax_f32_ties", T([1.0, 3.0, 3.0, 0.0, 2.0, 2.0, 2.0, -1.0, 5.0], shape=[3, 3]), 1, False)
    am("argmax_f32_ties_flat", T([1.0, 5.0, 3.0, 5.0, 2.0, 5.0]), None, False)
    am("argmax_i32_d0", Gen("argmax_i32").ints([4, 3], -5, 5, i32), 0, False)
    am("argmax_f16_dm1", Gen("argmax_f16").uniform([3, 5], dtype=f16, decimals=1), -1, False)


def matmul_cases():
    for name, sa, sb in (("matmul_2d", [3, 5], [5, 4]), ("matmul_batched", [2, 3, 5], [5, 4]),
                         ("matmul_bcast_batch", [2, 1, 3, 4], [3, 4, 2]),
                         ("matmul_1d_2d", [5], [5, 4]), ("matmul_2d_1d", [3, 5], [5]),
                         ("matmul_1d_1d", [6], [6]), ("matmul_2d_batched", [4, 5], [2, 5, 3]),
                         ("matmul_1d_batched", [3], [2, 3, 2]), ("matmul_batched_1d", [2, 4, 3], [3]),
                         ("matmul_odd", [1, 7], [7, 1])):
        g = Gen(name)
        a, b = g.uniform(sa, -2, 2), g.uniform(sb, -2, 2)
        add_case(name, "matmul", [a, b], torch.matmul(a, b), tol=T_LOOSE)
    g = Gen("matmul_f16")
    a, b = g.uniform([3, 8], -1, 1, dtype=f16), g.uniform([8, 2], -1, 1, dtype=f16)
    add_case("matmul_f16", "matmul", [a, b], ref_upcast(torch.matmul, [a, b], f16))


def softmax_cases():
    for op, fn, tol in (("softmax", torch.softmax, T_ACT), ("log_softmax", torch.log_softmax, T_RED)):
        g = Gen(op + "_a")
        x = g.uniform([3, 5], -4, 4)
        add_case(f"{op}_f32_dm1", op, [x], fn(x, -1), {"dim": -1}, tol)
        add_case(f"{op}_f32_d0", op, [x], fn(x, 0), {"dim": 0}, tol)
        x = Gen(op + "_b").uniform([2, 3, 4], -4, 4)
        add_case(f"{op}_f32_3d_d1", op, [x], fn(x, 1), {"dim": 1}, tol)
        x = T([1000.0, 1001.0, 999.0, 1000.5, -1000.0, -999.0, -1001.0, -1000.0,
               1000.0, -1000.0, 0.0, 1000.0], shape=[3, 4])
        add_case(f"{op}_f32_large", op, [x], fn(x, -1), {"dim": -1}, tol)
        x = T([1.0, -INF, 2.0, -INF, 0.5, 0.5, -INF, 3.0], shape=[2, 4])
        add_case(f"{op}_f32_neginf", op, [x], fn(x, -1), {"dim": -1}, tol)
        x = Gen(op + "_c").uniform([7], -2, 2)
        add_case(f"{op}_f32_1d", op, [x], fn(x, 0), {"dim": 0}, tol)
        x = Gen(op + "_h").uniform([2, 6], -3, 3, dtype=f16)
        add_case(f"{op}_f16_dm1", op, [x], ref_upcast(lambda t: fn(t, -1), [x], f16), {"dim": -1})


def layer_norm_cases():
    g = Gen("layer_norm_w_b")
    x, w, b = g.uniform([2, 3, 4]), g.uniform([4], 0.5, 1.5), g.uniform([4], -0.5, 0.5)
    add_case("layer_norm_w_b", "layer_norm", [x, w, b], F.layer_norm(x, [4], w, b, 1e-5),
             {"normalized_shape": [4], "eps": 1e-5}, T_LOOSE)
    g = Gen("layer_norm_2dims")
    x, w, b = g.uniform([2, 3, 4]), g.uniform([3, 4], 0.5, 1.5), g.uniform([3, 4], -0.5, 0.5)
    add_case("layer_norm_2dims", "layer_norm", [x, w, b], F.layer_norm(x, [3, 4], w, b, 1e-5),
             {"normalized_shape": [3, 4], "eps": 1e-5}, T_LOOSE)
    x = Gen("layer_norm_plain").uniform([3, 5])
    add_case("layer_norm_plain", "layer_norm", [x], F.layer_norm(x, [5], None, None, 1e-5),
             {"normalized_shape": [5], "eps": 1e-5}, T_LOOSE)
    g = Gen("layer_norm_offset")
    x = g.normal([4, 6], mean=100.0, std=2.0)
    w, b = g.uniform([6], 0.5, 1.5), g.uniform([6], -0.5, 0.5)
    add_case("layer_norm_offset", "layer_norm", [x, w, b], F.layer_norm(x, [6], w, b, 1e-5),
             {"normalized_shape": [6], "eps": 1e-5}, T_LOOSE)
    x = T([1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.5], shape=[2, 4])  # constant row: var 0
    add_case("layer_norm_const_row", "layer_norm", [x], F.layer_norm(x, [4], None, None, 1e-5),
             {"normalized_shape": [4], "eps": 1e-5}, T_LOOSE)
    g = Gen("layer_norm_f16")
    x, w, b = g.uniform([3, 8], dtype=f16), g.uniform([8], 0.5, 1.5, dtype=f16), \
        g.uniform([8], -0.5, 0.5, dtype=f16)
    add_case("layer_norm_f16", "layer_norm", [x, w, b],
             ref_upcast(lambda *t: F.layer_norm(t[0], [8], t[1], t[2], 1e-5), [x, w, b], f16),
             {"normalized_shape": [8], "eps": 1e-5})


def indexing_cases():
    g = Gen("embedding_2d_idx")
    w, idx = g.uniform([5, 3]), g.ints([2, 3], 0, 5, i64)
    add_case("embedding_2d_idx", "embedding", [w, idx], F.embedding(idx, w))
    g = Gen("embedding_1d_idx")
    w, idx = g.uniform([6, 4]), T([5, 0, 0, 3], i64)
    add_case("embedding_1d_idx", "embedding", [w, idx], F.embedding(idx, w))
    g = Gen("embedding_i32_idx")
    w, idx = g.uniform([4, 2]), T([3, 1, 2], i32)
    add_case("embedding_i32_idx", "embedding", [w, idx], F.embedding(idx.long(), w))

    g = Gen("index_select_d0")
    x, idx = g.uniform([4, 3]), T([3, 0, 3], i64)
    add_case("index_select_d0", "index_select", [x, idx], torch.index_select(x, 0, idx), {"dim": 0})
    g = Gen("index_select_d1")
    x, idx = g.uniform([2, 5, 3]), T([4, 1, 1, 0], i64)
    add_case("index_select_d1", "index_select", [x, idx], torch.index_select(x, 1, idx), {"dim": 1})
    g = Gen("index_select_dm1")
    x, idx = g.ints([3, 4], -9, 9, i32), T([2, 3], i64)
    add_case("index_select_dm1", "index_select", [x, idx], torch.index_select(x, -1, idx),
             {"dim": -1})

    g = Gen("gather_d1")
    x, idx = g.uniform([3, 4]), g.ints([3, 2], 0, 4, i64)
    add_case("gather_d1", "gather", [x, idx], torch.gather(x, 1, idx), {"dim": 1})
    g = Gen("gather_d0")
    x, idx = g.uniform([3, 4]), g.ints([2, 4], 0, 3, i64)
    add_case("gather_d0", "gather", [x, idx], torch.gather(x, 0, idx), {"dim": 0})
    g = Gen("gather_3d_dm1")
    x, idx = g.uniform([2, 3, 4]), g.ints([2, 3, 2], 0, 4, i64)
    add_case("gather_3d_dm1", "gather", [x, idx], torch.gather(x, -1, idx), {"dim": -1})
    g = Gen("gather_smaller")  # index smaller than x in a non-gather dim
    x, idx = g.ints([4, 5], -50, 50, i64), g.ints([2, 3], 0, 4, i64)
    add_case("gather_smaller", "gather", [x, idx], torch.gather(x, 0, idx), {"dim": 0})

    g = Gen("cat_d0")
    ts = [g.uniform([2, 3]), g.uniform([1, 3]), g.uniform([3, 3])]
    add_case("cat_d0", "cat", ts, torch.cat(ts, 0), {"dim": 0})
    g = Gen("cat_d1")
    ts = [g.uniform([2, 1]), g.uniform([2, 3])]
    add_case("cat_d1", "cat", ts, torch.cat(ts, 1), {"dim": 1})
    g = Gen("cat_dm1_3d")
    ts = [g.uniform([2, 3, 2]), g.uniform([2, 3, 1]), g.uniform([2, 3, 3])]
    add_case("cat_dm1_3d", "cat", ts, torch.cat(ts, -1), {"dim": -1})
    g = Gen("cat_i64")
    ts = [g.ints([2, 2], -9, 9, i64), g.ints([3, 2], -9, 9, i64)]
    add_case("cat_i64", "cat", ts, torch.cat(ts, 0), {"dim": 0})
    g = Gen("cat_single")
    ts = [g.uniform([2, 3])]
    add_case("cat_single", "cat", ts, torch.cat(ts, 1), {"dim": 1})

    g = Gen("stack_d0")
    ts = [g.uniform([2, 3]) for _ in range(3)]
    add_case("stack_d0", "stack", ts, torch.stack(ts, 0), {"dim": 0})
    g = Gen("stack_d1")
    ts = [g.uniform([2, 3]) for _ in range(2)]
    add_case("stack_d1", "stack", ts, torch.stack(ts, 1), {"dim": 1})
    g = Gen("stack_dm1")
    ts = [g.uniform([4]) for _ in range(3)]
    add_case("stack_dm1", "stack", ts, torch.stack(ts, -1), {"dim": -1})
    g = Gen("stack_d2_i32")
    ts = [g.ints([2, 2], -9, 9, i32) for _ in range(2)]
    add_case("stack_d2_i32", "stack", ts, torch.stack(ts, 2), {"dim": 2})
