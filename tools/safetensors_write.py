"""A minimal safetensors writer for the reference generators (the `safetensors` package is
not in Debian): an 8-byte little-endian header length, the JSON header (tensors sorted by
name, each {"dtype", "shape", "data_offsets"}, optional "__metadata__"), then the raw
little-endian data, as the format's specification lays it out.
"""

import json
import struct

DTYPES = {"F32": 4, "F64": 8, "I64": 8, "I32": 4, "U8": 1}


def write(path, tensors, metadata=None):
    """tensors: {name: (dtype, shape, bytes)} with dtype one of DTYPES."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        count = 1
        for s in shape:
            count *= s
        assert len(data) == count * DTYPES[dtype], name
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # align the data to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def torch_tensors(state):
    """{name: torch.Tensor} (f32, f64, i64) -> write()'s form."""
    import torch
    names = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}
    return {k: (names[v.dtype], list(v.shape), v.detach().contiguous().numpy().tobytes())
            for k, v in state.items()}
