#!/usr/bin/env bash
# tests/vulkan_pipeline_cache.sh CONFORMANCE_BIN — the Vulkan pipeline cache
# (Note [Pipeline cache]): a run writes it under FERRY_CACHE_DIR, and a later
# run whose cache file is garbage, truncated or empty ignores it and passes,
# leaving a valid cache behind.
set -euo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export FERRY_CACHE_DIR=$dir

run() {
  if ! "$bin" --device vulkan:0 --op '^exp$' --no-transfers >"$dir/log" 2>&1; then
    cat "$dir/log"
    echo "FAILED: conformance run ($1)"
    exit 1
  fi
}

run "first run"
shopt -s nullglob
files=("$dir"/vulkan-*.bin)
if [[ ${#files[@]} -eq 0 || ! -s ${files[0]} ]]; then
  echo "FAILED: no pipeline cache written to $dir"
  exit 1
fi
good=$(mktemp)
cp "${files[0]}" "$good"
for damage in garbage truncated empty flipped; do
  case $damage in
    garbage) head -c 4096 /dev/urandom >"${files[0]}" ;;
    truncated) head -c 40 "$good" >"${files[0]}" ;;
    empty) : >"${files[0]}" ;;
    flipped) cp "$good" "${files[0]}" && printf '\xff' | dd of="${files[0]}" bs=1 seek=20 conv=notrunc status=none ;;
  esac
  run "cache file $damage"
  if ! cmp -s "$good" "${files[0]}" && [[ $(head -c 8 "${files[0]}") != FERRYPC1 ]]; then
    echo "FAILED: the run after a $damage cache file left no valid cache"
    exit 1
  fi
  echo "ok: $damage cache file ignored"
done
rm -f "$good"
