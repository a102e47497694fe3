// tests/kernel_coverage_util.hpp — a backend's kernels against the op table's
// backends column (Note [The op table] in ferry/op.hpp), for
// test_kernel_coverage.cpp (the CPU and every available GPU device) and
// cuda_module_tests.cpp (the CUDA table, where no GPU is). Each op the table
// gives the backend must have exactly one kernel, and no other op may.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ferry/op.hpp"

namespace ferry_test {

inline void expect_table_ops(const std::vector<ferry::OpId>& ops, const std::string& backend) {
  std::set<ferry::OpId> have;
  for (ferry::OpId op : ops) {
    const ferry::OpInfo& info = ferry::op_info(op);
    EXPECT_TRUE(have.insert(op).second)
        << "'" << info.name << "' has two " << backend << " kernels";
    EXPECT_TRUE(info.builtin_kernel(backend))
        << "'" << info.name << "' has a " << backend << " kernel but ops/ops.table does not list "
        << backend << " in its backends column";
  }
  for (const ferry::OpInfo& info : ferry::op_table())
    if (info.builtin_kernel(backend))
      EXPECT_TRUE(have.count(info.id)) << "ops/ops.table gives '" << info.name << "' a " << backend
                                       << " kernel, which is missing";
}

}  // namespace ferry_test
