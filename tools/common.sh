# shellcheck shell=bash
# tools/common.sh — shared by demo.sh and test.sh; source it, don't run it.
# Sets ROOT (the repository root, whatever the caller's cwd) and JOBS.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${FERRY_JOBS:-$(nproc 2>/dev/null || echo 2)}
if ! [[ "$JOBS" =~ ^[1-9][0-9]*$ ]]; then
  echo "FERRY_JOBS must be a positive integer, not '$JOBS'" >&2
  exit 2
fi

# A banner per stage, so a long log is easy to scan.
stage() {
  printf '\n==================================================================\n'
  printf '== %s\n' "$*"
  printf '==================================================================\n'
}

# Installs the system packages unless FERRY_SKIP_DEPS=1.
ensure_deps() {
  if [[ "${FERRY_SKIP_DEPS:-0}" == 1 ]]; then
    echo "FERRY_SKIP_DEPS=1: not checking system packages"
    return
  fi
  bash "$ROOT/tools/install_deps.sh"
}

# configure BUILD_DIR CMAKE_ARGS... — configures with Ninja. A folder
# configured earlier with another generator or from another checkout gets a
# fresh cache instead of a CMake error.
configure() {
  local dir=$1
  shift
  local cache=$dir/CMakeCache.txt
  if [[ -f "$cache" ]]; then
    local gen home
    gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$cache")
    home=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$cache")
    if [[ "$gen" != Ninja || "$home" != "$ROOT" ]]; then
      echo "$dir was configured with '$gen' from '$home': starting a fresh cache"
      rm -rf "$cache" "$dir/CMakeFiles"
    fi
  fi
  cmake -S "$ROOT" -B "$dir" -G Ninja "$@"
}
