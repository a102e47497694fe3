// ferry/nn/conv.hpp — the convolution layers, PyTorch's Conv1d, Conv2d, Conv3d and
// ConvTranspose1d/2d/3d, and the im2col modules Unfold and Fold. Conv1d, Conv2d and Conv3d: weight
// [out_channels, in_channels / groups, *kernel_size] and bias [out_channels] (state_dict
// names "weight" and "bias"), both drawn from U(±1/√fan_in), fan_in = in_channels / groups ×
// prod(kernel_size), as reset_parameters' kaiming_uniform_(a = √5) does; padding as sizes
// or "same" / "valid", and padding_mode zeros, reflect, replicate or circular (the input
// padded by F.pad first, as PyTorch's _conv_forward). The math is ferry::conv1d/2d/3d
// (ferry/ops_conv.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "ferry/nn/module.hpp"
#include "ferry/ops_conv.hpp"

namespace ferry::nn {

// What Conv1d, Conv2d and Conv3d share; `dims` spatial dims.
class ConvNd : public Module {
 public:
  Tensor forward(const Tensor& x) override;  // [N, in, *spatial] or [in, *spatial]
  std::string extra_repr() const override;

  std::int64_t in_channels, out_channels;
  ConvSizes kernel_size, stride, dilation;  // one value per spatial dim
  ConvPadding padding;
  std::int64_t groups;
  std::string padding_mode;
  Tensor weight, bias;  // bias undefined when built without one

 protected:
  ConvNd(std::size_t dims, std::int64_t in_channels, std::int64_t out_channels,
         const ConvSizes& kernel_size, const ConvSizes& stride, const ConvPadding& padding,
         const ConvSizes& dilation, std::int64_t groups, bool bias, std::string_view padding_mode,
         const TensorOptions& options);

 private:
  std::size_t dims_;
};

class Conv1d : public ConvNd {
 public:
  Conv1d(std::int64_t in_channels, std::int64_t out_channels, const ConvSizes& kernel_size,
         const ConvSizes& stride = {1}, const ConvPadding& padding = 0,
         const ConvSizes& dilation = {1}, std::int64_t groups = 1, bool bias = true,
         std::string_view padding_mode = "zeros", const TensorOptions& options = {});
};

class Conv2d : public ConvNd {
 public:
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, const ConvSizes& kernel_size,
         const ConvSizes& stride = {1}, const ConvPadding& padding = 0,
         const ConvSizes& dilation = {1}, std::int64_t groups = 1, bool bias = true,
         std::string_view padding_mode = "zeros", const TensorOptions& options = {});
};

class Conv3d : public ConvNd {
 public:
  Conv3d(std::int64_t in_channels, std::int64_t out_channels, const ConvSizes& kernel_size,
         const ConvSizes& stride = {1}, const ConvPadding& padding = 0,
         const ConvSizes& dilation = {1}, std::int64_t groups = 1, bool bias = true,
         std::string_view padding_mode = "zeros", const TensorOptions& options = {});
};

// ConvTranspose1d/2d/3d: weight [in_channels, out_channels / groups, *kernel_size] and bias
// [out_channels], drawn as PyTorch's (fan_in = out_channels / groups x prod(kernel_size),
// the weight's dim 1); padding_mode zeros only, as PyTorch's. The math is
// ferry::conv_transpose1d/2d/3d.
class ConvTransposeNd : public Module {
 public:
  Tensor forward(const Tensor& x) override;  // [N, in, *spatial] or [in, *spatial]
  std::string extra_repr() const override;

  std::int64_t in_channels, out_channels;
  ConvSizes kernel_size, stride, padding, output_padding, dilation;  // one value per dim
  std::int64_t groups;
  Tensor weight, bias;  // bias undefined when built without one

 protected:
  ConvTransposeNd(std::size_t dims, std::int64_t in_channels, std::int64_t out_channels,
                  const ConvSizes& kernel_size, const ConvSizes& stride, const ConvSizes& padding,
                  const ConvSizes& output_padding, std::int64_t groups, bool bias,
                  const ConvSizes& dilation, const TensorOptions& options);

 private:
  std::size_t dims_;
};

class ConvTranspose1d : public ConvTransposeNd {
 public:
  ConvTranspose1d(std::int64_t in_channels, std::int64_t out_channels, const ConvSizes& kernel_size,
                  const ConvSizes& stride = {1}, const ConvSizes& padding = {0},
                  const ConvSizes& output_padding = {0}, std::int64_t groups = 1, bool bias = true,
                  const ConvSizes& dilation = {1}, const TensorOptions& options = {});
};
class ConvTranspose2d : public ConvTransposeNd {
 public:
  ConvTranspose2d(std::int64_t in_channels, std::int64_t out_channels, const ConvSizes& kernel_size,
                  const ConvSizes& stride = {1}, const ConvSizes& padding = {0},
                  const ConvSizes& output_padding = {0}, std::int64_t groups = 1, bool bias = true,
                  const ConvSizes& dilation = {1}, const TensorOptions& options = {});
};
class ConvTranspose3d : public ConvTransposeNd {
 public:
  ConvTranspose3d(std::int64_t in_channels, std::int64_t out_channels, const ConvSizes& kernel_size,
                  const ConvSizes& stride = {1}, const ConvSizes& padding = {0},
                  const ConvSizes& output_padding = {0}, std::int64_t groups = 1, bool bias = true,
                  const ConvSizes& dilation = {1}, const TensorOptions& options = {});
};

// ferry::unfold (im2col) and ferry::fold (col2im) as modules, PyTorch's nn.Unfold and nn.Fold.
class Unfold : public Module {
 public:
  explicit Unfold(ConvSizes kernel_size, ConvSizes dilation = {1}, ConvSizes padding = {0},
                  ConvSizes stride = {1})
      : kernel_size(std::move(kernel_size)),
        dilation(std::move(dilation)),
        padding(std::move(padding)),
        stride(std::move(stride)) {}
  Tensor forward(const Tensor& x) override;  // [N, C, H, W] -> [N, C * kh * kw, L]
  std::string extra_repr() const override;

  ConvSizes kernel_size, dilation, padding, stride;
};

class Fold : public Module {
 public:
  Fold(ConvSizes output_size, ConvSizes kernel_size, ConvSizes dilation = {1},
       ConvSizes padding = {0}, ConvSizes stride = {1})
      : output_size(std::move(output_size)),
        kernel_size(std::move(kernel_size)),
        dilation(std::move(dilation)),
        padding(std::move(padding)),
        stride(std::move(stride)) {}
  Tensor forward(const Tensor& columns) override;  // [N, C * kh * kw, L] -> [N, C, *output_size]
  std::string extra_repr() const override;

  ConvSizes output_size, kernel_size, dilation, padding, stride;
};

}  // namespace ferry::nn
