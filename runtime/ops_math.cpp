// runtime/ops_math.cpp — the composite ops of ferry/ops_math.hpp: logaddexp, logit, sinc,
// kron, diff, nansum, nanmean, bincount, histc, dist, pdist and renorm, each written once,
// here, from other ops (Note [Composite ops] in ferry/op.hpp), so they run on every device and
// are differentiable through their parts.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "autocast_internal.hpp"
#include "dispatch.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {
namespace {

using detail::as_floating;
using detail::check_defined;
using detail::check_dtype;
using detail::wrap_dim;

Tensor log_add_exp(OpId op, const Tensor& a, const Tensor& b) {
  check_defined(op_name(op), {&a, &b});
  check_dtype(op, a);
  check_dtype(op, b);
  // The larger term plus the smaller's share, exp(-|a - b|) <= 1: no overflow, and the
  // gradient splits as sigmoid(a - b) (maximum halves a tie, |.| has none at 0).
  const Tensor m = maximum(a, b);
  const Tensor gap = neg(abs(a - b));
  const Tensor sum = op == OpId::logaddexp ? m + log1p(exp(gap))
                                           : m + log1p(exp2(gap)) * (1.0 / std::numbers::ln2);
  // Both the same infinity: a - b is NaN, the answer that infinity.
  return where(logical_and(eq(a, b), isinf(a)), m, sum);
}

}  // namespace

Tensor logaddexp(const Tensor& a, const Tensor& b) { return log_add_exp(OpId::logaddexp, a, b); }
Tensor logaddexp2(const Tensor& a, const Tensor& b) { return log_add_exp(OpId::logaddexp2, a, b); }

Tensor logit(const Tensor& x, std::optional<double> eps) {
  check_defined("logit", {&x});
  check_dtype(OpId::logit, x);
  Tensor z = as_floating(x);
  // A negative eps clamps nothing, as PyTorch's (its "no eps" is -1).
  if (eps && *eps >= 0) z = clamp(z, Scalar(*eps), Scalar(1 - *eps));
  return log(z / (1.0 - z));
}

Tensor sinc(const Tensor& x) {
  check_defined("sinc", {&x});
  check_dtype(OpId::sinc, x);
  const Tensor z = as_floating(x);
  const Tensor at_zero = eq(z, 0);
  // The quotient is taken of 1 where x is 0, so neither it nor its gradient is 0 / 0.
  const Tensor px = where(at_zero, Scalar(1.0), z) * std::numbers::pi;
  return where(at_zero, Scalar(1.0), sin(px) / px);
}

Tensor kron(const Tensor& a, const Tensor& b) {
  check_defined("kron", {&a, &b});
  check_dtype(OpId::kron, a);
  check_dtype(OpId::kron, b);
  const std::int64_t n = std::max(a.dim(), b.dim());
  // a's dim i as [a_i, 1] and b's as [1, b_i]: their product, flattened pairwise, is kron.
  Shape as, bs, out;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t ai = i < n - a.dim() ? 1 : a.size(i - (n - a.dim()));
    const std::int64_t bi = i < n - b.dim() ? 1 : b.size(i - (n - b.dim()));
    as.insert(as.end(), {ai, 1});
    bs.insert(bs.end(), {1, bi});
    out.push_back(ai * bi);
  }
  return (a.reshape(as) * b.reshape(bs)).reshape(out);
}

Tensor diff(const Tensor& x, std::int64_t n, std::int64_t dim, const Tensor& prepend,
            const Tensor& append) {
  check_defined("diff", {&x});
  check_dtype(OpId::diff, x);
  if (x.dim() == 0) throw ShapeError("diff expects input to be at least one-dimensional");
  if (n < 0) throw ValueError(fmt::format("diff: order must be non-negative but got {}", n));
  const std::int64_t d = wrap_dim(dim, x.dim(), "diff");
  std::vector<Tensor> parts;
  for (const auto& [name, t] : {std::pair{"prepend", &prepend}, std::pair{"append", &append}}) {
    if (!t->defined()) continue;
    if (t->dim() != x.dim())
      throw ShapeError(
          fmt::format("diff expects {} to have the same number of dimensions as input {}, got {}",
                      name, shape_str(x.sizes()), shape_str(t->sizes())));
  }
  if (prepend.defined()) parts.push_back(prepend);
  parts.push_back(x);
  if (append.defined()) parts.push_back(append);
  Tensor t = parts.size() == 1 ? x : cat(parts, d);  // cat names sizes that do not fit
  for (std::int64_t k = 0; k < n && t.size(d) > 0; ++k) {
    const std::int64_t len = t.size(d) - 1;
    const Tensor hi = t.narrow(d, 1, len), lo = t.narrow(d, 0, len);
    t = t.dtype() == DType::boolean ? ne(hi, lo) : hi - lo;
  }
  return t;
}

Tensor nansum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  check_defined("nansum", {&x});
  check_dtype(OpId::nansum, x);
  if (!is_floating(x.dtype())) return sum(x, dims, keepdim);
  return sum(where(isnan(x), Scalar(0.0), x), dims, keepdim);
}

Tensor nanmean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  check_defined("nanmean", {&x});
  check_dtype(OpId::nanmean, x);
  // The count in f32 (exact to 2^24), or f64 for f64; 0 / 0 is NaN where all are NaN.
  const DType count_dtype = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const Tensor count = sum(logical_not(isnan(x)).to(count_dtype), dims, keepdim);
  return (nansum(x, dims, keepdim) / count).to(x.dtype());
}

Tensor bincount(const Tensor& x, const Tensor& weights, std::int64_t minlength) {
  check_defined("bincount", {&x});
  check_dtype(OpId::bincount, x);
  if (x.dim() != 1)
    throw ShapeError(
        fmt::format("bincount only supports 1-d non-negative integral inputs, got shape {}",
                    shape_str(x.sizes())));
  if (minlength < 0)
    throw ValueError(fmt::format("bincount: minlength should be >= 0, got {}", minlength));
  if (weights.defined() && (weights.dim() != 1 || weights.size(0) != x.size(0)))
    throw ShapeError(
        fmt::format("bincount: weights should be 1-d and have the same length as input {}, got {}",
                    shape_str(x.sizes()), shape_str(weights.sizes())));
  if (weights.defined())
    detail::check_same_device("bincount", {{"input", &x}, {"weights", &weights}});
  std::int64_t length = minlength;
  if (x.numel() > 0) {
    const auto [lo, hi] = detail::index_range(x);
    if (lo < 0)
      throw ValueError(fmt::format(
          "bincount only supports 1-d non-negative integral inputs, got the value {}", lo));
    length = std::max(hi + 1, minlength);
  }
  const Tensor idx = x.to(DType::i64);
  const DType out = !weights.defined()              ? DType::i64
                    : weights.dtype() == DType::f32 ? DType::f32
                                                    : DType::f64;
  const TensorOptions like{.dtype = out, .device = x.device()};
  const Tensor add = weights.defined() ? weights.to(out) : ones({x.numel()}, like);
  NoGradGuard counts;  // not differentiable, as PyTorch's
  return index_add(zeros({length}, like), 0, idx, add);
}

Tensor histc(const Tensor& x, std::int64_t bins, double min, double max) {
  check_defined("histc", {&x});
  check_dtype(OpId::histc, x);
  if (bins <= 0) throw ValueError(fmt::format("torch.histc: bins must be > 0, but got {}", bins));
  NoGradGuard counts;  // not differentiable, as PyTorch's
  double lo = min, hi = max;
  if (lo == hi && x.numel() > 0) {  // the data's range, in one read back
    const auto r = stack({ferry::min(x), ferry::max(x)}).to(DType::f64).to_vector<double>();
    lo = r[0], hi = r[1];
  }
  if (lo == hi) lo -= 1, hi += 1;
  if (!std::isfinite(lo) || !std::isfinite(hi))
    throw ValueError(fmt::format("torch.histc: range of [{}, {}] is not finite", lo, hi));
  if (lo > hi) throw ValueError("torch.histc: max must be larger than min");
  const TensorOptions like{.dtype = x.dtype(), .device = x.device()};
  const Tensor flat = x.reshape({-1});
  // The bin of e[k] <= x < e[k + 1] on the same edges as PyTorch's (linspace in x's dtype);
  // max closes the last bin. Elements outside (NaN too) go to an extra bin, dropped.
  const Tensor edges = linspace(lo, hi, bins + 1, like);
  const Tensor bin = clamp(bucketize(flat, edges, /*right=*/true) - 1, Scalar(0), Scalar(bins - 1));
  const Tensor inside = logical_and(ge(flat, Scalar(lo)), le(flat, Scalar(hi)));
  const Tensor target = where(inside, bin, Scalar(bins));
  return index_add(zeros({bins + 1}, like), 0, target, ones({flat.numel()}, like))
      .narrow(0, 0, bins);
}

Tensor dist(const Tensor& a, const Tensor& b, double p) {
  check_defined("dist", {&a, &b});
  if (detail::autocast_applies(OpId::dist)) {
    const detail::AutocastOp ac(OpId::dist, {&a, &b});
    return dist(ac(a), ac(b), p);
  }
  check_dtype(OpId::dist, a);
  check_dtype(OpId::dist, b);
  return norm(a - b, p);
}

Tensor pdist(const Tensor& x, double p) {
  check_defined("pdist", {&x});
  if (detail::autocast_applies(OpId::pdist)) {
    const detail::AutocastOp ac(OpId::pdist, {&x});
    return pdist(ac(x), p);
  }
  check_dtype(OpId::pdist, x);
  if (x.dim() != 2)
    throw ShapeError(fmt::format("pdist only supports 2D tensors, got: {}D (shape {})", x.dim(),
                                 shape_str(x.sizes())));
  if (!(p >= 0))
    throw ValueError(fmt::format("pdist only supports non-negative p values, got {}", p));
  // The pairs i < j, row-major, as index lists made here: one gather per side.
  const std::int64_t n = x.size(0);
  std::vector<std::int64_t> first, second;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = i + 1; j < n; ++j) first.push_back(i), second.push_back(j);
  const TensorOptions idx{.dtype = DType::i64, .device = x.device()};
  const Shape pairs{std::int64_t(first.size())};
  const Tensor gap = index_select(x, 0, tensor(first, pairs, idx)) -
                     index_select(x, 0, tensor(second, pairs, idx));
  return norm(gap, p, {1});
}

Tensor renorm(const Tensor& x, double p, std::int64_t dim, double maxnorm) {
  check_defined("renorm", {&x});
  if (detail::autocast_applies(OpId::renorm)) {
    const detail::AutocastOp ac(OpId::renorm, {&x});
    return renorm(ac(x), p, dim, maxnorm);
  }
  check_dtype(OpId::renorm, x);
  if (x.dim() < 2)
    throw ShapeError(fmt::format("renorm: input needs at least 2 dimensions, got {} (shape {})",
                                 x.dim(), shape_str(x.sizes())));
  if (!(p > 0)) throw ValueError(fmt::format("renorm: non-positive-norm not supported, got {}", p));
  if (!(maxnorm >= 0))
    throw ValueError(fmt::format("renorm: expected maxnorm to be >= 0 but got {}", maxnorm));
  const std::int64_t d = wrap_dim(dim, x.dim(), "renorm");
  std::vector<std::int64_t> others;
  for (std::int64_t i = 0; i < x.dim(); ++i)
    if (i != d) others.push_back(i);
  const Tensor norms = norm(x, p, others, /*keepdim=*/true);
  const Tensor factor = where(gt(norms, Scalar(maxnorm)), maxnorm / (norms + 1e-7), Scalar(1.0));
  return x * factor;
}

Tensor fmax(const Tensor& a, const Tensor& b) {
  check_defined("fmax", {&a, &b});
  check_dtype(OpId::fmax, a);
  check_dtype(OpId::fmax, b);
  // a where a >= b or b is NaN, else b: NaN only where both are, and a tie's gradient goes to
  // a alone (PyTorch's fmax formula; maximum splits it).
  return where(logical_or(ge(a, b), isnan(b)), a, b);
}

Tensor fmin(const Tensor& a, const Tensor& b) {
  check_defined("fmin", {&a, &b});
  check_dtype(OpId::fmin, a);
  check_dtype(OpId::fmin, b);
  return where(logical_or(le(a, b), isnan(b)), a, b);
}

Tensor heaviside(const Tensor& x, const Tensor& values) {
  check_defined("heaviside", {&x, &values});
  check_dtype(OpId::heaviside, x);
  check_dtype(OpId::heaviside, values);
  if (x.dtype() != values.dtype())
    throw DTypeError(fmt::format(
        "heaviside is not yet implemented for tensors with different dtypes, got {} and {}",
        dtype_name(x.dtype()), dtype_name(values.dtype())));
  // Not differentiable (PyTorch has no derivative for it): nothing is recorded.
  NoGradGuard no_grad;
  // NaN is neither 0 nor above it: 0, as PyTorch's kernel gives.
  return where(eq(x, Scalar(0)), values, gt(x, Scalar(0)).to(x.dtype()));
}

Tensor float_power(const Tensor& a, const Tensor& b) {
  check_defined("float_power", {&a, &b});
  check_dtype(OpId::float_power, a);
  check_dtype(OpId::float_power, b);
  return pow(a.to(DType::f64), b.to(DType::f64));
}

Tensor float_power(const Tensor& a, const Scalar& b) {
  check_defined("float_power", {&a});
  check_dtype(OpId::float_power, a);
  return pow(a.to(DType::f64), Scalar(b.to_double()));
}

}  // namespace ferry
