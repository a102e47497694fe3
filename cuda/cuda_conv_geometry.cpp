// cuda/cuda_conv_geometry.cpp — conv_geometry (cuda_conv_geometry.hpp).
#include "cuda_conv_geometry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <string_view>

#include "ferry/error.hpp"

namespace ferry::cuda {
namespace {

int to_int(std::string_view op, std::int64_t v) {
  if (v < 0 || v > INT_MAX)
    throw UnsupportedError(fmt::format("{}: a size of {} is beyond cuDNN's int sizes", op, v));
  return int(v);
}

}  // namespace

ConvGeometry conv_geometry(const OpCall& c, const TensorArg& x, const TensorArg& w,
                           const TensorArg& y) {
  const std::string_view op = c.name();
  for (const auto* list : {&c.inputs, &c.outputs})
    for (const TensorArg& t : *list) {
      if (!t.is_contiguous())
        throw Error(fmt::format("{}: the cuda kernel takes contiguous tensors", op));
      if (t.numel() > INT_MAX)
        throw UnsupportedError(
            fmt::format("{}: a tensor of {} elements is beyond cuDNN's", op, t.numel()));
    }
  const auto& stride = c.attrs.ints("stride");
  const auto& lo = c.attrs.ints("padding_lo");
  const auto& dil = c.attrs.ints("dilation");
  const int n = x.ndim() - 2;
  if (n < 1 || n > 3 || w.ndim() != n + 2 || y.ndim() != n + 2)
    throw ShapeError(fmt::format("{}: the cuda kernel takes 1 to 3 spatial dims", op));
  ConvGeometry g;
  g.nd = std::max(n, 2);
  g.N = to_int(op, x.sizes[0]);
  g.C = to_int(op, x.sizes[1]);
  g.OC = to_int(op, w.sizes[0]);
  g.G = to_int(op, c.attrs.i("groups"));
  bool symmetric = true;
  for (int i = 0; i < g.nd; ++i) {
    const int j = i - (g.nd - n);  // the tensors' spatial dim, or < 0 for the 1-D height
    const auto u = std::size_t(i);
    const bool real = j >= 0;
    const auto sj = std::size_t(real ? j : 0);
    g.in[u] = real ? to_int(op, x.sizes[sj + 2]) : 1;
    g.out[u] = real ? to_int(op, y.sizes[sj + 2]) : 1;
    g.k[u] = real ? to_int(op, w.sizes[sj + 2]) : 1;
    g.stride[u] = real ? to_int(op, stride[sj]) : 1;
    g.lo[u] = real ? to_int(op, lo[sj]) : 0;
    g.dil[u] = real ? to_int(op, dil[sj]) : 1;
    const std::int64_t span = std::int64_t(g.dil[u]) * (g.k[u] - 1) + 1;
    const std::int64_t both = std::int64_t(g.in[u]) + 2 * g.lo[u] - span;
    if (both < 0 || both / g.stride[u] + 1 != g.out[u]) symmetric = false;
  }
  if (symmetric) {
    g.pad = g.lo;
    return g;
  }
  g.explicit_pad = true;
  for (int i = 0; i < g.nd; ++i) {
    const auto u = std::size_t(i);
    const std::int64_t span = std::int64_t(g.dil[u]) * (g.k[u] - 1) + 1;
    const std::int64_t hi = std::int64_t(g.out[u] - 1) * g.stride[u] + span - g.in[u] - g.lo[u];
    if (hi < 0)
      throw UnsupportedError(
          fmt::format("{}: the cuda kernel takes no padding that drops input (low {}, high {})", op,
                      g.lo[u], hi));
    g.padded[u] = to_int(op, g.in[u] + g.lo[u] + hi);
    g.pad[u] = 0;
  }
  return g;
}

}  // namespace ferry::cuda
