// ferry/memory.hpp — how much memory a device's allocator holds, and
// releasing what it caches.
#pragma once

#include <cstdint>

#include "ferry/device.hpp"

namespace ferry {

struct MemoryStats {
  std::uint64_t allocated = 0;       // bytes in live buffers
  std::uint64_t reserved = 0;        // bytes held from the system: allocated + cached
  std::uint64_t peak_allocated = 0;  // the most `allocated` has been
  std::uint64_t allocations = 0;     // buffers handed out
  std::uint64_t cache_hits = 0;      // ... of which came from the cache
};

// Stats of a device's allocator (zeros for a backend that keeps none).
// Thread-safe, like everything in this header.
MemoryStats memory_stats(const Device& device);
// Starts the device's peak_allocated afresh from what is allocated now (as
// torch.cuda.reset_peak_memory_stats), to measure the peak of one piece of work.
void reset_peak_memory_stats(const Device& device);
// Returns cached, unused memory to the system (a no-op where nothing is cached).
void empty_cache(const Device& device);

// Pinned host memory (Tensor::pin_memory): its cache's stats (reserved counts
// the cached blocks too), and releasing the cached blocks (unregistered from
// their devices first). As torch's host allocator stats and empty cache.
MemoryStats pinned_memory_stats();
void empty_pinned_cache();

}  // namespace ferry
