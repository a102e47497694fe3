// runtime/ops_reduce.cpp — front-ends of sum, prod, mean, max, min, var and argmax:
// which dims reduce, the result's shape and dtype, the errors. The kernels
// ("sum", "prod", "max", "min", "argmax") see the input permuted so that the reduced
// dims come last and write a contiguous output over the kept dims
// (docs/kernel-contract.md, Note [CPU reductions] in cpu/cpu_kernels_reduce.cpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>

#include "autocast_internal.hpp"
#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {

using detail::check_dtype;
using detail::impl_of;
using detail::new_tensor;
using detail::run_kernel;
using detail::wrap_dim;

namespace detail {

// `dims` empty means every dim. A 0-d input accepts dims {0} and {-1} (as
// PyTorch does) and reduces nothing.
ReducePlan plan_reduce(std::string_view op, const Tensor& x,
                       const std::vector<std::int64_t>& dims) {
  const std::int64_t nd = x.dim();
  std::vector<bool> reduced(std::size_t(nd), dims.empty());
  std::vector<bool> seen(std::size_t(std::max<std::int64_t>(nd, 1)), false);
  for (std::int64_t d : dims) {
    auto w = std::size_t(wrap_dim(d, nd, op));
    if (seen[w])
      throw ShapeError(
          fmt::format("{}: dim {} appears more than once in dims [{}] (input shape {})", op, w,
                      fmt::join(dims, ", "), shape_str(x.sizes())));
    seen[w] = true;
    if (nd > 0) reduced[w] = true;
  }
  ReducePlan plan;
  Shape order;
  for (std::int64_t d = 0; d < nd; ++d)
    if (!reduced[std::size_t(d)]) {
      order.push_back(d);
      plan.out_sizes.push_back(x.size(d));
    }
  for (std::int64_t d = 0; d < nd; ++d)
    if (reduced[std::size_t(d)]) {
      order.push_back(d);
      plan.count *= x.size(d);
      ++plan.reduce_ndim;
    }
  plan.permuted = x.permute(order);
  plan.keepdim_sizes = x.sizes();
  for (std::int64_t d = 0; d < nd; ++d)
    if (reduced[std::size_t(d)]) plan.keepdim_sizes[std::size_t(d)] = 1;
  return plan;
}

}  // namespace detail

using detail::plan_reduce;
using detail::ReducePlan;

namespace {

// Runs a reduction kernel whose output dtype is `out_dtype`.
Tensor run_reduce(OpId op, const ReducePlan& plan, DType out_dtype, bool keepdim) {
  Tensor out = new_tensor(plan.out_sizes, out_dtype, impl_of(plan.permuted));
  run_kernel(op, {plan.permuted}, {out}, Attrs{{"reduce_ndim", plan.reduce_ndim}});
  return keepdim ? out.view(plan.keepdim_sizes) : out;
}

// max, min and argmax have no value for an empty slice (no identity).
void check_nonempty(std::string_view op, const Tensor& x, const ReducePlan& plan,
                    const std::vector<std::int64_t>& dims) {
  if (plan.count == 0)
    throw ShapeError(fmt::format(
        "{}: cannot reduce over a dim of size 0 (input shape {}, dims {}); {} of an empty set is "
        "undefined",
        op, shape_str(x.sizes()),
        dims.empty() ? std::string("all") : fmt::format("[{}]", fmt::join(dims, ", ")), op));
}

Tensor extremum(OpId id, const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  const std::string_view op = op_name(id);
  ReducePlan plan = plan_reduce(op, x, dims);
  check_nonempty(op, x, plan, dims);
  return run_reduce(id, plan, x.dtype(), keepdim);
}

// 16-bit floats are widened for mean and var (compute_dtype): their sums
// overflow easily and rounding the sum before dividing would round twice.

}  // namespace

// Each public reduction computes under NoGradGuard (its permutes and inner
// ops are not part of the graph) and records one node for the whole op.

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  if (ferry::detail::autocast_applies(OpId::sum)) {
    const ferry::detail::AutocastOp ac(OpId::sum, {&x});
    return sum(ac(x), dims, keepdim);
  }
  Tensor out = autograd::untracked([&] {
    DType dt = is_floating(x.dtype()) ? x.dtype() : DType::i64;
    return run_reduce(OpId::sum, plan_reduce("sum", x, dims), dt, keepdim);
  });
  autograd::record_sum(x, dims, keepdim, out);
  return out;
}

Tensor prod(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  if (ferry::detail::autocast_applies(OpId::prod)) {
    const ferry::detail::AutocastOp ac(OpId::prod, {&x});
    return prod(ac(x), dims, keepdim);
  }
  Tensor out = autograd::untracked([&] {
    DType dt = is_floating(x.dtype()) ? x.dtype() : DType::i64;
    return run_reduce(OpId::prod, plan_reduce("prod", x, dims), dt, keepdim);
  });
  autograd::record_prod(x, dims, keepdim, out);
  return out;
}

namespace {

Tensor mean_forward(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  check_dtype(OpId::mean, x);
  if (is_reduced_float(x.dtype()))
    return mean_forward(x.to(DType::f32), dims, keepdim).to(x.dtype());
  ReducePlan plan = plan_reduce("mean", x, dims);
  Tensor s = run_reduce(OpId::sum, plan, x.dtype(), keepdim);
  // An empty slice gives 0 / 0 = NaN, like PyTorch.
  return div(s, Scalar(double(plan.count)));
}

// Two passes (mean first, then the squared deviations) so that a large mean
// does not cancel the variance away, as the one-pass E[x^2] - E[x]^2 would.
Tensor var_forward(const Tensor& x, const std::vector<std::int64_t>& dims, double correction,
                   bool keepdim) {
  check_dtype(OpId::var, x);
  if (is_reduced_float(x.dtype()))
    return var_forward(x.to(DType::f32), dims, correction, keepdim).to(x.dtype());
  ReducePlan plan = plan_reduce("var", x, dims);
  Tensor m = mean_forward(x, dims, /*keepdim=*/true);
  Tensor d = sub(x, m);
  Tensor ss = run_reduce(OpId::sum, plan_reduce("var", mul(d, d), dims), x.dtype(), keepdim);
  // PyTorch divides by max(0, N - correction): too few elements give inf or NaN.
  double denom = std::max(0.0, double(plan.count) - correction);
  return div(ss, Scalar(denom));
}

}  // namespace

Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  Tensor out = autograd::untracked([&] { return mean_forward(x, dims, keepdim); });
  autograd::record_mean(x, dims, keepdim, out);
  return out;
}

Tensor max(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  Tensor out = autograd::untracked([&] { return extremum(OpId::max, x, dims, keepdim); });
  autograd::record_extremum("max", x, dims, keepdim, out);
  return out;
}

Tensor min(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  Tensor out = autograd::untracked([&] { return extremum(OpId::min, x, dims, keepdim); });
  autograd::record_extremum("min", x, dims, keepdim, out);
  return out;
}

Tensor var(const Tensor& x, const std::vector<std::int64_t>& dims, double correction,
           bool keepdim) {
  Tensor out = autograd::untracked([&] { return var_forward(x, dims, correction, keepdim); });
  autograd::record_var(x, dims, correction, keepdim, out);
  return out;
}

Tensor argmax(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  NoGradGuard no_grad;  // an index is not differentiable; nothing here is recorded
  if (!dim) {
    // Over the flattened tensor; keepdim keeps every dim as size 1.
    Tensor flat = x.reshape({-1});
    ReducePlan plan = plan_reduce("argmax", flat, {});
    check_nonempty("argmax", x, plan, {});
    Tensor out = run_reduce(OpId::argmax, plan, DType::i64, false);
    return keepdim ? out.view(Shape(std::size_t(x.dim()), 1)) : out;
  }
  ReducePlan plan = plan_reduce("argmax", x, {*dim});
  check_nonempty("argmax", x, plan, {*dim});
  return run_reduce(OpId::argmax, plan, DType::i64, keepdim);
}

}  // namespace ferry
