#!/usr/bin/python3
"""Generate tests/data/pytorch_reference.json: PyTorch reference results for ferry's ops.

Regenerate (from the repository root):

    apt-get install -y python3-torch        # Debian 12: python3-torch 1.13.1+dfsg-4
    /usr/bin/python3 tools/gen_reference.py # writes tests/data/pytorch_reference.json

Use Debian's /usr/bin/python3 (the one python3-torch installs into); a pyenv
`python3` earlier on PATH has no torch. The committed file was made with
python3-torch 1.13.1+dfsg-4 (torch.__version__ == "1.13.0a0") and numpy 1.24.2,
on the CPU. The output is deterministic: every case draws its inputs from its own
torch.Generator seeded with crc32(case name), so adding, removing or reordering
cases leaves the other cases' numbers alone, and two runs write identical bytes.

The file is read by tests/test_pytorch_reference.cpp. Format:

    {"torch_version": str,
     "cases": [{"name": unique str, "op": str,
                "inputs": [{"shape": [...], "dtype": "f32"|"f16"|"bf16"|"i32"|"i64"|"u8"|"bool",
                            "data": [flat row-major values]}],
                "attrs": {...},
                "output": {"shape": [...], "dtype": ..., "data": [...]},
                "tol": {"rtol": r, "atol": a}}]}

Values are JSON numbers; NaN and the infinities are the strings "nan", "inf"
and "-inf"; bool data are JSON true/false. f16/bf16 data are the exact values
of that dtype (written as decimals that read back, through a double, to the same
f32 value). A value passes when |actual - expected| <= atol + rtol * |expected|;
NaN must meet NaN and an infinity the same infinity; integer and bool results
(rtol = atol = 0) must be exact.

f16/bf16 references: PyTorch 1.13's CPU kernels lack many half ops ("exp_vml_cpu
not implemented for 'Half'"), so a case with f16/bf16 inputs is computed the way
PyTorch's CUDA kernels do it: inputs upcast to f32, the op in f32, the result
rounded once to the output dtype (ref_upcast in reference_common.py).

The cases live beside this file: reference_elementwise.py (unary, binary,
comparisons, where, casts, promotion, composite ops) and reference_other.py
(reductions, matmul, softmax, layer_norm, indexing), reference_unary.py (the
transcendentals, activations and element tests of issue 21), reference_binary.py
(its binary, ternary and reduction ops), reference_shape.py (its indexing and
shape ops); reference_common.py holds
the dtypes, tolerances, seeded inputs and the encoding.
"""

import os
import sys

import torch

import reference_elementwise as elementwise
import reference_binary as binary
import reference_other as other
import reference_shape as shape
import reference_select as select
import reference_sort as sort
import reference_unary as unary
from reference_common import CASES, dump
from reference_common import Gen, leaf_case, op_case, tensor_json, with_values, write_case_file  # noqa: F401  (the gen_*_reference.py)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_reference.json")


def main():
    elementwise.unary_cases()
    elementwise.binary_cases()
    elementwise.compare_cases()
    elementwise.where_cases()
    other.reduction_cases()
    other.matmul_cases()
    other.softmax_cases()
    other.layer_norm_cases()
    other.indexing_cases()
    elementwise.cast_cases()
    elementwise.promotion_cases()
    elementwise.composite_cases()
    elementwise.log1p_cases()
    elementwise.log2_cases()
    elementwise.rounding_cases()
    unary.transcendental_cases()
    unary.activation_cases()
    unary.test_cases()
    binary.float_cases()
    binary.bitwise_cases()
    binary.ternary_cases()
    binary.reduction_cases()
    shape.shape_cases()
    sort.sort_cases()
    select.select_cases()
    elementwise.small_int_cases()
    size = dump(OUT_PATH)
    print(f"wrote {len(CASES)} cases, {size} bytes, torch {torch.__version__} -> "
          f"{os.path.normpath(OUT_PATH)}")
    assert size < 400_000, "keep the reference file small"


if __name__ == "__main__":
    sys.exit(main())
