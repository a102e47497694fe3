// runtime/cpu/cpu_allocator.cpp — Note [CPU caching allocator].
#include "cpu/cpu_allocator.hpp"

#include <algorithm>
#include <cstdlib>

namespace ferry::cpu {

namespace {
bool sanitizer_active() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#endif
#endif
  return false;
}
}  // namespace

CachingAllocator::CachingAllocator(std::uint64_t cache_cap, std::uint64_t limit)
    : cache_cap_(cache_cap), limit_(limit), caching_(!sanitizer_active()) {}

CachingAllocator::~CachingAllocator() { empty_cache(); }

std::size_t CachingAllocator::round(std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 1);
  if (bytes < kCacheMin) return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return (bytes + kCacheGranule - 1) / kCacheGranule * kCacheGranule;
}

void* CachingAllocator::allocate(std::size_t bytes, std::size_t* capacity) {
  std::size_t cap = round(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.allocations;
  void* p = nullptr;
  if (auto it = free_.find(cap); it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    cached_ -= cap;
    ++stats_.cache_hits;
  } else if (limit_ == 0 || cap <= limit_) {
    p = std::aligned_alloc(kAlignment, cap);
    if (!p && cached_) {  // release the cache and try once more
      empty_cache_locked();
      p = std::aligned_alloc(kAlignment, cap);
    }
  }
  if (!p) {
    --stats_.allocations;
    return nullptr;
  }
  stats_.allocated += cap;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  stats_.reserved = stats_.allocated + cached_;
  *capacity = cap;
  return p;
}

void CachingAllocator::release(void* p, std::size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.allocated -= capacity;
  if (caching_ && capacity >= kCacheMin && cached_ + capacity <= cache_cap_) {
    free_[capacity].push_back(p);
    cached_ += capacity;
  } else {
    std::free(p);
  }
  stats_.reserved = stats_.allocated + cached_;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  empty_cache_locked();
}

void CachingAllocator::empty_cache_locked() {
  for (auto& [cap, blocks] : free_)
    for (void* p : blocks) std::free(p);
  free_.clear();
  cached_ = 0;
  stats_.reserved = stats_.allocated;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated = stats_.allocated;
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace ferry::cpu
