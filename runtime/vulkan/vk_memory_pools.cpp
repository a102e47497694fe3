// runtime/vulkan/vk_memory_pools.cpp — the device's memory pools
// (vk_memory_pools.hpp).
#include "vulkan/vk_memory_pools.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ferry/error.hpp"
#include "log_internal.hpp"
#include "vulkan/vk_error.hpp"

namespace ferry::vulkan {
namespace {

constexpr VkBufferUsageFlags kBufferUsage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                            VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                            VK_BUFFER_USAGE_TRANSFER_DST_BIT;

}  // namespace

MemoryPools::MemoryPools(VkDevice device, const VolkDeviceTable& vk, VkPhysicalDevice pd,
                         std::string device_name, std::uint64_t storage_alignment,
                         bool force_staging, std::vector<std::uint32_t> queue_families)
    : device_(device),
      vk_(vk),
      device_name_(std::move(device_name)),
      queue_families_(std::move(queue_families)) {
  vkGetPhysicalDeviceMemoryProperties(pd, &memory_props_);
  // Which memory types can back our buffers.
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = 4096;
  bci.usage = kBufferUsage;
  share(bci, queue_families_);
  VkBuffer probe;
  check(vk_.vkCreateBuffer(device_, &bci, nullptr, &probe), "vkCreateBuffer");
  VkMemoryRequirements req;
  vk_.vkGetBufferMemoryRequirements(device_, probe, &req);
  vk_.vkDestroyBuffer(device_, probe, nullptr);

  const auto& mp = memory_props_;
  auto flags = [&](std::uint32_t t) { return mp.memoryTypes[t].propertyFlags; };
  auto heap_size = [&](std::uint32_t t) {
    return mp.memoryHeaps[mp.memoryTypes[t].heapIndex].size;
  };
  constexpr VkMemoryPropertyFlags kMappable =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  std::optional<std::uint32_t> device_type, mapped_device_type, staging_type;
  for (std::uint32_t t = 0; t < mp.memoryTypeCount; ++t) {
    if (!(req.memoryTypeBits & (1u << t))) continue;
    const VkMemoryPropertyFlags f = flags(t);
    if (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) {
      if (!device_type || heap_size(t) > heap_size(*device_type)) device_type = t;
      if ((f & kMappable) == kMappable &&
          (!mapped_device_type || heap_size(t) > heap_size(*mapped_device_type)))
        mapped_device_type = t;
    }
    if ((f & kMappable) == kMappable &&
        (!staging_type || ((f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) &&
                           !(flags(*staging_type) & VK_MEMORY_PROPERTY_HOST_CACHED_BIT))))
      staging_type = t;
  }
  if (!device_type) device_type = staging_type;
  if (!device_type || !staging_type)
    throw BackendError("vulkan: the device has no memory type for storage buffers",
                       "no_memory_type");
  // Device-local memory the host can map directly (integrated GPUs, lavapipe, resizable BAR)
  // is used for everything when its heap is as large as the largest device-local heap: then
  // transfers need no staging copy. A small BAR window (256 MiB) is not worth it.
  bool direct = mapped_device_type && heap_size(*mapped_device_type) >= heap_size(*device_type) &&
                !force_staging;
  if (direct) device_type = mapped_device_type;

  VkPhysicalDeviceMaintenance3Properties m3{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &m3;
  vkGetPhysicalDeviceProperties2(pd, &p2);

  for (int p : {int(kDevice), int(kStaging)}) {
    PoolState& pool = pools_[p];
    pool.type_index = p == kDevice ? *device_type : *staging_type;
    pool.heap_index = mp.memoryTypes[pool.type_index].heapIndex;
    pool.mapped = p == kStaging || direct;
    detail::BlockAllocatorConfig cfg;
    cfg.alignment = std::max<std::uint64_t>({256, req.alignment, storage_alignment});
    cfg.max_allocation = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : UINT64_MAX;
    cfg.block_size = std::min<std::uint64_t>(cfg.block_size, cfg.max_allocation);
    cfg.large_threshold = std::min(cfg.large_threshold, cfg.block_size);
    pool.allocator = std::make_unique<detail::BlockAllocator>(
        cfg, [this, p](std::uint64_t bytes) { return acquire_block(p, bytes); },
        [this, p](std::uint64_t id) { release_block(p, id); });
  }
}

void MemoryPools::share(VkBufferCreateInfo& bci, const std::vector<std::uint32_t>& families) {
  if (families.size() < 2) return;
  bci.sharingMode = VK_SHARING_MODE_CONCURRENT;
  bci.queueFamilyIndexCount = std::uint32_t(families.size());
  bci.pQueueFamilyIndices = families.data();
}

std::optional<std::uint64_t> MemoryPools::acquire_block(int p, std::uint64_t bytes) {
  PoolState& pool = pools_[p];
  Block b;
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = bytes;
  mai.memoryTypeIndex = pool.type_index;
  VkResult r = vk_.vkAllocateMemory(device_, &mai, nullptr, &b.memory);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) return std::nullopt;
  check(r, "vkAllocateMemory");
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = bytes;
  bci.usage = kBufferUsage;
  share(bci, queue_families_);
  r = vk_.vkCreateBuffer(device_, &bci, nullptr, &b.buffer);
  if (r == VK_SUCCESS) r = vk_.vkBindBufferMemory(device_, b.buffer, b.memory, 0);
  void* mapped = nullptr;
  if (r == VK_SUCCESS && pool.mapped)
    r = vk_.vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &mapped);
  if (r != VK_SUCCESS) {
    if (b.buffer) vk_.vkDestroyBuffer(device_, b.buffer, nullptr);
    vk_.vkFreeMemory(device_, b.memory, nullptr);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) return std::nullopt;
    throw_result(r, "creating a buffer");
  }
  b.mapped = static_cast<std::byte*>(mapped);
  std::uint64_t id = pool.next_block++;
  pool.blocks.emplace(id, b);
  FERRY_DEBUG("{}: new memory block {} of {} bytes (memory type {})", device_name_, id, bytes,
              pool.type_index);
  return id;
}

void MemoryPools::release_block(int p, std::uint64_t id) {
  PoolState& pool = pools_[p];
  auto it = pool.blocks.find(id);
  if (it == pool.blocks.end()) return;
  vk_.vkDestroyBuffer(device_, it->second.buffer, nullptr);
  vk_.vkFreeMemory(device_, it->second.memory, nullptr);  // unmaps too
  pool.blocks.erase(it);
}

MemoryPools::~MemoryPools() {
  for (PoolState& pool : pools_)
    if (pool.allocator) {
      pool.allocator->empty_cache();
      pool.allocator.reset();  // gives back every block through release_block
    }
}

std::uint64_t MemoryPools::heap_size(int pool) const {
  return memory_props_.memoryHeaps[pools_[pool].heap_index].size;
}

}  // namespace ferry::vulkan
