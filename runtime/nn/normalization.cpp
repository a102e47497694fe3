// runtime/nn/normalization.cpp — batch, group, instance and local response normalisation
// (ferry/nn/functional.hpp), composed of differentiable ops: every device that has the ops
// has these.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "../dispatch.hpp"
#include "../memory_format_internal.hpp"
#include "../ops_internal.hpp"
#include "autocast_internal.hpp"
#include "autograd/formulas.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/ops.hpp"
#include "nn_internal.hpp"

namespace ferry::nn::functional {
namespace {

using detail::check_defined;

// [1, C, 1, ...] for a per-channel vector of x [N, C, *].
Shape channel_shape(const Tensor& x) {
  Shape s(std::size_t(x.dim()), 1);
  s[1] = x.size(1);
  return s;
}

void check_channel_vector(std::string_view fn, std::string_view arg, const Tensor& t,
                          const Tensor& x) {
  if (t.defined() && t.sizes() != Shape{x.size(1)})
    throw ShapeError(
        fmt::format("{}: {} must have shape [{}] (the input's dim 1, input shape {}), got {}", fn,
                    arg, x.size(1), shape_str(x.sizes()), shape_str(t.sizes())));
}

Tensor affine(const Tensor& y, const Tensor& weight, const Tensor& bias) {
  Tensor r = y;
  if (weight.defined()) r = r * weight.to(y.dtype()).reshape(channel_shape(y));
  if (bias.defined()) r = r + bias.to(y.dtype()).reshape(channel_shape(y));
  return r;
}

// Note [Normalization statistics in f32]
// The compositions below (group_norm, instance_norm, rms_norm, and batch_norm where no kernel
// takes it) widen f16 and bf16 inputs to f32 for the statistics and the normalization and round the
// result once, as PyTorch's kernels do (float is their accumulate type for the 16-bit
// floats). Computed in the input's dtype, the mean was rounded to it before x - mean: an f16
// input around 100, where f16's ulp is 1/16, came out 2.5% off (group_norm and instance_norm,
// on the CPU and on lavapipe), against 0.03% for a kernel that keeps the statistics in f32.
// to() is differentiable, so the gradients come back in the input's dtype.
Tensor widened(const Tensor& x) { return is_reduced_float(x.dtype()) ? x.to(DType::f32) : x; }

// The values batch_norm averages per channel: N times the spatial size.
std::int64_t count_per_channel(const Tensor& x) {
  return x.size(1) == 0 ? 0 : x.numel() / x.size(1);
}

// running = (1 - momentum) running + momentum batch, in place and unrecorded, so the buffers
// keep their identity (and device) and the update is part of no graph.
void update_running(const Tensor& running, const Tensor& batch, double momentum) {
  NoGradGuard no_grad;
  Tensor r = running;  // a handle: the write reaches the buffer
  r.copy_(r * (1.0 - momentum) + batch.to(running.dtype()) * momentum);
}

// batch_norm by the device's kernel (Note [Composite ops] in ferry/op.hpp: the kernel has a
// backward row of its own, so it runs under autograd too): x [N, C, *] read once for the statistics
// and once for y; the running statistics updated from the batch's, the backward recorded.
Tensor batch_norm_kernel(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                         const Tensor& weight, const Tensor& bias, bool training, double momentum,
                         double eps, std::int64_t count) {
  using ferry::detail::impl_of;
  using ferry::detail::new_tensor;
  // A channels-last input as it is on a device whose kernel takes it, else a contiguous copy
  // (recorded: differentiable); saved for the backward.
  const MemoryFormat format = ferry::detail::cnn_kernel_format(x, {&x});
  const Tensor xc = x.contiguous(format);
  const DType stats = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const Shape c{x.size(1)};
  Attrs attrs{{"training", training},
              {"eps", eps},
              {"has_weight", weight.defined()},
              {"has_bias", bias.defined()}};
  ferry::detail::set_activation_format(attrs, format);
  Tensor y, mean_t, var_t;
  {
    NoGradGuard no_grad;
    std::vector<Tensor> in{xc};
    for (const Tensor& p : {weight, bias})
      if (p.defined()) in.push_back(p.to(x.dtype()).contiguous());
    y = ferry::detail::new_tensor_in(x.sizes(), x.dtype(), impl_of(x), format);
    if (training) {
      mean_t = new_tensor(c, stats, impl_of(x));
      var_t = new_tensor(c, stats, impl_of(x));
      ferry::detail::run_kernel(OpId::batch_norm, in, {y, mean_t, var_t}, attrs);
      if (running_mean.defined()) {  // the running variance takes the unbiased estimate
        update_running(running_mean, mean_t, momentum);
        update_running(running_var, var_t * (double(count) / double(count - 1)), momentum);
      }
    } else {
      // Copies: the backward must see these statistics even if the buffers change after.
      mean_t = running_mean.to(stats).clone();
      var_t = running_var.to(stats).clone();
      in.push_back(mean_t);
      in.push_back(var_t);
      ferry::detail::run_kernel(OpId::batch_norm, in, {y}, attrs);
    }
  }
  autograd::record_batch_norm(xc, weight, bias, mean_t, var_t, attrs, y);
  // Channels-last in, channels-last out, as the composition's element-wise ops give.
  return ferry::detail::in_memory_format_of(y, {&x});
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  check_defined("batch_norm", "input", x);
  ferry::detail::check_dtype(OpId::batch_norm, x);
  if (x.dim() < 2)
    throw ShapeError(
        fmt::format("batch_norm: the input must be [N, C, ...] with at least 2 dims, got shape {}",
                    shape_str(x.sizes())));
  const std::int64_t channels = x.size(1);
  auto check_vec = [&](const Tensor& t, std::string_view arg) {
    if (t.defined() && t.sizes() != Shape{channels})
      throw ShapeError(
          fmt::format("batch_norm: {} must have shape [{}] (the input's dim 1, input "
                      "shape {}), got {}",
                      arg, channels, shape_str(x.sizes()), shape_str(t.sizes())));
  };
  check_vec(running_mean, "running_mean");
  check_vec(running_var, "running_var");
  check_vec(weight, "weight");
  check_vec(bias, "bias");
  if (running_mean.defined() != running_var.defined())
    throw Error("batch_norm: running_mean and running_var must both be given or both be left out");
  if (!training && !running_mean.defined())
    throw Error(
        "batch_norm: evaluation (training = false) normalises with running_mean and running_var, "
        "which were not given");

  const std::int64_t count = count_per_channel(x);
  if (training && count <= 1)
    throw ShapeError(fmt::format(
        "batch_norm: training needs more than 1 value per channel to compute a variance, got "
        "input shape {}; use a larger batch or eval()",
        shape_str(x.sizes())));
  if (ferry::detail::use_fused_kernel_with_backward(x, OpId::batch_norm))
    return batch_norm_kernel(x, running_mean, running_var, weight, bias, training, momentum, eps,
                             count);

  std::vector<std::int64_t> dims = {0};
  for (std::int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  Shape bshape(std::size_t(x.dim()), 1);
  bshape[1] = channels;

  const Tensor xw = widened(x);  // Note [Normalization statistics in f32]
  Tensor mean_b, var_b;
  if (training) {
    mean_b = mean(xw, dims, /*keepdim=*/true);
    var_b = var(xw, dims, /*correction=*/0, /*keepdim=*/true);
    if (running_mean.defined()) {  // the running variance takes the unbiased estimate
      NoGradGuard no_grad;
      update_running(running_mean, mean_b.reshape({channels}), momentum);
      update_running(running_var, var_b.reshape({channels}) * (double(count) / double(count - 1)),
                     momentum);
    }
  } else {
    mean_b = running_mean.to(xw.dtype()).reshape(bshape);
    var_b = running_var.to(xw.dtype()).reshape(bshape);
  }
  return affine((xw - mean_b) * rsqrt(var_b + eps), weight, bias).to(x.dtype());
}

Tensor group_norm(const Tensor& x, std::int64_t num_groups, const Tensor& weight,
                  const Tensor& bias, double eps) {
  if (ferry::detail::autocast_applies(OpId::group_norm)) {
    const ferry::detail::AutocastOp ac(OpId::group_norm, {&x, &weight, &bias});
    return group_norm(ac(x), num_groups, ac(weight), ac(bias), eps);
  }
  check_defined("group_norm", "input", x);
  ferry::detail::check_dtype(OpId::group_norm, x);
  if (x.dim() < 2)
    throw ShapeError(
        fmt::format("group_norm: expected an input of at least 2 dims [N, C, *], got shape {}",
                    shape_str(x.sizes())));
  const std::int64_t N = x.size(0), C = x.size(1);
  if (num_groups <= 0 || C % num_groups != 0)
    throw ShapeError(fmt::format(
        "group_norm: expected number of channels in input to be divisible by num_groups, but "
        "got input of shape {} and num_groups={}",
        shape_str(x.sizes()), num_groups));
  check_channel_vector("group_norm", "weight", weight, x);
  check_channel_vector("group_norm", "bias", bias, x);
  std::int64_t per_group = C / num_groups;
  for (std::int64_t d = 2; d < x.dim(); ++d) per_group *= x.size(d);
  const Tensor g = widened(x).reshape({N, num_groups, per_group});  // Note [Normalization
                                                                    // statistics in f32]
  const Tensor mu = mean(g, {2}, /*keepdim=*/true);
  const Tensor v = var(g, {2}, /*correction=*/0, /*keepdim=*/true);
  return affine(((g - mu) * rsqrt(v + eps)).reshape(x.sizes()), weight, bias).to(x.dtype());
}

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool use_input_stats,
                     double momentum, double eps) {
  check_defined("instance_norm", "input", x);
  ferry::detail::check_dtype(OpId::instance_norm, x);
  if (x.dim() < 3)
    throw ShapeError(fmt::format(
        "instance_norm: expected an input of at least 3 dims [N, C, *spatial], got shape {}",
        shape_str(x.sizes())));
  for (const auto& [arg, t] :
       {std::pair{"running_mean", running_mean}, std::pair{"running_var", running_var},
        std::pair{"weight", weight}, std::pair{"bias", bias}})
    check_channel_vector("instance_norm", arg, t, x);
  if (running_mean.defined() != running_var.defined())
    throw Error(
        "instance_norm: running_mean and running_var must both be given or both be left out");
  if (!use_input_stats && !running_mean.defined())
    throw Error(
        "instance_norm: use_input_stats = false normalises with running_mean and "
        "running_var, which were not given");
  std::vector<std::int64_t> spatial;
  std::int64_t count = 1;
  for (std::int64_t d = 2; d < x.dim(); ++d) spatial.push_back(d), count *= x.size(d);
  const Tensor xw = widened(x);  // Note [Normalization statistics in f32]
  Tensor mu, v;
  if (use_input_stats) {
    if (count <= 1)
      throw ShapeError(fmt::format(
          "instance_norm: expected more than 1 spatial element when training, got input "
          "shape {}",
          shape_str(x.sizes())));
    mu = mean(xw, spatial, /*keepdim=*/true);
    v = var(xw, spatial, /*correction=*/0, /*keepdim=*/true);
    if (running_mean.defined() && x.size(0) > 0) {
      NoGradGuard no_grad;
      const Shape nc{x.size(0), x.size(1)};
      update_running(running_mean, mean(mu.reshape(nc), {0}), momentum);
      update_running(running_var, mean(v.reshape(nc), {0}) * (double(count) / double(count - 1)),
                     momentum);
    }
  } else {
    mu = running_mean.to(xw.dtype()).reshape(channel_shape(x));
    v = running_var.to(xw.dtype()).reshape(channel_shape(x));
  }
  return affine((xw - mu) * rsqrt(v + eps), weight, bias).to(x.dtype());
}

Tensor local_response_norm(const Tensor& x, std::int64_t size, double alpha, double beta,
                           double k) {
  check_defined("local_response_norm", "input", x);
  ferry::detail::check_dtype(OpId::local_response_norm, x);
  if (x.dim() < 3)
    throw ShapeError(
        fmt::format("local_response_norm: expected 3D or higher dimensionality input, got shape {}",
                    shape_str(x.sizes())));
  if (size <= 0)
    throw ValueError(fmt::format("local_response_norm: size must be positive, got {}", size));
  const std::int64_t C = x.size(1);
  // x^2 zero-padded along the channels, size / 2 before and (size - 1) / 2 after (F.pad's
  // pairs run from the last dim back), then each channel's window summed.
  std::vector<std::int64_t> pads(std::size_t(2 * (x.dim() - 1)), 0);
  pads[pads.size() - 2] = size / 2;
  pads[pads.size() - 1] = (size - 1) / 2;
  const Tensor sq = pad(x * x, pads);
  Tensor window = sq.narrow(1, 0, C);
  for (std::int64_t j = 1; j < size; ++j) window = window + sq.narrow(1, j, C);
  return x / pow(window * (alpha / double(size)) + k, beta);
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  check_defined("rms_norm", "input", x);
  ferry::detail::check_dtype(OpId::rms_norm, x);
  const std::int64_t k = std::int64_t(normalized_shape.size());
  const Shape& s = x.sizes();
  if (k == 0 || k > x.dim() ||
      !std::equal(normalized_shape.begin(), normalized_shape.end(), s.end() - k))
    throw ShapeError(fmt::format(
        "rms_norm: normalized_shape {} must be the input's last dims, got input shape {}",
        shape_str(normalized_shape), shape_str(s)));
  if (weight.defined() && weight.sizes() != normalized_shape)
    throw ShapeError(fmt::format("rms_norm: weight must have shape {}, got {}",
                                 shape_str(normalized_shape), shape_str(weight.sizes())));
  double e = 0;
  if (eps) {
    e = *eps;
  } else {
    switch (x.dtype()) {
      case DType::f64:
        e = 2.220446049250313e-16;
        break;
      case DType::f16:
        e = 0.0009765625;
        break;
      case DType::bf16:
        e = 0.0078125;
        break;
      default:
        e = 1.1920928955078125e-07;
        break;
    }
  }
  const Tensor xc = widened(x);  // Note [Normalization statistics in f32]
  std::vector<std::int64_t> dims;
  for (std::int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  Tensor y = xc * rsqrt(mean(xc * xc, dims, true) + e);
  if (weight.defined()) y = y * weight.to(xc.dtype());
  return y.to(x.dtype());
}

}  // namespace ferry::nn::functional
