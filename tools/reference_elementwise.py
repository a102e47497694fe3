"""PyTorch reference cases of the element-wise ops: unary, binary, comparisons,
where, casts, 0-d promotion and the composite ops (run by gen_reference.py)."""

import torch
import torch.nn.functional as F

from reference_common import (
    DTYPE_NAMES, EXACT, Gen, INF, NAN, SPECIAL, T, T_ACT, T_F32, T_TRANS, add_case, bf16,
    boolean, f16, f32, i8, i16, i32, i64, ref_upcast, tol_for, u8)


UNARY = {
    "neg": (torch.neg, (-3, 3), T_F32),
    "abs": (torch.abs, (-3, 3), T_F32),
    "exp": (torch.exp, (-5, 5), T_TRANS),
    "expm1": (torch.expm1, (-3, 3), T_TRANS),
    "log": (torch.log, (0.01, 8), T_TRANS),
    "sqrt": (torch.sqrt, (0, 9), T_TRANS),
    "rsqrt": (torch.rsqrt, (0.05, 9), T_TRANS),
    "sin": (torch.sin, (-6.5, 6.5), T_TRANS),
    "cos": (torch.cos, (-6.5, 6.5), T_TRANS),
    "tanh": (torch.tanh, (-4, 4), T_TRANS),
    "sigmoid": (torch.sigmoid, (-8, 8), T_TRANS),
    "relu": (torch.relu, (-3, 3), T_F32),
    "silu": (F.silu, (-6, 6), T_ACT),
}


def unary_cases():
    shapes = {"neg": [3, 5], "abs": [2, 1, 3], "exp": [4, 6], "expm1": [5, 7], "log": [7], "sqrt": [3, 4],
              "rsqrt": [5, 2], "sin": [2, 3, 4], "cos": [11], "tanh": [3, 7], "sigmoid": [6, 5],
              "relu": [2, 9], "silu": [4, 4]}
    for op, (fn, (lo, hi), tol) in UNARY.items():
        name = f"{op}_f32"
        x = Gen(name).uniform(shapes[op], lo, hi)
        add_case(name, op, [x], fn(x), tol=tol)
        name = f"{op}_f32_special"
        x = T(SPECIAL)
        add_case(name, op, [x], fn(x), tol=tol)
    for approx, shape in (("none", [3, 6]), ("tanh", [5, 3])):
        name = f"gelu_{approx}_f32"
        x = Gen(name).uniform(shape, -5, 5)
        add_case(name, "gelu", [x], F.gelu(x, approximate=approx), {"approximate": approx}, T_ACT)
        name = f"gelu_{approx}_f32_special"
        x = T(SPECIAL)
        add_case(name, "gelu", [x], F.gelu(x, approximate=approx), {"approximate": approx}, T_ACT)

    # Half precision.
    for op, dt, shape in (("exp", f16, [4, 5]), ("sigmoid", f16, [3, 4]), ("tanh", f16, [9]),
                          ("silu", f16, [2, 2, 3]), ("neg", f16, [6]), ("sqrt", f16, [2, 5]),
                          ("relu", bf16, [4, 5]), ("sqrt", bf16, [3, 3]), ("log", bf16, [8]),
                          ("sin", bf16, [2, 6]), ("abs", bf16, [5]), ("exp", bf16, [3, 4])):
        fn, (lo, hi), _ = UNARY[op]
        name = f"{op}_{DTYPE_NAMES[dt]}"
        x = Gen(name).uniform(shape, lo, hi, dtype=dt)
        add_case(name, op, [x], ref_upcast(fn, [x], dt))
    for approx, dt in (("none", f16), ("tanh", bf16)):
        name = f"gelu_{approx}_{DTYPE_NAMES[dt]}"
        x = Gen(name).uniform([3, 5], -4, 4, dtype=dt)
        add_case(name, "gelu", [x], ref_upcast(lambda t: F.gelu(t, approximate=approx), [x], dt),
                 {"approximate": approx})
    x = T(SPECIAL, f16)
    add_case("exp_f16_special", "exp", [x], ref_upcast(torch.exp, [x], f16))
    # expm1 near 0, where exp(x) - 1 would cancel to few correct digits: held
    # to relative error alone.
    x = T([1e-7, -1e-7, 3e-5, -2e-4, 1e-3, -0.01, 0.1, -0.3, 0.49, -0.51, 1e-30, -20.0])
    add_case("expm1_f32_tiny", "expm1", [x], torch.expm1(x), tol={"rtol": 1e-6, "atol": 0.0})

    # Integer inputs: abs/neg/relu keep the dtype, floating ops give f32.
    x = Gen("abs_i32").ints([2, 5], -50, 50, i32)
    add_case("abs_i32", "abs", [x], torch.abs(x))
    x = Gen("neg_i64").ints([7], -1000, 1000, i64)
    add_case("neg_i64", "neg", [x], torch.neg(x))
    x = Gen("relu_i32").ints([3, 3], -10, 10, i32)
    add_case("relu_i32", "relu", [x], torch.relu(x))
    x = Gen("exp_i32").ints([6], -4, 5, i32)
    add_case("exp_i32", "exp", [x], torch.exp(x), tol=T_TRANS)
    x = Gen("sqrt_i64").ints([2, 4], 0, 100, i64)
    add_case("sqrt_i64", "sqrt", [x], torch.sqrt(x), tol=T_TRANS)
    x = Gen("sigmoid_bool").bools([5])
    add_case("sigmoid_bool", "sigmoid", [x], torch.sigmoid(x), tol=T_TRANS)


BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum,
}


def binary_cases():
    for op, fn in BINARY.items():
        tol = T_ACT if op == "pow" else T_F32
        for tag, sa, sb in (("3x1_1x4", [3, 1], [1, 4]), ("2x3x4_4", [2, 3, 4], [4]),
                            ("2x5_2x5", [2, 5], [2, 5])):
            name = f"{op}_f32_{tag}"
            g = Gen(name)
            if op == "pow":
                a, b = g.uniform(sa, 0.1, 3.0), g.uniform(sb, -2.0, 2.0)
            elif op == "div":
                a = g.uniform(sa, -3, 3)
                b = g.uniform(sb, 0.2, 3) * torch.where(g.bools(sb), 1.0, -1.0)
            else:
                a, b = g.uniform(sa), g.uniform(sb)
            add_case(name, op, [a, b], fn(a, b), tol=tol)
        name = f"{op}_f32_special"
        a = T([NAN, 1.0, INF, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.0, 2.0, -3.0])
        b = T([1.0, NAN, -INF, INF, 2.0, 0.0, 0.0, -0.0, 0.0, 5.0, INF, 0.5])
        add_case(name, op, [a, b], fn(a, b), tol=tol)
    a = T([-2.0, -1.5, -3.0, 2.0, 0.0, 0.0, 4.0, -8.0])
    b = T([2.0, 3.0, 0.5, -1.0, -1.0, 0.0, 0.5, 1.0 / 3.0])
    add_case("pow_f32_negbase", "pow", [a, b], torch.pow(a, b), tol=T_ACT)
    g = Gen("add_f32_0d")
    a, b = g.uniform([2, 3]), T(1.25).reshape([])
    add_case("add_f32_0d", "add", [a, b], a + b)
    g = Gen("mul_f32_1x1_odd")
    a, b = g.uniform([1, 1]), g.uniform([3, 1, 5])
    add_case("mul_f32_1x1_odd", "mul", [a, b], a * b)

    # Integers.
    g = Gen("add_i32")
    a, b = g.ints([2, 3], -1000, 1000, i32), g.ints([3], -1000, 1000, i32)
    add_case("add_i32", "add", [a, b], a + b)
    g = Gen("add_i64")
    a, b = g.ints([3, 1], -10**12, 10**12, i64), g.ints([1, 4], -10**12, 10**12, i64)
    add_case("add_i64", "add", [a, b], a + b)
    g = Gen("sub_i32")
    a, b = g.ints([5], -100, 100, i32), g.ints([5], -100, 100, i32)
    add_case("sub_i32", "sub", [a, b], a - b)
    g = Gen("mul_i32")
    a, b = g.ints([2, 3, 4], -300, 300, i32), g.ints([4], -300, 300, i32)
    add_case("mul_i32", "mul", [a, b], a * b)
    g = Gen("mul_i64")
    a, b = g.ints([3, 1], -10**6, 10**6, i64), g.ints([1, 4], -10**6, 10**6, i64)
    add_case("mul_i64", "mul", [a, b], a * b)
    a = T([7, -7, 7, -7, 1, 0, 9, 100, -3], i32)
    b = T([2, 2, -2, -2, 3, 5, 3, 7, 4], i32)
    add_case("div_i32_i32", "div", [a, b], torch.div(a, b))
    a, b = T([1, -1, 0, 4], i32), T([0, 0, 0, 2], i32)
    add_case("div_i32_by_zero", "div", [a, b], torch.div(a, b))
    g = Gen("div_i64_bcast")
    a, b = g.ints([2, 3], -50, 50, i64), T([3, -4, 7], i64)
    add_case("div_i64_bcast", "div", [a, b], torch.div(a, b))
    g = Gen("add_i32_f32")
    a, b = g.ints([3, 4], -20, 20, i32), g.uniform([4])
    add_case("add_i32_f32", "add", [a, b], a + b)
    g = Gen("mul_f32_i64")
    a, b = g.uniform([2, 3]), g.ints([2, 1], -5, 5, i64)
    add_case("mul_f32_i64", "mul", [a, b], a * b)
    g = Gen("add_u8_i32")
    a, b = g.ints([2, 4], 0, 256, u8), g.ints([4], -300, 300, i32)
    add_case("add_u8_i32", "add", [a, b], a + b)
    g = Gen("add_u8_u8")
    a, b = g.ints([6], 0, 128, u8), g.ints([6], 0, 128, u8)
    add_case("add_u8_u8", "add", [a, b], a + b)
    g = Gen("sub_i64_u8")
    a, b = g.ints([5], -100, 100, i64), g.ints([5], 0, 256, u8)
    add_case("sub_i64_u8", "sub", [a, b], a - b)
    a, b = T([2, 3, -2, 0, 5, 1, -1], i32), T([3, 2, 3, 0, 1, 10, 5], i32)
    add_case("pow_i32", "pow", [a, b], torch.pow(a, b))
    g = Gen("maximum_i32")
    a, b = g.ints([3, 1], -10, 10, i32), g.ints([1, 4], -10, 10, i32)
    add_case("maximum_i32", "maximum", [a, b], torch.maximum(a, b))
    g = Gen("minimum_i64")
    a, b = g.ints([4], -10, 10, i64), g.ints([4], -10, 10, i64)
    add_case("minimum_i64", "minimum", [a, b], torch.minimum(a, b))
    a, b = T([True, True, False, False], boolean), T([1, -2, 3, 4], i32)
    add_case("add_bool_i32", "add", [a, b], a + b)

    # Half precision and mixed floating.
    g = Gen("add_f16")
    a, b = g.uniform([3, 4], dtype=f16), g.uniform([4], dtype=f16)
    add_case("add_f16", "add", [a, b], ref_upcast(torch.add, [a, b], f16))
    g = Gen("mul_bf16")
    a, b = g.uniform([3, 1], dtype=bf16), g.uniform([1, 5], dtype=bf16)
    add_case("mul_bf16", "mul", [a, b], ref_upcast(torch.mul, [a, b], bf16))
    g = Gen("div_f16")
    a, b = g.uniform([6], dtype=f16), g.uniform([6], 0.5, 3, dtype=f16)
    add_case("div_f16", "div", [a, b], ref_upcast(torch.div, [a, b], f16))
    g = Gen("add_f16_bf16")
    a, b = g.uniform([2, 3], dtype=f16), g.uniform([2, 3], dtype=bf16)
    add_case("add_f16_bf16", "add", [a, b], a.float() + b.float())  # promotes to f32
    g = Gen("add_f16_f32")
    a, b = g.uniform([2, 3], dtype=f16), g.uniform([3])
    add_case("add_f16_f32", "add", [a, b], a.float() + b)
    g = Gen("mul_i64_f16")
    a, b = g.ints([2, 3], -5, 5, i64), g.uniform([3], dtype=f16)
    add_case("mul_i64_f16", "mul", [a, b], ref_upcast(torch.mul, [a, b], f16))  # f16 wins
    a, b = T([NAN, 1.0, -INF, 2.0], bf16), T([0.5, NAN, 3.0, -0.0], bf16)
    add_case("maximum_bf16_nan", "maximum", [a, b], ref_upcast(torch.maximum, [a, b], bf16))


COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
           "ge": torch.ge}


def compare_cases():
    for op, fn in COMPARE.items():
        name = f"{op}_f32_3x1_1x4"
        g = Gen(name)
        a, b = g.uniform([3, 1], -2, 2, decimals=0), g.uniform([1, 4], -2, 2, decimals=0)
        add_case(name, op, [a, b], fn(a, b))
        name = f"{op}_f32_2x3x4_4"
        g = Gen(name)
        a, b = g.uniform([2, 3, 4], -1, 1, decimals=1), g.uniform([4], -1, 1, decimals=1)
        add_case(name, op, [a, b], fn(a, b))
        name = f"{op}_f32_special"
        a = T([NAN, NAN, 1.0, INF, -INF, 0.0, INF, 2.0])
        b = T([NAN, 1.0, NAN, INF, INF, -0.0, 3.0, 2.0])
        add_case(name, op, [a, b], fn(a, b))
    g = Gen("eq_i32_f32")
    a, b = g.ints([2, 4], -2, 3, i32), T([-1.0, 0.0, 0.5, 2.0])
    add_case("eq_i32_f32", "eq", [a, b], torch.eq(a, b))
    g = Gen("lt_i64_i32")
    a, b = g.ints([3, 1], -3, 3, i64), g.ints([1, 3], -3, 3, i32)
    add_case("lt_i64_i32", "lt", [a, b], torch.lt(a, b))
    g = Gen("ge_u8_i32")
    a, b = g.ints([5], 0, 256, u8), g.ints([5], -10, 256, i32)
    add_case("ge_u8_i32", "ge", [a, b], torch.ge(a, b))
    g = Gen("gt_f16")
    a, b = g.uniform([6], -1, 1, dtype=f16, decimals=1), g.uniform([6], -1, 1, dtype=f16, decimals=1)
    add_case("gt_f16", "gt", [a, b], torch.gt(a.float(), b.float()))


def where_cases():
    g = Gen("where_f32_bcast")
    c, a, b = g.bools([2, 3, 1]), g.uniform([3, 4]), g.uniform([4])
    add_case("where_f32_bcast", "where", [c, a, b], torch.where(c, a, b))
    g = Gen("where_f32_same")
    c, a, b = g.bools([2, 5]), g.uniform([2, 5]), g.uniform([2, 5])
    add_case("where_f32_same", "where", [c, a, b], torch.where(c, a, b))
    g = Gen("where_i32")
    c, a, b = g.bools([4, 1]), g.ints([1, 3], -100, 100, i32), g.ints([4, 3], -100, 100, i32)
    add_case("where_i32", "where", [c, a, b], torch.where(c, a, b))
    g = Gen("where_i64_f32")
    c, a, b = g.bools([5]), g.ints([5], -9, 9, i64), g.uniform([1])
    add_case("where_i64_f32", "where", [c, a, b], torch.where(c, a, b))
    c = T([True, False, True, False], boolean)
    a, b = T([NAN, 1.0, -INF, 2.0]), T([0.0, INF, 3.0, NAN])
    add_case("where_f32_special", "where", [c, a, b], torch.where(c, a, b))


def promotion_cases():
    """PyTorch's result_type for a 0-d tensor beside a tensor with dims (Note [Type
    promotion] in include/ferry/ops.hpp): every pair of dtypes from every category,
    in each arrangement of dims, for add, eq and where."""
    dts = {"bool": boolean, "u8": u8, "i32": i32, "i64": i64, "f16": f16, "bf16": bf16,
           "f32": f32}
    dims = {"1d_1d": ([3], [3]), "1d_0d": ([3], []), "0d_1d": ([], [3]), "0d_0d": ([], [])}

    def make(g, shape, dt):
        if dt == boolean:
            return g.bools(shape)
        if not dt.is_floating_point:
            return g.ints(shape, 0 if dt == u8 else -5, 6, dt)
        return g.uniform(shape, -3, 3, dt, decimals=2)

    for an, adt in dts.items():
        for bn, bdt in dts.items():
            for dn, (sa, sb) in dims.items():
                name = "promote_add_%s_%s_%s" % (an, bn, dn)
                g = Gen(name)
                a, b = make(g, sa, adt), make(g, sb, bdt)
                rt = torch.result_type(a, b)
                # Both operands cast to the result's dtype first, as PyTorch's CPU
                # does (ferry too); then one rounding of the f32 sum.
                add_case(name, "add", [a, b], ref_upcast(torch.add, [a.to(rt), b.to(rt)], rt),
                         tol=tol_for(rt, T_F32))
    # Comparisons and where promote by the same rule (the comparison in the
    # promoted dtype, where's result in it).
    for an, bn in (("i32", "i64"), ("f16", "f32"), ("i32", "f32"), ("bool", "i64"),
                   ("u8", "i32"), ("bf16", "f16")):
        adt, bdt = dts[an], dts[bn]
        for dn in ("1d_0d", "0d_1d"):
            sa, sb = dims[dn]
            name = "promote_eq_%s_%s_%s" % (an, bn, dn)
            g = Gen(name)
            a, b = make(g, sa, adt), make(g, sb, bdt)
            add_case(name, "eq", [a, b], torch.eq(a, b))
            name = "promote_where_%s_%s_%s" % (an, bn, dn)
            g = Gen(name)
            a, b = make(g, sa, adt), make(g, sb, bdt)
            c = g.bools([3])
            rt = torch.result_type(a, b)
            add_case(name, "where", [c, a, b], torch.where(c, a.to(rt), b.to(rt)))


def cast_cases():
    def cast(name, x, dt):
        if x.dtype in (f16, bf16) and dt in (f16, bf16):
            out = x.float().to(dt)
        else:
            out = x.to(dt)
        add_case(name, "cast", [x], out, {"dtype": DTYPE_NAMES[dt]}, EXACT)

    x = T([-2.7, 2.7, -0.5, 0.5, -0.0, 0.0, 100.9, -100.9, 1e6 + 0.5, -1.0, 2147483520.0, -3.99])
    cast("cast_f32_i32", x, i32)
    cast("cast_f32_i64", T([-2.7, 2.7, -0.5, 0.5, 1e10 + 0.75, -1e12, 3.999, -3.999]), i64)
    cast("cast_f32_u8", T([0.0, 0.7, 1.5, 127.9, 200.2, 255.0]), u8)
    x = T([0.1, 1.0 / 3.0, 65504.0, 65519.0, 65520.0, 70000.0, 1e-8, 3e-6, -2.5e-5, NAN, INF, -INF,
           1.0 + 2.0**-11, 1.0 + 3.0 * 2.0**-11, -0.0, 6.1e-5, 2.0**-24, 2.0**-25, 1.5 * 2.0**-25])
    cast("cast_f32_f16", x, f16)
    x = T([0.1, 1.0 / 3.0, 3.14159265, 1.0 + 2.0**-8, 1.0 + 3.0 * 2.0**-8, 1e-40, 3.4028235e38,
           -65504.5, NAN, INF, -INF, -0.0, 255.5, 257.0])
    cast("cast_f32_bf16", x, bf16)
    cast("cast_i64_f32", T([16777217, -3, 2**31, 123456789, -(2**40) - 1, 0], i64), f32)
    cast("cast_i32_f32", T([16777217, -7, 2147483647, 0], i32), f32)
    cast("cast_f32_bool", T([0.0, -0.0, 0.1, NAN, -INF, 2.0, -1e-30]), boolean)
    cast("cast_bool_f32", T([True, False, True], boolean), f32)
    cast("cast_bool_i64", T([True, False, True, True], boolean), i64)
    cast("cast_i32_i64", T([-2147483648, 2147483647, 0, -5], i32), i64)
    cast("cast_i64_i32", T([-5, 7, 100000, -100000], i64), i32)
    cast("cast_i32_bool", T([0, 3, -1, 0], i32), boolean)
    cast("cast_u8_f32", T([0, 1, 128, 255], u8), f32)
    cast("cast_u8_i32", T([0, 1, 128, 255], u8), i32)
    cast("cast_f16_f32", Gen("cast_f16_f32").uniform([2, 3], dtype=f16), f32)
    cast("cast_bf16_f32", T([0.1, -3.5, NAN, INF, 1e-40], bf16), f32)
    cast("cast_bf16_f16", T([0.1, -3.5, 1e5, 1e-6, 1.0 + 2.0**-7, NAN], bf16), f16)
    cast("cast_f16_bf16", T([0.1, -3.5, 65504.0, 1e-7, 1.0 + 2.0**-10 + 2.0**-9, INF], f16), bf16)
    cast("cast_f16_i32", T([-2.7, 2.7, 1000.5, -0.0], f16), i32)
    cast("cast_f32_f32", T([1.5, -2.25]), f32)


def composite_cases():
    """The composite ops (Note [Composite ops] in include/ferry/op.hpp)."""
    # square: x * x; bool counts as i64 (torch.square is pow(x, 2)); u8 wraps.
    x = Gen("square_f32").uniform([4, 6])
    add_case("square_f32", "square", [x], torch.square(x))
    add_case("square_f32_special", "square", [T(SPECIAL + [1e20, -1e20])],
             torch.square(T(SPECIAL + [1e20, -1e20])))
    x = Gen("square_f16").uniform([3, 5], dtype=f16)
    add_case("square_f16", "square", [x], ref_upcast(torch.square, [x], f16))
    x = Gen("square_i32").ints([2, 5], -50000, 50000, i32)  # some products wrap
    add_case("square_i32", "square", [x], torch.square(x))
    x = T([0, 3, 15, 16, 200, 255], u8)
    add_case("square_u8", "square", [x], torch.square(x))
    x = Gen("square_bool").bools([6])
    add_case("square_bool", "square", [x], torch.square(x))

    # clamp: scalar bounds (either, both, crossed), promotion by the bounds,
    # tensor bounds that broadcast, a 0-d bound, NaN and infinities.
    def clamp(name, inputs, lo=None, hi=None):
        x = inputs[0]
        # torch 1.13's CPU clamp has no f16 kernel: clamping is exact, so the
        # f16 cases clamp in f32 and round to the dtype torch would return.
        if len(inputs) == 1:
            dt = torch.result_type(x, lo if lo is not None else hi)
            out = torch.clamp(x.float() if x.dtype == f16 else x, min=lo, max=hi).to(dt)
        else:
            hi_t = inputs[2] if len(inputs) > 2 else None
            dt = torch.result_type(x, inputs[1])
            up = (lambda t: t.float() if t is not None and t.dtype == f16 else t)
            out = torch.clamp(up(x), min=up(inputs[1]), max=up(hi_t)).to(dt)
        add_case(name, "clamp", inputs, out, {"min": lo, "max": hi})

    x = Gen("clamp_f32").uniform([4, 5])
    clamp("clamp_f32_both", [x], -1.0, 1.5)
    clamp("clamp_f32_min", [x], 0.25, None)
    clamp("clamp_f32_max", [x], None, -0.5)
    clamp("clamp_f32_crossed", [x], 1.0, -1.0)
    clamp("clamp_f32_special", [T(SPECIAL)], -1.0, 2.0)
    clamp("clamp_f16_both", [Gen("clamp_f16").uniform([6], dtype=f16)], -0.5, 0.5)
    xi = Gen("clamp_i32").ints([3, 4], -10, 10, i32)
    clamp("clamp_i32_int", [xi], -3, 4)
    clamp("clamp_i32_float", [xi], -2.5, None)  # an int tensor with a float bound is f32
    clamp("clamp_bool_int", [Gen("clamp_bool").bools([5])], 0, None)  # bool with an int: i64
    g = Gen("clamp_tensor")
    clamp("clamp_f32_tensor", [g.uniform([3, 4]), g.uniform([4], -1, 0), g.uniform([3, 1], 0, 1)])
    clamp("clamp_f32_tensor_min", [g.uniform([2, 3]), g.uniform([2, 1])])
    clamp("clamp_i32_tensor_f32", [g.ints([2, 3], -5, 5, i32), g.uniform([3], -2, 2)])
    # A 0-d f32 bound takes part like a number: an f16 input stays f16.
    clamp("clamp_f16_0d_f32", [g.uniform([5], dtype=f16), T([0.3]).reshape([])])

    # logsumexp over dim sets, rows of ±inf and NaN, large values, integers.
    def lse(name, x, dims, keep, tol=T_TRANS):
        out = torch.logsumexp(x, dims or list(range(x.dim())), keepdim=keep)
        add_case(name, "logsumexp", [x], out, {"dims": dims, "keepdim": keep}, tol_for(x.dtype, tol)
                 if x.dtype in (f32, f16, bf16) else tol)

    x3 = Gen("logsumexp_x3").uniform([2, 3, 4])
    lse("logsumexp_f32_all", x3, [], False)
    lse("logsumexp_f32_d1_keep", x3, [1], True)
    lse("logsumexp_f32_d0_2", x3, [0, 2], False)
    lse("logsumexp_f32_dm1", x3, [-1], False)
    lse("logsumexp_f32_large", Gen("logsumexp_large").uniform([3, 5], 990, 1010), [1], False)
    lse("logsumexp_f32_special", T([-INF, -INF, -INF, INF, 1.0, -INF, NAN, 0.0, 1.0, INF, INF, 2.0],
                                   shape=[4, 3]), [1], False)
    lse("logsumexp_f32_empty", torch.zeros(0, 3), [0], False)
    lse("logsumexp_i32", Gen("logsumexp_i32").ints([3, 4], -5, 5, i32), [1], False, T_TRANS)
    xh = Gen("logsumexp_f16").uniform([3, 8], dtype=f16)
    add_case("logsumexp_f16_dm1", "logsumexp", [xh],
             ref_upcast(lambda t: torch.logsumexp(t, [-1]), [xh], f16),
             {"dims": [-1], "keepdim": False})


def log1p_cases():
    """log1p, added through the op table."""
    x = Gen("log1p_f32").uniform([4, 6], -0.9, 8)
    add_case("log1p_f32", "log1p", [x], torch.log1p(x), tol=T_TRANS)
    # Up to 1e38: torch 1.13's CPU log1p overflows to inf near 3e38 (the
    # answer is 88.6), which is not a number to hold a device to.
    x = T(SPECIAL + [-1.5, 1e-30, -1e-7, 1e38])
    add_case("log1p_f32_special", "log1p", [x], torch.log1p(x), tol=T_TRANS)
    # Near 0, where log(1 + x) would lose x's low digits: relative error alone.
    x = T([1e-7, -1e-7, 3e-5, -2e-4, 1e-3, -0.01, 0.1, -0.3, 0.49, -0.51, 1e-30, -0.999])
    add_case("log1p_f32_tiny", "log1p", [x], torch.log1p(x), tol={"rtol": 1e-6, "atol": 0.0})
    x = Gen("log1p_bf16").uniform([3, 5], -0.5, 4, dtype=bf16)
    add_case("log1p_bf16", "log1p", [x], ref_upcast(torch.log1p, [x], bf16))
    x = Gen("log1p_i32").ints([6], 0, 100, i32)
    add_case("log1p_i32", "log1p", [x], torch.log1p(x), tol=T_TRANS)


def log2_cases():
    """log2, added through the op table."""
    x = Gen("log2_f32").uniform([4, 6], 0.01, 100)
    add_case("log2_f32", "log2", [x], torch.log2(x), tol=T_TRANS)
    x = T(SPECIAL + [-1e-30, 1e-30, 2.0 ** -149, 3e-45, 1e-40, 3e38])
    add_case("log2_f32_special", "log2", [x], torch.log2(x), tol=T_TRANS)
    # Powers of two have exact logarithms, and libm gives them exactly.
    x = T([2.0 ** k for k in (-126, -100, -10, -3, -1, 0, 1, 2, 5, 10, 64, 127)])
    add_case("log2_f32_pow2", "log2", [x], torch.log2(x), tol={"rtol": 0.0, "atol": 0.0})
    x = Gen("log2_f16").uniform([3, 5], 0.1, 8, dtype=f16)
    add_case("log2_f16", "log2", [x], ref_upcast(torch.log2, [x], f16))
    x = Gen("log2_i64").ints([6], 1, 1000, i64)
    add_case("log2_i64", "log2", [x], torch.log2(x), tol=T_TRANS)


def rounding_cases():
    """floor, ceil, trunc, round, frac, sign and reciprocal: the rows added last
    through the op table."""
    x = T(SPECIAL + [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.7, -3.7, 1e30, -1e30, 8388609.0, 1e-40])
    for name in ("floor", "ceil", "trunc", "round", "frac", "sign"):
        fn = getattr(torch, name)
        add_case(f"{name}_f32_special", name, [x], fn(x), tol=EXACT)
        xb = Gen(f"{name}_bf16").uniform([3, 5], -4, 4, dtype=bf16, decimals=1)
        add_case(f"{name}_bf16", name, [xb], fn(xb), tol=EXACT)
    for name in ("floor", "ceil", "trunc", "round", "sign"):
        xi = Gen(f"{name}_i64").ints([6], -50, 50, i64)
        add_case(f"{name}_i64", name, [xi], getattr(torch, name)(xi), tol=EXACT)
    xi = Gen("sign_i32").ints([7], -3, 4, i32)
    add_case("sign_i32", "sign", [xi], torch.sign(xi), tol=EXACT)
    xb = T([True, False, True], dtype=boolean)
    add_case("sign_bool", "sign", [xb], torch.sign(xb), tol=EXACT)
    x = Gen("reciprocal_f32").uniform([4, 6], 0.1, 10)
    add_case("reciprocal_f32", "reciprocal", [x], torch.reciprocal(x), tol=T_F32)
    x = T(SPECIAL + [1e-30, -3e38, 1e-40])
    add_case("reciprocal_f32_special", "reciprocal", [x], torch.reciprocal(x), tol=T_F32)
    x = Gen("reciprocal_f16").uniform([3, 5], 0.5, 4, dtype=f16)
    add_case("reciprocal_f16", "reciprocal", [x], ref_upcast(torch.reciprocal, [x], f16))
    xi = T([1, 2, -4, 8, 3], dtype=i32)
    add_case("reciprocal_i32", "reciprocal", [xi], torch.reciprocal(xi), tol=T_F32)


def small_int_cases():
    """i8 and i16: promotion (u8 with i8 is i16), wrapping arithmetic, casts in and out
    (float -> integer truncates; integer -> narrower integer wraps), sums widening to i64,
    extrema, scans and the stable sort."""
    g = Gen("small_int")
    a8, b8 = g.ints([3, 4], -128, 128, i8), g.ints([4], -128, 128, i8)
    a16, b16 = g.ints([3, 4], -2**15, 2**15, i16), g.ints([4], -2**15, 2**15, i16)
    u = g.ints([4], 0, 256, u8)
    for name, op, x, y in (("add_i8", "add", a8, b8), ("sub_i8", "sub", a8, b8),
                           ("mul_i8", "mul", a8, b8), ("add_i16", "add", a16, b16),
                           ("mul_i16", "mul", a16, b16), ("add_i8_u8", "add", a8, u),
                           ("sub_u8_i16", "sub", u, b16), ("mul_i8_i16", "mul", a8, b16),
                           ("add_i16_i32", "add", a16, T([1, -2, 3, 40000], i32)),
                           ("maximum_i8", "maximum", a8, b8), ("minimum_i16", "minimum", a16, b16)):
        add_case(name, op, [x, y], getattr(torch, op)(x, y), tol=EXACT)
    a, b = g.uniform([4], -2, 2, dtype=f16), T([-128, 127, 3, -7], i8)
    add_case("add_f16_i8", "add", [a, b], ref_upcast(torch.add, [a, b], f16))
    x8 = T([-128, -1, 0, 1, 127], i8)
    x16 = T([-32768, -300, 0, 255, 32767], i16)
    for op in ("neg", "abs"):
        add_case(f"{op}_i8_limits", op, [x8], getattr(torch, op)(x8), tol=EXACT)
        add_case(f"{op}_i16_limits", op, [x16], getattr(torch, op)(x16), tol=EXACT)
    for name, x, dt in (("cast_f32_i8", T([-100.9, -2.7, -0.5, 0.5, 2.7, 126.9]), i8),
                        ("cast_f32_i16", T([-32000.5, -2.7, 0.5, 2.7, 1000.9, 32766.9]), i16),
                        ("cast_i16_u8", x16, u8), ("cast_i16_i8", x16, i8),
                        ("cast_i8_i16", x8, i16), ("cast_i8_u8", x8, u8),
                        ("cast_u8_i8", T([0, 1, 127, 128, 255], u8), i8),
                        ("cast_i8_f32", x8, f32), ("cast_i16_f16", x16, f16),
                        ("cast_i64_i16", T([70000, -70000, 5, -32769], i64), i16),
                        ("cast_i8_bool", x8, boolean)):
        add_case(name, "cast", [x], x.to(dt), {"dtype": DTYPE_NAMES[dt]}, EXACT)
    for name, x in (("i8", a8), ("i16", a16)):
        add_case(f"sum_{name}_d1", "sum", [x], x.sum(1), {"dims": [1], "keepdim": False}, EXACT)
        add_case(f"sum_{name}_all", "sum", [x], x.sum(), {"dims": [], "keepdim": False}, EXACT)
        add_case(f"max_{name}_d0", "max", [x], x.amax(0), {"dims": [0], "keepdim": False}, EXACT)
        add_case(f"argmax_{name}_d1", "argmax", [x], torch.argmax(x, 1),
                 {"dim": 1, "keepdim": False}, EXACT)
        add_case(f"cumsum_{name}", "cumsum", [x], torch.cumsum(x, 1), {"dim": 1}, EXACT)
        add_case(f"cumprod_{name}", "cumprod", [x], torch.cumprod(x, 0), {"dim": 0}, EXACT)
        for desc in (False, True):
            tag = "desc" if desc else "asc"
            v, i = torch.sort(x, dim=1, descending=desc, stable=True)
            add_case(f"sort_{name}_{tag}_values", "sort", [x], v,
                     {"dim": 1, "descending": desc, "output": "values"}, EXACT)
            add_case(f"sort_{name}_{tag}_indices", "sort", [x], i,
                     {"dim": 1, "descending": desc, "output": "indices"}, EXACT)
    m8, n8 = g.ints([3, 5], -4, 4, i8), g.ints([5, 2], -4, 4, i8)
    add_case("matmul_i8", "matmul", [m8, n8], torch.matmul(m8, n8), tol=EXACT)
    m16, n16 = g.ints([2, 3], -300, 300, i16), g.ints([3, 4], -300, 300, i16)
    add_case("matmul_i16", "matmul", [m16, n16], torch.matmul(m16, n16), tol=EXACT)
