// runtime/ops_conv.cpp — convolution, im2col and col2im as compositions
// (ferry/ops_conv.hpp, Note [Convolution as im2col]).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <numeric>
#include <string>

#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {
namespace {

std::int64_t product(const std::vector<std::int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::int64_t(1), std::multiplies<>());
}

// One spatial dim of a sliding window: input size, kernel, stride, padding on each side,
// dilation, and the number of window positions.
struct Dim {
  std::int64_t in, k, s, lo, hi, d, out;
};

// `v` with one value per spatial dim (a single value repeats), or a ShapeError.
std::vector<std::int64_t> per_dim(std::string_view op, std::string_view what,
                                  const std::vector<std::int64_t>& v, std::size_t n) {
  if (v.size() == 1) return std::vector<std::int64_t>(n, v[0]);
  if (v.size() != n)
    throw ShapeError(fmt::format("{}: {} has {} values ({}), expected 1 or {}", op, what, v.size(),
                                 fmt::join(v, ", "), n));
  return v;
}

// The windows of input sizes `in` (PyTorch's checks and messages: stride, dilation and
// padding in range, the dilated kernel within the padded input, an output of at least one).
std::vector<Dim> windows(std::string_view op, const std::vector<std::int64_t>& in,
                         const std::vector<std::int64_t>& kernel,
                         const std::vector<std::int64_t>& stride,
                         const std::vector<std::int64_t>& pad_lo,
                         const std::vector<std::int64_t>& pad_hi,
                         const std::vector<std::int64_t>& dilation) {
  std::vector<Dim> dims;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (stride[i] <= 0)
      throw ShapeError(fmt::format("{}: non-positive stride is not supported (stride {})", op,
                                   fmt::join(stride, ", ")));
    if (dilation[i] <= 0)
      throw ShapeError(fmt::format("{}: dilation must be positive (dilation {})", op,
                                   fmt::join(dilation, ", ")));
    if (pad_lo[i] < 0 || pad_hi[i] < 0)
      throw ShapeError(fmt::format("{}: negative padding is not supported", op));
    if (kernel[i] <= 0)
      throw ShapeError(
          fmt::format("{}: kernel size must be positive (kernel {})", op, fmt::join(kernel, ", ")));
    const std::int64_t padded = in[i] + pad_lo[i] + pad_hi[i];
    const std::int64_t span = dilation[i] * (kernel[i] - 1) + 1;
    if (span > padded) {
      std::vector<std::int64_t> all_padded, all_span;
      for (std::size_t j = 0; j < in.size(); ++j) {
        all_padded.push_back(in[j] + pad_lo[j] + pad_hi[j]);
        all_span.push_back(dilation[j] * (kernel[j] - 1) + 1);
      }
      throw ShapeError(fmt::format(
          "{}: the padded input per channel ({}) is smaller than the (dilated) kernel ({}); the "
          "kernel cannot be larger than the padded input",
          op, fmt::join(all_padded, " x "), fmt::join(all_span, " x ")));
    }
    dims.push_back({in[i], kernel[i], stride[i], pad_lo[i], pad_hi[i], dilation[i],
                    (padded - span) / stride[i] + 1});
  }
  return dims;
}

// For x padded and flattened over its spatial dims: the position of element k of window l,
// as [K, L] row-major (K = the kernel's offsets, the first spatial dim slowest; L = the
// windows, likewise).
std::vector<std::int64_t> window_positions(const std::vector<Dim>& dims) {
  const std::size_t n = dims.size();
  std::vector<std::int64_t> padded_stride(n, 1);
  for (std::size_t i = n - 1; i > 0; --i)
    padded_stride[i - 1] = padded_stride[i] * (dims[i].in + dims[i].lo + dims[i].hi);
  std::int64_t K = 1, L = 1;
  for (const Dim& d : dims) K *= d.k, L *= d.out;
  std::vector<std::int64_t> pos(std::size_t(K * L));
  std::vector<std::int64_t> kc(n, 0), lc(n, 0);  // the offset's and the window's coordinates
  for (std::int64_t kk = 0; kk < K; ++kk) {
    std::int64_t r = kk;
    for (std::size_t i = n; i-- > 0;) kc[i] = r % dims[i].k, r /= dims[i].k;
    for (std::int64_t ll = 0; ll < L; ++ll) {
      std::int64_t q = ll, at = 0;
      for (std::size_t i = n; i-- > 0;) {
        lc[i] = q % dims[i].out, q /= dims[i].out;
        at += (lc[i] * dims[i].s + kc[i] * dims[i].d) * padded_stride[i];
      }
      pos[std::size_t(kk * L + ll)] = at;
    }
  }
  return pos;
}

Tensor positions_on(const std::vector<Dim>& dims, const Tensor& like) {
  return tensor(window_positions(dims)).to(like.device());
}

// x [N, C, *spatial] -> [N, C * K, L].
Tensor im2col(const Tensor& x, const std::vector<Dim>& dims) {
  std::vector<std::int64_t> pads;  // F.pad's order: the last dim first
  bool any = false;
  for (std::size_t i = dims.size(); i-- > 0;) {
    pads.push_back(dims[i].lo);
    pads.push_back(dims[i].hi);
    any = any || dims[i].lo || dims[i].hi;
  }
  const std::int64_t N = x.size(0), C = x.size(1);
  const Tensor padded = any ? pad(x, pads) : x;
  std::int64_t K = 1, L = 1, area = 1;
  for (const Dim& d : dims) K *= d.k, L *= d.out, area *= d.in + d.lo + d.hi;
  const Tensor flat = padded.reshape({N, C, area});
  return index_select(flat, 2, positions_on(dims, x)).view({N, C * K, L});
}

// columns [N, C * K, L] -> [N, C, *spatial], overlaps summed.
Tensor col2im(const Tensor& columns, std::int64_t C, const std::vector<Dim>& dims) {
  const std::int64_t N = columns.size(0);
  Shape padded{N, C};
  for (const Dim& d : dims) padded.push_back(d.in + d.lo + d.hi);
  const std::int64_t area = product({padded.begin() + 2, padded.end()});
  Tensor image = zeros({N, C, area}, {.dtype = columns.dtype(), .device = columns.device()});
  image = index_add(image, 2, positions_on(dims, columns),
                    columns.reshape({N, C, columns.size(1) / C * columns.size(2)}));
  Tensor y = image.view(padded);
  for (std::size_t i = 0; i < dims.size(); ++i)
    y = y.narrow(std::int64_t(i) + 2, dims[i].lo, dims[i].in);
  return y;
}

// conv1d, conv2d and conv3d: n spatial dims.
Tensor conv(std::size_t n, OpId id, const Tensor& x_in, const Tensor& w, const Tensor& b,
            const ConvSizes& stride_arg, const ConvPadding& padding, const ConvSizes& dilation_arg,
            std::int64_t groups) {
  const std::string_view op = op_info(id).name;
  const bool batched = x_in.dim() == std::int64_t(n) + 2;
  if (!batched && x_in.dim() != std::int64_t(n) + 1)
    throw ShapeError(
        fmt::format("{}: expected a {}-D (unbatched) or {}-D (batched) input, got "
                    "shape {}",
                    op, n + 1, n + 2, shape_str(x_in.sizes())));
  if (w.dim() != std::int64_t(n) + 2)
    throw ShapeError(
        fmt::format("{}: expected a {}-D weight [out, in / groups, kernel...], got "
                    "shape {}",
                    op, n + 2, shape_str(w.sizes())));
  detail::check_dtype(id, x_in);
  if (w.dtype() != x_in.dtype() || (b.defined() && b.dtype() != x_in.dtype()))
    throw DTypeError(
        fmt::format("{}: the input ({}), weight ({}) and bias ({}) must have one dtype", op,
                    dtype_name(x_in.dtype()), dtype_name(w.dtype()),
                    b.defined() ? dtype_name(b.dtype()) : "none"));
  if (groups <= 0) throw ShapeError(fmt::format("{}: groups must be positive, not {}", op, groups));
  const Tensor x = batched ? x_in : x_in.unsqueeze(0);
  const std::int64_t N = x.size(0), C = x.size(1), OC = w.size(0);
  if (OC % groups != 0)
    throw ShapeError(
        fmt::format("{}: out_channels ({}, weight of shape {}) must be divisible by "
                    "groups ({})",
                    op, OC, shape_str(w.sizes()), groups));
  if (w.size(1) * groups != C)
    throw ShapeError(fmt::format(
        "{}: given groups={}, weight of size {}, expected input {} to "
        "have {} channels, but got {} channels instead",
        op, groups, shape_str(w.sizes()), shape_str(x_in.sizes()), w.size(1) * groups, C));
  if (b.defined() && (b.dim() != 1 || b.size(0) != OC))
    throw ShapeError(fmt::format("{}: bias of shape {} for {} output channels; expected [{}]", op,
                                 shape_str(b.sizes()), OC, OC));
  std::vector<std::int64_t> in, kernel;
  for (std::size_t i = 0; i < n; ++i) {
    in.push_back(x.size(std::int64_t(i) + 2));
    kernel.push_back(w.size(std::int64_t(i) + 2));
  }
  const auto stride = per_dim(op, "stride", stride_arg, n);
  const auto dilation = per_dim(op, "dilation", dilation_arg, n);
  std::vector<std::int64_t> lo(n, 0), hi(n, 0);
  if (padding.mode.empty()) {
    lo = hi = per_dim(op, "padding", padding.sizes, n);
  } else {
    const std::string& mode = padding.mode;
    if (mode == "same") {
      for (std::int64_t s : stride)
        if (s != 1)
          throw ValueError(
              fmt::format("{}: padding='same' is not supported for strided convolutions", op));
      for (std::size_t i = 0; i < n; ++i) {  // PyTorch: any odd extra goes on the right
        const std::int64_t total = dilation[i] * (kernel[i] - 1);
        lo[i] = total / 2;
        hi[i] = total - lo[i];
      }
    } else if (mode != "valid") {
      throw ValueError(fmt::format(
          "{}: invalid padding string '{}', should be one of 'valid', 'same'", op, mode));
    }
  }
  const std::vector<Dim> dims = windows(op, in, kernel, stride, lo, hi, dilation);
  const std::int64_t K = product(kernel);
  std::int64_t L = 1;
  Shape out_shape{N, OC};
  for (const Dim& d : dims) L *= d.out, out_shape.push_back(d.out);
  // [N, groups, C / groups * K, L] columns times [groups, OC / groups, C / groups * K] weights.
  const Tensor cols = im2col(x, dims).view({N, groups, C / groups * K, L});
  Tensor y = matmul(w.reshape({groups, OC / groups, C / groups * K}), cols).reshape(out_shape);
  if (b.defined()) {
    Shape bshape(n + 2, 1);
    bshape[1] = OC;
    y = y + b.reshape(bshape);
  }
  return batched ? y : y.squeeze(0);
}

// unfold's and fold's 2-D geometry checks.
void check_unfold_args(std::string_view op, const ConvSizes& kernel, const ConvSizes& dilation,
                       const ConvSizes& padding, const ConvSizes& stride) {
  for (const auto* v : {&kernel, &dilation, &padding, &stride})
    if (v->size() != 1 && v->size() != 2)
      throw ShapeError(
          fmt::format("{}: each size takes 1 or 2 values (the two spatial dims), "
                      "not {}",
                      op, v->size()));
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvSizes& stride,
              const ConvPadding& padding, const ConvSizes& dilation, std::int64_t groups) {
  return conv(1, OpId::conv1d, x, weight, bias, stride, padding, dilation, groups);
}
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvSizes& stride,
              const ConvPadding& padding, const ConvSizes& dilation, std::int64_t groups) {
  return conv(2, OpId::conv2d, x, weight, bias, stride, padding, dilation, groups);
}
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvSizes& stride,
              const ConvPadding& padding, const ConvSizes& dilation, std::int64_t groups) {
  return conv(3, OpId::conv3d, x, weight, bias, stride, padding, dilation, groups);
}

Tensor unfold(const Tensor& x_in, const ConvSizes& kernel_size, const ConvSizes& dilation,
              const ConvSizes& padding, const ConvSizes& stride) {
  check_unfold_args("unfold", kernel_size, dilation, padding, stride);
  const bool batched = x_in.dim() == 4;
  if (!batched && x_in.dim() != 3)
    throw ShapeError(
        fmt::format("unfold: expected a 3-D (unbatched) or 4-D (batched) input, "
                    "got shape {}",
                    shape_str(x_in.sizes())));
  detail::check_dtype(OpId::unfold, x_in);
  const Tensor x = batched ? x_in : x_in.unsqueeze(0);
  const auto pads = per_dim("unfold", "padding", padding, 2);
  const std::vector<Dim> dims =
      windows("unfold", {x.size(2), x.size(3)}, per_dim("unfold", "kernel_size", kernel_size, 2),
              per_dim("unfold", "stride", stride, 2), pads, pads,
              per_dim("unfold", "dilation", dilation, 2));
  const Tensor cols = im2col(x, dims);
  return batched ? cols : cols.squeeze(0);
}

Tensor fold(const Tensor& columns, const ConvSizes& output_size, const ConvSizes& kernel_size,
            const ConvSizes& dilation, const ConvSizes& padding, const ConvSizes& stride) {
  check_unfold_args("fold", kernel_size, dilation, padding, stride);
  const bool batched = columns.dim() == 3;
  if (!batched && columns.dim() != 2)
    throw ShapeError(
        fmt::format("fold: expected a 2-D (unbatched) or 3-D (batched) input, got "
                    "shape {}",
                    shape_str(columns.sizes())));
  detail::check_dtype(OpId::fold, columns);
  const Tensor c = batched ? columns : columns.unsqueeze(0);
  const auto out = per_dim("fold", "output_size", output_size, 2);
  const auto kernel = per_dim("fold", "kernel_size", kernel_size, 2);
  const auto pads = per_dim("fold", "padding", padding, 2);
  const std::vector<Dim> dims = windows("fold", out, kernel, per_dim("fold", "stride", stride, 2),
                                        pads, pads, per_dim("fold", "dilation", dilation, 2));
  const std::int64_t K = kernel[0] * kernel[1], L = dims[0].out * dims[1].out;
  if (c.size(1) % K != 0)
    throw ShapeError(
        fmt::format("fold: expected size of input's dimension 1 ({}, shape {}) to be "
                    "divisible by the product of kernel_size ({})",
                    c.size(1), shape_str(columns.sizes()), K));
  if (c.size(2) != L)
    throw ShapeError(fmt::format(
        "fold: given output_size={}, kernel_size={}, dilation={}, padding={}, stride={}, expected "
        "size of input's dimension 2 to match the calculated number of sliding blocks {} * {} = "
        "{}, but got input.size(2)={}",
        fmt::join(out, "x"), fmt::join(kernel, "x"), fmt::join(dilation, "x"),
        fmt::join(padding, "x"), fmt::join(stride, "x"), dims[0].out, dims[1].out, L, c.size(2)));
  const Tensor y = col2im(c, c.size(1) / K, dims);
  return batched ? y : y.squeeze(0);
}

}  // namespace ferry
