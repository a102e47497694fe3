// The closed-form gradients of cholesky, solve_triangular, lu_factor_ex, det and slogdet (Note
// [Closed-form gradients of the factorizations] in runtime/autograd/formulas_linalg.cpp) and the
// fused paths they let run under autograd: the CPU's trsm kernel against the substitution every
// other device runs, values and gradients, with every broadcast of the batch; solve and inv through
// LU with a gradient against the gradient of the elimination's steps (debug::CompositesOnly, an
// independent derivation); the node each op records, and its gradient on every device against the
// CPU's; finite differences where the batch broadcasts; det's gradient against the cofactor matrix
// by Laplace's expansion, at singular matrices too, and slogdet's against inv; qr's against
// finite differences in every mode and shape, a triangular A among them. The PyTorch
// reference cases (test_linalg.cpp) hold the same gradients to PyTorch's numbers.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "devices.hpp"
#include "dispatch.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
#include "gradcheck.hpp"
#include "linalg_test_util.hpp"
#include "op_test_util.hpp"

namespace {

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;
namespace linalg = ferry::linalg;
using ferry_test::identity;
using ferry_test::max_abs;
using ferry_test::random_matrix;
using V = std::vector<Tensor>;

// f(inputs) and the inputs' gradients of sum(f * weights), weights fixed by the result's shape.
V value_and_grads(const std::function<Tensor(const V&)>& f, const V& inputs) {
  V leaves;
  for (const Tensor& x : inputs) leaves.push_back(x.detach().clone().requires_grad_());
  const Tensor y = f(leaves);
  const Tensor weights =
      random_matrix(y.sizes(), 99, ferry::Device::cpu()).to(y.dtype()).to(y.device());
  ferry::sum(y * weights).backward();
  V out{y.detach()};
  for (const Tensor& x : leaves) out.push_back(x.grad());
  return out;
}

// The triangular matrix solve_triangular reads, kept well away from singular.
Tensor conditioned(const Tensor& t) {
  return t + identity(t.size(-1), t.device()).to(t.dtype()) * 3;
}

// The fused kernel (the CPU's trsm, Vulkan's shader) against the substitution on the same
// device, every (upper, left, unitriangular), with T's and B's batches broadcast every way: one
// T for a batch of B, a batch of T for one B, both broadcast; an order of 130, more rows than
// a Vulkan workgroup has threads; and 72 columns of order 40, which Vulkan solves a thread a
// column (enough of them to fill a workgroup), where it gives fewer a workgroup each. f64 where the
// device computes it, else f32.
void check_fused_solve_triangular(const ferry::Device& dev) {
  const bool f64 = ferry::detail::impl_of(ferry::zeros({1}, {.device = dev}))
                       .supports(ferry::OpId::solve_triangular, DType::f64);
  if (!ferry::detail::impl_of(ferry::zeros({1}, {.device = dev}))
           .supports(ferry::OpId::solve_triangular, f64 ? DType::f64 : DType::f32))
    GTEST_SKIP() << dev.str() << " has no solve_triangular kernel";
  const DType dt = f64 ? DType::f64 : DType::f32;
  const double tol = f64 ? 1e-12 : 2e-5;
  struct Case {
    Shape t, b_left;
  };
  for (const Case& c : {Case{{3, 5, 5}, {3, 5, 2}}, Case{{5, 5}, {4, 5, 3}},
                        Case{{2, 5, 5}, {5, 4}}, Case{{2, 1, 5, 5}, {3, 5, 2}},
                        Case{{130, 130}, {2, 130, 3}}, Case{{40, 40}, {2, 40, 36}}}) {
    SCOPED_TRACE(ferry::shape_str(c.t) + " " + ferry::shape_str(c.b_left));
    const double scale = 5.0 / double(c.t.back());  // off the diagonal: kept well-conditioned
    const ferry::Device cpu = ferry::Device::cpu();
    const Tensor t = conditioned(random_matrix(c.t, 31, cpu) * scale).to(dt).to(dev);
    const Tensor b = random_matrix(c.b_left, 32, cpu).to(dt).to(dev);
    for (bool upper : {false, true})
      for (bool left : {false, true})
        for (bool unit : {false, true}) {
          SCOPED_TRACE(::testing::Message() << upper << left << unit);
          const Tensor rhs = left ? b : b.transpose(-2, -1);
          const auto f = [&](const V& in) {
            return linalg::solve_triangular(in[0], in[1], upper, left, unit);
          };
          const V fused = value_and_grads(f, {t, rhs});
          ferry::debug::CompositesOnly composition;
          const V steps = value_and_grads(f, {t, rhs});
          for (std::size_t i = 0; i < fused.size(); ++i) {
            EXPECT_EQ(fused[i].sizes(), steps[i].sizes()) << i;
            EXPECT_EQ(fused[i].device(), dev);
            EXPECT_LT(max_abs(fused[i] - steps[i]), tol) << i;
          }
        }
  }
}
FERRY_TEST_ON_EACH_DEVICE(LinalgGradients, FusedSolveTriangularAgreesWithTheSubstitution,
                          check_fused_solve_triangular)

// solve and inv with a gradient run getrf and trsm on the CPU (both record closed forms); their
// gradients agree with those of the elimination's steps, which the composition records.
TEST(LinalgGradients, SolveThroughLUMatchesTheSteps) {
  const ferry::Device cpu = ferry::Device::cpu();
  const Tensor a = random_matrix({3, 6, 6}, 33, cpu) + identity(6, cpu);
  const Tensor b = random_matrix({3, 6, 2}, 34, cpu);
  const std::vector<std::function<Tensor(const V&)>> ops = {
      [](const V& in) { return linalg::solve(in[0], in[1]); },
      [](const V& in) { return linalg::solve(in[0], in[1].transpose(-2, -1), false); },
      [](const V& in) { return linalg::inv(in[0]) + ferry::sum(in[1]); },
  };
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const V fused = value_and_grads(ops[k], {a, b});
    ferry::debug::CompositesOnly composition;
    const V steps = value_and_grads(ops[k], {a, b});
    for (std::size_t i = 0; i < fused.size(); ++i)
      EXPECT_LT(max_abs(fused[i] - steps[i]), 1e-11) << "op " << k << " result " << i;
  }
}

// qr's Q and R, flattened and joined (Q empty in mode "r").
Tensor qr_joined(const Tensor& a, std::string_view mode) {
  const auto [q, r] = linalg::qr(a, mode);
  return ferry::cat({q.reshape({-1}), r.reshape({-1})}, 0);
}

// Each factorization records its one closed-form node on every device, and its gradient there
// is the CPU's (f32 off the CPU, where a device may lack f64).
void check_nodes(const ferry::Device& dev) {
  const ferry::Device cpu = ferry::Device::cpu();
  const Tensor x = random_matrix({2, 5, 5}, 35, cpu);
  const Tensor spd = ferry::matmul(x, x.transpose(-2, -1)) + identity(5, cpu);
  const Tensor b = random_matrix({2, 5, 3}, 36, cpu);
  const Tensor wide = random_matrix({2, 3, 5}, 37, cpu), tall = random_matrix({5, 3}, 38, cpu);
  const Tensor leaf = spd.to(dev).to(DType::f32).requires_grad_();
  EXPECT_EQ(linalg::cholesky(leaf).grad_fn_name(), "linalg_choleskyBackward");
  EXPECT_EQ(linalg::solve_triangular(leaf, b.to(dev).to(DType::f32), false).grad_fn_name(),
            "linalg_solve_triangularBackward");
  EXPECT_EQ(linalg::lu_factor_ex(leaf).LU.grad_fn_name(), "linalg_lu_factor_exBackward");
  EXPECT_EQ(linalg::det(leaf).grad_fn_name(), "linalg_detBackward");
  EXPECT_EQ(linalg::slogdet(leaf).second.grad_fn_name(), "linalg_slogdetBackward");
  EXPECT_FALSE(linalg::slogdet(leaf).first.requires_grad());
  struct Op {
    const char* name;
    std::function<Tensor(const V&)> f;
    V inputs;
  };
  const std::vector<Op> ops = {
      {"cholesky", [](const V& in) { return linalg::cholesky(in[0]); }, {spd}},
      {"cholesky upper", [](const V& in) { return linalg::cholesky(in[0], true); }, {spd}},
      {"solve_triangular",
       [](const V& in) { return linalg::solve_triangular(conditioned(in[0]), in[1], true); },
       {x, b}},
      {"lu_factor square", [](const V& in) { return linalg::lu_factor(in[0]).first; }, {x}},
      {"lu_factor wide", [](const V& in) { return linalg::lu_factor_ex(in[0]).LU; }, {wide}},
      {"lu_factor tall", [](const V& in) { return linalg::lu_factor_ex(in[0]).LU; }, {tall}},
      {"solve", [](const V& in) { return linalg::solve(in[0], in[1]); }, {spd, b}},
      {"det", [](const V& in) { return linalg::det(in[0]); }, {x}},
      {"slogdet", [](const V& in) { return linalg::slogdet(in[0]).second; }, {x}},
      {"logdet", [](const V& in) { return ferry::logdet(in[0]); }, {spd}},
      {"qr", [](const V& in) { return qr_joined(in[0], "reduced"); }, {x}},
      {"qr wide", [](const V& in) { return qr_joined(in[0], "reduced"); }, {wide}},
      {"qr r", [](const V& in) { return qr_joined(in[0], "r"); }, {tall}},
  };
  for (const Op& op : ops) {
    SCOPED_TRACE(op.name);
    const V want = value_and_grads(op.f, op.inputs);
    V on_dev;
    for (const Tensor& t : op.inputs) on_dev.push_back(t.to(DType::f32).to(dev));
    const V got = value_and_grads(op.f, on_dev);
    for (std::size_t i = 0; i < want.size(); ++i) {
      const Tensor g = got[i].to(cpu).to(DType::f64);
      EXPECT_LT(max_abs(g - want[i]), 2e-4 * (1 + max_abs(want[i]))) << i;
    }
  }
}
FERRY_TEST_ON_EACH_DEVICE(LinalgGradients, ClosedFormNodes, check_nodes)

// Finite differences where the batch broadcasts (the gradient summed back to each input's
// shape), for lu_factor_ex without pivoting, and for a batch of Cholesky factors.
TEST(LinalgGradients, BroadcastGradientsMatchFiniteDifferences) {
  using ferry_test::gradcheck;
  const ferry::Device cpu = ferry::Device::cpu();
  const Tensor one = random_matrix({4, 4}, 40, cpu), batch = random_matrix({2, 4, 3}, 41, cpu);
  EXPECT_TRUE(gradcheck(
      [](const V& in) { return linalg::solve_triangular(conditioned(in[0]), in[1], false); },
      {one, batch}));
  const Tensor ts = random_matrix({2, 1, 4, 4}, 42, cpu), bs = random_matrix({3, 3, 4}, 43, cpu);
  EXPECT_TRUE(gradcheck(
      [](const V& in) {
        return linalg::solve_triangular(conditioned(in[0]), in[1], true, false, true);
      },
      {ts, bs}));
  const Tensor a = random_matrix({4, 4}, 44, cpu) + identity(4, cpu) * 3;
  EXPECT_TRUE(gradcheck([](const V& in) { return linalg::lu_factor_ex(in[0], false).LU; }, {a}));
  const Tensor x = random_matrix({3, 4, 4}, 45, cpu);
  EXPECT_TRUE(gradcheck(
      [](const V& in) {
        const Tensor y = in[0];
        return linalg::cholesky(ferry::matmul(y, y.transpose(-2, -1)) + identity(4, y.device()));
      },
      {x}));
  EXPECT_TRUE(gradcheck([&](const V& in) { return linalg::solve(in[0], in[1]); },
                        {random_matrix({4, 4}, 46, cpu) + identity(4, cpu), batch}));
}

// det by Laplace's expansion along the first row: independent of any elimination.
double laplace_det(const std::vector<double>& m, std::int64_t n) {
  if (n == 0) return 1;
  double det = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    std::vector<double> minor;
    for (std::int64_t r = 1; r < n; ++r)
      for (std::int64_t c = 0; c < n; ++c)
        if (c != j) minor.push_back(m[std::size_t(r * n + c)]);
    det += (j % 2 == 0 ? 1 : -1) * m[std::size_t(j)] * laplace_det(minor, n - 1);
  }
  return det;
}

// A's cofactor matrix, the gradient of det: C[i][j] = (-1)^(i + j) det(A without row i, col j).
std::vector<double> cofactors(const std::vector<double>& m, std::int64_t n) {
  std::vector<double> c;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      std::vector<double> minor;
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t k = 0; k < n; ++k)
          if (r != i && k != j) minor.push_back(m[std::size_t(r * n + k)]);
      c.push_back(((i + j) % 2 == 0 ? 1 : -1) * laplace_det(minor, n - 1));
    }
  return c;
}

// det's gradient is the cofactor matrix, at singular matrices too (rank n - 1, where it is not
// zero, as PyTorch 1.13's is; rank n - 2 and less, where it is; a zero column first, so U's
// first pivot is the zero one), each matrix alone and all in one batch, whose matrices' scales
// differ; f64 on the CPU, f32 on every device.
void check_det_cofactors(const ferry::Device& dev) {
  const std::vector<std::vector<double>> threes = {
      {1, 2, 3, 2, 4, 6, 1, 0, 1},        // rank 2
      {0, 1, 2, 0, 3, 4, 0, 5, 7},        // rank 2, a zero first column
      {1, 2, 3, 2, 4, 6, 3, 6, 9},        // rank 1
      {0, 0, 0, 0, 0, 0, 0, 0, 0},        // rank 0
      {2, -1, 0, -1, 2, -1, 0, -1, 2},    // nonsingular
      {1e-3, 0, 0, 0, 2e-3, 0, 0, 0, 0},  // rank 2, small
  };
  std::vector<double> batch, want;
  for (const std::vector<double>& m : threes) {
    batch.insert(batch.end(), m.begin(), m.end());
    const std::vector<double> c = cofactors(m, 3);
    want.insert(want.end(), c.begin(), c.end());
  }
  const auto grad_of_det = [&](const Tensor& a) {
    const Tensor leaf = a.detach().clone().requires_grad_();
    ferry::sum(linalg::det(leaf)).backward();
    return leaf.grad();
  };
  for (DType dt : {DType::f64, DType::f32}) {
    if (dt == DType::f64 && !dev.is_cpu()) continue;
    SCOPED_TRACE(ferry::dtype_name(dt));
    // A zero pivot taken as eps max|U| errs by some eps times A's entries squared.
    const double tol = dt == DType::f64 ? 1e-13 : 2e-5;
    const Tensor all = ferry::tensor(batch, {std::int64_t(threes.size()), 3, 3}).to(dt).to(dev);
    const Tensor expected = ferry::tensor(want, {std::int64_t(threes.size()), 3, 3});
    const Tensor got = grad_of_det(all).to(ferry::Device::cpu()).to(DType::f64);
    for (std::int64_t k = 0; k < std::int64_t(threes.size()); ++k) {
      SCOPED_TRACE(k);
      const double scale = 1 + max_abs(expected.select(0, k));
      EXPECT_LT(max_abs(got.select(0, k) - expected.select(0, k)), tol * scale);
      const Tensor alone = grad_of_det(all.select(0, k)).to(ferry::Device::cpu()).to(DType::f64);
      EXPECT_LT(max_abs(alone - expected.select(0, k)), tol * scale);
    }
    // [[1, 2], [2, 4]]: [[4, -2], [-2, 1]], where PyTorch 1.13 gives zeros.
    const Tensor two = ferry::tensor(std::vector<double>{1, 2, 2, 4}, {2, 2}).to(dt).to(dev);
    const Tensor cofactors_of_two = ferry::tensor(std::vector<double>{4, -2, -2, 1}, {2, 2});
    EXPECT_LT(max_abs(grad_of_det(two).to(ferry::Device::cpu()).to(DType::f64) - cofactors_of_two),
              tol * 5);
  }
  // A random 5x5 (pivoting), against Laplace's expansion.
  const Tensor a = random_matrix({5, 5}, 47, ferry::Device::cpu());
  const Tensor c = ferry::tensor(cofactors(ferry_test::values(a), 5), {5, 5});
  const Tensor got = grad_of_det(a.to(DType::f32).to(dev)).to(ferry::Device::cpu());
  EXPECT_LT(max_abs(got.to(DType::f64) - c), 1e-5 * (1 + max_abs(c)));
}
FERRY_TEST_ON_EACH_DEVICE(LinalgGradients, DetGradientIsTheCofactorMatrix, check_det_cofactors)

// slogdet's gradient is A^-T (and logdet's, of a positive determinant); sign has none.
TEST(LinalgGradients, SlogdetGradientIsTheInverseTransposed) {
  const ferry::Device cpu = ferry::Device::cpu();
  const Tensor a = random_matrix({3, 4, 4}, 48, cpu);
  const Tensor leaf = a.clone().requires_grad_();
  const auto [sign, logabsdet] = linalg::slogdet(leaf);
  ferry::sum(logabsdet).backward();
  EXPECT_LT(max_abs(leaf.grad() - linalg::inv(a).transpose(-2, -1)), 1e-12);
  EXPECT_TRUE(ferry_test::gradcheck([](const V& in) { return linalg::det(in[0]); },
                                    {random_matrix({2, 4, 4}, 49, cpu)}));
}

// qr's closed form against finite differences: tall, square and wide, batched, every mode
// ("complete" where m > n through the reflections' steps), and an A already upper triangular,
// whose zeros the steps passed no gradient (the Note in runtime/ops_orthogonal.cpp), which the
// PyTorch reference case qr_triangular (test_linalg.cpp) checks too.
// det's and slogdet's gradients solve with the pivots their forward's lu_factor_ex made, which
// are in range by construction, and LU's gradient (lu_factor's, and through it solve's) applies
// their permutation as a gather: no backward reads anything back from the device (lu_solve's
// range check of a caller's pivots did, once a backward, and lu_unpack's in LU's), nor does it
// wait for it.
void check_backward_stays_on_device(const ferry::Device& dev) {
  namespace prof = ferry::profiler;
  const Tensor a = random_matrix({16, 5, 5}, 41, dev).requires_grad_();
  const Tensor b = random_matrix({16, 5, 2}, 42, dev).requires_grad_();
  const Tensor tall = random_matrix({3, 7, 4}, 43, dev).requires_grad_();
  const Tensor wide = random_matrix({3, 4, 7}, 44, dev).requires_grad_();
  const std::vector<std::pair<std::string, std::function<Tensor()>>> cases = {
      {"det", [&] { return linalg::det(a); }},
      {"slogdet", [&] { return linalg::slogdet(a).second; }},
      {"lu_factor", [&] { return linalg::lu_factor(a).first; }},
      {"lu_factor tall", [&] { return linalg::lu_factor_ex(tall).LU; }},
      {"lu_factor wide", [&] { return linalg::lu_factor_ex(wide).LU; }},
  };
  for (const auto& [name, forward] : cases) {
    SCOPED_TRACE(name);
    const Tensor y = forward();
    ferry::synchronize(dev);
    prof::Scope scope;
    const std::vector<Tensor> g = ferry::autograd::grad({ferry::sum(y * y)}, {a, tall, wide}, {},
                                                        /*retain_graph=*/false,
                                                        /*allow_unused=*/true);
    const prof::Profile p = scope.stop();
    std::size_t ops = 0;
    for (const prof::Event& e : p.events()) {
      EXPECT_NE(e.kind, prof::EventKind::wait) << e.name;
      if (e.kind == prof::EventKind::copy) EXPECT_NE(e.name, "copy DtoH") << e.detail;
      ops += e.kind == prof::EventKind::op;
    }
    EXPECT_GT(ops, 0u);
  }
  // solve's gradient: lu_factor_ex's backward and lu_solve's adjoint.
  const Tensor x = linalg::solve(a, b);
  ferry::synchronize(dev);
  prof::Scope scope;
  const std::vector<Tensor> g = ferry::autograd::grad({ferry::sum(x * x)}, {a, b});
  const prof::Profile p = scope.stop();
  for (const prof::Event& e : p.events()) EXPECT_NE(e.kind, prof::EventKind::wait) << e.name;
  EXPECT_EQ(g.at(0).sizes(), a.sizes());
  EXPECT_EQ(g.at(1).sizes(), b.sizes());
}
FERRY_TEST_ON_EACH_DEVICE(LinalgGradients, LUBackwardsReadNothingBack,
                          check_backward_stays_on_device)

TEST(LinalgGradients, QrMatchesFiniteDifferences) {
  using ferry_test::gradcheck;
  const ferry::Device cpu = ferry::Device::cpu();
  struct Case {
    Shape shape;
    const char* mode;
  };
  for (const Case& c :
       {Case{{5, 3}, "reduced"}, Case{{2, 4, 4}, "reduced"}, Case{{3, 5}, "reduced"},
        Case{{2, 3, 5}, "complete"}, Case{{4, 4}, "complete"}, Case{{5, 3}, "complete"},
        Case{{5, 3}, "r"}, Case{{3, 5}, "r"}}) {
    SCOPED_TRACE(ferry::shape_str(c.shape) + " " + c.mode);
    const std::string_view mode = c.mode;
    EXPECT_TRUE(gradcheck([mode](const V& in) { return qr_joined(in[0], mode); },
                          {random_matrix(c.shape, 50, cpu)}));
  }
  // LAPACK's QR jumps at a triangular A: a perturbation below the diagonal makes a reflection,
  // which flips the signs of R's row and Q's column (-sign(a_jj) on the diagonal). So the finite
  // differences are taken of the QR with R's diagonal positive, which is smooth there and is the
  // unreflected QR at A itself (its diagonal is positive).
  const Tensor upper = ferry::triu(random_matrix({4, 4}, 51, cpu)) + identity(4, cpu) * 2;
  EXPECT_TRUE(gradcheck(
      [](const V& in) {
        const auto [q, r] = linalg::qr(in[0]);
        const Tensor signs = ferry::sign(ferry::diagonal(r, 0, -2, -1)).detach();
        return ferry::cat(
            {(q * signs.unsqueeze(-2)).reshape({-1}), (r * signs.unsqueeze(-1)).reshape({-1})}, 0);
      },
      {upper}));
}

}  // namespace
