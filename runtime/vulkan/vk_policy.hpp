// runtime/vulkan/vk_policy.hpp — the Vulkan backend's decisions that need no
// driver: device order and FERRY_VULKAN_DEVICES, the pipeline-cache file
// format, and dim coalescing for strided kernels. Kept apart so that
// ferry_tests checks them on any machine (tests/test_vulkan_policy.cpp).
#pragma once

#include <algorithm>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/device_info.hpp"
#include "ferry/kit/coalesce.hpp"

namespace ferry::vulkan {

// The order devices become vulkan:0, vulkan:1, ...: by kind (discrete,
// integrated, virtual, CPU-type, other), ties in enumeration order. With
// `selection` (FERRY_VULKAN_DEVICES, comma-separated enumeration indices, e.g.
// "1,0"), exactly those devices in that order. Throws ferry::Error naming the
// variable when an entry is not an index of `kinds` or appears twice.
std::vector<std::size_t> order_devices(const std::vector<DeviceKind>& kinds, const char* selection);

// Pipeline-cache files: "FERRYPC1", a 64-bit FNV-1a hash of the driver's data,
// then the data. A file whose magic, hash or Vulkan header (header version
// one, vendor, device, pipelineCacheUUID) does not match is ignored, so a
// truncated or corrupt file, or one from another driver, never reaches it.
struct CacheIdentity {
  std::uint32_t vendor_id = 0, device_id = 0;
  std::uint8_t uuid[16] = {};
};
std::vector<std::uint8_t> wrap_pipeline_cache(std::span<const std::uint8_t> driver_data);
std::optional<std::vector<std::uint8_t>> unwrap_pipeline_cache(std::span<const std::uint8_t> file,
                                                               const CacheIdentity& id);

// Whether scaled_dot_product_attention runs as the fused kernel (shaders/attention.comp);
// otherwise supports() says no and the composition runs. FERRY_VULKAN_FUSED_ATTENTION (`env`)
// "1" or "0" decides; unset, the kernel runs, on every device: it has run on lavapipe (CI) and
// on an NVIDIA H100 (docs/gpu-results.md, 2026-11-27), and its memory stays linear in the
// sequence, where the composition's grows with its square (docs/vulkan.md has the speeds).
// Throws ferry::Error naming the variable for another value.
bool fused_attention(const char* env);

// How the fused forward of scaled_dot_product_attention spreads each query row's keys (Note
// [Split-key attention on Vulkan] in shaders/attention.comp). FERRY_VULKAN_SPLIT_ATTENTION
// (`env`): "1" (unset) for calls of at most kSplitKeyRows query rows per head, a decoding
// step's; "force" for every call, in splits of kForcedSplitKeys keys (so that the conformance
// suite runs all its cases through the split kernels, most of them in several splits); "0"
// never. Throws ferry::Error naming the variable for another value.
enum class SplitAttention { off, on, force };
SplitAttention split_attention(const char* env);
inline constexpr std::int64_t kSplitKeyRows = 4, kForcedSplitKeys = 16;

// Note [Attention head chunks]
// EC and EVC of shaders/attention.comp, the head-dim elements of q·k and of v a thread holds,
// are specialization constants: each value is a pipeline of its own, compiled by the driver.
// On a GPU a chunk is the head dim itself, up to 64 (longer heads walk chunks of 64): the
// accumulators' loops (o, dq, dk, dv) run the whole chunk, so a wider one would cost
// arithmetic on zeros as well as registers. A CPU-type device (lavapipe) takes chunks of 64
// for every head dim (KernelLimits::attention_min_head_chunk): llvmpipe unrolls the loops of
// a short chunk in full and then compiles for seconds. With the shader cache empty, the
// conformance suite's f16 attention gradients on lavapipe (14 cases) took 27.1 s with chunks
// of the head dims (4 to 16, and 64), 24.1 s with chunks of 16 for the heads up to 16, 72.6 s
// with 32 and 5.4 s with 64; the f32 forward and gradient cases (29) 29.2, 24.3, 69.6 and
// 5.1 s, the f64 ones 16.6 s before and 4.6 s after. A CPU has no registers to save, and the
// extra arithmetic is small beside that at the head dims tests use. The kernels' STATS and
// COMBINE modes read neither chunk nor is_causal nor the mask, and take one pipeline per dtype
// on every device.
inline constexpr std::uint32_t kMaxAttentionHeadChunk = 64;
constexpr std::uint32_t attention_head_chunk(std::int64_t dim, std::uint32_t min_chunk) {
  const std::int64_t chunk =
      std::min<std::int64_t>(std::max<std::int64_t>(dim, 1), kMaxAttentionHeadChunk);
  return std::max(std::uint32_t(chunk), std::min(min_chunk, kMaxAttentionHeadChunk));
}

// The split of one call's keys: `splits` workgroups of `split_len` keys per query row; splits
// = 0 where the forward kernel runs the call instead. Under "1", the splits give the grid about
// kSplitTargetWorkgroups workgroups (a large GPU's compute units twice over) but no split
// fewer than kMinSplitKeys keys (4 per thread of the kernel's 64), so that a short row stays
// in one workgroup and one dispatch. On a device with a loop budget (Note [Loop budget] in
// vk_kernels.hpp; `loop_budget`, 0 for none) no split is longer than an invocation of the
// kernel can walk within it, and a call of any number of query rows takes the split kernels
// where the forward kernel's invocations would run past it (`forward_fits` false, the
// kernel's estimate); splits = 0 too where even one key a thread would not fit.
// `min_head_chunk`: the device's KernelLimits::attention_min_head_chunk.
struct AttentionShape {
  std::int64_t query_rows = 0, rows = 0, keys = 0;  // L, B * Hq * L, S
  std::int64_t head_dim = 0, value_dim = 0;         // E, Ev
};
struct KeySplit {
  std::uint32_t splits = 0, split_len = 0;
};
inline constexpr std::int64_t kSplitTargetWorkgroups = 256, kMinSplitKeys = 256;
KeySplit key_split(SplitAttention mode, const AttentionShape& a, bool forward_fits,
                   std::uint64_t loop_budget, std::uint32_t min_head_chunk = 1);

// Whether reduce, softmax and layer_norm run from their subgroup modules (Note [Subgroup row
// reductions] in shaders/subgroup.glsl): where FERRY_VULKAN_SUBGROUPS (`env`) is "1" and the
// device has basic and shuffle subgroup operations in compute shaders (`has_ops`). Off by
// default: on lavapipe, where they pass every test, they were slower than the shared-memory
// tree (docs/vulkan.md), and they have not run on a GPU yet. Throws ferry::Error naming the
// variable for a value other than "1" or "0".
bool subgroup_reductions(const char* env, bool has_ops);

// Note [Cooperative-matrix GEMM] in vk_kernels_coopmat.cpp: how matmul's f16 products run.
enum class CoopmatMode {
  off,       // the GLSL tiles (shaders/matmul.comp)
  on,        // gemm_coopmat's tensor-core modules (VK_KHR_cooperative_matrix)
  emulated,  // its scalar emulation, same tiles and dispatch: the path tested on lavapipe
};
const char* coopmat_mode_name(CoopmatMode m);
// FERRY_VULKAN_COOPMAT (`env`): unset or "0" off; "1" on where the build made the modules
// (`built`) and the device can run them (`device_ready`); "emulate" the emulation where the
// build made it (any device). Off by default: the path has not run on a GPU inside ferry yet
// (the prototype it came from has, docs/gpu-results.md). Throws ferry::Error naming the
// variable for another value.
CoopmatMode coopmat_mode(const char* env, bool built, bool device_ready);

// One entry of vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR's list.
struct CoopmatShape {
  std::uint32_t m = 0, n = 0, k = 0;
  std::uint32_t a = 0, b = 0, c = 0, result = 0;  // VkComponentTypeKHR: 0 f16, 1 f32, ...
  bool subgroup_scope = false;
};
// VkComponentTypeKHR's 16-bit float types the kernel takes (bf16: VK_KHR_shader_bfloat16's).
inline constexpr std::uint32_t kComponentF16 = 0, kComponentBF16 = 1000141000;
// Whether the list has the shape the kernel is written for: 16x16x16, `operands` (f16 or bf16)
// x `operands` + f32 -> f32, subgroup scope.
bool has_coopmat_shape(std::span<const CoopmatShape> shapes, std::uint32_t operands);

// A tile variant the build made of gemm_coopmat (vk_coopmat_shaders.hpp).
struct CoopmatTile {
  std::uint32_t bm = 0, bn = 0, bk = 0, threads = 0;
  std::uint64_t shared_bytes = 0;  // its module's shared memory, read from its SPIR-V
};
// The tile for a [batches, m, k] x [batches, k, n] product among `tiles`: of those that fit the
// device's shared memory and workgroup size and still give `min_groups` workgroups, the one
// doing the least work padded to its blocks (bm, bn, bk need not divide m, n, k: edge blocks
// multiply zeros), the largest on ties, the first listed on ties again; without such a tile,
// the one giving the most workgroups; -1 when none fits.
int choose_coopmat_tile(std::span<const CoopmatTile> tiles, std::uint64_t batches, std::uint64_t m,
                        std::uint64_t n, std::uint64_t k, std::uint32_t shared_memory,
                        std::uint32_t max_invocations, std::uint64_t min_groups = 128);

// Note [Measured coopmat tiles] in vk_kernels_coopmat.cpp: which tile a product of one shape
// (or an attention pass of one geometry) runs, once measured, kept per device beside its
// pipeline cache.
struct TileKey {
  std::uint64_t batches = 0, m = 0, n = 0, k = 0;
  std::uint32_t b_layout = 0;  // vk_coopmat_shaders.hpp's CoopmatOperandB
  bool emulated = false;
  std::uint32_t operands = 0;  // 0 f16, 1 bf16, 2 f32 split into bf16 x 3 (an f32 result)
  // 0 for a product; for an attention pass 1 + its ATTN_MODE_* (shaders/abi/attention.h), the
  // batches its heads, m the rows it owns (query rows; key rows for DKV), n the other side's
  // and k the head dim.
  std::uint32_t attention = 0;
  auto operator<=>(const TileKey&) const = default;
};
inline constexpr std::uint32_t kMaxTileKeyAttention = 4;  // 1 + ATTN_MODE_DKV
using TileTable = std::map<TileKey, std::string>;  // -> the module's name
// The file: a "FERRYTILES3" line, then a line per entry: batches m n k b_layout emulated operands
// attention name (a product's module a gemm_coopmat_ one, an attention pass's an attention_
// one). read_tile_table ignores a file without the header (an older format's too: its shapes
// are measured again) and every malformed line.
std::string write_tile_table(const TileTable& table);
TileTable read_tile_table(std::string_view text);
// FERRY_VULKAN_COOPMAT_TUNE (`env`): "1" measure, "0" the heuristic (choose_coopmat_tile);
// unset, measure on the tensor-core path and not in the emulation (whose tests would time
// every shape). Throws ferry::Error naming the variable for another value.
bool coopmat_tuning(const char* env, CoopmatMode mode);

// Note [Transfer queue] in vk_recorder.hpp: the queue a Vulkan device copies between host and
// device memory on. A queue family as the device reports it: VkQueueFlags (kQueueGraphics,
// kQueueCompute, kQueueTransfer), queueCount, timestampValidBits.
inline constexpr std::uint32_t kQueueGraphics = 1, kQueueCompute = 2, kQueueTransfer = 4;
struct QueueFamilyInfo {
  std::uint32_t flags = 0;
  std::uint32_t count = 0;
  std::uint32_t timestamp_bits = 0;
};
struct TransferQueueChoice {
  bool on = false;
  std::uint32_t family = 0, index = 0;  // the queue: vkGetDeviceQueue(family, index)
  std::string note;                     // for the device's transfer_queue property
};
// FERRY_VULKAN_TRANSFER_QUEUE (`env`): unset or "0" off; "1" the first transfer-only family
// (transfer, neither compute nor graphics: a GPU's copy engines) where the device has one;
// "force" that family, else a second queue of `compute_family`, else the compute queue itself
// (lavapipe: how its single queue tests the path). Every choice needs timeline semaphores
// (`timeline`). Off by default: it has not run on a GPU yet. Throws ferry::Error naming the
// variable for another value.
TransferQueueChoice choose_transfer_queue(const char* env, std::span<const QueueFamilyInfo> families,
                                          std::uint32_t compute_family, bool timeline);

// Dim coalescing lives in the core (include/ferry/kit/coalesce.hpp), shared with CUDA.
using detail::coalesce;
using detail::Coalesced;

}  // namespace ferry::vulkan
