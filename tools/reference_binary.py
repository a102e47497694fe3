"""PyTorch reference cases of the binary, ternary and reduction rows added for
issue 21 (run by gen_reference.py): atan2, the divisions with rounding, hypot,
copysign, xlogy, the bitwise and logical ops, lerp, addcmul, addcdiv, the
closeness tests and the composite reductions."""

import torch

from reference_common import (
    EXACT, Gen, INF, NAN, T, T_ACT, T_F32, T_TRANS, add_case, bf16, boolean, f16, i8, i16, i32,
    i64, ref_upcast, u8)


def float_cases():
    special_a = T([NAN, 1.0, INF, INF, -INF, 0.0, -0.0, 0.0, -0.0, 2.0, -3.0, 5.5, -5.5, 1e30])
    special_b = T([1.0, NAN, -INF, INF, 2.0, 0.0, 0.0, -0.0, -1.0, INF, 0.5, -2.0, 2.0, 1e-30])
    for op, tol in (("atan2", T_TRANS), ("remainder", T_F32), ("fmod", T_F32),
                    ("floor_divide", T_F32), ("hypot", T_F32), ("copysign", EXACT),
                    ("xlogy", T_TRANS)):
        fn = getattr(torch, op)
        g = Gen(f"{op}_f32")
        a, b = g.uniform([3, 4], -6, 6), g.uniform([4], -3, 3)
        if op == "xlogy":
            b = b.abs() + 0.1
        add_case(f"{op}_f32", op, [a, b], fn(a, b), tol=tol)
        add_case(f"{op}_f32_special", op, [special_a, special_b], fn(special_a, special_b), tol=tol)
        ah, bh = g.uniform([5], 0.5, 6, dtype=bf16), g.uniform([5], 0.5, 3, dtype=bf16)
        add_case(f"{op}_bf16", op, [ah, bh], ref_upcast(fn, [ah, bh], bf16))
    # Exact quotients and remainders where a / b rounds across an integer.
    a = T([1.0, -1.0, 0.3, -0.3, 7.0, -7.0, 1e8, 5.0, 0.0, -0.0])
    b = T([0.1, 0.1, 0.1, 0.1, -2.0, 2.0, 3.0, -0.0, 3.0, 3.0])
    for op in ("remainder", "fmod", "floor_divide"):
        add_case(f"{op}_f32_rounding", op, [a, b], getattr(torch, op)(a, b), tol=EXACT)
    # Integers: every sign combination (no zero divisors: PyTorch refuses them).
    a = T([7, -7, 7, -7, 0, 1, -1, 100, -100, 5], i32)
    b = T([2, 2, -2, -2, 3, 5, 5, -7, 7, 5], i32)
    for op in ("remainder", "fmod", "floor_divide"):
        fn = getattr(torch, op)
        add_case(f"{op}_i32", op, [a, b], fn(a, b), tol=EXACT)
        add_case(f"{op}_i64", op, [a.to(i64), b.to(i64)], fn(a.to(i64), b.to(i64)), tol=EXACT)
        au, bu = T([7, 200, 255, 0], u8), T([2, 7, 16, 3], u8)
        add_case(f"{op}_u8", op, [au, bu], fn(au, bu), tol=EXACT)
        for dt in (i8, i16):
            name = str(dt)[6:]
            add_case(f"{op}_{name}", op, [a.to(dt), b.to(dt)], fn(a.to(dt), b.to(dt)), tol=EXACT)
    a, b = T([1, 2, 3], i32), T([4.0, 0.5, 2.0])
    add_case("atan2_i32_f32", "atan2", [a, b], torch.atan2(a, b), tol=T_TRANS)
    a, b = T([0, 1, 2], i64), T([0, 3, 5], i64)
    add_case("xlogy_i64", "xlogy", [a, b], torch.xlogy(a, b), tol=T_TRANS)


def bitwise_cases():
    g = Gen("bitwise")
    for dt, lo, hi in ((i32, -2**31, 2**31 - 1), (i64, -2**62, 2**62), (u8, 0, 256),
                       (i8, -2**7, 2**7), (i16, -2**15, 2**15)):
        a, b = g.ints([3, 4], lo, hi, dt), g.ints([4], lo, hi, dt)
        name = str(dt)[6:]
        for op in ("bitwise_and", "bitwise_or", "bitwise_xor"):
            add_case(f"{op}_{name}", op, [a, b], getattr(torch, op)(a, b), tol=EXACT)
        bits = {u8: 8, i8: 8, i16: 16, i32: 32, i64: 64}[dt]
        # Counts inside [0, bits): torch 1.13's CPU leaves the others to the
        # machine (x86 masks the count), which ferry defines (the closed forms).
        s = g.ints([4], 0, bits, dt)
        add_case(f"bitwise_left_shift_{name}", "bitwise_left_shift", [a, s],
                 torch.bitwise_left_shift(a, s), tol=EXACT)
        add_case(f"bitwise_right_shift_{name}", "bitwise_right_shift", [a, s],
                 torch.bitwise_right_shift(a, s), tol=EXACT)
    a, b = T([True, True, False, False], boolean), T([True, False, True, False], boolean)
    for op in ("bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or",
               "logical_xor"):
        add_case(f"{op}_bool", op, [a, b], getattr(torch, op)(a, b), tol=EXACT)
    a, b = T([0.0, 1.5, NAN, -0.0, 2.0]), T([3, 0, 0, 0, -1], i32)
    for op in ("logical_and", "logical_or", "logical_xor"):
        add_case(f"{op}_f32_i32", op, [a, b], getattr(torch, op)(a, b), tol=EXACT)


def ternary_cases():
    g = Gen("lerp")
    a, b, w = g.uniform([3, 4]), g.uniform([4]), g.uniform([3, 1], -0.5, 1.5)
    add_case("lerp_f32_tensor", "lerp", [a, b, w], torch.lerp(a, b, w), tol=T_F32)
    for weight in (0.0, 0.25, 0.5, 1.0, 2.0):
        add_case(f"lerp_f32_{weight:g}".replace(".", "p"), "lerp", [a, b],
                 torch.lerp(a, b, weight), {"weight": weight}, T_F32)
    ah, bh = g.uniform([5], dtype=f16), g.uniform([5], dtype=f16)
    add_case("lerp_f16", "lerp", [ah, bh], ref_upcast(lambda x, y: torch.lerp(x, y, 0.3), [ah, bh],
                                                      f16), {"weight": 0.3})
    g = Gen("addcmul")
    x, t1, t2 = g.uniform([2, 3]), g.uniform([3]), g.uniform([2, 1])
    add_case("addcmul_f32", "addcmul", [x, t1, t2], torch.addcmul(x, t1, t2, value=0.5),
             {"value": 0.5}, T_F32)
    add_case("addcdiv_f32", "addcdiv", [x, t1, t2.abs() + 0.5],
             torch.addcdiv(x, t1, t2.abs() + 0.5, value=-2.0), {"value": -2.0}, T_F32)
    xi, t1i, t2i = g.ints([4], -9, 9, i64), g.ints([4], -9, 9, i64), g.ints([4], -9, 9, i64)
    add_case("addcmul_i64", "addcmul", [xi, t1i, t2i], torch.addcmul(xi, t1i, t2i, value=3),
             {"value": 3}, EXACT)

    a = T([1.0, 1.0, 1.0, 0.0, NAN, NAN, INF, INF, -INF, 100.0, 1e-9, 3.0])
    b = T([1.0, 1.0 + 1e-6, 1.1, 1e-9, NAN, 1.0, INF, -INF, -INF, 100.001, 0.0, -3.0])
    for rtol, atol, equal_nan in ((1e-5, 1e-8, False), (1e-3, 0.0, True), (0.0, 0.0, False),
                                  (0.0, 1e-3, False)):
        name = f"isclose_f32_{rtol:g}_{atol:g}_{int(equal_nan)}".replace("-", "m").replace(".", "p")
        add_case(name, "isclose", [a, b],
                 torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan),
                 {"rtol": rtol, "atol": atol, "equal_nan": equal_nan}, EXACT)
    ai, bi = T([1, 5, -3, 100], i64), T([1, 6, -4, 90], i64)
    add_case("isclose_i64", "isclose", [ai, bi], torch.isclose(ai, bi, rtol=0.1, atol=0.5),
             {"rtol": 0.1, "atol": 0.5, "equal_nan": False}, EXACT)


def reduction_cases():
    """The composite reductions of issue 21: argmin, all, any, count_nonzero,
    std, var_mean, std_mean and norm."""
    def dims_of(x, dims):
        return dims or list(range(x.dim()))

    def p_attr(p):  # JSON has no infinities: the strings "inf" and "-inf"
        return p if abs(p) != INF else ("inf" if p > 0 else "-inf")

    x = Gen("reduce21_x").uniform([3, 4, 5])
    xz = T([0.0, 0.0, 0.0, 0.0, 3.0, -4.0, 0.0, 1.0, NAN, 1.0, 0.0, 2.0, INF, -1.0, 0.0, 0.0],
           shape=[4, 4])
    for dims, keep in (([], False), ([1], True), ([0, 2], False), ([-1], False)):
        tag = ("all" if not dims else "d" + "_".join(str(d).replace("-", "m") for d in dims)) + \
            ("_keep" if keep else "")
        attrs = {"dims": dims, "keepdim": keep}
        add_case(f"std_f32_{tag}", "std", [x],
                 torch.std(x, dim=dims_of(x, dims), keepdim=keep), attrs, T_F32)
        v, m = torch.var_mean(x, dim=dims_of(x, dims), keepdim=keep, unbiased=False)
        add_case(f"var_mean_f32_{tag}", "var_mean", [x], torch.cat([v.reshape(-1), m.reshape(-1)]),
                 dict(attrs, correction=0), T_F32)
        s, m = torch.std_mean(x, dim=dims_of(x, dims), keepdim=keep)
        add_case(f"std_mean_f32_{tag}", "std_mean", [x], torch.cat([s.reshape(-1), m.reshape(-1)]),
                 attrs, T_F32)
        for p in (2.0, 1.0, 3.0, 0.5, INF, -INF, 0.0, -1.0):
            ptag = str(p).replace("-", "m").replace(".", "p")
            add_case(f"norm_f32_{tag}_p{ptag}", "norm", [x],
                     torch.linalg.vector_norm(x, p, dim=dims_of(x, dims), keepdim=keep),
                     dict(attrs, p=p_attr(p)), T_F32)
    for p in (2.0, 1.0, INF, 0.0, 3.0):
        ptag = str(p).replace(".", "p")
        add_case(f"norm_f32_zeros_p{ptag}", "norm", [xz],
                 torch.linalg.vector_norm(xz, p, dim=[1]), {"dims": [1], "keepdim": False, "p": p_attr(p)},
                 T_F32)
    xh = Gen("norm_f16").uniform([4, 6], dtype=f16)
    add_case("norm_f16", "norm", [xh], ref_upcast(lambda t: torch.linalg.vector_norm(t, 2.0),
                                                  [xh], f16), {"dims": [], "keepdim": False, "p": 2.0})
    for name, t in (("f32", xz), ("i32", T([0, 3, -1, 0, 0, 0, 5, 5, 2], i32, shape=[3, 3])),
                    ("bool", T([True, False, True, True], boolean, shape=[2, 2]))):
        for dims in ([], [1], [0]):
            tag = "all" if not dims else f"d{dims[0]}"
            for op in ("all", "any"):
                fn = getattr(torch, op)
                out = fn(t) if not dims else fn(t, dim=dims[0])
                add_case(f"{op}_{name}_{tag}", op, [t], out, {"dims": dims, "keepdim": False},
                         EXACT)
            add_case(f"count_nonzero_{name}_{tag}", "count_nonzero", [t],
                     torch.count_nonzero(t, dim=dims or None), {"dims": dims}, EXACT)
        add_case(f"argmin_{name}_all", "argmin", [t], torch.argmin(t) if name != "bool"
                 else torch.argmin(t.to(torch.uint8)), {"dim": None}, EXACT)
        add_case(f"argmin_{name}_d1", "argmin", [t], torch.argmin(t, dim=1) if name != "bool"
                 else torch.argmin(t.to(torch.uint8), dim=1), {"dim": 1, "keepdim": False}, EXACT)
    xu = T([5, 0, 255, 0, 7, 1], u8, shape=[2, 3])
    add_case("argmin_u8_d1", "argmin", [xu], torch.argmin(xu, dim=1), {"dim": 1}, EXACT)
    xi = T([3, -2**31, 7, -2**31], i32)
    add_case("argmin_i32_intmin", "argmin", [xi], torch.argmin(xi), {"dim": None}, EXACT)
