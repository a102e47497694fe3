#!/usr/bin/env bash
# tools/test.sh — installs the system packages (as root, when missing), then
# builds ferry and runs every test twice:
#   release  build/release, Release
#   asan     build/asan, RelWithDebInfo with AddressSanitizer + UBSan
# Exits non-zero on the first failure. Works from any folder.
#
# Usage: tools/test.sh [release] [asan]      (default: both, in that order)
# Environment:
#   FERRY_JOBS=N        parallel build jobs (default: all cores)
#   FERRY_CTEST_JOBS=N  parallel tests (default: 2)
#   FERRY_CTEST_ARGS    extra ctest arguments, e.g. "-R tensor"
#   FERRY_SKIP_DEPS=1   skip the package check
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT"

CTEST_JOBS=${FERRY_CTEST_JOBS:-2}
read -r -a CTEST_EXTRA <<<"${FERRY_CTEST_ARGS:-}"

variants=("$@")
if [[ ${#variants[@]} -eq 0 ]]; then
  variants=(release asan)
fi
for v in "${variants[@]}"; do
  case "$v" in
    release | asan) ;;
    *) echo "unknown variant '$v' (expected: release, asan)" >&2; exit 2 ;;
  esac
done

current_stage=""
started=$SECONDS
on_exit() {
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    printf '\nFAILED at stage: %s (exit %d)\n' "$current_stage" "$rc" >&2
  fi
}
trap on_exit EXIT

run_stage() {
  current_stage=$1
  shift
  stage "$current_stage"
  local t0=$SECONDS
  "$@"
  echo "-- $current_stage: ok ($((SECONDS - t0)) s)"
}

# Options every variant sets explicitly, so that a folder configured earlier
# (by demo.sh, or by hand) cannot silently drop the tests.
common_opts=(-DFERRY_BUILD_TESTS=ON -DFERRY_BUILD_SAMPLES=ON)

run_ctest() {
  local dir=$1
  shift
  # --no-tests=error: a configuration that lost its tests must not pass.
  ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$CTEST_JOBS" \
    "${CTEST_EXTRA[@]}" "$@"
}

run_asan_ctest() {
  local env_vars=(
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  )
  # Known leaks in third-party code (drivers) can be listed here.
  local supp=$ROOT/tools/sanitizers/lsan.supp
  if [[ -f "$supp" ]]; then
    env_vars+=("LSAN_OPTIONS=suppressions=$supp:print_suppressions=0")
  fi
  env "${env_vars[@]}" ctest --test-dir "$ROOT/build/asan" --output-on-failure \
    --no-tests=error -j "$CTEST_JOBS" "${CTEST_EXTRA[@]}"
}

run_stage "dependencies" ensure_deps

for v in "${variants[@]}"; do
  case "$v" in
    release)
      dir=$ROOT/build/release
      run_stage "release: configure $dir" configure "$dir" -DCMAKE_BUILD_TYPE=Release \
        -DFERRY_SANITIZE= -DFERRY_BUILD_BENCHMARKS=ON "${common_opts[@]}"
      run_stage "release: build (-j$JOBS)" cmake --build "$dir" -j "$JOBS"
      run_stage "release: ctest (-j$CTEST_JOBS)" run_ctest "$dir"
      ;;
    asan)
      dir=$ROOT/build/asan
      run_stage "asan: configure $dir" configure "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DFERRY_SANITIZE=address,undefined -DFERRY_BUILD_BENCHMARKS=OFF "${common_opts[@]}"
      run_stage "asan: build (-j$JOBS)" cmake --build "$dir" -j "$JOBS"
      run_stage "asan: ctest (-j$CTEST_JOBS, ASan + UBSan)" run_asan_ctest
      ;;
  esac
done

current_stage="done"
stage "all stages passed (${variants[*]}) in $((SECONDS - started)) s"
