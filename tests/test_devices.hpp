// tests/test_devices.hpp — the devices that device-generic tests run on.
//
// A device-generic test (optimizer rules, training parity, the planner, the
// data loader) names every accelerator backend here, so that the same test
// runs on vulkan:0 and on cuda:0 wherever they exist, and is reported skipped,
// with the reason, where they do not (CTest shows GTEST_SKIP as skipped).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ferry/ferry.hpp"

namespace ferry_test {

// The first device of each accelerator backend.
inline const std::vector<std::string>& accelerator_names() {
  static const std::vector<std::string> names{"vulkan:0", "cuda:0"};
  return names;
}

// "cpu" and every accelerator: the parameters of a device-generic suite.
inline std::vector<std::string> all_device_names() {
  std::vector<std::string> d{"cpu"};
  for (const std::string& a : accelerator_names()) d.push_back(a);
  return d;
}

// The devices of all_device_names() that this machine has.
inline std::vector<std::string> available_device_names() {
  std::vector<std::string> d;
  for (const std::string& n : all_device_names())
    if (ferry::is_available(n)) d.push_back(n);
  return d;
}

// "vulkan:0" -> "vulkan": the device's part of a test name.
inline std::string backend_of(const std::string& device) {
  return device.substr(0, device.find(':'));
}

}  // namespace ferry_test

// Skips the current test, saying why, when `device` is not usable here.
#define FERRY_SKIP_UNLESS_DEVICE(device)                                                   \
  do {                                                                                     \
    if (!ferry::is_available(device))                                                      \
      GTEST_SKIP() << (device) << " is not available here: " << ferry::describe_devices(); \
  } while (0)
