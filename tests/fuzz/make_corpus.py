#!/usr/bin/python3
"""Write the seed corpus of fuzz_safetensors: tests/fuzz/corpus/safetensors/.

    /usr/bin/python3 tests/fuzz/make_corpus.py     # from any folder; needs only Python 3

Small valid files that reach every part of the reader (each dtype, metadata,
escapes, empty and 0-d tensors, unknown fields, dtypes ferry does not load)
and near misses that stop at each of its checks. The output is deterministic.
"""

import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors")
SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
         "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8, "C64": 8}


def pack(header, data=b"", pad=True, length=None):
    if isinstance(header, dict):
        header = json.dumps(header, separators=(",", ":"), ensure_ascii=False)
    h = header.encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h) if length is None else length) + h + data


def table(tensors, metadata=None):
    """A header and data for [(name, dtype, shape)], laid out back to back."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for i, (name, dtype, shape) in enumerate(tensors):
        n = SIZES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + n]}
        data += bytes((i * 37 + k) % 256 for k in range(n))
    return header, data


def files():
    one = table([("a", "F32", [2])])
    every = table([("i64", "I64", [2]), ("f64", "F64", [1]), ("f32", "F32", [2, 2]),
                   ("i32", "I32", [3]), ("bf16", "BF16", [2]), ("f16", "F16", [3]),
                   ("u8", "U8", [5]), ("bool", "BOOL", [4]), ("i8", "I8", [3]),
                   ("i16", "I16", [2])], {"format": "pt", "step": "7"})
    shapes = table([("scalar", "F32", []), ("empty", "F32", [0]), ("rows", "BF16", [0, 3]),
                    ("ones", "I64", [1, 1, 1])])
    unsupported = table([("q", "U32", [4]), ("h", "U16", [2]), ("f8", "F8_E4M3", [3]),
                         ("c", "C64", [1])])
    yield "one_f32", pack(*one)
    yield "every_dtype", pack(*every)
    yield "empty", pack({})
    yield "metadata_only", pack({"__metadata__": {"framework": "pt"}})
    yield "shapes", pack(*shapes)
    yield "unsupported_dtypes", pack(*unsupported)
    yield "f4_packed", pack({"p": {"dtype": "F4", "shape": [2, 2], "data_offsets": [0, 2]}},
                            b"\x12\x34")
    yield "bool_bytes", pack({"m": {"dtype": "BOOL", "shape": [4], "data_offsets": [0, 4]}},
                             b"\x00\x01\x02\xff")
    yield "escapes", pack('{ "\\u00e9\\n\\"q\\"\\ud83d\\ude00" : { "shape":[1], "extra":'
                          ' {"n":[1,-2.5e3,true,null]}, "data_offsets":[0,4], "dtype":"F32" },'
                          ' "__metadata__":{"k\\t":"v\\u0001\u2713"}}\n', b"\x00\x00\x80\x3f")
    yield "null_metadata", pack('{"__metadata__":null,"a":{"dtype":"U8","shape":[1],'
                                '"data_offsets":[0,1]}}', b"\x07")
    # Near misses: one check each.
    yield "truncated", pack(*one)[:-1]
    yield "size_mismatch", pack({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}},
                                bytes(8))
    yield "gap", pack({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                       "b": {"dtype": "U8", "shape": [1], "data_offsets": [2, 3]}}, bytes(3))
    yield "overlap", pack({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                           "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}}, bytes(3))
    yield "duplicate_key", pack('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                                '"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', bytes(2))
    yield "metadata_number", pack('{"__metadata__":{"k":1}}')
    yield "header_too_long", pack({}, length=9)
    yield "bad_json", pack('{"a" {"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', bytes(1))
    yield "huge_shape", pack({"a": {"dtype": "F32", "shape": [4294967296, 4294967296],
                                    "data_offsets": [0, 0]}})
    yield "trailing_bytes", pack(*one) + b"\x00"


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, content in files():
        with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
            f.write(content)
    print("wrote", len(os.listdir(OUT)), "files to", OUT)


if __name__ == "__main__":
    main()
