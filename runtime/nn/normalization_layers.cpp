// runtime/nn/normalization_layers.cpp — BatchNorm, InstanceNorm, GroupNorm and
// LocalResponseNorm (ferry/nn/normalization.hpp).
#include <fmt/format.h>

#include <algorithm>

#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/nn/normalization.hpp"
#include "ferry/ops.hpp"
#include "nn_internal.hpp"

namespace ferry::nn {
namespace {

using detail::bool_str;
using detail::check_size;
using detail::param_options;

// What the layers' inputs look like, for their errors.
std::string expected_input(std::int64_t spatial_dims) {
  switch (spatial_dims) {
    case 1:
      return "a 2-D [N, C] or 3-D [N, C, L]";
    case 2:
      return "a 4-D [N, C, H, W]";
    default:
      return "a 5-D [N, C, D, H, W]";
  }
}

}  // namespace

// ---------------------------------------------------------------- NormBase

NormBase::NormBase(std::string_view layer, std::int64_t features, double eps_,
                   std::optional<double> momentum_, bool affine_, bool track,
                   const TensorOptions& options)
    : num_features(features),
      eps(eps_),
      momentum(momentum_),
      affine(affine_),
      track_running_stats(track) {
  check_size(layer, "num_features", features);
  const TensorOptions o = param_options(layer, options);
  if (affine) {
    weight = register_parameter("weight", ones({features}, o));
    bias = register_parameter("bias", zeros({features}, o));
  }
  if (track) {
    running_mean = register_buffer("running_mean", zeros({features}, o));
    running_var = register_buffer("running_var", ones({features}, o));
    num_batches_tracked = register_buffer("num_batches_tracked",
                                          zeros({}, {.dtype = DType::i64, .device = o.device}));
  }
}

double NormBase::count_batch() {
  NoGradGuard no_grad;
  num_batches_tracked.copy_(num_batches_tracked + 1);
  return momentum ? *momentum : 1.0 / double(num_batches_tracked.item<std::int64_t>());
}

std::string NormBase::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features,
                     eps, momentum ? fmt::format("{}", *momentum) : std::string("None"),
                     bool_str(affine), bool_str(track_running_stats));
}

// ---------------------------------------------------------------- BatchNorm

BatchNormNd::BatchNormNd(std::int64_t spatial_dims, std::int64_t features, double eps,
                         std::optional<double> momentum, bool affine, bool track,
                         const TensorOptions& options)
    : NormBase(fmt::format("BatchNorm{}d", spatial_dims), features, eps, momentum, affine, track,
               options),
      spatial_dims_(spatial_dims) {}

Tensor BatchNormNd::forward(const Tensor& x) {
  const std::string layer = fmt::format("{}({})", name(), num_features);
  if (!x.defined()) throw Error(fmt::format("{}.forward: the input is undefined", name()));
  const bool rank_ok =
      spatial_dims_ == 1 ? x.dim() == 2 || x.dim() == 3 : x.dim() == spatial_dims_ + 2;
  if (!rank_ok)
    throw ShapeError(fmt::format("{}: expects {} input, got shape {}", layer,
                                 expected_input(spatial_dims_), shape_str(x.sizes())));
  if (x.size(1) != num_features)
    throw ShapeError(fmt::format("{}: the input's dim 1 (channels) must be {}, got input shape {}",
                                 layer, num_features, shape_str(x.sizes())));
  // Everything functional::batch_norm would refuse is refused before the
  // step count moves.
  if (!is_floating(x.dtype()))
    throw DTypeError(
        fmt::format("{}: the input must be floating, got {}", layer, dtype_name(x.dtype())));
  const bool batch_stats = is_training() || !track_running_stats;
  if (batch_stats && x.numel() / std::max<std::int64_t>(num_features, 1) <= 1)
    throw ShapeError(
        fmt::format("{}: training needs more than 1 value per channel, got input shape {}; use "
                    "a larger batch or eval()",
                    layer, shape_str(x.sizes())));
  const double factor = is_training() && track_running_stats ? count_batch() : 0.0;
  return functional::batch_norm(x, running_mean, running_var, weight, bias, batch_stats, factor,
                                eps);
}

BatchNorm1d::BatchNorm1d(std::int64_t f, double eps, std::optional<double> m, bool affine,
                         bool track, const TensorOptions& o)
    : BatchNormNd(1, f, eps, m, affine, track, o) {}
BatchNorm2d::BatchNorm2d(std::int64_t f, double eps, std::optional<double> m, bool affine,
                         bool track, const TensorOptions& o)
    : BatchNormNd(2, f, eps, m, affine, track, o) {}
BatchNorm3d::BatchNorm3d(std::int64_t f, double eps, std::optional<double> m, bool affine,
                         bool track, const TensorOptions& o)
    : BatchNormNd(3, f, eps, m, affine, track, o) {}

// ---------------------------------------------------------------- InstanceNorm

InstanceNormNd::InstanceNormNd(std::int64_t spatial_dims, std::int64_t features, double eps,
                               std::optional<double> momentum, bool affine, bool track,
                               const TensorOptions& options)
    : NormBase(fmt::format("InstanceNorm{}d", spatial_dims), features, eps, momentum, affine, track,
               options),
      spatial_dims_(spatial_dims) {}

Tensor InstanceNormNd::forward(const Tensor& x) {
  const std::string layer = fmt::format("{}({})", name(), num_features);
  if (!x.defined()) throw Error(fmt::format("{}.forward: the input is undefined", name()));
  if (x.dim() != spatial_dims_ + 1 && x.dim() != spatial_dims_ + 2)
    throw ShapeError(
        fmt::format("{}: expected {}-D (unbatched) or {}-D (batched) input, got "
                    "shape {}",
                    layer, spatial_dims_ + 1, spatial_dims_ + 2, shape_str(x.sizes())));
  const bool batched = x.dim() == spatial_dims_ + 2;
  const Tensor in = batched ? x : x.unsqueeze(0);
  if ((affine || track_running_stats) && in.size(1) != num_features)
    throw ShapeError(fmt::format(
        "{}: expected input's size at dim 1 to match num_features ({}), but got input shape {}",
        layer, num_features, shape_str(x.sizes())));
  const bool input_stats = is_training() || !track_running_stats;
  const double factor = is_training() && track_running_stats ? count_batch() : 0.0;
  const Tensor y = functional::instance_norm(in, running_mean, running_var, weight, bias,
                                             input_stats, factor, eps);
  return batched ? y : y.squeeze(0);
}

InstanceNorm1d::InstanceNorm1d(std::int64_t f, double eps, std::optional<double> m, bool affine,
                               bool track, const TensorOptions& o)
    : InstanceNormNd(1, f, eps, m, affine, track, o) {}
InstanceNorm2d::InstanceNorm2d(std::int64_t f, double eps, std::optional<double> m, bool affine,
                               bool track, const TensorOptions& o)
    : InstanceNormNd(2, f, eps, m, affine, track, o) {}
InstanceNorm3d::InstanceNorm3d(std::int64_t f, double eps, std::optional<double> m, bool affine,
                               bool track, const TensorOptions& o)
    : InstanceNormNd(3, f, eps, m, affine, track, o) {}

// ---------------------------------------------------------------- GroupNorm

GroupNorm::GroupNorm(std::int64_t groups, std::int64_t channels, double eps_, bool affine_,
                     const TensorOptions& options)
    : num_groups(groups), num_channels(channels), eps(eps_), affine(affine_) {
  if (groups <= 0 || channels < 0 || channels % groups != 0)
    throw ShapeError(fmt::format(
        "GroupNorm: num_channels ({}) must be divisible by num_groups ({}), a positive number",
        channels, groups));
  if (affine) {
    const TensorOptions o = param_options("GroupNorm", options);
    weight = register_parameter("weight", ones({channels}, o));
    bias = register_parameter("bias", zeros({channels}, o));
  }
}

Tensor GroupNorm::forward(const Tensor& x) {
  if (!x.defined()) throw Error("GroupNorm.forward: the input is undefined");
  if (x.dim() < 2 || x.size(1) != num_channels)
    throw ShapeError(fmt::format("GroupNorm({}, {}): expects an input [N, {}, *], got shape {}",
                                 num_groups, num_channels, num_channels, shape_str(x.sizes())));
  return functional::group_norm(x, num_groups, weight, bias, eps);
}

std::string GroupNorm::extra_repr() const {
  return fmt::format("{}, {}, eps={}, affine={}", num_groups, num_channels, eps, bool_str(affine));
}

// ---------------------------------------------------------------- LocalResponseNorm

LocalResponseNorm::LocalResponseNorm(std::int64_t size_, double alpha_, double beta_, double k_)
    : size(size_), alpha(alpha_), beta(beta_), k(k_) {
  if (size <= 0)
    throw ValueError(fmt::format("LocalResponseNorm: size must be positive, got {}", size));
}

Tensor LocalResponseNorm::forward(const Tensor& x) {
  return functional::local_response_norm(x, size, alpha, beta, k);
}

std::string LocalResponseNorm::extra_repr() const {
  return fmt::format("{}, alpha={}, beta={}, k={}", size, alpha, beta, k);
}

// ---------------------------------------------------------------- RMSNorm

RMSNorm::RMSNorm(Shape shape, std::optional<double> eps_, bool affine, const TensorOptions& options)
    : normalized_shape(std::move(shape)), eps(eps_), elementwise_affine(affine) {
  if (normalized_shape.empty())
    throw ShapeError("RMSNorm: normalized_shape must have at least one dim");
  for (std::int64_t s : normalized_shape) check_size("RMSNorm", "normalized_shape", s);
  if (affine)
    weight =
        register_parameter("weight", ones(normalized_shape, param_options("RMSNorm", options)));
}

Tensor RMSNorm::forward(const Tensor& x) {
  if (!x.defined()) throw Error("RMSNorm.forward: the input is undefined");
  return functional::rms_norm(x, normalized_shape, weight, eps);
}

std::string RMSNorm::extra_repr() const {
  return fmt::format("{}, eps={}, elementwise_affine={}", shape_str(normalized_shape),
                     eps ? fmt::format("{}", *eps) : std::string("None"),
                     bool_str(elementwise_affine));
}

}  // namespace ferry::nn
