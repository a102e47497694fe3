// runtime/nn/pooling.cpp — the pooling and resampling layers (ferry/nn/pooling.hpp).
#include "ferry/nn/pooling.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "nn_internal.hpp"

namespace ferry::nn {
namespace {

using detail::bool_str;

// A size argument as PyTorch prints it: an int, or a tuple.
std::string size_repr(const ConvSizes& v) {
  return v.size() == 1 ? fmt::format("{}", v[0]) : fmt::format("({})", fmt::join(v, ", "));
}

}  // namespace

// ---------------------------------------------------------------- max pooling

MaxPoolNd::MaxPoolNd(std::size_t dims, ConvSizes kernel, ConvSizes stride_, ConvSizes padding_,
                     ConvSizes dilation_, bool ceil)
    : kernel_size(std::move(kernel)),
      stride(stride_.empty() ? kernel_size : std::move(stride_)),
      padding(std::move(padding_)),
      dilation(std::move(dilation_)),
      ceil_mode(ceil),
      dims_(dims) {}

ValuesIndices MaxPoolNd::forward_with_indices(const Tensor& x) {
  if (!x.defined()) throw Error(fmt::format("{}.forward: the input is undefined", name()));
  const auto pool = dims_ == 1   ? max_pool1d_with_indices
                    : dims_ == 2 ? max_pool2d_with_indices
                                 : max_pool3d_with_indices;
  return pool(x, kernel_size, stride, padding, dilation, ceil_mode);
}

Tensor MaxPoolNd::forward(const Tensor& x) {
  if (!x.defined()) throw Error(fmt::format("{}.forward: the input is undefined", name()));
  const auto pool = dims_ == 1 ? max_pool1d : dims_ == 2 ? max_pool2d : max_pool3d;
  return pool(x, kernel_size, stride, padding, dilation, ceil_mode);
}

std::string MaxPoolNd::extra_repr() const {
  return fmt::format("kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={}",
                     size_repr(kernel_size), size_repr(stride), size_repr(padding),
                     size_repr(dilation), bool_str(ceil_mode));
}

MaxPool1d::MaxPool1d(const ConvSizes& k, const ConvSizes& s, const ConvSizes& p, const ConvSizes& d,
                     bool ceil)
    : MaxPoolNd(1, k, s, p, d, ceil) {}
MaxPool2d::MaxPool2d(const ConvSizes& k, const ConvSizes& s, const ConvSizes& p, const ConvSizes& d,
                     bool ceil)
    : MaxPoolNd(2, k, s, p, d, ceil) {}
MaxPool3d::MaxPool3d(const ConvSizes& k, const ConvSizes& s, const ConvSizes& p, const ConvSizes& d,
                     bool ceil)
    : MaxPoolNd(3, k, s, p, d, ceil) {}

MaxUnpoolNd::MaxUnpoolNd(std::size_t dims, ConvSizes kernel, ConvSizes stride_, ConvSizes padding_)
    : kernel_size(std::move(kernel)),
      stride(stride_.empty() ? kernel_size : std::move(stride_)),
      padding(std::move(padding_)),
      dims_(dims) {}

Tensor MaxUnpoolNd::forward(const Tensor& x, const Tensor& indices, const ConvSizes& output_size) {
  if (!x.defined()) throw Error(fmt::format("{}.forward: the input is undefined", name()));
  const auto unpool = dims_ == 1 ? max_unpool1d : dims_ == 2 ? max_unpool2d : max_unpool3d;
  return unpool(x, indices, kernel_size, stride, padding, output_size);
}

std::string MaxUnpoolNd::extra_repr() const {
  // PyTorch keeps these as tuples of one value per dim (_single, _pair, _triple).
  const auto tuple = [&](const ConvSizes& v) {
    ConvSizes t = v.size() == 1 ? ConvSizes(dims_, v[0]) : v;
    return t.size() == 1 ? fmt::format("({},)", t[0]) : fmt::format("({})", fmt::join(t, ", "));
  };
  return fmt::format("kernel_size={}, stride={}, padding={}", tuple(kernel_size), tuple(stride),
                     tuple(padding));
}

// ---------------------------------------------------------------- average pooling

AvgPool1d::AvgPool1d(const ConvSizes& k, const ConvSizes& s, const ConvSizes& p, bool ceil,
                     bool include_pad)
    : kernel_size(k),
      stride(s.empty() ? k : s),
      padding(p),
      ceil_mode(ceil),
      count_include_pad(include_pad) {}

Tensor AvgPool1d::forward(const Tensor& x) {
  if (!x.defined()) throw Error("AvgPool1d.forward: the input is undefined");
  return avg_pool1d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
}

std::string AvgPool1d::extra_repr() const {
  return fmt::format("kernel_size={}, stride={}, padding={}", size_repr(kernel_size),
                     size_repr(stride), size_repr(padding));
}

AvgPoolNd::AvgPoolNd(std::size_t dims, ConvSizes k, ConvSizes s, ConvSizes p, bool ceil,
                     bool include_pad, std::optional<std::int64_t> divisor)
    : kernel_size(std::move(k)),
      stride(s.empty() ? kernel_size : std::move(s)),
      padding(std::move(p)),
      ceil_mode(ceil),
      count_include_pad(include_pad),
      divisor_override(divisor),
      dims_(dims) {}

Tensor AvgPoolNd::forward(const Tensor& x) {
  if (!x.defined()) throw Error(fmt::format("{}.forward: the input is undefined", name()));
  const auto pool = dims_ == 2 ? avg_pool2d : avg_pool3d;
  return pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

std::string AvgPoolNd::extra_repr() const {
  return fmt::format("kernel_size={}, stride={}, padding={}", size_repr(kernel_size),
                     size_repr(stride), size_repr(padding));
}

Tensor LPPoolNd::forward(const Tensor& x) {
  if (!x.defined()) throw Error(fmt::format("{}.forward: the input is undefined", name()));
  return (dims_ == 1 ? lp_pool1d : lp_pool2d)(x, norm_type, kernel_size, stride, ceil_mode);
}

std::string LPPoolNd::extra_repr() const {
  return fmt::format("norm_type={}, kernel_size={}, stride={}, ceil_mode={}", norm_type,
                     size_repr(kernel_size), stride.empty() ? "None" : size_repr(stride),
                     bool_str(ceil_mode));
}

// ---------------------------------------------------------------- adaptive pooling

AdaptiveAvgPoolNd::AdaptiveAvgPoolNd(std::size_t dims, ConvSizes s)
    : output_size(std::move(s)), dims_(dims) {}
Tensor AdaptiveAvgPoolNd::forward(const Tensor& x) {
  if (!x.defined()) throw Error(fmt::format("{}.forward: the input is undefined", name()));
  const auto pool = dims_ == 1   ? adaptive_avg_pool1d
                    : dims_ == 2 ? adaptive_avg_pool2d
                                 : adaptive_avg_pool3d;
  return pool(x, output_size);
}
std::string AdaptiveAvgPoolNd::extra_repr() const {
  return "output_size=" + size_repr(output_size);
}

AdaptiveMaxPoolNd::AdaptiveMaxPoolNd(std::size_t dims, ConvSizes s)
    : output_size(std::move(s)), dims_(dims) {}
Tensor AdaptiveMaxPoolNd::forward(const Tensor& x) { return forward_with_indices(x).values; }
ValuesIndices AdaptiveMaxPoolNd::forward_with_indices(const Tensor& x) {
  if (!x.defined()) throw Error(fmt::format("{}.forward: the input is undefined", name()));
  const auto pool = dims_ == 1   ? adaptive_max_pool1d_with_indices
                    : dims_ == 2 ? adaptive_max_pool2d_with_indices
                                 : adaptive_max_pool3d_with_indices;
  return pool(x, output_size);
}
std::string AdaptiveMaxPoolNd::extra_repr() const {
  return "output_size=" + size_repr(output_size);
}

// ---------------------------------------------------------------- resampling

Upsample::Upsample(InterpolateOptions o) : options(std::move(o)), mode_(options.mode) {
  options.mode = mode_;
  if (options.size.empty() == options.scale_factor.empty())
    throw ValueError("Upsample: give exactly one of size and scale_factor");
}

Tensor Upsample::forward(const Tensor& x) {
  if (!x.defined()) throw Error("Upsample.forward: the input is undefined");
  return interpolate(x, options);
}

std::string Upsample::extra_repr() const {
  std::string s;
  if (!options.scale_factor.empty()) {
    std::vector<std::string> f;
    for (double v : options.scale_factor)  // Python's repr of a float: 2.0, 1.5
      f.push_back(v == double(std::int64_t(v)) ? fmt::format("{:.1f}", v) : fmt::format("{}", v));
    s = "scale_factor=" + (f.size() == 1 ? f[0] : fmt::format("({})", fmt::join(f, ", ")));
  } else {
    s = "size=" + size_repr(options.size);
  }
  return s + fmt::format(", mode='{}'", mode_);
}

PixelShuffle::PixelShuffle(std::int64_t r) : upscale_factor(r) {}
Tensor PixelShuffle::forward(const Tensor& x) {
  if (!x.defined()) throw Error("PixelShuffle.forward: the input is undefined");
  return pixel_shuffle(x, upscale_factor);
}
std::string PixelShuffle::extra_repr() const {
  return fmt::format("upscale_factor={}", upscale_factor);
}

PixelUnshuffle::PixelUnshuffle(std::int64_t r) : downscale_factor(r) {}
Tensor PixelUnshuffle::forward(const Tensor& x) {
  if (!x.defined()) throw Error("PixelUnshuffle.forward: the input is undefined");
  return pixel_unshuffle(x, downscale_factor);
}
std::string PixelUnshuffle::extra_repr() const {
  return fmt::format("downscale_factor={}", downscale_factor);
}

}  // namespace ferry::nn
