// runtime/pinned_memory.cpp — Note [Pinned host memory] in pinned_memory.hpp.
#include "pinned_memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/memory.hpp"
#include "ferry/registry.hpp"

namespace ferry::detail {
namespace {

// One block of page-aligned host memory and its registrations, in the order
// of the devices it was pinned for.
struct PinnedBlock {
  void* ptr = nullptr;
  std::size_t capacity = 0;
  std::vector<DeviceImpl*> devices;
  std::vector<std::unique_ptr<Buffer>> registrations;
};

void release_block(PinnedBlock& b) noexcept {
  b.registrations.clear();  // unregister before the memory goes
  std::free(b.ptr);
  b.ptr = nullptr;
}

std::size_t round_capacity(std::size_t bytes) {
  constexpr std::size_t kGranule = std::size_t(2) << 20;
  bytes = std::max<std::size_t>(bytes, 1);
  if (bytes < (std::size_t(1) << 20))
    return (bytes + kPinnedAlignment - 1) / kPinnedAlignment * kPinnedAlignment;
  return (bytes + kGranule - 1) / kGranule * kGranule;
}

class PinnedCache {
 public:
  ~PinnedCache() { empty(); }

  // A cached block of exactly this capacity pinned for exactly these devices.
  bool take(std::size_t capacity, const std::vector<DeviceImpl*>& devices, PinnedBlock& out) {
    std::lock_guard lock(mutex_);
    auto it = free_.find({capacity, devices});
    if (it == free_.end() || it->second.empty()) return false;
    out = std::move(it->second.back());
    it->second.pop_back();
    cached_ -= capacity;
    stats_.allocated += capacity;
    ++stats_.allocations;
    ++stats_.cache_hits;
    update_peak();
    return true;
  }

  void count_new(std::size_t capacity) {
    std::lock_guard lock(mutex_);
    stats_.allocated += capacity;
    ++stats_.allocations;
    update_peak();
  }

  void give_back(PinnedBlock b) noexcept {
    std::unique_lock lock(mutex_);
    stats_.allocated -= b.capacity;
    if (cached_ + b.capacity <= kPinnedCacheCap) {
      try {
        free_[{b.capacity, b.devices}].push_back(std::move(b));
        cached_ += b.capacity;
        stats_.reserved = stats_.allocated + cached_;
        return;
      } catch (...) {
        // No memory for the list entry: release the block instead of caching it.
      }
    }
    stats_.reserved = stats_.allocated + cached_;
    lock.unlock();
    release_block(b);
  }

  void empty() noexcept {
    std::map<Key, std::vector<PinnedBlock>> blocks;
    {
      std::lock_guard lock(mutex_);
      blocks.swap(free_);
      cached_ = 0;
      stats_.reserved = stats_.allocated;
    }
    for (auto& [key, list] : blocks)
      for (PinnedBlock& b : list) release_block(b);
  }

  MemoryStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  using Key = std::pair<std::size_t, std::vector<DeviceImpl*>>;
  void update_peak() {
    stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
    stats_.reserved = stats_.allocated + cached_;
  }
  std::mutex mutex_;
  std::map<Key, std::vector<PinnedBlock>> free_;
  std::size_t cached_ = 0;
  MemoryStats stats_;
};

PinnedCache& cache() {
  // Never destroyed: buffers may be freed during static destruction, after
  // the devices' own teardown would have made unregistering unsafe.
  static auto* c = new PinnedCache;
  return *c;
}

class PinnedBuffer final : public Buffer {
 public:
  PinnedBuffer(std::size_t size, PinnedBlock block) : Buffer(size), block_(std::move(block)) {}
  ~PinnedBuffer() override { cache().give_back(std::move(block_)); }
  void* host_ptr() const override { return block_.ptr; }
  Registration registration(const DeviceImpl& device) const override {
    for (std::size_t i = 0; i < block_.devices.size(); ++i)
      if (block_.devices[i] == &device) return {block_.registrations[i].get(), 0};
    return {};
  }

 private:
  PinnedBlock block_;
};

}  // namespace

std::unique_ptr<Buffer> allocate_pinned(std::size_t bytes,
                                        const std::vector<DeviceImpl*>& devices) {
  const std::size_t capacity = round_capacity(bytes);
  PinnedBlock block;
  if (!cache().take(capacity, devices, block)) {
    block.ptr = std::aligned_alloc(kPinnedAlignment, capacity);
    if (!block.ptr) {
      cache().empty();
      block.ptr = std::aligned_alloc(kPinnedAlignment, capacity);
    }
    if (!block.ptr)
      throw OutOfMemoryError(
          fmt::format("pin_memory: cannot allocate {} bytes of host memory", capacity), capacity, 0,
          "cpu");
    block.capacity = capacity;
    block.devices = devices;
    for (DeviceImpl* d : devices) {
      std::unique_ptr<Buffer> reg;
      try {
        reg = d->register_host_memory(block.ptr, capacity);
      } catch (...) {
        release_block(block);
        throw;
      }
      if (!reg) {
        release_block(block);
        throw UnsupportedError(
            fmt::format("pin_memory: {} cannot pin {} bytes of host memory (its driver refused the "
                        "registration)",
                        d->device().str(), capacity));
      }
      block.registrations.push_back(std::move(reg));
    }
    cache().count_new(capacity);
  }
  return std::make_unique<PinnedBuffer>(bytes, std::move(block));
}

Tensor pin_tensor(const Tensor& t, const std::vector<DeviceImpl*>& devices) {
  if (!t.device().is_cpu())
    throw DeviceError(fmt::format(
        "pin_memory: only CPU tensors can be pinned, and this one is on {}; pin the CPU tensor "
        "before moving it",
        t.device().str()));
  const Buffer& buffer = t.storage()->buffer();
  if (std::all_of(devices.begin(), devices.end(),
                  [&](DeviceImpl* d) { return buffer.registration(*d).buffer != nullptr; }))
    return t;
  Tensor out = autograd::untracked([&] {
    Tensor src = t.contiguous();
    const std::size_t bytes = std::size_t(t.numel()) * t.element_size();
    auto storage =
        std::make_shared<Storage>(device_impl(Device::cpu()), allocate_pinned(bytes, devices));
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = storage;
    impl->sizes = t.sizes();
    impl->strides = contiguous_strides(t.sizes());
    impl->dtype = t.dtype();
    Tensor o(impl);
    copy_storage_bytes(*storage, 0, *src.storage(),
                       std::size_t(src.storage_offset()) * t.element_size(), bytes);
    return o;
  });
  autograd::record_identity("pin_memory", t, out);
  return out;
}

bool is_pinned(const Buffer& buffer) { return dynamic_cast<const PinnedBuffer*>(&buffer); }

std::vector<DeviceImpl*> default_pinning_devices() {
  std::vector<DeviceImpl*> out;
  for (const DeviceInfo& info : devices()) {
    if (!info.available || info.backend == "cpu") continue;
    // A discrete GPU gains even where the host maps its memory (a BAR); an
    // integrated GPU or a CPU device whose memory is the host's does not.
    if (!info.caps.host_registration) continue;
    if (info.caps.host_visible_memory && info.kind != DeviceKind::discrete_gpu) continue;
    out.push_back(&device_impl(Device(info.device)));
  }
  return out;
}

}  // namespace ferry::detail

namespace ferry {

void empty_pinned_cache() { detail::cache().empty(); }

MemoryStats pinned_memory_stats() { return detail::cache().stats(); }

}  // namespace ferry
