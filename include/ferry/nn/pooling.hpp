// ferry/nn/pooling.hpp — the pooling and resampling layers: MaxPool1d/2d, AvgPool1d/2d,
// AdaptiveAvgPool1d/2d, AdaptiveMaxPool1d/2d, Upsample, PixelShuffle and PixelUnshuffle.
// No parameters; PyTorch's arguments, defaults and repr; the math is ferry/ops_pool.hpp and
// ferry/ops_resample.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ferry/nn/module.hpp"
#include "ferry/ops_pool.hpp"
#include "ferry/ops_resample.hpp"

namespace ferry::nn {

// max_pool1d/2d; stride empty: the kernel size. forward_with_indices also gives the
// positions of the maxima (MaxUnpool's input, PyTorch's return_indices).
class MaxPoolNd : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  ValuesIndices forward_with_indices(const Tensor& x);
  std::string extra_repr() const override;

  ConvSizes kernel_size, stride, padding, dilation;
  bool ceil_mode;

 protected:
  MaxPoolNd(std::size_t dims, ConvSizes kernel_size, ConvSizes stride, ConvSizes padding,
            ConvSizes dilation, bool ceil_mode);

 private:
  std::size_t dims_;
};

class MaxPool1d : public MaxPoolNd {
 public:
  explicit MaxPool1d(const ConvSizes& kernel_size, const ConvSizes& stride = {},
                     const ConvSizes& padding = {0}, const ConvSizes& dilation = {1},
                     bool ceil_mode = false);
};
class MaxPool2d : public MaxPoolNd {
 public:
  explicit MaxPool2d(const ConvSizes& kernel_size, const ConvSizes& stride = {},
                     const ConvSizes& padding = {0}, const ConvSizes& dilation = {1},
                     bool ceil_mode = false);
};

// avg_pool1d/2d (divisor_override: 2-D only, as PyTorch's AvgPool1d has none).
class AvgPool1d : public Module {
 public:
  explicit AvgPool1d(const ConvSizes& kernel_size, const ConvSizes& stride = {},
                     const ConvSizes& padding = {0}, bool ceil_mode = false,
                     bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  ConvSizes kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(const ConvSizes& kernel_size, const ConvSizes& stride = {},
                     const ConvSizes& padding = {0}, bool ceil_mode = false,
                     bool count_include_pad = true,
                     std::optional<std::int64_t> divisor_override = std::nullopt);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  ConvSizes kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
  std::optional<std::int64_t> divisor_override;
};

// Adaptive pooling to a fixed output_size (one value, or one per spatial dim).
class AdaptiveAvgPool1d : public Module {
 public:
  explicit AdaptiveAvgPool1d(const ConvSizes& output_size);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  ConvSizes output_size;
};
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(const ConvSizes& output_size);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  ConvSizes output_size;
};
class AdaptiveMaxPool1d : public Module {
 public:
  explicit AdaptiveMaxPool1d(const ConvSizes& output_size);
  Tensor forward(const Tensor& x) override;
  ValuesIndices forward_with_indices(const Tensor& x);
  std::string extra_repr() const override;
  ConvSizes output_size;
};
class AdaptiveMaxPool2d : public Module {
 public:
  explicit AdaptiveMaxPool2d(const ConvSizes& output_size);
  Tensor forward(const Tensor& x) override;
  ValuesIndices forward_with_indices(const Tensor& x);
  std::string extra_repr() const override;
  ConvSizes output_size;
};

// interpolate with fixed options (PyTorch's Upsample: size or scale_factor, mode,
// align_corners).
class Upsample : public Module {
 public:
  explicit Upsample(InterpolateOptions options);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  InterpolateOptions options;

 private:
  std::string mode_;  // options.mode's storage
};

class PixelShuffle : public Module {
 public:
  explicit PixelShuffle(std::int64_t upscale_factor);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::int64_t upscale_factor;
};

class PixelUnshuffle : public Module {
 public:
  explicit PixelUnshuffle(std::int64_t downscale_factor);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::int64_t downscale_factor;
};

}  // namespace ferry::nn
