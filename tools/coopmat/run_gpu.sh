#!/bin/bash
# Runs coopmat_bench on the GPU machine (NVIDIA driver + Vulkan ICD). Extra args go to coopmat_bench.
# Non-invasive: if no libvulkan.so.1 is installed, the repo's .gl/*.deb (libvulkan1, libglvnd) are
# extracted under /tmp/coopmat_gl and put on LD_LIBRARY_PATH; nothing is installed system-wide.
# The log is also written to $OUT/coopmat_bench.log when $OUT is set.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
LOG="${OUT:-/tmp}/coopmat_bench.log"
S=$SECONDS
log() { echo "== $* (t=$((SECONDS - S)) s)"; }

log "host: $(uname -srm)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader

# Driver libs in NVIDIA containers usually live in /usr/local/nvidia/lib64.
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done

# Vulkan loader (and libGLdispatch for the NVIDIA ICD).
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 ' && [ -z "${COOPMAT_VK_LIB:-}" ]; then
  if ls "$REPO"/.gl/*.deb >/dev/null 2>&1; then
    log "no system libvulkan.so.1: extracting $REPO/.gl/*.deb to /tmp/coopmat_gl"
    mkdir -p /tmp/coopmat_gl
    for f in "$REPO"/.gl/*.deb; do dpkg -x "$f" /tmp/coopmat_gl; done
    export LD_LIBRARY_PATH="/tmp/coopmat_gl/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  else
    log "WARNING: no libvulkan.so.1 found and no $REPO/.gl/*.deb to extract"
  fi
fi

# Vulkan ICD manifest.
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -z "${VK_ICD_FILENAMES:-}" ]; then
  for j in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json \
           /usr/share/vulkan/icd.d/nvidia_icd.json /usr/local/share/vulkan/icd.d/nvidia_icd.json; do
    if [ -f "$j" ]; then export VK_DRIVER_FILES="$j"; break; fi
  done
  HAVE_GLX_NV=0
  ldconfig -p 2>/dev/null | grep -q 'libGLX_nvidia.so.0 ' && HAVE_GLX_NV=1
  LLP="${LD_LIBRARY_PATH:-}"
  for d in ${LLP//:/ }; do [ -e "$d/libGLX_nvidia.so.0" ] && HAVE_GLX_NV=1; done
  if [ -z "${VK_DRIVER_FILES:-}" ] && [ $HAVE_GLX_NV = 1 ]; then
    log "no nvidia_icd.json found: writing /tmp/coopmat_nvidia_icd.json (library libGLX_nvidia.so.0)"
    printf '{ "file_format_version": "1.0.0", "ICD": { "library_path": "libGLX_nvidia.so.0", "api_version": "1.3.0" } }\n' \
      > /tmp/coopmat_nvidia_icd.json
    export VK_DRIVER_FILES=/tmp/coopmat_nvidia_icd.json
  fi
fi
[ -f "${VK_DRIVER_FILES:-/nonexistent}" ] && { echo "ICD manifest $VK_DRIVER_FILES:"; cat "$VK_DRIVER_FILES"; }
export VK_LOADER_DEBUG="${VK_LOADER_DEBUG:-error,warn}"
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"

log "coopmat_bench $*"
timeout -k 10 240 "$HERE/coopmat_bench" "$@" 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
log "coopmat_bench rc=$rc (0 = ok, 1 = failure, 4 = watchdog, 124/137 = killed by timeout); log: $LOG"
exit $rc
