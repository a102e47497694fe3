// The GPU backends' sub-allocator bookkeeping (Note [Block allocator]), driven
// by a fake device, so it is tested on machines without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "ferry/error.hpp"
#include "ferry/kit/block_allocator.hpp"

using ferry::MemoryStats;
using ferry::detail::Allocation;
using ferry::detail::AllocResult;
using ferry::detail::AllocStatus;
using ferry::detail::BlockAllocator;
using ferry::detail::BlockAllocatorConfig;

namespace {

// Small numbers keep the arithmetic checkable by hand: 4 KiB shared blocks,
// 64-byte alignment, dedicated blocks above 1 KiB in 512-byte steps.
BlockAllocatorConfig small_config() {
  return {.block_size = 4096,
          .large_threshold = 1024,
          .alignment = 64,
          .large_granule = 512,
          .max_allocation = 1 << 20};
}

// A device with `capacity` bytes that hands out block ids and records calls.
struct FakeDevice {
  std::uint64_t capacity = UINT64_MAX;
  bool fail_all = false;
  std::uint64_t next_id = 0x1000;
  std::map<std::uint64_t, std::uint64_t> live;  // block id -> size
  std::vector<std::uint64_t> acquired;          // sizes asked, in order
  std::vector<std::uint64_t> released;          // ids, in order

  std::uint64_t used() const {
    std::uint64_t n = 0;
    for (auto [id, size] : live) n += size;
    return n;
  }
  std::unique_ptr<BlockAllocator> make(BlockAllocatorConfig config = small_config()) {
    return std::make_unique<BlockAllocator>(
        config,
        [this](std::uint64_t bytes) -> std::optional<std::uint64_t> {
          acquired.push_back(bytes);
          if (fail_all || bytes > capacity - std::min(capacity, used())) return std::nullopt;
          live[next_id] = bytes;
          return next_id++;
        },
        [this](std::uint64_t id) {
          EXPECT_EQ(live.erase(id), 1u) << "released a block that is not live";
          released.push_back(id);
        });
  }
};

Allocation must_allocate(BlockAllocator& a, std::uint64_t bytes) {
  AllocResult r = a.allocate(bytes);
  EXPECT_TRUE(r.ok()) << "allocate(" << bytes << ")";
  EXPECT_EQ(a.check_invariants(), "");
  return r.allocation;
}

bool same_stats(const MemoryStats& a, const MemoryStats& b) {
  return a.allocated == b.allocated && a.reserved == b.reserved &&
         a.peak_allocated == b.peak_allocated && a.allocations == b.allocations &&
         a.cache_hits == b.cache_hits;
}

}  // namespace

TEST(BlockAllocator, RoundsSmallToAlignmentAndLargeToGranule) {
  FakeDevice dev;
  auto a = dev.make();
  EXPECT_EQ(a->rounded_size(0), 64u);
  EXPECT_EQ(a->rounded_size(65), 128u);
  EXPECT_EQ(a->rounded_size(1024), 1024u) << "at the threshold: still small";
  EXPECT_EQ(a->rounded_size(1025), 1536u) << "above it: whole granules";
  EXPECT_EQ(a->rounded_size((1 << 20) + 1), 0u) << "above max_allocation";
}

TEST(BlockAllocator, NormalizesConfigAndRejectsBadAlignment) {
  FakeDevice dev;
  auto c = small_config();
  c.max_allocation = 3000;  // the shared block shrinks to fit, aligned down
  auto a = dev.make(c);
  EXPECT_EQ(a->effective_config().block_size, 2944u);
  EXPECT_EQ(a->effective_config().large_threshold, 1024u);
  c.large_threshold = 2000;  // at most half a block
  EXPECT_EQ(dev.make(c)->effective_config().large_threshold, 1472u);
  c.alignment = 96;
  EXPECT_THROW(dev.make(c), ferry::Error);
  c.alignment = 0;
  EXPECT_THROW(dev.make(c), ferry::Error);
}

TEST(BlockAllocator, SplitsAndMergesFreeNeighbours) {
  FakeDevice dev;
  auto a = dev.make();
  Allocation x = must_allocate(*a, 256), y = must_allocate(*a, 256), z = must_allocate(*a, 256);
  EXPECT_EQ(x.block, y.block);
  EXPECT_EQ(y.block, z.block);
  EXPECT_EQ(x.offset, 0u);
  EXPECT_EQ(y.offset, 256u);
  EXPECT_EQ(z.offset, 512u);
  EXPECT_EQ(a->free_ranges(), (std::vector<Allocation>{{x.block, 768, 4096 - 768}}));
  a->free(y);
  a->free(x);
  EXPECT_EQ(a->check_invariants(), "");
  EXPECT_EQ(a->free_ranges(),
            (std::vector<Allocation>{{x.block, 0, 512}, {x.block, 768, 4096 - 768}}))
      << "x and y merged into one range; z still separates it from the tail";
  Allocation w = must_allocate(*a, 512);
  EXPECT_EQ(w, (Allocation{x.block, 0, 512})) << "the merged range is reused";
  a->free(w);
  a->free(z);
  EXPECT_EQ(a->free_ranges(), (std::vector<Allocation>{{x.block, 0, 4096}}));
  EXPECT_EQ(dev.acquired.size(), 1u);
}

TEST(BlockAllocator, ChoosesTheBestFittingFreeRange) {
  FakeDevice dev;
  auto a = dev.make();
  // Holes of 512, 256 and 1024 bytes, kept apart by live 64-byte ranges.
  Allocation h512 = must_allocate(*a, 512);
  must_allocate(*a, 64);
  Allocation h256 = must_allocate(*a, 256);
  must_allocate(*a, 64);
  Allocation h1024 = must_allocate(*a, 1024);
  must_allocate(*a, 64);
  for (auto h : {h512, h256, h1024}) a->free(h);
  EXPECT_EQ(must_allocate(*a, 200).offset, h256.offset);
  EXPECT_EQ(must_allocate(*a, 300).offset, h512.offset);
  EXPECT_EQ(must_allocate(*a, 600).offset, h1024.offset);
  EXPECT_EQ(a->stats().cache_hits, 9u - 1u) << "only the first allocation acquired a block";
}

TEST(BlockAllocator, AlignsEveryOffset) {
  FakeDevice dev;
  auto a = dev.make(BlockAllocatorConfig{});  // the defaults: 256-byte alignment
  for (std::uint64_t bytes : {1, 3, 255, 256, 257, 1000, 4097, 100000, 3 << 20}) {
    Allocation r = must_allocate(*a, bytes);
    EXPECT_EQ(r.offset % 256, 0u) << bytes;
    EXPECT_GE(r.size, bytes);
  }
}

TEST(BlockAllocator, LargeRequestsGetDedicatedBlocksThatStayCached) {
  FakeDevice dev;
  auto a = dev.make();
  Allocation big = must_allocate(*a, 2000);
  EXPECT_EQ(big, (Allocation{0x1000, 0, 2048}));
  EXPECT_EQ(dev.acquired, (std::vector<std::uint64_t>{2048}));
  a->free(big);
  EXPECT_EQ(a->stats().reserved, 2048u) << "a freed dedicated block stays cached";
  EXPECT_EQ(must_allocate(*a, 1900), big) << "reused whole by a request it fits";
  EXPECT_EQ(a->stats().cache_hits, 1u);
  a->free(big);
  // 2048 bytes for a 1536-byte request wastes more than 1/8: a new block.
  Allocation other = must_allocate(*a, 1100);
  EXPECT_NE(other.block, big.block);
  EXPECT_EQ(other.size, 1536u);
  EXPECT_EQ(must_allocate(*a, 64).size, 64u) << "small requests never split a dedicated block";
  EXPECT_EQ(a->block_count(), 3u);
  a->empty_cache();
  EXPECT_EQ(dev.released, (std::vector<std::uint64_t>{big.block}));
  EXPECT_EQ(a->block_count(), 2u);
  EXPECT_EQ(a->check_invariants(), "");
}

TEST(BlockAllocator, RefusesRequestsAboveMaxAllocationWithoutAskingTheDevice) {
  FakeDevice dev;
  auto c = small_config();
  c.max_allocation = (1 << 20) + 100;  // not a whole number of granules
  auto a = dev.make(c);
  AllocResult r = a->allocate(c.max_allocation + 1);
  EXPECT_EQ(r.status, AllocStatus::exceeds_max_allocation);
  EXPECT_FALSE(r);
  EXPECT_TRUE(dev.acquired.empty());
  EXPECT_TRUE(same_stats(a->stats(), MemoryStats{}));
  EXPECT_EQ(a->allocate(UINT64_MAX).status, AllocStatus::exceeds_max_allocation);
  Allocation at_cap = must_allocate(*a, c.max_allocation);
  EXPECT_EQ(at_cap.size, c.max_allocation) << "the granule never pushes a block past the cap";
}

TEST(BlockAllocator, ReleasesCachedBlocksAndRetriesWhenTheDeviceIsFull) {
  FakeDevice dev;
  dev.capacity = 4096 + 2048 + 1536;
  auto a = dev.make();
  Allocation keep = must_allocate(*a, 64);  // pins its shared block
  Allocation spare = must_allocate(*a, 64);
  a->free(spare);
  a->free(must_allocate(*a, 2048));  // a cached dedicated block
  AllocResult r = a->allocate(3000);
  ASSERT_TRUE(r);
  EXPECT_EQ(r.allocation.size, 3072u);
  EXPECT_EQ(dev.acquired, (std::vector<std::uint64_t>{4096, 2048, 3072, 3072}));
  EXPECT_EQ(dev.released.size(), 1u) << "only the block with no live range goes";
  EXPECT_TRUE(a->owns(keep.block, keep.offset));
  EXPECT_EQ(a->stats().reserved, 4096u + 3072u);
  EXPECT_EQ(a->check_invariants(), "");
}

TEST(BlockAllocator, FailsWithStatsUnchangedWhenNothingCanBeReleased) {
  FakeDevice dev;
  dev.capacity = 4096;
  auto a = dev.make();
  EXPECT_EQ(a->allocate(0).allocation.size, 64u);
  MemoryStats before = a->stats();
  AllocResult r = a->allocate(2048);
  EXPECT_EQ(r.status, AllocStatus::out_of_memory);
  EXPECT_EQ(dev.acquired.size(), 2u) << "no retry: there was nothing to release";
  EXPECT_TRUE(same_stats(a->stats(), before));
  EXPECT_EQ(a->check_invariants(), "");
  dev.fail_all = true;
  EXPECT_EQ(must_allocate(*a, 1024).offset, 64u) << "what fits still comes from the cache";
}

TEST(BlockAllocator, KeepsExactStats) {
  FakeDevice dev;
  auto a = dev.make();
  Allocation s1 = must_allocate(*a, 100);   // 128, new shared block
  Allocation s2 = must_allocate(*a, 1000);  // 1024, from the cache
  Allocation l1 = must_allocate(*a, 3000);  // 3072, new dedicated block
  MemoryStats s = a->stats();
  EXPECT_EQ(s.allocated, 128u + 1024u + 3072u);
  EXPECT_EQ(s.reserved, 4096u + 3072u);
  EXPECT_EQ(s.peak_allocated, s.allocated);
  EXPECT_EQ(s.allocations, 3u);
  EXPECT_EQ(s.cache_hits, 1u);
  a->free(l1);
  a->free(s1);
  must_allocate(*a, 3072);  // the cached dedicated block
  s = a->stats();
  EXPECT_EQ(s.allocated, 1024u + 3072u);
  EXPECT_EQ(s.peak_allocated, 128u + 1024u + 3072u);
  EXPECT_EQ(s.allocations, 4u);
  EXPECT_EQ(s.cache_hits, 2u);
  a->free(s2);
  a->empty_cache();
  s = a->stats();
  EXPECT_EQ(s.allocated, 3072u);
  EXPECT_EQ(s.reserved, 3072u);
}

TEST(BlockAllocator, RejectsDoubleAndForeignFreesUnchanged) {
  FakeDevice dev;
  auto a = dev.make();
  Allocation x = must_allocate(*a, 128);
  must_allocate(*a, 128);
  a->free(x);
  MemoryStats before = a->stats();
  EXPECT_THROW(a->free(x), ferry::Error);
  EXPECT_THROW(a->free(x.block, 64), ferry::Error) << "not the start of a range";
  EXPECT_THROW(a->free(0xdead, 0), ferry::Error);
  EXPECT_TRUE(same_stats(a->stats(), before));
  EXPECT_EQ(a->check_invariants(), "");
  EXPECT_FALSE(a->owns(x.block, x.offset));
}

TEST(BlockAllocator, DestructorReleasesEveryBlock) {
  FakeDevice dev;
  {
    auto a = dev.make();
    must_allocate(*a, 64);
    a->free(must_allocate(*a, 5000));
  }
  EXPECT_TRUE(dev.live.empty());
  EXPECT_EQ(dev.released.size(), 2u);
}

// Thousands of random allocations and frees against a device that runs out of
// memory now and then; after every step the bookkeeping is consistent, the
// live ranges are disjoint and inside their blocks, and the stats add up.
TEST(BlockAllocator, RandomizedStress) {
  FakeDevice dev;
  dev.capacity = 64 * 1024;
  auto a = dev.make();
  std::mt19937_64 rng(1234);
  std::vector<Allocation> live;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::uint64_t> by_start;  // -> end
  std::uint64_t live_bytes = 0, failures = 0, retried_ok = 0;
  for (int step = 0; step < 4000; ++step) {
    dev.fail_all = rng() % 50 == 0;
    std::uint64_t dice = rng() % 100;
    if (dice < 55 || live.empty()) {
      std::uint64_t bytes = dice % 8 == 0 ? 1025 + rng() % 6000 : rng() % 1025;
      std::size_t asked = dev.acquired.size();
      AllocResult r = a->allocate(bytes);
      retried_ok += r && dev.acquired.size() == asked + 2;
      if (!r) {
        ASSERT_EQ(r.status, AllocStatus::out_of_memory);
        ++failures;
      } else {
        Allocation n = r.allocation;
        ASSERT_GE(n.size, bytes);
        ASSERT_EQ(n.offset % 64, 0u);
        ASSERT_TRUE(dev.live.count(n.block));
        ASSERT_LE(n.offset + n.size, dev.live[n.block]);
        auto next = by_start.lower_bound({n.block, n.offset});
        if (next != by_start.end() && next->first.first == n.block) {
          ASSERT_LE(n.offset + n.size, next->first.second) << "overlaps the next live range";
        }
        if (next != by_start.begin() && std::prev(next)->first.first == n.block) {
          ASSERT_LE(std::prev(next)->second, n.offset) << "overlaps the previous live range";
        }
        by_start[{n.block, n.offset}] = n.offset + n.size;
        live.push_back(n);
        live_bytes += n.size;
      }
    } else if (dice < 98) {
      std::size_t i = rng() % live.size();
      a->free(live[i]);
      by_start.erase({live[i].block, live[i].offset});
      live_bytes -= live[i].size;
      live[i] = live.back();
      live.pop_back();
    } else {
      a->empty_cache();
    }
    ASSERT_EQ(a->check_invariants(), "") << "step " << step;
    MemoryStats s = a->stats();
    ASSERT_EQ(s.allocated, live_bytes);
    ASSERT_EQ(s.reserved, dev.used());
    ASSERT_EQ(a->block_count(), dev.live.size());
  }
  EXPECT_GT(failures, 0u) << "the test should run out of memory now and then";
  EXPECT_GT(retried_ok, 0u) << "... and recover by releasing the cache";
  for (const Allocation& n : live) a->free(n);
  a->empty_cache();
  EXPECT_TRUE(dev.live.empty());
  EXPECT_EQ(a->stats().reserved, 0u);
}

TEST(BlockAllocator, ConcurrentUseKeepsTheBooksStraight) {
  FakeDevice dev;  // only touched under the allocator's mutex
  auto a = dev.make();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&a, t] {
      std::mt19937 rng(t);
      std::vector<Allocation> mine;
      for (int i = 0; i < 2000; ++i) {
        if (mine.empty() || rng() % 2) {
          if (AllocResult r = a->allocate(rng() % 3000)) mine.push_back(r.allocation);
        } else {
          a->free(mine.back());
          mine.pop_back();
        }
      }
      for (const Allocation& n : mine) a->free(n);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(a->check_invariants(), "");
  EXPECT_EQ(a->stats().allocated, 0u);
}

// Note [Reuse tags]: a range freed with a tag hands that tag to its next
// owner; merged ranges keep the largest; the rest of a carved range keeps it.
TEST(BlockAllocator, ReuseTagsFollowTheBytes) {
  FakeDevice dev;
  auto a = dev.make();
  Allocation x = must_allocate(*a, 256), y = must_allocate(*a, 256);
  must_allocate(*a, 64);  // keeps y's neighbour on the right live
  a->free(x, 7);
  AllocResult r = a->allocate(256);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.allocation, x) << "the freed range is reused at once";
  EXPECT_EQ(r.reuse_tag, 7u) << "and its next owner learns what it follows";
  a->free(r.allocation, 3);
  a->free(y, 9);  // merges with x's range
  EXPECT_EQ(a->check_invariants(), "");
  r = a->allocate(64);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.allocation.offset, x.offset);
  EXPECT_EQ(r.reuse_tag, 9u) << "a merged range keeps the largest tag";
  r = a->allocate(128);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.reuse_tag, 9u) << "the rest of a carved range keeps its tag";
  EXPECT_EQ(a->allocate(2000).reuse_tag, 0u) << "bytes never freed carry no tag";
}

// A block whose bytes the device may still use (a tag above `completed`) is
// never given back to the driver, not by empty_cache nor by the release that
// a failed acquire triggers.
TEST(BlockAllocator, BlocksWithPendingTagsStayUntilCompleted) {
  FakeDevice dev;
  auto a = dev.make();
  Allocation x = must_allocate(*a, 256);
  a->free(x, 5);
  a->empty_cache(4);
  EXPECT_EQ(a->block_count(), 1u) << "serial 5 has not completed";
  dev.capacity = dev.used();  // no room for another block
  EXPECT_EQ(a->allocate(3000, 4).status, ferry::detail::AllocStatus::out_of_memory);
  EXPECT_EQ(a->block_count(), 1u) << "a failed acquire must not release it either";
  EXPECT_TRUE(dev.released.empty());
  a->empty_cache(5);
  EXPECT_EQ(a->block_count(), 0u);
  EXPECT_EQ(dev.released.size(), 1u);
  EXPECT_EQ(a->check_invariants(), "");
}

TEST(BlockAllocator, ResetPeakStartsFromWhatIsAllocated) {
  FakeDevice dev;
  auto a = dev.make();
  Allocation x = must_allocate(*a, 1024);
  must_allocate(*a, 512);
  a->free(x);
  EXPECT_EQ(a->stats().peak_allocated, 1536u);
  a->reset_peak();
  EXPECT_EQ(a->stats().peak_allocated, 512u);
  must_allocate(*a, 64);
  EXPECT_EQ(a->stats().peak_allocated, 576u);
}
