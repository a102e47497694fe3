// runtime/sliding_window.cpp — window tables, im2col and col2im (sliding_window.hpp).
#include "sliding_window.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "ferry/error.hpp"
#include "ferry/kit/pool_geometry.hpp"
#include "ferry/ops.hpp"

namespace ferry::detail {
namespace {

std::int64_t spatial_area(const std::vector<WindowDim>& dims) {
  std::int64_t area = 1;
  for (const WindowDim& d : dims) area *= d.in;
  return area;
}

bool any_outside(const std::vector<WindowDim>& dims) {
  for (const WindowDim& d : dims)
    if (std::find(d.at.begin(), d.at.end(), -1) != d.at.end()) return true;
  return false;
}

Tensor table_on(const std::vector<WindowDim>& dims, const Device& device) {
  return tensor(window_table(dims)).to(device);
}

}  // namespace

std::vector<std::int64_t> per_dim(std::string_view op, std::string_view what,
                                  const std::vector<std::int64_t>& v, std::size_t n) {
  if (v.size() == 1) return std::vector<std::int64_t>(n, v[0]);
  if (v.size() != n)
    throw ShapeError(fmt::format("{}: {} has {} values ({}), expected 1 or {}", op, what, v.size(),
                                 fmt::join(v, ", "), n));
  return v;
}

WindowDim sliding_dim(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                      std::int64_t pad_lo, std::int64_t dilation, std::int64_t out) {
  WindowDim d{in, kernel, out, std::vector<std::int64_t>(std::size_t(kernel * out))};
  for (std::int64_t k = 0; k < kernel; ++k)
    for (std::int64_t o = 0; o < out; ++o) {
      const std::int64_t i = o * stride - pad_lo + k * dilation;
      d.at[std::size_t(k * out + o)] = i >= 0 && i < in ? i : -1;
    }
  return d;
}

WindowDim adaptive_dim(std::int64_t in, std::int64_t out) {
  const PoolDim pd = adaptive_pool_dim(in, out);  // PyTorch's windows (ferry/kit/pool_windows.hpp)
  const std::int64_t widest = adaptive_widest_window(in, out);
  WindowDim d{in, widest, out, std::vector<std::int64_t>(std::size_t(widest * out))};
  for (std::int64_t k = 0; k < widest; ++k)
    for (std::int64_t o = 0; o < out; ++o)
      d.at[std::size_t(k * out + o)] = k < pool_tap_count(pd, o) ? pool_tap_start(pd, o) + k : -1;
  return d;
}

std::vector<std::int64_t> window_table(const std::vector<WindowDim>& dims) {
  const std::size_t n = dims.size();
  const std::int64_t area = spatial_area(dims);
  std::vector<std::int64_t> flat_stride(n, 1);
  for (std::size_t i = n; i-- > 1;) flat_stride[i - 1] = flat_stride[i] * dims[i].in;
  std::int64_t K = 1, L = 1;
  for (const WindowDim& d : dims) K *= d.taps, L *= d.out;
  std::vector<std::int64_t> table(std::size_t(K * L));
  std::vector<std::int64_t> kc(n), lc(n);  // the tap's and the window's coordinates
  for (std::int64_t kk = 0; kk < K; ++kk) {
    std::int64_t r = kk;
    for (std::size_t i = n; i-- > 0;) kc[i] = r % dims[i].taps, r /= dims[i].taps;
    for (std::int64_t ll = 0; ll < L; ++ll) {
      std::int64_t q = ll, at = 0;
      for (std::size_t i = n; i-- > 0;) {
        lc[i] = q % dims[i].out, q /= dims[i].out;
        const std::int64_t e = dims[i].at[std::size_t(kc[i] * dims[i].out + lc[i])];
        if (e < 0 || at == area) {
          at = area;
        } else {
          at += e * flat_stride[i];
        }
      }
      table[std::size_t(kk * L + ll)] = at;
    }
  }
  return table;
}

Tensor gather_windows(const Tensor& x, const std::vector<WindowDim>& dims, double fill) {
  const std::int64_t N = x.size(0), C = x.size(1), area = spatial_area(dims);
  std::int64_t K = 1, L = 1;
  for (const WindowDim& d : dims) K *= d.taps, L *= d.out;
  Tensor flat = x.reshape({N, C, area});
  if (any_outside(dims))  // the slot the outside taps read
    flat = cat({flat, full({N, C, 1}, fill, {.dtype = x.dtype(), .device = x.device()})}, 2);
  return index_select(flat, 2, table_on(dims, x.device())).view({N, C, K, L});
}

Tensor scatter_windows(const Tensor& columns, const std::vector<WindowDim>& dims) {
  const std::int64_t N = columns.size(0), C = columns.size(1), area = spatial_area(dims);
  const bool outside = any_outside(dims);
  Tensor image = zeros({N, C, area + (outside ? 1 : 0)},
                       {.dtype = columns.dtype(), .device = columns.device()});
  image = index_add(image, 2, table_on(dims, columns.device()),
                    columns.reshape({N, C, columns.size(2) * columns.size(3)}));
  Shape spatial{N, C};
  for (const WindowDim& d : dims) spatial.push_back(d.in);
  return (outside ? image.narrow(2, 0, area) : image).reshape(spatial);
}

Tensor tap_positions(const Tensor& tap, const std::vector<WindowDim>& dims) {
  std::int64_t K = 1, L = 1;
  for (const WindowDim& d : dims) K *= d.taps, L *= d.out;
  Shape out{tap.size(0), tap.size(1)};
  for (const WindowDim& d : dims) out.push_back(d.out);
  const Tensor table = table_on(dims, tap.device()).view({1, 1, K, L});
  return take_along_dim(table, tap, 2).reshape(out);
}

}  // namespace ferry::detail
