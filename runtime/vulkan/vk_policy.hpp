// runtime/vulkan/vk_policy.hpp — the Vulkan backend's decisions that need no
// driver: device order and FERRY_VULKAN_DEVICES, the pipeline-cache file
// format, and dim coalescing for strided kernels. Kept apart so that
// ferry_tests checks them on any machine (tests/test_vulkan_policy.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ferry/kit/coalesce.hpp"
#include "ferry/device_info.hpp"

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

// Whether reduce, softmax and layer_norm run from their subgroup modules (Note [Subgroup row
// reductions] in shaders/subgroup.glsl): where FERRY_VULKAN_SUBGROUPS (`env`) is "1" and the
// device has basic and shuffle subgroup operations in compute shaders (`has_ops`). Off by
// default: on lavapipe, where they pass every test, they were slower than the shared-memory
// tree (docs/vulkan.md), and they have not run on a GPU yet. Throws ferry::Error naming the
// variable for a value other than "1" or "0".
bool subgroup_reductions(const char* env, bool has_ops);

// Dim coalescing lives in the core (include/ferry/kit/coalesce.hpp), shared with CUDA.
using detail::coalesce;
using detail::Coalesced;

}  // namespace ferry::vulkan
