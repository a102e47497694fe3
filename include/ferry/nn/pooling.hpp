// ferry/nn/pooling.hpp — the pooling and resampling layers: MaxPool1d/2d/3d, AvgPool1d/2d/3d,
// LPPool1d/2d, AdaptiveAvgPool1d/2d/3d, AdaptiveMaxPool1d/2d/3d, MaxUnpool1d/2d/3d, Upsample,
// PixelShuffle and PixelUnshuffle. No parameters; PyTorch's arguments, defaults and repr; the math
// is ferry/ops_pool.hpp and ferry/ops_resample.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "ferry/nn/module.hpp"
#include "ferry/ops_pool.hpp"
#include "ferry/ops_resample.hpp"

namespace ferry::nn {

// max_pool1d/2d/3d; stride empty: the kernel size. forward_with_indices also gives the
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
class MaxPool3d : public MaxPoolNd {
 public:
  explicit MaxPool3d(const ConvSizes& kernel_size, const ConvSizes& stride = {},
                     const ConvSizes& padding = {0}, const ConvSizes& dilation = {1},
                     bool ceil_mode = false);
};

// max_unpool1d/2d/3d: forward takes the pooled values and their indices (a MaxPoolNd's
// forward_with_indices) and, optionally, the output's size (PyTorch's output_size argument).
class MaxUnpoolNd : public Module {
 public:
  using Module::forward;
  Tensor forward(const Tensor& x, const Tensor& indices, const ConvSizes& output_size = {});
  std::string extra_repr() const override;

  ConvSizes kernel_size, stride, padding;

 protected:
  MaxUnpoolNd(std::size_t dims, ConvSizes kernel_size, ConvSizes stride, ConvSizes padding);

 private:
  std::size_t dims_;
};
class MaxUnpool1d : public MaxUnpoolNd {
 public:
  explicit MaxUnpool1d(const ConvSizes& kernel_size, const ConvSizes& stride = {},
                       const ConvSizes& padding = {0})
      : MaxUnpoolNd(1, kernel_size, stride, padding) {}
};
class MaxUnpool2d : public MaxUnpoolNd {
 public:
  explicit MaxUnpool2d(const ConvSizes& kernel_size, const ConvSizes& stride = {},
                       const ConvSizes& padding = {0})
      : MaxUnpoolNd(2, kernel_size, stride, padding) {}
};
class MaxUnpool3d : public MaxUnpoolNd {
 public:
  explicit MaxUnpool3d(const ConvSizes& kernel_size, const ConvSizes& stride = {},
                       const ConvSizes& padding = {0})
      : MaxUnpoolNd(3, kernel_size, stride, padding) {}
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

// avg_pool2d/3d.
class AvgPoolNd : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  ConvSizes kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
  std::optional<std::int64_t> divisor_override;

 protected:
  AvgPoolNd(std::size_t dims, ConvSizes kernel_size, ConvSizes stride, ConvSizes padding,
            bool ceil_mode, bool count_include_pad, std::optional<std::int64_t> divisor_override);

 private:
  std::size_t dims_;
};

// lp_pool1d/2d (PyTorch's LPPool1d/2d): stride empty is the kernel size, printed "None" as
// PyTorch prints the stride it was not given.
class LPPoolNd : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  double norm_type;
  ConvSizes kernel_size, stride;
  bool ceil_mode;

 protected:
  LPPoolNd(std::size_t dims, double norm_type, ConvSizes kernel_size, ConvSizes stride,
           bool ceil_mode)
      : norm_type(norm_type),
        kernel_size(std::move(kernel_size)),
        stride(std::move(stride)),
        ceil_mode(ceil_mode),
        dims_(dims) {}

 private:
  std::size_t dims_;
};
class LPPool1d : public LPPoolNd {
 public:
  LPPool1d(double norm_type, ConvSizes kernel_size, ConvSizes stride = {}, bool ceil_mode = false)
      : LPPoolNd(1, norm_type, std::move(kernel_size), std::move(stride), ceil_mode) {}
};
class LPPool2d : public LPPoolNd {
 public:
  LPPool2d(double norm_type, ConvSizes kernel_size, ConvSizes stride = {}, bool ceil_mode = false)
      : LPPoolNd(2, norm_type, std::move(kernel_size), std::move(stride), ceil_mode) {}
};

class AvgPool2d : public AvgPoolNd {
 public:
  explicit AvgPool2d(const ConvSizes& kernel_size, const ConvSizes& stride = {},
                     const ConvSizes& padding = {0}, bool ceil_mode = false,
                     bool count_include_pad = true,
                     std::optional<std::int64_t> divisor_override = std::nullopt)
      : AvgPoolNd(2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override) {
  }
};
class AvgPool3d : public AvgPoolNd {
 public:
  explicit AvgPool3d(const ConvSizes& kernel_size, const ConvSizes& stride = {},
                     const ConvSizes& padding = {0}, bool ceil_mode = false,
                     bool count_include_pad = true,
                     std::optional<std::int64_t> divisor_override = std::nullopt)
      : AvgPoolNd(3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override) {
  }
};

// Adaptive pooling to a fixed output_size (one value, or one per spatial dim).
class AdaptiveAvgPoolNd : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  ConvSizes output_size;

 protected:
  AdaptiveAvgPoolNd(std::size_t dims, ConvSizes output_size);

 private:
  std::size_t dims_;
};
class AdaptiveAvgPool1d : public AdaptiveAvgPoolNd {
 public:
  explicit AdaptiveAvgPool1d(const ConvSizes& output_size) : AdaptiveAvgPoolNd(1, output_size) {}
};
class AdaptiveAvgPool2d : public AdaptiveAvgPoolNd {
 public:
  explicit AdaptiveAvgPool2d(const ConvSizes& output_size) : AdaptiveAvgPoolNd(2, output_size) {}
};
class AdaptiveAvgPool3d : public AdaptiveAvgPoolNd {
 public:
  explicit AdaptiveAvgPool3d(const ConvSizes& output_size) : AdaptiveAvgPoolNd(3, output_size) {}
};

class AdaptiveMaxPoolNd : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  ValuesIndices forward_with_indices(const Tensor& x);
  std::string extra_repr() const override;
  ConvSizes output_size;

 protected:
  AdaptiveMaxPoolNd(std::size_t dims, ConvSizes output_size);

 private:
  std::size_t dims_;
};
class AdaptiveMaxPool1d : public AdaptiveMaxPoolNd {
 public:
  explicit AdaptiveMaxPool1d(const ConvSizes& output_size) : AdaptiveMaxPoolNd(1, output_size) {}
};
class AdaptiveMaxPool2d : public AdaptiveMaxPoolNd {
 public:
  explicit AdaptiveMaxPool2d(const ConvSizes& output_size) : AdaptiveMaxPoolNd(2, output_size) {}
};
class AdaptiveMaxPool3d : public AdaptiveMaxPoolNd {
 public:
  explicit AdaptiveMaxPool3d(const ConvSizes& output_size) : AdaptiveMaxPoolNd(3, output_size) {}
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
