// The LU family of ferry/ops_linalg.hpp (linalg::lu_factor_ex, lu_factor, lu, lu_solve and
// ferry::lu_unpack) beyond their PyTorch reference cases (test_linalg.cpp): in f64 on every
// device against what they are defined by (A = P L U with L unit lower and U upper triangular;
// lu_solve against solve), LAPACK's choices where PyTorch 1.13 showed them (a singular matrix's
// pivots and info, a zero column left unscaled, a tall matrix's pivots), LU without pivoting;
// the CPU's fused kernels (LAPACK) against the composition; gradients against finite differences
// in f64; f16, empty batches; the errors, PyTorch's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "devices.hpp"
#include "dispatch.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
#include "ferry/profiler.hpp"
#include "gradcheck.hpp"
#include "linalg_test_util.hpp"
#include "op_test_util.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
namespace linalg = ferry::linalg;
using ferry_test::identity;
using ferry_test::max_abs;
using ferry_test::random_matrix;
using ferry_test::values;

std::vector<std::int64_t> ints(const Tensor& t) {
  return t.to(DType::i64).to_vector<std::int64_t>();
}

Tensor tensor_on(std::vector<double> v, const ferry::Shape& shape, const ferry::Device& dev) {
  return ferry::tensor(v, shape).to(dev);
}

// P L U = A, L unit lower triangular, U upper triangular, P a permutation; lu_unpack of
// lu_factor's result is lu's.
void expect_factors(const Tensor& a) {
  SCOPED_TRACE(ferry::shape_str(a.sizes()));
  const auto [p, l, u] = linalg::lu(a);
  const std::int64_t m = a.size(-2), k = std::min(m, a.size(-1));
  EXPECT_EQ(p.sizes().back(), m);
  EXPECT_EQ(l.sizes().back(), k);
  EXPECT_EQ(u.size(-2), k);
  EXPECT_LT(max_abs(ferry::matmul(p, ferry::matmul(l, u)) - a), 1e-13);
  EXPECT_EQ(max_abs(ferry::triu(l, 1)), 0.0);
  EXPECT_EQ(max_abs(ferry::diagonal(l, 0, -2, -1) - 1.0), 0.0);
  EXPECT_EQ(max_abs(ferry::tril(u, -1)), 0.0);
  EXPECT_LT(max_abs(ferry::matmul(p.transpose(-2, -1), p) - identity(m, a.device())), 1e-15);
  // Partial pivoting: no multiplier above 1 in magnitude.
  EXPECT_LE(max_abs(l), 1.0);
  const auto [lu, pivots] = linalg::lu_factor(a);
  EXPECT_EQ(pivots.dtype(), DType::i32);
  EXPECT_EQ(pivots.size(-1), k);
  const auto [p2, l2, u2] = ferry::lu_unpack(lu, pivots);
  EXPECT_EQ(values(p2), values(p));
  EXPECT_EQ(values(l2), values(l));
  EXPECT_EQ(values(u2), values(u));
}

void check_factors(const ferry::Device& dev) {
  expect_factors(random_matrix({2, 7, 7}, 1, dev));
  expect_factors(random_matrix({3, 8, 4}, 2, dev));
  expect_factors(random_matrix({2, 4, 8}, 3, dev));
  expect_factors(random_matrix({1, 1}, 4, dev));
}
FERRY_TEST_ON_EACH_DEVICE(LinalgLU, PLUIsA, check_factors)

// lu_solve agrees with solve in every form, B's batch dims broadcasting with LU's.
void check_solve(const ferry::Device& dev) {
  const Tensor a = random_matrix({2, 6, 6}, 5, dev), b = random_matrix({6, 3}, 6, dev);
  const auto [lu, pivots] = linalg::lu_factor(a);
  const Tensor at = a.transpose(-2, -1), bt = b.transpose(-2, -1);
  EXPECT_LT(max_abs(linalg::lu_solve(lu, pivots, b) - linalg::solve(a, b)), 1e-12);
  EXPECT_LT(max_abs(linalg::lu_solve(lu, pivots, b, true, true) - linalg::solve(at, b)), 1e-12);
  EXPECT_LT(max_abs(linalg::lu_solve(lu, pivots, bt, false) - linalg::solve(a, bt, false)), 1e-12);
  EXPECT_LT(max_abs(linalg::lu_solve(lu, pivots, bt, false, true) - linalg::solve(at, bt, false)),
            1e-12);
  EXPECT_EQ(linalg::lu_solve(lu, pivots, b).sizes(), (ferry::Shape{2, 6, 3}));
}
FERRY_TEST_ON_EACH_DEVICE(LinalgLU, SolveAgreesWithSolve, check_solve)

// What PyTorch 1.13 (LAPACK's getrf) gave for these, printed and copied here.
void check_lapack_choices(const ferry::Device& dev) {
  // Singular: the second pivot is zero; lu and lu_factor_ex say so without an error.
  const Tensor singular = tensor_on({1, 2, 2, 4}, {2, 2}, dev);
  const auto [lu, pivots, info] = linalg::lu_factor_ex(singular);
  EXPECT_EQ(values(lu), (std::vector<double>{2, 4, 0.5, 0}));
  EXPECT_EQ(ints(pivots), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(info.dtype(), DType::i32);
  EXPECT_EQ(ints(info), (std::vector<std::int64_t>{2}));
  const auto [p, l, u] = linalg::lu(singular);
  EXPECT_EQ(values(p), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(values(l), (std::vector<double>{1, 0, 0.5, 1}));
  EXPECT_EQ(values(u), (std::vector<double>{2, 4, 0, 0}));
  // A zero column is left as it is (no 0 / 0): pivots 1, 2, 3, info 1; det 0, not NaN.
  const Tensor zero = ferry::zeros({3, 3}, {.dtype = DType::f64, .device = dev});
  const auto [lu0, pivots0, info0] = linalg::lu_factor_ex(zero);
  EXPECT_EQ(max_abs(lu0), 0.0);
  EXPECT_EQ(ints(pivots0), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(ints(info0), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(values(linalg::lu(zero).L), values(identity(3, dev)));
  EXPECT_EQ(linalg::det(zero).item<double>(), 0.0);
  EXPECT_EQ(linalg::slogdet(zero).first.item<double>(), 0.0);
  // Tall: the largest entry of the column is swapped up at each step.
  const Tensor tall = tensor_on({1, 2, 3, 4, 0.5, 1, 6, -8}, {4, 2}, dev);
  EXPECT_EQ(ints(linalg::lu_factor(tall).second), (std::vector<std::int64_t>{4, 2}));
  // Each matrix of a batch pivots on its own; info names each one's first zero pivot.
  const Tensor batch =
      ferry::stack({identity(3, dev), tensor_on({0, 0, 1, 0, 2, 0, 3, 0, 0}, {3, 3}, dev),
                    tensor_on({1, 1, 1, 1, 1, 1, 1, 1, 1}, {3, 3}, dev)});
  const auto [lub, pivotsb, infob] = linalg::lu_factor_ex(batch);
  EXPECT_EQ(ints(pivotsb), (std::vector<std::int64_t>{1, 2, 3, 3, 2, 3, 1, 2, 3}));
  EXPECT_EQ(ints(infob), (std::vector<std::int64_t>{0, 0, 2}));
}
FERRY_TEST_ON_EACH_DEVICE(LinalgLU, LapacksChoices, check_lapack_choices)

// pivot = false: no swaps (pivots 1..k, P empty), L U = A where the leading minors are nonzero.
void check_no_pivoting(const ferry::Device& dev) {
  const Tensor a = random_matrix({2, 5, 5}, 7, dev) + identity(5, dev) * 3;
  const auto [p, l, u] = linalg::lu(a, false);
  EXPECT_EQ(p.numel(), 0);
  EXPECT_LT(max_abs(ferry::matmul(l, u) - a), 1e-13);
  const auto [lu, pivots] = linalg::lu_factor(a, false);
  EXPECT_EQ(ints(pivots), (std::vector<std::int64_t>{1, 2, 3, 4, 5, 1, 2, 3, 4, 5}));
  const Tensor b = random_matrix({5, 2}, 8, dev);
  EXPECT_LT(max_abs(linalg::lu_solve(lu, pivots, b) - linalg::solve(a, b)), 1e-12);
}
FERRY_TEST_ON_EACH_DEVICE(LinalgLU, WithoutPivoting, check_no_pivoting)

// The CPU's fused kernels (LAPACK's getrf and potrf where the BLAS has them: Note [LAPACK through
// OpenBLAS]) run where no gradient is recorded; they agree with the composition every other
// device runs (debug::CompositesOnly), pivots and info exactly, singular matrices and failures
// included.
TEST(LinalgLU, FusedKernelsAgreeWithTheComposition) {
  const ferry::Device cpu = ferry::Device::cpu();
  const Tensor zero = ferry::zeros({3, 3}, {.dtype = DType::f64});
  const Tensor singular = tensor_on({1, 2, 2, 4}, {2, 2}, cpu);
  for (const Tensor& a : {random_matrix({3, 6, 6}, 14, cpu), random_matrix({5, 3}, 15, cpu),
                          random_matrix({2, 3, 5}, 16, cpu), zero, singular}) {
    SCOPED_TRACE(ferry::shape_str(a.sizes()));
    const linalg::LUFactorization fused = linalg::lu_factor_ex(a);
    ferry::debug::CompositesOnly composition;
    const linalg::LUFactorization steps = linalg::lu_factor_ex(a);
    EXPECT_LT(max_abs(fused.LU - steps.LU), 1e-13);
    EXPECT_EQ(ints(fused.pivots), ints(steps.pivots));
    EXPECT_EQ(ints(fused.info), ints(steps.info));
  }
  const Tensor x = random_matrix({2, 7, 7}, 17, cpu);
  const Tensor spd = ferry::matmul(x, x.transpose(-2, -1)) + identity(7, cpu);
  const Tensor lopsided = spd + ferry::triu(x, 1) * 5;  // the upper triangle is not read
  for (bool upper : {false, true}) {
    const Tensor a = upper ? lopsided.transpose(-2, -1) : lopsided;
    const Tensor fused = linalg::cholesky(a, upper);
    ferry::debug::CompositesOnly composition;
    EXPECT_LT(max_abs(fused - linalg::cholesky(a, upper)), 1e-13);
  }
  // Not positive-definite at order 3 of the second matrix: the same error either way.
  const Tensor indefinite = ferry::stack(
      {identity(4, cpu), ferry::diag(ferry::tensor(std::vector<double>{1, 2, -1, 4}))});
  EXPECT_FERRY_ERROR(linalg::cholesky(indefinite), ferry::LinAlgError,
                     "(Batch element 1): The factorization", "order 3 is not");
  ferry::debug::CompositesOnly composition;
  EXPECT_FERRY_ERROR(linalg::cholesky(indefinite), ferry::LinAlgError,
                     "(Batch element 1): The factorization", "order 3 is not");
}

// Each device's fused lu_factor_ex (LAPACK's getrf on the CPU, shaders/lu_factor.comp on Vulkan)
// against the composition on the same device (debug::CompositesOnly): pivots and info exactly.
// Vulkan's kernel has two forms, a thread per matrix up to 16 columns (here a batch of 200
// takes several workgroups) and a workgroup per matrix beyond (order 130 there goes in blocks, its
// panels to the kernel: BlockedLUFactor hands the kernel order 130 whole); tall, wide, singular
// and zero matrices; f32 too.
void fused_lu_factor(const ferry::Device& dev) {
  std::vector<double> mask(20, 1.0);
  mask[5] = 0;  // column 5 zero: singular, step 5 finds every candidate exactly zero (info 6)
  const Tensor singular = random_matrix({20, 20}, 20, dev) * tensor_on(mask, {20}, dev);
  for (const Tensor& a : {random_matrix({3, 6, 6}, 14, dev), random_matrix({5, 3}, 15, dev),
                          random_matrix({2, 3, 5}, 16, dev), random_matrix({200, 4, 4}, 17, dev),
                          random_matrix({2, 40, 40}, 18, dev), random_matrix({130, 130}, 19, dev),
                          random_matrix({70, 20}, 21, dev), random_matrix({20, 70}, 22, dev),
                          singular, ferry::zeros({3, 3}, {.dtype = DType::f64, .device = dev}),
                          ferry::zeros({2, 24, 24}, {.dtype = DType::f64, .device = dev}),
                          random_matrix({4, 5, 5}, 23, dev).to(DType::f32),
                          random_matrix({33, 33}, 24, dev).to(DType::f32)}) {
    SCOPED_TRACE(ferry::shape_str(a.sizes()) + " " + std::string(ferry::dtype_name(a.dtype())));
    const linalg::LUFactorization fused = linalg::lu_factor_ex(a);
    ferry::debug::CompositesOnly composition;
    const linalg::LUFactorization steps = linalg::lu_factor_ex(a);
    EXPECT_LT(max_abs(fused.LU - steps.LU), a.dtype() == DType::f32 ? 1e-4 : 1e-12);
    EXPECT_EQ(ints(fused.pivots), ints(steps.pivots));
    EXPECT_EQ(ints(fused.info), ints(steps.info));
  }
}
FERRY_TEST_ON_EACH_DEVICE(LinalgLU, FusedLUFactorAgreesWithTheComposition, fused_lu_factor)

// 40,000 rows: on lavapipe one step's row updates run past the loop budget (Note [Loop budget]
// in runtime/vulkan/vk_kernels.hpp), in both of Vulkan's forms (16 and 17 columns), so each
// step goes in ranges of rows over several dispatches. Held to the CPU's LAPACK.
void tall_lu_factor(const ferry::Device& dev) {
  if (dev.is_cpu()) GTEST_SKIP() << "the CPU's LAPACK is the reference";
  for (std::int64_t n : {16, 17}) {
    const Tensor a = random_matrix({40000, n}, std::uint64_t(30 + n), ferry::Device::cpu());
    const linalg::LUFactorization want = linalg::lu_factor_ex(a);
    const linalg::LUFactorization got = linalg::lu_factor_ex(a.to(dev));
    SCOPED_TRACE(n);
    EXPECT_LT(max_abs(got.LU.to(ferry::Device::cpu()) - want.LU), 1e-12);
    EXPECT_EQ(ints(got.pivots), ints(want.pivots));
    EXPECT_EQ(ints(got.info), ints(want.info));
  }
}
FERRY_TEST_ON_EACH_DEVICE(LinalgLU, TallMatricesInRangesOfRows, tall_lu_factor)

// Above order 64 a device whose kernels do not block themselves factors in halves of the
// columns, panels by its kernel and the rest by its triangular solve and matmul (blocked_lu_into
// in runtime/ops_lu.cpp, Note [Blocked factorizations and solves]). Square (65: panels of 32, 16
// and 17; 300: four levels), a batch, tall and wide, f32, and singular matrices (a
// zero column at orders 10, 75 (the last of the first half), 76 (the first of the second) and
// 150), held to the CPU's LAPACK: LU, pivots and info (f32: P L U = A); solve through it too. On
// such a device the profile shows the matmuls. The kernel alone at order 130 (two columns a thread,
// the multipliers in two chunks of rows), which lu_factor_ex no longer hands it whole, is called
// directly.
void blocked_lu_factor(const ferry::Device& dev) {
  if (dev.is_cpu()) GTEST_SKIP() << "the CPU's LAPACK is the reference";
  namespace prof = ferry::profiler;
  const ferry::Device cpu = ferry::Device::cpu();
  const ferry::DeviceImpl& impl = ferry::device_impl(dev);
  const bool blocks = impl.supports(ferry::OpId::lu_factor_ex, DType::f64) &&
                      impl.supports(ferry::OpId::solve_triangular, DType::f64) &&
                      !impl.capabilities().blocked_linalg;
  std::vector<Tensor> cases = {
      random_matrix({65, 65}, 60, cpu),   random_matrix({2, 130, 130}, 61, cpu),
      random_matrix({300, 300}, 62, cpu), random_matrix({200, 100}, 63, cpu),
      random_matrix({70, 150}, 64, cpu),  random_matrix({2, 100, 100}, 65, cpu).to(DType::f32)};
  for (std::int64_t order : {10, 75, 76, 150}) {
    std::vector<double> mask(150, 1.0);
    mask[std::size_t(order - 1)] = 0;
    cases.push_back(random_matrix({150, 150}, 66, cpu) * ferry::tensor(mask));
  }
  for (const Tensor& a : cases) {
    SCOPED_TRACE(ferry::shape_str(a.sizes()) + " " + std::string(ferry::dtype_name(a.dtype())));
    const linalg::LUFactorization want = linalg::lu_factor_ex(a);
    prof::Scope scope;
    const linalg::LUFactorization got = linalg::lu_factor_ex(a.to(dev));
    const prof::Profile p = scope.stop();
    if (a.dtype() == DType::f64) {
      EXPECT_LT(max_abs(got.LU.to(cpu) - want.LU), 1e-10);
      EXPECT_EQ(ints(got.pivots), ints(want.pivots));
    } else {
      // In f32 a GPU's rounding may pick the other of two near-equal pivots: P L U = A instead.
      const auto [pm, l, u] = ferry::lu_unpack(got.LU.to(cpu), got.pivots.to(cpu));
      EXPECT_LT(max_abs(ferry::matmul(pm, ferry::matmul(l, u)) - a), 1e-4);
    }
    EXPECT_EQ(ints(got.info), ints(want.info));
    EXPECT_EQ(got.pivots.dtype(), DType::i32);
    EXPECT_EQ(got.info.dtype(), DType::i32);
    if (blocks) EXPECT_GT(ferry_test::op_calls(p, "matmul"), 0u);
  }
  const Tensor a = random_matrix({200, 200}, 67, cpu), b = random_matrix({200, 3}, 68, cpu);
  EXPECT_LT(max_abs(linalg::solve(a.to(dev), b.to(dev)).to(cpu) - linalg::solve(a, b)), 1e-10);
  if (!impl.supports(ferry::OpId::lu_factor_ex, DType::f64)) return;
  const Tensor whole = random_matrix({130, 130}, 19, cpu);
  const linalg::LUFactorization want = linalg::lu_factor_ex(whole);
  const linalg::LUFactorization got{ferry::detail::new_tensor(whole.sizes(), DType::f64, dev),
                                    ferry::detail::new_tensor({130}, DType::i32, dev),
                                    ferry::detail::new_tensor({}, DType::i32, dev)};
  ferry::detail::run_kernel(ferry::OpId::lu_factor_ex, {whole.to(dev)},
                            {got.LU, got.pivots, got.info});
  EXPECT_LT(max_abs(got.LU.to(cpu) - want.LU), 1e-12);
  EXPECT_EQ(ints(got.pivots), ints(want.pivots));
  EXPECT_EQ(ints(got.info), ints(want.info));
}
FERRY_TEST_ON_EACH_DEVICE(LinalgLU, BlockedLUFactor, blocked_lu_factor)

// The CPU's lu_pivots_to_permutation kernel (a loop of swaps) against the composition's where-
// and-gather steps, through lu_unpack's P and lu_solve: pivots of every kind (none swapped, every
// one swapped, random), tall and wide; and one permutation worked by hand: pivots 2, 4, 3 of four
// rows swap rows 0 and 1, then 1 and 3: [1, 3, 2, 0], so P[1][0] = P[3][1] = P[2][2] = P[0][3] = 1.
TEST(LinalgLU, PivotsToPermutationKernelAgreesWithTheSteps) {
  const ferry::Device cpu = ferry::Device::cpu();
  const Tensor by_hand = ferry::tensor(std::vector<std::int64_t>{2, 4, 3}).to(DType::i32);
  const linalg::PLU p = ferry::lu_unpack(ferry::zeros({4, 3}, {.dtype = DType::f64}), by_hand);
  EXPECT_EQ(ferry_test::values(p.P),
            (std::vector<double>{0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0}));
  struct Case {
    std::int64_t m, n;
  };
  for (const Case& c : {Case{9, 7}, Case{5, 5}, Case{4, 6}}) {
    const std::int64_t k = std::min(c.m, c.n);
    SCOPED_TRACE(::testing::Message() << c.m << "x" << c.n);
    const Tensor at = ferry::arange(double(k), {.dtype = DType::i64});
    const Tensor drawn = ferry::randint(0, 1000, {64, k}, {.dtype = DType::i64});
    Tensor pivots = at + ferry::remainder(drawn, ferry::neg(at) + c.m) + 1;
    pivots = ferry::cat({pivots, (at + 1).unsqueeze(0),
                         ferry::full({1, k}, double(c.m), {.dtype = DType::i64})},
                        0)
                 .to(DType::i32);
    const Tensor lu = random_matrix({66, c.m, c.n}, 18, cpu);
    const Tensor fused = ferry::lu_unpack(lu, pivots).P;
    ferry::debug::CompositesOnly composition;
    EXPECT_EQ(ferry_test::values(fused), ferry_test::values(ferry::lu_unpack(lu, pivots).P));
  }
  const Tensor a = random_matrix({8, 5, 5}, 19, cpu), b = random_matrix({8, 5, 2}, 20, cpu);
  const auto [lu, pivots] = linalg::lu_factor(a);
  const Tensor fused = linalg::lu_solve(lu, pivots, b);
  ferry::debug::CompositesOnly composition;
  EXPECT_LT(max_abs(fused - linalg::lu_solve(lu, pivots, b)), 1e-13);
}

// lu_pivots_to_permutation's kernel on each device that has one (the CPU's loop, Vulkan's
// shader) against the swaps done here, on the host: batches of small matrices (solve's usual
// case), a tall one (rows > k), one large matrix, an empty batch, each pivot dtype the device
// computes. On a device whose compiler ends loops early (lavapipe, Note [Loop budget] in
// runtime/vulkan/vk_kernels.hpp), a permutation past the budget is refused, not cut short.
void pivots_to_permutation_kernel(const ferry::Device& dev) {
  using ferry::OpId;
  const auto run = [&](const Tensor& pivots, std::int64_t m) {
    ferry::Shape shape = pivots.sizes();
    shape.back() = m;
    const Tensor out = ferry::detail::new_tensor(shape, DType::i64, dev);
    ferry::detail::run_kernel(OpId::lu_pivots_to_permutation, {pivots}, {out},
                              ferry::Attrs{{"rows", m}});
    return out;
  };
  Tensor probe = ferry::zeros({1}, {.dtype = DType::i64, .device = dev});
  if (!ferry::detail::impl_of(probe).supports(OpId::lu_pivots_to_permutation, DType::i64))
    GTEST_SKIP() << dev.str() << " has no lu_pivots_to_permutation kernel";
  struct Case {
    std::int64_t batch, m, k;
  };
  for (const Case& c :
       {Case{5000, 4, 4}, Case{300, 9, 7}, Case{1, 3000, 3000}, Case{0, 4, 3}, Case{2, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << c.batch << " x " << c.m << " rows, " << c.k << " pivots");
    // Pivot j drawn from [j, m) as LAPACK's are, and from all of [0, m) (the contract allows it).
    const Tensor drawn = ferry::randint(0, 1 << 20, {c.batch, c.k}, {.dtype = DType::i64});
    const Tensor at = ferry::arange(double(c.k), {.dtype = DType::i64});
    for (const Tensor& pivots :
         {at + ferry::remainder(drawn, ferry::neg(at) + c.m), ferry::remainder(drawn, c.m)}) {
      const std::vector<std::int64_t> p = pivots.to_vector<std::int64_t>();
      std::vector<std::int64_t> want(std::size_t(c.batch * c.m));
      for (std::int64_t b = 0; b < c.batch; ++b) {
        std::int64_t* row = want.data() + b * c.m;
        for (std::int64_t r = 0; r < c.m; ++r) row[r] = r;
        for (std::int64_t j = 0; j < c.k; ++j) std::swap(row[j], row[p[std::size_t(b * c.k + j)]]);
      }
      for (DType dt : {DType::i64, DType::i32, DType::i16}) {
        if (!ferry::detail::impl_of(probe).supports(OpId::lu_pivots_to_permutation, dt) ||
            (dt == DType::i16 && c.m > 32767))
          continue;
        SCOPED_TRACE(ferry::dtype_name(dt));
        const Tensor perm = run(pivots.to(dt).to(dev), c.m);
        EXPECT_EQ(perm.sizes(), (ferry::Shape{c.batch, c.m}));
        EXPECT_EQ(ints(perm), want);
      }
    }
  }
  // One permutation whose invocation would run m + k + 1 = 80,001 loop iterations.
  const std::int64_t m = 40000;
  // Each step swaps row j with the last: the rows rotate by one, perm[0] = m - 1, perm[i] = i - 1.
  const Tensor pivots = ferry::full({m}, double(m - 1), {.dtype = DType::i64, .device = dev});
  bool budget = false;
  for (const ferry::DeviceInfo& d : ferry::devices())
    if (d.device == dev.str() && d.properties.count("loop_budget"))
      budget = d.properties.at("loop_budget") != "none";
  if (!budget) {
    std::vector<std::int64_t> want(static_cast<std::size_t>(m));
    for (std::int64_t i = 0; i < m; ++i) want[std::size_t(i)] = i == 0 ? m - 1 : i - 1;
    EXPECT_EQ(ints(run(pivots, m)), want);
    return;
  }
  try {
    run(pivots, m);
    FAIL() << "a permutation past the loop budget was accepted";
  } catch (const ferry::UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("Loop budget"), std::string::npos) << e.what();
  }
}
FERRY_TEST_ON_EACH_DEVICE(LinalgLU, PivotsToPermutationKernel, pivots_to_permutation_kernel)

TEST(LinalgLU, GradientsMatchFiniteDifferences) {
  using ferry_test::gradcheck;
  using V = std::vector<Tensor>;
  const ferry::Device cpu = ferry::Device::cpu();
  const Tensor a = random_matrix({2, 4, 4}, 9, cpu), b = random_matrix({4, 2}, 10, cpu);
  EXPECT_TRUE(gradcheck([](const V& in) { return linalg::lu_factor(in[0]).first; }, {a}));
  EXPECT_TRUE(gradcheck([](const V& in) { return linalg::lu(in[0]).L; }, {a}));
  EXPECT_TRUE(gradcheck([](const V& in) { return linalg::lu(in[0]).U; }, {a}));
  for (const ferry::Shape& shape : {ferry::Shape{5, 3}, ferry::Shape{3, 5}}) {
    const Tensor r = random_matrix(shape, 11, cpu);
    EXPECT_TRUE(gradcheck([](const V& in) { return linalg::lu_factor_ex(in[0]).LU; }, {r}));
  }
  // lu_solve in LU (a packed factorization with U's diagonal away from zero) and B.
  const Tensor packed = random_matrix({4, 4}, 12, cpu) + identity(4, cpu) * 2;
  const Tensor pivots = ferry::tensor(std::vector<std::int64_t>{3, 3, 4, 4}).to(DType::i32);
  for (bool adjoint : {false, true})
    EXPECT_TRUE(gradcheck(
        [&](const V& in) { return linalg::lu_solve(in[0], pivots, in[1], true, adjoint); },
        {packed, b}));
  EXPECT_TRUE(gradcheck([&](const V& in) { return linalg::lu_solve(in[0], pivots, in[1], false); },
                        {packed, b.transpose(0, 1).contiguous()}));
  EXPECT_TRUE(gradcheck([&](const V& in) { return ferry::lu_unpack(in[0], pivots).L; }, {packed}));
}

// f16 and bf16 are computed in f32 and rounded back; the pivots are int32 whatever A's dtype.
void check_half(const ferry::Device& dev) {
  const Tensor a = random_matrix({3, 3}, 13, dev).to(DType::f32);
  for (DType dt : {DType::f16, DType::bf16}) {
    const Tensor ah = a.to(dt);
    const auto [lu, pivots] = linalg::lu_factor(ah);
    EXPECT_EQ(lu.dtype(), dt);
    EXPECT_EQ(pivots.dtype(), DType::i32);
    EXPECT_EQ(values(lu), values(linalg::lu_factor(ah.to(DType::f32)).first.to(dt)));
    EXPECT_EQ(linalg::lu(ah).P.dtype(), dt);
  }
}
FERRY_TEST_ON_EACH_DEVICE(LinalgLU, HalfPrecisionComputesInF32, check_half)

// PyTorch's shapes for no matrices and for matrices with no rows.
void check_empty(const ferry::Device& dev) {
  const ferry::TensorOptions o{.dtype = DType::f32, .device = dev};
  const auto [lu, pivots, info] = linalg::lu_factor_ex(ferry::zeros({0, 3, 3}, o));
  EXPECT_EQ(lu.sizes(), (ferry::Shape{0, 3, 3}));
  EXPECT_EQ(pivots.sizes(), (ferry::Shape{0, 3}));
  EXPECT_EQ(info.sizes(), (ferry::Shape{0}));
  const auto [p, l, u] = linalg::lu(ferry::zeros({2, 0, 3}, o));
  EXPECT_EQ(p.sizes(), (ferry::Shape{2, 0, 0}));
  EXPECT_EQ(l.sizes(), (ferry::Shape{2, 0, 0}));
  EXPECT_EQ(u.sizes(), (ferry::Shape{2, 0, 3}));
  const Tensor none = ferry::zeros({0, 3}, {.dtype = DType::i32, .device = dev});
  EXPECT_EQ(linalg::lu_solve(ferry::zeros({0, 3, 3}, o), none, ferry::zeros({3, 2}, o)).sizes(),
            (ferry::Shape{0, 3, 2}));
}
FERRY_TEST_ON_EACH_DEVICE(LinalgLU, EmptyBatchesAndMatrices, check_empty)

void check_errors(const ferry::Device& dev) {
  const ferry::TensorOptions o{.dtype = DType::f32, .device = dev};
  const auto pivots_of = [&](std::vector<std::int64_t> v) {
    return ferry::tensor(v).to(DType::i32).to(dev);
  };
  // lu_factor refuses a zero on U's diagonal, naming it (and the batch element).
  const Tensor singular = ferry::tensor(std::vector<float>{1, 2, 2, 4}, {2, 2}).to(dev);
  EXPECT_FERRY_ERROR(linalg::lu_factor(singular), ferry::LinAlgError,
                     "torch.linalg.lu_factor: U[2,2] is zero", "linalg.lu_factor_ex(A, pivot)");
  const Tensor batch = ferry::stack({ferry::eye(2, std::nullopt, o), singular});
  EXPECT_FERRY_ERROR(linalg::lu_factor(batch), ferry::LinAlgError, "(Batch element 1): U[2,2]");
  EXPECT_FERRY_ERROR(linalg::lu_factor(ferry::zeros({3}, o)), ferry::ShapeError,
                     "at least 2 dimensions");
  EXPECT_FERRY_ERROR(linalg::lu(ferry::zeros({2, 2}, {.dtype = DType::i64, .device = dev})),
                     ferry::DTypeError);
  // lu_solve's operands.
  const Tensor lu = ferry::eye(3, std::nullopt, o), b = ferry::ones({3, 1}, o);
  const Tensor good = pivots_of({1, 2, 3});
  EXPECT_FERRY_ERROR(linalg::lu_solve(ferry::zeros({3, 4}, o), good, b), ferry::ShapeError,
                     "batches of square matrices", "3 by 4");
  EXPECT_FERRY_ERROR(linalg::lu_solve(lu, good.to(DType::i64), b), ferry::DTypeError,
                     "pivots should be a Tensor of scalar type torch.int32");
  EXPECT_FERRY_ERROR(linalg::lu_solve(lu, pivots_of({1, 2}), b), ferry::ShapeError,
                     "Expected pivots of shape [3]", "[2]");
  EXPECT_FERRY_ERROR(linalg::lu_solve(ferry::stack({lu, lu}), good, b), ferry::ShapeError,
                     "Expected pivots of shape [2, 3]");
  EXPECT_FERRY_ERROR(linalg::lu_solve(lu, pivots_of({1, 5, 3}), b), ferry::ValueError,
                     "between 1 and LU.size(-2) = 3", "one is 5");
  EXPECT_FERRY_ERROR(linalg::lu_solve(lu, pivots_of({0, 2, 3}), b), ferry::ValueError, "one is 0");
  EXPECT_FERRY_ERROR(linalg::lu_solve(lu, good, ferry::ones({3}, o)), ferry::ShapeError,
                     "B must have at least 2 dimensions");
  EXPECT_FERRY_ERROR(linalg::lu_solve(lu, good, ferry::ones({4, 1}, o)), ferry::ShapeError,
                     "AX = B (3x3 and 4x1)");
  EXPECT_FERRY_ERROR(linalg::lu_solve(lu, good, ferry::ones({1, 4}, o), false), ferry::ShapeError,
                     "XA = B (3x3 and 1x4)");
  EXPECT_FERRY_ERROR(
      linalg::lu_solve(lu, good, ferry::ones({3, 1}, {.dtype = DType::f64, .device = dev})),
      ferry::DTypeError, "Expected LU and B to have the same dtype");
  // lu_unpack's pivots.
  EXPECT_FERRY_ERROR(ferry::lu_unpack(lu, pivots_of({1, 4, 3})), ferry::ValueError,
                     "torch.lu_unpack: pivots must all be between 1 and");
  EXPECT_FERRY_ERROR(ferry::lu_unpack(ferry::zeros({4, 2}, o), pivots_of({1, 2, 3})),
                     ferry::ShapeError, "Expected pivots of shape [2]");
  EXPECT_FERRY_ERROR(ferry::lu_unpack(ferry::zeros({3}, o), good), ferry::ShapeError);
  // Unpacking only part: the rest empty, the pivots then unread.
  const linalg::PLU data = ferry::lu_unpack(lu, pivots_of({9, 9, 9}), true, false);
  EXPECT_EQ(data.P.numel(), 0);
  EXPECT_EQ(values(data.L), values(lu));
  EXPECT_EQ(ferry::lu_unpack(lu, good, false, true).U.numel(), 0);
}
FERRY_TEST_ON_EACH_DEVICE(LinalgLU, ErrorsArePyTorchs, check_errors)

}  // namespace
