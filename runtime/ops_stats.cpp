// runtime/ops_stats.cpp — the statistics and integration of ferry/ops_stats.hpp: aminmax, cov,
// corrcoef, quantile, nanquantile, logcumsumexp, trapezoid and cumulative_trapezoid, each
// written once, here, from other ops (Note [Composite ops] in ferry/op.hpp), so they run on
// every device and are differentiable through their parts.
#include "ferry/ops_stats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {
namespace {

using detail::as_floating;
using detail::check_defined;
using detail::check_dtype;
using detail::wrap_dim;

// A 1-D weight vector of cov: its rank and length (ShapeError), checked as PyTorch's.
void check_weights(const char* name, const Tensor& w, std::int64_t observations) {
  if (w.dim() > 1)
    throw ShapeError(fmt::format(
        "cov(): expected {} to have one or fewer dimensions but got {} with {} dimensions", name,
        name, w.dim()));
  if (w.numel() != observations)
    throw ShapeError(
        fmt::format("cov(): expected {} to have the same numel as there are observations in the "
                    "input but got {} != {}",
                    name, w.numel(), observations));
}

Tensor quantile_of(OpId op, const Tensor& x, const Tensor& q, std::optional<std::int64_t> dim,
                   bool keepdim, std::string_view interpolation) {
  const std::string_view name = op_name(op);
  check_defined(name, {&x, &q});
  check_dtype(op, x);
  detail::check_same_device(name, {{"input", &x}, {"q", &q}});
  if (q.dim() > 1)
    throw ShapeError(fmt::format("{}() q must be a scalar or 1D tensor, got shape {}", name,
                                 shape_str(q.sizes())));
  if (q.dtype() != x.dtype())
    throw DTypeError(
        fmt::format("{}() q tensor must be same dtype as the input tensor, got {} and {}", name,
                    dtype_name(q.dtype()), dtype_name(x.dtype())));
  constexpr std::array<std::string_view, 5> kModes{"linear", "lower", "higher", "midpoint",
                                                   "nearest"};
  if (std::find(kModes.begin(), kModes.end(), interpolation) == kModes.end())
    throw ValueError(fmt::format(
        "{}() interpolation must be one of linear, lower, higher, midpoint or nearest, but got {}",
        name, interpolation));
  if (x.numel() == 0) throw ShapeError(fmt::format("{}() input tensor must be non-empty", name));
  if (q.numel() > 0 && !all(logical_and(ge(q, Scalar(0)), le(q, Scalar(1)))).item<bool>())
    throw ValueError(fmt::format("{}() q values must be in the range [0, 1]", name));

  // The reduced dim last, sorted (NaN last, as PyTorch's sort puts it).
  const Tensor x1 = x.dim() == 0 ? x.reshape({1}) : x;
  const std::optional<std::int64_t> d =
      dim ? std::optional(wrap_dim(*dim, x1.dim(), name)) : std::nullopt;
  const Tensor rows = d ? movedim(x1, *d, -1) : x1.reshape({-1});
  const Tensor sorted = sort(rows, -1).values;
  const std::int64_t last = sorted.size(-1) - 1;
  // ranks [..., Q]: where in each sorted row each q falls, in f32 (f64 for f64) whatever x's
  // dtype: f16 holds integers exactly only to 2048.
  const DType rank_dtype = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const Tensor qs = q.reshape({-1}).to(rank_dtype);
  Tensor ranks;
  if (op == OpId::nanquantile) {
    const Tensor valid = sum(logical_not(isnan(sorted)), {-1}, /*keepdim=*/true).to(rank_dtype);
    ranks = clamp_min(qs * (valid - 1.0), Scalar(0.0));  // all NaN: rank 0, which is NaN
  } else {
    const Tensor has_nan = any(isnan(sorted), {-1}, /*keepdim=*/true);
    ranks = where(has_nan, Scalar(double(last)), qs * double(last));
  }
  if (interpolation == "lower") ranks = floor(ranks);
  if (interpolation == "higher") ranks = ceil(ranks);
  if (interpolation == "nearest") ranks = round(ranks);  // half to even, as PyTorch's
  const Tensor below = ranks.detach().to(DType::i64);
  Tensor out = gather(sorted, -1, below);
  if (interpolation == "linear" || interpolation == "midpoint") {
    const Tensor above = ceil(ranks.detach()).to(DType::i64);
    const Tensor weight = interpolation == "midpoint" ? full_like(ranks, Scalar(0.5))
                                                      : ranks - below.to(ranks.dtype());
    out = lerp(out, gather(sorted, -1, above), weight.to(x.dtype()));
  }
  // [..., Q] -> [Q, ...], q's dim dropped when q is 0-d, the reduced dims kept as 1s on request.
  out = movedim(out, -1, 0);
  const std::int64_t lead = q.dim();
  if (lead == 0) out = out.squeeze(0);
  if (keepdim) {
    if (d) {
      out = out.unsqueeze(lead + *d);
    } else {
      Shape shape = q.sizes();
      shape.insert(shape.end(), std::size_t(x.dim()), 1);
      out = out.reshape(shape);
    }
  }
  return out;
}

// The two trapezoid rules' spacing: x's differences along dim (x 1-D: one point per sample,
// broadcast over y's other dims), as PyTorch's.
Tensor spacing(const char* name, const Tensor& y, const Tensor& x, std::int64_t d) {
  detail::check_same_device(name, {{"y", &y}, {"x", &x}});
  Tensor points = x;
  if (x.dim() == 1) {
    if (x.size(0) != y.size(d))
      throw ShapeError(fmt::format(
          "{}: There must be one `x` value for each sample point, got {} for {} samples", name,
          x.size(0), y.size(d)));
    Shape view(std::size_t(y.dim()), 1);
    view[std::size_t(d)] = x.size(0);
    points = x.reshape(view);
  }
  const std::int64_t n = points.size(d);
  return n == 0 ? points : points.narrow(d, 1, n - 1) - points.narrow(d, 0, n - 1);
}

// y's dim and the sums of neighbouring samples along it, y[i] + y[i + 1].
std::int64_t sample_dim(const char* name, OpId op, const Tensor& y, std::int64_t dim) {
  check_defined(name, {&y});
  check_dtype(op, y);
  return wrap_dim(dim, y.dim(), name);
}

Tensor pair_sums(const Tensor& y, std::int64_t d) {
  const std::int64_t n = y.size(d);
  if (n == 0) return as_floating(y);
  return as_floating(y.narrow(d, 1, n - 1)) + as_floating(y.narrow(d, 0, n - 1));
}

}  // namespace

MinMax aminmax(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  check_defined("aminmax", {&x});
  check_dtype(OpId::aminmax, x);
  std::vector<std::int64_t> dims;
  if (dim) dims = {wrap_dim(*dim, std::max<std::int64_t>(x.dim(), 1), "aminmax")};
  const bool empty = dim ? x.dim() > 0 && x.size(dims[0]) == 0 : x.numel() == 0;
  if (empty)
    throw ShapeError(fmt::format(
        "aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
        "identity (input shape {})",
        shape_str(x.sizes())));
  if (x.dim() == 0) return {amin(x), amax(x)};
  return {amin(x, dims, keepdim), amax(x, dims, keepdim)};
}

Tensor cov(const Tensor& x, std::int64_t correction, const Tensor& fweights,
           const Tensor& aweights) {
  check_defined("cov", {&x});
  check_dtype(OpId::cov, x);
  if (x.dim() > 2)
    throw ShapeError(fmt::format(
        "cov(): expected input to have two or fewer dimensions but got an input with {} "
        "dimensions (shape {})",
        x.dim(), shape_str(x.sizes())));
  const Tensor in = as_floating(x.dim() < 2 ? x.reshape({1, -1}) : x);
  const std::int64_t observations = in.size(1);
  Tensor w;
  if (fweights.defined()) {
    detail::check_same_device("cov", {{"input", &x}, {"fweights", &fweights}});
    if (!is_integral(fweights.dtype()))
      throw DTypeError(fmt::format(
          "cov(): expected fweights to have integral dtype but got fweights with {} dtype",
          dtype_name(fweights.dtype())));
    check_weights("fweights", fweights, observations);
    if (fweights.numel() > 0 && detail::index_range(fweights).first < 0)
      throw ValueError("cov(): fweights cannot be negative");
    w = fweights;
  }
  if (aweights.defined()) {
    detail::check_same_device("cov", {{"input", &x}, {"aweights", &aweights}});
    if (!is_floating(aweights.dtype()))
      throw DTypeError(fmt::format(
          "cov(): expected aweights to have floating point dtype but got aweights with {} dtype",
          dtype_name(aweights.dtype())));
    check_weights("aweights", aweights, observations);
    if (aweights.numel() > 0 && amin(aweights).item<double>() < 0)
      throw ValueError("cov(): aweights cannot be negative");
    w = w.defined() ? w * aweights : aweights;
  }
  // PyTorch's formula (numpy's): the weighted mean, and the degrees of freedom
  // sum(w) - correction * sum(w * aweights) / sum(w), clamped at 0.
  Tensor centred, norm_factor;
  if (w.defined()) {
    const Tensor w_sum = sum(w);
    centred = in - (sum(in * w, {1}) / w_sum).unsqueeze(1);
    if (correction == 0)
      norm_factor = w_sum;
    else if (!aweights.defined())
      norm_factor = w_sum - double(correction);
    else
      norm_factor = w_sum - double(correction) * sum(w * aweights) / w_sum;
    norm_factor = clamp_min(norm_factor.to(centred.dtype()), Scalar(0.0));
  } else {
    centred = in - mean(in, {1}, /*keepdim=*/true);
    norm_factor = full({}, Scalar(double(std::max<std::int64_t>(observations - correction, 0))),
                       {.dtype = centred.dtype(), .device = x.device()});
  }
  const Tensor weighted = w.defined() ? centred * w : centred;
  const Tensor c = matmul(centred, weighted.transpose(0, 1)) / norm_factor;
  return c.size(0) == 1 ? c.reshape({}) : c;
}

Tensor corrcoef(const Tensor& x) {
  check_defined("corrcoef", {&x});
  check_dtype(OpId::corrcoef, x);
  const Tensor c = cov(x);
  if (c.dim() == 0) return c / c;
  const Tensor stddev = sqrt(diagonal(c));
  return clamp((c / stddev.unsqueeze(1)) / stddev.unsqueeze(0), Scalar(-1.0), Scalar(1.0));
}

Tensor quantile(const Tensor& x, const Tensor& q, std::optional<std::int64_t> dim, bool keepdim,
                std::string_view interpolation) {
  return quantile_of(OpId::quantile, x, q, dim, keepdim, interpolation);
}
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<std::int64_t> dim, bool keepdim,
                   std::string_view interpolation) {
  return quantile_of(OpId::nanquantile, x, q, dim, keepdim, interpolation);
}
Tensor quantile(const Tensor& x, double q, std::optional<std::int64_t> dim, bool keepdim,
                std::string_view interpolation) {
  check_defined("quantile", {&x});
  return quantile(x, full({}, Scalar(q), {.dtype = x.dtype(), .device = x.device()}), dim, keepdim,
                  interpolation);
}
Tensor nanquantile(const Tensor& x, double q, std::optional<std::int64_t> dim, bool keepdim,
                   std::string_view interpolation) {
  check_defined("nanquantile", {&x});
  return nanquantile(x, full({}, Scalar(q), {.dtype = x.dtype(), .device = x.device()}), dim,
                     keepdim, interpolation);
}

// Note [logcumsumexp as a scan]
// log(cumsum(exp(x - m))) + m with one shift m cannot serve every prefix: an early element far
// below the row's maximum underflows to log(0) = -inf ([-1000, 0] would give [-inf, 0]). So
// the running sums are a Hillis-Steele scan of logaddexp, which is associative and exact at
// any spread: after step k each element holds the log-sum-exp of the 2^k elements ending at
// it, and ceil(log2(n)) steps of one logaddexp each cover the dim (O(n log n) work, every step
// a whole-tensor op on any device, differentiable through logaddexp).
Tensor logcumsumexp(const Tensor& x, std::int64_t dim) {
  check_defined("logcumsumexp", {&x});
  check_dtype(OpId::logcumsumexp, x);
  const Tensor x1 = x.dim() == 0 ? x.reshape({1}) : x;
  const std::int64_t d = wrap_dim(dim, x1.dim(), "logcumsumexp");
  const std::int64_t n = x1.size(d);
  Tensor y = x1;
  for (std::int64_t shift = 1; shift < n; shift *= 2)
    y = cat({y.narrow(d, 0, shift),
             logaddexp(y.narrow(d, shift, n - shift), y.narrow(d, 0, n - shift))},
            d);
  // A fresh tensor even when there is nothing to add (n <= 1), as PyTorch's.
  return (n <= 1 ? y * 1.0 : y).reshape(x.sizes());
}

Tensor trapezoid(const Tensor& y, const Tensor& x, std::int64_t dim) {
  const std::int64_t d = sample_dim("trapezoid", OpId::trapezoid, y, dim);
  check_defined("trapezoid", {&x});
  check_dtype(OpId::trapezoid, x);
  if (y.size(d) == 0) return sum(as_floating(y), {d});
  return sum(spacing("trapezoid", y, x, d) * pair_sums(y, d), {d}) * 0.5;
}

Tensor trapezoid(const Tensor& y, double dx, std::int64_t dim) {
  const std::int64_t d = sample_dim("trapezoid", OpId::trapezoid, y, dim);
  if (y.size(d) == 0) return sum(as_floating(y), {d});
  return sum(pair_sums(y, d), {d}) * (0.5 * dx);
}

Tensor cumulative_trapezoid(const Tensor& y, const Tensor& x, std::int64_t dim) {
  const std::int64_t d = sample_dim("cumulative_trapezoid", OpId::cumulative_trapezoid, y, dim);
  check_defined("cumulative_trapezoid", {&x});
  check_dtype(OpId::cumulative_trapezoid, x);
  if (y.size(d) == 0) return as_floating(y);
  return cumsum(spacing("cumulative_trapezoid", y, x, d) * pair_sums(y, d) * 0.5, d);
}

Tensor cumulative_trapezoid(const Tensor& y, double dx, std::int64_t dim) {
  const std::int64_t d = sample_dim("cumulative_trapezoid", OpId::cumulative_trapezoid, y, dim);
  if (y.size(d) == 0) return as_floating(y);
  return cumsum(pair_sums(y, d) * (0.5 * dx), d);
}

}  // namespace ferry
