// runtime/vulkan/vk_kernels_coopmat.cpp — matmul's f16 and bf16 products on tensor cores through
// VK_KHR_cooperative_matrix (shaders/gemm_coopmat.slang), and what a device must offer for it.
//
// Note [Cooperative-matrix GEMM]
// GPUs multiply 16-bit matrices an order of magnitude faster in their matrix units (NVIDIA's
// tensor cores, AMD's WMMA) than in their ALUs, and Vulkan reaches them through cooperative
// matrices: a subgroup holds 16x16 fragments and multiplies them in one instruction. Debian
// 12's glslang predates the extension, so the kernel is written in Slang and compiled at build
// time by Slang's compiler from PyPI's slangpy wheel (shaders/coopmat.cmake). Measured as a
// standalone prototype on an H100 (docs/gpu-results.md, 2026-11-26): 170 TFLOP/s at
// 4096^3, 4.7 times the GLSL tiles, with 128x128 blocks of four subgroups.
// - What runs it: f16 x f16 -> f16 products, and bf16's (BF16 modules, where the device has
//   VK_KHR_shader_bfloat16's cooperative matrices), f32 accumulation as the GLSL tiles and
//   cuBLAS do; [B, M, K] x [B, K, N] with C's rows contiguous, B's rows or its columns (the
//   transposed weight of a Linear: B_TRANS modules) and A of any strides (transposed: a
//   Linear's output gradient in its weight's gradient), of any sizes. An operand whose strides and
//   offset are multiples of 8 elements loads (stores) 16 bytes at a time, others half by half;
//   blocks need not divide M, N or K: edge blocks load zeros and store only inside C.
//   Measurement picks the block (Note [Measured coopmat tiles]), or choose_coopmat_tile's
//   padding rule (vk_policy.hpp).
//   Everything else, and a tensor that needs splitting to fit a binding, takes the GLSL tiles
//   (vk_kernels_linalg.cpp), which matmul tries next. Convolutions of one group, forward and
//   backward, run on the same kernel (Note [Convolutions on cooperative matrices] in
//   vk_kernels_conv.cpp): run_coopmat is the tile choice and measurement they share. Attention's
//   forward pass has its own kernel on the same fragments (Note [Attention on cooperative
//   matrices] in vk_kernels_attention.cpp).
// - Which devices: FERRY_VULKAN_COOPMAT=1 where probe_coopmat finds the extension, the
//   16x16x16 f16 shape and the features the modules declare (bf16: its extension, features and
//   shape too, else f16 only); its pipelines ask for subgroups of
//   exactly 32 (the kernel's warp layout). Off by default until it has run on a GPU inside
//   ferry (docs/vulkan.md). The VK_NV_cooperative_matrix fallback for older NVIDIA drivers is
//   not built.
// - FERRY_VULKAN_COOPMAT=emulate runs the same dispatch with the kernel's scalar emulation
//   (EMULATE_COOPMAT: the same staging, offsets and barriers, fragments multiplied by plain
//   loops), on any device: how CI checks the host code, the tiling and the kernel's indexing
//   on lavapipe, whose Mesa release has no cooperative matrices.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ferry/profiler.hpp"
#include "vulkan/vk_coopmat.hpp"
#include "vulkan/vk_coopmat_shaders.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_kernels.hpp"
#include "vulkan/vk_spirv.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {

void* CoopmatProbe::enable_chain(void* next) {
  coop.cooperativeMatrix = VK_TRUE;
  coop.cooperativeMatrixRobustBufferAccess = VK_FALSE;
  float16.shaderFloat16 = VK_TRUE;
  float16.shaderInt8 = VK_FALSE;
  memory_model.vulkanMemoryModel = VK_TRUE;
  memory_model.vulkanMemoryModelDeviceScope = VK_TRUE;
  memory_model.vulkanMemoryModelAvailabilityVisibilityChains = VK_FALSE;
  size_control.subgroupSizeControl = VK_TRUE;
  size_control.computeFullSubgroups = VK_TRUE;
  bfloat16.shaderBFloat16Type = VK_TRUE;
  bfloat16.shaderBFloat16DotProduct = VK_FALSE;
  bfloat16.shaderBFloat16CooperativeMatrix = VK_TRUE;
  bfloat16.pNext = next;
  size_control.pNext = bf16 ? static_cast<void*>(&bfloat16) : next;
  memory_model.pNext = &size_control;
  float16.pNext = &memory_model;
  coop.pNext = &float16;
  return &coop;
}

CoopmatProbe probe_coopmat(VkPhysicalDevice pd, std::uint32_t api_version,
                           const std::vector<VkExtensionProperties>& exts) {
  CoopmatProbe p;
  auto lacks = [&](std::string what) {
    p.why_not = std::move(what);
    return std::move(p);
  };
  if (api_version < VK_API_VERSION_1_3) return lacks("Vulkan 1.3 (subgroup size control)");
  const bool has_ext = std::any_of(exts.begin(), exts.end(), [](const VkExtensionProperties& e) {
    return std::string_view(e.extensionName) == VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
  });
  if (!has_ext) return lacks(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  auto get_shapes =
      reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR>(vkGetInstanceProcAddr(
          volkGetLoadedInstance(), "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  if (!get_shapes) return lacks("vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
  std::uint32_t count = 0;
  if (get_shapes(pd, &count, nullptr) != VK_SUCCESS) return lacks("its matrix shapes");
  std::vector<VkCooperativeMatrixPropertiesKHR> props(
      count, VkCooperativeMatrixPropertiesKHR{VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR});
  if (get_shapes(pd, &count, props.data()) != VK_SUCCESS) return lacks("its matrix shapes");
  std::vector<CoopmatShape> shapes;
  for (const auto& s : props)
    shapes.push_back({s.MSize, s.NSize, s.KSize, std::uint32_t(s.AType), std::uint32_t(s.BType),
                      std::uint32_t(s.CType), std::uint32_t(s.ResultType),
                      s.scope == VK_SCOPE_SUBGROUP_KHR});
  if (!has_coopmat_shape(shapes, kComponentF16))
    return lacks("a 16x16x16 f16 x f16 + f32 subgroup shape");

  VkPhysicalDevice16BitStorageFeatures s16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  p.size_control.pNext = &s16;
  p.memory_model.pNext = &p.size_control;
  p.float16.pNext = &p.memory_model;
  p.coop.pNext = &p.float16;
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f2.pNext = &p.coop;
  vkGetPhysicalDeviceFeatures2(pd, &f2);
  p.coop.pNext = p.float16.pNext = p.memory_model.pNext = p.size_control.pNext = nullptr;
  std::string missing;
  auto need = [&](VkBool32 have, const char* name) {
    if (!have) missing += missing.empty() ? name : fmt::format(", {}", name);
  };
  need(p.coop.cooperativeMatrix, "cooperativeMatrix");
  need(p.float16.shaderFloat16, "shaderFloat16");
  need(p.memory_model.vulkanMemoryModel, "vulkanMemoryModel");
  need(p.memory_model.vulkanMemoryModelDeviceScope, "vulkanMemoryModelDeviceScope");
  need(s16.storageBuffer16BitAccess && s16.uniformAndStorageBuffer16BitAccess,
       "uniformAndStorageBuffer16BitAccess");
  need(p.size_control.subgroupSizeControl && p.size_control.computeFullSubgroups,
       "subgroupSizeControl with computeFullSubgroups");

  VkPhysicalDeviceSubgroupSizeControlProperties sizes{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &sizes;
  vkGetPhysicalDeviceProperties2(pd, &p2);
  need(sizes.minSubgroupSize <= 32 && sizes.maxSubgroupSize >= 32 &&
           (sizes.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT),
       "subgroups of 32 in compute shaders");
  if (!missing.empty()) return lacks(missing);
  p.ready = true;

  // bf16, on top of the rest.
  const bool has_bf16_ext =
      std::any_of(exts.begin(), exts.end(), [](const VkExtensionProperties& e) {
        return std::string_view(e.extensionName) == VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME;
      });
  if (!has_bf16_ext) {
    p.bf16_why_not = VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME;
    return p;
  }
  VkPhysicalDeviceFeatures2 bf2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  bf2.pNext = &p.bfloat16;
  vkGetPhysicalDeviceFeatures2(pd, &bf2);
  p.bfloat16.pNext = nullptr;
  if (!p.bfloat16.shaderBFloat16Type || !p.bfloat16.shaderBFloat16CooperativeMatrix)
    p.bf16_why_not = "shaderBFloat16Type with shaderBFloat16CooperativeMatrix";
  else if (!has_coopmat_shape(shapes, kComponentBF16))
    p.bf16_why_not = "a 16x16x16 bf16 x bf16 + f32 subgroup shape";
  else
    p.bf16 = true;
  return p;
}

namespace {

// The built modules of one kind (tensor-core or emulated), operand type (TileKey::operands:
// f16, bf16, or bf16 with an f32 result) and B layout, with their tiles, in
// vk_coopmat_shaders.hpp's order.
struct CoopmatModules {
  std::vector<const EmbeddedCoopmatShader*> shaders;
  std::vector<CoopmatTile> tiles;
};
constexpr std::size_t kLayouts = kCoopmatLayouts;

// FERRY_VULKAN_COOPMAT_TILE=w2x2_t4x4_k32 keeps only that tile (the others' products take the
// GLSL tiles): for measuring each tile on a GPU.
std::size_t kind_index(bool emulated, std::uint32_t operands, CoopmatOperandB b) {
  return kLayouts * (2 * std::size_t(operands) + std::size_t(emulated)) + std::size_t(b);
}
std::uint32_t operands_of(DType result) {
  return result == DType::f32 ? 2 : result == DType::bf16 ? 1 : 0;
}
const CoopmatModules& modules(bool emulated, std::uint32_t operands, CoopmatOperandB b) {
  static const std::array<CoopmatModules, 6 * kLayouts> all = [] {
    std::array<CoopmatModules, 6 * kLayouts> m;
    const char* only = std::getenv("FERRY_VULKAN_COOPMAT_TILE");
    const std::string tile = only && *only ? fmt::format("gemm_coopmat_{}", only) : "";
    for (std::size_t i = 0; i < kEmbeddedCoopmatShaderCount; ++i) {
      const EmbeddedCoopmatShader& s = kEmbeddedCoopmatShaders[i];
      const std::string_view name(s.name);
      if (s.head_dim != 0) continue;  // attention's (vk_kernels_attention.cpp)
      if (!tile.empty() && name != tile && !name.starts_with(tile + "_")) continue;
      CoopmatModules& kind = m[kind_index(s.emulated, s.f32_result ? 2 : s.bf16 ? 1 : 0, s.b)];
      kind.shaders.push_back(&s);
      kind.tiles.push_back({s.warps_m * s.tm * 16, s.warps_n * s.tn * 16, s.bk,
                            s.warps_m * s.warps_n * 32, coopmat_shared_bytes(s)});
    }
    return m;
  }();
  return all[kind_index(emulated, operands, b)];
}

bool multiple_of_8(std::int64_t v) { return v % 8 == 0; }

// Note [Measured coopmat tiles]
// Which block runs a product fastest depends on the GPU (its shared memory, its matrix units,
// how many workgroups it keeps resident) in ways choose_coopmat_tile's padding rule only
// guesses. So, with tuning on (FERRY_VULKAN_COOPMAT_TUNE, vk_policy.hpp; on by default on the
// tensor-core path), the first product of each shape (batches, M, N, K, B's layout) runs
// once on every tile the device can take, then kRuns more times each, timed by the host
// between two synchronizes, and the fastest is kept: in the device's table, saved beside its
// pipeline cache (<cache file>.tiles, Note [Pipeline cache]) so later runs on the same driver
// skip the measurement, as cuDNN's benchmark mode and its caches do. The measured runs write
// the product's own output, so they cost one stall per shape and nothing else; the winner
// then runs once more. Products in training repeat their shapes every step, so the table
// stays small. The profiler's kernel detail says "measured", "measured earlier" or "by
// padding".
constexpr int kRuns = 3;

}  // namespace

std::uint64_t coopmat_shared_bytes(const EmbeddedCoopmatShader& s) {
  static const std::vector<std::uint64_t> bytes = [] {
    std::vector<std::uint64_t> b;
    for (std::size_t i = 0; i < kEmbeddedCoopmatShaderCount; ++i) {
      const EmbeddedCoopmatShader& m = kEmbeddedCoopmatShaders[i];
      b.push_back(spirv_shared_bytes({m.words, m.word_count}, m.name));
    }
    return b;
  }();
  return bytes.at(std::size_t(&s - kEmbeddedCoopmatShaders));
}

std::size_t choose_measured_module(VulkanDevice& dev, const TileKey& key,
                                   std::span<const EmbeddedCoopmatShader* const> candidates,
                                   const std::function<void(std::size_t)>& run, const char** how) {
  if (const std::optional<std::string> name = dev.coopmat_tile(key))
    for (std::size_t i = 0; i < candidates.size(); ++i)
      if (*name == candidates[i]->name) {
        *how = "measured earlier";
        return i;
      }
  std::size_t best = 0;
  double best_s = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    run(i);  // makes the pipeline, and warms the caches
    dev.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < kRuns; ++r) run(i);
    dev.synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i == 0 || s < best_s) best = i, best_s = s;
  }
  *how = "measured";
  dev.remember_coopmat_tile(key, candidates[best]->name);
  return best;
}

bool run_coopmat(VulkanDevice& dev, CoopmatOperandB layout, DType dt, std::uint64_t batches,
                 std::uint64_t M, std::uint64_t N, std::uint64_t K,
                 const CoopmatDispatch& dispatch) {
  const CoopmatMode mode = dev.coopmat_mode();
  const std::uint32_t operands = operands_of(dt);  // f32: bf16 operands
  if (!dev.coopmat_takes(operands == 0 ? DType::f16 : DType::bf16) || batches == 0 || M == 0 ||
      N == 0 || K == 0)
    return false;
  const KernelLimits& lim = dev.limits();
  const CoopmatModules& mods = modules(mode == CoopmatMode::emulated, operands, layout);
  if (mods.shaders.empty()) return false;  // a build without Slang, or one tile kept
  int t = choose_coopmat_tile(mods.tiles, batches, M, N, K, lim.shared_memory,
                              lim.max_workgroup_invocations);
  if (t < 0) return false;
  auto groups = [&](int which) {
    const CoopmatTile& tile = mods.tiles[std::size_t(which)];
    return std::pair{(N + tile.bn - 1) / tile.bn, (M + tile.bm - 1) / tile.bm};
  };
  // The tiles that can run this product: the device's limits allow them.
  std::vector<int> candidates;
  for (std::size_t i = 0; i < mods.tiles.size(); ++i) {
    const CoopmatTile& tile = mods.tiles[i];
    const auto [gx, gy] = groups(int(i));
    if (tile.shared_bytes <= lim.shared_memory && tile.threads <= lim.max_workgroup_invocations &&
        gx <= lim.max_groups_x && gy <= lim.max_groups_x)
      candidates.push_back(int(i));
  }
  if (std::find(candidates.begin(), candidates.end(), t) == candidates.end()) return false;
  auto run = [&](int which) {
    const auto [gx, gy] = groups(which);
    dispatch(mods.shaders[std::size_t(which)]->name, std::uint32_t(gx), std::uint32_t(gy),
             mode == CoopmatMode::on ? 32u : 0u);
  };
  const char* how = "by padding";
  if (dev.coopmat_tuning() && candidates.size() > 1) {
    const TileKey key{batches, M, N, K, std::uint32_t(layout), mode == CoopmatMode::emulated,
                      operands};
    std::vector<const EmbeddedCoopmatShader*> shaders;
    for (int i : candidates) shaders.push_back(mods.shaders[std::size_t(i)]);
    t = candidates[choose_measured_module(
        dev, key, shaders, [&](std::size_t i) { run(candidates[i]); }, &how)];
  }
  if (profiler::enabled()) {
    const CoopmatTile& tile = mods.tiles[std::size_t(t)];
    profiler::note_kernel(fmt::format("coopmat gemm {}, block {}x{}x{} ({})",
                                      mods.shaders[std::size_t(t)]->name, tile.bm, tile.bn, tile.bk,
                                      how));
  }
  run(t);
  return true;
}

// Push constants of shaders/gemm_coopmat.slang's Params, in elements.
struct CoopmatParams {
  std::uint32_t M, N, K, lda, ldb, ldc, a_off, b_off, c_off, sa_b, sb_b, sc_b, flags, sak;
};
constexpr std::uint32_t kAVectors = 1, kBVectors = 2, kCVectors = 4;  // its flags

// Records product module `shader` over `nb` batches, a grid of `groups` blocks each, with the
// push constants `base` (its offsets the first batch's; `batch_strides` A's, B's and C's), in as
// few dispatches as the group-count limit allows.
void dispatch_batches(VulkanDevice& dev, const char* shader, const CoopmatParams& base,
                      const std::vector<Binding>& bindings,
                      std::array<std::int64_t, 3> batch_strides, std::int64_t nb,
                      std::array<std::uint32_t, 2> groups, std::uint32_t subgroup_size) {
  const std::uint32_t most = dev.limits().max_groups_x;
  CoopmatParams p = base;
  for (std::int64_t z = 0; z < nb; z += most) {
    // Later dispatches start `most` batches on (element offsets stay below 2^32: bind()).
    p.a_off = base.a_off + std::uint32_t(z * batch_strides[0]);
    p.b_off = base.b_off + std::uint32_t(z * batch_strides[1]);
    p.c_off = base.c_off + std::uint32_t(z * batch_strides[2]);
    dev.dispatch(
        {.shader = shader,
         .spec = {},
         .bindings = bindings,
         .push = &p,
         .push_size = sizeof p,
         .groups = {groups[0], groups[1], std::uint32_t(std::min<std::int64_t>(most, nb - z))},
         .subgroup_size = subgroup_size});
  }
}

// Note [f32 products on cooperative matrices]
// No device offers f32 x f32 cooperative matrices, and Vulkan has no TF32. So where the program
// opts into faster, less exact f32 products (set_matmul_allow_tf32 or FERRY_ALLOW_TF32=1: Note
// [TF32] in ferry/ops.hpp) and the device takes bf16 matrices, an f32 matmul runs as bf16 x 3,
// as oneDNN's and PyTorch's "high" f32 matmul precision may: each operand splits into
// hi = bf16(x) and lo = bf16(x - hi), and one bf16 GEMM over K' = 3K, of A' = [A_hi | A_hi |
// A_lo] (along K) and B' = [B_hi; B_lo; B_hi], with an f32 result (the "_f32out" modules) sums
// A_hi B_hi + A_hi B_lo + A_lo B_hi in f32. It drops A_lo B_lo, about 2^-16 of each term, so
// results carry about 1e-5 relative error (TF32's: 1e-3) for three bf16 products' work on the
// matrix units. The split is recorded as the elementwise kernel's copies and a subtraction into
// scratch memory (A' and B' contiguous, and one f32 temporary): O(MK + KN) work against the
// product's O(MNK). Like the rest of the path, checked through the scalar emulation; unmeasured
// on a GPU.
bool try_coopmat_f32(VulkanDevice& dev, const TensorArg& A, const TensorArg& B,
                     const TensorArg& C) {
  if (!matmul_allow_tf32() || !dev.coopmat_takes(DType::bf16) || C.strides[2] != 1) return false;
  const std::int64_t nb = C.sizes[0], M = C.sizes[1], N = C.sizes[2], K = A.sizes[2], K3 = 3 * K;
  if (nb == 0 || M == 0 || N == 0 || K == 0) return false;
  // A' [nb, M, 3K] and B' [nb, 3K, N], bf16, contiguous; the f32 temporary as large as either
  // operand.
  const TensorArg a3{nullptr, 0, {nb, M, K3}, {M * K3, K3, 1}, DType::bf16};
  const TensorArg b3{nullptr, 0, {nb, K3, N}, {K3 * N, N, 1}, DType::bf16};
  const std::int64_t temp_numel = std::max(nb * M * K, nb * K * N);
  const KernelLimits& lim = dev.limits();
  if (!fits(lim, A) || !fits(lim, B) || !fits(lim, C) || !fits(lim, a3) || !fits(lim, b3) ||
      !fits(lim, {nullptr, 0, {temp_numel}, {1}, DType::f32}))
    return false;
  // C as the kernel writes it, and the tile run_coopmat takes first, before anything is
  // recorded.
  const Binding c = dev.bind(C, Access::write);
  if (c.offset % 16 != 0) return false;
  const CoopmatModules& mods =
      modules(dev.coopmat_mode() == CoopmatMode::emulated, 2, CoopmatOperandB::rows);
  const int t = mods.shaders.empty()
                    ? -1
                    : choose_coopmat_tile(mods.tiles, std::uint64_t(nb), std::uint64_t(M),
                                          std::uint64_t(N), std::uint64_t(K3), lim.shared_memory,
                                          lim.max_workgroup_invocations);
  if (t < 0) return false;
  const CoopmatTile& tile = mods.tiles[std::size_t(t)];
  if ((N + tile.bn - 1) / tile.bn > lim.max_groups_x ||
      (M + tile.bm - 1) / tile.bm > lim.max_groups_x)
    return false;
  // The scratch (1.5 times A's and B's bytes, and as much as the larger again), or the GLSL
  // tiles where the device has no room for it.
  std::unique_ptr<Buffer> a3_mem, b3_mem, temp_mem;
  try {
    a3_mem = dev.allocate(std::size_t(nb * M * K3) * 2);
    b3_mem = dev.allocate(std::size_t(nb * K3 * N) * 2);
    temp_mem = dev.allocate(std::size_t(temp_numel) * 4);
  } catch (const OutOfMemoryError&) {
    return false;
  }
  // x into parts [0, 3) of `whole` (the parts `at` apart): hi, hi, lo for A; hi, lo, hi for B.
  auto split = [&](const TensorArg& x, const TensorArg& whole, std::int64_t at, bool lo_between) {
    auto part = [&](int i) {
      TensorArg p = whole;
      p.sizes = x.sizes;
      p.offset = i * at;
      return p;
    };
    const TensorArg hi = part(0), hi2 = part(lo_between ? 2 : 1), lo = part(lo_between ? 1 : 2);
    const TensorArg temp{
        temp_mem.get(), 0, x.sizes, {x.sizes[1] * x.sizes[2], x.sizes[2], 1}, DType::f32};
    record_elementwise(dev, OpId::copy, hi, {x});       // bf16(x)
    record_elementwise(dev, OpId::copy, hi2, {x});      // the same, again
    record_elementwise(dev, OpId::copy, temp, {hi});    // hi in f32
    record_elementwise(dev, OpId::sub, lo, {x, temp});  // bf16(x - hi): exact before rounding
  };
  TensorArg a3_arg = a3, b3_arg = b3;
  a3_arg.buffer = a3_mem.get(), b3_arg.buffer = b3_mem.get();
  split(A, a3_arg, K, false);
  split(B, b3_arg, K * N, true);
  const Binding a = dev.bind(a3_arg, Access::read), b = dev.bind(b3_arg, Access::read);
  const bool c_vectors = multiple_of_8(c.element_offset) && multiple_of_8(C.strides[1]) &&
                         multiple_of_8(C.strides[0]) && multiple_of_8(N);
  const CoopmatParams base{std::uint32_t(M),
                           std::uint32_t(N),
                           std::uint32_t(K3),
                           std::uint32_t(K3),
                           std::uint32_t(N),
                           std::uint32_t(C.strides[1]),
                           0,
                           0,
                           c.element_offset,
                           std::uint32_t(M * K3),
                           std::uint32_t(K3 * N),
                           std::uint32_t(C.strides[0]),
                           (multiple_of_8(K3) ? kAVectors : 0) |
                               (multiple_of_8(N) ? kBVectors : 0) | (c_vectors ? kCVectors : 0),
                           1};
  return run_coopmat(
      dev, CoopmatOperandB::rows, DType::f32, std::uint64_t(nb), std::uint64_t(M), std::uint64_t(N),
      std::uint64_t(K3),
      [&](const char* shader, std::uint32_t gx, std::uint32_t gy, std::uint32_t subgroup_size) {
        dispatch_batches(dev, shader, base, {a, b, c}, {M * K3, K3 * N, C.strides[0]}, nb, {gx, gy},
                         subgroup_size);
      });
}

bool try_coopmat(VulkanDevice& dev, const TensorArg& A, const TensorArg& B, const TensorArg& C) {
  if (C.dtype == DType::f32) return try_coopmat_f32(dev, A, B, C);
  if (!dev.coopmat_takes(C.dtype)) return false;
  const std::int64_t nb = C.sizes[0], M = C.sizes[1], N = C.sizes[2], K = A.sizes[2];
  if (nb == 0 || M == 0 || N == 0 || K == 0) return false;
  // C's rows contiguous, B's along K or along N; A any strides.
  const bool b_transposed = B.strides[1] == 1 && B.strides[2] != 1;
  const std::int64_t ldb = b_transposed ? B.strides[2] : B.strides[1];
  if ((!b_transposed && B.strides[2] != 1) || C.strides[2] != 1) return false;
  // One binding per operand, the batches in as few dispatches as the group-count limit allows.
  const KernelLimits& lim = dev.limits();
  if (!fits(lim, A) || !fits(lim, B) || !fits(lim, C)) return false;
  Binding a = dev.bind(A, Access::read), b = dev.bind(B, Access::read),
          c = dev.bind(C, Access::write);
  for (const Binding* x : {&a, &b, &c})
    if (x->offset % 16 != 0) return false;  // the kernel reads them as 16-byte vectors
  // Each operand loads (or stores) 16 bytes at a time where its rows and batches start on
  // 8-element boundaries, else half by half; C's 16-byte pieces also need N % 8 == 0.
  auto aligned = [](const Binding& x, std::int64_t row, std::int64_t batch) {
    return multiple_of_8(x.element_offset) && multiple_of_8(row) && multiple_of_8(batch);
  };
  const std::uint32_t flags =
      (A.strides[2] == 1 && aligned(a, A.strides[1], A.strides[0]) ? kAVectors : 0) |
      (aligned(b, ldb, B.strides[0]) ? kBVectors : 0) |
      (aligned(c, C.strides[1], C.strides[0]) && multiple_of_8(N) ? kCVectors : 0);
  const CoopmatParams base{std::uint32_t(M),
                           std::uint32_t(N),
                           std::uint32_t(K),
                           std::uint32_t(A.strides[1]),
                           std::uint32_t(ldb),
                           std::uint32_t(C.strides[1]),
                           a.element_offset,
                           b.element_offset,
                           c.element_offset,
                           std::uint32_t(A.strides[0]),
                           std::uint32_t(B.strides[0]),
                           std::uint32_t(C.strides[0]),
                           flags,
                           std::uint32_t(A.strides[2])};
  return run_coopmat(
      dev, b_transposed ? CoopmatOperandB::transposed : CoopmatOperandB::rows, C.dtype,
      std::uint64_t(nb), std::uint64_t(M), std::uint64_t(N), std::uint64_t(K),
      [&](const char* shader, std::uint32_t gx, std::uint32_t gy, std::uint32_t subgroup_size) {
        dispatch_batches(dev, shader, base, {a, b, c}, {A.strides[0], B.strides[0], C.strides[0]},
                         nb, {gx, gy}, subgroup_size);
      });
}

}  // namespace ferry::vulkan
