#!/usr/bin/env bash
# tools/demo.sh — installs the system packages (as root, when missing), builds
# ferry, its backend modules and the samples in build/release, and runs
# ferry-demo. Works from any folder.
#
# Environment: FERRY_JOBS (parallel build jobs, default: all cores),
# FERRY_SKIP_DEPS=1 (skip the package check). Arguments go to ferry-demo.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT"

build=$ROOT/build/release

stage "dependencies"
ensure_deps

stage "configure $build (Release)"
# The demo needs neither the tests nor the benchmarks (tools/test.sh turns the
# tests back on in the same folder; ninja then rebuilds only what is missing).
# The CUDA backend (where the toolkit is) for one architecture, as tools/test.sh
# builds it (Note [CUDA in the test command]).
configure "$build" -DCMAKE_BUILD_TYPE=Release -DFERRY_SANITIZE= -DFERRY_BUILD_SAMPLES=ON \
  -DFERRY_BUILD_TESTS=OFF -DFERRY_BUILD_BENCHMARKS=OFF -DFERRY_ENABLE_CUDA=ON \
  "-DFERRY_CUDA_ARCHITECTURES=${FERRY_CUDA_ARCHITECTURES:-75}" "-DCMAKE_CUDA_FLAGS_RELEASE=-O3 -DNDEBUG"
# (CMake's own -O3 for the CUDA backend's host code, where the test command left -O1 in this
# folder's cache: Note [CUDA host code in the test command] in tools/test.sh.)

# Without tests and benchmarks, "all" is libferry, the backend modules and the
# samples: the demo, and the five others it points to (docs/getting-started.md).
stage "build ferry, the backend modules and the samples (-j$JOBS)"
cmake --build "$build" -j "$JOBS"

stage "run ferry-demo"
exec "$build/bin/ferry-demo" "$@"
