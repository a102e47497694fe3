#!/usr/bin/env bash
# tests/vulkan_coopmat_tiles.sh FERRY_TESTS_BIN — cooperative-matrix tiles (a product's, and
# attention's modules) chosen by measurement (Note [Measured coopmat tiles] in
# runtime/vulkan/vk_kernels_coopmat.cpp), through the kernels' emulation on vulkan:0: a first
# run measures each shape and writes its tile beside the pipeline cache under
# FERRY_CACHE_DIR; a second run reads them and measures nothing.
set -euo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export FERRY_CACHE_DIR=$dir FERRY_VULKAN_COOPMAT=emulate FERRY_VULKAN_COOPMAT_TUNE=1
filter=--gtest_filter=Coopmat.TilesAreMeasuredOncePerShapeAndKept:CoopmatAttention.TilesAreMeasuredOncePerGeometryAndKept
"$bin" "$filter" >"$dir/log1" 2>&1 || { cat "$dir/log1"; echo "FAILED: first run"; exit 1; }
if grep -q "SKIPPED" "$dir/log1"; then cat "$dir/log1"; echo "skipped: no coopmat path here"; exit 0; fi
shopt -s nullglob
tiles=("$dir"/vulkan-*.tiles)
# The product's tile, and the attention passes' modules (forward, DQ, DKV: batches m n k
# b_layout emulated operands attention name; vk_policy.hpp's TileKey).
for want in "4 250 200 40 0 1 0 0 gemm_coopmat_" "2 40 56 64 0 1 0 1 attention_coopmat_d64_" \
  "2 40 56 64 0 1 0 3 attention_dq_coopmat_d64_" "2 56 40 64 0 1 0 4 attention_dkv_coopmat_d64_"; do
  if [[ ${#tiles[@]} -ne 1 ]] || ! grep -q "^$want" "${tiles[0]}"; then
    ls -la "$dir"; cat "${tiles[@]}" 2>/dev/null || true
    echo "FAILED: no measured tile '$want...' written beside the pipeline cache"
    exit 1
  fi
done
FERRY_TEST_TILES_SAVED=1 "$bin" "$filter" >"$dir/log2" 2>&1 ||
  { cat "$dir/log2"; echo "FAILED: second run (the saved tile)"; exit 1; }
echo "ok: $(cat "${tiles[0]}" | tail -n +2)"
