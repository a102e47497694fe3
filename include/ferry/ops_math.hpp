// ferry/ops_math.hpp — more of torch's everyday math with PyTorch's names, semantics, dtypes
// and errors, each a composite op (Note [Composite ops] in ferry/op.hpp): composed of other
// ops in runtime/ops_math.cpp, so it runs on every device and differentiates through its
// parts. Included by ferry/ops.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ferry/tensor.hpp"

namespace ferry {

// torch.logaddexp: log(exp(a) + exp(b)); logaddexp2: log2(2^a + 2^b). Written as
// max(a, b) + log1p(exp(-|a - b|)) (the base-2 form alike), so nothing overflows or loses the
// smaller term to the larger's rounding; equal infinities give themselves. Floats only.
Tensor logaddexp(const Tensor& a, const Tensor& b);
Tensor logaddexp2(const Tensor& a, const Tensor& b);
// torch.logit: log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps is given (the
// gradient is 0 where the clamp bites). Integer and bool inputs give f32.
Tensor logit(const Tensor& x, std::optional<double> eps = std::nullopt);
// torch.sinc: sin(pi x) / (pi x), and 1 at 0 (where its gradient is 0).
Tensor sinc(const Tensor& x);

// torch.fmax / fmin: the larger / smaller of a and b (broadcast, promoted), ignoring a NaN
// when the other is a number (maximum / minimum propagate it). A tie's gradient goes to a,
// as PyTorch's. Not bool.
Tensor fmax(const Tensor& a, const Tensor& b);
Tensor fmin(const Tensor& a, const Tensor& b);
// torch.heaviside: 0 where x < 0, values (broadcast) where x == 0, 1 where x > 0 (and 0 for NaN,
// as PyTorch's kernel). x and values must have the same dtype (DTypeError). No gradient.
Tensor heaviside(const Tensor& x, const Tensor& values);
// torch.float_power: pow computed in f64, the result f64 whatever the operands' dtypes.
Tensor float_power(const Tensor& a, const Tensor& b);
Tensor float_power(const Tensor& a, const Scalar& b);

// torch.kron: the Kronecker product; the operands' dims are aligned from the right (the
// shorter gets leading 1s) and the result's size in each is the product of theirs.
Tensor kron(const Tensor& a, const Tensor& b);
// torch.diff: the n-th forward difference along dim (x[i + 1] - x[i], applied n times; for bool,
// x[i + 1] != x[i]), after prepend and append (the same rank as x, and its sizes off dim) are
// put at either end. n larger than the length gives an empty dim.
Tensor diff(const Tensor& x, std::int64_t n = 1, std::int64_t dim = -1, const Tensor& prepend = {},
            const Tensor& append = {});

// torch.nansum: sum treating NaN as 0 (integer inputs: sum, widened to i64). torch.nanmean:
// the mean of the non-NaN elements (NaN where there are none); floats only.
Tensor nansum(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor nanmean(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);

// torch.bincount: how often each value of the 1-D non-negative integer tensor x occurs, as i64
// [max(max(x) + 1, minlength)]; with weights (x's length) their sums per value instead, in f32
// for f32 weights and f64 for the others, as PyTorch's. Reads max(x) back to the host.
Tensor bincount(const Tensor& x, const Tensor& weights = {}, std::int64_t minlength = 0);
// torch.histc: the counts of x's elements in `bins` equal bins over [min, max], in x's dtype;
// elements outside (and NaN) are left out, max falls in the last bin. min == max: the range
// of the data (read back to the host), widened by 1 each way if that is one value too.
Tensor histc(const Tensor& x, std::int64_t bins = 100, double min = 0, double max = 0);

// torch.dist: the p-norm of a - b (broadcast), a 0-d tensor.
Tensor dist(const Tensor& a, const Tensor& b, double p = 2);
// torch.pdist: the p-norm distance between every pair of rows i < j of x [N, M], in that
// order (row-major over the upper triangle) -> [N (N - 1) / 2].
Tensor pdist(const Tensor& x, double p = 2);
// torch.renorm: each slice of x along dim (x.select(dim, i)) whose p-norm exceeds maxnorm is
// scaled by maxnorm / (norm + 1e-7); the others are left as they are.
Tensor renorm(const Tensor& x, double p, std::int64_t dim, double maxnorm);

}  // namespace ferry
