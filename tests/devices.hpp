// tests/devices.hpp — which devices a test runs on: the CPU always, and vulkan:0 and cuda:0
// where this machine has them (lavapipe in CI; a driver-less machine skips CUDA, saying why).
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "ferry/ferry.hpp"

namespace ferry_test {

// The CPU and every other device this machine has, for tests that loop over them.
inline std::vector<ferry::Device> devices() {
  std::vector<ferry::Device> out{ferry::Device::cpu()};
  for (const char* name : {"vulkan:0", "cuda:0"})
    if (ferry::is_available(name)) out.emplace_back(name);
  return out;
}

}  // namespace ferry_test

// Defines Suite.NameCpu, Suite.NameVulkan and Suite.NameCuda, each calling fn(device): one
// test per device, so that a report names the device that failed. The last two skip, naming
// the devices there are, where the device is absent.
#define FERRY_TEST_ON_EACH_DEVICE(Suite, Name, fn)                       \
  TEST(Suite, Name##Cpu) { fn(ferry::Device::cpu()); }                   \
  TEST(Suite, Name##Vulkan) {                                            \
    if (!ferry::is_available("vulkan:0"))                                \
      GTEST_SKIP() << "no Vulkan device: " << ferry::describe_devices(); \
    fn(ferry::Device("vulkan:0"));                                       \
  }                                                                      \
  TEST(Suite, Name##Cuda) {                                              \
    if (!ferry::is_available("cuda:0"))                                  \
      GTEST_SKIP() << "no CUDA device: " << ferry::describe_devices();   \
    fn(ferry::Device("cuda:0"));                                         \
  }
