"""PyTorch reference cases of the unary rows added for issue 21 (run by
gen_reference.py): the rest of the transcendentals, the activations with and
without parameters, the element tests, nan_to_num and round(decimals)."""

import torch
import torch.nn.functional as F

from reference_common import (
    EXACT, Gen, INF, NAN, SPECIAL, T, T_ACT, T_TRANS, add_case, bf16, boolean, f16, i32, i64,
    ref_upcast, u8)


# op: (function, input range)
TRANSCENDENTAL = {
    "log10": (torch.log10, (0.01, 100)),
    "exp2": (torch.exp2, (-10, 10)),
    "erf": (torch.erf, (-3, 3)),
    "erfc": (torch.erfc, (-3, 9)),
    "erfinv": (torch.erfinv, (-0.999, 0.999)),
    "tan": (torch.tan, (-1.5, 1.5)),
    "asin": (torch.asin, (-1, 1)),
    "acos": (torch.acos, (-1, 1)),
    "atan": (torch.atan, (-20, 20)),
    "sinh": (torch.sinh, (-10, 10)),
    "cosh": (torch.cosh, (-10, 10)),
    "asinh": (torch.asinh, (-50, 50)),
    "acosh": (torch.acosh, (1, 50)),
    "atanh": (torch.atanh, (-0.999, 0.999)),
}

ACTIVATION = {
    "selu": (F.selu, (-5, 5)),
    "hardsigmoid": (F.hardsigmoid, (-5, 5)),
    "hardswish": (F.hardswish, (-5, 5)),
    "mish": (F.mish, (-8, 8)),
    "logsigmoid": (F.logsigmoid, (-20, 20)),
    "relu6": (F.relu6, (-3, 9)),
}


def transcendental_cases():
    edges = SPECIAL + [1e-30, -1e-30, 1e-40, 0.999, -0.999, 2.0, 10.0, 50.0, 89.0, -89.0, 1e30]
    for op, (fn, (lo, hi)) in TRANSCENDENTAL.items():
        x = Gen(f"{op}_f32").uniform([4, 5], lo, hi)
        add_case(f"{op}_f32", op, [x], fn(x), tol=T_TRANS)
        x = T(edges)
        add_case(f"{op}_f32_special", op, [x], fn(x), tol=T_TRANS)
        x = Gen(f"{op}_bf16").uniform([6], lo, hi, dtype=bf16)
        add_case(f"{op}_bf16", op, [x], ref_upcast(fn, [x], bf16))
    # Integers and bool give f32.
    x = Gen("atan_i64").ints([5], -50, 50, i64)
    add_case("atan_i64", "atan", [x], torch.atan(x), tol=T_TRANS)
    x = T([0, 1, 2, 3], i32)
    add_case("exp2_i32", "exp2", [x], torch.exp2(x), tol=T_TRANS)
    x = T([True, False], boolean)
    add_case("erfinv_bool", "erfinv", [x], torch.erfinv(x), tol=T_TRANS)
    # Exact where libm is: powers of ten and two, erfc's far tail relative.
    x = T([1e-3, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 1e4, 1e5, 1e10])
    add_case("log10_f32_pow10", "log10", [x], torch.log10(x), tol=EXACT)
    x = T([-149.0, -126.0, -10.0, -1.0, 0.0, 1.0, 10.0, 127.0, 128.0])
    add_case("exp2_f32_ints", "exp2", [x], torch.exp2(x), tol=EXACT)
    x = T([2.0, 3.0, 4.5, 6.0, 8.0, 9.0, 9.5, 10.0])
    add_case("erfc_f32_tail", "erfc", [x], torch.erfc(x), tol={"rtol": 5e-6, "atol": 0.0})


def activation_cases():
    for op, (fn, (lo, hi)) in ACTIVATION.items():
        x = Gen(f"{op}_f32").uniform([3, 6], lo, hi)
        add_case(f"{op}_f32", op, [x], fn(x), tol=T_ACT)
        x = T(SPECIAL + [-3.0, 6.0, 100.0, -100.0])
        add_case(f"{op}_f32_special", op, [x], fn(x), tol=T_ACT)
        x = Gen(f"{op}_f16").uniform([5], lo, hi, dtype=f16)
        add_case(f"{op}_f16", op, [x], ref_upcast(fn, [x], f16))
    x = Gen("relu6_i64").ints([7], -10, 10, i64)
    add_case("relu6_i64", "relu6", [x], F.relu6(x))
    x = T([0, 3, 6, 7, 200], u8)
    add_case("relu6_u8", "relu6", [x], F.relu6(x))

    # The activations with parameters, at their defaults and others.
    def act(name, op, fn, x, **kw):
        out = ref_upcast(lambda t: fn(t, **kw), [x], x.dtype) if x.dtype in (f16, bf16) \
            else fn(x, **kw)
        add_case(name, op, [x], out, kw, T_ACT if x.is_floating_point() else EXACT)

    xs = T(SPECIAL + [-30.0, 30.0, 15.0, -0.001])
    x = Gen("act_f32").uniform([4, 5], -6, 6)
    for beta, threshold in ((1.0, 20.0), (2.0, 5.0), (0.5, 1.0), (-1.0, 20.0)):
        tag = f"{beta:g}_{threshold:g}".replace("-", "m").replace(".", "p")
        act(f"softplus_f32_{tag}", "softplus", F.softplus, x, beta=beta, threshold=threshold)
    act("softplus_f32_special", "softplus", F.softplus, xs, beta=1.0, threshold=20.0)
    act("softplus_f16", "softplus", F.softplus, Gen("softplus_f16").uniform([6], -15, 15, f16),
        beta=1.0, threshold=20.0)
    for alpha in (1.0, 0.5, 2.0):
        tag = f"{alpha:g}".replace(".", "p")
        act(f"elu_f32_{tag}", "elu", F.elu, x, alpha=alpha)
        act(f"celu_f32_{tag}", "celu", F.celu, x, alpha=alpha)
    act("elu_f32_special", "elu", F.elu, xs, alpha=1.0)
    act("celu_bf16", "celu", F.celu, Gen("celu_bf16").uniform([6], -4, 4, bf16), alpha=1.5)
    for slope in (0.01, 0.2, -0.5):
        tag = f"{slope:g}".replace("-", "m").replace(".", "p")
        act(f"leaky_relu_f32_{tag}", "leaky_relu", F.leaky_relu, x, negative_slope=slope)
    act("leaky_relu_f32_special", "leaky_relu", F.leaky_relu, xs, negative_slope=0.01)
    for lo, hi in ((-1.0, 1.0), (-2.5, 0.5), (0.0, 6.0)):
        tag = f"{lo:g}_{hi:g}".replace("-", "m").replace(".", "p")
        act(f"hardtanh_f32_{tag}", "hardtanh", F.hardtanh, x, min_val=lo, max_val=hi)
    act("hardtanh_f32_special", "hardtanh", F.hardtanh, xs, min_val=-1.0, max_val=1.0)
    xi = Gen("hardtanh_i64").ints([8], -5, 5, i64)
    act("hardtanh_i64_frac", "hardtanh", F.hardtanh, xi, min_val=-1.5, max_val=2.5)
    act("hardtanh_u8", "hardtanh", F.hardtanh, T([0, 1, 5, 7, 255], u8), min_val=0.5, max_val=6.5)


def test_cases():
    """isnan, isinf, isfinite, logical_not, bitwise_not, nan_to_num, round(decimals)."""
    x = T(SPECIAL + [1e-40, 3e38, -3e38])
    for op in ("isnan", "isinf", "isfinite", "logical_not"):
        fn = getattr(torch, op)
        add_case(f"{op}_f32", op, [x], fn(x), tol=EXACT)
        xh = T([NAN, INF, -INF, 0.0, 65504.0, -1.0], f16)
        add_case(f"{op}_f16", op, [xh], fn(xh), tol=EXACT)
        xi = T([0, 1, -1, 7], i32)
        add_case(f"{op}_i32", op, [xi], fn(xi), tol=EXACT)
    xb = T([True, False], boolean)
    add_case("logical_not_bool", "logical_not", [xb], torch.logical_not(xb), tol=EXACT)
    for dt, vals in ((i32, [0, 1, -1, 2147483647, -2147483648, 12345]),
                     (i64, [0, 1, -1, 2**62, -(2**63)]), (u8, [0, 1, 127, 128, 255])):
        xi = T(vals, dt)
        add_case(f"bitwise_not_{str(dt)[6:]}", "bitwise_not", [xi], torch.bitwise_not(xi),
                 tol=EXACT)
    add_case("bitwise_not_bool", "bitwise_not", [xb], torch.bitwise_not(xb), tol=EXACT)

    x = T([NAN, INF, -INF, 0.0, -2.5, 1e30])
    add_case("nan_to_num_f32", "nan_to_num", [x], torch.nan_to_num(x), tol=EXACT)
    add_case("nan_to_num_f32_given", "nan_to_num", [x],
             torch.nan_to_num(x, nan=1.5, posinf=100.0, neginf=-7.0),
             {"nan": 1.5, "posinf": 100.0, "neginf": -7.0}, EXACT)
    for dt in (f16, bf16):
        xh = x.to(dt)
        add_case(f"nan_to_num_{str(dt)[6:]}", "nan_to_num", [xh], torch.nan_to_num(xh), tol=EXACT)
    xi = T([-5, 0, 9], i64)
    add_case("nan_to_num_i64", "nan_to_num", [xi], torch.nan_to_num(xi), tol=EXACT)

    x = T([1.2345, -2.5, 0.125, 0.15, 2.675, -0.0049, 1255.0, -35.0, 1e30, NAN, INF, -0.0])
    for d in (0, 1, 2, 3, -1, -2):
        add_case(f"round_decimals_f32_{d}".replace("-", "m"), "round_decimals", [x],
                 torch.round(x, decimals=d), {"decimals": d}, EXACT)
    xr = Gen("round_decimals_f32").uniform([4, 5], -100, 100, decimals=4)
    add_case("round_decimals_f32_rand", "round_decimals", [xr], torch.round(xr, decimals=2),
             {"decimals": 2}, EXACT)
