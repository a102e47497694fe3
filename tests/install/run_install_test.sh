#!/usr/bin/env bash
# tests/install/run_install_test.sh BUILD_DIR [CMAKE_ARGS...]
#
# Installs the ferry build tree BUILD_DIR into a temporary prefix, checks the
# installed layout, then configures, builds and runs tests/install/ (an app
# that does find_package(ferry)) against that prefix alone. CMAKE_ARGS go to
# the app's configure step (the compiler, sanitizer flags). Exit 0 on success.
# FERRY_KEEP_INSTALL_TEST=1 keeps the temporary folder for inspection.
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 BUILD_DIR [CMAKE_ARGS...]" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-install-test.XXXXXX")
cleanup() {
  if [[ "${FERRY_KEEP_INSTALL_TEST:-0}" == 1 ]]; then
    echo "install test: kept $tmp"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT
prefix=$tmp/prefix
app_build=$tmp/app-build

echo "== install $build_dir -> $prefix"
cmake --install "$build_dir" --prefix "$prefix"

echo "== check the installed layout"
fail=0
need() {
  if ! compgen -G "$prefix/$1" >/dev/null; then
    echo "missing from the install: $1" >&2
    fail=1
  fi
}
need "include/ferry/ferry.hpp"
need "lib*/libferry.so*"
need "lib*/cmake/ferry/ferryConfig.cmake"
need "lib*/cmake/ferry/ferryConfigVersion.cmake"
need "lib*/cmake/ferry/ferryTargets.cmake"
# The package must not point back into the source or build tree.
src_dir=$(cd "$here/../.." && pwd)
if grep -rIl -e "$build_dir" -e "$src_dir/" "$prefix"/lib*/cmake/ferry >/dev/null 2>&1; then
  echo "the installed CMake files name the build or source tree:" >&2
  grep -rIn -e "$build_dir" -e "$src_dir/" "$prefix"/lib*/cmake/ferry >&2 || true
  fail=1
fi
[[ $fail == 0 ]] || exit 1

generator=()
if command -v ninja >/dev/null 2>&1 || [[ "$*" == *CMAKE_MAKE_PROGRAM* ]]; then
  generator=(-G Ninja)
fi

echo "== configure the app against $prefix"
# Only the temporary prefix: the app must not find a ferry elsewhere.
env -u ferry_DIR -u CMAKE_PREFIX_PATH \
  cmake -S "$here" -B "$app_build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
  "$@"

echo "== build the app"
cmake --build "$app_build" -j 2

app=$app_build/app
if command -v ldd >/dev/null 2>&1; then
  libferry=$(ldd "$app" | awk '/libferry\.so/ {print $3}')
  echo "app links $libferry"
  case "$libferry" in
    "$prefix"/*) ;;
    *) echo "the app should load libferry from $prefix, not '$libferry'" >&2; exit 1 ;;
  esac
fi

echo "== run the app"
env -u LD_LIBRARY_PATH "$app"
echo "install test: OK"
