// runtime/vulkan/vk_pipelines.hpp — one device's shader modules, pipeline
// layouts and compute pipelines, made once per (shader, bindings,
// specialization constants) and kept, and the driver's pipeline cache, kept
// on disk between runs (Note [Pipeline cache] in vk_pipelines.cpp).
//
// Not thread-safe by itself: the device calls it with its mutex held (Note
// [Vulkan threading] in vk_device.hpp).
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <volk.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "vulkan/vk_kernels.hpp"
#include "vulkan/vk_policy.hpp"

namespace ferry::vulkan {

// What the backend learned about a physical device before opening it.
struct PhysicalDevice {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  std::uint32_t enumeration_index = 0;  // as the loader lists it (vulkaninfo's GPU id)
  VkPhysicalDeviceProperties props{};
  std::uint32_t api_version = 0;
};

class Pipelines {
 public:
  // Loads the on-disk cache. `device_name` ("vulkan:0") names it in logs;
  // `full_variant` picks the shaders' full or base SPIR-V;
  // `push_descriptors`: set layouts for vkCmdPushDescriptorSetKHR;
  // `subgroups`: make a shader's pipelines from its <name>_subgroup modules where it has them
  // (Note [Subgroup row reductions] in shaders/subgroup.glsl).
  Pipelines(VkDevice device, const VolkDeviceTable& vk, const PhysicalDevice& physical,
            std::string device_name, bool full_variant, bool push_descriptors, bool subgroups);
  // Destroys every object it made (before the VkDevice goes).
  ~Pipelines();
  Pipelines(const Pipelines&) = delete;
  Pipelines& operator=(const Pipelines&) = delete;

  struct Layout {
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout pipeline_layout = VK_NULL_HANDLE;
  };
  // `bindings` storage buffers and kMaxPushBytes of push constants.
  const Layout& layout_for(std::size_t bindings);
  VkPipeline pipeline_for(const DispatchDesc& d, const Layout& layout);
  // Makes SPIR-V a shader that DispatchDesc::shader can name (a user's
  // kernel); does nothing when `name` is taken.
  void add_shader(const std::string& name, const std::vector<std::uint32_t>& spirv);
  // The shaders this device has made pipelines of, sorted, comma-separated: which kernels
  // have run (ferry-devices --verbose, and tests that check a call took a given path).
  std::string shaders_used() const;
  // Writes the cache file when pipelines were made since it was read, and the tile file
  // when a tile was measured since (Note [Measured coopmat tiles] in vk_kernels_coopmat.cpp).
  void save_cache();
  // The cooperative-matrix module measured fastest for `key`, if it was, in this run or an
  // earlier one on the same driver.
  std::optional<std::string> tile(const TileKey& key) const;
  void remember_tile(const TileKey& key, std::string name);

 private:
  // The module `name` (and `op`, Note [Per-op shader modules]) is made from, made once.
  VkShaderModule shader_module(std::string_view name, std::uint32_t op, bool f64);
  // The embedded shader whose modules a dispatch of `name` runs: `name`, or its subgroup
  // variant.
  std::string module_shader(std::string_view name) const;
  void load_cache();
  std::string cache_path() const;

  VkDevice device_;
  const VolkDeviceTable& vk_;
  PhysicalDevice physical_;
  std::string device_name_;
  bool full_variant_;
  bool push_descriptors_;
  bool subgroups_;
  std::unordered_map<std::size_t, Layout> layouts_;
  std::unordered_map<std::string, VkShaderModule> modules_;
  struct CachedPipeline {
    std::string shader;
    std::string module_shader;  // module_shader(shader)
    std::size_t bindings;
    std::vector<std::uint32_t> spec;
    std::uint32_t op;  // with f64, which module (shader_module) the pipeline was made from
    bool f64;
    std::uint32_t subgroup_size;  // DispatchDesc::subgroup_size
    VkPipeline pipeline;
  };
  std::unordered_map<std::uint64_t, std::vector<CachedPipeline>> pipelines_;  // by key hash
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  bool cache_dirty_ = false;
  TileTable tiles_;
  bool tiles_dirty_ = false;
};

}  // namespace ferry::vulkan
