#!/usr/bin/python3
"""Write data/digits/digits.safetensors: the UCI ML hand-written digits (the 1,797 8x8
images, pixels 0..16, and their labels 0..9) that scikit-learn ships as
sklearn/datasets/data/digits.csv.gz, for the ferry-train-cnn sample.

Run (from the repository root); it downloads scikit-learn's wheel from PyPI (no install)
and reads the CSV out of it, or reads a wheel or digits.csv.gz given as the argument:

    python3 tools/gen_digits.py                 # pip download scikit-learn==1.3.2
    python3 tools/gen_digits.py path/to/digits.csv.gz

Tensors: "images" U8 [1797, 8, 8] and "labels" U8 [1797], in the CSV's order (the first
64 columns of each row are the pixels, row-major; the last is the label). The data set's
licence and attribution are in data/digits/LICENSE. Two runs write identical bytes.
"""

import csv
import gzip
import io
import os
import subprocess
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_write  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "data", "digits", "digits.safetensors")
MEMBER = "sklearn/datasets/data/digits.csv.gz"


def csv_gz_bytes(arg):
    if arg and arg.endswith(".csv.gz"):
        with open(arg, "rb") as f:
            return f.read()
    wheel = arg
    if not wheel:
        tmp = tempfile.mkdtemp()
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary",
                        ":all:", "-d", tmp, "scikit-learn==1.3.2"], check=True)
        wheel = os.path.join(tmp, [n for n in os.listdir(tmp) if n.endswith(".whl")][0])
    with zipfile.ZipFile(wheel) as z:
        return z.read(MEMBER)


def main():
    rows = list(csv.reader(io.StringIO(gzip.decompress(
        csv_gz_bytes(sys.argv[1] if len(sys.argv) > 1 else None)).decode())))
    rows = [r for r in rows if r]
    assert len(rows) == 1797 and all(len(r) == 65 for r in rows), len(rows)
    pixels = bytes(int(float(v)) for r in rows for v in r[:64])
    labels = bytes(int(float(r[64])) for r in rows)
    assert max(pixels) <= 16 and sorted(set(labels)) == list(range(10))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    safetensors_write.write(OUT, {"images": ("U8", [1797, 8, 8], pixels),
                                  "labels": ("U8", [1797], labels)},
                            metadata={"source": "UCI ML hand-written digits via scikit-learn "
                                                "1.3.2 sklearn/datasets/data/digits.csv.gz",
                                      "license": "CC BY 4.0"})
    print(f"wrote {len(rows)} images -> {os.path.normpath(OUT)}")


if __name__ == "__main__":
    sys.exit(main())
