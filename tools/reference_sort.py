"""PyTorch reference cases of issue 21's prod, scans, sort and selections (run
by gen_reference.py): prod, cumsum, cumprod, cummax, cummin, sort, argsort,
topk, kthvalue, median, mode. A (values, indices) op is two cases, its attrs
naming the output ("values" or "indices"). Indices are compared only where
PyTorch defines them: stable sorts, and selections over distinct values (its
topk, kthvalue and median may return any of equal elements)."""

import torch

from reference_common import (EXACT, INF, NAN, T_RED, Gen, T, add_case, boolean, f16, i32, i64,
                              ref_upcast, u8)


def pair(name, op, x, result, attrs, tol=EXACT, indices=True):
    add_case(f"{name}_values", op, [x], result[0].contiguous(), dict(attrs, output="values"), tol)
    if indices:
        add_case(f"{name}_indices", op, [x], result[1].contiguous(), dict(attrs, output="indices"),
                 EXACT)


def sort_cases():
    g = Gen("sort21")
    x = g.uniform([4, 6])
    xi = g.ints([3, 7], -4, 4, i32)
    zeros = T([1.5, 0.0, 2.0, -1.0, 0.5, 0.0, 3.0, 0.0, 1.25, -2.0, 2.0, 0.75], shape=[3, 4])
    # prod
    add_case("prod_f32_d1", "prod", [x], torch.prod(x, 1), {"dims": [1], "keepdim": False}, T_RED)
    add_case("prod_f32_all", "prod", [x], torch.prod(x), {"dims": [], "keepdim": False}, T_RED)
    add_case("prod_f32_zeros_d0_keep", "prod", [zeros], torch.prod(zeros, 0, keepdim=True),
             {"dims": [0], "keepdim": True}, T_RED)
    add_case("prod_i32_d1", "prod", [xi], torch.prod(xi, 1), {"dims": [1], "keepdim": False})
    xu = g.ints([2, 5], 0, 6, u8)
    add_case("prod_u8_all", "prod", [xu], torch.prod(xu), {"dims": [], "keepdim": False})
    xb = g.bools([3, 4])
    add_case("prod_bool_d1", "prod", [xb], torch.prod(xb, 1), {"dims": [1], "keepdim": False})
    # cumsum, cumprod
    for d in (0, 1, -1):
        tag = str(d).replace("-", "m")
        add_case(f"cumsum_f32_d{tag}", "cumsum", [x], torch.cumsum(x, d), {"dim": d}, T_RED)
        add_case(f"cumprod_f32_zeros_d{tag}", "cumprod", [zeros], torch.cumprod(zeros, d),
                 {"dim": d}, T_RED)
    add_case("cumsum_i32", "cumsum", [xi], torch.cumsum(xi, 1), {"dim": 1})
    add_case("cumsum_bool", "cumsum", [xb], torch.cumsum(xb, 0), {"dim": 0})
    add_case("cumprod_i32", "cumprod", [xi], torch.cumprod(xi, 1), {"dim": 1})
    xh = g.uniform([3, 5], dtype=f16, decimals=1)
    add_case("cumsum_f16", "cumsum", [xh], ref_upcast(lambda t: torch.cumsum(t, 1), [xh], f16),
             {"dim": 1})
    add_case("cumsum_f32_to_f64", "cumsum", [x], torch.cumsum(x, 1, dtype=torch.float64).float(),
             {"dim": 1, "dtype": "f64"}, T_RED)
    # cummax, cummin: ties (the later position), NaN (the latest NaN's)
    xn = T([1.0, 3.0, 3.0, 2.0, NAN, 5.0, NAN, 0.0, -1.0, -1.0, 4.0, 4.0, INF, -INF], shape=[2, 7])
    for op, fn in (("cummax", torch.cummax), ("cummin", torch.cummin)):
        pair(f"{op}_f32_nan", op, xn, fn(xn, 1), {"dim": 1})
        pair(f"{op}_f32_d0", op, x, fn(x, 0), {"dim": 0})
        pair(f"{op}_i32_ties", op, xi, fn(xi, 1), {"dim": 1})
    # sort (stable), argsort
    xs = T([3.0, -0.0, 0.0, NAN, 1.0, 3.0, -INF, NAN, 1.0, 0.0, INF, -2.0], shape=[2, 6])
    for desc in (False, True):
        tag = "desc" if desc else "asc"
        pair(f"sort_f32_special_{tag}", "sort", xs,
             torch.sort(xs, dim=1, descending=desc, stable=True), {"dim": 1, "descending": desc})
        pair(f"sort_i32_ties_{tag}", "sort", xi,
             torch.sort(xi, dim=0, descending=desc, stable=True), {"dim": 0, "descending": desc})
        pair(f"sort_bool_{tag}", "sort", xb,
             torch.sort(xb, dim=1, descending=desc, stable=True), {"dim": 1, "descending": desc})
    long = g.ints([600], -20, 20, i64)
    pair("sort_i64_long", "sort", long, torch.sort(long, stable=True), {"dim": -1,
                                                                        "descending": False})
    add_case("argsort_i32_desc", "argsort", [xi],
             torch.argsort(xi, dim=1, descending=True, stable=True), {"dim": 1, "descending": True})
    # topk, kthvalue, median over distinct values; median with NaN; mode
    pair("topk_f32_k3", "topk", x, torch.topk(x, 3, 1), {"k": 3, "dim": 1, "largest": True})
    pair("topk_f32_smallest_d0", "topk", x, torch.topk(x, 2, 0, largest=False),
         {"k": 2, "dim": 0, "largest": False})
    xt = T([2.0, NAN, 5.0, 1.0, -3.0])
    pair("topk_f32_nan", "topk", xt, torch.topk(xt, 2), {"k": 2, "dim": -1, "largest": True})
    pair("kthvalue_f32_k2_keep", "kthvalue", x, torch.kthvalue(x, 2, 1, keepdim=True),
         {"k": 2, "dim": 1, "keepdim": True})
    pair("median_f32_even_d1", "median", x, torch.median(x, 1), {"dim": 1, "keepdim": False})
    x5 = g.uniform([5, 3])
    pair("median_f32_odd_d0_keep", "median", x5, torch.median(x5, 0, keepdim=True),
         {"dim": 0, "keepdim": True})
    xm = T([3.0, 1.0, NAN, 2.0, NAN, 4.0, 0.5, 2.5, 1.5, -1.0], shape=[2, 5])
    pair("median_f32_nan", "median", xm, torch.median(xm, 1), {"dim": 1, "keepdim": False})
    add_case("median_f32_all", "median", [x5], torch.median(x5), {"dim": None})
    xmo = T([3, 1, 2, 3, 1, 2, 5, 4, 4, 0, 4, 7, 7, 7], i32, shape=[2, 7])
    pair("mode_i32", "mode", xmo, torch.mode(xmo, 1), {"dim": 1, "keepdim": False})
    xmf = T([1.5, 1.5, 2.0, 2.0, -1.0, 0.5, 0.5, 0.5], shape=[2, 4])
    pair("mode_f32_keep", "mode", xmf, torch.mode(xmf, 1, keepdim=True), {"dim": 1, "keepdim": True})
