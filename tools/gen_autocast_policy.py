#!/usr/bin/python3
"""Generate tests/data/pytorch_autocast_policy.json: PyTorch's autocast policy, op by op, as
its source states it (tests/test_autocast.cpp holds the autocast column of ops/ops.table to it,
Note [Autocast] in include/ferry/autocast.hpp).

PyTorch's CUDA (and XPU) autocast registers its op lists from macros in
aten/src/ATen/autocast_mode.h: AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32,
AT_FORALL_FP32_SET_OPT_DTYPE, AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE (norm, cast to f32)
and AT_FORALL_PROMOTE; aten/src/ATen/autocast_mode.cpp bans binary_cross_entropy. The lists
are C++ in PyTorch's source and are not exposed by the Python package (Debian's torch 1.13 on
the CPU applies its own, older CPU list), so this script reads the two files of a PyTorch
checkout:

    /usr/bin/python3 tools/gen_autocast_policy.py PYTORCH_SRC [COMMIT]

The committed file was made from pytorch/pytorch at the commit it names.

Format: {"source", "commit", "policy": {"<aten op>": "lower" | "f32" | "promote" |
"banned"}}: fp32_set_opt_dtype and fp32_append_dtype are "f32" (the op computes and returns
f32), overloads are folded into their op.
"""

import json
import os
import re
import sys

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_autocast_policy.json")
LISTS = {
    "AT_FORALL_LOWER_PRECISION_FP": "lower",
    "AT_FORALL_FP32": "f32",
    "AT_FORALL_FP32_SET_OPT_DTYPE": "f32",
    "AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE": "f32",
    "AT_FORALL_PROMOTE": "promote",
}


def macro_bodies(text):
    """{macro name: its body} for every `#define NAME(_)` spanning backslash-continued lines."""
    out = {}
    for m in re.finditer(r"#define (AT_FORALL_\w+)\(_\)((?:[^\n]*\\\n)*[^\n]*)", text):
        out[m.group(1)] = m.group(2)
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    src = sys.argv[1]
    commit = sys.argv[2] if len(sys.argv) > 2 else "unknown"
    header = open(os.path.join(src, "aten/src/ATen/autocast_mode.h")).read()
    cpp = open(os.path.join(src, "aten/src/ATen/autocast_mode.cpp")).read()
    bodies = macro_bodies(header)
    policy = {}
    for macro, kind in LISTS.items():
        body = bodies[macro]
        names = re.findall(r"_\(\s*ADD_NS\((\w+)\)", body) or re.findall(r"_\(\s*(\w+)", body)
        assert names, macro
        for name in names:
            assert policy.get(name, kind) == kind, (name, policy[name], kind)
            policy[name] = kind
    for name in re.findall(r'"aten::(\w+)"\),\s*TORCH_FN\(\(&at::autocast::\w+_banned\)\)', cpp):
        policy[name] = "banned"
    assert policy.get("binary_cross_entropy") == "banned"
    data = {"source": "pytorch/pytorch aten/src/ATen/autocast_mode.h and autocast_mode.cpp "
                      "(the CUDA policy)",
            "commit": commit, "policy": dict(sorted(policy.items()))}
    with open(OUT_PATH, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    print(f"wrote {len(policy)} ops -> {os.path.normpath(OUT_PATH)}")


if __name__ == "__main__":
    sys.exit(main())
