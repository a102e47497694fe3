// The closed-form gradients of cholesky, solve_triangular and lu_factor_ex (Note [Closed-form
// gradients of the factorizations] in runtime/autograd/formulas_linalg.cpp) and the fused paths
// they let run under autograd: the CPU's trsm kernel against the substitution every other device
// runs, values and gradients, with every broadcast of the batch; solve and inv through LU with a
// gradient against the gradient of the elimination's steps (debug::CompositesOnly, an independent
// derivation); the node each op records, and its gradient on every device against the CPU's;
// finite differences where the batch broadcasts. The PyTorch reference cases (test_linalg.cpp)
// hold the same gradients to PyTorch's numbers.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "devices.hpp"
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

// The fused trsm against the substitution, every (upper, left, unitriangular), with T's and B's
// batches broadcast every way: one T for a batch of B, a batch of T for one B, both broadcast.
TEST(LinalgGradients, FusedSolveTriangularAgreesWithTheSubstitution) {
  const ferry::Device cpu = ferry::Device::cpu();
  struct Case {
    Shape t, b_left;
  };
  for (const Case& c : {Case{{3, 5, 5}, {3, 5, 2}}, Case{{5, 5}, {4, 5, 3}},
                        Case{{2, 5, 5}, {5, 4}}, Case{{2, 1, 5, 5}, {3, 5, 2}}}) {
    SCOPED_TRACE(ferry::shape_str(c.t) + " " + ferry::shape_str(c.b_left));
    const Tensor t = conditioned(random_matrix(c.t, 31, cpu));
    const Tensor b = random_matrix(c.b_left, 32, cpu);
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
            EXPECT_LT(max_abs(fused[i] - steps[i]), 1e-12) << i;
          }
        }
  }
}

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

}  // namespace
