// tests/coopmat_test_util.hpp — what the tests of the cooperative-matrix path on vulkan:0
// (test_coopmat.cpp, test_coopmat_attention.cpp) share: whether the path is on, which kernel an
// op chose, and a result against the CPU's in f32.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "ferry/profiler.hpp"
#include "op_test_util.hpp"
#include "test_devices.hpp"

namespace ferry_test::coopmat {

using ferry::DType;
using ferry::Tensor;

// vulkan:0's "cooperative_matrix" property; empty without vulkan:0.
inline std::string coopmat_property() {
  for (const std::string& n : ferry_test::available_device_names())
    if (n == "vulkan:0")
      return ferry::device_impl(ferry::Device(n)).info().properties.at("cooperative_matrix");
  return {};
}

// vulkan:0's property `name`; empty where it has none.
inline std::string vulkan_property(const char* name) {
  const auto p = ferry::device_impl(ferry::Device("vulkan:0")).info().properties;
  auto it = p.find(name);
  return it == p.end() ? std::string() : it->second;
}

// Whether vulkan:0 runs f16 products on the path: emulated (CI) or on a GPU's matrix units
// (FERRY_VULKAN_COOPMAT=1, tools/gpu_check.sh).
inline bool path_is_on() {
  const std::string p = coopmat_property();
  return p.starts_with("emulated (f16") || p.starts_with("on (f16");
}

// The kernel the op named `op` chose on its device, as the profiler names it.
inline std::string op_kernel(const std::string& op, const std::function<Tensor()>& run,
                             Tensor* out) {
  ferry::profiler::Scope scope;
  *out = run();
  std::string kernel;
  for (const auto& e : scope.stop().events())
    if (e.kind == ferry::profiler::EventKind::op && e.name == op) kernel = e.detail;
  return kernel;
}

inline Tensor halves(const ferry::Shape& shape) { return ferry::randn(shape).to(DType::f16); }

// Where an f16 operand goes: vulkan:0, or the CPU in f32 (the reference).
using Place = std::function<Tensor(const Tensor&)>;

// `run` with its operands on vulkan:0: op `op`'s kernel there is named with `module` (each of
// its space-separated pieces, as "attention_coopmat_d64 _bf16" where measurement may pick the
// tile; empty: no cooperative-matrix module), and its result matches `run` on the CPU in f32,
// rounded once to the result's dtype (`tol`: relative and absolute).
inline void expect_module_matches_cpu(const std::string& op, const std::string& module,
                                      const std::function<Tensor(const Place&)>& run,
                                      const std::string& what, double tol = 2e-3) {
  const ferry::Device dev("vulkan:0");
  Tensor got;
  const std::string kernel = op_kernel(
      op, [&] { return run([&](const Tensor& t) { return t.to(dev); }); }, &got);
  if (module.empty())
    EXPECT_EQ(kernel.find("coopmat"), std::string::npos) << what << ": " << kernel;
  std::istringstream pieces(module);
  for (std::string piece; pieces >> piece;)
    EXPECT_NE(kernel.find(piece), std::string::npos) << what << ": " << kernel;
  const Tensor want = run([](const Tensor& t) { return t.to(DType::f32); }).to(got.dtype());
  ferry_test::expect_close(ferry_test::as_double(got), ferry_test::as_double(want), tol, tol, what);
}

}  // namespace ferry_test::coopmat
