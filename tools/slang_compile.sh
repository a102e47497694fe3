#!/usr/bin/env bash
# tools/slang_compile.sh — compiles one Slang entry point to SPIR-V with ferry_slangc
# (shaders/coopmat.cmake runs it for every cooperative-matrix module), through the shader
# cache (Note [Shader cache] in tools/spv_compile.sh, tools/shader_cache.sh) when --cache is
# given.
#
# The key is made of the files that decide the output — the Slang source, the files it
# includes, the driver's source and the fetched compiler's stamp, whose name is its version
# (the caller names all but the source with --key-file) — and the driver's arguments other
# than the output path. Slang validates each
# module it writes (SLANG_RUN_SPIRV_VALIDATION) and the driver fails a module without the
# capabilities it was asked to require, so only checked modules are stored.
#
# Usage: slang_compile.sh --slangc=P --out=FILE [--cache=DIR] [--key-file=F]...
#                         SRC ENTRY [ferry_slangc arguments]
set -euo pipefail

slangc="" out="" cache=""
key_files=()
while [[ $# -gt 0 && $1 == --* ]]; do
  case "$1" in
    --slangc=*) slangc=${1#*=} ;;
    --out=*) out=${1#*=} ;;
    --cache=*) cache=${1#*=} ;;
    --key-file=*) key_files+=("${1#*=}") ;;
    *) break ;;  # ferry_slangc's own options come after SRC and ENTRY
  esac
  shift
done
if [[ -z $slangc || -z $out || $# -lt 2 ]]; then
  echo "usage: slang_compile.sh --slangc=P --out=FILE [--cache=DIR] [--key-file=F]... SRC ENTRY [args]" >&2
  exit 2
fi
src=$1 entry=$2
shift 2
tmp=$out.tmp.$$
trap 'rm -f "$tmp"' EXIT

compile() { SLANG_RUN_SPIRV_VALIDATION=1 "$slangc" "$src" "$entry" "$tmp" "$@"; }

key=""
if [[ -n $cache ]]; then
  key=$(
    {
      printf 'slang %s\n' "$entry"
      printf '%s\n' "$@"
      for f in "$src" "${key_files[@]}"; do
        printf '%s %s\n' "${f##*/}" "$(sha256sum < "$f")"
      done
    } | sha256sum | cut -c1-40
  )
fi
# shellcheck source=tools/shader_cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/shader_cache.sh"
cached_compile "$cache" "$key" "$out" "$tmp" compile "$@"
