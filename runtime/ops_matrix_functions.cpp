// runtime/ops_matrix_functions.cpp — functions of a square matrix (ferry/ops_linalg.hpp):
// matrix_exp and matrix_power, compositions of matmul and solve that run on every device.
//
// Note [Matrix exponential by scaling and squaring]
// exp(A) = exp(A / 2^s)^(2^s): each matrix is scaled by a power of two until its 1-norm is at
// most theta_13 = 5.37 (s = ceil(log2(|A|_1 / theta_13)), 0 for a smaller norm), its exponential
// taken as the [13/13] Pade approximant r(X) = (V - U)^-1 (V + U) (U the odd terms, V the even,
// from X^2, X^4 and X^6: six matmuls and a solve for the whole batch), then squared s times
// (Higham, "The scaling and squaring method for the matrix exponential revisited", 2005, the
// algorithm of SciPy's expm and MATLAB's; theta_13 bounds the approximant's backward error by
// 2^-53). Matrices of a batch with different s are squared together, each only its own number
// of times (a select after every squaring): one host read gives the largest s and the smallest.
// PyTorch picks, per matrix, the cheapest of several Taylor degrees instead (Bader, Blanes and
// Casas); the two agree to a few ulps at small norms and to some hundred ulps where a 1-norm
// near theta_13 makes the approximant's terms cancel (diag(40): 3.5e-14 relative, PyTorch's
// 3.0e-15; tests/test_linalg_matrix_functions.cpp). Every step runs untracked: the gradient is
// PyTorch's, gA = exp([[A^T, G], [0, A^T]])'s upper-right block (Mathias' block formula for the
// Frechet derivative), itself a matrix_exp, so a second derivative runs the same way.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "dispatch.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "linalg_internal.hpp"
#include "ops_internal.hpp"

namespace ferry {
namespace {

using detail::check_defined;
using detail::check_dtype;
using linalg_detail::batch_of;
using linalg_detail::check_square;
using linalg_detail::computing;

// The [13/13] Pade approximant's coefficients, b_0 .. b_13 (Higham 2005, table 10.4).
constexpr double kPade13[] = {64764752532480000.0,
                              32382376266240000.0,
                              7771770303897600.0,
                              1187353796428800.0,
                              129060195264000.0,
                              10559470521600.0,
                              670442572800.0,
                              33522128640.0,
                              1323241920.0,
                              40840800.0,
                              960960.0,
                              16380.0,
                              182.0,
                              1.0};
constexpr double kTheta13 = 5.371920351148152;

// exp(a) for a [..., n, n] (computing dtype, untracked, not empty): the Note's method.
Tensor expm(const Tensor& a) {
  const std::int64_t n = a.size(-1);
  if (n == 1) return exp(a);
  const Tensor norm = amax(sum(abs(a), {-2}), {-1});  // the 1-norm, [...]
  // s per matrix; a norm that is not finite leaves s at 0 (the result is NaN then anyway).
  Tensor s = clamp(ceil(log2(norm / kTheta13)), 0.0, std::nullopt);
  s = where(isfinite(s), s, Scalar(0.0));
  const std::vector<double> range = stack({amin(s), amax(s)}).to(DType::f64).to_vector<double>();
  const auto least = std::int64_t(range[0]), most = std::int64_t(range[1]);
  const Tensor x = most > 0 ? a * exp2(-s).unsqueeze(-1).unsqueeze(-1) : a;
  const Tensor identity =
      eye(n, std::nullopt, {.dtype = a.dtype(), .device = a.device()}).expand(a.sizes());
  const double* b = kPade13;
  const Tensor x2 = matmul(x, x), x4 = matmul(x2, x2), x6 = matmul(x4, x2);
  const Tensor u = matmul(x, matmul(x6, x6 * b[13] + x4 * b[11] + x2 * b[9]) + x6 * b[7] +
                                 x4 * b[5] + x2 * b[3] + identity * b[1]);
  const Tensor v = matmul(x6, x6 * b[12] + x4 * b[10] + x2 * b[8]) + x6 * b[6] + x4 * b[4] +
                   x2 * b[2] + identity * b[0];
  Tensor r = linalg::solve(v - u, v + u);
  for (std::int64_t i = 0; i < most; ++i) {
    const Tensor squared = matmul(r, r);
    r = i < least ? squared : where(gt(s, double(i)).unsqueeze(-1).unsqueeze(-1), squared, r);
  }
  return r;
}

}  // namespace

namespace linalg {

Tensor matrix_exp(const Tensor& a) {
  check_defined("matrix_exp", {&a});
  check_dtype(OpId::matrix_exp, a);
  check_square("matrix_exp", "A", a);
  const Tensor af = computing(a);
  if (af.numel() == 0) return af.clone().to(a.dtype());
  Tensor e;
  {
    NoGradGuard untracked;
    e = expm(af.detach());
  }
  autograd::record_matrix_exp(af, e);
  return e.to(a.dtype());
}

Tensor matrix_power(const Tensor& a, std::int64_t n) {
  check_defined("matrix_power", {&a});
  check_dtype(OpId::matrix_power, a);
  check_square("matrix_power", "A", a);
  const TensorOptions like{.dtype = a.dtype(), .device = a.device()};
  if (n == 0) {
    // The identity, of zero gradient (PyTorch's is a copy into A's clone).
    const Tensor identity = eye(a.size(-1), std::nullopt, like).expand(a.sizes());
    return where(ones_like(identity).to(DType::boolean), identity, a);
  }
  if (n < 0 && !is_floating(a.dtype()))
    throw DTypeError(fmt::format(
        "linalg.matrix_power: a negative power inverts A, which must be floating, not {}",
        dtype_name(a.dtype())));
  if (n == 1 || n == -1) return n == 1 ? a.clone() : inv(a);
  // Binary powers, PyTorch's order: z runs through A^(2^i), the result takes those of n's bits.
  Tensor z = n < 0 ? inv(a) : a, result;
  for (std::uint64_t k = n < 0 ? std::uint64_t(-(n + 1)) + 1 : std::uint64_t(n); k > 0; k >>= 1) {
    if (k & 1) result = result.defined() ? matmul(result, z) : z;
    if (k > 1) z = matmul(z, z);
  }
  return result;
}

}  // namespace linalg
}  // namespace ferry
