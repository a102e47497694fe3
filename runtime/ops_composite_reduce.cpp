// runtime/ops_composite_reduce.cpp — the composite reductions (Note
// [Composite ops] in ferry/op.hpp): argmin, all, any, count_nonzero, std,
// var_mean, std_mean and norm, each written once, here, from the reduction
// kernels (sum, max, min, argmax) and element-wise ops. They run on every
// device that runs their parts and are differentiable through them.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "autocast_internal.hpp"
#include "autograd/formulas.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {

// argmax of an order-reversing map of x: its first maximum is x's first
// minimum. Floats negate (a NaN stays NaN, which argmax takes as the
// maximum: PyTorch's argmin also returns a NaN's index); integers take ~x,
// which reverses their order without overflow (u8: 255 - x); bool, not x.
Tensor argmin(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  detail::check_dtype(OpId::argmin, x);
  NoGradGuard no_grad;
  Tensor reversed = is_floating(x.dtype()) ? neg(x) : bitwise_not(x);
  return argmax(reversed, dim, keepdim);
}

Tensor amax(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return max(x, dims, keepdim);
}
Tensor amin(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return min(x, dims, keepdim);
}

// all: no element is zero; any: some element is not (NaN counts as true). An
// empty slice gives true and false, as PyTorch.
Tensor all(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  NoGradGuard no_grad;
  return eq(sum(eq(x, 0), dims, keepdim), 0);
}
Tensor any(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  NoGradGuard no_grad;
  return ne(sum(ne(x, 0), dims, keepdim), 0);
}

Tensor count_nonzero(const Tensor& x, const std::vector<std::int64_t>& dims) {
  NoGradGuard no_grad;
  return sum(ne(x, 0), dims);
}

Tensor std(const Tensor& x, const std::vector<std::int64_t>& dims, double correction,
           bool keepdim) {
  detail::check_dtype(OpId::std, x);
  const Tensor v = var(x, dims, correction, keepdim);
  const Tensor s = autograd::untracked([&] { return sqrt(v); });
  autograd::record_std(v, s);  // a zero gradient where the slice is constant, as PyTorch's
  return s;
}

std::pair<Tensor, Tensor> var_mean(const Tensor& x, const std::vector<std::int64_t>& dims,
                                   double correction, bool keepdim) {
  detail::check_dtype(OpId::var_mean, x);
  return {var(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

std::pair<Tensor, Tensor> std_mean(const Tensor& x, const std::vector<std::int64_t>& dims,
                                   double correction, bool keepdim) {
  detail::check_dtype(OpId::std_mean, x);
  return {std(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

namespace {

// s^(1/p) for s >= 0, with a zero gradient where s is 0 (the root's own
// derivative is infinite there, and times d s = 0 it would be NaN): the root
// takes 1 there instead, and where() passes nothing back from the branch it
// does not take. PyTorch's norm backward is 0 at a zero norm too.
Tensor root(const Tensor& s, double p) {
  Tensor zero = eq(s, 0);
  Tensor safe = where(zero, Scalar(1), s);
  return where(zero, Scalar(0), p == 2 ? sqrt(safe) : pow(safe, 1.0 / p));
}

}  // namespace

// PyTorch's vector norm: sum(|x|^p)^(1/p); p = 2 as sqrt(sum(x^2)), p = 1 as
// sum(|x|), inf and -inf as max and min of |x|, 0 as the count of nonzeros;
// floats only, 16-bit ones computed in f32.
Tensor norm(const Tensor& x, double p, const std::vector<std::int64_t>& dims, bool keepdim) {
  if (ferry::detail::autocast_applies(OpId::norm)) {
    const ferry::detail::AutocastOp ac(OpId::norm, {&x});
    return norm(ac(x), p, dims, keepdim);
  }
  detail::check_dtype(OpId::norm, x);
  if (is_reduced_float(x.dtype())) return norm(x.to(DType::f32), p, dims, keepdim).to(x.dtype());
  if (std::isnan(p)) throw ValueError("norm: p is NaN");
  if (p == INFINITY) return max(abs(x), dims, keepdim);
  if (p == -INFINITY) return min(abs(x), dims, keepdim);
  if (p == 0) return sum(ne(x, 0), dims, keepdim).to(x.dtype());
  if (p == 1) return sum(abs(x), dims, keepdim);
  if (p == 2) return root(sum(x * x, dims, keepdim), 2);
  Tensor a = abs(x);
  if (p < 0) return pow(sum(pow(a, p), dims, keepdim), 1.0 / p);  // a zero element gives 0
  // |a|^p with a zero gradient at a = 0 for 0 < p < 1 as well (as PyTorch).
  Tensor zero = eq(a, 0);
  return root(sum(where(zero, Scalar(0), pow(where(zero, Scalar(1), a), p)), dims, keepdim), p);
}

Tensor norm(const Tensor& x, std::string_view p, const std::vector<std::int64_t>& dims,
            bool keepdim) {
  if (p == "fro") return norm(x, 2.0, dims, keepdim);
  throw ValueError(fmt::format(
      "norm: p \"{}\" is not a vector norm; give a number (1, 2, inf, ...) or \"fro\"", p));
}

Tensor cdist(const Tensor& x1, const Tensor& x2, double p, std::string_view compute_mode) {
  if (ferry::detail::autocast_applies(OpId::cdist)) {
    const ferry::detail::AutocastOp ac(OpId::cdist, {&x1, &x2});
    return cdist(ac(x1), ac(x2), p, compute_mode);
  }
  detail::check_dtype(OpId::cdist, x1);
  detail::check_dtype(OpId::cdist, x2);
  if (x1.dim() < 2 || x2.dim() < 2)
    throw ShapeError(fmt::format("cdist: the inputs must be at least 2-D, got {} and {}",
                                 shape_str(x1.sizes()), shape_str(x2.sizes())));
  if (x1.size(-1) != x2.size(-1))
    throw ShapeError(
        fmt::format("cdist: x1 and x2 must have the same number of columns, got {} "
                    "and {}",
                    shape_str(x1.sizes()), shape_str(x2.sizes())));
  if (!(p >= 0)) throw ValueError(fmt::format("cdist: p must be non-negative, got {}", p));
  const bool mm_if_needed = compute_mode == "use_mm_for_euclid_dist_if_necessary";
  if (!mm_if_needed && compute_mode != "use_mm_for_euclid_dist" &&
      compute_mode != "donot_use_mm_for_euclid_dist")
    throw ValueError(fmt::format(
        "cdist: compute_mode must be use_mm_for_euclid_dist_if_necessary, use_mm_for_euclid_dist "
        "or donot_use_mm_for_euclid_dist, got \"{}\"",
        compute_mode));
  const std::int64_t P = x1.size(-2), R = x2.size(-2);
  const bool use_mm =
      p == 2 && (compute_mode == "use_mm_for_euclid_dist" || (mm_if_needed && (P > 25 || R > 25)));
  if (!use_mm) return norm(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, {-1});
  // PyTorch's _euclidean_dist: one matmul of [-2 a, |a|^2, 1] by [b, 1, |b|^2]. Where the
  // clamped square is 0, the distance is 0 and so is its gradient (PyTorch's subgradient).
  const Tensor n1 = sum(x1 * x1, {-1}, true), n2 = sum(x2 * x2, {-1}, true);
  const Tensor a = cat({x1 * -2.0, n1, ones_like(n1)}, -1);
  const Tensor b = cat({x2, ones_like(n2), n2}, -1);
  const Tensor sq = clamp_min(matmul(a, b.transpose(-1, -2)), 0);
  const Tensor zero = eq(sq, 0);
  return where(zero, Scalar(0), sqrt(where(zero, Scalar(1), sq)));
}

}  // namespace ferry
