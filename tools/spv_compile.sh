#!/usr/bin/env bash
# tools/spv_compile.sh — compiles one compute shader to SPIR-V for the Vulkan backend
# (shaders/shaders.cmake runs it for every module): glslangValidator, then spirv-opt when
# passes are given, then spirv-val on the result.
#
# Note [Shader cache]
# The shaders do not depend on the build variant, yet every build folder compiled all ~210 of
# them: some 200 CPU-seconds of tools/test.sh's release, asan and tsan variants each. With
# --cache=DIR (CMake's FERRY_SHADER_CACHE), a module is kept in DIR under a key made of the
# tools' versions, the preprocessed source (glslang -E, so the included files and the -D
# values are in it; its #line directives, which name the build folder's paths, are left out)
# and the flags that are not paths, and another folder compiling the same module copies it.
# Only validated modules are stored. The folder is never pruned: each change of the shaders
# adds a few MiB; delete it at will. tools/slang_compile.sh keeps the Slang modules there too.
#
# Usage: spv_compile.sh --glslang=P --spirv-opt=P --spirv-val=P --out=FILE [--cache=DIR]
#                       [--passes=a,b,...] SRC [glslang -D and -I arguments]
set -euo pipefail

glslang=glslangValidator opt=spirv-opt val=spirv-val out="" cache="" passes=""
while [[ $# -gt 0 && $1 == --* ]]; do
  case "$1" in
    --glslang=*) glslang=${1#*=} ;;
    --spirv-opt=*) opt=${1#*=} ;;
    --spirv-val=*) val=${1#*=} ;;
    --out=*) out=${1#*=} ;;
    --cache=*) cache=${1#*=} ;;
    --passes=*) passes=${1#*=} ;;
    *) echo "spv_compile.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z $out || $# -lt 1 ]]; then
  echo "usage: spv_compile.sh --out=FILE [options] SRC [glslang arguments]" >&2
  exit 2
fi
src=$1
shift
IFS=, read -r -a pass_args <<<"$passes"
pass_args=("${pass_args[@]/#/--}")
tmp=$out.tmp.$$
trap 'rm -f "$tmp" "$tmp.unoptimized"' EXIT

compile() {
  if [[ -n $passes ]]; then
    "$glslang" -V --target-env vulkan1.1 "$@" -o "$tmp.unoptimized" "$src"
    "$opt" --target-env=vulkan1.1 "${pass_args[@]}" "$tmp.unoptimized" -o "$tmp"
  else
    "$glslang" -V --target-env vulkan1.1 "$@" -o "$tmp" "$src"
  fi
  "$val" --target-env vulkan1.1 "$tmp"
}

key=""
if [[ -n $cache ]]; then
  defines=()
  for a in "$@"; do
    if [[ $a == -D* ]]; then defines+=("$a"); fi
  done
  key=$(
    {
      "$glslang" --version 2>&1 | sed -n 1p
      "$opt" --version 2>&1 | sed -n 1p
      printf 'passes %s\n' "$passes"
      printf '%s\n' "${defines[@]}"
      "$glslang" -E "$@" "$src" | grep -v '^#line'
    } | sha256sum | cut -c1-40
  )
fi
# shellcheck source=tools/shader_cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/shader_cache.sh"
cached_compile "$cache" "$key" "$out" "$tmp" compile "$@"
