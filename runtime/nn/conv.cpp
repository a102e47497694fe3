// runtime/nn/conv.cpp — Conv1d, Conv2d and Conv3d (ferry/nn/conv.hpp).
#include "ferry/nn/conv.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "../sliding_window.hpp"
#include "ferry/error.hpp"
#include "ferry/nn/init.hpp"
#include "ferry/ops.hpp"
#include "nn_internal.hpp"

namespace ferry::nn {
namespace {

using ferry::detail::per_dim;

std::string sizes_str(const ConvSizes& v) {
  return v.size() == 1 ? fmt::format("({},)", v[0]) : fmt::format("({})", fmt::join(v, ", "));
}

// Unfold's and Fold's sizes as PyTorch prints what it was given: one int, or a tuple.
std::string given_str(const ConvSizes& v) {
  return v.size() == 1 ? fmt::format("{}", v[0]) : sizes_str(v);
}

}  // namespace

ConvNd::ConvNd(std::size_t dims, std::int64_t in, std::int64_t out, const ConvSizes& kernel,
               const ConvSizes& stride_, const ConvPadding& padding_, const ConvSizes& dilation_,
               std::int64_t groups_, bool with_bias, std::string_view mode,
               const TensorOptions& options)
    : in_channels(in),
      out_channels(out),
      padding(padding_),
      groups(groups_),
      padding_mode(mode),
      dims_(dims) {
  const std::string layer = fmt::format("Conv{}d", dims);
  kernel_size = per_dim(layer, "kernel_size", kernel, dims);
  stride = per_dim(layer, "stride", stride_, dims);
  dilation = per_dim(layer, "dilation", dilation_, dims);
  if (padding.mode.empty()) padding.sizes = per_dim(layer, "padding", padding.sizes, dims);
  if (in <= 0 || out <= 0)
    throw ShapeError(
        fmt::format("{}: in_channels ({}) and out_channels ({}) must be positive", layer, in, out));
  if (groups <= 0 || in % groups != 0 || out % groups != 0)
    throw ShapeError(
        fmt::format("{}: in_channels ({}) and out_channels ({}) must be divisible "
                    "by groups ({})",
                    layer, in, out, groups));
  if (mode != "zeros" && mode != "reflect" && mode != "replicate" && mode != "circular")
    throw ValueError(
        fmt::format("{}: padding_mode must be one of zeros, reflect, replicate or "
                    "circular, not '{}'",
                    layer, mode));
  const TensorOptions o = detail::param_options(layer, options);
  Shape wshape{out, in / groups};
  for (std::int64_t k : kernel_size) wshape.push_back(k);
  weight = register_parameter("weight", empty(wshape, o));
  if (with_bias) bias = register_parameter("bias", empty({out}, o));
  init::reset_weight_and_bias_(weight, bias);
}

Tensor ConvNd::forward(const Tensor& x) {
  if (!x.defined()) throw Error(fmt::format("{}.forward: the input is undefined", name()));
  Tensor in = x;
  ConvPadding pad_arg = padding;
  if (padding_mode != "zeros" && padding.mode != "valid") {
    // The input padded by F.pad ((left, right) pairs from the last dim backwards; "same" puts
    // any odd extra on the right), then an unpadded convolution.
    std::vector<std::int64_t> pads;
    for (std::size_t i = dims_; i-- > 0;) {
      const std::int64_t total = dilation[i] * (kernel_size[i] - 1);
      const bool same = padding.mode == "same";
      pads.push_back(same ? total / 2 : padding.sizes[i]);
      pads.push_back(same ? total - total / 2 : padding.sizes[i]);
    }
    in = pad(x, pads, padding_mode);
    pad_arg = 0;
  }
  switch (dims_) {
    case 1:
      return conv1d(in, weight, bias, stride, pad_arg, dilation, groups);
    case 2:
      return conv2d(in, weight, bias, stride, pad_arg, dilation, groups);
    default:
      return conv3d(in, weight, bias, stride, pad_arg, dilation, groups);
  }
}

std::string ConvNd::extra_repr() const {
  std::string s = fmt::format("{}, {}, kernel_size={}, stride={}", in_channels, out_channels,
                              sizes_str(kernel_size), sizes_str(stride));
  if (!padding.mode.empty())
    s += fmt::format(", padding={}", padding.mode);
  else if (padding.sizes != ConvSizes(dims_, 0))
    s += fmt::format(", padding={}", sizes_str(padding.sizes));
  if (dilation != ConvSizes(dims_, 1)) s += fmt::format(", dilation={}", sizes_str(dilation));
  if (groups != 1) s += fmt::format(", groups={}", groups);
  if (!bias.defined()) s += ", bias=False";
  if (padding_mode != "zeros") s += fmt::format(", padding_mode={}", padding_mode);
  return s;
}

Conv1d::Conv1d(std::int64_t in, std::int64_t out, const ConvSizes& kernel, const ConvSizes& stride,
               const ConvPadding& padding, const ConvSizes& dilation, std::int64_t groups,
               bool bias, std::string_view padding_mode, const TensorOptions& options)
    : ConvNd(1, in, out, kernel, stride, padding, dilation, groups, bias, padding_mode, options) {}
Conv2d::Conv2d(std::int64_t in, std::int64_t out, const ConvSizes& kernel, const ConvSizes& stride,
               const ConvPadding& padding, const ConvSizes& dilation, std::int64_t groups,
               bool bias, std::string_view padding_mode, const TensorOptions& options)
    : ConvNd(2, in, out, kernel, stride, padding, dilation, groups, bias, padding_mode, options) {}
Conv3d::Conv3d(std::int64_t in, std::int64_t out, const ConvSizes& kernel, const ConvSizes& stride,
               const ConvPadding& padding, const ConvSizes& dilation, std::int64_t groups,
               bool bias, std::string_view padding_mode, const TensorOptions& options)
    : ConvNd(3, in, out, kernel, stride, padding, dilation, groups, bias, padding_mode, options) {}

ConvTransposeNd::ConvTransposeNd(std::size_t dims, std::int64_t in, std::int64_t out,
                                 const ConvSizes& kernel, const ConvSizes& stride_,
                                 const ConvSizes& padding_, const ConvSizes& output_padding_,
                                 std::int64_t groups_, bool with_bias, const ConvSizes& dilation_,
                                 const TensorOptions& options)
    : in_channels(in), out_channels(out), groups(groups_), dims_(dims) {
  const std::string layer = fmt::format("ConvTranspose{}d", dims);
  kernel_size = per_dim(layer, "kernel_size", kernel, dims);
  stride = per_dim(layer, "stride", stride_, dims);
  padding = per_dim(layer, "padding", padding_, dims);
  output_padding = per_dim(layer, "output_padding", output_padding_, dims);
  dilation = per_dim(layer, "dilation", dilation_, dims);
  if (in <= 0 || out <= 0)
    throw ShapeError(
        fmt::format("{}: in_channels ({}) and out_channels ({}) must be positive", layer, in, out));
  if (groups <= 0 || in % groups != 0 || out % groups != 0)
    throw ShapeError(
        fmt::format("{}: in_channels ({}) and out_channels ({}) must be divisible by groups ({})",
                    layer, in, out, groups));
  const TensorOptions o = detail::param_options(layer, options);
  Shape wshape{in, out / groups};
  for (std::int64_t k : kernel_size) wshape.push_back(k);
  weight = register_parameter("weight", empty(wshape, o));
  if (with_bias) bias = register_parameter("bias", empty({out}, o));
  init::reset_weight_and_bias_(weight, bias);
}

Tensor ConvTransposeNd::forward(const Tensor& x) {
  if (!x.defined()) throw Error(fmt::format("{}.forward: the input is undefined", name()));
  switch (dims_) {
    case 1:
      return conv_transpose1d(x, weight, bias, stride, padding, output_padding, groups, dilation);
    case 2:
      return conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation);
    default:
      return conv_transpose3d(x, weight, bias, stride, padding, output_padding, groups, dilation);
  }
}

std::string ConvTransposeNd::extra_repr() const {
  std::string s = fmt::format("{}, {}, kernel_size={}, stride={}", in_channels, out_channels,
                              sizes_str(kernel_size), sizes_str(stride));
  if (padding != ConvSizes(dims_, 0)) s += fmt::format(", padding={}", sizes_str(padding));
  if (dilation != ConvSizes(dims_, 1)) s += fmt::format(", dilation={}", sizes_str(dilation));
  if (output_padding != ConvSizes(dims_, 0))
    s += fmt::format(", output_padding={}", sizes_str(output_padding));
  if (groups != 1) s += fmt::format(", groups={}", groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

ConvTranspose1d::ConvTranspose1d(std::int64_t in, std::int64_t out, const ConvSizes& k,
                                 const ConvSizes& s, const ConvSizes& p, const ConvSizes& op,
                                 std::int64_t g, bool b, const ConvSizes& d, const TensorOptions& o)
    : ConvTransposeNd(1, in, out, k, s, p, op, g, b, d, o) {}
ConvTranspose2d::ConvTranspose2d(std::int64_t in, std::int64_t out, const ConvSizes& k,
                                 const ConvSizes& s, const ConvSizes& p, const ConvSizes& op,
                                 std::int64_t g, bool b, const ConvSizes& d, const TensorOptions& o)
    : ConvTransposeNd(2, in, out, k, s, p, op, g, b, d, o) {}
ConvTranspose3d::ConvTranspose3d(std::int64_t in, std::int64_t out, const ConvSizes& k,
                                 const ConvSizes& s, const ConvSizes& p, const ConvSizes& op,
                                 std::int64_t g, bool b, const ConvSizes& d, const TensorOptions& o)
    : ConvTransposeNd(3, in, out, k, s, p, op, g, b, d, o) {}

// ---------------------------------------------------------------- Unfold, Fold

Tensor Unfold::forward(const Tensor& x) {
  return unfold(x, kernel_size, dilation, padding, stride);
}

std::string Unfold::extra_repr() const {
  return fmt::format("kernel_size={}, dilation={}, padding={}, stride={}", given_str(kernel_size),
                     given_str(dilation), given_str(padding), given_str(stride));
}

Tensor Fold::forward(const Tensor& columns) {
  return fold(columns, output_size, kernel_size, dilation, padding, stride);
}

std::string Fold::extra_repr() const {
  return fmt::format("output_size={}, kernel_size={}, dilation={}, padding={}, stride={}",
                     given_str(output_size), given_str(kernel_size), given_str(dilation),
                     given_str(padding), given_str(stride));
}

}  // namespace ferry::nn
