#!/usr/bin/env bash
# tools/demo.sh — installs the system packages (as root, when missing), builds
# the ferry-demo sample (and the backend modules it opens) in build/release and
# runs it. Works from any folder.
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
  "-DFERRY_CUDA_ARCHITECTURES=${FERRY_CUDA_ARCHITECTURES:-75}"

stage "build ferry-demo and the backend modules (-j$JOBS)"
cmake --build "$build" --target ferry-demo -j "$JOBS"

stage "run ferry-demo"
exec "$build/bin/ferry-demo" "$@"
