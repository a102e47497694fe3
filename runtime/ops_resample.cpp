// runtime/ops_resample.cpp — interpolate as separable gathers and pixel_shuffle as a
// permutation (ferry/ops_resample.hpp, Note [Interpolation is separable]).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "autocast_internal.hpp"
#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/backend.hpp"
#include "ferry/error.hpp"
#include "ferry/kit/resample_args.hpp"
#include "ferry/ops.hpp"
#include "memory_format_internal.hpp"
#include "ops_internal.hpp"
#include "sliding_window.hpp"

namespace ferry {
namespace {

// One spatial dim's resampling: output position o reads input index[t * out + o] weighed by
// weight[t * out + o] (no weights: nearest, one tap).
struct Taps {
  std::int64_t taps = 1;
  std::vector<std::int64_t> index;
  std::vector<double> weight;
};

// PyTorch's compute_scales_value: 1 / the given scale, else in / out; in `Real`. The linear
// modes compute in their opmath (float for the f32, f16 and bf16 kernels, double for f64);
// the nearest modes in float for every dtype, as UpSample.h's nearest_idx does, so an f64
// input picks the pixels an f32 one does (at scale 2.7, output 41 of 51 reads input 14; in
// double it would read 15).
template <class Real>
Real source_scale(std::optional<double> scale, std::int64_t in, std::int64_t out) {
  return scale && *scale > 0 ? Real(1.0 / *scale) : Real(in) / Real(out);
}

Taps nearest_taps(std::int64_t in, std::int64_t out, std::optional<double> scale, bool exact) {
  Taps t;
  const float s = source_scale<float>(scale, in, out);
  for (std::int64_t o = 0; o < out; ++o) {
    std::int64_t i;
    if (!exact && out == in) {
      i = o;
    } else if (!exact && out == 2 * in) {
      i = o >> 1;
    } else {
      // PyTorch's source indices: floorf(dst * scale) in float, and nearest-exact's
      // floorf((dst + 0.5) * scale), its product in double rounded to float.
      i = exact ? std::int64_t(std::floor(float((double(o) + 0.5) * double(s))))
                : std::int64_t(std::floor(float(o) * s));
    }
    t.index.push_back(std::min(i, in - 1));
  }
  return t;
}

// PyTorch's area_pixel_compute_source_index: where output position o falls in the input.
template <class Real> Real source_index(Real s, std::int64_t o, bool align_corners, bool cubic) {
  if (align_corners) return s * Real(o);
  const Real src = s * (Real(o) + Real(0.5)) - Real(0.5);
  return !cubic && src < 0 ? Real(0) : src;
}

template <class Real> Real linear_scale(std::int64_t in, std::int64_t out, bool align_corners,
                                        std::optional<double> scale) {
  if (align_corners) return out > 1 ? Real(in - 1) / Real(out - 1) : Real(0);
  return source_scale<Real>(scale, in, out);
}

template <class Real> Taps linear_taps(std::int64_t in, std::int64_t out, bool align_corners,
                                       std::optional<double> scale) {
  Taps t{2, std::vector<std::int64_t>(std::size_t(2 * out)),
         std::vector<double>(std::size_t(2 * out))};
  const Real s = linear_scale<Real>(in, out, align_corners, scale);
  for (std::int64_t o = 0; o < out; ++o) {
    const Real src = source_index<Real>(s, o, align_corners, false);
    const std::int64_t i0 = std::int64_t(src);
    const Real l1 = std::min(std::max(src - Real(i0), Real(0)), Real(1));
    t.index[std::size_t(o)] = i0;
    t.index[std::size_t(out + o)] = i0 + (i0 < in - 1 ? 1 : 0);
    t.weight[std::size_t(o)] = double(Real(1) - l1);
    t.weight[std::size_t(out + o)] = double(l1);
  }
  return t;
}

// Keys' cubic convolution with A = -0.75, as PyTorch's get_cubic_upsample_coefficients.
template <class Real> Taps cubic_taps(std::int64_t in, std::int64_t out, bool align_corners,
                                      std::optional<double> scale) {
  Taps t{4, std::vector<std::int64_t>(std::size_t(4 * out)),
         std::vector<double>(std::size_t(4 * out))};
  const Real A = Real(-0.75);
  auto near = [&](Real x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [&](Real x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };  // 1 < |x| < 2
  const Real s = linear_scale<Real>(in, out, align_corners, scale);
  for (std::int64_t o = 0; o < out; ++o) {
    const Real src = source_index<Real>(s, o, align_corners, true);
    const std::int64_t i = std::int64_t(std::floor(src));
    const Real f = src - Real(i);
    const Real w[4] = {far(f + 1), near(f), near(1 - f), far(2 - f)};
    for (std::int64_t k = 0; k < 4; ++k) {
      t.index[std::size_t(k * out + o)] = std::clamp(i - 1 + k, std::int64_t(0), in - 1);
      t.weight[std::size_t(k * out + o)] = double(w[k]);
    }
  }
  return t;
}

// x resampled along `dim` by `t`: one index_select of every tap, weighed and summed.
Tensor resample_dim(const Tensor& x, std::int64_t dim, const Taps& t, std::int64_t out) {
  const Tensor index = tensor(t.index).to(x.device());
  Tensor y = index_select(x, dim, index);
  if (t.weight.empty()) return y;
  Shape split = x.sizes(), wshape(std::size_t(x.dim()) + 1, 1);
  split[std::size_t(dim)] = out;
  split.insert(split.begin() + dim, t.taps);
  wshape[std::size_t(dim)] = t.taps;
  wshape[std::size_t(dim) + 1] = out;
  const Tensor w = tensor(t.weight).to(x.dtype()).to(x.device()).reshape(wshape);
  return sum(y.reshape(split) * w, {dim});
}

// A 2-D resampling by the device's kernel (Note [Composite ops] in ferry/op.hpp: it has a
// backward row of its own, interpolate_backward): x [N, C, H, W] and each dim's taps as
// tables on x's device, index i64 and weight [taps, out] in the compute type (the taps'
// weights were computed in it: nothing is rounded; nearest: weight 1); in a
// channels-last x's layout where the device's kernels take it.
Tensor resample2d_kernel(const Tensor& x, const std::vector<Taps>& dims,
                         const std::vector<std::int64_t>& out) {
  std::vector<Tensor> tables;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const Taps& t = dims[i];
    const Shape s{t.taps, out[i]};
    tables.push_back(tensor(t.index).reshape(s).to(x.device()));
    // The weights made in the compute type on the host (no cast op).
    const DType weight = resample_weight_dtype(x.dtype());
    const Tensor w = t.weight.empty() ? ones(s, {.dtype = weight})
                     : weight == DType::f64
                         ? tensor(t.weight)
                         : tensor(std::vector<float>(t.weight.begin(), t.weight.end()));
    tables.push_back(w.reshape(s).to(x.device()));
  }
  // A channels-last input as it is on a device whose kernel takes it, else a contiguous copy
  // (recorded: differentiable).
  const MemoryFormat format = detail::cnn_kernel_format(x, {&x});
  const Tensor xc = x.contiguous(format);
  Attrs attrs;
  detail::set_activation_format(attrs, format);
  Tensor y;
  {
    NoGradGuard no_grad;
    y = detail::new_tensor_in({x.size(0), x.size(1), out[0], out[1]}, x.dtype(), detail::impl_of(x),
                              format);
    std::vector<Tensor> in{xc};
    in.insert(in.end(), tables.begin(), tables.end());
    detail::run_kernel(OpId::interpolate, in, {y}, attrs);
  }
  autograd::record_resample(xc, tables, attrs, y);
  return y;
}

// Taps that read each of `size` positions as it is: the dim a 1-D or 3-D resampling adds to
// run as a 2-D one (weight 1: the product is exact).
Taps identity_taps(std::int64_t size) {
  Taps t;
  for (std::int64_t i = 0; i < size; ++i) t.index.push_back(i);
  return t;
}

// A 1-, 2- or 3-D resampling by the device's 2-D kernel: a 1-D one over [N, C, 1, W]; a 3-D
// one as H and W over [N, C·D, H, W], then D over [N, C, D, H'·W'] (PyTorch's trilinear
// nesting: the depth taps outermost).
Tensor resample_kernel(const Tensor& x, const std::vector<Taps>& dims,
                       const std::vector<std::int64_t>& out) {
  if (dims.size() == 2) return resample2d_kernel(x, dims, out);
  if (dims.size() == 1)
    return resample2d_kernel(x.unsqueeze(2), {identity_taps(1), dims[0]}, {1, out[0]}).squeeze(2);
  const std::int64_t n = x.size(0), c = x.size(1), d = x.size(2);
  const Tensor planes = resample2d_kernel(x.reshape({n, c * d, x.size(3), x.size(4)}),
                                          {dims[1], dims[2]}, {out[1], out[2]});
  const std::int64_t area = out[1] * out[2];
  return resample2d_kernel(planes.reshape({n, c, d, area}), {dims[0], identity_taps(area)},
                           {out[0], area})
      .reshape({n, c, out[0], out[1], out[2]});
}

}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& o) {
  if (ferry::detail::autocast_applies(OpId::interpolate)) {
    const ferry::detail::AutocastOp ac(OpId::interpolate, {&x});
    return interpolate(ac(x), o);
  }
  constexpr std::string_view op = "interpolate";
  const std::string mode(o.mode);
  const std::int64_t n = x.dim() - 2;
  if (n < 1 || n > 3)
    throw ShapeError(
        fmt::format("interpolate: expected a 3-D, 4-D or 5-D input [N, C, *spatial], got shape {}",
                    shape_str(x.sizes())));
  detail::check_dtype(OpId::interpolate, x);
  const bool linear_mode =
      mode == "linear" || mode == "bilinear" || mode == "bicubic" || mode == "trilinear";
  if (!linear_mode && mode != "nearest" && mode != "nearest-exact" && mode != "area")
    throw ValueError(fmt::format(
        "interpolate: unknown mode '{}': expected nearest, nearest-exact, linear, bilinear, "
        "bicubic, trilinear or area",
        mode));
  if (o.align_corners && !linear_mode)
    throw ValueError(
        "interpolate: align_corners option can only be set with the interpolating modes: "
        "linear | bilinear | bicubic | trilinear");
  const std::int64_t wanted = mode == "linear" ? 1 : mode == "trilinear" ? 3 : linear_mode ? 2 : n;
  if (wanted != n)
    throw ShapeError(fmt::format("interpolate: got {}-D input, but {} mode needs {}-D input",
                                 x.dim(), mode, wanted + 2));
  if (o.size.empty() == o.scale_factor.empty())
    throw ValueError(o.size.empty()
                         ? "interpolate: either size or scale_factor should be defined"
                         : "interpolate: only one of size or scale_factor should be defined");
  std::vector<std::int64_t> in, out;
  std::vector<std::optional<double>> scales(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) in.push_back(x.size(i + 2));
  if (!o.size.empty()) {
    out = detail::per_dim(op, "size", o.size, std::size_t(n));
  } else {
    if (o.scale_factor.size() != 1 && o.scale_factor.size() != std::size_t(n))
      throw ShapeError(fmt::format("interpolate: scale_factor has {} values, expected 1 or {}",
                                   o.scale_factor.size(), n));
    for (std::int64_t i = 0; i < n; ++i) {
      const double f =
          o.scale_factor.size() == 1 ? o.scale_factor[0] : o.scale_factor[std::size_t(i)];
      if (!(f > 0))
        throw ValueError(fmt::format("interpolate: scale_factor must be positive, got {}", f));
      out.push_back(std::int64_t(std::floor(double(in[std::size_t(i)]) * f)));
      if (!o.recompute_scale_factor) scales[std::size_t(i)] = f;
    }
  }
  for (std::size_t i = 0; i < in.size(); ++i)
    if (in[i] <= 0 || out[i] <= 0)
      throw ShapeError(fmt::format(
          "interpolate: input and output sizes should be greater than 0, but got input ({}) "
          "and output ({})",
          fmt::join(in, ", "), fmt::join(out, ", ")));
  if (mode == "area") {
    if (n == 1) return adaptive_avg_pool1d(x, out);
    if (n == 2) return adaptive_avg_pool2d(x, out);
    throw UnsupportedError(
        "interpolate: mode 'area' takes 3-D and 4-D inputs (adaptive average "
        "pooling in 1 and 2 dims)");
  }
  const bool align = o.align_corners.value_or(false);
  const bool f64 = x.dtype() == DType::f64;
  std::vector<Taps> dims;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t a = in[std::size_t(i)], b = out[std::size_t(i)];
    const auto s = scales[std::size_t(i)];
    Taps t;
    if (mode == "nearest" || mode == "nearest-exact") {
      t = nearest_taps(a, b, s, mode == "nearest-exact");
    } else if (mode == "bicubic") {
      t = f64 ? cubic_taps<double>(a, b, align, s) : cubic_taps<float>(a, b, align, s);
    } else {
      t = f64 ? linear_taps<double>(a, b, align, s) : linear_taps<float>(a, b, align, s);
    }
    dims.push_back(std::move(t));
  }
  Tensor y = x;
  if (detail::use_fused_kernel_with_backward(x, OpId::interpolate)) {
    y = resample_kernel(x, dims, out);
  } else {
    for (std::int64_t i = 0; i < n; ++i)
      y = resample_dim(y, i + 2, dims[std::size_t(i)], out[std::size_t(i)]);
  }
  return detail::in_memory_format_of(y, {&x});  // a channels-last input's layout, as PyTorch
}

Tensor pixel_shuffle(const Tensor& x, std::int64_t r) {
  if (x.dim() < 3)
    throw ShapeError(fmt::format(
        "pixel_shuffle expects input to have at least 3 dimensions, but got input of shape {}",
        shape_str(x.sizes())));
  if (r <= 0)
    throw ValueError(
        fmt::format("pixel_shuffle expects its upscale_factor to be positive, but got {}", r));
  detail::check_dtype(OpId::pixel_shuffle, x);
  const std::int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  if (c % (r * r) != 0)
    throw ShapeError(fmt::format(
        "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
        "upscale_factor, but input.size(-3)={} is not divisible by {}",
        c, r * r));
  const std::int64_t b = x.dim() - 3;
  Shape split(x.sizes().begin(), x.sizes().begin() + b), perm, out = split;
  for (std::int64_t i = 0; i < b; ++i) perm.push_back(i);
  split.insert(split.end(), {c / (r * r), r, r, h, w});
  for (std::int64_t i : {0, 3, 1, 4, 2}) perm.push_back(b + i);
  out.insert(out.end(), {c / (r * r), h * r, w * r});
  return x.reshape(split).permute(perm).reshape(out);
}

Tensor pixel_unshuffle(const Tensor& x, std::int64_t r) {
  if (x.dim() < 3)
    throw ShapeError(fmt::format(
        "pixel_unshuffle expects input to have at least 3 dimensions, but got input of shape {}",
        shape_str(x.sizes())));
  if (r <= 0)
    throw ValueError(
        fmt::format("pixel_unshuffle expects its downscale_factor to be positive, but got {}", r));
  detail::check_dtype(OpId::pixel_unshuffle, x);
  const std::int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  if (h % r != 0 || w % r != 0)
    throw ShapeError(
        fmt::format("pixel_unshuffle expects height ({}) and width ({}) to be divisible by "
                    "downscale_factor ({})",
                    h, w, r));
  const std::int64_t b = x.dim() - 3;
  Shape split(x.sizes().begin(), x.sizes().begin() + b), perm, out = split;
  for (std::int64_t i = 0; i < b; ++i) perm.push_back(i);
  split.insert(split.end(), {c, h / r, r, w / r, r});
  for (std::int64_t i : {0, 2, 4, 1, 3}) perm.push_back(b + i);
  out.insert(out.end(), {c * r * r, h / r, w / r});
  return x.reshape(split).permute(perm).reshape(out);
}

}  // namespace ferry
