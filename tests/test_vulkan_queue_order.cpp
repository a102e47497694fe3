// Cross-queue order for the Vulkan recorder's transfer queue (Note [Cross-queue order]); needs
// no Vulkan driver.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <vector>

#include "vulkan/queue_order.hpp"

using namespace ferry::vulkan;

namespace {

constexpr int kCompute = 0, kTransfer = 1;
constexpr std::uint64_t A = 1, B = 2;

Use R(std::uint64_t buf, std::uint64_t off, std::uint64_t size) {
  return {{buf, off, size}, Access::read};
}
Use W(std::uint64_t buf, std::uint64_t off, std::uint64_t size) {
  return {{buf, off, size}, Access::write};
}
std::uint64_t need(const QueueOrder& q, int queue, Use u, std::uint64_t completed = 0) {
  return q.need(queue, std::span<const Use>(&u, 1), completed);
}
void record(QueueOrder& q, int queue, std::uint64_t serial, Use u) {
  q.record(queue, serial, std::span<const Use>(&u, 1));
}

}  // namespace

TEST(VulkanQueueOrder, ReadAfterWriteOnTheOtherQueueWaitsForItsBatch) {
  QueueOrder q;
  record(q, kTransfer, 2, W(A, 0, 100));  // an upload
  EXPECT_EQ(need(q, kCompute, R(A, 50, 10)), 2u);
  EXPECT_EQ(need(q, kCompute, W(A, 99, 1)), 2u);      // write after write
  EXPECT_EQ(need(q, kCompute, R(A, 100, 10)), 0u);    // the bytes after it
  EXPECT_EQ(need(q, kCompute, R(B, 0, 100)), 0u);     // another buffer
  EXPECT_EQ(need(q, kTransfer, R(A, 0, 100)), 0u);    // its own queue: the barrier tracker's job
  EXPECT_EQ(need(q, kCompute, R(A, 0, 100), 2), 0u);  // batch 2 has completed
}

TEST(VulkanQueueOrder, ReadsConflictOnlyWithWrites) {
  QueueOrder q;
  record(q, kCompute, 3, R(A, 0, 64));
  EXPECT_EQ(need(q, kTransfer, R(A, 0, 64)), 0u);   // read after read
  EXPECT_EQ(need(q, kTransfer, W(A, 32, 8)), 3u);   // write after read
  EXPECT_EQ(need(q, kTransfer, W(A, 64, 8)), 0u);
}

TEST(VulkanQueueOrder, PartlyOverlappingUsesKeepTheirOwnSerials) {
  QueueOrder q;
  record(q, kCompute, 2, W(A, 0, 100));
  record(q, kCompute, 3, R(A, 40, 20));  // splits the written span
  record(q, kCompute, 5, W(A, 200, 50));
  EXPECT_EQ(need(q, kTransfer, R(A, 0, 10)), 2u);
  EXPECT_EQ(need(q, kTransfer, W(A, 45, 1)), 3u);
  EXPECT_EQ(need(q, kTransfer, R(A, 45, 1)), 2u);  // the read at 3 does not conflict
  EXPECT_EQ(need(q, kTransfer, W(A, 70, 10)), 2u);
  EXPECT_EQ(need(q, kTransfer, R(A, 90, 200)), 5u);  // the highest it overlaps
  EXPECT_EQ(need(q, kTransfer, R(A, 100, 100)), 0u);
}

TEST(VulkanQueueOrder, WholeSizeRangesReachTheEnd) {
  QueueOrder q;
  record(q, kTransfer, 4, W(A, 1000, kWholeSize));
  EXPECT_EQ(need(q, kCompute, R(A, ~std::uint64_t(0) - 8, 4)), 4u);
  EXPECT_EQ(need(q, kCompute, R(A, 0, 1000)), 0u);
  EXPECT_EQ(need(q, kCompute, R(A, 0, 0)), 0u);  // an empty range conflicts with nothing
}

TEST(VulkanQueueOrder, RetireForgetsCompletedBatchesAndNeighboursMerge) {
  QueueOrder q;
  // A migration's thousand adjacent uploads in one batch stay one span.
  for (std::uint64_t i = 0; i < 1000; ++i) record(q, kTransfer, 7, W(A, i * 256, 256));
  EXPECT_EQ(q.tracked_intervals(), 1u);
  record(q, kCompute, 8, R(A, 0, 256 * 1000));
  EXPECT_EQ(q.tracked_intervals(), 2u);
  q.retire(7);
  EXPECT_EQ(q.tracked_intervals(), 1u);
  EXPECT_EQ(need(q, kTransfer, W(A, 0, 10)), 8u);
  q.retire(8);
  EXPECT_EQ(q.tracked_intervals(), 0u);
  EXPECT_EQ(need(q, kTransfer, W(A, 0, 10)), 0u);
}

TEST(VulkanQueueOrder, RejectsAQueueOtherThanTwo) {
  QueueOrder q;
  const Use u = R(A, 0, 4);
  EXPECT_THROW(q.need(2, std::span<const Use>(&u, 1), 0), std::invalid_argument);
  EXPECT_THROW(q.record(-1, 1, std::span<const Use>(&u, 1)), std::invalid_argument);
}

// Random commands on both queues against a brute-force list of every use so far.
TEST(VulkanQueueOrder, MatchesBruteForceOnRandomCommands) {
  struct Past {
    int queue;
    std::uint64_t serial;
    Use use;
  };
  std::mt19937 rng(26);
  for (int round = 0; round < 20; ++round) {
    QueueOrder q;
    std::vector<Past> past;
    std::uint64_t serial = 1, completed = 0;
    for (int step = 0; step < 300; ++step) {
      const int queue = int(rng() % 2);
      if (rng() % 8 == 0) ++serial;  // a new batch
      if (rng() % 16 == 0) {
        completed = std::min<std::uint64_t>(serial - 1, completed + 1 + rng() % 3);
        q.retire(completed);
      }
      std::vector<Use> uses;
      const int n = 1 + int(rng() % 3);
      for (int i = 0; i < n; ++i) {
        const std::uint64_t off = rng() % 64, size = 1 + rng() % 24;
        uses.push_back({{1 + rng() % 2, off, size}, rng() % 2 ? Access::write : Access::read});
      }
      std::uint64_t expect = 0;
      for (const Past& p : past) {
        if (p.queue == queue || p.serial <= completed) continue;
        for (const Use& u : uses) {
          const bool overlap = p.use.range.buffer == u.range.buffer &&
                               p.use.range.offset < u.range.offset + u.range.size &&
                               u.range.offset < p.use.range.offset + p.use.range.size;
          const bool conflict =
              p.use.access == Access::write || u.access == Access::write;
          if (overlap && conflict) expect = std::max(expect, p.serial);
        }
      }
      ASSERT_EQ(q.need(queue, uses, completed), expect) << "round " << round << " step " << step;
      q.record(queue, serial, uses);
      for (const Use& u : uses) past.push_back({queue, serial, u});
    }
  }
}
