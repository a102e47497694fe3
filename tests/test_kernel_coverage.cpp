// tests/test_kernel_coverage.cpp — every available GPU device (vulkan:N on
// lavapipe in CI, cuda:N and NVIDIA's Vulkan device on a GPU machine)
// implements every op of the CPU backend, and nothing the CPU lacks. The
// conformance suite reports an op a device lacks as a skip, which a run
// passes with, so coverage is checked here. cuda_module_tests.cpp checks the
// CUDA table where no GPU is.
#include <gtest/gtest.h>

#include <string>

#include "ferry/backend.hpp"
#include "ferry/registry.hpp"
#include "kernel_coverage_util.hpp"

namespace {

TEST(KernelCoverage, EveryGpuDeviceImplementsTheCpuBackendsOps) {
  int checked = 0;
  for (const ferry::DeviceInfo& info : ferry::devices()) {
    // Plugins (tests/plugin's testdev) may implement a subset by design.
    if (!info.available || (info.backend != "cuda" && info.backend != "vulkan")) continue;
    ferry_test::expect_cpu_ops(ferry::device_impl(ferry::Device(info.device)).kernel_names(),
                               info.device);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no CUDA or Vulkan device here: " << ferry::describe_devices();
}

}  // namespace
