// runtime/vulkan/vk_memory.cpp — the device's memory pools (device-local and
// host-visible staging, each a detail::BlockAllocator over VkDeviceMemory
// blocks) and the copies between host and device (docs/vulkan.md, Memory).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "ferry/error.hpp"
#include "log_internal.hpp"
#include "vulkan/vk_device.hpp"

namespace ferry::vulkan {
namespace {

constexpr VkBufferUsageFlags kBufferUsage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                            VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                            VK_BUFFER_USAGE_TRANSFER_DST_BIT;

// Copies larger than this go through staging in pieces, so staging stays bounded.
constexpr std::uint64_t kStagingChunk = std::uint64_t(64) << 20;

}  // namespace

void VulkanDevice::choose_memory() {
  VkPhysicalDevice pd = physical_.handle;
  vkGetPhysicalDeviceMemoryProperties(pd, &memory_props_);
  // Which memory types can back our buffers.
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = 4096;
  bci.usage = kBufferUsage;
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
                !env_flag("FERRY_VULKAN_FORCE_STAGING");
  if (direct) device_type = mapped_device_type;

  VkPhysicalDeviceMaintenance3Properties m3{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &m3;
  vkGetPhysicalDeviceProperties2(pd, &p2);

  for (int p : {int(kDevicePool), int(kStagingPool)}) {
    Pool& pool = pools_[p];
    pool.type_index = p == kDevicePool ? *device_type : *staging_type;
    pool.heap_index = mp.memoryTypes[pool.type_index].heapIndex;
    pool.mapped = p == kStagingPool || direct;
    detail::BlockAllocatorConfig cfg;
    cfg.alignment = std::max<std::uint64_t>({256, req.alignment, storage_alignment_});
    cfg.max_allocation = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : UINT64_MAX;
    cfg.block_size = std::min<std::uint64_t>(cfg.block_size, cfg.max_allocation);
    cfg.large_threshold = std::min(cfg.large_threshold, cfg.block_size);
    pool.allocator = std::make_unique<detail::BlockAllocator>(
        cfg, [this, p](std::uint64_t bytes) { return acquire_block(p, bytes); },
        [this, p](std::uint64_t id) { release_block(p, id); });
  }
}

bool VulkanDevice::memory_is_mapped() const { return pools_[kDevicePool].mapped; }

std::optional<std::uint64_t> VulkanDevice::acquire_block(int p, std::uint64_t bytes) {
  Pool& pool = pools_[p];
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
  FERRY_DEBUG("{}: new memory block {} of {} bytes (memory type {})", device().str(), id, bytes,
              pool.type_index);
  return id;
}

void VulkanDevice::release_block(int p, std::uint64_t id) {
  Pool& pool = pools_[p];
  auto it = pool.blocks.find(id);
  if (it == pool.blocks.end()) return;
  vk_.vkDestroyBuffer(device_, it->second.buffer, nullptr);
  vk_.vkFreeMemory(device_, it->second.memory, nullptr);  // unmaps too
  pool.blocks.erase(it);
}

std::unique_ptr<VulkanBuffer> VulkanDevice::allocate_in(Lock& lock, int p, std::size_t bytes) {
  check_alive();
  failure_point(*this, p == kStagingPool ? "allocate (staging)" : "allocate");
  Pool& pool = pools_[p];
  if (p == kStagingPool) {
    // The bound on staging memory waiting for its batches (Note [Vulkan execution]).
    retire();
    while (!deferred_.empty() && deferred_bytes_ + bytes > kMaxStagingInFlight)
      wait_for(lock, deferred_.begin()->first);
  }
  detail::AllocResult r = pool.allocator->allocate(bytes, completed_serial_);
  if (r.status == detail::AllocStatus::out_of_memory) {
    // Staging memory may wait in the deferred list, and the cache may hold
    // blocks the GPU was still using: finish the queue, release both, then
    // try once more.
    synchronize_locked(lock);
    for (auto& each : pools_) each.allocator->empty_cache(completed_serial_);
    r = pool.allocator->allocate(bytes, completed_serial_);
  }
  if (!r.ok()) {
    const std::uint64_t total = memory_props_.memoryHeaps[pool.heap_index].size;
    const std::uint64_t reserved = pool.allocator->stats().reserved;
    const std::uint64_t free = total > reserved ? total - reserved : 0;
    std::string why = r.status == detail::AllocStatus::exceeds_max_allocation
                          ? fmt::format("more than the device's largest allocation ({} bytes)",
                                        pool.allocator->effective_config().max_allocation)
                          : fmt::format("{} bytes free", free);
    throw OutOfMemoryError(fmt::format("{}: out of memory allocating {} bytes ({}); free tensors "
                                       "or use a smaller batch",
                                       device().str(), bytes, why),
                           bytes, free, device().str());
  }
  const Block& b = pool.blocks.at(r.allocation.block);
  std::byte* mapped = b.mapped ? b.mapped + r.allocation.offset : nullptr;
  auto buffer = std::make_unique<VulkanBuffer>(*this, p, r.allocation, b.buffer, mapped, bytes);
  buffer->last_use = r.reuse_tag;  // the host waits for the range's earlier users
  return buffer;
}

std::unique_ptr<Buffer> VulkanDevice::allocate(std::size_t bytes) {
  Lock lock(mutex_);
  return allocate_in(lock, kDevicePool, bytes);
}

std::unique_ptr<Buffer> VulkanDevice::sub_buffer(std::shared_ptr<Buffer> parent, std::size_t offset,
                                                 std::size_t bytes) {
  auto* p = dynamic_cast<VulkanBuffer*>(parent.get());
  if (!p || &p->device() != this || offset + bytes > p->size() ||
      (p->offset() + offset) % storage_alignment_ != 0)
    throw Error(
        fmt::format("{}: sub_buffer [{}, {}) is not an aligned range of a buffer of this "
                    "device",
                    device().str(), offset, offset + bytes));
  detail::Allocation a = p->allocation();
  a.offset += offset;
  a.size = bytes;
  std::byte* mapped = p->host_ptr() ? static_cast<std::byte*>(p->host_ptr()) + offset : nullptr;
  std::uint64_t last_use = 0;
  {
    std::lock_guard lock(mutex_);
    last_use = p->last_use;  // the parent's reuse tag: the host waits for it too
  }
  auto sub = std::make_unique<VulkanBuffer>(*this, p->pool(), a, p->handle(), mapped, bytes,
                                            std::move(parent));
  sub->last_use = last_use;  // not shared yet: no lock needed
  return sub;
}

std::unique_ptr<Buffer> VulkanDevice::allocate_staging(std::size_t bytes) {
  Lock lock(mutex_);
  return allocate_in(lock, kStagingPool, bytes);
}

MemoryStats VulkanDevice::memory_stats() { return pools_[kDevicePool].allocator->stats(); }

void VulkanDevice::reset_peak_memory_stats() { pools_[kDevicePool].allocator->reset_peak(); }

void VulkanDevice::empty_cache() {
  Lock lock(mutex_);
  retire();
  for (auto& pool : pools_) pool.allocator->empty_cache(completed_serial_);
}

// ---- copies ----

namespace {
VulkanBuffer& as_vk(const Buffer& b, const VulkanDevice& d, const char* what) {
  auto* vb = dynamic_cast<const VulkanBuffer*>(&b);
  if (!vb || &vb->device() != &d)
    throw DeviceError(fmt::format("{}: {} is not a buffer of this device", d.device().str(), what));
  return const_cast<VulkanBuffer&>(*vb);
}
}  // namespace

void VulkanDevice::copy_from_host(Buffer& dst, std::size_t dst_offset, const void* src,
                                  std::size_t bytes) {
  VulkanBuffer& d = as_vk(dst, *this, "copy destination");
  if (bytes == 0) return;
  failure_point(*this, "copy_from_host");
  if (d.host_ptr()) {
    {
      Lock lock(mutex_);
      wait_for(lock, d.last_use);  // the GPU must be done with the bytes the host overwrites
    }
    host_memcpy(static_cast<std::byte*>(d.host_ptr()) + dst_offset, src, bytes);
    return;
  }
  for (std::size_t done = 0; done < bytes;) {
    std::size_t n = std::min<std::size_t>(bytes - done, kStagingChunk);
    std::unique_ptr<VulkanBuffer> staging;  // before the lock: freed after it is released
    Lock lock(mutex_);
    staging = allocate_in(lock, kStagingPool, n);
    lock.unlock();  // a fresh staging range: nothing else touches it
    host_memcpy(staging->host_ptr(), static_cast<const std::byte*>(src) + done, n);
    lock.lock();
    record_copy(*staging, d, {staging->offset(), d.offset() + dst_offset + done, n});
    throttle(lock);
    done += n;
  }  // each staging range is freed once its batch has completed
}

void VulkanDevice::copy_to_host(void* dst, const Buffer& src, std::size_t src_offset,
                                std::size_t bytes) {
  VulkanBuffer& s = as_vk(src, *this, "copy source");
  if (bytes == 0) return;
  failure_point(*this, "copy_to_host");
  if (s.host_ptr()) {
    {
      Lock lock(mutex_);
      wait_for(lock, s.last_use);
    }
    host_memcpy(dst, static_cast<const std::byte*>(s.host_ptr()) + src_offset, bytes);
    return;
  }
  for (std::size_t done = 0; done < bytes;) {
    std::size_t n = std::min<std::size_t>(bytes - done, kStagingChunk);
    std::unique_ptr<VulkanBuffer> staging;  // before the lock: freed after it is released
    Lock lock(mutex_);
    staging = allocate_in(lock, kStagingPool, n);
    record_copy(s, *staging, {s.offset() + src_offset + done, staging->offset(), n});
    wait_for(lock, staging->last_use);
    lock.unlock();
    host_memcpy(static_cast<std::byte*>(dst) + done, staging->host_ptr(), n);
    done += n;
  }
}

void VulkanDevice::copy_within(Buffer& dst, std::size_t dst_offset, const Buffer& src,
                               std::size_t src_offset, std::size_t bytes) {
  VulkanBuffer& d = as_vk(dst, *this, "copy destination");
  VulkanBuffer& s = as_vk(src, *this, "copy source");
  if (bytes == 0) return;
  failure_point(*this, "copy_within");
  Lock lock(mutex_);
  record_copy(s, d, {s.offset() + src_offset, d.offset() + dst_offset, bytes});
  throttle(lock);
}

}  // namespace ferry::vulkan
