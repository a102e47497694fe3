#!/usr/bin/env python3
"""tools/fetch_slang.py DEST -- Slang's compiler library and headers for the build.

The cooperative-matrix GEMM (shaders/gemm_coopmat.slang, shaders/coopmat.cmake) is compiled by
Slang, which Debian does not package; PyPI's slangpy wheel ships the compiler as a library.
This takes that one pinned, hash-checked wheel and unpacks what the build needs:
  DEST/lib/      libslang-compiler.so.0.2026.12 (+ libslang-compiler.so -> it), and the
                 GLSL module and glslang libraries it loads (spirv-val lives in the latter)
  DEST/include/  slang.h and the headers it includes
DEST/STAMP is written last, so an interrupted run is redone and a finished one is not.

FERRY_SLANG_WHEEL=/path/to.whl takes a local copy of the wheel instead of downloading it (the
hash is checked all the same). Standard library only. On failure: exit 1 and one line on stderr
saying why (shaders/coopmat.cmake shows it).
"""
import hashlib
import os
import platform
import shutil
import sys
import urllib.request
import zipfile

WHEEL = "slangpy-0.43.1-cp311-cp311-manylinux_2_34_x86_64.whl"
URL = ("https://files.pythonhosted.org/packages/0b/89/"
       "917567a889417c87842cea379091cb46b7f4f4000e9fec1b9d25d251c4cf/" + WHEEL)
SHA256 = "965dbbd1d907c90e17027945780146a67c66baf766f3d0b8af3f52ea2c4a8eb9"
LIBS = ["libslang-compiler.so.0.2026.12", "libslang-glsl-module-2026.12.so",
        "libslang-glslang-2026.12.so"]
HEADERS = ["slang.h", "slang-deprecated.h", "slang-image-format-defs.h", "slang-user-config.h"]
STAMP = "slangpy-0.43.1.stamp"  # names the version: a new pin fetches again


class Failure(Exception):
    pass


def check_platform():
    # The wheel's libraries are x86-64 Linux ones built against glibc 2.34 (manylinux_2_34).
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise Failure(f"Slang's wheel is for x86_64 Linux only, not {platform.system()} "
                      f"{platform.machine()}")
    libc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
    if not libc or not libc.startswith("glibc "):
        raise Failure("Slang's wheel needs glibc >= 2.34, and this system has no glibc")
    version = tuple(int(x) for x in libc.split()[1].split(".")[:2])
    if version < (2, 34):
        raise Failure(f"Slang's wheel needs glibc >= 2.34, this system has {libc}")


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download(dest):
    """Downloads the wheel into dest (a .part file renamed once complete); returns its path."""
    path = os.path.join(dest, WHEEL)
    part = path + ".part"
    try:
        with urllib.request.urlopen(URL, timeout=60) as r, open(part, "wb") as f:
            shutil.copyfileobj(r, f, 1 << 20)
    except OSError as e:  # URLError, HTTPError, timeouts and disk errors are all OSErrors
        if os.path.exists(part):
            os.remove(part)
        raise Failure(f"cannot download {URL}: {e}") from e
    os.replace(part, path)
    return path


def extract(wheel, dest):
    with zipfile.ZipFile(wheel) as z:
        wanted = [(f"slangpy/{n}", os.path.join(dest, "lib", n)) for n in LIBS]
        wanted += [(f"slangpy/include/{n}", os.path.join(dest, "include", n)) for n in HEADERS]
        for member, out in wanted:
            try:
                src = z.open(member)
            except KeyError as e:
                raise Failure(f"{WHEEL} has no {member}") from e
            with src, open(out + ".tmp", "wb") as f:
                shutil.copyfileobj(src, f, 1 << 20)
            os.replace(out + ".tmp", out)
    link = os.path.join(dest, "lib", "libslang-compiler.so")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(LIBS[0], link)


def fetch(dest):
    if os.path.exists(os.path.join(dest, STAMP)):
        return
    check_platform()
    try:
        os.makedirs(os.path.join(dest, "lib"), exist_ok=True)
        os.makedirs(os.path.join(dest, "include"), exist_ok=True)
    except OSError as e:
        raise Failure(f"cannot create {dest}: {e.strerror}") from e
    local = os.environ.get("FERRY_SLANG_WHEEL")
    wheel = local or download(dest)
    try:
        if not os.path.isfile(wheel):
            raise Failure(f"FERRY_SLANG_WHEEL={wheel}: no such file")
        digest = sha256_of(wheel)
        if digest != SHA256:
            raise Failure(f"{wheel} has sha256 {digest}, expected {SHA256} ({WHEEL})")
        try:
            extract(wheel, dest)
        except (OSError, zipfile.BadZipFile) as e:
            raise Failure(f"cannot unpack {wheel} into {dest}: {e}") from e
    finally:
        if not local and os.path.exists(wheel):
            os.remove(wheel)  # 92 MB; the stamp is what later runs look at
    with open(os.path.join(dest, STAMP), "w") as f:
        f.write(f"{WHEEL} {SHA256}\n")


def main():
    if len(sys.argv) != 2:
        print("usage: fetch_slang.py DEST", file=sys.stderr)
        return 2
    try:
        fetch(os.path.abspath(sys.argv[1]))
    except Failure as e:
        print(f"fetch_slang.py: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"fetch_slang.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
