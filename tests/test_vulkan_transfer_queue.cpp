// The Vulkan transfer queue (Note [Transfer queue] in runtime/vulkan/vk_recorder.hpp), through
// the public API. Off by default; the ctest transfer_vulkan_queue runs these (and the transfer,
// thread and profiler tests) on lavapipe with FERRY_VULKAN_TRANSFER_QUEUE=force and staging
// copies, so every upload and download goes through the second lane. Elsewhere they skip.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"
#include "ferry/profiler.hpp"

using namespace ferry;

namespace {

// The first Vulkan device's properties, or none.
std::map<std::string, std::string> vulkan_properties() {
  for (const DeviceInfo& d : devices())
    if (d.device == "vulkan:0" && d.available) return d.properties;
  return {};
}

// Skips unless vulkan:0 records copies on a transfer queue.
#define REQUIRE_TRANSFER_QUEUE()                                                           \
  do {                                                                                     \
    const auto p = vulkan_properties();                                                    \
    if (p.empty()) GTEST_SKIP() << "no Vulkan device";                                     \
    const std::string mode = p.at("transfer_queue");                                       \
    if (mode.rfind("off", 0) == 0)                                                         \
      GTEST_SKIP() << "transfer queue " << mode                                            \
                   << "; FERRY_VULKAN_TRANSFER_QUEUE=force runs this (ctest "               \
                      "transfer_vulkan_queue)";                                            \
  } while (0)

std::uint64_t waits() { return std::stoull(vulkan_properties().at("transfer_queue_waits")); }

}  // namespace

TEST(VulkanTransferQueue, UploadsKernelsAndDownloadsStayInOrderAcrossTheQueues) {
  REQUIRE_TRANSFER_QUEUE();
  Device v("vulkan:0");
  const std::uint64_t before = waits();
  std::mt19937 rng(26);
  constexpr int kN = 4096;
  Tensor acc = zeros({kN}, {.device = v});
  std::vector<float> want(kN, 0.0f);
  for (int step = 0; step < 60; ++step) {
    std::vector<float> h(kN);
    for (float& e : h) e = float(rng() % 100);
    // An upload on the transfer queue; the kernel reading it waits for it (read after write).
    // Then x is freed while the kernel may still read it, and the next upload reuses its
    // memory at once: that copy waits for the kernel (write after read).
    Tensor x = tensor(h, {kN}).to(v);
    acc = acc * 0.5 + x;
    for (int k = 0; k < kN; ++k) want[k] = want[k] * 0.5f + h[k];
    // A download on the transfer queue waits for the kernels that wrote acc.
    if (step % 7 == 3) ASSERT_EQ(acc.to_vector<float>(), want) << "step " << step;
  }
  EXPECT_EQ(acc.to_vector<float>(), want);
  // Where the host maps device memory it writes and reads tensors directly: no copies.
  if (vulkan_properties().at("direct_host_access") != "yes")
    EXPECT_GT(waits(), before) << "no batch waited for the other queue: were the copies on it?";
}

TEST(VulkanTransferQueue, ACopyIntoATensorTheGpuStillReadsWaitsForIt) {
  REQUIRE_TRANSFER_QUEUE();
  Device v("vulkan:0");
  Tensor on = arange(0, 8192, 1, {.dtype = DType::i64}).to(v);
  Tensor y = on * 3;  // the compute queue reads `on`
  on.copy_(zeros({8192}, {.dtype = DType::i64}));  // the transfer queue overwrites it
  EXPECT_EQ(y.to(Device::cpu()).to_vector<std::int64_t>()[8191], 3 * 8191);
  EXPECT_EQ(ferry::sum(on).item<std::int64_t>(), 0);
}

TEST(VulkanTransferQueue, TheProfilerTimesCopiesOnTheTransferQueue) {
  REQUIRE_TRANSFER_QUEUE();
  Device v("vulkan:0");
  Tensor h = ones({1 << 16});
  profiler::Scope scope;
  Tensor x = h.to(v);
  Tensor y = x * 2.0;
  std::vector<float> back = y.to_vector<float>();
  const profiler::Profile& p = scope.stop();
  EXPECT_EQ(back[0], 2.0f);
  int timed_copies = 0, timed_ops = 0;
  for (const profiler::Event& e : p.events()) {
    if (e.device != "vulkan:0" || !e.has_device_time()) continue;
    EXPECT_GE(e.device_end_ns, e.device_begin_ns) << e.name;
    (e.kind == profiler::EventKind::copy ? timed_copies : timed_ops) += 1;
  }
  EXPECT_GT(timed_copies, 0);
  EXPECT_GT(timed_ops, 0);
}
