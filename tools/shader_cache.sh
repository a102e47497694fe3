#!/usr/bin/env bash
# tools/shader_cache.sh — sourced by tools/spv_compile.sh and tools/slang_compile.sh: the lookup
# and store of Note [Shader cache] (in spv_compile.sh), in one place.
#
# cached_compile CACHE KEY OUT TMP COMMAND...: where CACHE is empty, runs COMMAND (which writes
# TMP) and moves TMP to OUT. Otherwise copies CACHE/KEY.spv to OUT where it is there, else runs
# COMMAND and keeps TMP under KEY first. A failing COMMAND stores nothing (the callers run
# under set -e), so only modules that passed their checks are kept; the store is a rename, so
# two builds writing the same key leave one whole file.
cached_compile() {
  local cache=$1 key=$2 out=$3 tmp=$4
  shift 4
  if [[ -z $cache ]]; then
    "$@"
  elif [[ -f $cache/$key.spv ]]; then
    cp "$cache/$key.spv" "$tmp"
  else
    "$@"
    mkdir -p "$cache"
    cp "$tmp" "$cache/$key.spv.$$" && mv -f "$cache/$key.spv.$$" "$cache/$key.spv"
  fi
  mv -f "$tmp" "$out"
}
