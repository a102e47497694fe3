// Tests of the CUDA backend through the public API, on cuda:0. Skipped, with
// the reason (no driver, no GPU, or a build without the toolkit), where no
// CUDA device is available. Op results are held to the CPU by the conformance
// suite (ctest conformance_cuda); these check the device itself: description,
// allocator, copies in every direction and size class, events, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "ferry/transfer.hpp"

using namespace ferry;

namespace {

#define REQUIRE_CUDA()                                                       \
  do {                                                                       \
    if (!is_available("cuda:0")) {                                           \
      std::string why = "cuda: backend module not built (no CUDA toolkit)";  \
      for (const DeviceInfo& d : devices())                                  \
        if (d.backend == "cuda" && !d.available) why = d.unavailable_reason; \
      GTEST_SKIP() << why;                                                   \
    }                                                                        \
  } while (0)

DeviceInfo info_of(const std::string& device) {
  for (const DeviceInfo& d : devices())
    if (d.device == device) return d;
  return {};
}

}  // namespace

TEST(CudaDevice, UnavailableBackendSaysWhy) {
  for (const DeviceInfo& d : devices())
    if (d.backend == "cuda" && !d.available) {
      EXPECT_EQ(d.unavailable_reason.rfind("cuda: ", 0), 0u) << d.unavailable_reason;
      EXPECT_THROW(Tensor t = zeros({4}, {.device = Device::unchecked("cuda", 0)}), Error);
    }
}

TEST(CudaDevice, InfoDescribesTheGpu) {
  REQUIRE_CUDA();
  DeviceInfo d = info_of("cuda:0");
  EXPECT_EQ(d.backend, "cuda");
  EXPECT_EQ(d.vendor, "NVIDIA");
  EXPECT_FALSE(d.name.empty());
  EXPECT_GT(d.memory_total, 0u);
  EXPECT_GT(d.memory_free, 0u);
  EXPECT_LE(d.memory_free, d.memory_total);
  EXPECT_NE(d.uuid_str(), "00000000-0000-0000-0000-000000000000");
  for (const char* key : {"compute_capability", "sm_count", "warp_size", "pci_bus_id"})
    EXPECT_TRUE(d.properties.count(key)) << key;
  EXPECT_GT(std::stoi(d.properties.at("sm_count")), 0);
  // The same card seen through NVIDIA's Vulkan driver reports the same UUID
  // (cudaDeviceProp::uuid is VkPhysicalDeviceIDProperties::deviceUUID): where
  // the driver offers Vulkan, one of its Vulkan devices is this GPU.
  std::vector<std::string> nvidia_vulkan;
  for (const DeviceInfo& v : devices())
    if (v.backend == "vulkan" && v.available && v.vendor.find("NVIDIA") != std::string::npos)
      nvidia_vulkan.push_back(v.uuid_str());
  if (!nvidia_vulkan.empty())
    EXPECT_NE(std::find(nvidia_vulkan.begin(), nvidia_vulkan.end(), d.uuid_str()),
              nvidia_vulkan.end())
        << "cuda:0 has UUID " << d.uuid_str() << ", which no NVIDIA Vulkan device reports";
}

TEST(CudaDevice, CopiesRoundTripInEverySize) {
  REQUIRE_CUDA();
  Device c("cuda:0");
  // Empty, one element, odd sizes, and beyond one 32 MiB staging chunk.
  for (std::int64_t n : {std::int64_t(0), std::int64_t(1), std::int64_t(4099),
                         std::int64_t(9 << 20) + 3, std::int64_t(20 << 20) + 1}) {
    Tensor x = arange(0, double(n), 1, {.dtype = DType::i32});
    Tensor on = x.to(c);
    EXPECT_EQ(on.device(), c);
    Tensor back = on.to(Device::cpu());
    ASSERT_TRUE(back.to_vector<std::int32_t>() == x.to_vector<std::int32_t>()) << n;
  }
  // Strided views and device-side copies.
  Tensor x = arange(0, 4099, 1, {.dtype = DType::i64});
  Tensor on = x.to(c);
  Tensor back = on.slice(0, 3, 4099, 5).to(Device::cpu());
  EXPECT_EQ(back.to_vector<std::int64_t>(),
            x.slice(0, 3, 4099, 5).contiguous().to_vector<std::int64_t>());
  Tensor twice = on.clone();
  EXPECT_EQ(twice.to_vector<std::int64_t>(), x.to_vector<std::int64_t>());
}

TEST(CudaDevice, MemoryIsCachedReusedAndReleased) {
  REQUIRE_CUDA();
  Device c("cuda:0");
  synchronize(c);
  const MemoryStats base = memory_stats(c);
  {
    Tensor a = ones({1 << 20}, {.device = c});
    Tensor b = a * 3.0;  // freed while the GPU may still run: stream order makes reuse safe
    EXPECT_GE(memory_stats(c).allocated, base.allocated + 2 * (4u << 20));
  }
  EXPECT_EQ(memory_stats(c).allocated, base.allocated);
  Tensor d = ones({1 << 20}, {.device = c});
  EXPECT_GT(memory_stats(c).cache_hits, base.cache_hits);
  EXPECT_EQ(sum(d).item<float>(), float(1 << 20));
  empty_cache(c);
  EXPECT_LE(memory_stats(c).reserved, base.reserved + (20u << 20));
}

TEST(CudaDevice, OutOfMemoryIsTypedAndTheDeviceStaysUsable) {
  REQUIRE_CUDA();
  Device c("cuda:0");
  const std::int64_t huge = std::int64_t(1) << 46;  // 256 TiB of f32
  try {
    Tensor t = empty({huge}, {.device = c});
    FAIL() << "allocated " << huge * 4 << " bytes";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested(), std::uint64_t(huge) * 4);
    EXPECT_EQ(e.device(), "cuda:0");
  }
  Tensor x = full({1000}, 2.0, {.device = c});
  EXPECT_EQ(sum(x * x).item<float>(), 4000.0f);
}

TEST(CudaDevice, EventsOrderHostAndGpu) {
  REQUIRE_CUDA();
  Device c("cuda:0");
  Tensor x = ones({1 << 22}, {.device = c});
  for (int i = 0; i < 20; ++i) x = x + 1.0;
  auto ev = device_impl(c).record_event();
  ev->wait();
  EXPECT_TRUE(ev->query());
  EXPECT_EQ(x.to(Device::cpu()).to_vector<float>()[12345], 21.0f);
}

TEST(CudaDevice, ModelMovesThroughThePlannerBitForBit) {
  REQUIRE_CUDA();
  Device c("cuda:0");
  Tensor w = randn({257, 129});
  Tensor view = w.slice(0, 1, 200, 3);  // a view stays a view of the moved storage
  const std::vector<float> w_before = w.to_vector<float>();
  const std::vector<float> view_before = view.to_vector<float>();
  MigrationReport r = plan_migration({{"w", w}, {"view", view}}, c).execute();
  EXPECT_EQ(w.device(), c);
  EXPECT_EQ(view.device(), c);
  EXPECT_GT(r.bytes, 0u);
  plan_migration({{"w", w}, {"view", view}}, Device::cpu()).execute();
  EXPECT_EQ(w.to_vector<float>(), w_before);
  EXPECT_EQ(view.to_vector<float>(), view_before);
  // Still one storage: writing through the view shows in the parameter.
  view.fill_(7.0);
  EXPECT_EQ(w.to_vector<float>()[129], 7.0f);
}

TEST(CudaDevice, PeerCopiesBetweenGpus) {
  REQUIRE_CUDA();
  if (!is_available("cuda:1")) GTEST_SKIP() << "one CUDA device: no peer to copy to";
  Tensor x = arange(0, 100000, 1, {.dtype = DType::f32});
  Tensor on0 = x.to(Device("cuda:0"));
  Tensor on1 = on0.to(Device("cuda:1"));
  EXPECT_EQ(on1.to(Device::cpu()).to_vector<float>(), x.to_vector<float>());
}
