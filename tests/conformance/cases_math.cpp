// tests/conformance/cases_math.cpp — the composite math of ferry/ops_math.hpp (logaddexp,
// logit, sinc, kron, diff, nansum, nanmean, dist, pdist, renorm) and of ferry/ops_special.hpp
// (lgamma, digamma, polygamma, mvlgamma) and ferry/ops_linalg.hpp (cholesky, solve, inv, det, the
// LU family, ...)
// in every float dtype, each way,
// and bincount and histc in the dtypes their rows take, against the CPU.
#include <cmath>
#include <limits>

#include "catalog.hpp"

namespace ferry::conformance {
namespace {

// x with NaN where `pattern` (x's numel, repeated) is 1.
Tensor with_nans(const Tensor& x, std::vector<std::int64_t> pattern) {
  const Tensor mask = gt(ints(std::move(pattern), x), 0).reshape(x.sizes());
  return where(mask, Scalar(std::numeric_limits<double>::quiet_NaN()), x);
}

// x + 2.5 I for square matrices x with entries in [-1, 1]: diagonally dominant, so invertible.
Tensor diag_up(const Tensor& x) {
  return x + eye(x.size(-1), std::nullopt, {.dtype = x.dtype(), .device = x.device()}) * 2.5;
}
// X X^T + 2I: symmetric positive-definite.
Tensor spd(const Tensor& x) {
  return matmul(x, x.transpose(-2, -1)) +
         eye(x.size(-1), std::nullopt, {.dtype = x.dtype(), .device = x.device()}) * 2;
}
// X + X^T + diag(0, 20, 40, ...): symmetric, its Gershgorin discs apart, so its eigenvalues are
// distinct and their eigenvectors well-defined.
Tensor spread(const Tensor& x) {
  const std::int64_t n = x.size(-1);
  return x + x.transpose(-2, -1) +
         diag(arange(double(n), {.dtype = x.dtype(), .device = x.device()}) * 20.0);
}

// X + diag(0, 20, 40, ...) for [..., m, n] matrices X (the diagonal of the first min(m, n)
// rows and columns): its singular values apart, so that its singular vectors are well-defined.
Tensor spread_rect(const Tensor& x) {
  const std::int64_t m = x.size(-2), n = x.size(-1);
  const TensorOptions like{.dtype = x.dtype(), .device = x.device()};
  return x + eye(m, n, like) * (arange(double(n), like) * 20.0);
}
// X + 2.5 I for [..., m, n] matrices X: well-conditioned.
Tensor rect_up(const Tensor& x) {
  return x + eye(x.size(-2), x.size(-1), {.dtype = x.dtype(), .device = x.device()}) * 2.5;
}

std::vector<FloatOpCase> math_ops() {
  return {
      {"logaddexp",
       "[3, 4] and [4], 4x spread",
       {{3, 4}, {4}},
       [](const Inputs& in) { return logaddexp(in[0] * 4, in[1]); }},
      {"logaddexp2",
       "[5, 2] and [5, 2]",
       {{5, 2}, {5, 2}},
       [](const Inputs& in) { return logaddexp2(in[0], in[1] * 3); }},
      {"logit",
       "[3, 5] of sigmoid(x)",
       {{3, 5}},
       [](const Inputs& in) { return logit(sigmoid(in[0] * 2)); }},
      {"logit",
       "[12] eps 0.3",
       {{12}},
       [](const Inputs& in) { return logit(sigmoid(in[0] * 2), 0.3); }},
      {"sinc", "[4, 6] of 3x", {{4, 6}}, [](const Inputs& in) { return sinc(in[0] * 3); }},
      {"kron",
       "[2, 3] and [3, 1, 2]",
       {{2, 3}, {3, 1, 2}},
       [](const Inputs& in) { return kron(in[0], in[1]); }},
      {"diff",
       "[4, 6] n=2 dim=1, prepend [4, 1], append [4, 2]",
       {{4, 6}, {4, 1}, {4, 2}},
       [](const Inputs& in) { return diff(in[0], 2, 1, in[1], in[2]); }},
      {"nansum",
       "[3, 4] dim 1 with NaN",
       {{3, 4}},
       [](const Inputs& in) {
         return nansum(with_nans(in[0], {0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1}), {1});
       }},
      {"nanmean",
       "[3, 4] dim 0 keepdim with NaN",
       {{3, 4}},
       [](const Inputs& in) {
         return nanmean(with_nans(in[0], {0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0}), {0}, true);
       }},
      {"dist",
       "[3, 4] and [4], p 3",
       {{3, 4}, {4}},
       [](const Inputs& in) { return dist(in[0], in[1], 3.0); }},
      {"pdist", "[5, 3] p 2", {{5, 3}}, [](const Inputs& in) { return pdist(in[0]); }},
      {"pdist", "[4, 6] p 1", {{4, 6}}, [](const Inputs& in) { return pdist(in[0], 1.0); }},
      // The gamma functions (ferry/ops_special.hpp) on (0.5, 6.5), through their recurrence and
      // series, and between the poles -2 and -1, through their reflection.
      {"lgamma",
       "[3, 5] over (0.5, 6.5)",
       {{3, 5}},
       [](const Inputs& in) { return lgamma(in[0] * 3 + 3.5); }},
      {"lgamma",
       "[7] over (-1.9, -1.1)",
       {{7}},
       [](const Inputs& in) { return lgamma(in[0] * 0.4 - 1.5); }},
      {"digamma",
       "[3, 5] over (0.5, 6.5)",
       {{3, 5}},
       [](const Inputs& in) { return digamma(in[0] * 3 + 3.5); }},
      {"digamma",
       "[7] over (-1.9, -1.1)",
       {{7}},
       [](const Inputs& in) { return digamma(in[0] * 0.4 - 1.5); }},
      {"polygamma",
       "[4, 3] n=1 over (0.5, 4.5)",
       {{4, 3}},
       [](const Inputs& in) { return polygamma(1, in[0] * 2 + 2.5); }},
      {"polygamma",
       "[6] n=3 over (-1.9, -1.1)",
       {{6}},
       [](const Inputs& in) { return polygamma(3, in[0] * 0.4 - 1.5); }},
      {"mvlgamma",
       "[2, 4] p=3 over (1.5, 3.5)",
       {{2, 4}},
       [](const Inputs& in) { return mvlgamma(in[0] + 2.5, 3); }},
      // The factorizations and solvers (ferry/ops_linalg.hpp) on matrices made well-conditioned
      // (a diagonal added, or X X^T + 2I for the positive-definite ones), one of them with its rows
      // reversed so that every step pivots.
      {"cholesky",
       "[3, 4, 4] of X X^T + 2I",
       {{3, 4, 4}},
       [](const Inputs& in) { return linalg::cholesky(spd(in[0])); }},
      {"cholesky",
       "[5, 5] upper",
       {{5, 5}},
       [](const Inputs& in) { return linalg::cholesky(spd(in[0]), true); }},
      {"cholesky",
       "[40, 40] of X X^T + 2I",
       {{40, 40}},
       [](const Inputs& in) { return linalg::cholesky(spd(in[0])); }},
      {"solve_triangular",
       "[2, 4, 4] lower and [2, 4, 3]",
       {{2, 4, 4}, {2, 4, 3}},
       [](const Inputs& in) { return linalg::solve_triangular(diag_up(in[0]), in[1], false); }},
      {"solve_triangular",
       "[4, 4] upper, unit, and [3, 4] on the right",
       {{4, 4}, {3, 4}},
       [](const Inputs& in) { return linalg::solve_triangular(in[0], in[1], true, false, true); }},
      // 64 rows: more steps than one dispatch takes under a small loop budget
      // (conformance_vulkan_loop_budget_small), so the solve goes on across dispatches.
      {"solve_triangular",
       "[64, 64] upper, diagonally dominant, and [64, 2]",
       {{64, 64}, {64, 2}},
       [](const Inputs& in) {
         const Tensor t = in[0] * (1.0 / 64) +
                          eye(64, std::nullopt, {.dtype = in[0].dtype(), .device = in[0].device()});
         return linalg::solve_triangular(t, in[1], true);
       }},
      // Orders above 64: on a device whose kernel does not block itself, the core's halves
      // (Note [Blocked factorizations and solves]), odd sizes, A's batch broadcast either way.
      {"solve_triangular",
       "[100, 100] lower, diagonally dominant, and [2, 100, 3]",
       {{100, 100}, {2, 100, 3}},
       [](const Inputs& in) {
         const Tensor t =
             in[0] * (1.0 / 100) +
             eye(100, std::nullopt, {.dtype = in[0].dtype(), .device = in[0].device()});
         return linalg::solve_triangular(t, in[1], false);
       }},
      {"solve_triangular",
       "[2, 70, 70] upper, unit, and [5, 70] on the right",
       {{2, 70, 70}, {5, 70}},
       [](const Inputs& in) {
         return linalg::solve_triangular(in[0] * (1.0 / 70), in[1], true, false, true);
       }},
      {"solve",
       "[2, 4, 4] and [4, 2], rows reversed",
       {{2, 4, 4}, {4, 2}},
       [](const Inputs& in) { return linalg::solve(flip(diag_up(in[0]), {-2}), in[1]); }},
      {"solve",
       "[3, 3] and the vector [3]",
       {{3, 3}, {3}},
       [](const Inputs& in) { return linalg::solve(diag_up(in[0]), in[1]); }},
      {"inv",
       "[2, 3, 3]",
       {{2, 3, 3}},
       [](const Inputs& in) { return linalg::inv(diag_up(in[0])); }},
      {"det",
       "[2, 4, 4], rows reversed",
       {{2, 4, 4}},
       [](const Inputs& in) { return linalg::det(flip(diag_up(in[0]), {-2})); }},
      {"slogdet",
       "[3, 3, 3] sign and log|det|, rows reversed",
       {{3, 3, 3}},
       [](const Inputs& in) {
         const auto [sign, logabsdet] = linalg::slogdet(flip(diag_up(in[0]), {-2}));
         return cat({sign, logabsdet});
       }},
      {"logdet",
       "[2, 3, 3] of X X^T + 2I",
       {{2, 3, 3}},
       [](const Inputs& in) { return logdet(spd(in[0])); }},
      {"cholesky_solve",
       "[4, 2] and L [4, 4]",
       {{4, 2}, {4, 4}},
       [](const Inputs& in) { return cholesky_solve(in[0], diag_up(tril(in[1]))); }},
      // qr's Q and R joined; eigh's eigenvalues over its eigenvectors squared (their signs are
      // arbitrary), of symmetric matrices with distinct eigenvalues (a diagonal 0, 2, 4, ...
      // added); eigvalsh reading the upper triangle.
      {"qr",
       "[2, 4, 3] Q and R",
       {{2, 4, 3}},
       [](const Inputs& in) {
         const auto [q, r] = linalg::qr(in[0]);
         return cat({q.flatten(-2), r.flatten(-2)}, -1);
       }},
      {"qr",
       "[3, 5] complete",
       {{3, 5}},
       [](const Inputs& in) {
         const auto [q, r] = linalg::qr(in[0], "complete");
         return cat({q.flatten(-2), r.flatten(-2)}, -1);
       }},
      {"eigh",
       "[2, 4, 4] values and vectors squared",
       {{2, 4, 4}},
       [](const Inputs& in) {
         const auto [w, v] = linalg::eigh(spread(in[0]));
         return cat({w.unsqueeze(-2), v * v}, -2);
       }},
      {"eigvalsh",
       "[5, 5] upper",
       {{5, 5}},
       [](const Inputs& in) { return linalg::eigvalsh(spread(in[0]), "U"); }},
      // svd's S with U and Vh squared (a singular vector's sign is arbitrary), of matrices whose
      // singular values are apart; full_matrices' extra rows of Vh are any orthonormal
      // complement, so only the first k are compared. The norms' orders side by side.
      {"svd",
       "[2, 4, 3] S, U and Vh squared",
       {{2, 4, 3}},
       [](const Inputs& in) {
         const linalg::SVD f = linalg::svd(spread_rect(in[0]), false);
         return cat({f.S, (f.U * f.U).flatten(-2), (f.Vh * f.Vh).flatten(-2)}, -1);
       }},
      {"svd",
       "[3, 5] full: S, U squared and Vh's first 3 rows squared",
       {{3, 5}},
       [](const Inputs& in) {
         const linalg::SVD f = linalg::svd(spread_rect(in[0]));
         const Tensor vh = f.Vh.narrow(-2, 0, 3);
         return cat({f.S, (f.U * f.U).flatten(), (vh * vh).flatten()});
       }},
      {"svdvals",
       "[2, 3, 5]",
       {{2, 3, 5}},
       [](const Inputs& in) { return linalg::svdvals(in[0]); }},
      {"pinv",
       "[4, 3] of X + 2.5 I",
       {{4, 3}},
       [](const Inputs& in) { return linalg::pinv(rect_up(in[0])); }},
      {"pinv",
       "[2, 3, 3] hermitian, of X X^T + 2I",
       {{2, 3, 3}},
       [](const Inputs& in) { return linalg::pinv(spd(in[0]), {}, true); }},
      {"matrix_norm",
       "[2, 3, 4] fro, nuc, 2, -2, 1, -1, inf, -inf",
       {{2, 3, 4}},
       [](const Inputs& in) {
         const Tensor a = spread_rect(in[0]);
         std::vector<Tensor> norms{linalg::matrix_norm(a), linalg::matrix_norm(a, "nuc")};
         for (double ord : {2.0, -2.0, 1.0, -1.0, HUGE_VAL, -HUGE_VAL})
           norms.push_back(linalg::matrix_norm(a, ord));
         return stack(norms, -1);
       }},
      {"matrix_norm",
       "[4, 2, 3] over dims (0, 2), keepdim",
       {{4, 2, 3}},
       [](const Inputs& in) {
         return linalg::matrix_norm(in[0], 1.0, {0, 2}, true);
       }},
      {"lstsq",
       "[1, 5, 3] and [2, 5, 2] gelsd: solution, residuals, singular values",
       {{1, 5, 3}, {2, 5, 2}},
       [](const Inputs& in) {
         const linalg::Lstsq r = linalg::lstsq(rect_up(in[0]), in[1], std::nullopt, "gelsd");
         return cat({r.solution.flatten(), r.residuals.flatten(), r.singular_values.flatten()});
       }},
      {"lstsq",
       "[3, 4] and the vector [3], wide",
       {{3, 4}, {3}},
       [](const Inputs& in) { return linalg::lstsq(rect_up(in[0]), in[1]).solution; }},
      // matrix_exp: a batch whose 1-norms need no squaring, and some (x 4: up to 12, entries
      // within f16's range); the gradient through the 2n x 2n exponential.
      {"matrix_exp",
       "[2, 3, 3], the second x 4: squarings for one matrix only",
       {{2, 3, 3}},
       [](const Inputs& in) {
         const Tensor scale =
             arange(2.0, {.dtype = in[0].dtype(), .device = in[0].device()}) * 3.0 + 1.0;
         return linalg::matrix_exp(in[0] * scale.reshape({2, 1, 1}));
       }},
      {"matrix_power",
       "[2, 3, 3] to the 5th, and to the -2nd of X + 2.5 I",
       {{2, 3, 3}},
       [](const Inputs& in) {
         return cat({linalg::matrix_power(in[0], 5).flatten(),
                     linalg::matrix_power(diag_up(in[0]), -2).flatten()});
       }},
      // The LU family: the factorization's parts joined (the pivots as floats), rows reversed so
      // that every step swaps; lu_solve through a factorization made in the case, so that the
      // gradient reaches A through lu_factor; lu_unpack with pivots given.
      {"lu_factor",
       "[2, 4, 4] LU and pivots, rows reversed",
       {{2, 4, 4}},
       [](const Inputs& in) {
         const auto [lu, pivots] = linalg::lu_factor(flip(diag_up(in[0]), {-2}));
         return cat({lu.flatten(-2), pivots.to(lu.dtype())}, -1);
       }},
      {"lu_factor_ex",
       "[3, 5] LU, pivots and info",
       {{3, 5}},
       [](const Inputs& in) {
         const auto [lu, pivots, info] = linalg::lu_factor_ex(in[0]);
         return cat({lu.flatten(), pivots.to(lu.dtype()), info.to(lu.dtype()).reshape({1})});
       }},
      // 64 rows: more steps than one dispatch takes under a small loop budget, and steps cut
      // into ranges of rows (conformance_vulkan_loop_budget_small); 24 matrices: more than one
      // binding reaches under a small storage range (conformance_vulkan_split_small).
      {"lu_factor_ex",
       "[64, 64] LU, pivots and info",
       {{64, 64}},
       [](const Inputs& in) {
         const auto [lu, pivots, info] = linalg::lu_factor_ex(in[0]);
         return cat({lu.flatten(), pivots.to(lu.dtype()), info.to(lu.dtype()).reshape({1})});
       }},
      // Above order 64, on a device whose kernels do not block themselves: the core's halves of
      // the columns (blocked_lu_into in runtime/ops_lu.cpp), wide, a batch.
      {"lu_factor_ex",
       "[2, 70, 90] LU, pivots and info, in blocks",
       {{2, 70, 90}},
       [](const Inputs& in) {
         const auto [lu, pivots, info] = linalg::lu_factor_ex(in[0]);
         return cat({lu.flatten(-2), pivots.to(lu.dtype()), info.to(lu.dtype()).unsqueeze(-1)}, -1);
       }},
      {"lu_factor_ex",
       "[24, 3, 3] LU and pivots",
       {{24, 3, 3}},
       [](const Inputs& in) {
         const auto [lu, pivots, info] = linalg::lu_factor_ex(in[0]);
         return cat({lu.flatten(-2), pivots.to(lu.dtype())}, -1);
       }},
      {"lu",
       "[2, 4, 3] P, L and U",
       {{2, 4, 3}},
       [](const Inputs& in) {
         const auto [p, l, u] = linalg::lu(in[0]);
         return cat({p.flatten(-2), l.flatten(-2), u.flatten(-2)}, -1);
       }},
      {"lu_solve",
       "[2, 3, 3] factored, rows reversed, and [3, 2], adjoint",
       {{2, 3, 3}, {3, 2}},
       [](const Inputs& in) {
         const auto [lu, pivots] = linalg::lu_factor(flip(diag_up(in[0]), {-2}));
         return linalg::lu_solve(lu, pivots, in[1], true, true);
       }},
      {"lu_unpack",
       "[4, 3] with pivots 2 4 3",
       {{4, 3}},
       [](const Inputs& in) {
         const Tensor pivots =
             tensor(std::vector<std::int64_t>{2, 4, 3}).to(DType::i32).to(in[0].device());
         const auto [p, l, u] = lu_unpack(in[0], pivots);
         return cat({p.flatten(), l.flatten(), u.flatten()});
       }},
      {"renorm",
       "[4, 5] p 2 dim 0 maxnorm 1",
       {{4, 5}},
       [](const Inputs& in) { return renorm(in[0], 2.0, 0, 1.0); }},
  };
}

}  // namespace

void add_math_cases(std::vector<Case>& out) {
  add_float_cases(out, math_ops(), "math");
  // The counting ops, in every dtype their rows take: no gradient.
  const auto add = [&](const char* op, std::string label, Shape shape,
                       std::function<Tensor(const Inputs&)> run) {
    for (DType dt : kAll) {
      if (!op_info(*op_from_name(op)).dtypes.has(dt)) continue;
      out.push_back({op, dt, label, "math", threshold(dt, 0), inputs_of({{shape}}, dt), {}, run});
      hold_to_composition(out.back());
    }
  };
  add("bincount", "[24] of |x|, minlength 6", {24},
      [](const Inputs& in) { return bincount(abs(in[0]), {}, 6); });
  add("histc", "[6, 7] 5 bins over [-2, 2]", {6, 7},
      [](const Inputs& in) { return histc(in[0], 5, -2, 2); });
  // Ranks 2 (a column zeroed: exactly, whatever the rounding) and 3, and a symmetric [4, 4] of
  // rank 2 (a positive-definite block and zeros), in every float dtype.
  add("matrix_rank", "[2, 4, 3] of ranks 2 and 3, and hermitian [4, 4] of rank 2", {2, 4, 3},
      [](const Inputs& in) {
        const Tensor a0 = in[0].select(0, 0), a1 = in[0].select(0, 1);
        const Tensor low = cat({a0.narrow(-1, 0, 2), zeros_like(a0.narrow(-1, 0, 1))}, -1);
        const Tensor block = spd(a1.narrow(-2, 0, 2).narrow(-1, 0, 2));
        const Tensor sym = cat({cat({block, zeros_like(block)}, -1),
                                zeros({2, 4}, {.dtype = block.dtype(), .device = block.device()})});
        return cat({linalg::matrix_rank(stack({low, rect_up(a1)})),
                    linalg::matrix_rank(sym, {}, true).reshape({1})});
      });
  // LU's pivots as a row permutation, through lu_unpack's P (which takes pivots of the caller's
  // making): 1-based pivots i + 1..6 made from the drawn integers, P [3, 6, 6] as integers.
  add("lu_pivots_to_permutation", "[3, 5] pivots of 6 rows, as lu_unpack's P", {3, 5},
      [](const Inputs& in) {
        const Device dev = in[0].device();
        const Tensor at = arange(5, {.dtype = DType::i64, .device = dev});
        const Tensor drawn = abs(in[0].to(DType::i64));
        const Tensor pivots = (at + remainder(drawn, neg(at) + 6) + 1).to(DType::i32);
        const Tensor lu = zeros({3, 6, 5}, {.dtype = DType::f32, .device = dev});
        return lu_unpack(lu, pivots, false, true).P.to(DType::i64);
      });
}

void add_math_grad_cases(std::vector<Case>& out) { add_float_grad_cases(out, math_ops(), "math"); }

}  // namespace ferry::conformance
