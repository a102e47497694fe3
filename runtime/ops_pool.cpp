// runtime/ops_pool.cpp — max, average and adaptive pooling as gathered windows
// (ferry/ops_pool.hpp, Note [Pooling as gathered windows]).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/backend.hpp"
#include "ferry/error.hpp"
#include "ferry/kit/pool_geometry.hpp"
#include "ferry/ops.hpp"
#include "memory_format_internal.hpp"
#include "ops_internal.hpp"
#include "sliding_window.hpp"

namespace ferry {
namespace {

using detail::WindowDim;

// The input made batched ([N, C, *spatial]), PyTorch's rank and non-empty checks.
Tensor batched_input(std::size_t n, OpId id, const Tensor& x) {
  const std::string_view op = op_info(id).name;
  if (x.dim() != std::int64_t(n) + 1 && x.dim() != std::int64_t(n) + 2)
    throw ShapeError(fmt::format(
        "{}: expected a {}-D (unbatched) or {}-D (batched) input with optional 0 dim batch "
        "size, got shape {}",
        op, n + 1, n + 2, shape_str(x.sizes())));
  for (std::int64_t d = x.dim() == std::int64_t(n) + 2 ? 1 : 0; d < x.dim(); ++d)
    if (x.size(d) == 0)
      throw ShapeError(fmt::format(
          "{}: expected the input to have non-zero size for non-batch dimensions, got shape {}", op,
          shape_str(x.sizes())));
  detail::check_dtype(id, x);
  return x.dim() == std::int64_t(n) + 2 ? x : x.unsqueeze(0);
}

std::vector<std::int64_t> spatial_sizes(const Tensor& x) {
  std::vector<std::int64_t> s;
  for (std::int64_t d = 2; d < x.dim(); ++d) s.push_back(x.size(d));
  return s;
}

// The pooled result [N, C, L] (or [N, C, 1, L]) shaped as the input was: [N, C, *out] or
// [C, *out].
Tensor shaped(const Tensor& y, const Tensor& x_in, const Tensor& x,
              const std::vector<WindowDim>& dims) {
  Shape out{x.size(0), x.size(1)};
  for (const WindowDim& d : dims) out.push_back(d.out);
  const Tensor r = y.reshape(out);
  return x_in.dim() == x.dim() ? r : r.squeeze(0);
}

// A regular pool's windows, and the per-dim sizes they came from.
struct PoolGeometry {
  std::vector<std::int64_t> kernel, stride, padding, dilation;
  std::vector<WindowDim> dims;
};

// PyTorch's pooling_output_shape and pool2d_shape_check, dim by dim.
PoolGeometry pool_windows(std::size_t n, OpId id, const Tensor& x, const ConvSizes& kernel_arg,
                          const ConvSizes& stride_arg, const ConvSizes& padding_arg,
                          const ConvSizes& dilation_arg, bool ceil_mode) {
  const std::string_view op = op_info(id).name;
  if (kernel_arg.empty())
    throw ShapeError(fmt::format("{}: kernel_size must be given (one value or {})", op, n));
  const auto kernel = detail::per_dim(op, "kernel_size", kernel_arg, n);
  const auto stride =
      detail::per_dim(op, "stride", stride_arg.empty() ? kernel_arg : stride_arg, n);
  const auto padding = detail::per_dim(op, "padding", padding_arg, n);
  const auto dilation = detail::per_dim(op, "dilation", dilation_arg, n);
  const auto in = spatial_sizes(x);
  std::vector<std::int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (kernel[i] <= 0)
      throw ShapeError(fmt::format("{}: kernel size should be greater than zero, but got {}", op,
                                   fmt::join(kernel, " x ")));
    if (stride[i] <= 0)
      throw ShapeError(fmt::format("{}: stride should be greater than zero, but got {}", op,
                                   fmt::join(stride, " x ")));
    if (dilation[i] <= 0)
      throw ShapeError(fmt::format("{}: dilation should be greater than zero, but got {}", op,
                                   fmt::join(dilation, " x ")));
    if (padding[i] < 0 || padding[i] > kernel[i] / 2)
      throw ShapeError(fmt::format(
          "{}: pad should be at least zero and at most half of kernel size, but got padding {} "
          "and kernel_size {}",
          op, fmt::join(padding, " x "), fmt::join(kernel, " x ")));
    const std::int64_t span = dilation[i] * (kernel[i] - 1) + 1;
    const std::int64_t num = in[i] + 2 * padding[i] - span + (ceil_mode ? stride[i] - 1 : 0);
    // floor division (num can be negative), as PyTorch's div_rtn
    std::int64_t o = (num >= 0 ? num / stride[i] : -((-num + stride[i] - 1) / stride[i])) + 1;
    if (ceil_mode && (o - 1) * stride[i] >= in[i] + padding[i]) --o;
    out[i] = o;
  }
  for (std::size_t i = 0; i < n; ++i)
    if (out[i] < 1)
      throw ShapeError(fmt::format(
          "{}: given input size ({}x{}), the calculated output size ({}x{}) is too small", op,
          x.size(1), fmt::join(in, "x"), x.size(1), fmt::join(out, "x")));
  PoolGeometry g{kernel, stride, padding, dilation, {}};
  for (std::size_t i = 0; i < n; ++i)
    g.dims.push_back(
        detail::sliding_dim(in[i], kernel[i], stride[i], padding[i], dilation[i], out[i]));
  return g;
}

std::vector<WindowDim> adaptive_windows(std::size_t n, OpId id, const Tensor& x,
                                        const ConvSizes& output_size) {
  const std::string_view op = op_info(id).name;
  const auto out = detail::per_dim(op, "output_size", output_size, n);
  for (std::int64_t o : out)
    if (o <= 0)
      throw ShapeError(
          fmt::format("{}: output_size must be positive, got {}", op, fmt::join(out, " x ")));
  const auto in = spatial_sizes(x);
  std::vector<WindowDim> dims;
  for (std::size_t i = 0; i < n; ++i) dims.push_back(detail::adaptive_dim(in[i], out[i]));
  return dims;
}

// The maximum of each window and its flat input position.
ValuesIndices max_over_windows(const Tensor& x_in, const Tensor& x,
                               const std::vector<WindowDim>& dims) {
  const Tensor cols = detail::gather_windows(x, dims, -std::numeric_limits<double>::infinity());
  const Tensor tap = argmax(cols, 2, /*keepdim=*/true);
  return {shaped(gather(cols, 2, tap), x_in, x, dims),
          shaped(detail::tap_positions(tap, dims), x_in, x, dims)};
}

// Each window's sum divided by `divisor` ([L] per window, the first dim slowest).
Tensor mean_over_windows(const Tensor& x_in, const Tensor& x, const std::vector<WindowDim>& dims,
                         const std::vector<double>& divisor) {
  const Tensor sums = sum(detail::gather_windows(x, dims, 0.0), {2});
  const Tensor d = tensor(divisor).to(x.dtype()).to(x.device());
  return shaped(sums / d, x_in, x, dims);
}

// The product over dims of a per-dim, per-window count, [L] with the first dim slowest.
std::vector<double> outer_product(const std::vector<std::vector<double>>& per_dim) {
  std::vector<double> r{1.0};
  for (const auto& v : per_dim) {
    std::vector<double> next;
    for (double a : r)
      for (double b : v) next.push_back(a * b);
    r = std::move(next);
  }
  return r;
}

// A pool by the device's kernel (Note [Composite ops] in ferry/op.hpp: the kernel has a
// backward row of its own, max_pool_backward or avg_pool_backward, so it runs under autograd
// too): `attrs` its geometry, to which the layout is added; the indices only for max pooling.
ValuesIndices pool_kernel(OpId id, const Tensor& x_in, const Tensor& x,
                          const std::vector<WindowDim>& dims, Attrs attrs) {
  // A channels-last input as it is on a device whose kernel takes it, else a contiguous copy
  // (recorded: differentiable); the backward needs only its shape and layout.
  const MemoryFormat format = detail::cnn_kernel_format(x, {&x});
  const Tensor xc = x.contiguous(format);
  const bool max = id == OpId::max_pool1d || id == OpId::max_pool2d || id == OpId::max_pool3d;
  Shape out{x.size(0), x.size(1)};
  for (const WindowDim& d : dims) out.push_back(d.out);
  detail::set_activation_format(attrs, format);
  ValuesIndices r;
  {
    NoGradGuard no_grad;
    r.values = detail::new_tensor_in(out, x.dtype(), detail::impl_of(x), format);
    std::vector<Tensor> outputs{r.values};
    if (max) {
      r.indices = detail::new_tensor_in(out, DType::i64, detail::impl_of(x), format);
      outputs.push_back(r.indices);
    }
    detail::run_kernel(id, {xc}, outputs, attrs);
  }
  autograd::record_pool(id, xc, r.indices, attrs, r.values);
  if (x_in.dim() == x.dim()) return r;
  return {r.values.squeeze(0), max ? r.indices.squeeze(0) : Tensor()};
}

ValuesIndices max_pool(std::size_t n, OpId id, const Tensor& x_in, const ConvSizes& kernel,
                       const ConvSizes& stride, const ConvSizes& padding, const ConvSizes& dilation,
                       bool ceil_mode) {
  const Tensor x = batched_input(n, id, x_in);
  const PoolGeometry g = pool_windows(n, id, x, kernel, stride, padding, dilation, ceil_mode);
  if (detail::use_fused_kernel_with_backward(x, id))
    return pool_kernel(id, x_in, x, g.dims,
                       {{"kernel_size", g.kernel},
                        {"stride", g.stride},
                        {"padding", g.padding},
                        {"dilation", g.dilation}});
  return max_over_windows(x_in, x, g.dims);
}

Tensor avg_pool(std::size_t n, OpId id, const Tensor& x_in, const ConvSizes& kernel,
                const ConvSizes& stride, const ConvSizes& padding, bool ceil_mode,
                bool count_include_pad, std::optional<std::int64_t> divisor_override) {
  const std::string_view op = op_info(id).name;
  const Tensor x = batched_input(n, id, x_in);
  if (divisor_override && *divisor_override == 0)
    throw ValueError(fmt::format("{}: divisor_override must be nonzero", op));
  const PoolGeometry g = pool_windows(n, id, x, kernel, stride, padding, {1}, ceil_mode);
  const std::vector<WindowDim>& dims = g.dims;
  if (detail::use_fused_kernel_with_backward(x, id)) {
    Attrs attrs{{"kernel_size", g.kernel},
                {"stride", g.stride},
                {"padding", g.padding},
                {"count_include_pad", count_include_pad}};
    if (divisor_override) attrs.set("divisor_override", *divisor_override);
    return pool_kernel(id, x_in, x, dims, std::move(attrs)).values;
  }
  // PyTorch's divisors (the kernels' rule, ferry/kit/pool_geometry.hpp).
  std::vector<std::vector<double>> counts;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<double> c;
    for (std::int64_t o = 0; o < dims[i].out; ++o)
      c.push_back(double(avg_pool_window_count(
          PoolDim{dims[i].in, dims[i].out, g.kernel[i], g.stride[i], g.padding[i], 1, false}, o,
          count_include_pad)));
    counts.push_back(std::move(c));
  }
  std::vector<double> divisor = outer_product(counts);
  if (divisor_override) std::fill(divisor.begin(), divisor.end(), double(*divisor_override));
  return mean_over_windows(x_in, x, dims, divisor);
}

// An adaptive pool's windows for the device's pool kernel. Where every dim's output divides its
// input (VGG's 7 x 7 to 7 x 7, a 14 x 14 to 7 x 7), PyTorch's windows [o·in/out, (o+1)·in/out)
// are a plain pool's, kernel = stride = in / out without padding, whose kernels walk a row's
// windows tap by tap; otherwise the windows' widths differ and the kernel places each by the
// attribute `adaptive` (ferry/kit/pool_windows.hpp). `dilation`: max pooling's.
Attrs adaptive_pool_attrs(const std::vector<WindowDim>& dims, bool dilation) {
  std::vector<std::int64_t> kernel, zeros(dims.size(), 0), ones(dims.size(), 1);
  for (const WindowDim& d : dims) {
    if (d.in % d.out != 0) return {{"adaptive", true}};
    kernel.push_back(d.in / d.out);
  }
  Attrs attrs{{"kernel_size", kernel}, {"stride", kernel}, {"padding", zeros}};
  if (dilation)
    attrs.set("dilation", ones);
  else
    attrs.set("count_include_pad", true);
  return attrs;
}

Tensor adaptive_avg_pool(std::size_t n, OpId id, const Tensor& x_in, const ConvSizes& output_size) {
  const Tensor x = batched_input(n, id, x_in);
  const auto dims = adaptive_windows(n, id, x, output_size);
  // A global pool (every output size 1) is the mean over the spatial dims, as PyTorch computes
  // it: the reduction kernels take a window of the whole plane better than a pool's thread per
  // window (fwd+bwd over [32, 64, 112, 112]: 4.2 against 20.6 ms on the CPU, 66 against 530 ms
  // on lavapipe), and the gradient is the mean's broadcast.
  if (std::all_of(dims.begin(), dims.end(), [](const WindowDim& d) { return d.out == 1; })) {
    std::vector<std::int64_t> spatial;
    for (std::int64_t d = 2; d < x.dim(); ++d) spatial.push_back(d);
    const Tensor y = mean(x, spatial, /*keepdim=*/true);
    return x_in.dim() == x.dim() ? y : y.squeeze(0);
  }
  const OpId pool = n == 1 ? OpId::avg_pool1d : n == 2 ? OpId::avg_pool2d : OpId::avg_pool3d;
  if (detail::use_fused_kernel_with_backward(x, pool))
    return pool_kernel(pool, x_in, x, dims, adaptive_pool_attrs(dims, false)).values;
  // Each window's extent (the kernels' divisors).
  std::vector<std::vector<double>> counts;
  for (const WindowDim& d : dims) {
    std::vector<double> c;
    for (std::int64_t o = 0; o < d.out; ++o)
      c.push_back(double(pool_tap_count(adaptive_pool_dim(d.in, d.out), o)));
    counts.push_back(std::move(c));
  }
  return mean_over_windows(x_in, x, dims, outer_product(counts));
}

ValuesIndices adaptive_max_pool(std::size_t n, OpId id, const Tensor& x_in,
                                const ConvSizes& output_size) {
  const Tensor x = batched_input(n, id, x_in);
  const auto dims = adaptive_windows(n, id, x, output_size);
  const OpId pool = n == 1 ? OpId::max_pool1d : n == 2 ? OpId::max_pool2d : OpId::max_pool3d;
  if (detail::use_fused_kernel_with_backward(x, pool))
    return pool_kernel(pool, x_in, x, dims, adaptive_pool_attrs(dims, true));
  return max_over_windows(x_in, x, dims);
}

// max_unpool in n dims: PyTorch's _unpool_output_size, then a scatter into zeros.
Tensor max_unpool(std::size_t n, OpId id, const Tensor& x_in, const Tensor& indices,
                  const ConvSizes& kernel_arg, const ConvSizes& stride_arg,
                  const ConvSizes& padding_arg, const ConvSizes& output_size) {
  const std::string_view op = op_info(id).name;
  const Tensor x = batched_input(n, id, x_in);
  if (!indices.defined() || indices.dtype() != DType::i64 || indices.sizes() != x_in.sizes())
    throw ShapeError(fmt::format(
        "{}: indices must be i64 of the input's shape {}, got {}", op, shape_str(x_in.sizes()),
        indices.defined()
            ? fmt::format("{} {}", dtype_name(indices.dtype()), shape_str(indices.sizes()))
            : std::string("undefined")));
  if (kernel_arg.empty())
    throw ShapeError(fmt::format("{}: kernel_size must be given (one value or {})", op, n));
  const auto kernel = detail::per_dim(op, "kernel_size", kernel_arg, n);
  const auto stride =
      detail::per_dim(op, "stride", stride_arg.empty() ? kernel_arg : stride_arg, n);
  const auto padding = detail::per_dim(op, "padding", padding_arg, n);
  const auto in = spatial_sizes(x);
  ConvSizes out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = (in[i] - 1) * stride[i] + kernel[i] - 2 * padding[i];
  if (!output_size.empty()) {
    ConvSizes given = output_size;
    if (given.size() == n + 2) given.erase(given.begin(), given.begin() + 2);
    if (given.size() != n)
      throw ValueError(fmt::format("{}: output_size should hold {} or {} sizes, but it has {}", op,
                                   n, n + 2, output_size.size()));
    for (std::size_t i = 0; i < n; ++i)
      if (!(out[i] - stride[i] < given[i] && given[i] < out[i] + stride[i]))
        throw ValueError(
            fmt::format("{}: invalid output_size ({}): dim {} must be between {} and {}", op,
                        fmt::join(output_size, ", "), i, out[i] - stride[i], out[i] + stride[i]));
    out = given;
  }
  std::int64_t plane = 1;
  for (std::int64_t o : out) {
    if (o <= 0)
      throw ShapeError(
          fmt::format("{}: the output size ({}) must be positive", op, fmt::join(out, "x")));
    plane *= o;
  }
  const std::int64_t N = x.size(0), C = x.size(1);
  const Tensor idx = (x_in.dim() == x.dim() ? indices : indices.unsqueeze(0)).reshape({N, C, -1});
  if (idx.numel() > 0) {
    const auto [lo, hi] = detail::index_range(idx);
    if (lo < 0 || hi >= plane)
      throw ValueError(
          fmt::format("{}: found an invalid max index {} (output planes are of size {})", op,
                      lo < 0 ? lo : hi, fmt::join(out, "x")));
  }
  Shape shape{N, C};
  shape.insert(shape.end(), out.begin(), out.end());
  const Tensor y = scatter(zeros({N, C, plane}, {.dtype = x.dtype(), .device = x.device()}), 2, idx,
                           x.reshape({N, C, -1}))
                       .reshape(shape);
  return x_in.dim() == x.dim() ? y : y.squeeze(0);
}

// The 2-D and 3-D pools' results in a channels-last input's layout, as PyTorch returns them (Note
// [Channels-last outputs]; indices too).
Tensor like_input(const Tensor& y, const Tensor& x) { return detail::in_memory_format_of(y, {&x}); }
ValuesIndices like_input(const ValuesIndices& r, const Tensor& x) {
  return {like_input(r.values, x), like_input(r.indices, x)};
}

}  // namespace

Tensor max_pool1d(const Tensor& x, const ConvSizes& kernel_size, const ConvSizes& stride,
                  const ConvSizes& padding, const ConvSizes& dilation, bool ceil_mode) {
  return max_pool(1, OpId::max_pool1d, x, kernel_size, stride, padding, dilation, ceil_mode).values;
}
Tensor max_pool2d(const Tensor& x, const ConvSizes& kernel_size, const ConvSizes& stride,
                  const ConvSizes& padding, const ConvSizes& dilation, bool ceil_mode) {
  return max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode).values;
}
ValuesIndices max_pool1d_with_indices(const Tensor& x, const ConvSizes& kernel_size,
                                      const ConvSizes& stride, const ConvSizes& padding,
                                      const ConvSizes& dilation, bool ceil_mode) {
  return max_pool(1, OpId::max_pool1d, x, kernel_size, stride, padding, dilation, ceil_mode);
}
ValuesIndices max_pool2d_with_indices(const Tensor& x, const ConvSizes& kernel_size,
                                      const ConvSizes& stride, const ConvSizes& padding,
                                      const ConvSizes& dilation, bool ceil_mode) {
  return like_input(
      max_pool(2, OpId::max_pool2d, x, kernel_size, stride, padding, dilation, ceil_mode), x);
}

Tensor max_pool3d(const Tensor& x, const ConvSizes& kernel_size, const ConvSizes& stride,
                  const ConvSizes& padding, const ConvSizes& dilation, bool ceil_mode) {
  return max_pool3d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode).values;
}
ValuesIndices max_pool3d_with_indices(const Tensor& x, const ConvSizes& kernel_size,
                                      const ConvSizes& stride, const ConvSizes& padding,
                                      const ConvSizes& dilation, bool ceil_mode) {
  return like_input(
      max_pool(3, OpId::max_pool3d, x, kernel_size, stride, padding, dilation, ceil_mode), x);
}

Tensor avg_pool1d(const Tensor& x, const ConvSizes& kernel_size, const ConvSizes& stride,
                  const ConvSizes& padding, bool ceil_mode, bool count_include_pad) {
  return avg_pool(1, OpId::avg_pool1d, x, kernel_size, stride, padding, ceil_mode,
                  count_include_pad, std::nullopt);
}
Tensor avg_pool2d(const Tensor& x, const ConvSizes& kernel_size, const ConvSizes& stride,
                  const ConvSizes& padding, bool ceil_mode, bool count_include_pad,
                  std::optional<std::int64_t> divisor_override) {
  return like_input(avg_pool(2, OpId::avg_pool2d, x, kernel_size, stride, padding, ceil_mode,
                             count_include_pad, divisor_override),
                    x);
}

namespace {

Tensor lp_pool(const char* fn, std::size_t dims, const Tensor& x, double norm_type,
               const ConvSizes& kernel_size, const ConvSizes& stride, bool ceil_mode) {
  if (!x.defined()) throw Error(fmt::format("{}: the input is undefined", fn));
  const Tensor powered = pow(x, norm_type);
  const Tensor mean = dims == 1 ? avg_pool1d(powered, kernel_size, stride, {0}, ceil_mode)
                                : avg_pool2d(powered, kernel_size, stride, {0}, ceil_mode);
  // The window's size: one kernel size per spatial dim, or one for all.
  double window = 1;
  for (std::size_t d = 0; d < dims; ++d)
    window *= double(kernel_size.size() == 1 ? kernel_size[0] : kernel_size.at(d));
  return pow(sign(mean) * relu(abs(mean)) * window, 1.0 / norm_type);
}

}  // namespace

Tensor lp_pool1d(const Tensor& x, double norm_type, const ConvSizes& kernel_size,
                 const ConvSizes& stride, bool ceil_mode) {
  return lp_pool("lp_pool1d", 1, x, norm_type, kernel_size, stride, ceil_mode);
}

Tensor lp_pool2d(const Tensor& x, double norm_type, const ConvSizes& kernel_size,
                 const ConvSizes& stride, bool ceil_mode) {
  return lp_pool("lp_pool2d", 2, x, norm_type, kernel_size, stride, ceil_mode);
}

Tensor avg_pool3d(const Tensor& x, const ConvSizes& kernel_size, const ConvSizes& stride,
                  const ConvSizes& padding, bool ceil_mode, bool count_include_pad,
                  std::optional<std::int64_t> divisor_override) {
  return like_input(avg_pool(3, OpId::avg_pool3d, x, kernel_size, stride, padding, ceil_mode,
                             count_include_pad, divisor_override),
                    x);
}

Tensor adaptive_avg_pool1d(const Tensor& x, const ConvSizes& output_size) {
  return adaptive_avg_pool(1, OpId::adaptive_avg_pool1d, x, output_size);
}
Tensor adaptive_avg_pool2d(const Tensor& x, const ConvSizes& output_size) {
  return like_input(adaptive_avg_pool(2, OpId::adaptive_avg_pool2d, x, output_size), x);
}
Tensor adaptive_avg_pool3d(const Tensor& x, const ConvSizes& output_size) {
  return like_input(adaptive_avg_pool(3, OpId::adaptive_avg_pool3d, x, output_size), x);
}
Tensor adaptive_max_pool1d(const Tensor& x, const ConvSizes& output_size) {
  return adaptive_max_pool(1, OpId::adaptive_max_pool1d, x, output_size).values;
}
Tensor adaptive_max_pool2d(const Tensor& x, const ConvSizes& output_size) {
  return adaptive_max_pool2d_with_indices(x, output_size).values;
}
Tensor adaptive_max_pool3d(const Tensor& x, const ConvSizes& output_size) {
  return adaptive_max_pool3d_with_indices(x, output_size).values;
}
ValuesIndices adaptive_max_pool1d_with_indices(const Tensor& x, const ConvSizes& output_size) {
  return adaptive_max_pool(1, OpId::adaptive_max_pool1d, x, output_size);
}
ValuesIndices adaptive_max_pool2d_with_indices(const Tensor& x, const ConvSizes& output_size) {
  return like_input(adaptive_max_pool(2, OpId::adaptive_max_pool2d, x, output_size), x);
}

ValuesIndices adaptive_max_pool3d_with_indices(const Tensor& x, const ConvSizes& output_size) {
  return like_input(adaptive_max_pool(3, OpId::adaptive_max_pool3d, x, output_size), x);
}

Tensor max_unpool1d(const Tensor& x, const Tensor& indices, const ConvSizes& kernel_size,
                    const ConvSizes& stride, const ConvSizes& padding,
                    const ConvSizes& output_size) {
  return max_unpool(1, OpId::max_unpool1d, x, indices, kernel_size, stride, padding, output_size);
}
Tensor max_unpool2d(const Tensor& x, const Tensor& indices, const ConvSizes& kernel_size,
                    const ConvSizes& stride, const ConvSizes& padding,
                    const ConvSizes& output_size) {
  return max_unpool(2, OpId::max_unpool2d, x, indices, kernel_size, stride, padding, output_size);
}
Tensor max_unpool3d(const Tensor& x, const Tensor& indices, const ConvSizes& kernel_size,
                    const ConvSizes& stride, const ConvSizes& padding,
                    const ConvSizes& output_size) {
  return max_unpool(3, OpId::max_unpool3d, x, indices, kernel_size, stride, padding, output_size);
}

}  // namespace ferry
