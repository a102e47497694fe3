// ferry/ops_special.hpp — the gamma family of torch's special functions, with PyTorch's names,
// values at the poles and dtypes: lgamma, digamma, polygamma and mvlgamma. Each is a composite
// op (Note [Composite ops] in ferry/op.hpp), composed in runtime/ops_special.cpp of element-wise
// ops (Note [The gamma functions as compositions]), so it runs on every device and
// differentiates through its parts (to any order: the gradient of lgamma is digamma's
// composition, differentiated). Integer and bool inputs give f32; f16 and bf16 inputs are
// computed in f32 and rounded back. Included by ferry/ops.hpp.
#pragma once

#include <cstdint>

#include "ferry/tensor.hpp"

namespace ferry {

// torch.lgamma: log|Γ(x)|. +inf at 0, the negative integers and ±inf; NaN for NaN.
Tensor lgamma(const Tensor& x);
// torch.digamma (torch.special.psi): Γ'(x) / Γ(x). At 0, -inf (and +inf at -0); NaN at the
// negative integers and -inf; +inf at +inf.
Tensor digamma(const Tensor& x);
// torch.polygamma: the n-th derivative of digamma (n = 0 is digamma). n >= 1: (-1)^(n+1) inf
// at 0 and the negative integers, 0 at +inf, NaN at -inf. n < 0 is a ValueError. The
// asymptotic series it ends in is accurate for n up to about 20.
Tensor polygamma(std::int64_t n, const Tensor& x);
// torch.mvlgamma (torch.special.multigammaln): the multivariate log-gamma of dimension p,
// p (p - 1) / 4 log(pi) + sum over j < p of lgamma(x - j / 2). p < 1 is a ValueError; not
// bool (DTypeError).
Tensor mvlgamma(const Tensor& x, std::int64_t p);

}  // namespace ferry
