// runtime/block_allocator.cpp — Note [Block allocator].
#include "ferry/kit/block_allocator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "ferry/error.hpp"

namespace ferry::detail {

namespace {

// Rounds up to a multiple of `m`; saturates instead of wrapping, so a request
// near 2^64 is refused as too large rather than given a tiny range.
std::uint64_t round_up(std::uint64_t x, std::uint64_t m) {
  if (x > UINT64_MAX - (m - 1)) return UINT64_MAX;
  return (x + m - 1) / m * m;
}

[[noreturn]] void throw_bad_free(std::uint64_t block, std::uint64_t offset) {
  throw Error(
      fmt::format("BlockAllocator: free of block {:#x} offset {}, which is not a live "
                  "range (freed twice, or never allocated here)",
                  block, offset));
}

BlockAllocatorConfig normalized(BlockAllocatorConfig c) {
  if (c.alignment == 0 || (c.alignment & (c.alignment - 1)) != 0)
    throw Error(fmt::format("BlockAllocator: alignment {} is not a power of two", c.alignment));
  if (c.max_allocation < c.alignment)
    throw Error(fmt::format("BlockAllocator: max_allocation {} is below the alignment {}",
                            c.max_allocation, c.alignment));
  // A shared block is one driver allocation, so it obeys the same cap, and its
  // size is a multiple of the alignment so that every carved offset stays
  // aligned.
  c.block_size = std::min(c.block_size, c.max_allocation) / c.alignment * c.alignment;
  if (c.block_size == 0)
    throw Error(fmt::format("BlockAllocator: block_size is below the alignment {}", c.alignment));
  // A small request takes at most half a shared block, so a fresh block always
  // holds it with room to spare, and no block is acquired for one request.
  c.large_threshold = std::min(c.large_threshold, c.block_size / 2);
  c.large_granule = round_up(std::max(c.large_granule, c.alignment), c.alignment);
  return c;
}

}  // namespace

BlockAllocator::BlockAllocator(BlockAllocatorConfig config, AcquireFn acquire_block,
                               ReleaseFn release_block)
    : config_(normalized(config)),
      acquire_(std::move(acquire_block)),
      release_(std::move(release_block)) {}

BlockAllocator::~BlockAllocator() {
  // A destructor must not throw; a block whose release fails is left to the
  // driver's own teardown, and the others are still released.
  for (const auto& [id, block] : blocks_) {
    try {
      release_(id);
    } catch (...) {
    }
  }
}

std::uint64_t BlockAllocator::rounded_size(std::uint64_t bytes) const {
  if (bytes > config_.max_allocation) return 0;
  std::uint64_t small = round_up(std::max<std::uint64_t>(bytes, 1), config_.alignment);
  if (!is_large(small)) return small;
  // A dedicated block is never shared, so when the granule would push it past
  // the cap the exact cap (which is at least `bytes`) serves as well.
  return std::min(round_up(bytes, config_.large_granule), config_.max_allocation);
}

AllocResult BlockAllocator::allocate(std::uint64_t bytes, std::uint64_t completed) {
  std::uint64_t rounded = rounded_size(bytes);
  if (rounded == 0) return {AllocStatus::exceeds_max_allocation, {}};
  std::lock_guard<std::mutex> lock(mutex_);
  std::uint64_t tag = 0;
  std::optional<Allocation> a = take_cached(rounded, &tag);
  bool hit = a.has_value();
  if (!a) a = take_new_block(rounded);
  // Blocks cached for other sizes may be what stands in the way: give them
  // back and try once more. Without any to give back the retry would only ask
  // the driver the same question again.
  if (!a && release_free_blocks_locked(completed) > 0) a = take_new_block(rounded);
  if (!a) return {AllocStatus::out_of_memory, {}};
  ++stats_.allocations;
  if (hit) ++stats_.cache_hits;
  stats_.allocated += a->size;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return {AllocStatus::ok, *a, tag};
}

std::optional<Allocation> BlockAllocator::take_cached(std::uint64_t rounded, std::uint64_t* tag) {
  FreeIndex& index = is_large(rounded) ? large_free_ : small_free_;
  auto it = index.lower_bound({rounded, 0, 0});
  if (it == index.end()) return std::nullopt;
  auto [size, id, offset] = *it;
  // A cached dedicated block is handed out whole; one much larger than asked
  // would pin memory that a fresh block of the right size leaves free.
  if (is_large(rounded) && size - rounded > rounded / 8) return std::nullopt;
  index.erase(it);
  Block& block = blocks_.at(id);
  *tag = block.ranges.at(offset).tag;
  return carve(id, block, offset, block.dedicated ? size : rounded);
}

std::optional<Allocation> BlockAllocator::take_new_block(std::uint64_t rounded) {
  bool dedicated = is_large(rounded);
  std::uint64_t bytes = dedicated ? rounded : config_.block_size;
  std::optional<std::uint64_t> id = acquire_(bytes);
  if (!id) return std::nullopt;
  auto [it, inserted] = blocks_.try_emplace(*id, Block{bytes, dedicated, 0, {}});
  if (!inserted)  // releasing it would release the live block of the same id
    throw Error(
        fmt::format("BlockAllocator: acquire_block returned block {:#x}, which is "
                    "already live; block ids must be unique among live blocks",
                    *id));
  it->second.ranges.emplace(0, Range{bytes, true});
  stats_.reserved += bytes;
  return carve(*id, it->second, 0, rounded);
}

// Turns the free range at `offset` (already out of the free index) into a live
// range of `size` bytes; the rest stays free as a range of its own, with the
// range's tag (the tag is per range, so the rest may keep a tag some of its
// bytes never had: waiting longer than needed, never shorter).
Allocation BlockAllocator::carve(std::uint64_t block_id, Block& block, std::uint64_t offset,
                                 std::uint64_t size) {
  Range& range = block.ranges.at(offset);
  std::uint64_t rest = range.size - size;
  const std::uint64_t tag = range.tag;
  range = Range{size, false, 0};
  ++block.live;
  if (rest > 0) {
    block.ranges.emplace(offset + size, Range{rest, true, tag});
    index_of(block).insert({rest, block_id, offset + size});
  }
  return Allocation{block_id, offset, size};
}

void BlockAllocator::free(std::uint64_t block_id, std::uint64_t offset, std::uint64_t tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto b = blocks_.find(block_id);
  if (b == blocks_.end()) throw_bad_free(block_id, offset);
  auto it = b->second.ranges.find(offset);
  if (it == b->second.ranges.end() || it->second.free) throw_bad_free(block_id, offset);
  Block& block = b->second;
  it->second.free = true;
  it->second.tag = tag;
  --block.live;
  stats_.allocated -= it->second.size;
  if (block.dedicated) {  // one range, nothing to merge
    large_free_.insert({it->second.size, block_id, offset});
    return;
  }
  // Merge with the free neighbours so that the ranges of a block never hold
  // two free ones side by side: a later large-ish request sees the whole gap.
  if (auto next = std::next(it); next != block.ranges.end() && next->second.free) {
    small_free_.erase({next->second.size, block_id, next->first});
    it->second.size += next->second.size;
    it->second.tag = std::max(it->second.tag, next->second.tag);
    block.ranges.erase(next);
  }
  if (it != block.ranges.begin()) {
    if (auto prev = std::prev(it); prev->second.free) {
      small_free_.erase({prev->second.size, block_id, prev->first});
      prev->second.size += it->second.size;
      prev->second.tag = std::max(prev->second.tag, it->second.tag);
      block.ranges.erase(it);
      it = prev;
    }
  }
  small_free_.insert({it->second.size, block_id, it->first});
}

void BlockAllocator::empty_cache(std::uint64_t completed) {
  std::lock_guard<std::mutex> lock(mutex_);
  release_free_blocks_locked(completed);
}

std::size_t BlockAllocator::release_free_blocks_locked(std::uint64_t completed) {
  std::size_t released = 0;
  for (auto b = blocks_.begin(); b != blocks_.end();) {
    Block& block = b->second;
    // With nothing live, merging has left a single free range [0, size); its
    // tag says whether the device may still use the block.
    if (block.live > 0 || block.ranges.begin()->second.tag > completed) {
      ++b;
      continue;
    }
    // Release first: if the driver throws, this block is still accounted for
    // and every block released before it is already gone from the books.
    release_(b->first);
    // With nothing live, merging has left a single free range [0, size).
    index_of(block).erase({block.size, b->first, 0});
    stats_.reserved -= block.size;
    b = blocks_.erase(b);
    ++released;
  }
  return released;
}

MemoryStats BlockAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void BlockAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated = stats_.allocated;
}

bool BlockAllocator::owns(std::uint64_t block_id, std::uint64_t offset) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto b = blocks_.find(block_id);
  if (b == blocks_.end()) return false;
  auto it = b->second.ranges.find(offset);
  return it != b->second.ranges.end() && !it->second.free;
}

std::size_t BlockAllocator::block_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return blocks_.size();
}

std::vector<Allocation> BlockAllocator::free_ranges() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Allocation> out;
  for (const FreeIndex* index : {&small_free_, &large_free_})
    for (auto [size, id, offset] : *index) out.push_back({id, offset, size});
  std::sort(out.begin(), out.end(), [](const Allocation& a, const Allocation& b) {
    return std::tie(a.block, a.offset) < std::tie(b.block, b.offset);
  });
  return out;
}

std::string BlockAllocator::check_invariants() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::uint64_t allocated = 0, reserved = 0;
  std::size_t free_small = 0, free_large = 0;
  for (const auto& [id, block] : blocks_) {
    std::string where = fmt::format("block {:#x} ({} bytes{})", id, block.size,
                                    block.dedicated ? ", dedicated" : "");
    reserved += block.size;
    if (block.dedicated && block.ranges.size() != 1)
      return fmt::format("{}: {} ranges in a dedicated block", where, block.ranges.size());
    std::uint64_t end = 0;
    std::size_t live = 0;
    bool prev_free = false;
    for (const auto& [offset, range] : block.ranges) {
      if (offset != end)
        return fmt::format("{}: range at {} where {} was expected ({})", where, offset, end,
                           offset < end ? "overlap" : "gap");
      if (range.size == 0) return fmt::format("{}: empty range at {}", where, offset);
      if (offset % config_.alignment != 0 || (!block.dedicated && range.size % config_.alignment))
        return fmt::format("{}: range {}+{} not aligned to {}", where, offset, range.size,
                           config_.alignment);
      if (range.free) {
        if (prev_free) return fmt::format("{}: free range at {} not merged", where, offset);
        if (!index_of(block).contains({range.size, id, offset}))
          return fmt::format("{}: free range {}+{} missing from the free index", where, offset,
                             range.size);
        ++(block.dedicated ? free_large : free_small);
      } else {
        ++live;
        allocated += range.size;
      }
      prev_free = range.free;
      end = offset + range.size;
    }
    if (end != block.size) return fmt::format("{}: ranges end at {}", where, end);
    if (live != block.live)
      return fmt::format("{}: {} live ranges, {} counted", where, live, block.live);
  }
  if (free_small != small_free_.size() || free_large != large_free_.size())
    return fmt::format("free index holds {}+{} entries for {}+{} free ranges", small_free_.size(),
                       large_free_.size(), free_small, free_large);
  if (allocated != stats_.allocated || reserved != stats_.reserved)
    return fmt::format("stats say allocated {} reserved {}, blocks hold {} and {}",
                       stats_.allocated, stats_.reserved, allocated, reserved);
  if (stats_.peak_allocated < allocated)
    return fmt::format("peak {} below allocated {}", stats_.peak_allocated, allocated);
  return {};
}

}  // namespace ferry::detail
