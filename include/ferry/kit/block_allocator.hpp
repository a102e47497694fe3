// include/ferry/kit/block_allocator.hpp — the device-agnostic bookkeeping of a caching
// sub-allocator: sub-ranges of large device-memory blocks.
//
// Note [Block allocator]
// Asking the driver for memory is slow (cudaMalloc, and cudaFree synchronizes
// the device) or limited (Vulkan's maxMemoryAllocationCount, as low as 4096
// live VkDeviceMemory objects), so the GPU backends take large blocks from the
// driver and hand out sub-ranges of them. The bookkeeping is the same for every
// backend and lives here once, with no driver in sight, so that it is
// unit-tested on a machine without a GPU (tests/test_block_allocator.cpp).
//
// - A backend supplies two callbacks: `acquire_block(bytes)` returns an opaque
//   block id (a cudaMalloc pointer, an index into the backend's own table of
//   VkDeviceMemory; it must be unique among live blocks) or nullopt when the
//   device is out of memory; `release_block(id)` gives a block back.
// - Small requests (at most `large_threshold` bytes) are rounded up to
//   `alignment` and carved, best fit, out of shared blocks of `block_size`
//   bytes; the rest of the chosen free range stays free, and a freed range is
//   merged with its free neighbours, so a block's ranges always tile it.
// - Large requests are rounded up to `large_granule` and get a dedicated block.
//   A freed dedicated block stays cached whole and serves a later large request
//   that it fits with at most 1/8 waste: training steps ask for the same large
//   activations every step, and a driver round trip per step is what the
//   cache is for. Dedicated blocks are never split, so one huge cached block
//   cannot be frittered away by small requests.
// - Every block with no live range stays cached until `empty_cache()`, or
//   until an acquire fails: then every free block is released and the acquire
//   is tried once more, before the request fails with
//   AllocStatus::out_of_memory (the backend turns that into
//   ferry::OutOfMemoryError with the bytes asked and free).
// - A request above `max_allocation` (Vulkan's maxMemoryAllocationSize) fails
//   with AllocStatus::exceeds_max_allocation without calling the driver;
//   shared blocks are never larger than it either.
//
// What stays with the backend: the allocator reuses a range as soon as it is
// freed, so the backend decides when a range may be freed, and whether its
// next owner must wait. Note [Reuse tags]: a free may carry a tag, the
// backend's completion serial of the last device work that used the range (0:
// nothing pending). A free range keeps the largest tag of the ranges merged
// into it, and allocate() reports the largest tag of the bytes it hands out
// (AllocResult::reuse_tag), so the new owner knows which work it follows:
// device work on the same queue is ordered after it by the backend (CUDA's
// stream order, Vulkan's barrier tracker), and only the host, writing mapped
// memory, must wait for that serial first. A block is given back to the
// driver (empty_cache, or the release-and-retry on a failed acquire) only
// when every tag in it is at most `completed`, the serial the backend knows
// to have finished: the device may still read a block nobody owns. CUDA frees
// at once with tag 0 (stream order) and defers ranges used on other streams
// until an event recorded there has completed; Vulkan frees at once with the
// serial of the range's last batch (Note [Vulkan execution]). A backend
// keeps one BlockAllocator per memory kind it allocates from (device-local,
// host-visible staging) and sets `alignment` to the largest alignment any
// buffer needs (minStorageBufferOffsetAlignment, VkMemoryRequirements).
//
// Thread-safety: every member function takes one internal mutex, so the
// allocator may be shared by threads. The callbacks run with that mutex held
// (a driver allocation is serialized with other allocations; that is what
// makes "release the cache and retry" race-free) and must not call back into
// the allocator. If a callback throws, the allocator is left as it was before
// the call and the exception propagates.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ferry/memory.hpp"

namespace ferry::detail {

struct BlockAllocatorConfig {
  std::uint64_t block_size = std::uint64_t(64) << 20;       // shared blocks for small requests
  std::uint64_t large_threshold = std::uint64_t(16) << 20;  // above it: a dedicated block
  std::uint64_t alignment = 256;  // of every offset and small size; a power of two
  std::uint64_t large_granule = std::uint64_t(2) << 20;  // large requests round up to it
  std::uint64_t max_allocation = UINT64_MAX;             // the device's largest single allocation
};

// A sub-range of a block; `size` is the rounded size, at least what was asked.
struct Allocation {
  std::uint64_t block = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  friend bool operator==(const Allocation&, const Allocation&) = default;
};

enum class AllocStatus { ok, exceeds_max_allocation, out_of_memory };

struct AllocResult {
  AllocStatus status = AllocStatus::out_of_memory;
  Allocation allocation;       // valid only when status == ok
  std::uint64_t reuse_tag = 0;  // the largest tag its bytes were freed with (Note [Reuse tags])
  bool ok() const { return status == AllocStatus::ok; }
  explicit operator bool() const { return ok(); }
};

class BlockAllocator {
 public:
  using AcquireFn = std::function<std::optional<std::uint64_t>(std::uint64_t bytes)>;
  using ReleaseFn = std::function<void(std::uint64_t block)>;

  // Normalizes `config` (see effective_config()); throws ferry::Error when the
  // alignment is not a power of two or max_allocation is below it.
  BlockAllocator(BlockAllocatorConfig config, AcquireFn acquire_block, ReleaseFn release_block);
  // Releases every block. Destroy the allocator after every range is freed and
  // before the device the callbacks talk to.
  ~BlockAllocator();
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;

  // A range of at least `bytes` bytes (0 counts as 1), aligned to `alignment`.
  // Blocks released to make room are only those whose tags are all at most
  // `completed` (Note [Reuse tags]).
  AllocResult allocate(std::uint64_t bytes, std::uint64_t completed = UINT64_MAX);
  // Returns a range to the cache, tagged with `tag`. Throws ferry::Error when
  // (block, offset) is not the start of a live range (a double free, or a
  // range of another allocator), leaving the allocator unchanged.
  void free(std::uint64_t block, std::uint64_t offset, std::uint64_t tag = 0);
  void free(const Allocation& a, std::uint64_t tag = 0) { free(a.block, a.offset, tag); }

  // Releases every block that holds no live range and no tag above `completed`.
  void empty_cache(std::uint64_t completed = UINT64_MAX);
  // allocated: bytes in live ranges (rounded sizes); reserved: bytes of every
  // block held; cache_hits: allocations served without acquiring a block.
  MemoryStats stats() const;
  // Starts peak_allocated afresh from what is allocated now.
  void reset_peak();
  // Whether a live range starts at (block, offset).
  bool owns(std::uint64_t block, std::uint64_t offset) const;
  std::size_t block_count() const;
  // The size a request of `bytes` is given (0 when it exceeds max_allocation).
  std::uint64_t rounded_size(std::uint64_t bytes) const;
  const BlockAllocatorConfig& effective_config() const { return config_; }

  // For tests and debugging: every free range, by (block, offset).
  std::vector<Allocation> free_ranges() const;
  // For tests: an empty string when the bookkeeping is consistent (each
  // block's ranges tile it exactly, aligned, with no two free neighbours
  // unmerged; the free index holds exactly the free ranges; the stats match),
  // else a description of the first inconsistency found.
  std::string check_invariants() const;

 private:
  struct Range {
    std::uint64_t size;
    bool free;
    std::uint64_t tag = 0;  // free ranges: Note [Reuse tags]
  };
  struct Block {
    std::uint64_t size;
    bool dedicated;
    std::size_t live = 0;                   // live ranges in the block
    std::map<std::uint64_t, Range> ranges;  // by offset; tiles [0, size)
  };
  // Free ranges ordered by (size, block, offset): lower_bound finds the best
  // fit, and equal sizes resolve to the lowest block and offset, which keeps
  // the allocator deterministic.
  using FreeIndex = std::set<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>>;

  bool is_large(std::uint64_t rounded) const { return rounded > config_.large_threshold; }
  std::optional<Allocation> take_cached(std::uint64_t rounded, std::uint64_t* tag);
  std::optional<Allocation> take_new_block(std::uint64_t rounded);
  Allocation carve(std::uint64_t block_id, Block& block, std::uint64_t offset, std::uint64_t size);
  FreeIndex& index_of(const Block& block) { return block.dedicated ? large_free_ : small_free_; }
  const FreeIndex& index_of(const Block& block) const {
    return block.dedicated ? large_free_ : small_free_;
  }
  std::size_t release_free_blocks_locked(std::uint64_t completed);

  mutable std::mutex mutex_;
  BlockAllocatorConfig config_;
  AcquireFn acquire_;
  ReleaseFn release_;
  std::unordered_map<std::uint64_t, Block> blocks_;
  FreeIndex small_free_;  // free ranges of shared blocks
  FreeIndex large_free_;  // free dedicated blocks (offset always 0)
  MemoryStats stats_;
};

}  // namespace ferry::detail
