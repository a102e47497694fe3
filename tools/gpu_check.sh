#!/usr/bin/env bash
# tools/gpu_check.sh — the checks that need a real GPU, on a machine that has
# one: the GPU's description, every unit test (ctest), the conformance suite
# on cuda:0 and on each Vulkan GPU, the CUDA unit tests under compute-sanitizer
# (memcheck, racecheck), and the CUDA benchmarks. Each step's log goes to
# OUT_DIR; a summary table is printed last. docs/gpu-results.md records what
# it printed on each GPU it ran on.
#
# Usage: tools/gpu_check.sh [BUILD_DIR] [OUT_DIR] [STEP...]
#   BUILD_DIR  a Release build with the CUDA backend for this GPU's
#              architecture (default build/release), e.g.
#              cmake -S . -B build/gpu -G Ninja -DFERRY_CUDA_ARCHITECTURES=90
#   OUT_DIR    where the logs go (default gpu-check-<date>)
#   STEP       any of: info ctest conformance sanitizer bench distributed
#              (default: all)
# Environment: FERRY_GPU_CHECK_JOBS (parallel tests, default: all cores),
# FERRY_GPU_CHECK_TIMEOUT (seconds per step, default 900).
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT"

build=$(realpath "${1:-build/release}")
out=${2:-gpu-check-$(date +%Y%m%d-%H%M%S)}
shift $(($# < 2 ? $# : 2))
steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(info ctest conformance sanitizer bench distributed)
mkdir -p "$out"
out=$(realpath "$out")
jobs=${FERRY_GPU_CHECK_JOBS:-$(nproc)}
limit=${FERRY_GPU_CHECK_TIMEOUT:-900}
bin=$build/bin
summary=()

# run NAME CMD...: runs CMD with the step's time limit, its output in
# OUT_DIR/NAME.log (and on the console), and records its exit status.
run() {
  local name=$1
  shift
  stage "$name"
  local t0=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  summary+=("$(printf '%-28s exit %3d  %4d s' "$name" "$rc" $((SECONDS - t0)))")
}

# The Vulkan devices that are GPUs (the same cards as cuda:N, for NVIDIA's),
# from ferry-demo's device list.
vulkan_gpus() {
  "$bin/ferry-demo" 2>/dev/null | awk '$1 ~ /^vulkan:[0-9]+$/ && /(discrete|integrated) GPU/ {print $1}'
}

for step in "${steps[@]}"; do
  case "$step" in
    info)
      run gpu_info nvidia-smi
      run devices "$bin/ferry-devices" --verbose
      run demo "$bin/ferry-demo"
      ;;
    ctest)
      # install_package builds an app against an installed ferry: a build-machine check.
      run ctest ctest --test-dir "$build" --output-on-failure -j "$jobs" -E '^install_package$'
      ;;
    conformance)
      run conformance_cuda "$bin/ferry-conformance" --device cuda:0 --json "$out/conformance_cuda.json"
      for v in $(vulkan_gpus); do
        run "conformance_${v/:/_}" env FERRY_VULKAN_VALIDATION=1 "$bin/ferry-conformance" \
          --device "$v" --json "$out/conformance_${v/:/_}.json"
        # The row kernels' subgroup modules (off by default until they have run on a GPU:
        # Note [Subgroup row reductions] in shaders/subgroup.glsl).
        run "conformance_${v/:/_}_subgroups" env FERRY_VULKAN_VALIDATION=1 \
          FERRY_VULKAN_SUBGROUPS=1 "$bin/ferry-conformance" --device "$v" \
          --op '^(sum|mean|var|std|prod|max|min|argmax|argmin|logsumexp|norm|softmax|log_softmax|layer_norm|layer_norm\.grad)$' \
          --json "$out/conformance_${v/:/_}_subgroups.json"
        # matmul's cooperative-matrix path (off by default until it has run on a GPU: Note
        # [Cooperative-matrix GEMM] in runtime/vulkan/vk_kernels_coopmat.cpp); the device says
        # under cooperative_matrix whether it took it.
        run "devices_${v/:/_}_coopmat" env FERRY_VULKAN_COOPMAT=1 "$bin/ferry-devices" --verbose
        run "conformance_${v/:/_}_coopmat" env FERRY_VULKAN_VALIDATION=1 \
          FERRY_VULKAN_COOPMAT=1 "$bin/ferry-conformance" --device "$v" \
          --op '^(matmul|linear|conv1d|conv2d|conv3d|scaled_dot_product_attention)(\.grad)?$' \
          --json "$out/conformance_${v/:/_}_coopmat.json"
        run "tests_${v/:/_}_coopmat" env FERRY_VULKAN_VALIDATION=1 FERRY_VULKAN_COOPMAT=1 \
          "$bin/ferry_tests" --gtest_filter='Coopmat*:Matmul.*:Matvec.*:VulkanConv.*'
        # The transfer queue (off by default until it has run on a GPU: Note [Transfer queue]
        # in runtime/vulkan/vk_recorder.hpp): its tests and the copy-heavy ones, and the whole
        # conformance suite, on the GPU's transfer-only family, validated.
        run "devices_${v/:/_}_transfer_queue" env FERRY_VULKAN_TRANSFER_QUEUE=1 \
          "$bin/ferry-devices" --verbose
        run "tests_${v/:/_}_transfer_queue" env FERRY_VULKAN_VALIDATION=1 \
          FERRY_VULKAN_TRANSFER_QUEUE=1 "$bin/ferry_tests" \
          --gtest_filter='VulkanTransferQueue.*:*Transfer*:*Pinned*:*Threads*:*Profiler*:VulkanDevice.*'
        run "conformance_${v/:/_}_transfer_queue" env FERRY_VULKAN_VALIDATION=1 \
          FERRY_VULKAN_TRANSFER_QUEUE=1 "$bin/ferry-conformance" --device "$v" \
          --json "$out/conformance_${v/:/_}_transfer_queue.json"
      done
      ;;
    sanitizer)
      # memcheck: the tests that run CUDA kernels and copies, the device's own
      # and the device-generic ones (optimizers, training, the planner) on
      # cuda:0. The out-of-memory test is left out: its 256 TiB cudaMalloc is
      # an API error by design, which compute-sanitizer reports as one.
      oom=CudaDevice.OutOfMemoryIsTypedAndTheDeviceStaysUsable
      run sanitizer_memcheck compute-sanitizer --tool memcheck --error-exitcode 1 \
        "$bin/ferry_tests" --gtest_filter="CudaDevice.*:*cuda*:*Cuda*:-$oom"
      # racecheck looks at shared memory, which only the reductions, the row
      # kernels (softmax, log_softmax, layer_norm) and the tiled matmul use:
      # every case of those ops, forward and gradient, and the device tests.
      run sanitizer_racecheck compute-sanitizer --tool racecheck --error-exitcode 1 \
        "$bin/ferry_tests" --gtest_filter="CudaDevice.*:*NnReference*Cuda*:*GradReference.Cuda*:-$oom"
      run sanitizer_racecheck_ops compute-sanitizer --tool racecheck --error-exitcode 1 \
        "$bin/ferry-conformance" --device cuda:0 --no-transfers \
        --op '^(sum|mean|var|max|min|argmax|softmax|log_softmax|layer_norm|matmul)(\.grad)?$'
      ;;
    bench)
      run bench "$bin/ferry-bench" --benchmark_filter='cuda|train_step|vulkan|transfer|ops/'
      # The row kernels again from their subgroup modules, beside the same copy.
      run bench_rows_subgroups env FERRY_VULKAN_SUBGROUPS=1 "$bin/ferry-bench" \
        --benchmark_filter='vulkan/rows'
      # vulkan:0's f16 and f32 matmul on cooperative matrices, beside cuBLAS on the same GPU,
      # and its f16 attention, forward and backward (Note [Attention on cooperative matrices]),
      # beside its composition and cuda:0's.
      run bench_coopmat env FERRY_VULKAN_COOPMAT=1 "$bin/ferry-bench" \
        --benchmark_filter='vulkan/matmul|cuda/cublas|attention/.*/forward(\+backward)? f16'
      # vulkan:0's f32 matmul as bf16 x 3 on the matrix units (allowed by FERRY_ALLOW_TF32=1: Note
      # [f32 products on cooperative matrices]), beside cuBLAS's f32 on the same GPU.
      run bench_coopmat_f32 env FERRY_VULKAN_COOPMAT=1 FERRY_ALLOW_TF32=1 "$bin/ferry-bench" \
        --benchmark_filter='vulkan/matmul_f32|cuda/cublas_f32'
      # Uploads and migrations with the copies on the transfer queue's copy engines.
      run bench_transfer_queue env FERRY_VULKAN_TRANSFER_QUEUE=1 "$bin/ferry-bench" \
        --benchmark_filter='transfer/|vulkan/migrate'
      ;;
    distributed)
      # Two ranks sharing cuda:0 through the mpi group (staged through pinned host memory in
      # chunks), beside MPI_Allreduce on host buffers; and a DDP step on cuda:0. The nccl
      # group's single-rank run is in ctest (DistributedNccl.*); NCCL refuses two ranks on
      # one GPU.
      mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2)
      run allreduce_cuda "${mpirun[@]}" "$bin/ferry-bench-allreduce" --device cuda:0
      run ddp_cuda "${mpirun[@]}" "$bin/ferry-bench-ddp" --device cuda:0
      ;;
    *)
      echo "unknown step '$step' (expected: info ctest conformance sanitizer bench distributed)" >&2
      exit 2
      ;;
  esac
done

stage "summary ($out)"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
! grep -qv 'exit   0' "$out/summary.txt"
