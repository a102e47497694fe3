#!/usr/bin/env bash
# tools/gpu_bundle.sh — packs a build of ferry, with the libraries it loads that a GPU machine
# may lack (OpenBLAS, fmt, Google Benchmark, the Vulkan loader, glvnd's dispatcher, the
# Khronos validation layer), into one compressed archive, for running tools/gpu_check.sh or
# single checks on a machine that has a GPU and its driver but not Debian's packages.
#
# Usage: tools/gpu_bundle.sh BUILD_DIR OUT.tar.xz [BINARY...]
#   BINARY  names under BUILD_DIR/bin (default: ferry-conformance ferry-bench ferry-devices
#           ferry-demo ferry_tests)
# The archive holds BUILD_DIR/bin/<binaries>, BUILD_DIR/lib/*.so* and the tests' plugins
# (BUILD_DIR/test_plugins) at their paths relative
# to the repository, and .gpu-deps/ with the libraries and the validation layer's manifest.
# On the GPU machine, from the repository root:
#   tar xJf OUT.tar.xz
#   export LD_LIBRARY_PATH=$PWD/.gpu-deps:$LD_LIBRARY_PATH VK_LAYER_PATH=$PWD/.gpu-deps
#   export FERRY_BACKEND_PATH=$PWD/BUILD_DIR/lib
# (tests that read the repository's data files find them where the build put them: link the
# checkout to the build's source path if it differs.)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT"

[[ $# -ge 2 ]] || { echo "usage: $0 BUILD_DIR OUT.tar.xz [BINARY...]" >&2; exit 2; }
build=${1%/}
out=$2
shift 2
bins=("$@")
[[ ${#bins[@]} -gt 0 ]] || bins=(ferry-conformance ferry-bench ferry-devices ferry-demo ferry_tests)

stagedir=$(mktemp -d)
trap 'rm -rf "$stagedir"' EXIT
deps=$stagedir/.gpu-deps
mkdir -p "$deps"

files=()
for b in "${bins[@]}"; do
  [[ -x $build/bin/$b ]] || { echo "$build/bin/$b is not built" >&2; exit 1; }
  files+=("$build/bin/$b")
done
for l in "$build"/lib/*.so "$build"/lib/*.so.* "$build"/test_plugins/*.so; do [[ -e $l ]] && files+=("$l"); done

# The shared libraries these load, except the C and C++ runtimes (every Linux has them) and
# the CUDA toolkit's and driver's own (the GPU machine has its own, matching its driver).
skip='^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux-x86-64|linux-vdso|libcuda|libcudart|libcublas|libcublasLt|libnvrtc|libnvrtc-builtins|libcudnn.*|libnccl)\.so'
for f in "${files[@]}"; do
  ldd "$f" | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  [[ $name =~ $skip ]] && continue
  case $lib in "$ROOT"/*) continue ;; esac  # ferry's own, packed above
  cp -L "$lib" "$deps/$name"
done
# Loaded with dlopen, so ldd does not list them.
for name in libvulkan.so.1 libGLdispatch.so.0 libVkLayer_khronos_validation.so; do
  # (awk reads to the end: an early exit would end ldconfig by SIGPIPE, failing under pipefail)
  lib=$(ldconfig -p | awk -v n="$name" '$1 == n && !found {print $NF; found = 1}')
  [[ -n $lib ]] && cp -L "$lib" "$deps/$name"
done
manifest=/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json
[[ -f $manifest ]] && cp "$manifest" "$deps/"

tar -C "$ROOT" -cf "$stagedir/ferry.tar" "${files[@]#"$ROOT"/}"
tar -C "$stagedir" -rf "$stagedir/ferry.tar" .gpu-deps
xz -T0 -6 -c "$stagedir/ferry.tar" >"$out"
echo "$out: $(du -h "$out" | cut -f1) ($(du -h "$stagedir/ferry.tar" | cut -f1) unpacked)"
