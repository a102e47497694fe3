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
#   STEP       any of: info ctest conformance switches sanitizer bench bench-switches
#              distributed (default: all). `switches` checks the Vulkan paths that are off by
#              default until a GPU has run them (cooperative matrices, subgroup row kernels,
#              the transfer queue); `bench-switches` measures each beside the default path.
# Environment: FERRY_GPU_CHECK_JOBS (parallel tests, default: all cores),
# FERRY_GPU_CHECK_TIMEOUT (seconds per run, default 900), FERRY_GPU_CHECK_PARALLEL=1 (the
# correctness steps start their runs side by side, each under the time limit, and wait for
# them at the step's end: a short lease of the device tool holds them all; benchmarks always
# run one at a time).
#
# A lease of the device tool (15 minutes of device time, the start included) holds about this,
# from a build made here and packed by tools/gpu_bundle.sh into an ignored folder that travels:
#   FERRY_GPU_CHECK_PARALLEL=1 FERRY_GPU_CHECK_TIMEOUT=150 \
#     tools/gpu_check.sh build/gpu /tmp/check info switches conformance bench-switches
# Run from an unpacked bundle (a .gpu-deps folder in the repository root), the script loads the
# bundle's libraries, finds NVIDIA's Vulkan driver where the device tool's machines keep it, and
# cuDNN and NCCL in the machine's pip wheels (nvidia-cudnn, nvidia-nccl).
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT" || exit

build=$(realpath "${1:-build/release}")
out=${2:-gpu-check-$(date +%Y%m%d-%H%M%S)}
shift $(($# < 2 ? $# : 2))
steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(info ctest conformance switches sanitizer bench bench-switches distributed)
mkdir -p "$out"
out=$(realpath "$out")
jobs=${FERRY_GPU_CHECK_JOBS:-$(nproc)}
limit=${FERRY_GPU_CHECK_TIMEOUT:-900}
parallel=${FERRY_GPU_CHECK_PARALLEL:-0}
bin=$build/bin
: >"$out/summary.txt"

if [[ -d $ROOT/.gpu-deps ]]; then
  export LD_LIBRARY_PATH=$ROOT/.gpu-deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export VK_LAYER_PATH=$ROOT/.gpu-deps FERRY_BACKEND_PATH=$build/lib
  icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  [[ -f $icd && -z ${VK_DRIVER_FILES:-} ]] && export VK_DRIVER_FILES=$icd
  for m in cudnn nccl; do  # after the system's paths: a toolkit's own copy wins
    d=$(python3 -c "import nvidia.$m as m; print(list(m.__path__)[0])" 2>/dev/null) &&
      LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d/lib
  done
fi

# run NAME CMD...: runs CMD with the time limit, its output in OUT_DIR/NAME.log (and on the
# console), and records its exit status. In a correctness step with FERRY_GPU_CHECK_PARALLEL=1
# it starts CMD in the background, its output in the log alone (the step's end waits).
run() {
  local name=$1
  shift
  if [[ $parallel == 1 && ${in_check:-0} == 1 ]]; then
    (
      t0=$SECONDS
      timeout "$limit" "$@" >"$out/$name.log" 2>&1
      record "$name" $? $((SECONDS - t0))
    ) &
    return
  fi
  stage "$name"
  local t0=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.log"
  record "$name" "${PIPESTATUS[0]}" $((SECONDS - t0))
}
record() { printf '%-34s exit %3d  %4d s\n' "$1" "$2" "$3" >>"$out/summary.txt"; }

# The Vulkan devices that are GPUs (the same cards as cuda:N, for NVIDIA's),
# from ferry-demo's device list.
vulkan_gpus() {
  "$bin/ferry-demo" 2>/dev/null | awk '$1 ~ /^vulkan:[0-9]+$/ && /(discrete|integrated) GPU/ {print $1}'
}


# Each correctness step runs with in_check=1 (side by side under FERRY_GPU_CHECK_PARALLEL=1).
check_step() {
  in_check=1
  "$@"
  wait
  in_check=0
}

conformance() {
  run conformance_cuda "$bin/ferry-conformance" --device cuda:0 --json "$out/conformance_cuda.json"
  for v in $(vulkan_gpus); do
    # The whole suite in four runs by dtype (side by side in a parallel step).
    for d in f32 f16,bf16 f64 i8,i16,i32,i64,u8,bool; do
      local n="conformance_${v/:/_}_${d%%,*}"
      run "$n" env FERRY_VULKAN_VALIDATION=1 "$bin/ferry-conformance" --device "$v" --dtype "$d" \
        --json "$out/$n.json"
    done
  done
}

# The Vulkan paths that stay off by default until they have run on a GPU (docs/vulkan.md, "Not
# done yet"): each device's description with the path asked for (it says whether the device
# took it), its conformance cases and its tests, with validation.
switches() {
  local rows='^(sum|mean|var|std|prod|max|min|argmax|argmin|logsumexp|norm|softmax|log_softmax|layer_norm|layer_norm\.grad)$'
  local products='^(matmul|linear|conv1d|conv2d|conv3d|conv_transpose1d|conv_transpose2d|scaled_dot_product_attention)(\.grad)?$'
  for v in $(vulkan_gpus); do
    local V=(env FERRY_VULKAN_VALIDATION=1)
    run "devices_${v/:/_}_switches" env FERRY_VULKAN_COOPMAT=1 FERRY_VULKAN_SUBGROUPS=1 \
      FERRY_VULKAN_TRANSFER_QUEUE=1 "$bin/ferry-devices" --verbose
    # The row kernels' subgroup modules (Note [Subgroup row reductions] in shaders/subgroup.glsl).
    run "conformance_${v/:/_}_subgroups" "${V[@]}" FERRY_VULKAN_SUBGROUPS=1 \
      "$bin/ferry-conformance" --device "$v" --op "$rows" --json "$out/conformance_${v/:/_}_subgroups.json"
    run "tests_${v/:/_}_subgroups" "${V[@]}" FERRY_VULKAN_SUBGROUPS=1 "$bin/ferry_tests" \
      --gtest_filter='RowReductions.*'
    # Matmul, convolutions and attention on cooperative matrices (Note [Cooperative-matrix GEMM]
    # in runtime/vulkan/vk_kernels_coopmat.cpp), in the dtypes they take; f32 products as
    # bf16 x 3 (Note [f32 products on cooperative matrices]); once more without the validation
    # layer, whose 1.3.239 predates VK_KHR_cooperative_matrix.
    run "conformance_${v/:/_}_coopmat" "${V[@]}" FERRY_VULKAN_COOPMAT=1 "$bin/ferry-conformance" \
      --device "$v" --op "$products" --dtype f16,bf16 --json "$out/conformance_${v/:/_}_coopmat.json"
    run "conformance_${v/:/_}_coopmat_novalidation" env FERRY_VULKAN_COOPMAT=1 \
      "$bin/ferry-conformance" --device "$v" --op "$products" --dtype f16,bf16
    run "conformance_${v/:/_}_coopmat_f32" "${V[@]}" FERRY_VULKAN_COOPMAT=1 FERRY_ALLOW_TF32=1 \
      "$bin/ferry-conformance" --device "$v" --op '^(matmul|linear)(\.grad)?$' --dtype f32
    run "tests_${v/:/_}_coopmat" "${V[@]}" FERRY_VULKAN_COOPMAT=1 "$bin/ferry_tests" \
      --gtest_filter='Coopmat*:Matmul.*:Matvec.*:VulkanConv.*:Attention*'
    # The transfer queue (Note [Transfer queue] in runtime/vulkan/vk_recorder.hpp): its tests and
    # the copy-heavy ones, and every op's f32 cases with their uploads and downloads on it.
    run "tests_${v/:/_}_transfer_queue" "${V[@]}" FERRY_VULKAN_TRANSFER_QUEUE=1 "$bin/ferry_tests" \
      --gtest_filter='VulkanTransferQueue.*:*Transfer*:*Pinned*:*Threads*:*Profiler*:VulkanDevice.*'
    run "conformance_${v/:/_}_transfer_queue" "${V[@]}" FERRY_VULKAN_TRANSFER_QUEUE=1 \
      "$bin/ferry-conformance" --device "$v" --dtype f32 \
      --json "$out/conformance_${v/:/_}_transfer_queue.json"
  done
}

sanitizer() {
  # memcheck: the tests that run CUDA kernels and copies, the device's own and the
  # device-generic ones (optimizers, training, the planner) on cuda:0. The out-of-memory test is
  # left out: its 256 TiB cudaMalloc is an API error by design, which compute-sanitizer reports.
  local oom=CudaDevice.OutOfMemoryIsTypedAndTheDeviceStaysUsable
  run sanitizer_memcheck compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$bin/ferry_tests" --gtest_filter="CudaDevice.*:*cuda*:*Cuda*:-$oom"
  # racecheck looks at shared memory, which only the reductions, the row kernels (softmax,
  # log_softmax, layer_norm) and the tiled matmul use: every case of those ops, forward and
  # gradient, and the device tests.
  run sanitizer_racecheck compute-sanitizer --tool racecheck --error-exitcode 1 \
    "$bin/ferry_tests" --gtest_filter="CudaDevice.*:*NnReference*Cuda*:*GradReference.Cuda*:-$oom"
  run sanitizer_racecheck_ops compute-sanitizer --tool racecheck --error-exitcode 1 \
    "$bin/ferry-conformance" --device cuda:0 --no-transfers \
    --op '^(sum|mean|var|max|min|argmax|softmax|log_softmax|layer_norm|matmul)(\.grad)?$'
}

# bench NAME [VAR=VALUE...] FILTER: ferry-bench's rows matching FILTER, with the environment.
bench() {
  local name=$1
  shift
  run "$name" env "${@:1:$#-1}" "$bin/ferry-bench" --benchmark_color=false \
    --benchmark_filter="${*: -1}"
}

bench_switches() {
  # vulkan:0's f16 matmul, convolutions and attention on cooperative matrices, beside cuBLAS and
  # cuda:0 on the same GPU; its f32 matmul as bf16 x 3 (allowed by FERRY_ALLOW_TF32=1).
  bench bench_coopmat FERRY_VULKAN_COOPMAT=1 \
    'vulkan/matmul_f16/.*vulkan|cuda/(cublas|matmul)_f16|attention/.*/forward(\+backward)? f16/ferry (vulkan|cuda)'
  bench bench_coopmat_f32 FERRY_VULKAN_COOPMAT=1 FERRY_ALLOW_TF32=1 \
    'vulkan/matmul_f32/.*vulkan|cuda/(cublas|matmul)_f32'
  bench bench_coopmat_conv FERRY_VULKAN_COOPMAT=1 'conv/.* f16/ferry vulkan'
  bench bench_conv_f16 'conv/.* f16/ferry (vulkan|cuda)'
  # The row kernels from their subgroup modules, then from the default ones, each beside a copy.
  bench bench_rows_subgroups FERRY_VULKAN_SUBGROUPS=1 'vulkan/rows'
  bench bench_rows 'vulkan/rows'
  # Uploads and migrations with the copies on the transfer queue's copy engines, then without.
  bench bench_transfer_queue FERRY_VULKAN_TRANSFER_QUEUE=1 'transfer/|vulkan/migrate'
  bench bench_transfer 'transfer/|vulkan/migrate|cuda/(migrate|pinned)'
  # Matrix-vector products on each device, beside a copy of the weight there.
  bench bench_matvec 'matvec/.*(vulkan|cuda|copy)'
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
    conformance) check_step conformance ;;
    switches) check_step switches ;;
    sanitizer) check_step sanitizer ;;
    bench) bench bench 'cuda|train_step|vulkan|transfer|ops/' ;;
    bench-switches) bench_switches ;;
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
      echo "unknown step '$step' (expected: info ctest conformance switches sanitizer bench" \
        "bench-switches distributed)" >&2
      exit 2
      ;;
  esac
done

stage "summary ($out)"
cat "$out/summary.txt"
for f in "$out"/conformance_*.log; do
  [[ -f $f ]] && echo "$(basename "$f" .log): $(grep -E '^[0-9]+ passed' "$f" | tail -1)"
done
! grep -qv 'exit   0' "$out/summary.txt"
