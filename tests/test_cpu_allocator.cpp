// The CPU's caching allocator (Note [CPU caching allocator]).
#include <gtest/gtest.h>

#include "cpu/cpu_allocator.hpp"
#include "ferry/ferry.hpp"

using ferry::cpu::CachingAllocator;

TEST(CpuAllocator, RoundsSmallToCacheLinesAndLargeToGranules) {
  EXPECT_EQ(CachingAllocator::round(0), 64u);
  EXPECT_EQ(CachingAllocator::round(65), 128u);
  EXPECT_EQ(CachingAllocator::round(CachingAllocator::kCacheMin), CachingAllocator::kCacheGranule);
  EXPECT_EQ(CachingAllocator::round(CachingAllocator::kCacheGranule + 1),
            2 * CachingAllocator::kCacheGranule);
}

TEST(CpuAllocator, ReusesLargeBlocksAndKeepsStats) {
  CachingAllocator a(std::uint64_t(64) << 20, 0);
  std::size_t cap = 0;
  void* p = a.allocate(3 << 20, &cap);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(cap, std::size_t(4) << 20);
  EXPECT_EQ(a.stats().allocated, cap);
  a.release(p, cap);
  EXPECT_EQ(a.stats().allocated, 0u);
  std::size_t cap2 = 0;
  void* q = a.allocate((3 << 20) + 5, &cap2);
  EXPECT_EQ(cap2, cap);
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(q, p) << "the freed block of the same size class is reused";
  EXPECT_EQ(a.stats().cache_hits, 1u);
  EXPECT_EQ(a.stats().reserved, cap);
#endif
  EXPECT_EQ(a.stats().allocations, 2u);
  EXPECT_EQ(a.stats().peak_allocated, cap);
  a.release(q, cap2);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved, 0u);
}

TEST(CpuAllocator, CacheCapIsHonoured) {
  CachingAllocator a(std::uint64_t(4) << 20, 0);
  std::size_t c1 = 0, c2 = 0;
  void* p1 = a.allocate(4 << 20, &c1);
  void* p2 = a.allocate(4 << 20, &c2);
  a.release(p1, c1);
  a.release(p2, c2);  // over the cap: freed, not cached
  EXPECT_LE(a.stats().reserved, std::uint64_t(4) << 20);
}

TEST(CpuAllocator, RequestsBeyondTheLimitFailCleanly) {
  CachingAllocator a(0, std::uint64_t(1) << 30);
  std::size_t cap = 0;
  EXPECT_EQ(a.allocate(std::size_t(2) << 30, &cap), nullptr);
  EXPECT_EQ(a.stats().allocated, 0u);
}

TEST(CpuAllocator, DeviceOutOfMemoryIsATypedError) {
  try {
    ferry::empty({std::int64_t(1) << 50});
    FAIL() << "a 4 PiB tensor was allocated";
  } catch (const ferry::OutOfMemoryError& e) {
    EXPECT_EQ(e.requested(), std::uint64_t(1) << 52);
    EXPECT_GT(e.available(), 0u);
    EXPECT_EQ(e.device(), "cpu");
  }
  ferry::Tensor t = ferry::zeros({1 << 20});
  auto s = ferry::memory_stats(ferry::Device::cpu());
  EXPECT_GE(s.allocated, std::uint64_t(4) << 20);
  EXPECT_GE(s.reserved, s.allocated);
  ferry::empty_cache(ferry::Device::cpu());
}
