// tests/conformance/cases_stats.cpp — the statistics and assembling ops of ferry/ops_stats.hpp,
// ferry/ops_math.hpp (fmax, fmin, heaviside, float_power) and ferry/ops_shape.hpp (take,
// index_copy, diag_embed, block_diag, cartesian_prod) in every float dtype, each way (heaviside
// forward only: it has no gradient), against the CPU.
#include "catalog.hpp"

namespace ferry::conformance {
namespace {

Tensor scalar_like(double v, const Tensor& like) {
  return full({}, v, {.dtype = like.dtype(), .device = like.device()});
}

std::vector<FloatOpCase> stats_ops() {
  return {
      {"aminmax",
       "[4, 5] dim 1, both",
       {{4, 5}},
       [](const Inputs& in) {
         const MinMax m = aminmax(in[0], 1);
         return stack({m.min, m.max});
       }},
      {"cov", "[3, 6]", {{3, 6}}, [](const Inputs& in) { return cov(in[0]); }},
      {"cov",
       "[2, 5] correction 0, fweights, aweights",
       {{2, 5}, {5}},
       [](const Inputs& in) {
         return cov(in[0], 0, ints({1, 2, 1, 3, 1}, in[0]), abs(in[1]) + 0.5);
       }},
      {"corrcoef", "[3, 6]", {{3, 6}}, [](const Inputs& in) { return corrcoef(in[0]); }},
      {"quantile",
       "[4, 7] q [0.2, 0.5, 0.9] dim 1",
       {{4, 7}},
       [](const Inputs& in) {
         const Tensor q =
             stack({scalar_like(0.2, in[0]), scalar_like(0.5, in[0]), scalar_like(0.9, in[0])});
         return quantile(in[0], q, 1);
       }},
      {"quantile",
       "[9] q 0.3 nearest",
       {{9}},
       [](const Inputs& in) {
         return quantile(in[0], scalar_like(0.3, in[0]), std::nullopt, false, "nearest");
       }},
      {"nanquantile",
       "[3, 5] q 0.4 dim 1 keepdim, NaN where x < -0.5",
       {{3, 5}},
       [](const Inputs& in) {
         const Tensor x = where(lt(in[0], Scalar(-0.5)), Scalar(NAN), in[0]);
         return nanquantile(x, scalar_like(0.4, in[0]), 1, true);
       }},
      {"logcumsumexp",
       "[5, 6] of 8x dim 1",
       {{5, 6}},
       [](const Inputs& in) { return logcumsumexp(in[0] * 8, 1); }},
      {"trapezoid",
       "[3, 5] dx 0.5",
       {{3, 5}},
       [](const Inputs& in) { return trapezoid(in[0], 0.5); }},
      {"trapezoid",
       "[4, 3] at x [4] dim 0",
       {{4, 3}, {4}},
       [](const Inputs& in) { return trapezoid(in[0], in[1], 0); }},
      {"cumulative_trapezoid",
       "[3, 6] at x [3, 6]",
       {{3, 6}, {3, 6}},
       [](const Inputs& in) { return cumulative_trapezoid(in[0], in[1]); }},
      {"fmax",
       "[3, 4] and [4], NaN where a > 0.6",
       {{3, 4}, {4}},
       [](const Inputs& in) {
         return fmax(where(gt(in[0], Scalar(0.6)), Scalar(NAN), in[0]), in[1]);
       }},
      {"fmin",
       "[3, 4] and [3, 4], NaN where b < -0.6",
       {{3, 4}, {3, 4}},
       [](const Inputs& in) {
         return fmin(in[0], where(lt(in[1], Scalar(-0.6)), Scalar(NAN), in[1]));
       }},
      {"float_power",
       "[3, 4] of |a| + 0.5 and [4]",
       {{3, 4}, {4}},
       [](const Inputs& in) { return float_power(abs(in[0]) + 0.5, in[1] * 2); }},
      {"take",
       "[3, 4] at [2, 3] flat indices",
       {{3, 4}},
       [](const Inputs& in) {
         return take(in[0], ints({0, -1, 5, 11, 2, -12}, in[0]).reshape({2, 3}));
       }},
      {"index_copy",
       "[5, 3] dim 0 from [2, 3]",
       {{5, 3}, {2, 3}},
       [](const Inputs& in) {
         return index_copy(in[0], 0, ints({4, 1}, in[0]), in[1]);
       }},
      {"diag_embed",
       "[2, 3] offset 1 dims 0, 2",
       {{2, 3}},
       [](const Inputs& in) { return diag_embed(in[0], 1, 0, 2); }},
      {"block_diag",
       "[2, 2], [3] and [1, 2]",
       {{2, 2}, {3}, {1, 2}},
       [](const Inputs& in) {
         return block_diag({in[0], in[1], in[2]});
       }},
      {"cartesian_prod",
       "[2], [3] and [2]",
       {{2}, {3}, {2}},
       [](const Inputs& in) {
         return cartesian_prod({in[0], in[1], in[2]});
       }},
  };
}

}  // namespace

void add_stats_cases(std::vector<Case>& out) {
  std::vector<FloatOpCase> ops = stats_ops();
  ops.push_back({"heaviside", "[4, 5] of round(2x) and [5]", {{4, 5}, {5}}, [](const Inputs& in) {
                   return heaviside(round(in[0] * 2), in[1]);
                 }});
  add_float_cases(out, ops, "stats");
}

void add_stats_grad_cases(std::vector<Case>& out) {
  add_float_grad_cases(out, stats_ops(), "stats");
}

}  // namespace ferry::conformance
