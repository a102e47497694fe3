// cuda/cuda_memory_policy.hpp — the CUDA device's allocator settings (Note
// [CUDA memory] in cuda_memory.cpp), apart from any CUDA call so that
// tests/test_cuda_host.cpp checks the size classes on every machine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/kit/block_allocator.hpp"

namespace ferry::cuda {

inline constexpr std::uint64_t kMiB = std::uint64_t(1) << 20;
// Host to device copies from pageable memory are staged in chunks of this
// size, and at most kMaxStagingInFlight bytes of them wait for their copies.
inline constexpr std::size_t kStagingChunk = 32 * kMiB;
inline constexpr std::uint64_t kMaxStagingInFlight = 256 * kMiB;

// Device memory (cudaMalloc blocks), PyTorch's size classes: requests up to
// 10 MiB are rounded up to 512 bytes and carved best fit out of shared 20 MiB
// blocks; larger ones are rounded up to 2 MiB and get a dedicated block.
inline detail::BlockAllocatorConfig device_allocator_config() {
  detail::BlockAllocatorConfig c;
  c.block_size = 20 * kMiB;
  c.large_threshold = 10 * kMiB;
  c.alignment = 512;
  c.large_granule = 2 * kMiB;
  return c;
}

// Pinned host memory (cudaHostAlloc blocks) for staging: one staging chunk
// fits a shared block twice over.
inline detail::BlockAllocatorConfig pinned_allocator_config() {
  detail::BlockAllocatorConfig c;
  c.block_size = 64 * kMiB;
  c.large_threshold = 64 * kMiB;
  c.alignment = 256;
  c.large_granule = 2 * kMiB;
  return c;
}

}  // namespace ferry::cuda
