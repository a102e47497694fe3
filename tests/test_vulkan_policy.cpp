// Tests of the Vulkan backend's driver-free decisions (runtime/vulkan/vk_policy.hpp).
#include <gtest/gtest.h>

#include <cstring>

#include "ferry/error.hpp"
#include "vulkan/vk_policy.hpp"

namespace fv = ferry::vulkan;
using ferry::DeviceKind;

TEST(VulkanPolicy, DevicesOrderedByKindThenEnumeration) {
  std::vector<DeviceKind> kinds = {DeviceKind::cpu_gpu,      DeviceKind::integrated_gpu,
                                   DeviceKind::discrete_gpu, DeviceKind::other,
                                   DeviceKind::virtual_gpu,  DeviceKind::discrete_gpu};
  EXPECT_EQ(fv::order_devices(kinds, nullptr), (std::vector<std::size_t>{2, 5, 1, 4, 0, 3}));
  EXPECT_EQ(fv::order_devices(kinds, ""), (std::vector<std::size_t>{2, 5, 1, 4, 0, 3}));
}

TEST(VulkanPolicy, SelectionPicksAndOrders) {
  std::vector<DeviceKind> kinds = {DeviceKind::cpu_gpu, DeviceKind::discrete_gpu};
  EXPECT_EQ(fv::order_devices(kinds, "0"), (std::vector<std::size_t>{0}));
  EXPECT_EQ(fv::order_devices(kinds, "0,1"), (std::vector<std::size_t>{0, 1}));
  for (const char* bad : {"2", "x", "0,", "-1", "1,1", "0;1"}) {
    try {
      fv::order_devices(kinds, bad);
      ADD_FAILURE() << "accepted FERRY_VULKAN_DEVICES=" << bad;
    } catch (const ferry::Error& e) {
      EXPECT_NE(std::string(e.what()).find("FERRY_VULKAN_DEVICES"), std::string::npos) << e.what();
    }
  }
}

namespace {
std::vector<std::uint8_t> fake_driver_cache(const fv::CacheIdentity& id, std::size_t body) {
  std::vector<std::uint8_t> d(32 + body, 0xab);
  std::uint32_t h[4] = {32, 1, id.vendor_id, id.device_id};
  std::memcpy(d.data(), h, 16);
  std::memcpy(d.data() + 16, id.uuid, 16);
  return d;
}
}  // namespace

// The fused attention runs by default (it has run on lavapipe and on an H100), and
// FERRY_VULKAN_FUSED_ATTENTION decides either way.
TEST(VulkanPolicy, FusedAttentionByDefaultAndTheVariableDecides) {
  using ferry::vulkan::fused_attention;
  EXPECT_TRUE(fused_attention(nullptr));
  EXPECT_TRUE(fused_attention(""));
  EXPECT_TRUE(fused_attention("1"));
  EXPECT_FALSE(fused_attention("0"));
  EXPECT_THROW(fused_attention("yes"), ferry::Error);
}

// Note [Split-key attention on Vulkan]: a decoding step's few query rows per head take the
// split kernels, in splits that give the grid about kSplitTargetWorkgroups workgroups and no
// split under kMinSplitKeys keys; "force" takes every call, in splits of kForcedSplitKeys. With
// a loop budget (Note [Loop budget]: lavapipe's), no split is longer than the budget allows,
// and calls whose forward kernel would run past it take the split kernels too.
TEST(VulkanPolicy, SplitKeyAttentionForFewQueryRows) {
  using fv::KeySplit;
  using fv::SplitAttention;
  EXPECT_EQ(fv::split_attention(nullptr), SplitAttention::on);
  EXPECT_EQ(fv::split_attention("1"), SplitAttention::on);
  EXPECT_EQ(fv::split_attention("0"), SplitAttention::off);
  EXPECT_EQ(fv::split_attention("force"), SplitAttention::force);
  EXPECT_THROW(fv::split_attention("2"), ferry::Error);
  using P = std::pair<std::uint32_t, std::uint32_t>;
  auto split = [](SplitAttention mode, std::int64_t L, std::int64_t rows, std::int64_t S,
                  bool forward_fits = true, std::uint64_t budget = 0, std::int64_t E = 64) {
    const KeySplit k = fv::key_split(mode, {L, rows, S, E, E}, forward_fits, budget);
    return P{k.splits, k.split_len};
  };
  // One query row of 8 heads: 32 splits wanted, none under 256 keys.
  EXPECT_EQ(split(SplitAttention::on, 1, 8, 2048), (P{8, 256}));
  EXPECT_EQ(split(SplitAttention::on, 1, 8, 16384), (P{32, 512}));
  EXPECT_EQ(split(SplitAttention::on, 1, 8, 100), (P{1, 256}));      // one workgroup, no COMBINE
  EXPECT_EQ(split(SplitAttention::on, 1, 8, 0), (P{1, 256}));        // no keys: still one split
  EXPECT_EQ(split(SplitAttention::on, 1, 512, 8192), (P{1, 8192}));  // a large batch: a row each
  EXPECT_EQ(split(SplitAttention::on, fv::kSplitKeyRows, 32, 8192), (P{8, 1024}));
  // More query rows per head, or the policy off: the forward kernel.
  EXPECT_EQ(split(SplitAttention::on, fv::kSplitKeyRows + 1, 40, 8192), (P{0, 0}));
  EXPECT_EQ(split(SplitAttention::off, 1, 8, 2048), (P{0, 0}));
  // Forced: every call, in splits of 16 keys.
  EXPECT_EQ(split(SplitAttention::force, 70, 140, 70), (P{5, 16}));
  EXPECT_EQ(split(SplitAttention::force, 1, 1, 16), (P{1, 16}));
  // lavapipe's 65,535 iterations, head dim 64: (65535 - 864) / 194 = 333 keys a thread, so no
  // split over 21,312 keys; a forward kernel past the budget sends any call to the splits.
  EXPECT_EQ(split(SplitAttention::on, 1, 512, 8192, true, 65535), (P{1, 8192}));
  EXPECT_EQ(split(SplitAttention::on, 1, 512, 65536, true, 65535), (P{4, 21312}));
  EXPECT_EQ(split(SplitAttention::on, 512, 4096, 512, false, 65535), (P{1, 512}));
  EXPECT_EQ(split(SplitAttention::on, 512, 4096, 512, true, 65535), (P{0, 0}));
  // A head dim too long for one key a thread within the budget: no split either.
  EXPECT_EQ(split(SplitAttention::on, 1, 8, 2048, false, 1000, 128), (P{0, 0}));
}

// Note [Attention head chunks]: on a GPU the head dim itself up to 64, on a CPU-type device 64
// for every head dim; longer heads walk chunks of 64.
TEST(VulkanPolicy, AttentionHeadChunks) {
  using fv::attention_head_chunk;
  for (std::int64_t dim : {0, 1}) EXPECT_EQ(attention_head_chunk(dim, 1), 1u) << dim;
  for (std::int64_t dim : {4, 6, 32, 64}) EXPECT_EQ(attention_head_chunk(dim, 1), dim) << dim;
  for (std::int64_t dim : {80, 128, 4096}) EXPECT_EQ(attention_head_chunk(dim, 1), 64u) << dim;
  for (std::int64_t dim : {0, 1, 8, 64, 128}) EXPECT_EQ(attention_head_chunk(dim, 64), 64u) << dim;
  EXPECT_EQ(attention_head_chunk(8, 16), 16u);
  EXPECT_EQ(attention_head_chunk(8, 1000), 64u);  // never past the widest
}

// The subgroup modules run only when asked for, and only where the device has the operations.
TEST(VulkanPolicy, SubgroupReductionsOnlyWhenAskedForAndAvailable) {
  using ferry::vulkan::subgroup_reductions;
  EXPECT_FALSE(subgroup_reductions(nullptr, true));
  EXPECT_FALSE(subgroup_reductions("", true));
  EXPECT_TRUE(subgroup_reductions("1", true));
  EXPECT_FALSE(subgroup_reductions("1", false));
  EXPECT_FALSE(subgroup_reductions("0", true));
  EXPECT_THROW(subgroup_reductions("on", true), ferry::Error);
}

TEST(VulkanPolicy, PipelineCacheRoundTrip) {
  fv::CacheIdentity id{0x10de, 0x2330, {1, 2, 3}};
  auto data = fake_driver_cache(id, 100);
  auto file = fv::wrap_pipeline_cache(data);
  auto back = fv::unwrap_pipeline_cache(file, id);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, data);
}

TEST(VulkanPolicy, CorruptOrForeignPipelineCacheIsIgnored) {
  fv::CacheIdentity id{0x10de, 0x2330, {1, 2, 3}};
  auto file = fv::wrap_pipeline_cache(fake_driver_cache(id, 100));
  EXPECT_FALSE(fv::unwrap_pipeline_cache({}, id));
  // Truncated at every length, one flipped bit anywhere.
  for (std::size_t n = 0; n < file.size(); ++n)
    EXPECT_FALSE(fv::unwrap_pipeline_cache(std::span(file.data(), n), id)) << "length " << n;
  for (std::size_t i = 0; i < file.size(); ++i) {
    auto bad = file;
    bad[i] ^= 0x10;
    EXPECT_FALSE(fv::unwrap_pipeline_cache(bad, id)) << "byte " << i;
  }
  // Another device, vendor or driver build (pipelineCacheUUID).
  fv::CacheIdentity other = id;
  other.device_id = 0x2331;
  EXPECT_FALSE(fv::unwrap_pipeline_cache(file, other));
  other = id;
  other.uuid[15] = 9;
  EXPECT_FALSE(fv::unwrap_pipeline_cache(file, other));
}

TEST(VulkanPolicy, CoalesceMergesWhatEveryTensorAllows) {
  // Contiguous [2, 3, 4] with a broadcast [1, 3, 4] input: everything merges.
  auto c = fv::coalesce(std::vector<std::int64_t>{2, 3, 4}, {{12, 4, 1}, {0, 4, 1}});
  EXPECT_EQ(c.sizes, (std::vector<std::int64_t>{2, 12}));
  EXPECT_EQ(c.strides, (std::vector<std::vector<std::int64_t>>{{12, 1}, {0, 1}}));
  // A transposed input keeps both dims.
  c = fv::coalesce(std::vector<std::int64_t>{3, 5}, {{5, 1}, {1, 3}});
  EXPECT_EQ(c.sizes, (std::vector<std::int64_t>{3, 5}));
  // Size-1 dims vanish; a 0-d tensor becomes one element.
  c = fv::coalesce(std::vector<std::int64_t>{1, 7, 1}, {{7, 1, 1}});
  EXPECT_EQ(c.sizes, (std::vector<std::int64_t>{7}));
  EXPECT_EQ(c.strides[0], (std::vector<std::int64_t>{1}));
  c = fv::coalesce(std::vector<std::int64_t>{}, {{}, {}});
  EXPECT_EQ(c.sizes, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(c.strides, (std::vector<std::vector<std::int64_t>>{{0}, {0}}));
}

TEST(VulkanPolicy, TransferQueueOnlyWhenAskedForAndTheDeviceHasOne) {
  // An NVIDIA-like device: graphics+compute, transfer-only (copy engines), compute-only.
  const fv::QueueFamilyInfo gpu[] = {{fv::kQueueGraphics | fv::kQueueCompute | fv::kQueueTransfer, 16, 64},
                                 {fv::kQueueTransfer, 2, 64},
                                 {fv::kQueueCompute | fv::kQueueTransfer, 8, 64}};
  // Lavapipe: one family with one queue.
  const fv::QueueFamilyInfo cpu[] = {{fv::kQueueGraphics | fv::kQueueCompute | fv::kQueueTransfer, 1, 64}};
  fv::TransferQueueChoice c = fv::choose_transfer_queue(nullptr, gpu, 0, true);
  EXPECT_FALSE(c.on);
  EXPECT_NE(c.note.find("queue family 1 is transfer-only"), std::string::npos) << c.note;
  EXPECT_FALSE(fv::choose_transfer_queue("0", gpu, 0, true).on);
  c = fv::choose_transfer_queue("1", gpu, 0, true);
  EXPECT_TRUE(c.on);
  EXPECT_EQ(c.family, 1u);
  EXPECT_EQ(c.index, 0u);
  EXPECT_FALSE(fv::choose_transfer_queue("1", gpu, 0, false).on);  // no timeline semaphores
  c = fv::choose_transfer_queue("1", cpu, 0, true);
  EXPECT_FALSE(c.on);
  EXPECT_NE(c.note.find("no transfer-only"), std::string::npos) << c.note;
  c = fv::choose_transfer_queue("force", gpu, 0, true);  // a real one where there is one
  EXPECT_TRUE(c.on);
  EXPECT_EQ(c.family, 1u);
  c = fv::choose_transfer_queue("force", cpu, 0, true);  // the compute queue itself
  EXPECT_TRUE(c.on);
  EXPECT_EQ(c.family, 0u);
  EXPECT_EQ(c.index, 0u);
  const fv::QueueFamilyInfo two[] = {{fv::kQueueCompute | fv::kQueueTransfer, 2, 64}};
  c = fv::choose_transfer_queue("force", two, 0, true);  // a second queue of the compute family
  EXPECT_TRUE(c.on);
  EXPECT_EQ(c.index, 1u);
  EXPECT_THROW(fv::choose_transfer_queue("yes", gpu, 0, true), ferry::Error);
}
