// Tests of the Vulkan backend through the public API, on the first Vulkan
// device (lavapipe in CI, with the validation layer on: tests/CMakeLists.txt).
// Skipped, with the reason, where no Vulkan device is available. Op results
// are held to the CPU by the conformance suite; these check the device itself.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ferry/ferry.hpp"

using namespace ferry;

namespace {

// The first Vulkan device, or skips the test saying why there is none.
#define REQUIRE_VULKAN()                                                       \
  do {                                                                         \
    if (!is_available("vulkan:0")) {                                           \
      std::string why = "no Vulkan device";                                    \
      for (const DeviceInfo& d : devices())                                    \
        if (d.backend == "vulkan" && !d.available) why = d.unavailable_reason; \
      GTEST_SKIP() << why;                                                     \
    }                                                                          \
  } while (0)

DeviceInfo vulkan_info() {
  for (const DeviceInfo& d : devices())
    if (d.device == "vulkan:0") return d;
  return {};
}

std::uint64_t counter(const char* name) { return std::stoull(vulkan_info().properties.at(name)); }

}  // namespace

TEST(VulkanDevice, InfoDescribesTheDevice) {
  REQUIRE_VULKAN();
  DeviceInfo d = vulkan_info();
  EXPECT_EQ(d.backend, "vulkan");
  EXPECT_TRUE(d.available);
  EXPECT_FALSE(d.name.empty());
  EXPECT_FALSE(d.vendor.empty());
  EXPECT_FALSE(d.driver.empty());
  EXPECT_GT(d.memory_total, 0u);
  EXPECT_GT(d.max_allocation, 0u);
  EXPECT_NE(d.uuid_str(), "00000000-0000-0000-0000-000000000000");
  for (const char* key : {"subgroup_size", "shared_memory", "max_storage_buffer_range", "int64",
                          "storage_16bit", "storage_8bit", "cooperative_matrix", "api_version"})
    EXPECT_TRUE(d.properties.count(key)) << key;
  EXPECT_GT(std::stoull(d.properties.at("subgroup_size")), 0u);
}

TEST(VulkanDevice, OutOfMemoryIsTypedAndTheDeviceStaysUsable) {
  REQUIRE_VULKAN();
  Device v("vulkan:0");
  const std::int64_t huge = std::int64_t(1) << 46;  // 256 TiB of f32
  try {
    Tensor t = empty({huge}, {.device = v});
    FAIL() << "allocated " << huge * 4 << " bytes";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested(), std::uint64_t(huge) * 4);
    EXPECT_EQ(e.device(), "vulkan:0");
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  Tensor x = full({1000}, 2.0, {.device = v});
  EXPECT_EQ(ferry::sum(x * x).item<float>(), 4000.0f);
}

TEST(VulkanDevice, ThousandsOfOpsAreBatchedIntoFewSubmissions) {
  REQUIRE_VULKAN();
  Device v("vulkan:0");
  Tensor x = zeros({256}, {.device = v});
  synchronize(v);
  const std::uint64_t before = counter("batches_submitted");
  for (int i = 0; i < 10000; ++i) x = x + 1.0;  // each result frees the previous one
  std::vector<float> got = x.to_vector<float>();
  EXPECT_EQ(got.front(), 10000.0f);
  EXPECT_EQ(got.back(), 10000.0f);
  const std::uint64_t batches = counter("batches_submitted") - before;
  EXPECT_GE(batches, 1u);
  // Each x + 1.0 records two commands (the scalar's fill, the add).
  EXPECT_LE(batches, 10000u / 100) << "ops must be recorded in batches, not submitted one by one";
}

TEST(VulkanDevice, MemoryIsReusedAndReleased) {
  REQUIRE_VULKAN();
  Device v("vulkan:0");
  synchronize(v);
  const MemoryStats base = memory_stats(v);
  {
    Tensor a = ones({1 << 20}, {.device = v});
    Tensor b = a * 3.0;  // the GPU still works on a and b when they are freed
    EXPECT_GE(memory_stats(v).allocated, base.allocated + 2 * (4u << 20));
  }
  synchronize(v);  // deferred frees happen once the batch has completed
  EXPECT_EQ(memory_stats(v).allocated, base.allocated);
  Tensor c = ones({1 << 20}, {.device = v});  // served from the cache
  EXPECT_GT(memory_stats(v).cache_hits, base.cache_hits);
  c = Tensor();
  synchronize(v);
  empty_cache(v);
  EXPECT_LE(memory_stats(v).reserved, base.reserved);
}

TEST(VulkanDevice, CopiesBetweenDevicesAreExact) {
  REQUIRE_VULKAN();
  Device v("vulkan:0");
  Tensor x = arange(0, 4099, 1, {.dtype = DType::i64});
  Tensor on = x.to(v);
  Tensor back = on.slice(0, 3, 4099, 5).to(Device::cpu());
  Tensor want = x.slice(0, 3, 4099, 5).contiguous();
  EXPECT_EQ(back.to_vector<std::int64_t>(), want.to_vector<std::int64_t>());
  // Writing a device tensor the GPU is still reading must wait for the GPU.
  Tensor y = on * 2;
  on.copy_(zeros({4099}, {.dtype = DType::i64}));
  EXPECT_EQ(y.to(Device::cpu()).to_vector<std::int64_t>()[4098], 2 * 4098);
  EXPECT_EQ(ferry::sum(on).item<std::int64_t>(), 0);
}
