// tests/conformance/compare.cpp — how a device's result is held to the CPU's.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "conformance.hpp"

namespace ferry::conformance {

namespace {
// f32 bits as an integer line on which adjacent floats differ by 1 (-0 = +0).
std::int64_t ulp_line(float f) {
  std::int32_t i;
  std::memcpy(&i, &f, 4);
  return i < 0 ? std::int64_t(INT32_MIN) - i : i;
}
}  // namespace

std::string compare_ulp(const Tensor& got, const Tensor& want, double max_ulp) {
  if (got.dtype() != DType::f32 || want.dtype() != DType::f32) return {};
  auto g = got.to_vector<float>(), w = want.to_vector<float>();
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < g.size() && i < w.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    const double d = std::isnan(g[i]) || std::isnan(w[i])
                         ? INFINITY
                         : double(std::llabs(ulp_line(g[i]) - ulp_line(w[i])));
    if (d > worst) worst = d, at = i;
  }
  if (worst <= max_ulp) return {};
  return fmt::format("element {} is {:.9g} but the CPU gives {:.9g}: {} ulp apart (at most {})", at,
                     g[at], w[at], worst, max_ulp);
}

std::string compare(const Tensor& got, const Tensor& want, double max_nmse, double* nmse) {
  *nmse = 0;
  if (got.sizes() != want.sizes())
    return fmt::format("shape {} but the CPU gives {}", shape_str(got.sizes()),
                       shape_str(want.sizes()));
  if (got.dtype() != want.dtype())
    return fmt::format("dtype {} but the CPU gives {}", dtype_name(got.dtype()),
                       dtype_name(want.dtype()));
  if (!is_floating(want.dtype())) {
    auto g = got.to_vector<std::int64_t>(), w = want.to_vector<std::int64_t>();
    for (std::size_t i = 0; i < g.size(); ++i)
      if (g[i] != w[i]) {
        *nmse = INFINITY;
        return fmt::format("element {} is {} but the CPU gives {} (integers must match exactly)", i,
                           g[i], w[i]);
      }
    return {};
  }
  // In double: f32 and the 16-bit floats convert exactly, and f64 keeps the
  // digits its tighter threshold judges (and values beyond f32's range).
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    bool gn = std::isnan(g[i]), wn = std::isnan(w[i]);
    if (gn || wn) {
      if (gn != wn) {
        *nmse = INFINITY;
        return fmt::format("element {} is {} but the CPU gives {} (NaN must match NaN)", i, g[i],
                           w[i]);
      }
      continue;
    }
    if (std::isinf(g[i]) || std::isinf(w[i])) {
      if (g[i] != w[i]) {
        *nmse = INFINITY;
        return fmt::format("element {} is {} but the CPU gives {} (infinities must match in sign)",
                           i, g[i], w[i]);
      }
      continue;
    }
    double d = g[i] - w[i];
    err += d * d;
    ref += w[i] * w[i];
  }
  *nmse = ref > 0 ? err / ref : err;
  if (!(*nmse <= max_nmse)) {
    std::size_t worst = 0;
    double worst_d = -1;
    for (std::size_t i = 0; i < g.size(); ++i) {
      double d = std::fabs(g[i] - w[i]);
      if (d > worst_d) worst_d = d, worst = i;
    }
    return fmt::format(
        "NMSE {:.3g} above the threshold {:.3g}; worst element {} is {} but the CPU gives {}",
        *nmse, max_nmse, worst, g[worst], w[worst]);
  }
  return {};
}

Tensor make_input(const Shape& shape, DType dtype, std::uint64_t seed, double lo, double hi) {
  manual_seed(seed);
  switch (dtype) {
    case DType::boolean:
      return lt(rand(shape), 0.5);
    case DType::u8:
      return randint(std::int64_t(std::max(lo, 0.0)), std::int64_t(hi) + 1, shape,
                     {.dtype = dtype});
    case DType::i8:
      return randint(std::int64_t(std::max(lo, -128.0)), std::int64_t(std::min(hi, 127.0)) + 1,
                     shape, {.dtype = dtype});
    case DType::i16:
      return randint(std::int64_t(std::max(lo, -32768.0)), std::int64_t(std::min(hi, 32767.0)) + 1,
                     shape, {.dtype = dtype});
    case DType::i32:
    case DType::i64:
      return randint(std::int64_t(lo), std::int64_t(hi) + 1, shape, {.dtype = dtype});
    default:
      return uniform(shape, lo, hi, {.dtype = dtype});
  }
}

const char* status_name(Status s) {
  switch (s) {
    case Status::passed:
      return "passed";
    case Status::failed:
      return "failed";
    case Status::skipped:
      return "skipped";
  }
  return "?";
}

}  // namespace ferry::conformance
