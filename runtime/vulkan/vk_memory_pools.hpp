// runtime/vulkan/vk_memory_pools.hpp — one device's two memory pools, each a
// detail::BlockAllocator over VkDeviceMemory blocks with one VkBuffer per
// block: device memory (device-local; host-mapped too where the device-local
// heap is the host's, as on lavapipe and integrated GPUs) and staging
// memory (host-visible, for copies through the host). The memory types are
// chosen once, when the pools are made (docs/vulkan.md, Memory).
//
// Not thread-safe by itself: the device calls it with its mutex held (Note
// [Vulkan threading] in vk_device.hpp), and decides when a range may be
// reused (Note [Vulkan execution]).
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <volk.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ferry/kit/block_allocator.hpp"

namespace ferry::vulkan {

class MemoryPools {
 public:
  enum Pool { kDevice = 0, kStaging = 1 };
  struct Block {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkBuffer buffer = VK_NULL_HANDLE;
    std::byte* mapped = nullptr;  // the whole block, when its pool is mapped
  };

  // Chooses the memory types. `storage_alignment`: the device's
  // minStorageBufferOffsetAlignment (every range starts on it);
  // `force_staging`: never map device memory (FERRY_VULKAN_FORCE_STAGING);
  // `queue_families`: the families that use the blocks, each once (more than
  // one: concurrent sharing, Note [Transfer queue] in vk_recorder.hpp).
  MemoryPools(VkDevice device, const VolkDeviceTable& vk, VkPhysicalDevice physical,
              std::string device_name, std::uint64_t storage_alignment, bool force_staging,
              std::vector<std::uint32_t> queue_families);
  // Sets `bci`'s sharing mode for the families (the vector must outlive the call it is for).
  static void share(VkBufferCreateInfo& bci, const std::vector<std::uint32_t>& queue_families);
  // Frees every block (before the VkDevice goes).
  ~MemoryPools();
  MemoryPools(const MemoryPools&) = delete;
  MemoryPools& operator=(const MemoryPools&) = delete;

  detail::BlockAllocator& allocator(int pool) { return *pools_[pool].allocator; }
  const Block& block(int pool, std::uint64_t id) const { return pools_[pool].blocks.at(id); }
  // Whether the pool's blocks are mapped for the host.
  bool mapped(int pool) const { return pools_[pool].mapped; }
  // The size of the heap the pool's memory type is in, and its index.
  std::uint64_t heap_size(int pool) const;
  std::uint32_t heap_index(int pool) const { return pools_[pool].heap_index; }

 private:
  struct PoolState {
    std::uint32_t type_index = 0;
    std::uint32_t heap_index = 0;
    bool mapped = false;  // blocks are mapped persistently
    std::unique_ptr<detail::BlockAllocator> allocator;
    std::unordered_map<std::uint64_t, Block> blocks;
    std::uint64_t next_block = 1;
  };
  // The allocators' block callbacks: nullopt when the driver is out of memory.
  std::optional<std::uint64_t> acquire_block(int pool, std::uint64_t bytes);
  void release_block(int pool, std::uint64_t id);

  VkDevice device_;
  const VolkDeviceTable& vk_;
  std::string device_name_;
  std::vector<std::uint32_t> queue_families_;
  VkPhysicalDeviceMemoryProperties memory_props_{};
  PoolState pools_[2];
};

}  // namespace ferry::vulkan
