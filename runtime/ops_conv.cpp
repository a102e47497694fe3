// runtime/ops_conv.cpp — convolution, im2col and col2im as compositions
// (ferry/ops_conv.hpp, Note [Convolution as im2col]).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <numeric>
#include <string>

#include "autocast_internal.hpp"
#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "memory_format_internal.hpp"
#include "ops_internal.hpp"
#include "sliding_window.hpp"

namespace ferry {
namespace {

using detail::gather_windows;
using detail::per_dim;
using detail::scatter_windows;
using detail::sliding_dim;
using detail::WindowDim;

std::int64_t product(const std::vector<std::int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::int64_t(1), std::multiplies<>());
}

// The windows over input sizes `in` (PyTorch's checks and messages: stride, dilation and
// padding in range, the dilated kernel within the padded input, an output of at least one).
std::vector<WindowDim> windows(std::string_view op, const std::vector<std::int64_t>& in,
                               const std::vector<std::int64_t>& kernel,
                               const std::vector<std::int64_t>& stride,
                               const std::vector<std::int64_t>& pad_lo,
                               const std::vector<std::int64_t>& pad_hi,
                               const std::vector<std::int64_t>& dilation) {
  std::vector<WindowDim> dims;
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
    dims.push_back(sliding_dim(in[i], kernel[i], stride[i], pad_lo[i], dilation[i],
                               (padded - span) / stride[i] + 1));
  }
  return dims;
}

// The checks conv and conv_transpose share: the input's and weight's ranks (the weight's
// layout named in the error), one dtype, positive groups.
void check_conv_operands(std::size_t n, OpId id, const Tensor& x, const Tensor& w, const Tensor& b,
                         std::int64_t groups, std::string_view weight_layout) {
  const std::string_view op = op_info(id).name;
  if (x.dim() != std::int64_t(n) + 2 && x.dim() != std::int64_t(n) + 1)
    throw ShapeError(
        fmt::format("{}: expected a {}-D (unbatched) or {}-D (batched) input, got "
                    "shape {}",
                    op, n + 1, n + 2, shape_str(x.sizes())));
  if (w.dim() != std::int64_t(n) + 2)
    throw ShapeError(fmt::format("{}: expected a {}-D weight [{}], got shape {}", op, n + 2,
                                 weight_layout, shape_str(w.sizes())));
  detail::check_dtype(id, x);
  if (w.dtype() != x.dtype() || (b.defined() && b.dtype() != x.dtype()))
    throw DTypeError(
        fmt::format("{}: the input ({}), weight ({}) and bias ({}) must have one dtype", op,
                    dtype_name(x.dtype()), dtype_name(w.dtype()),
                    b.defined() ? dtype_name(b.dtype()) : "none"));
  if (groups <= 0) throw ShapeError(fmt::format("{}: groups must be positive, not {}", op, groups));
}

void check_bias(std::string_view op, const Tensor& b, std::int64_t channels) {
  if (b.defined() && (b.dim() != 1 || b.size(0) != channels))
    throw ShapeError(fmt::format("{}: bias of shape {} for {} output channels; expected [{}]", op,
                                 shape_str(b.sizes()), channels, channels));
}

// Whether the device's fused convolution kernel runs this call (Note [Composite ops] in
// ferry/op.hpp; the kernel has a backward of its own, the conv_backward_input and
// conv_backward_weight rows, so it runs under autograd too).
bool conv_kernel_runs(OpId id, const Tensor& x, const Tensor& w) {
  return w.numel() > 0 && detail::use_fused_kernel_with_backward(x, id);
}

// y [N, OC, *out] by the device's kernel, its backward recorded (autograd::record_conv).
Tensor conv_kernel(OpId id, const Tensor& x, const Tensor& w, const Tensor& b,
                   const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& lo,
                   const std::vector<std::int64_t>& dilation, std::int64_t groups,
                   const Shape& out_shape) {
  // Channels-last in (the input or the weight), channels-last out, as in PyTorch: a device
  // whose kernels take channels-last activations computes in that layout, where another
  // computes contiguously and the result is converted (Note [Channels-last outputs]).
  const MemoryFormat format = detail::cnn_kernel_format(x, {&x, &w});
  const bool channels_last = format != MemoryFormat::contiguous;
  Attrs attrs{{"stride", stride},
              {"padding_lo", lo},
              {"dilation", dilation},
              {"groups", groups},
              {"has_bias", b.defined()}};
  detail::set_activation_format(attrs, format);
  // The weight as it is where it is channels-last (a converted model's), so that neither it
  // nor its gradient is copied between layouts at each step.
  const bool weight_channels_last = channels_last && w.is_contiguous(format);
  if (weight_channels_last) attrs.set("weight_channels_last", true);
  // The copies in the kernel's layout (of a channels-last input, say) are recorded, so the
  // backward saves and reads them rather than copying again.
  const Tensor xc = x.contiguous(format);
  const Tensor wc = weight_channels_last ? w : w.contiguous();
  const Tensor y = autograd::untracked([&] {
    Tensor out = detail::new_tensor_in(out_shape, x.dtype(), detail::impl_of(x), format);
    std::vector<Tensor> in{xc, wc};
    if (b.defined()) in.push_back(b.contiguous());
    detail::run_kernel(id, in, {out}, attrs);
    return out;
  });
  autograd::record_conv(id, xc, wc, b, attrs, y);
  return y;
}

Tensor add_bias(const Tensor& y, const Tensor& b) {
  if (!b.defined()) return y;
  Shape bshape(std::size_t(y.dim()), 1);
  bshape[1] = b.size(0);
  return y + b.reshape(bshape);
}

// conv1d, conv2d and conv3d: n spatial dims.
Tensor conv(std::size_t n, OpId id, const Tensor& x_in, const Tensor& w, const Tensor& b,
            const ConvSizes& stride_arg, const ConvPadding& padding, const ConvSizes& dilation_arg,
            std::int64_t groups) {
  const std::string_view op = op_info(id).name;
  check_conv_operands(n, id, x_in, w, b, groups, "out, in / groups, kernel...");
  const bool batched = x_in.dim() == std::int64_t(n) + 2;
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
  check_bias(op, b, OC);
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
  const std::vector<WindowDim> dims = windows(op, in, kernel, stride, lo, hi, dilation);
  const std::int64_t K = product(kernel);
  std::int64_t L = 1;
  Shape out_shape{N, OC};
  for (const WindowDim& d : dims) L *= d.out, out_shape.push_back(d.out);
  Tensor y;
  if (conv_kernel_runs(id, x, w)) {
    y = conv_kernel(id, x, w, b, stride, lo, dilation, groups, out_shape);
  } else {
    // [N, groups, C / groups * K, L] columns times [groups, OC / groups, C / groups * K].
    const Tensor cols = gather_windows(x, dims, 0.0).view({N, groups, C / groups * K, L});
    y = add_bias(matmul(w.reshape({groups, OC / groups, C / groups * K}), cols).reshape(out_shape),
                 b);
  }
  // Channels-last in (the input or the weight), channels-last out, as in PyTorch.
  y = detail::in_memory_format_of(y, {&x, &w});
  return batched ? y : y.squeeze(0);
}

// conv_transpose1d/2d/3d, convolution's adjoint: the weight's columns for every input
// position, summed by col2im into the output.
Tensor conv_transpose(std::size_t n, OpId id, const Tensor& x_in, const Tensor& w, const Tensor& b,
                      const ConvSizes& stride_arg, const ConvSizes& padding_arg,
                      const ConvSizes& output_padding_arg, std::int64_t groups,
                      const ConvSizes& dilation_arg) {
  const std::string_view op = op_info(id).name;
  check_conv_operands(n, id, x_in, w, b, groups, "in, out / groups, kernel...");
  const bool batched = x_in.dim() == std::int64_t(n) + 2;
  const Tensor x = batched ? x_in : x_in.unsqueeze(0);
  const std::int64_t N = x.size(0), C = x.size(1), OC = w.size(1) * groups;
  if (w.size(0) != C)
    throw ShapeError(fmt::format(
        "{}: given transposed=1, weight of size {}, expected input {} to have {} channels, but "
        "got {} channels instead",
        op, shape_str(w.sizes()), shape_str(x_in.sizes()), w.size(0), C));
  if (C % groups != 0)
    throw ShapeError(
        fmt::format("{}: in_channels ({}) must be divisible by groups ({})", op, C, groups));
  check_bias(op, b, OC);
  const auto stride = per_dim(op, "stride", stride_arg, n);
  const auto padding = per_dim(op, "padding", padding_arg, n);
  const auto output_padding = per_dim(op, "output_padding", output_padding_arg, n);
  const auto dilation = per_dim(op, "dilation", dilation_arg, n);
  std::vector<std::int64_t> in, kernel, out;
  for (std::size_t i = 0; i < n; ++i) {
    in.push_back(x.size(std::int64_t(i) + 2));
    kernel.push_back(w.size(std::int64_t(i) + 2));
    if (stride[i] <= 0 || dilation[i] <= 0)
      throw ShapeError(fmt::format("{}: stride ({}) and dilation ({}) must be positive", op,
                                   fmt::join(stride, ", "), fmt::join(dilation, ", ")));
    if (padding[i] < 0 || output_padding[i] < 0)
      throw ShapeError(fmt::format("{}: negative padding ({}) or output_padding ({})", op,
                                   fmt::join(padding, ", "), fmt::join(output_padding, ", ")));
    if (output_padding[i] >= stride[i] && output_padding[i] >= dilation[i])
      throw ShapeError(fmt::format(
          "{}: output padding must be smaller than either stride or dilation, but got "
          "output_padding={}, stride={}, dilation={}",
          op, fmt::join(output_padding, ", "), fmt::join(stride, ", "), fmt::join(dilation, ", ")));
    out.push_back((in[i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1) +
                  output_padding[i] + 1);
  }
  for (std::int64_t o : out)
    if (o <= 0)
      throw ShapeError(fmt::format(
          "{}: given input size per channel ({}), the calculated output size per channel ({}) is "
          "too small",
          op, fmt::join(in, " x "), fmt::join(out, " x ")));
  // The convolution that maps the output back onto the input: its windows are the input.
  std::vector<WindowDim> dims;
  for (std::size_t i = 0; i < n; ++i)
    dims.push_back(sliding_dim(out[i], kernel[i], stride[i], padding[i], dilation[i], in[i]));
  const std::int64_t K = product(kernel), L = product(in);
  // [groups, OC / groups * K, C / groups] weights times [N, groups, C / groups, L] inputs.
  const Tensor wt = w.reshape({groups, C / groups, OC / groups * K}).transpose(1, 2);
  const Tensor cols = matmul(wt, x.reshape({N, groups, C / groups, L})).reshape({N, OC, K, L});
  const Tensor y = detail::in_memory_format_of(add_bias(scatter_windows(cols, dims), b), {&x, &w});
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
  if (ferry::detail::autocast_applies(OpId::conv1d)) {
    const ferry::detail::AutocastOp ac(OpId::conv1d, {&x, &weight, &bias});
    return conv1d(ac(x), ac(weight), ac(bias), stride, padding, dilation, groups);
  }
  return conv(1, OpId::conv1d, x, weight, bias, stride, padding, dilation, groups);
}
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvSizes& stride,
              const ConvPadding& padding, const ConvSizes& dilation, std::int64_t groups) {
  if (ferry::detail::autocast_applies(OpId::conv2d)) {
    const ferry::detail::AutocastOp ac(OpId::conv2d, {&x, &weight, &bias});
    return conv2d(ac(x), ac(weight), ac(bias), stride, padding, dilation, groups);
  }
  return conv(2, OpId::conv2d, x, weight, bias, stride, padding, dilation, groups);
}
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvSizes& stride,
              const ConvPadding& padding, const ConvSizes& dilation, std::int64_t groups) {
  if (ferry::detail::autocast_applies(OpId::conv3d)) {
    const ferry::detail::AutocastOp ac(OpId::conv3d, {&x, &weight, &bias});
    return conv3d(ac(x), ac(weight), ac(bias), stride, padding, dilation, groups);
  }
  return conv(3, OpId::conv3d, x, weight, bias, stride, padding, dilation, groups);
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvSizes& stride, const ConvSizes& padding,
                        const ConvSizes& output_padding, std::int64_t groups,
                        const ConvSizes& dilation) {
  if (ferry::detail::autocast_applies(OpId::conv_transpose1d)) {
    const ferry::detail::AutocastOp ac(OpId::conv_transpose1d, {&x, &weight, &bias});
    return conv_transpose1d(ac(x), ac(weight), ac(bias), stride, padding, output_padding, groups,
                            dilation);
  }
  return conv_transpose(1, OpId::conv_transpose1d, x, weight, bias, stride, padding, output_padding,
                        groups, dilation);
}
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvSizes& stride, const ConvSizes& padding,
                        const ConvSizes& output_padding, std::int64_t groups,
                        const ConvSizes& dilation) {
  if (ferry::detail::autocast_applies(OpId::conv_transpose2d)) {
    const ferry::detail::AutocastOp ac(OpId::conv_transpose2d, {&x, &weight, &bias});
    return conv_transpose2d(ac(x), ac(weight), ac(bias), stride, padding, output_padding, groups,
                            dilation);
  }
  return conv_transpose(2, OpId::conv_transpose2d, x, weight, bias, stride, padding, output_padding,
                        groups, dilation);
}
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvSizes& stride, const ConvSizes& padding,
                        const ConvSizes& output_padding, std::int64_t groups,
                        const ConvSizes& dilation) {
  if (ferry::detail::autocast_applies(OpId::conv_transpose3d)) {
    const ferry::detail::AutocastOp ac(OpId::conv_transpose3d, {&x, &weight, &bias});
    return conv_transpose3d(ac(x), ac(weight), ac(bias), stride, padding, output_padding, groups,
                            dilation);
  }
  return conv_transpose(3, OpId::conv_transpose3d, x, weight, bias, stride, padding, output_padding,
                        groups, dilation);
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
  const std::vector<WindowDim> dims =
      windows("unfold", {x.size(2), x.size(3)}, per_dim("unfold", "kernel_size", kernel_size, 2),
              per_dim("unfold", "stride", stride, 2), pads, pads,
              per_dim("unfold", "dilation", dilation, 2));
  const Tensor cols = gather_windows(x, dims, 0.0);
  const Tensor flat = cols.view({x.size(0), cols.size(1) * cols.size(2), cols.size(3)});
  return batched ? flat : flat.squeeze(0);
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
  const std::vector<WindowDim> dims =
      windows("fold", out, kernel, per_dim("fold", "stride", stride, 2), pads, pads,
              per_dim("fold", "dilation", dilation, 2));
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
  const Tensor y = scatter_windows(c.view({c.size(0), c.size(1) / K, K, L}), dims);
  return batched ? y : y.squeeze(0);
}

}  // namespace ferry
