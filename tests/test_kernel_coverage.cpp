// tests/test_kernel_coverage.cpp — the CPU and every available GPU device
// (vulkan:N on lavapipe in CI, cuda:N and NVIDIA's Vulkan device on a GPU
// machine) have a kernel for exactly the ops ops/ops.table gives their
// backend. The conformance suite reports an op a device lacks as a skip,
// which a run passes with, so coverage is checked here. cuda_module_tests.cpp
// checks the CUDA table where no GPU is. test_op_table.cpp checks the table's
// other generated mirrors.
#include <gtest/gtest.h>

#include <string>

#include "ferry/backend.hpp"
#include "ferry/registry.hpp"
#include "kernel_coverage_util.hpp"

namespace {

TEST(KernelCoverage, EveryBuiltinDeviceHasTheKernelsTheTableGivesIt) {
  int gpus = 0;
  for (const ferry::DeviceInfo& info : ferry::devices()) {
    // Plugins (tests/plugin's testdev) may implement a subset by design.
    if (!info.available ||
        (info.backend != "cpu" && info.backend != "cuda" && info.backend != "vulkan"))
      continue;
    ferry_test::expect_table_ops(ferry::device_impl(ferry::Device(info.device)).kernel_ops(),
                                 info.backend);
    gpus += info.backend != "cpu";
  }
  if (gpus == 0)
    GTEST_SKIP() << "no CUDA or Vulkan device here (the CPU was checked): "
                 << ferry::describe_devices();
}

}  // namespace
