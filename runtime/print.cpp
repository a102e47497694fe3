// runtime/print.cpp — PyTorch-style printing:
//   tensor([[1.0000, 2.0000],
//           [3.0000, 4.0000]], device='vulkan:0', dtype=f16)
// Dims longer than 2 * kEdge + 1 are elided to their first and last kEdge items.
#include <fmt/format.h>

#include <cmath>
#include <ostream>

#include "ferry/tensor.hpp"

namespace ferry {
namespace {

constexpr std::int64_t kEdge = 3;
constexpr std::int64_t kElideAbove = 1000;

struct Printer {
  const std::vector<double>& values;
  const Shape& sizes;
  Shape strides;
  DType dtype;
  bool elide;
  int width = 0;

  std::string format(double v) const {
    if (dtype == DType::boolean) return v != 0 ? "True" : "False";
    if (!is_floating(dtype)) return fmt::format("{}", std::int64_t(v));
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    double a = std::fabs(v);
    if (a != 0 && (a >= 1e8 || a < 1e-4)) return fmt::format("{:.4e}", v);
    return fmt::format("{:.4f}", v);
  }

  void row_items(std::int64_t base, std::size_t dim, std::string& out, std::size_t indent) const {
    if (dim == sizes.size()) {
      std::string s = format(values[std::size_t(base)]);
      out += std::string(std::size_t(std::max<int>(0, width - int(s.size()))), ' ') + s;
      return;
    }
    out += '[';
    std::int64_t n = sizes[dim];
    for (std::int64_t i = 0; i < n; ++i) {
      if (elide && n > 2 * kEdge && i == kEdge) {
        if (dim + 1 == sizes.size()) {
          out += "..., ";
        } else {
          out += "...,\n";
          out.append(indent + dim + 1, ' ');
        }
        i = n - kEdge;
      }
      row_items(base + i * strides[dim], dim + 1, out, indent);
      if (i + 1 < n) {
        if (dim + 1 == sizes.size()) {
          out += ", ";
        } else {
          // Appended piece by piece: `"," + std::string(...)` trips a false
          // -Wrestrict in GCC 12's inlined std::string insert.
          out += ',';
          out.append(sizes.size() - dim - 1, '\n');
          out.append(indent + dim + 1, ' ');
        }
      }
    }
    out += ']';
  }
};

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  // Values are read on the host, where every dtype converts (a GPU may not
  // compute f64); floats as double, which holds f64 and every narrower float.
  const Tensor host = cpu();
  std::vector<double> values;
  if (is_floating(dtype())) {
    values = host.to_vector<double>();
  } else {
    for (std::int64_t v : host.to_vector<std::int64_t>()) values.push_back(double(v));
  }
  std::string suffix;
  if (!device().is_cpu()) suffix += fmt::format(", device='{}'", device().str());
  if (dtype() != DType::f32 && dtype() != DType::i64 && dtype() != DType::boolean)
    suffix += fmt::format(", dtype={}", dtype_name(dtype()));
  if (numel() == 0) return fmt::format("tensor([], size={}{})", shape_str(sizes()), suffix);
  Printer p{values, sizes(), {}, dtype(), numel() > kElideAbove};
  p.strides.resize(sizes().size());
  std::int64_t s = 1;
  for (std::size_t i = sizes().size(); i-- > 0;) {
    p.strides[i] = s;
    s *= sizes()[i];
  }
  for (double v : values) p.width = std::max(p.width, int(p.format(v).size()));
  std::string out = "tensor(";
  p.row_items(0, 0, out, 7);
  return out + suffix + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace ferry
