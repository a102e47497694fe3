// runtime/factories.cpp — the composite factories and draws: eye, linspace,
// logspace, randperm, bernoulli, multinomial, the *_like draws and the in-place draws
// (Note [Composite ops] in ferry/op.hpp). They are made of arange, fill, the
// random kernels and element-wise ops, so they run on every device and give
// the same numbers on each.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ferry/random.hpp"
#include "ops_internal.hpp"

namespace ferry {
namespace {

void check_count(const char* op, const char* what, std::int64_t n) {
  if (n < 0) throw ShapeError(fmt::format("{}: {} must be >= 0, got {}", op, what, n));
}

}  // namespace

Tensor eye(std::int64_t n, std::optional<std::int64_t> m, const TensorOptions& o) {
  const std::int64_t cols = m.value_or(n);
  check_count("eye", "n", n);
  check_count("eye", "m", cols);
  const TensorOptions idx = {.dtype = DType::i64, .device = o.device};
  Tensor on = eq(arange(double(n), idx).unsqueeze(1), arange(double(cols), idx).unsqueeze(0));
  return on.to(o.dtype_or(DType::f32));
}

// PyTorch's linspace kernel: step = (end - start) / (steps - 1) in the output
// dtype's precision, start + i step for the first half, end - (steps - 1 - i)
// step for the second; integer dtypes truncate the float values.
Tensor linspace(double start, double end, std::int64_t steps, const TensorOptions& o) {
  check_count("linspace", "steps", steps);
  const DType dt = o.dtype_or(DType::f32);
  const DType compute = dt == DType::f64 ? DType::f64 : DType::f32;
  const TensorOptions co = {.dtype = compute, .device = o.device};
  if (steps <= 1) return full({steps}, start, co).to(dt);
  const double step = (end - start) / double(steps - 1);
  Tensor i = arange(double(steps), co);
  Tensor from_start = i * step + start;
  Tensor from_end = (double(steps - 1) - i) * -step + end;
  return where(lt(i, double(steps / 2)), from_start, from_end).to(dt);
}

Tensor logspace(double start, double end, std::int64_t steps, double base, const TensorOptions& o) {
  const DType dt = o.dtype_or(DType::f32);
  const DType compute = dt == DType::f64 ? DType::f64 : DType::f32;
  Tensor e = linspace(start, end, steps, {.dtype = compute, .device = o.device});
  return pow(Scalar(base), e).to(dt);
}

Tensor rand_like(const Tensor& t) {
  return rand(t.sizes(), {.dtype = t.dtype(), .device = t.device()});
}
Tensor randn_like(const Tensor& t) {
  return randn(t.sizes(), {.dtype = t.dtype(), .device = t.device()});
}
Tensor randint_like(const Tensor& t, std::int64_t low, std::int64_t high) {
  return randint(low, high, t.sizes(), {.dtype = t.dtype(), .device = t.device()});
}

Tensor randperm(std::int64_t n, const TensorOptions& o) {
  check_count("randperm", "n", n);
  const DType dt = o.dtype_or(DType::i64);
  if (!is_floating(dt) && dt != DType::boolean && dt != DType::i64 && n > 0) {
    const std::int64_t limit = dt == DType::u8    ? 256
                               : dt == DType::i8  ? 128
                               : dt == DType::i16 ? 32768
                                                  : (std::int64_t(1) << 31);
    if (n > limit)
      throw DTypeError(fmt::format("randperm: {} values do not fit {}", n, dtype_name(dt)));
  }
  if (dt == DType::boolean) throw DTypeError("randperm: bool cannot hold a permutation");
  std::vector<std::int64_t> keys = randint(0, std::int64_t(1) << 62, {n}).to_vector<std::int64_t>();
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return keys[std::size_t(a)] < keys[std::size_t(b)];
  });
  return tensor(order).to(o.device, dt);
}

Tensor bernoulli(const Tensor& p) {
  if (!is_floating(p.dtype()))
    throw DTypeError(fmt::format("bernoulli: p must be floating, got {}", dtype_name(p.dtype())));
  NoGradGuard no_grad;
  if (p.numel() > 0 && (min(p).item<double>() < 0 || max(p).item<double>() > 1))
    throw ValueError("bernoulli: every probability must be in [0, 1]");
  return lt(rand_like(p), p).to(p.dtype());
}

Tensor bernoulli(const Tensor& x, double p) {
  if (!(p >= 0 && p <= 1))
    throw ValueError(fmt::format("bernoulli: p must be in [0, 1], got {}", p));
  NoGradGuard no_grad;
  const DType dt = is_floating(x.dtype()) ? x.dtype() : DType::f32;
  return lt(rand(x.sizes(), {.dtype = dt, .device = x.device()}), p).to(x.dtype());
}

Tensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement) {
  detail::check_dtype(OpId::multinomial, probs);
  if (probs.dim() < 1 || probs.dim() > 2)
    throw ShapeError(fmt::format("multinomial: probs must be 1-D or 2-D, got shape {}",
                                 shape_str(probs.sizes())));
  const std::int64_t n = probs.size(-1);
  if (num_samples <= 0 || (!replacement && num_samples > n))
    throw ValueError(fmt::format("multinomial: cannot draw {} samples from {} categories{}",
                                 num_samples, n, replacement ? "" : " without replacement"));
  NoGradGuard no_grad;
  Tensor p = probs.dim() == 1 ? probs.reshape({1, n}) : probs;
  const std::int64_t rows = p.size(0);
  if (p.numel() == 0 || min(p).item<double>() < 0 || !all(isfinite(p)).item<bool>())
    throw ValueError("multinomial: the weights must be finite and non-negative");
  Tensor positive = count_nonzero(p, {1});
  if (min(positive).item<std::int64_t>() < (replacement ? 1 : num_samples))
    throw ValueError(fmt::format("multinomial: a row has fewer than {} nonzero weights",
                                 replacement ? 1 : num_samples));
  const TensorOptions f = {.dtype = p.dtype(), .device = p.device()};
  Tensor samples;
  if (replacement) {
    Tensor cdf = cumsum(p, 1);
    Tensor u = rand({rows, num_samples}, f) * cdf.narrow(1, n - 1, 1);
    samples = clamp(searchsorted(cdf, u, /*right=*/true), Scalar(0), Scalar(n - 1));
  } else {
    // Zero weights give -inf keys, which the check above keeps out of the top.
    Tensor keys = log(rand({rows, n}, f)) / p;
    samples = topk(keys, num_samples, 1).indices;
  }
  return probs.dim() == 1 ? samples.reshape({num_samples}) : samples;
}

namespace {

void check_floating(const char* op, const Tensor& x) {
  if (!is_floating(x.dtype()))
    throw DTypeError(
        fmt::format("{}: draws need a floating tensor, got {}", op, dtype_name(x.dtype())));
}

}  // namespace

Tensor& uniform_(Tensor& x, double low, double high) {
  check_floating("uniform_", x);
  return x.copy_(uniform(x.sizes(), low, high, {.dtype = x.dtype(), .device = x.device()}));
}

Tensor& normal_(Tensor& x, double mean, double stddev) {
  check_floating("normal_", x);
  return x.copy_(normal(x.sizes(), mean, stddev, {.dtype = x.dtype(), .device = x.device()}));
}

// -log(1 - u) / lambd for u uniform in [0, 1): the inverse of the exponential CDF.
Tensor& exponential_(Tensor& x, double lambd) {
  check_floating("exponential_", x);
  if (!(lambd > 0)) throw ValueError(fmt::format("exponential_: lambd must be > 0, got {}", lambd));
  NoGradGuard no_grad;
  const DType dt = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor u = rand(x.sizes(), {.dtype = dt, .device = x.device()});
  return x.copy_(log1p(neg(u)) * (-1.0 / lambd));
}

}  // namespace ferry
