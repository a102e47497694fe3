// runtime/cpu/cpu_allocator.hpp — host memory for the CPU device.
//
// Note [CPU caching allocator]
// A fresh large allocation costs a page fault per 4 KiB page on first touch
// (glibc hands blocks above 128 KiB to mmap and back to munmap on free), which
// for a 256 MiB tensor costs more than the op that fills it. Blocks of at
// least kCacheMin bytes are therefore rounded up to a multiple of kCacheGranule
// and kept on free lists by size when freed, up to a cap; a request takes a
// cached block of exactly its rounded size. Small blocks go straight to
// malloc, which already caches them. Under AddressSanitizer caching is off so
// that ASan sees every free and every use after it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ferry/memory.hpp"

namespace ferry::cpu {

class CachingAllocator {
 public:
  static constexpr std::size_t kAlignment = 64;
  static constexpr std::size_t kCacheMin = std::size_t(1) << 20;      // 1 MiB
  static constexpr std::size_t kCacheGranule = std::size_t(2) << 20;  // 2 MiB

  // `cache_cap`: the most bytes kept cached; `limit`: no single request above
  // it is attempted (RAM + swap).
  CachingAllocator(std::uint64_t cache_cap, std::uint64_t limit);
  ~CachingAllocator();

  // Returns nullptr when the system has no memory even after the cache is
  // released. `*capacity` receives the block's real size.
  void* allocate(std::size_t bytes, std::size_t* capacity);
  void release(void* p, std::size_t capacity);
  void empty_cache();
  MemoryStats stats() const;
  void reset_peak();

  static std::size_t round(std::size_t bytes);

 private:
  void empty_cache_locked();
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;  // by capacity
  std::uint64_t cached_ = 0;
  std::uint64_t cache_cap_;
  std::uint64_t limit_;
  MemoryStats stats_;
  bool caching_;
};

}  // namespace ferry::cpu
