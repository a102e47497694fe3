#!/usr/bin/env bash
# tools/install_deps.sh — installs what building and testing ferry needs on
# Debian 12 (bookworm) or a close relative, with apt-get. Run as root.
# Does nothing (and needs no root) when every package is already installed.
#
# Environment:
#   FERRY_DEPS_DRY_RUN=1   only list what is missing.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config git python3
  # libraries the core, tests and benchmarks link
  libopenblas-dev libopenblas-openmp-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # oneDNN: the CPU backend's convolution kernels (opened at run time; ferry runs without it)
  libdnnl-dev
  # Vulkan backend: headers, loader, volk, the shader compiler and tools
  libvulkan-dev libvulkan-volk-dev glslang-tools glslang-dev spirv-tools
  # a Vulkan device with no GPU (lavapipe) and the validation layers for tests
  mesa-vulkan-drivers vulkan-validationlayers
  # ferry::distributed's mpi backend and its tests under mpirun (Open MPI)
  libopenmpi-dev openmpi-bin
  # the fuzz targets (tests/fuzz): clang and its runtimes (libFuzzer, ASan, UBSan)
  clang libclang-rt-14-dev
)

say() { echo "install_deps: $*"; }

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  say "this script needs a Debian-based system (dpkg and apt-get)." >&2
  say "elsewhere, install the equivalents of: ${packages[*]}" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  if [[ "$status" != installed ]]; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  say "all ${#packages[@]} packages are installed."
  exit 0
fi

say "missing: ${missing[*]}"
if [[ "${FERRY_DEPS_DRY_RUN:-0}" == 1 ]]; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  say "installing packages needs root. Run it as root:" >&2
  say "  sudo bash $0" >&2
  say "or install them yourself: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
say "apt-get update"
apt-get update -y -q
say "apt-get install ${missing[*]}"
apt-get install -y -q --no-install-recommends "${missing[@]}"

# Check again: a package that apt skipped or renamed should fail here, not
# half-way through a build.
still=()
for p in "${missing[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == installed ]] || still+=("$p")
done
if [[ ${#still[@]} -ne 0 ]]; then
  say "still missing after apt-get install: ${still[*]}" >&2
  exit 1
fi
say "done."
