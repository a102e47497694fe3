// tests/training_test_util.hpp — what tests/test_training_kernels.cpp and
// tests/test_training_optim.cpp share: calling a kernel straight through a device's kernel
// table, deterministic sample values, rounding to a dtype, tolerant comparisons, and the
// Vulkan device's limits (storage-buffer range, shader variant).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"

namespace training_test {

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

#define SKIP_WITHOUT_VULKAN()                                            \
  do {                                                                   \
    if (!ferry::is_available("vulkan")) {                                \
      GTEST_SKIP() << "no Vulkan device: " << ferry::describe_devices(); \
    }                                                                    \
  } while (0)

// For the tests of tensors larger than one binding, run by CTest's
// training_kernels_vulkan_split with FERRY_VULKAN_MAX_STORAGE_RANGE=512.
#define SKIP_UNLESS_SMALL_RANGE()                                                             \
  do {                                                                                        \
    SKIP_WITHOUT_VULKAN();                                                                    \
    if (training_test::vulkan_storage_range() > (1u << 16)) {                                 \
      GTEST_SKIP() << "the storage-buffer range is " << training_test::vulkan_storage_range() \
                   << " bytes; CTest's training_kernels_vulkan_split runs this with "         \
                      "FERRY_VULKAN_MAX_STORAGE_RANGE=512";                                   \
    }                                                                                         \
  } while (0)

inline ferry::Device cpu() { return ferry::Device::cpu(); }
inline ferry::Device vulkan() { return ferry::Device("vulkan:0"); }
// The bytes one binding spans (FERRY_VULKAN_MAX_STORAGE_RANGE makes it small, to force splits).
inline std::uint64_t vulkan_storage_range() {
  return std::stoull(ferry::device_impl(vulkan()).info().properties.at("max_storage_buffer_range"));
}

// Whether vulkan:0's shaders take `dt`: all in the full variant (f64 where the device has
// shaderFloat64), f32 and i32 in the base one (FERRY_VULKAN_BASE_SHADERS=1).
inline bool vulkan_takes(DType dt) {
  ferry::DeviceImpl& impl = ferry::device_impl(vulkan());
  if (dt == DType::f64) return impl.supports(ferry::OpId::add, DType::f64);
  const bool full = impl.info().properties.at("shader_variant").rfind("full", 0) == 0;
  return full || dt == DType::f32 || dt == DType::i32;
}

// The float dtypes vulkan:0's shaders take.
inline std::vector<DType> vulkan_float_dtypes() {
  std::vector<DType> dts;
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64})
    if (vulkan_takes(dt)) dts.push_back(dt);
  return dts;
}

// Runs `op`'s kernel of `dev` on the tensors' views, as the dispatcher would.
inline void call(const ferry::Device& dev, std::string_view op, const std::vector<Tensor>& in,
                 const std::vector<Tensor>& out, ferry::Attrs attrs = {}) {
  ferry::DeviceImpl& impl = ferry::device_impl(dev);
  const ferry::OpId id = ferry::op_from_name(op).value();
  const ferry::KernelFn* kernel = impl.find_kernel(id);
  if (!kernel) throw ferry::UnsupportedError(std::string(op) + " has no kernel on " + dev.str());
  ferry::OpCall c{.op = id, .inputs = {}, .outputs = {}, .attrs = std::move(attrs)};
  for (const Tensor& t : in) c.inputs.push_back(ferry::tensor_arg(t));
  for (const Tensor& t : out) c.outputs.push_back(ferry::tensor_arg(t));
  (*kernel)(impl, c);
}

// n values in [lo, hi], scrambled by `seed` (a fixed low-discrepancy walk).
inline std::vector<double> values(std::int64_t n, double lo, double hi, int seed) {
  std::vector<double> v(std::size_t(std::max<std::int64_t>(n, 0)));
  const double phase = 0.1 + 0.37 * seed;
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = lo + (hi - lo) * std::fmod(double(i) * 0.6180339887498949 + phase, 1.0);
  return v;
}

inline std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// A double rounded to dtype `dt` the way a kernel's store rounds a float.
inline double round_to(double x, DType dt) {
  switch (dt) {
    case DType::f32:
      return double(float(x));
    case DType::f16:
      return double(float(ferry::Half(float(x))));
    case DType::bf16:
      return double(float(ferry::BFloat16(float(x))));
    default:
      return x;
  }
}

// The unit roundoff of a floating dtype.
inline double eps_of(DType dt) {
  switch (dt) {
    case DType::f16:
      return std::ldexp(1.0, -11);
    case DType::bf16:
      return std::ldexp(1.0, -8);
    case DType::f64:
      return std::ldexp(1.0, -53);
    default:
      return std::ldexp(1.0, -24);
  }
}

// |got - want| <= atol + rtol |want| elementwise; NaN and infinities must match exactly.
inline void expect_near(const std::vector<double>& got, const std::vector<double>& want,
                        double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (std::size_t i = 0; i < got.size() && failures < 5; ++i) {
    const double g = got[i], w = want[i];
    const bool ok = std::isnan(w)   ? std::isnan(g)
                    : std::isinf(w) ? g == w
                                    : std::fabs(g - w) <= atol + rtol * std::fabs(w);
    if (!ok) {
      ++failures;
      ADD_FAILURE() << what << " at " << i << ": got " << g << ", want " << w;
    }
  }
}

inline constexpr DType kGpuFloats[] = {DType::f32, DType::f16, DType::bf16, DType::f64};

}  // namespace training_test
