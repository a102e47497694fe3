// runtime/vulkan/vk_kernels.hpp — what a Vulkan kernel file sees: binding
// tensors as storage buffers and recording a dispatch of an embedded shader.
//
// A kernel (vk_kernels_*.cpp) turns an OpCall into one or more dispatches:
//   Binding x = dev.bind(call.inputs[0], Access::read);
//   Binding y = dev.bind(call.outputs[0], Access::write);
//   abi::MyParams p{...; x.element_offset; y.element_offset; ...};   // push constants
//   abi::MySpec spec{.WG = 256, ...};                                // spec constants
//   dev.dispatch({"myshader", spec.values(), {y, x}, &p, sizeof p, {groups, 1, 1}});
// The device batches dispatches into command buffers, places the barriers the
// bindings' ranges call for (Note [Barrier placement]) and keeps every buffer
// alive until the GPU is done with it. What a kernel shares with its shader
// (push constants, spec constants, codes) is declared once, in the shader's
// interface file shaders/abi/<name>.h (Note [Shader interfaces]); the
// conventions every shader follows are in shaders/common.glsl.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "abi/abi.h"
#include "ferry/backend.hpp"
#include "vulkan/barrier_tracker.hpp"
#include "vulkan/vk_coopmat_shaders.hpp"
#include "vulkan/vk_policy.hpp"

namespace ferry::vulkan {

class VulkanDevice;

// The code the shaders give a dtype (abi::DT_F32 ...).
std::uint32_t dtype_code(DType dt);

// A buffer range bound to one descriptor binding.
struct Binding {
  const Buffer* buffer = nullptr;  // a VulkanBuffer of the dispatching device
  std::uint64_t offset = 0;        // bytes from the buffer's start (aligned for a descriptor)
  std::uint64_t size = 0;          // bytes, at least 4
  Access access = Access::read;
  std::uint32_t element_offset = 0;  // the tensor's first element, counted from `offset`
};

struct DispatchDesc {
  std::string_view shader;          // "elementwise" is shaders/elementwise.comp
  std::vector<std::uint32_t> spec;  // constant_id 0 = workgroup size x, then the shader's own
  std::vector<Binding> bindings;    // binding i of set 0; exactly the shader's binding count
  const void* push = nullptr;       // push constants, at most kMaxPushBytes
  std::uint32_t push_size = 0;
  std::array<std::uint32_t, 3> groups{1, 1, 1};
  // The op, for a shader whose OP constant picks it: where the build made a module of that op
  // alone (Note [Per-op shader modules] in vk_pipelines.cpp), the pipeline is made from it.
  std::uint32_t op = kAnyOp;
  // An f64 tensor is bound: the op's f64 module runs it (Note [f64 on Vulkan]).
  bool f64 = false;
  // Nonzero: the pipeline runs in subgroups of exactly this size, all full (a kernel written
  // for one subgroup size: Note [Cooperative-matrix GEMM] in vk_kernels_coopmat.cpp).
  std::uint32_t subgroup_size = 0;
  static constexpr std::uint32_t kAnyOp = ~0u;
};

// Whether the build made an f64 module of op `op` (OpId's value): where the device has
// shaderFloat64, the op computes f64 (Note [f64 on Vulkan] in vk_pipelines.cpp).
bool has_f64_module(std::uint32_t op);

using abi::kMaxPushBytes;  // push-constant bytes: the limit every device guarantees
inline constexpr std::size_t kMaxBindings = 8;  // storage buffers one dispatch binds

// Limits a kernel chooses tile and workgroup sizes by.
struct KernelLimits {
  std::uint32_t subgroup_size = 32;
  std::uint32_t shared_memory = 16384;  // bytes per workgroup
  std::uint32_t max_workgroup_invocations = 128;
  std::uint32_t max_groups_x = 65535;          // per dispatch, each dim
  std::uint64_t max_storage_range = 1u << 27;  // bytes one binding may span
  std::uint64_t storage_alignment = 256;       // bind() aligns a view's start down to this
  // The row kernels' geometry (Note [Row kernel geometry]).
  std::uint32_t row_elements_per_lane = 1;
  std::uint64_t row_target_threads = 1 << 17;
  // The attention kernels' narrowest head-dim chunk (Note [Attention head chunks] in
  // vk_policy.hpp): 1 on GPUs, 64 on CPU-type devices.
  std::uint32_t attention_min_head_chunk = 1;
  // Loop iterations one invocation may run, all its loops together; 0: no limit (Note [Loop
  // budget]).
  std::uint64_t loop_budget = 0;
};

// Note [Loop budget]
// Mesa's llvmpipe, lavapipe's compiler, guards against shaders that never end by counting the
// iterations of every loop of an invocation in one counter and leaving every loop once it
// reaches 65,535 (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS, Mesa 22.3 as Debian 12 ships it),
// silently: the invocation goes on with what it has. Found in the fused attention, whose
// thread per query row walks every key: with head dim 64 the outputs were right up to 840
// keys and wrong from 850 (the first 853 keys' contribution, then nothing), a matmul with
// K = 2^22 summed a quarter of its products. GPUs have no such limit. So a kernel whose
// invocation could run longer than KernelLimits::loop_budget (65,535 on llvmpipe, 0 = none
// elsewhere) must cut its work so that it does not, or refuse the call with an UnsupportedError
// that says why: attention (vk_kernels_attention.cpp), matmul's GEMM and matrix-vector kernel,
// convolution, the sorted scatter, pooling, resampling and layer_norm do (docs/vulkan.md has
// what each gave wrong before). Loops the compiler unrolls do not count, but which it unrolls
// is the driver's choice, so the estimates count every loop. loop_trips_per_invocation below
// gives a kernel the trips of its long loop one dispatch may take. Kernels not yet checked
// against it: docs/vulkan.md ("Not done yet").

// How many trips of an invocation's long loop one dispatch may run within the device's loop
// budget (Note [Loop budget]), each trip counting `per_trip` iterations (its inner loops'
// included) besides `fixed` for the rest of the invocation: `trips` where the device has no
// budget or all of them fit, 0 where not even one does (the caller then cuts elsewhere or
// raises UnsupportedError).
inline std::uint64_t loop_trips_per_invocation(const KernelLimits& lim, std::uint64_t trips,
                                               std::uint64_t per_trip, std::uint64_t fixed = 0) {
  if (lim.loop_budget == 0) return trips;
  if (fixed >= lim.loop_budget) return 0;
  return std::min(trips, (lim.loop_budget - fixed) / std::max<std::uint64_t>(per_trip, 1));
}

// The UnsupportedError of a call that no cut of its work brings within the device's loop
// budget, in one wording: "<op>: on <device>, whose compiler ends a shader's loops after <budget>
// iterations (Note [Loop budget] ...), <what>".
[[noreturn]] void throw_past_loop_budget(const VulkanDevice& dev, std::string_view op,
                                         std::string_view what);

// The largest power of two up to `preferred` that the device allows in one workgroup (shaders
// with shared arrays sized for `preferred` slots need a power of two for their trees).
inline std::uint32_t workgroup_size(const KernelLimits& lim, std::uint32_t preferred = 256) {
  std::uint32_t wg = preferred;
  while (wg > lim.max_workgroup_invocations) wg /= 2;
  return wg;
}

// The smallest power of two >= n, at most cap.
inline std::uint32_t pow2_at_least(std::uint64_t n, std::uint32_t cap) {
  std::uint32_t p = 1;
  while (p < n && p < cap) p *= 2;
  return p;
}

// Note [Row kernel geometry]
// reduce, softmax and layer_norm give each row LANES threads of a workgroup, which fold
// strided shares of it and then combine (Note [Subgroup row reductions] in
// shaders/subgroup.glsl), and cut rows into pieces, each reduced apart and merged by a second
// pass, when rows x lanes threads would leave the device idle. A GPU wants threads: a lane per
// element up to the workgroup (PyTorch's row kernels choose alike) and 2^17 threads in
// flight. A CPU-type device (lavapipe) runs a workgroup on one core as SIMD vectors of
// subgroup_size lanes: a lane's loop over its elements is cheap, each level of combining
// costs a shuffle or a barrier, and the cores are few. So there a lane takes at least 1024
// elements and 4096 threads are enough. Measured on lavapipe (2 cores, ferry-bench
// vulkan/rows_*, f32, GB/s of the least traffic; a copy of the same tensor on vulkan:0 ran at
// 1.3 to 2.1): rows of 32, 1 lane instead of 32: sum 0.05 -> 2.01, softmax 0.11 -> 0.90,
// layer_norm 0.05 -> 1.35; rows of 4096, 4 lanes instead of 256 and no pieces: sum 0.47 ->
// 2.31, softmax 0.43 -> 0.66, layer_norm 0.43 -> 0.92 (docs/vulkan.md has the table).
inline std::uint32_t row_lanes(const KernelLimits& lim, std::uint64_t n, std::uint32_t wg) {
  const std::uint64_t per = lim.row_elements_per_lane;
  return pow2_at_least((n + per - 1) / per, wg);
}

// Pieces to cut each of `rows` rows of n elements, `lanes` threads each, into (1: none), at
// most `cap`: enough for the device's threads, none shorter than 64 elements a lane.
inline std::uint64_t row_splits(const KernelLimits& lim, std::uint64_t rows, std::uint32_t lanes,
                                std::uint64_t n, std::uint64_t cap) {
  constexpr std::uint64_t kMinPerThread = 64, kMaxSplits = 1024;
  const std::uint64_t threads = rows * lanes;
  if (threads >= lim.row_target_threads || n < 2 * lanes * kMinPerThread) return 1;
  return std::min({(lim.row_target_threads + threads - 1) / threads, n / (lanes * kMinPerThread),
                   kMaxSplits, cap});
}

// The grid of a kernel over `planes` planes of `area` elements each (batch_norm's y or dx,
// max pooling's outputs or dx: a sample's channel a plane): workgroup (x, y) takes a piece of
// plane y, or, where a plane is smaller than a workgroup, the planes are one range over x. A
// thread takes `row_elements_per_lane` elements at least (Note [Row kernel geometry]): on
// lavapipe a workgroup a plane of ResNet-18's first stage ran batch_norm's y about six times
// as fast as 49 workgroups a plane.
// `n` workgroups along one dim of a grid, at least 1 and at most the device's limit (the
// kernels that loop over the rest).
inline std::uint32_t group_count(const KernelLimits& lim, std::uint64_t n) {
  return std::uint32_t(std::clamp<std::uint64_t>(n, 1, lim.max_groups_x));
}
// `cost`: the loop iterations one element takes (a pooling window's taps, every loop counted):
// where the device has a loop budget (Note [Loop budget]), a thread takes no more elements
// than fit in it.
inline std::array<std::uint32_t, 3> plane_grid(const KernelLimits& lim, std::uint64_t planes,
                                               std::uint64_t area, std::uint32_t wg,
                                               std::uint64_t cost = 1) {
  std::uint64_t lane = lim.row_elements_per_lane;
  if (lim.loop_budget != 0)
    lane = std::clamp<std::uint64_t>(lim.loop_budget / (2 * (cost + 1)), 1, lane);
  const std::uint64_t per = std::uint64_t(wg) * lane;
  if (area >= wg) return {group_count(lim, (area + per - 1) / per), group_count(lim, planes), 1};
  return {group_count(lim, (planes * area + per - 1) / per), 1, 1};
}

// The loop iterations one thread of a plane_grid(lim, planes, area, wg, cost) runs (shaders'
// FOR_EACH_PLANE_ELEMENT: its elements of each plane its workgroup row takes, `cost` each),
// for the kernels to hold against the device's loop budget.
inline std::uint64_t plane_loop_iterations(std::array<std::uint32_t, 3> grid, std::uint64_t planes,
                                           std::uint64_t area, std::uint32_t wg,
                                           std::uint64_t cost) {
  const std::uint64_t step = std::uint64_t(grid[0]) * wg;
  if (area >= wg)
    return (planes + grid[1] - 1) / grid[1] * (1 + (area + step - 1) / step * (cost + 1));
  return (planes * area + step - 1) / step * (cost + 1);
}

// plane_grid for a kernel whose thread runs plane_loop_iterations of it: throws
// throw_past_loop_budget's error where even a thread of one element a plane would run past the
// device's loop budget (a window or a stencil too long for it).
std::array<std::uint32_t, 3> plane_grid_within_budget(const VulkanDevice& dev, std::string_view op,
                                                      std::uint64_t planes, std::uint64_t area,
                                                      std::uint32_t wg, std::uint64_t cost = 1);

// Each kernel file registers its kernels through one of these.
using KernelTable = std::vector<std::pair<OpId, KernelFn>>;
void add_elementwise_kernels(KernelTable& table);
// Records elementwise op `op` (copy, or a unary or binary op) of `inputs`, all of one dtype,
// into `out`, whose dtype may differ (the result converted as a copy converts): for kernels
// that prepare their operands (Note [f32 products on cooperative matrices] in
// vk_kernels_coopmat.cpp).
void record_elementwise(VulkanDevice& dev, OpId op, const TensorArg& out,
                        std::vector<TensorArg> inputs);
void add_random_kernels(KernelTable& table);
void add_reduce_kernels(KernelTable& table);
void add_nn_kernels(KernelTable& table);
void add_linalg_kernels(KernelTable& table);
void add_factor_kernels(KernelTable& table);  // lu_factor_ex, cholesky
// matmul's matrix-vector path (vk_kernels_matvec.cpp): dispatches A x B -> C ([B, M, K],
// [B, K, N], [B, M, N]) and returns true when it is a few vectors against a weight (Note
// [Matrix-vector products] in ferry/kit/matvec_shape.hpp); false leaves it to the GEMM.
bool try_matvec(VulkanDevice& dev, const TensorArg& A, const TensorArg& B, const TensorArg& C);
// matmul's cooperative-matrix path (vk_kernels_coopmat.cpp): false, having done nothing, where
// the device's mode, the dtype, the shapes or the layout do not allow it.
bool try_coopmat(VulkanDevice& dev, const TensorArg& A, const TensorArg& B, const TensorArg& C);
// Records one product on the cooperative-matrix module `shader`, a grid of gx x gy blocks
// (and the caller's batches), with pipelines asking for subgroups of `subgroup_size` (0: any).
using CoopmatDispatch = std::function<void(const char* shader, std::uint32_t gx, std::uint32_t gy,
                                           std::uint32_t subgroup_size)>;
// The shared part of the cooperative-matrix paths (matmul's, and convolutions' in
// vk_kernels_conv.cpp): for `batches` products of M x N x K with a result of `dt` (f16; bf16
// where the device takes it, matmul's layouts only; f32 from bf16 operands, B's rows only: Note
// [f32 products on cooperative matrices]) with B read as `layout`, picks the tile (Note [Measured
// coopmat tiles]), notes it for the profiler and has `dispatch` record it; false, having done
// nothing, where the mode is off, no module was built for it or no tile fits the device.
bool run_coopmat(VulkanDevice& dev, CoopmatOperandB layout, DType dt, std::uint64_t batches,
                 std::uint64_t M, std::uint64_t N, std::uint64_t K,
                 const CoopmatDispatch& dispatch);
// The shared memory cooperative-matrix module `s` (an entry of kEmbeddedCoopmatShaders)
// declares, read from its SPIR-V once (vk_spirv.hpp).
std::uint64_t coopmat_shared_bytes(const EmbeddedCoopmatShader& s);
// Note [Measured coopmat tiles] (vk_kernels_coopmat.cpp), for every cooperative-matrix path:
// of `candidates` (the modules that can run the call `key` names), the one measured for `key`
// earlier on this device, else the fastest now, each timed through `run` (which records the
// call on candidate i, writing its own outputs), and remembered. `how` gets "measured earlier"
// or "measured". The caller asks when tuning is on and there are two candidates or more.
std::size_t choose_measured_module(VulkanDevice& dev, const TileKey& key,
                                   std::span<const EmbeddedCoopmatShader* const> candidates,
                                   const std::function<void(std::size_t)>& run, const char** how);
void add_index_kernels(KernelTable& table);  // index_select, gather, index_add, scatter_add
// The ops whose kernels move elements by their size and compute nothing on them, so they take
// f64 on every device (Note [f64 on Vulkan] in vk_pipelines.cpp): index_select and gather.
bool moves_element_bytes(OpId op);
void add_optim_kernels(KernelTable& table);       // adam_step, sgd_step
void add_sort_kernels(KernelTable& table);        // cumsum, cumprod, cummax, cummin, sort
void add_conv_kernels(KernelTable& table);        // conv1d/2d/3d and their backward rows
void add_attention_kernels(KernelTable& table);   // scaled_dot_product_attention (+ backward)
void add_batch_norm_kernels(KernelTable& table);  // batch_norm (+ backward)
void add_pool_kernels(KernelTable& table);        // max_pool1d/2d, avg_pool1d/2d (+ backward)
void add_resample_kernels(KernelTable& table);    // interpolate, 2-D (+ backward)

// The device a kernel was called on.
VulkanDevice& vulkan_device(DeviceImpl& d);

}  // namespace ferry::vulkan
