// tests/test_kernel_coverage.cpp — every available GPU device (vulkan:N on
// lavapipe in CI, cuda:N and NVIDIA's Vulkan device on a GPU machine)
// implements every op of the CPU backend, and nothing the CPU lacks. The
// conformance suite reports an op a device lacks as a skip, which a run
// passes with, so coverage is checked here. cuda_module_tests.cpp checks the
// CUDA table where no GPU is.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/registry.hpp"

namespace {

TEST(KernelCoverage, EveryGpuDeviceImplementsTheCpuBackendsOps) {
  const std::vector<std::string> cpu_ops = ferry::device_impl(ferry::Device("cpu")).kernel_names();
  ASSERT_FALSE(cpu_ops.empty());
  const std::set<std::string> cpu_set(cpu_ops.begin(), cpu_ops.end());
  int checked = 0;
  for (const ferry::DeviceInfo& info : ferry::devices()) {
    // Plugins (tests/plugin's testdev) may implement a subset by design.
    if (!info.available || (info.backend != "cuda" && info.backend != "vulkan")) continue;
    SCOPED_TRACE(info.device);
    const std::vector<std::string> ops =
        ferry::device_impl(ferry::Device(info.device)).kernel_names();
    const std::set<std::string> have(ops.begin(), ops.end());
    for (const std::string& op : cpu_ops)
      EXPECT_TRUE(have.count(op)) << "'" << op << "' has a CPU kernel but none on this device";
    for (const std::string& op : ops)
      EXPECT_TRUE(cpu_set.count(op)) << "'" << op << "' has no CPU kernel to test it against";
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no CUDA or Vulkan device here: " << ferry::describe_devices();
}

}  // namespace
