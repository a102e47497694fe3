// Barrier placement for the Vulkan recorder (Note [Barrier placement]); needs no Vulkan driver.
#include <gtest/gtest.h>

#include <bitset>
#include <optional>
#include <random>
#include <stdexcept>
#include <vector>

#include "vulkan/barrier_tracker.hpp"

using namespace ferry::vulkan;

namespace {

constexpr std::uint64_t A = 1, B = 2, C = 3, D = 4, E = 5;
constexpr StageMask kCompute = mask(Stage::compute), kTransfer = mask(Stage::transfer);
constexpr AccessMask kShaderWrite = mask(AccessBit::shader_write);

Use R(std::uint64_t buf, std::uint64_t off = 0, std::uint64_t size = 256) {
  return {{buf, off, size}, Access::read};
}
Use W(std::uint64_t buf, std::uint64_t off = 0, std::uint64_t size = 256) {
  return {{buf, off, size}, Access::write};
}
Barrier device_barrier(StageMask src, AccessMask src_access, BarrierKind kind) {
  return {src, kDeviceStages, src_access, src_access ? kDeviceAccess : 0, kind};
}

}  // namespace

TEST(VulkanBarriers, EnumValuesAreVulkans) {
  // The VK_* values from vulkan_core.h; the backend static_asserts the same against the header.
  EXPECT_EQ(mask(Stage::compute), 0x800u);
  EXPECT_EQ(mask(Stage::transfer), 0x1000u);
  EXPECT_EQ(mask(Stage::host), 0x4000u);
  EXPECT_EQ(mask(Stage::all_commands), 0x10000u);
  EXPECT_EQ(access_bit(Stage::compute, Access::read), 0x20u);
  EXPECT_EQ(access_bit(Stage::compute, Access::write), 0x40u);
  EXPECT_EQ(access_bit(Stage::transfer, Access::read), 0x800u);
  EXPECT_EQ(access_bit(Stage::transfer, Access::write), 0x1000u);
  EXPECT_EQ(access_bit(Stage::host, Access::read), 0x2000u);
  EXPECT_EQ(access_bit(Stage::host, Access::write), 0x4000u);
  EXPECT_STREQ(to_string(BarrierKind::war), "write-after-read");
}

TEST(VulkanBarriers, ReadAfterWrite) {
  BarrierTracker t;
  EXPECT_FALSE(t.before(Stage::compute, {W(A)}));
  EXPECT_EQ(t.before(Stage::compute, {R(A), W(B)}),
            device_barrier(kCompute, kShaderWrite, BarrierKind::raw));
  EXPECT_EQ(t.stats().raw, 1u);
  EXPECT_EQ(t.stats().barriers(), 1u);
  EXPECT_EQ(t.stats().commands, 2u);
}

TEST(VulkanBarriers, WriteAfterWrite) {
  BarrierTracker t;
  EXPECT_FALSE(t.before(Stage::compute, {R(A), W(B)}));
  EXPECT_EQ(t.before(Stage::compute, {R(C), W(B)}),
            device_barrier(kCompute, kShaderWrite, BarrierKind::waw));
  EXPECT_EQ(t.stats().waw, 1u);
  EXPECT_EQ(t.stats().barriers(), 1u);
}

TEST(VulkanBarriers, WriteAfterReadIsAnExecutionDependency) {
  BarrierTracker t;
  EXPECT_FALSE(t.before(Stage::compute, {R(A)}));
  // Only reads pending: nothing to make available or visible, access masks 0.
  EXPECT_EQ(t.before(Stage::compute, {W(A)}), device_barrier(kCompute, 0, BarrierKind::war));
  EXPECT_EQ(t.stats().war, 1u);
  // A pending write elsewhere is retired by the same barrier, so it is made available too.
  BarrierTracker u;
  EXPECT_FALSE(u.before(Stage::compute, {R(A), W(B)}));
  EXPECT_EQ(u.before(Stage::compute, {W(A)}),
            device_barrier(kCompute, kShaderWrite, BarrierKind::war));
  EXPECT_FALSE(u.before(Stage::compute, {R(B)})) << "B's write was retired by that barrier";
}

TEST(VulkanBarriers, ReadAfterReadDisjointAndOtherBuffersNeedNone) {
  BarrierTracker t;
  // Adjacent ranges do not overlap, whether the earlier one lies after or before.
  EXPECT_FALSE(t.before(Stage::compute, {R(A), W(B, 64, 64)}));
  EXPECT_FALSE(t.before(Stage::compute, {R(A), W(B, 0, 64)}));
  EXPECT_FALSE(t.before(Stage::compute, {R(A), R(C), W(B, 128, 64)}));
  EXPECT_FALSE(t.before(Stage::transfer, {R(A), W(D)}));
  EXPECT_FALSE(t.before(Stage::compute, {R(B, 192, 64), W(E, 0, 1)}));
  EXPECT_EQ(t.stats().barriers(), 0u);
}

TEST(VulkanBarriers, PartialOverlapNeedsABarrier) {
  BarrierTracker t;
  EXPECT_FALSE(t.before(Stage::compute, {W(A, 0, 100)}));
  EXPECT_TRUE(t.before(Stage::compute, {R(A, 99, 10), W(B)}));
  EXPECT_FALSE(t.before(Stage::compute, {W(C, 10, 10)}));
  EXPECT_TRUE(t.before(Stage::compute, {W(C, 0, 11)}));
}

TEST(VulkanBarriers, ACommandsOwnUsesNeverConflict) {
  BarrierTracker t;
  EXPECT_FALSE(t.before(Stage::compute, {R(A), W(A), W(A, 8, 8)}));  // in place: x += 1
  EXPECT_TRUE(t.before(Stage::compute, {R(A, 0, 4), W(B)}));
}

TEST(VulkanBarriers, ChainGetsABarrierPerDependentDispatchOnly) {
  BarrierTracker t;
  // Independent ops (x, y, z) are interleaved with the chain a -> b -> c -> d.
  std::vector<bool> got = {
      t.before(Stage::compute, {W(A)}).has_value(),          // a = fill
      t.before(Stage::compute, {W(10)}).has_value(),         // x = fill
      t.before(Stage::compute, {R(A), W(B)}).has_value(),    // b = f(a)    RAW
      t.before(Stage::compute, {R(10), W(11)}).has_value(),  // y = g(x), x retired above
      t.before(Stage::compute, {R(B), W(C)}).has_value(),    // c = f(b)    RAW
      t.before(Stage::compute, {W(12)}).has_value(),         // z = fill
      t.before(Stage::compute, {R(C), W(D)}).has_value(),    // d = f(c)    RAW
  };
  EXPECT_EQ(got, (std::vector<bool>{false, false, true, false, true, false, true}));
  EXPECT_EQ(t.stats().raw, 3u);
  EXPECT_EQ(t.stats().barriers(), 3u);
}

TEST(VulkanBarriers, ABarrierClearsEverythingPending) {
  BarrierTracker t;
  EXPECT_FALSE(t.before(Stage::compute, {W(A)}));
  EXPECT_FALSE(t.before(Stage::compute, {W(B)}));
  EXPECT_TRUE(t.before(Stage::compute, {R(A), W(C, 0, 8)}));
  EXPECT_FALSE(t.before(Stage::compute, {R(B), W(C, 8, 8)})) << "B was written before the barrier";
  EXPECT_FALSE(t.before(Stage::transfer, {R(A), W(D)})) << "dst covers later copies too";
}

TEST(VulkanBarriers, TransferThenComputeMasks) {
  BarrierTracker t;
  EXPECT_FALSE(t.before(Stage::transfer, {R(E), W(A)}));  // upload: staging E -> A
  EXPECT_EQ(t.before(Stage::compute, {R(A), W(B)}),
            device_barrier(kTransfer, mask(AccessBit::transfer_write), BarrierKind::raw));
  EXPECT_EQ(t.before(Stage::transfer, {R(B), W(E)}),  // download: B -> staging E
            device_barrier(kCompute, kShaderWrite, BarrierKind::raw));
  // Both stages pending: the barrier waits for both and makes both writes available.
  BarrierTracker u;
  EXPECT_FALSE(u.before(Stage::transfer, {W(A)}));
  EXPECT_FALSE(u.before(Stage::compute, {R(C), W(B)}));
  EXPECT_EQ(u.before(Stage::compute, {R(B), W(D)}),
            device_barrier(kCompute | kTransfer, kShaderWrite | mask(AccessBit::transfer_write),
                           BarrierKind::raw));
}

TEST(VulkanBarriers, HostReadAfterADispatchWrite) {
  BarrierTracker t;
  EXPECT_FALSE(t.before(Stage::compute, {R(A), W(B)}));
  EXPECT_FALSE(t.before_host_read({Range{A, 0, 256}})) << "nobody wrote A";
  const Barrier host{kCompute, mask(Stage::host), kShaderWrite, mask(AccessBit::host_read),
                     BarrierKind::host_read};
  EXPECT_EQ(t.before_host_read({Range{B, 16, 4}}), host);
  EXPECT_FALSE(t.before_host_read({Range{B, 16, 4}})) << "already visible to the host";
  // A host barrier orders nothing on the device: B's write is still pending there.
  EXPECT_TRUE(t.before(Stage::compute, {R(B), W(C)}));
  // C's write is retired on the device by the next barrier, yet the host needs its own one.
  EXPECT_TRUE(t.before(Stage::compute, {R(C), W(D)}));
  EXPECT_EQ(t.before_host_read({Range::whole(C)}),
            (Barrier{kCompute, mask(Stage::host), kShaderWrite, mask(AccessBit::host_read),
                     BarrierKind::host_read}));
  EXPECT_FALSE(t.before_host_read({Range::whole(D)})) << "the last host barrier was global";
  EXPECT_EQ(t.stats().host_read, 2u);
  EXPECT_EQ(t.stats().host_reads, 5u);
}

TEST(VulkanBarriers, SerializeModeBarriersBeforeEveryCommandButTheFirst) {
  BarrierTracker t(/*serialize=*/true);
  const Barrier full{
      mask(Stage::all_commands), mask(Stage::all_commands), mask(AccessBit::memory_write),
      mask(AccessBit::memory_read) | mask(AccessBit::memory_write), BarrierKind::serialize};
  EXPECT_FALSE(t.before(Stage::compute, {W(A)}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(t.before(Stage::compute, {R(10 + i)}), full);
  EXPECT_EQ(t.before(Stage::transfer, {W(20)}), full);
  EXPECT_TRUE(t.before_host_read({Range::whole(99)}));
  EXPECT_FALSE(t.before_host_read({Range::whole(99)}));
  EXPECT_EQ(t.stats().serialize, 6u);
  EXPECT_EQ(t.stats().barriers(), 6u);
  t.reset();
  EXPECT_FALSE(t.before(Stage::compute, {W(A)}));
}

TEST(VulkanBarriers, WholeBufferSentinelAndEmptyRanges) {
  BarrierTracker t;
  EXPECT_FALSE(t.before(Stage::compute, {{Range::whole(A), Access::write}}));
  EXPECT_EQ(t.before(Stage::compute, {R(A, 1u << 30, 4)})->kind, BarrierKind::raw);
  EXPECT_FALSE(t.before(Stage::compute, {W(B, 64, 8)}));
  EXPECT_TRUE(t.before(Stage::compute, {{Range::whole(B), Access::read}}));
  EXPECT_FALSE(t.before(Stage::compute, {W(C, 64, 8)}));
  EXPECT_FALSE(t.before(Stage::compute, {{{C, 72, kWholeSize}, Access::read}})) << "to the end";
  EXPECT_TRUE(t.before(Stage::compute, {{{C, 70, kWholeSize}, Access::read}}));
  EXPECT_FALSE(t.before(Stage::compute, {W(D, 0, 0)}));
  EXPECT_FALSE(t.before(Stage::compute, {{Range::whole(D), Access::write}})) << "empty range";
  EXPECT_THROW(t.before(Stage::host, {R(A)}), std::invalid_argument);
}

TEST(VulkanBarriers, StatePersistsAcrossSubmissionsUntilReset) {
  BarrierTracker t;
  EXPECT_FALSE(t.before(Stage::compute, {W(A)}));
  // ... submit; the next command buffer still needs the barrier ...
  EXPECT_TRUE(t.before(Stage::compute, {R(A), W(B)}));
  EXPECT_TRUE(t.before_host_read({Range::whole(B)}));
  t.reset();  // host waited, and the host barrier covered everything written
  EXPECT_EQ(t.tracked_intervals(), 0u);
  EXPECT_FALSE(t.before(Stage::compute, {R(B), W(A)}));
}

TEST(VulkanBarriers, ThousandsOfCommandsKeepStateSmall) {
  BarrierTracker t;
  // 10,000 independent ops writing consecutive slices of one sub-allocated buffer.
  for (std::uint64_t i = 0; i < 10000; ++i) {
    ASSERT_FALSE(t.before(Stage::compute, {R(A, i * 64, 64), W(B, i * 64, 64)}));
  }
  EXPECT_LE(t.tracked_intervals(), 3u) << "contiguous ranges merge";
  EXPECT_TRUE(t.before(Stage::compute, {R(B, 5000 * 64, 4)}));
  EXPECT_LE(t.tracked_intervals(), 2u) << "the barrier freed what it retired";
}

TEST(VulkanBarriers, ATransferQueuesBarriersNameOnlyTransferStages) {
  // A transfer-only queue family supports no compute stage or shader access in its barriers.
  BarrierTracker t(false, kTransfer);
  EXPECT_FALSE(t.before(Stage::transfer, {R(A), W(B)}));
  const Barrier expect{kTransfer, kTransfer, mask(AccessBit::transfer_write),
                       mask(AccessBit::transfer_read) | mask(AccessBit::transfer_write),
                       BarrierKind::raw};
  EXPECT_EQ(t.before(Stage::transfer, {R(B), W(C)}), expect);
  EXPECT_THROW(t.before(Stage::compute, {R(A)}), std::invalid_argument);
}
