#!/usr/bin/env bash
# tools/test.sh — installs the system packages (as root, when missing), then
# builds ferry and runs every test twice, with a fuzzing run in between:
#   release  build/release, Release
#   fuzz     build/fuzz: the libFuzzer targets (tests/fuzz, built with clang,
#            ASan + UBSan) run on their seed corpus for a bounded time
#   asan     build/asan, RelWithDebInfo with AddressSanitizer + UBSan
#   tsan     build/tsan: libferry, the Vulkan and testdev modules and the
#            concurrency tests with ThreadSanitizer (Note [Thread sanitizer
#            variant] in tests/CMakeLists.txt)
# Exits non-zero on the first failure. Works from any folder.
#
# Usage: tools/test.sh [release] [fuzz] [asan] [tsan]   (default: all, in that order)
# Environment:
#   FERRY_JOBS=N          parallel build jobs (default: all cores)
#   FERRY_CTEST_JOBS=N    parallel tests (default: 2)
#   FERRY_CTEST_ARGS      extra ctest arguments, e.g. "-R tensor"
#   FERRY_FUZZ_SECONDS=N  how long each fuzz target runs (default: 60)
#   FERRY_SKIP_DEPS=1     skip the package check
#   OMP_WAIT_POLICY       OpenMP's idle threads (default here: passive; Note [OpenMP's idle
#                         threads in the test command])
#   FERRY_CUDA_ARCHITECTURES  GPU generations the CUDA backend is compiled for
#                         (default here: 75-virtual, i.e. PTX that the driver compiles
#                         at load; the build's own default is 75;80;86;89;90)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT"

CTEST_JOBS=${FERRY_CTEST_JOBS:-2}
# Note [OpenMP's idle threads in the test command]
# ctest runs CTEST_JOBS test processes side by side on the cores, and by default each
# process's idle OpenMP threads (the CPU backend's, and OpenBLAS's and oneDNN's, which share
# libgomp's pool: Note [One thread pool]) spin for a while after every parallel region before
# they sleep, on cores the other test needs. ctest -j2 of ferry_tests_shard_0 and _1,
# sample_gpt and sample_train_cnn (Release, 2 cores) took 54.1 and 65.3 s (101 and 125 CPU-s)
# with spinning and 35.0 and 34.7 s (63 CPU-s) with passive waiting; sample_gpt's entry
# 33.6 and 45.6 -> 13.2 and 14.0 s. So the test command has them sleep, unless the caller chose
# otherwise. (Run by itself, as ferry-bench is for its figures, a program keeps libgomp's
# default.)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
read -r -a CTEST_EXTRA <<<"${FERRY_CTEST_ARGS:-}"
FUZZ_SECONDS=${FERRY_FUZZ_SECONDS:-60}
if ! [[ "$FUZZ_SECONDS" =~ ^[1-9][0-9]*$ ]]; then
  echo "FERRY_FUZZ_SECONDS must be a positive integer, not '$FUZZ_SECONDS'" >&2
  exit 2
fi

variants=("$@")
if [[ ${#variants[@]} -eq 0 ]]; then
  variants=(release fuzz asan tsan)
fi
for v in "${variants[@]}"; do
  case "$v" in
    release | fuzz | asan | tsan) ;;
    *) echo "unknown variant '$v' (expected: release, fuzz, asan, tsan)" >&2; exit 2 ;;
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
# The variants share one folder of compiled shaders (Note [Shader cache] in tools/spv_compile.sh).
common_opts=(-DFERRY_BUILD_TESTS=ON -DFERRY_BUILD_SAMPLES=ON
  "-DFERRY_SHADER_CACHE=$ROOT/build/shader-cache")
# Note [CUDA in the test command]
# The CUDA backend is built (where the toolkit is) in the release variant, as
# PTX for one virtual architecture (75-virtual): nvcc compiles every kernel once
# per architecture, and five of them would take most of the test command's time
# on a small machine; the machine code (ptxas) nearly doubled the time of one,
# and a test machine without a GPU never runs it. PTX for compute_75 runs on
# every newer GPU, compiled by the driver at load (once: the driver caches it);
# on a GPU machine, set FERRY_CUDA_ARCHITECTURES to its own (90 for Hopper).
# The asan variant leaves the module out: device code cannot run under ASan,
# and the module's host logic is compiled into ferry_tests
# (tests/test_cuda_host.cpp), which that variant runs.
cuda_arch=${FERRY_CUDA_ARCHITECTURES:-75-virtual}
# Note [CUDA host code in the test command]
# nvcc compiles a .cu file twice: its device code (cicc, at the device's own optimisation level,
# which -O does not change) and its host code (g++, at -O), the kernels' launch stubs and the
# host side of every template instantiated for them. The host half was the larger:
# cuda_kernels_elementwise.cu took 89 s in cicc and 120 s in g++ at -O3, 61 s at -O1 (nvcc
# --time, on this machine). The test command compiles the host code at -O1, as the tests' own
# code (Note [Test code optimization] in tests/CMakeLists.txt): the kernels are the same PTX,
# and launch code gains little from -O3. A build of ferry's own keeps CMake's -O3.
release_opts=(-DCMAKE_BUILD_TYPE=Release -DFERRY_SANITIZE= -DFERRY_BUILD_BENCHMARKS=ON
  -DFERRY_ENABLE_CUDA=ON "-DFERRY_CUDA_ARCHITECTURES=$cuda_arch"
  "-DCMAKE_CUDA_FLAGS_RELEASE=-O1 -DNDEBUG" "${common_opts[@]}")

run_ctest() {
  local dir=$1
  shift
  # --no-tests=error: a configuration that lost its tests must not pass.
  ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$CTEST_JOBS" \
    "${CTEST_EXTRA[@]}" "$@"
}

# The GoogleTest cases that skipped (GTEST_SKIP: no CUDA driver, say), from the shards' logs
# (Note [Test shards] in tests/CMakeLists.txt), grouped by reason: a shard that passes with
# skips inside is reported passed by ctest, and the reasons belong in the log.
report_skips() {
  local log=$1/Testing/Temporary/LastTest.log
  [[ -f "$log" ]] || return 0
  awk '/^\[  SKIPPED \] [^ ]+ \([0-9]+ ms\)$/ {
         total++; reason = (prev == "" ? "(no reason given)" : prev)
         if (!(reason in n)) order[++kinds] = reason
         if (++n[reason] <= 3) names[reason] = names[reason] (n[reason] > 1 ? ", " : "") $4
         next }
       /^\[/ { next }
       { prev = $0 }
       END {
         if (!total) exit
         printf "-- %d GoogleTest cases skipped:\n", total
         for (k = 1; k <= kinds; k++) {
           r = order[k]
           printf "   %d: %s\n      e.g. %s%s\n", n[r], r, names[r], (n[r] > 3 ? ", ..." : "")
         }
       }' "$log"
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

# The fuzz targets are a CMake project of their own (clang, while ferry builds
# with g++); a cache from another checkout or generator starts afresh, as in
# configure().
configure_fuzz() {
  local dir=$1 lib=$2
  local cache=$dir/CMakeCache.txt
  if [[ -f "$cache" ]]; then
    local gen home
    gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$cache")
    home=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$cache")
    if [[ "$gen" != Ninja || "$home" != "$ROOT/tests/fuzz" ]]; then
      echo "$dir was configured with '$gen' from '$home': starting a fresh cache"
      rm -rf "$cache" "$dir/CMakeFiles"
    fi
  fi
  cmake -S "$ROOT/tests/fuzz" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ -DFERRY_LIBRARY="$lib"
}

# Runs the target on a scratch copy of its seed corpus (the committed seeds
# stay as they are) for FUZZ_SECONDS. A crash, a sanitizer report, a leak, a
# timeout or a failed check in the target ends libFuzzer with a non-zero
# status and leaves the input under $dir/artifacts/.
run_fuzz() {
  local dir=$1
  rm -rf "$dir/corpus" "$dir/artifacts"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$dir/fuzz_safetensors" -max_total_time="$FUZZ_SECONDS" -max_len=4096 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -dict="$ROOT/tests/fuzz/safetensors.dict" \
    -artifact_prefix="$dir/artifacts/" "$dir/corpus" "$ROOT/tests/fuzz/corpus/safetensors"
}

run_stage "dependencies" ensure_deps

for v in "${variants[@]}"; do
  case "$v" in
    release)
      dir=$ROOT/build/release
      run_stage "release: configure $dir" configure "$dir" "${release_opts[@]}"
      run_stage "release: build (-j$JOBS)" cmake --build "$dir" -j "$JOBS"
      run_stage "release: ctest (-j$CTEST_JOBS)" run_ctest "$dir"
      report_skips "$dir"
      ;;
    fuzz)
      # libferry as the release variant builds it (a no-op after that variant).
      rel=$ROOT/build/release
      run_stage "fuzz: configure $rel" configure "$rel" "${release_opts[@]}"
      run_stage "fuzz: build libferry (-j$JOBS)" cmake --build "$rel" -j "$JOBS" --target ferry
      dir=$ROOT/build/fuzz
      run_stage "fuzz: configure $dir (clang)" configure_fuzz "$dir" "$rel/lib/libferry.so"
      run_stage "fuzz: build (-j$JOBS)" cmake --build "$dir" -j "$JOBS"
      run_stage "fuzz: fuzz_safetensors for $FUZZ_SECONDS s (ASan + UBSan)" run_fuzz "$dir"
      ;;
    asan)
      dir=$ROOT/build/asan
      # -O1 -g1 (line tables): ASan's recommended optimisation level, and half the compile
      # time of -O2 -g (cpu_kernels_elementwise.cpp, when it was smaller: 76 s against 153 s;
      # it is compiled at -O0 now, Note [Elementwise kernels under the sanitizers] in
      # runtime/CMakeLists.txt), while reports keep function names, files and lines (Note
      # [Sanitizer variant] in tests/CMakeLists.txt, which also says why the samples are left
      # to the release variant).
      run_stage "asan: configure $dir" configure "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
        -DFERRY_SANITIZE=address,undefined -DFERRY_BUILD_BENCHMARKS=OFF -DFERRY_ENABLE_CUDA=OFF \
        "${common_opts[@]}" -DFERRY_BUILD_SAMPLES=OFF
      run_stage "asan: build (-j$JOBS)" cmake --build "$dir" -j "$JOBS"
      run_stage "asan: ctest (-j$CTEST_JOBS, ASan + UBSan)" run_asan_ctest
      report_skips "$dir"
      ;;
    tsan)
      dir=$ROOT/build/tsan
      run_stage "tsan: configure $dir" configure "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
        -DFERRY_SANITIZE=thread -DFERRY_BUILD_BENCHMARKS=OFF -DFERRY_ENABLE_CUDA=OFF \
        "${common_opts[@]}"
      run_stage "tsan: build the concurrency tests (-j$JOBS)" cmake --build "$dir" -j "$JOBS" \
        --target ferry_thread_tests
      run_stage "tsan: ctest (ThreadSanitizer)" ctest --test-dir "$dir" --output-on-failure \
        --no-tests=error -L threads "${CTEST_EXTRA[@]}"
      ;;
  esac
done

current_stage="done"
stage "all stages passed (${variants[*]}) in $((SECONDS - started)) s"
