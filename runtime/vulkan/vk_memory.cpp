// runtime/vulkan/vk_memory.cpp — allocating tensors' buffers from the
// device's memory pools (vk_memory_pools.hpp), sub-buffers, and the copies
// between host and device (docs/vulkan.md, Memory).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "ferry/error.hpp"
#include "log_internal.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_recorder.hpp"

namespace ferry::vulkan {
namespace {

// Copies larger than this go through staging in pieces, so staging stays bounded.
constexpr std::uint64_t kStagingChunk = std::uint64_t(64) << 20;

}  // namespace

std::unique_ptr<VulkanBuffer> VulkanDevice::allocate_in(Lock& lock, int p, std::size_t bytes) {
  check_alive();
  failure_point(*this, p == kStagingPool ? "allocate (staging)" : "allocate");
  detail::BlockAllocator& allocator = memory_->allocator(p);
  if (p == kStagingPool) {
    // The bound on staging memory waiting for its batches (Note [Vulkan execution]).
    recorder_->make_room_for_staging(lock, bytes);
  }
  detail::AllocResult r = allocator.allocate(bytes, recorder_->completed_serial());
  if (r.status == detail::AllocStatus::out_of_memory) {
    // Staging memory may wait in the deferred list, and the cache may hold
    // blocks the GPU was still using: finish the queue, release both, then
    // try once more.
    synchronize_locked(lock);
    for (int each : {kDevicePool, kStagingPool})
      memory_->allocator(each).empty_cache(recorder_->completed_serial());
    r = allocator.allocate(bytes, recorder_->completed_serial());
  }
  if (!r.ok()) {
    const std::uint64_t total = memory_->heap_size(p);
    const std::uint64_t reserved = allocator.stats().reserved;
    const std::uint64_t free = total > reserved ? total - reserved : 0;
    std::string why = r.status == detail::AllocStatus::exceeds_max_allocation
                          ? fmt::format("more than the device's largest allocation ({} bytes)",
                                        allocator.effective_config().max_allocation)
                          : fmt::format("{} bytes free", free);
    throw OutOfMemoryError(fmt::format("{}: out of memory allocating {} bytes ({}); free tensors "
                                       "or use a smaller batch",
                                       device().str(), bytes, why),
                           bytes, free, device().str());
  }
  const MemoryPools::Block& b = memory_->block(p, r.allocation.block);
  std::byte* mapped = b.mapped ? b.mapped + r.allocation.offset : nullptr;
  auto buffer = std::make_unique<VulkanBuffer>(*this, p, r.allocation, b.buffer, mapped, bytes);
  buffer->last_use = r.reuse_tag;  // the host waits for the range's earlier users
  return buffer;
}

bool VulkanDevice::memory_is_mapped() const { return memory_->mapped(kDevicePool); }

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

MemoryStats VulkanDevice::memory_stats() { return memory_->allocator(kDevicePool).stats(); }

void VulkanDevice::reset_peak_memory_stats() { memory_->allocator(kDevicePool).reset_peak(); }

void VulkanDevice::empty_cache() {
  Lock lock(mutex_);
  recorder_->retire();
  for (int p : {kDevicePool, kStagingPool})
    memory_->allocator(p).empty_cache(recorder_->completed_serial());
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
      recorder_->wait_for(lock,
                          d.last_use);  // the GPU must be done with the bytes the host overwrites
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
    recorder_->record_copy(*staging, d, {staging->offset(), d.offset() + dst_offset + done, n},
                           Lane::transfer);
    recorder_->throttle(lock);
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
      recorder_->wait_for(lock, s.last_use);
    }
    host_memcpy(dst, static_cast<const std::byte*>(s.host_ptr()) + src_offset, bytes);
    return;
  }
  for (std::size_t done = 0; done < bytes;) {
    std::size_t n = std::min<std::size_t>(bytes - done, kStagingChunk);
    std::unique_ptr<VulkanBuffer> staging;  // before the lock: freed after it is released
    Lock lock(mutex_);
    staging = allocate_in(lock, kStagingPool, n);
    recorder_->record_copy(s, *staging, {s.offset() + src_offset + done, staging->offset(), n},
                           Lane::transfer);
    recorder_->wait_for(lock, staging->last_use);
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
  // Between host memory (staging, registered) and device memory: the transfer
  // queue's, where there is one (Note [Transfer queue] in vk_recorder.hpp).
  auto in_host_memory = [](const VulkanBuffer& b) { return b.pool() != kDevicePool; };
  const Lane lane = in_host_memory(s) != in_host_memory(d) ? Lane::transfer : Lane::compute;
  Lock lock(mutex_);
  recorder_->record_copy(s, d, {s.offset() + src_offset, d.offset() + dst_offset, bytes}, lane);
  recorder_->throttle(lock);
}

}  // namespace ferry::vulkan
