// ferry/ops_stats.hpp — torch's statistics and numerical integration with PyTorch's names,
// semantics, dtypes and errors: aminmax, cov, corrcoef, quantile, nanquantile, logcumsumexp,
// trapezoid and cumulative_trapezoid. Each is a composite op (Note [Composite ops] in
// ferry/op.hpp), composed of other ops in runtime/ops_stats.cpp, so it runs on every device and
// differentiates through its parts. Included by ferry/ops.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "ferry/tensor.hpp"

namespace ferry {

// torch.aminmax: the least and the greatest element, over dim or over everything (keepdim
// without dim keeps every dim as 1). A tie's gradient is shared, as amin's and amax's.
// ShapeError for an empty reduction (it has no identity).
struct MinMax {
  Tensor min, max;
};
MinMax aminmax(const Tensor& x, std::optional<std::int64_t> dim = std::nullopt,
               bool keepdim = false);

// torch.cov: the covariance matrix of the variables in x's rows (x [variables, observations],
// or one variable as [observations]), with `correction` subtracted from the degrees of freedom
// (1: Bessel's), the observations weighted by integer frequency weights and floating
// observation weights (either, both or neither; 1-D of the observations' count, non-negative:
// ValueError, read back to the host). Degrees of freedom <= 0 give inf / NaN, as PyTorch's
// (which warns). One variable: a 0-d result. Integer inputs compute in f32; bool is refused.
Tensor cov(const Tensor& x, std::int64_t correction = 1, const Tensor& fweights = {},
           const Tensor& aweights = {});
// torch.corrcoef: Pearson's correlation coefficients, cov(x) scaled by the standard deviations
// and clipped to [-1, 1]; a constant variable gives NaN.
Tensor corrcoef(const Tensor& x);

// torch.quantile: the q-th quantiles (q a 0-d or 1-D tensor of x's dtype, values in [0, 1],
// checked on the host: ValueError) of x over dim, or of all of x. A 1-D q puts its dim first in
// the result. interpolation between the sorted values around the rank q (n - 1): "linear",
// "lower", "higher", "midpoint" or "nearest" (ties to even). A slice holding NaN gives NaN;
// nanquantile leaves NaNs out (NaN only where the slice is all NaN). Differentiable in x and q
// (through the sort, the gather and the interpolation). Floats only; x must be non-empty.
Tensor quantile(const Tensor& x, const Tensor& q, std::optional<std::int64_t> dim = std::nullopt,
                bool keepdim = false, std::string_view interpolation = "linear");
Tensor quantile(const Tensor& x, double q, std::optional<std::int64_t> dim = std::nullopt,
                bool keepdim = false, std::string_view interpolation = "linear");
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<std::int64_t> dim = std::nullopt,
                   bool keepdim = false, std::string_view interpolation = "linear");
Tensor nanquantile(const Tensor& x, double q, std::optional<std::int64_t> dim = std::nullopt,
                   bool keepdim = false, std::string_view interpolation = "linear");

// torch.logcumsumexp: log(cumsum(exp(x))) along dim without overflow or underflow: a scan of
// logaddexp (Note [logcumsumexp as a scan] in runtime/ops_stats.cpp). Floats only.
Tensor logcumsumexp(const Tensor& x, std::int64_t dim);

// torch.trapezoid: the trapezoidal rule along dim, with sample spacing dx, or at the sample
// points x (1-D with one point per sample, or broadcasting with y). Integer inputs give f32.
// An empty dim gives 0. cumulative_trapezoid: the running integral, one element shorter.
Tensor trapezoid(const Tensor& y, const Tensor& x, std::int64_t dim = -1);
Tensor trapezoid(const Tensor& y, double dx = 1, std::int64_t dim = -1);
Tensor cumulative_trapezoid(const Tensor& y, const Tensor& x, std::int64_t dim = -1);
Tensor cumulative_trapezoid(const Tensor& y, double dx = 1, std::int64_t dim = -1);

}  // namespace ferry
