// ferry/nn/normalization.hpp — the normalisation layers over channels: BatchNorm1d/2d/3d,
// InstanceNorm1d/2d/3d, GroupNorm and LocalResponseNorm (LayerNorm: ferry/nn/layers.hpp).
// PyTorch's defaults, state_dict names ("weight", "bias", "running_mean", "running_var",
// "num_batches_tracked") and repr; the math is nn::functional's batch_norm, instance_norm,
// group_norm and local_response_norm.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ferry/nn/module.hpp"
#include "ferry/tensor.hpp"

namespace ferry::nn {

// What the batch and instance norms share (PyTorch's _NormBase): weight (ones) and bias
// (zeros), [num_features], when affine; the buffers running_mean (zeros), running_var (ones)
// and num_batches_tracked (an i64 0-d count) when track_running_stats; and their repr.
class NormBase : public Module {
 public:
  std::string extra_repr() const override;

  std::int64_t num_features;
  double eps;
  std::optional<double> momentum;  // nullopt: the cumulative average 1 / num_batches_tracked
  bool affine, track_running_stats;
  Tensor weight, bias;                                    // when affine
  Tensor running_mean, running_var, num_batches_tracked;  // when track_running_stats

 protected:
  NormBase(std::string_view layer, std::int64_t num_features, double eps,
           std::optional<double> momentum, bool affine, bool track_running_stats,
           const TensorOptions& options);
  // In training with tracked statistics: counts the batch and returns the momentum to use.
  double count_batch();
};

// Batch normalisation of [N, C, *] over N and the spatial dims, per channel C.
// Training normalises with the batch's statistics (biased variance) and, with
// track_running_stats, moves the running statistics toward the batch's — the unbiased
// variance — in place, by momentum. Evaluation normalises with the running statistics
// (with the batch's when they are not tracked). BatchNorm1d takes [N, C] or [N, C, L],
// BatchNorm2d [N, C, H, W], BatchNorm3d [N, C, D, H, W].
class BatchNormNd : public NormBase {
 public:
  Tensor forward(const Tensor& x) override;

 protected:
  BatchNormNd(std::int64_t spatial_dims, std::int64_t num_features, double eps,
              std::optional<double> momentum, bool affine, bool track_running_stats,
              const TensorOptions& options);

 private:
  std::int64_t spatial_dims_;
};

class BatchNorm1d : public BatchNormNd {
 public:
  explicit BatchNorm1d(std::int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true, const TensorOptions& options = {});
};
class BatchNorm2d : public BatchNormNd {
 public:
  explicit BatchNorm2d(std::int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true, const TensorOptions& options = {});
};
class BatchNorm3d : public BatchNormNd {
 public:
  explicit BatchNorm3d(std::int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true, const TensorOptions& options = {});
};

// Instance normalisation: each channel of each sample over its spatial dims, batched
// [N, C, *spatial] or unbatched [C, *spatial]. PyTorch's defaults: no affine weight and bias,
// no running statistics; with track_running_stats, evaluation normalises with them.
class InstanceNormNd : public NormBase {
 public:
  Tensor forward(const Tensor& x) override;

 protected:
  InstanceNormNd(std::int64_t spatial_dims, std::int64_t num_features, double eps,
                 std::optional<double> momentum, bool affine, bool track_running_stats,
                 const TensorOptions& options);

 private:
  std::int64_t spatial_dims_;
};

class InstanceNorm1d : public InstanceNormNd {
 public:
  explicit InstanceNorm1d(std::int64_t num_features, double eps = 1e-5,
                          std::optional<double> momentum = 0.1, bool affine = false,
                          bool track_running_stats = false, const TensorOptions& options = {});
};
class InstanceNorm2d : public InstanceNormNd {
 public:
  explicit InstanceNorm2d(std::int64_t num_features, double eps = 1e-5,
                          std::optional<double> momentum = 0.1, bool affine = false,
                          bool track_running_stats = false, const TensorOptions& options = {});
};
class InstanceNorm3d : public InstanceNormNd {
 public:
  explicit InstanceNorm3d(std::int64_t num_features, double eps = 1e-5,
                          std::optional<double> momentum = 0.1, bool affine = false,
                          bool track_running_stats = false, const TensorOptions& options = {});
};

// Group normalisation of [N, C, *]: num_groups groups of channels per sample; weight (ones)
// and bias (zeros), [num_channels], when affine. ShapeError unless num_groups divides
// num_channels.
class GroupNorm : public Module {
 public:
  GroupNorm(std::int64_t num_groups, std::int64_t num_channels, double eps = 1e-5,
            bool affine = true, const TensorOptions& options = {});
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  std::int64_t num_groups, num_channels;
  double eps;
  bool affine;
  Tensor weight, bias;  // when affine
};

// functional::local_response_norm with these constants; no parameters.
class LocalResponseNorm : public Module {
 public:
  explicit LocalResponseNorm(std::int64_t size, double alpha = 1e-4, double beta = 0.75,
                             double k = 1.0);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  std::int64_t size;
  double alpha, beta, k;
};

// Root-mean-square normalisation (torch.nn.RMSNorm): functional::rms_norm over the last
// normalized_shape.size() dims, weight (ones) when elementwise_affine; eps unset: the input
// dtype's machine epsilon.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(Shape normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true, const TensorOptions& options = {});
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Shape normalized_shape;
  std::optional<double> eps;
  bool elementwise_affine;
  Tensor weight;
};

}  // namespace ferry::nn
