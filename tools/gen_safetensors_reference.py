#!/usr/bin/python3
"""Make and check the PyTorch interop files of ferry's safetensors tests (tests/data/safetensors/).

Setup (Debian 12): PyTorch is Debian's python3-torch 1.13; the `safetensors`
package is not packaged by Debian, so it goes into a virtual environment that
sees the system's torch:

    apt-get install -y python3-torch
    /usr/bin/python3 -m venv --system-site-packages /tmp/stvenv
    /tmp/stvenv/bin/pip install safetensors==0.4.5

Run (from any folder):

    /tmp/stvenv/bin/python tools/gen_safetensors_reference.py                # write, then verify
    /tmp/stvenv/bin/python tools/gen_safetensors_reference.py --verify-only  # verify only

1. PyTorch -> ferry. Writes pytorch_dtypes.safetensors and pytorch_shapes.safetensors
   with safetensors.torch.save_file, and pytorch_expected.json with the exact
   values, dtypes and shapes of their tensors and their metadata. Read by
   SafetensorsPyTorch.LoadsFilesPyTorchWrote in tests/test_safetensors.cpp.
2. ferry -> PyTorch. Loads ferry_written.safetensors, which ferry's writer made
   (FERRY_REGENERATE=1 ./bin/ferry_tests --gtest_filter=SafetensorsPyTorch.FerryWritten*
   in a build folder writes it and its sidecar ferry_written.json), with
   safetensors.torch.load_file, and checks every name, dtype, shape, value and
   the metadata against the sidecar. Then it saves the loaded tensors again
   with save_file and checks that PyTorch's file has the same header (compared
   as JSON: the reference writer's metadata key order is a hash map's) and
   byte-identical data: ferry lays a file out as the reference writer does.
   Any mismatch is printed and the script exits with status 1. In CI (no torch),
   SafetensorsPyTorch.FerryWrittenFileIsUnchanged checks that ferry still writes
   exactly the committed bytes, so a writer change fails until this is re-run.

Sidecar JSON: {"files": {file: {"metadata": {...}, "tensors": {name: {"dtype":
"f32"|"f16"|"bf16"|"f64"|"i32"|"i64"|"u8"|"bool", "shape": [...], "data": [flat
row-major values]}}}}} (ferry_written.json holds one file's {"metadata", "tensors"}).
Floats are JSON numbers, exact (f16/bf16 values are exact as doubles); NaN and
the infinities are the strings "nan", "inf", "-inf"; bools are true/false.

Determinism: every value is written out below (no random numbers), and each
file's metadata has one key, since the reference writer emits "__metadata__"
from a Rust HashMap whose order changes from run to run. Two runs write
identical bytes. The committed files were made with python3-torch
1.13.1+dfsg-4 (torch.__version__ "1.13.0a0") and safetensors 0.4.5.
"""

import json
import math
import os
import struct
import sys
import tempfile

import torch

try:
    import safetensors
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
except ImportError:
    sys.exit("the 'safetensors' package is missing; see this script's docstring for the venv setup")

DATA_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                         "data", "safetensors"))

DTYPE_NAMES = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8", torch.bool: "bool",
}
NAN, INF = float("nan"), float("inf")
f32, f16, bf16, f64 = torch.float32, torch.float16, torch.bfloat16, torch.float64
i32, i64, u8 = torch.int32, torch.int64, torch.uint8


def pytorch_files():
    """The tensors and metadata of each file PyTorch writes."""
    dtypes = {
        "f32": torch.tensor([[0.0, -0.0, 1.5, NAN], [INF, -INF, 1e-45, 3.4e38]], dtype=f32),
        "f16": torch.tensor([0.0, -2.0, 65504.0, 6.1035156e-05, INF, NAN, 0.1], dtype=f16),
        "bf16": torch.tensor([[1.0, -3e38], [0.0078125, 0.1]], dtype=bf16),
        "f64": torch.tensor([0.1, -1e308, 5e-324, -0.0, 1.0 / 3.0], dtype=f64),
        "i32": torch.tensor([-2**31, -1, 0, 7, 2**31 - 1], dtype=i32),
        "i64": torch.tensor([[-2**63, 1], [2**63 - 1, -5]], dtype=i64),
        "u8": torch.tensor([[0, 51, 102], [153, 204, 255]], dtype=u8),
        "bool": torch.tensor([[True, False, True]]),
    }
    shapes = {
        "scalar_f32": torch.tensor(2.5),
        "scalar_i64": torch.tensor(-7),
        "empty_f32": torch.zeros(0),
        "empty_bf16": torch.zeros(0, 3, dtype=bf16),
        "empty_i32": torch.zeros(2, 0, 4, dtype=i32),
        "ones_f16": torch.ones(1, 1, 1, 1, dtype=f16),
        "cube_f32": torch.arange(24, dtype=f32).reshape(2, 3, 4),
        "transposed_f64": torch.arange(6, dtype=f64).reshape(2, 3).t().contiguous(),
        "mask_bool": torch.tensor([[[True], [False]], [[False], [True]], [[True], [True]]]),
        "wide_u8": torch.arange(200, dtype=u8).reshape(10, 20),
        "name.with/odd \u2713 \"chars\"": torch.tensor([3, -2, 1], dtype=i64),
    }
    return {
        "pytorch_dtypes.safetensors": (dtypes, {"format": "pt"}),
        "pytorch_shapes.safetensors": (shapes, {"note": "shapes \u2713 \"quoted\"\n\ttab"}),
    }


def json_value(v):
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return v


def tensor_json(t):
    return {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape),
            "data": [json_value(v) for v in t.flatten().tolist()]}


def same_value(a, b):
    """Exact equality that tells NaN and the sign of zero apart."""
    if isinstance(a, str) or isinstance(b, str):  # "nan", "inf", "-inf"
        return a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if a == b and a == 0 and isinstance(a, float) and isinstance(b, float):
        return math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b and type(a) is type(b)


def generate():
    os.makedirs(DATA_DIR, exist_ok=True)
    expected = {"torch_version": torch.__version__, "safetensors_version": safetensors.__version__,
                "files": {}}
    for file, (tensors, metadata) in pytorch_files().items():
        save_file(tensors, os.path.join(DATA_DIR, file), metadata=metadata)
        expected["files"][file] = {"metadata": metadata,
                                   "tensors": {k: tensor_json(t) for k, t in tensors.items()}}
        print("wrote", os.path.join(DATA_DIR, file))
    with open(os.path.join(DATA_DIR, "pytorch_expected.json"), "w") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote", os.path.join(DATA_DIR, "pytorch_expected.json"))


def split_file(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def verify_ferry_written():
    path = os.path.join(DATA_DIR, "ferry_written.safetensors")
    with open(os.path.join(DATA_DIR, "ferry_written.json")) as f:
        spec = json.load(f)
    errors = []
    loaded = load_file(path)
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata() or {}
    if metadata != spec["metadata"]:
        errors.append(f"metadata: PyTorch read {metadata!r}, ferry wrote {spec['metadata']!r}")
    if set(loaded) != set(spec["tensors"]):
        errors.append(f"names: PyTorch read {sorted(loaded)}, ferry wrote {sorted(spec['tensors'])}")
    for name, want in spec["tensors"].items():
        if name not in loaded:
            continue
        got = tensor_json(loaded[name])
        if got["dtype"] != want["dtype"] or got["shape"] != want["shape"]:
            errors.append(f"{name}: PyTorch read {got['dtype']} {got['shape']}, "
                          f"ferry wrote {want['dtype']} {want['shape']}")
            continue
        for i, (g, w) in enumerate(zip(got["data"], want["data"])):
            if not same_value(g, w):
                errors.append(f"{name}[{i}] (flat): PyTorch read {g!r}, ferry wrote {w!r}")
    # The reference writer's layout for the same tensors: same header, same bytes.
    with tempfile.TemporaryDirectory() as tmp:
        again = os.path.join(tmp, "again.safetensors")
        save_file(loaded, again, metadata=spec["metadata"])
        ferry_header, ferry_data = split_file(path)
        torch_header, torch_data = split_file(again)
        if ferry_header != torch_header:
            errors.append(f"header: ferry wrote {ferry_header}, PyTorch writes {torch_header}")
        if ferry_data != torch_data:
            errors.append("data section: ferry's bytes differ from PyTorch's for the same tensors")
    for e in errors:
        print("MISMATCH", e)
    if errors:
        return False
    print(f"ok: {path} loads in PyTorch {torch.__version__} with safetensors "
          f"{safetensors.__version__}: {len(loaded)} tensors, values, dtypes, shapes, metadata; "
          f"its layout is the reference writer's")
    return True


def main():
    args = sys.argv[1:]
    if args not in ([], ["--verify-only"]):
        sys.exit(f"usage: {sys.argv[0]} [--verify-only]")
    if not args:
        generate()
    sys.exit(0 if verify_ferry_written() else 1)


if __name__ == "__main__":
    main()
