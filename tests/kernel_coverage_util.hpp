// tests/kernel_coverage_util.hpp — a backend's kernel table against the CPU
// backend's ops, for test_kernel_coverage.cpp (available devices) and
// cuda_module_tests.cpp (the CUDA table, where no GPU is). The CPU backend is
// every op's reference, so the table must hold each of its ops, once, and
// nothing else (an op the CPU lacks could not be tested).
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/registry.hpp"

namespace ferry_test {

inline void expect_cpu_ops(const std::vector<std::string>& ops, const std::string& where) {
  const std::vector<std::string> cpu_ops = ferry::device_impl(ferry::Device("cpu")).kernel_names();
  ASSERT_FALSE(cpu_ops.empty());
  const std::set<std::string> cpu(cpu_ops.begin(), cpu_ops.end());
  std::set<std::string> have;
  for (const std::string& op : ops) {
    EXPECT_TRUE(have.insert(op).second) << "'" << op << "' is in the " << where << " table twice";
    EXPECT_TRUE(cpu.count(op)) << "'" << op << "' has a " << where << " kernel but no CPU kernel";
  }
  for (const std::string& op : cpu_ops)
    EXPECT_TRUE(have.count(op)) << "'" << op << "' has a CPU kernel but no " << where << " kernel";
}

}  // namespace ferry_test
