// The factorizations and solvers of ferry/ops_linalg.hpp (linalg::cholesky, solve_triangular,
// solve, inv, det, slogdet; logdet, cholesky_solve; and qr, eigh, eigvalsh, lu_factor, lu,
// lu_solve, lu_unpack, whose other tests are in test_linalg_orthogonal.cpp and test_linalg_lu.cpp):
// against PyTorch's in f32 with gradients (tests/data/pytorch_linalg_reference.json, written by
// tools/gen_linalg_reference.py) on every device; in f64 against the identities they are defined by
// (L L^T = A, A X = B, A A^-1 = I, det(AB) = det A det B) and a closed form (Vandermonde's
// determinant) on every device; gradients against finite differences in f64; f16 and bf16, empty
// batches; the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "devices.hpp"
#include "dispatch.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
#include "ferry/profiler.hpp"
#include "gradcheck.hpp"
#include "linalg_test_util.hpp"
#include "op_test_util.hpp"
#include "torch_reference.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
namespace linalg = ferry::linalg;
using ferry_test::identity;
using ferry_test::max_abs;
using ferry_test::random_matrix;
using ferry_test::values;
using nlohmann::json;

Tensor run_case(const std::string& op, const json& a, const std::vector<Tensor>& in) {
  const auto flag = [&](const char* name, bool otherwise) {
    return a.contains(name) ? a[name].get<bool>() : otherwise;
  };
  if (op == "cholesky") return linalg::cholesky(in[0], flag("upper", false));
  if (op == "solve_triangular")
    return linalg::solve_triangular(in[0], in[1], a["upper"].get<bool>(), flag("left", true),
                                    flag("unitriangular", false));
  if (op == "solve") return linalg::solve(in[0], in[1], flag("left", true));
  if (op == "inv") return linalg::inv(in[0]);
  if (op == "det") return linalg::det(in[0]);
  if (op == "slogdet") {
    const auto [sign, logabsdet] = linalg::slogdet(in[0]);
    return ferry::stack({sign, logabsdet});
  }
  if (op == "logdet") return ferry::logdet(in[0]);
  if (op == "cholesky_solve") {  // (the factor through tril or triu, as the generator says)
    const bool upper = flag("upper", false);
    return ferry::cholesky_solve(in[0], upper ? ferry::triu(in[1]) : ferry::tril(in[1]), upper);
  }
  if (op == "qr") {  // Q and R flattened and joined (R alone in mode "r"), as the generator's
    const std::string mode = a["mode"].get<std::string>();
    const auto [q, r] = linalg::qr(in[0], mode);
    if (mode == "r") return r.flatten(-2);
    return ferry::cat({q.flatten(-2), r.flatten(-2)}, -1);
  }
  if (op == "eigh") {  // the eigenvalues as a row over the sign-fixed eigenvectors
    const auto [values, vectors] = linalg::eigh(in[0], a["uplo"].get<std::string>());
    return ferry::cat({values.unsqueeze(-2), ferry_test::sign_fixed(vectors)}, -2);
  }
  if (op == "eigvalsh") return linalg::eigvalsh(in[0], a["uplo"].get<std::string>());
  // The LU family, joined as the generator says.
  const auto plu_joined = [](const linalg::PLU& f) {
    return ferry::cat({f.P.flatten(-2), f.L.flatten(-2), f.U.flatten(-2)}, -1);
  };
  if (op == "lu_factor") {
    const auto [lu, pivots] = linalg::lu_factor(in[0]);
    return ferry::cat({lu.flatten(-2), pivots.to(lu.dtype())}, -1);
  }
  if (op == "lu") return plu_joined(linalg::lu(in[0]));
  if (op == "lu_solve") {
    const bool left = a["left"].get<bool>(), adjoint = a["adjoint"].get<bool>();
    if (a["from"] == "LU") return linalg::lu_solve(in[0], in[1], in[2], left, adjoint);
    const auto [lu, pivots] = linalg::lu_factor(in[0]);
    return linalg::lu_solve(lu, pivots, in[1], left, adjoint);
  }
  if (op == "lu_unpack") return plu_joined(ferry::lu_unpack(in[0], in[1]));
  ADD_FAILURE() << "unknown op " << op;
  return {};
}

void run_reference(const ferry::Device& dev) {
  ferry_test::run_output_reference_file("pytorch_linalg_reference.json", dev, 68, run_case);
}
FERRY_TEST_ON_EACH_DEVICE(Linalg, PyTorchReference, run_reference)

// An f64 symmetric positive-definite matrix (or batch) on dev: X X^T + I.
Tensor spd_matrix(const ferry::Shape& shape, std::uint64_t seed, const ferry::Device& dev) {
  const Tensor x = random_matrix(shape, seed, dev);
  return ferry::matmul(x, x.transpose(-2, -1)) +
         ferry::eye(shape.back(), std::nullopt, {.dtype = DType::f64, .device = dev});
}

void check_identities(const ferry::Device& dev) {
  // A batch of two 24 x 24 matrices: every step of every loop, on both at once.
  const std::int64_t n = 24;
  const Tensor a = spd_matrix({2, n, n}, 1, dev);
  const Tensor l = linalg::cholesky(a);
  EXPECT_LT(max_abs(ferry::matmul(l, l.transpose(-2, -1)) - a), 1e-12);
  EXPECT_EQ(max_abs(ferry::triu(l, 1)), 0.0);
  EXPECT_GT(ferry::amin(ferry::diagonal(l, 0, -2, -1)).item<double>(), 0.0);
  const Tensor u = linalg::cholesky(a, true);
  EXPECT_LT(max_abs(u - l.transpose(-2, -1)), 1e-13);

  const Tensor m = random_matrix({2, n, n}, 2, dev), b = random_matrix({2, n, 3}, 3, dev);
  const Tensor x = linalg::solve(m, b);
  EXPECT_LT(max_abs(ferry::matmul(m, x) - b), 1e-11);
  const Tensor xr = linalg::solve(m, b.transpose(-2, -1), false);
  EXPECT_LT(max_abs(ferry::matmul(xr, m) - b.transpose(-2, -1)), 1e-11);
  EXPECT_LT(max_abs(ferry::matmul(linalg::inv(m), m) - identity(n, dev)), 1e-11);

  const Tensor t = ferry::tril(m) + identity(n, dev) * 3;
  EXPECT_LT(max_abs(ferry::matmul(t, linalg::solve_triangular(t, b, false)) - b), 1e-12);
  EXPECT_LT(max_abs(ferry::cholesky_solve(b, l) - linalg::solve(a, b)), 1e-11);

  // det(M1 M2) = det M1 det M2; a triangular matrix's is its diagonal's product; slogdet and
  // logdet agree with det.
  const Tensor m2 = random_matrix({2, n, n}, 4, dev);
  const std::vector<double> d1 = values(linalg::det(m)), d2 = values(linalg::det(m2)),
                            d12 = values(linalg::det(ferry::matmul(m, m2)));
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(d12[i], d1[i] * d2[i], 1e-11 * std::abs(d12[i]));
  const std::vector<double> dt = values(linalg::det(t));
  const std::vector<double> diag_prod = values(ferry::prod(ferry::diagonal(t, 0, -2, -1), {-1}));
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(dt[i], diag_prod[i], 1e-12 * std::abs(dt[i]));
  const auto [sign, logabsdet] = linalg::slogdet(m);
  const std::vector<double> s = values(sign), la = values(logabsdet);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(s[i], d1[i] < 0 ? -1.0 : 1.0);
    EXPECT_NEAR(la[i], std::log(std::abs(d1[i])), 1e-12);
  }
  const std::vector<double> ld = values(ferry::logdet(a)), la2 = values(linalg::slogdet(a).second);
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(ld[i], la2[i], 1e-12);

  // Vandermonde: det [x_i^j] = prod over i < j of (x_j - x_i).
  const std::vector<double> xs = {0.5, -1.0, 1.5, 2.5, -3.0, 0.25};
  std::vector<double> v;
  double want = 1;
  for (std::size_t i = 0; i < xs.size(); ++i)
    for (std::size_t j = 0; j < xs.size(); ++j) {
      v.push_back(std::pow(xs[i], double(j)));
      if (i < j) want *= xs[j] - xs[i];
    }
  const std::int64_t k = std::int64_t(xs.size());
  const Tensor vm = ferry::tensor(v, {k, k}).to(dev);
  EXPECT_NEAR(linalg::det(vm).item<double>(), want, 1e-12 * std::abs(want));
}
FERRY_TEST_ON_EACH_DEVICE(Linalg, F64Identities, check_identities)

// Each device's fused cholesky (LAPACK's potrf on the CPU, shaders/cholesky.comp on Vulkan)
// against the composition on the same device (debug::CompositesOnly). Vulkan's kernel has two
// forms, a thread per matrix up to 16 columns (here a batch of 200 takes several workgroups)
// and a workgroup per matrix beyond (17; 40; 130, which on Vulkan goes in halves: Note [Blocked
// factorizations and solves]); f32 too. NaN above the diagonal is never read. A matrix that is not
// positive-definite (a negative pivot at order 8, a zero one at order 3, in either form) gives
// the composition's error.
void fused_cholesky(const ferry::Device& dev) {
  for (const Tensor& a : {spd_matrix({3, 6, 6}, 40, dev), spd_matrix({200, 4, 4}, 41, dev),
                          spd_matrix({1, 1}, 42, dev), spd_matrix({17, 17}, 43, dev),
                          spd_matrix({2, 40, 40}, 44, dev), spd_matrix({130, 130}, 45, dev),
                          spd_matrix({4, 5, 5}, 46, dev).to(DType::f32),
                          spd_matrix({33, 33}, 47, dev).to(DType::f32)}) {
    SCOPED_TRACE(ferry::shape_str(a.sizes()) + " " + std::string(ferry::dtype_name(a.dtype())));
    const double tol = a.dtype() == DType::f32 ? 1e-4 : 1e-12;
    const Tensor nan_above =
        a +
        ferry::triu(ferry::full(a.sizes(), std::nan(""), {.dtype = a.dtype(), .device = dev}), 1);
    const Tensor fused = linalg::cholesky(nan_above), upper = linalg::cholesky(a, true);
    ferry::debug::CompositesOnly composition;
    const Tensor steps = linalg::cholesky(a);
    EXPECT_LT(max_abs(fused - steps), tol);
    EXPECT_LT(max_abs(upper - steps.transpose(-2, -1)), tol);
  }
  for (std::int64_t n : {10, 20}) {
    std::vector<double> d(std::size_t(n), 1.0), z(std::size_t(n), 1.0);
    d[7] = -1;
    z[2] = 0;
    const auto diag = [&](const std::vector<double>& v) {
      return ferry::diag(ferry::tensor(v)).to(dev);
    };
    const Tensor bad = ferry::stack({identity(n, dev), diag(d), diag(z)});
    const Tensor at_order_3 = ferry::stack({diag(z), diag(d)});
    SCOPED_TRACE(n);
    for (int composed = 0; composed < 2; ++composed) {
      std::optional<ferry::debug::CompositesOnly> composition;
      if (composed) composition.emplace();
      EXPECT_FERRY_ERROR(linalg::cholesky(bad), ferry::LinAlgError,
                         "(Batch element 1): The factorization", "order 8 is not");
      EXPECT_FERRY_ERROR(linalg::cholesky(at_order_3), ferry::LinAlgError,
                         "(Batch element 0): The factorization", "order 3 is not");
    }
  }
}
FERRY_TEST_ON_EACH_DEVICE(Linalg, FusedCholeskyAgreesWithTheComposition, fused_cholesky)

// Order 300: on lavapipe the steps go in six dispatches within the loop budget (Note [Loop
// budget] in runtime/vulkan/vk_kernels.hpp; the count of a step's trips is generous, every owned
// column taken down every row), each going on from what the last left. The kernel is called
// directly: linalg::cholesky hands it no matrix above order 64 (Note [Blocked factorizations and
// solves]), but its contract takes any order. Held to the CPU's LAPACK.
void large_cholesky(const ferry::Device& dev) {
  if (dev.is_cpu()) GTEST_SKIP() << "the CPU's LAPACK is the reference";
  if (!ferry::device_impl(dev).supports(ferry::OpId::cholesky, DType::f64))
    GTEST_SKIP() << dev.str() << " has no cholesky kernel for f64";
  const Tensor a = spd_matrix({300, 300}, 48, ferry::Device::cpu());
  const Tensor l = ferry::detail::new_tensor(a.sizes(), DType::f64, dev);
  ferry::detail::run_kernel(ferry::OpId::cholesky, {a.to(dev)}, {l});
  EXPECT_LT(max_abs(l.to(ferry::Device::cpu()) - linalg::cholesky(a)), 1e-12);
}
FERRY_TEST_ON_EACH_DEVICE(Linalg, LargeCholeskyInSeveralDispatches, large_cholesky)

// Above order 64 a device whose kernels do not block themselves factors in halves (Note [Blocked
// factorizations and solves]): L11 by its kernel, L21 by a (blocked) triangular solve, L22 from
// the Schur complement by matmul. Odd orders (65: leaves of 32 and 33; 130; 300, three levels),
// a batch, f32, upper, NaN above the diagonal: held to the CPU's LAPACK on the whole matrix. A
// leading minor that is not positive-definite, in the first leaf, at a cut and in the last leaf,
// is named as the CPU names it. On such a device the profile shows the matmuls.
void blocked_cholesky(const ferry::Device& dev) {
  if (dev.is_cpu()) GTEST_SKIP() << "the CPU's LAPACK is the reference";
  namespace prof = ferry::profiler;
  const ferry::Device cpu = ferry::Device::cpu();
  const ferry::DeviceImpl& impl = ferry::device_impl(dev);
  const bool blocks =
      impl.supports(ferry::OpId::cholesky, DType::f64) && !impl.capabilities().blocked_linalg;
  for (const Tensor& a :
       {spd_matrix({65, 65}, 53, cpu), spd_matrix({2, 130, 130}, 54, cpu),
        spd_matrix({300, 300}, 55, cpu), spd_matrix({2, 100, 100}, 56, cpu).to(DType::f32)}) {
    SCOPED_TRACE(ferry::shape_str(a.sizes()) + " " + std::string(ferry::dtype_name(a.dtype())));
    const double tol = a.dtype() == DType::f32 ? 1e-4 : 1e-12;
    const Tensor nan_above =
        a + ferry::triu(ferry::full(a.sizes(), std::nan(""), {.dtype = a.dtype()}), 1);
    const Tensor want = linalg::cholesky(a);
    prof::Scope scope;
    const Tensor got = linalg::cholesky(nan_above.to(dev));
    const prof::Profile p = scope.stop();
    EXPECT_LT(max_abs(got.to(cpu) - want), tol);
    EXPECT_LT(max_abs(linalg::cholesky(a.to(dev), true).to(cpu) - want.transpose(-2, -1)), tol);
    if (blocks) EXPECT_GT(ferry_test::op_calls(p, "matmul"), 0u);
  }
  const Tensor spd = spd_matrix({150, 150}, 57, cpu);
  const std::vector<double> diagonal = values(ferry::diagonal(spd, 0, -2, -1));
  for (std::int64_t order : {10, 75, 76, 150}) {
    SCOPED_TRACE(order);
    // A negative entry on the diagonal at `order`: the leading minors before it stay
    // positive-definite.
    std::vector<double> shift(150, 0.0);
    shift[std::size_t(order - 1)] = diagonal[std::size_t(order - 1)] + 1;
    const Tensor bad = spd - ferry::diag(ferry::tensor(shift));
    EXPECT_FERRY_ERROR(linalg::cholesky(bad), ferry::LinAlgError,
                       "order " + std::to_string(order) + " is not");
    EXPECT_FERRY_ERROR(linalg::cholesky(bad.to(dev)), ferry::LinAlgError,
                       "order " + std::to_string(order) + " is not");
  }
}
FERRY_TEST_ON_EACH_DEVICE(Linalg, BlockedCholesky, blocked_cholesky)

// Order 400: on lavapipe a triangular solve's steps pass the loop budget in both of Vulkan's
// forms, a thread a column (64 columns) and a workgroup a column (3), and go in several
// dispatches; a thread a column walks every row of its column, so there a count of its loop
// trips that fell short by n (the loops' exits and barriers) dropped the last updates. The kernel
// is called directly: linalg::solve_triangular hands it no triangle above order 64 (Note
// [Blocked factorizations and solves]), but its contract takes any order. Held to the CPU's trsm.
void large_triangular_solve(const ferry::Device& dev) {
  if (dev.is_cpu()) GTEST_SKIP() << "the CPU's trsm is the reference";
  if (!ferry::device_impl(dev).supports(ferry::OpId::solve_triangular, DType::f64))
    GTEST_SKIP() << dev.str() << " has no solve_triangular kernel for f64";
  const ferry::Device cpu = ferry::Device::cpu();
  const Tensor t = ferry::tril(random_matrix({400, 400}, 49, cpu)) / 400 + identity(400, cpu);
  for (std::int64_t cols : {64, 3}) {
    SCOPED_TRACE(cols);
    const Tensor b = random_matrix({400, cols}, 50, cpu);
    const Tensor on_dev = b.to(dev);
    const Tensor x = ferry::detail::new_tensor(b.sizes(), DType::f64, dev);
    ferry::detail::run_kernel(ferry::OpId::solve_triangular, {t.to(dev), on_dev}, {x},
                              {{"upper", false}, {"left", true}, {"unitriangular", false}});
    EXPECT_LT(max_abs(x.to(cpu) - linalg::solve_triangular(t, b, false)), 1e-12);
  }
}
FERRY_TEST_ON_EACH_DEVICE(Linalg, LargeTriangularSolveInSeveralDispatches, large_triangular_solve)

// Above order 64 a device whose kernel does not block itself solves in halves, the diagonal
// blocks by its kernel and the rest by matmul (Note [Blocked factorizations and solves] in
// runtime/ops_factorize.cpp). Every form (upper, left, unit), odd orders (65: leaves of 16 and
// 17; 130; 300, three levels), A one matrix against B's batch and A's batch against one B, NaN in
// A's other triangle (and on its diagonal for unit): held to the CPU's trsm on whole triangles.
// On such a device the profile shows the matmuls.
void blocked_triangular_solve(const ferry::Device& dev) {
  if (dev.is_cpu()) GTEST_SKIP() << "the CPU's trsm is the reference";
  namespace prof = ferry::profiler;
  const ferry::Device cpu = ferry::Device::cpu();
  const ferry::DeviceImpl& impl = ferry::device_impl(dev);
  const bool blocks = impl.supports(ferry::OpId::solve_triangular, DType::f64) &&
                      !impl.capabilities().blocked_linalg;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Shapes {
    ferry::Shape a, b;
  };
  for (const Shapes& c : {Shapes{{65, 65}, {2, 65, 3}}, Shapes{{2, 130, 130}, {130, 130}},
                          Shapes{{300, 300}, {300, 5}}}) {
    const std::int64_t n = c.a.back();
    const Tensor base = random_matrix(c.a, 51, cpu) / double(n) + identity(n, cpu);
    const Tensor rhs = random_matrix(c.b, 52, cpu);
    for (int form = 0; form < 8; ++form) {
      const bool upper = form & 1, left = form & 2, unit = form & 4;
      SCOPED_TRACE(::testing::Message() << "A " << ferry::shape_str(c.a) << " upper " << upper
                                        << " left " << left << " unit " << unit);
      // NaN where the solve must not look: the other triangle, and the diagonal for unit.
      const Tensor other = upper ? ferry::tril(ferry::ones_like(base), unit ? 0 : -1)
                                 : ferry::triu(ferry::ones_like(base), unit ? 0 : 1);
      const Tensor a = ferry::where(ferry::gt(other, 0.0), nan, base);
      const Tensor b = left ? rhs : rhs.transpose(-2, -1);
      const Tensor want = linalg::solve_triangular(a, b, upper, left, unit);
      prof::Scope scope;
      const Tensor got = linalg::solve_triangular(a.to(dev), b.to(dev), upper, left, unit);
      ferry::synchronize(dev);
      const prof::Profile p = scope.stop();
      EXPECT_EQ(got.sizes(), want.sizes());
      EXPECT_LT(max_abs(got.to(cpu) - want), 1e-12);
      if (blocks) EXPECT_GT(ferry_test::op_calls(p, "matmul"), 0u);
    }
  }
}
FERRY_TEST_ON_EACH_DEVICE(Linalg, BlockedTriangularSolve, blocked_triangular_solve)

// Every element of a batch pivots on its own rows: the second matrix needs a swap at each
// step, the first none.
void check_pivoting(const ferry::Device& dev) {
  const Tensor a = ferry::tensor(std::vector<double>{4, 1, 0, 1, 3, 1, 0, 1, 2,  //
                                                     0, 0, 1, 0, 2, 0, 3, 0, 0},
                                 {2, 3, 3})
                       .to(dev);
  const std::vector<double> d = values(linalg::det(a));
  EXPECT_NEAR(d[0], 18.0, 1e-12);
  EXPECT_NEAR(d[1], -6.0, 1e-12);  // rows (3 0 0), (0 2 0), (0 0 1): one swap
  const Tensor b = ferry::tensor(std::vector<double>{1, 2, 3}, {3}).to(dev);
  const Tensor x = linalg::solve(a, b);
  EXPECT_LT(max_abs(ferry::matmul(a, x.unsqueeze(-1)).squeeze(-1) - b), 1e-13);
  EXPECT_EQ(x.sizes(), (ferry::Shape{2, 3}));
}
FERRY_TEST_ON_EACH_DEVICE(Linalg, EachMatrixPivotsOnItsOwn, check_pivoting)

TEST(Linalg, GradientsMatchFiniteDifferences) {
  using ferry_test::gradcheck;
  using V = std::vector<Tensor>;
  const ferry::Device cpu = ferry::Device::cpu();
  const Tensor x = random_matrix({2, 4, 4}, 5, cpu), b = random_matrix({2, 4, 2}, 6, cpu);
  const auto spd = [](const Tensor& y) {
    return ferry::matmul(y, y.transpose(-2, -1)) + identity(y.size(-1), y.device());
  };
  // cholesky through X X^T + I, as PyTorch's gradcheck takes it (its gradient is symmetric).
  EXPECT_TRUE(gradcheck([&](const V& in) { return linalg::cholesky(spd(in[0])); }, {x}));
  EXPECT_TRUE(gradcheck([&](const V& in) { return linalg::cholesky(spd(in[0]), true); }, {x}));
  const auto shifted = [](const Tensor& y) { return y + identity(y.size(-1), y.device()) * 2; };
  EXPECT_TRUE(gradcheck([&](const V& in) { return linalg::solve(in[0], in[1]); }, {x, b}));
  EXPECT_TRUE(gradcheck(
      [&](const V& in) { return linalg::solve_triangular(shifted(in[0]), in[1], true); }, {x, b}));
  EXPECT_TRUE(gradcheck(
      [&](const V& in) {
        return linalg::solve_triangular(in[0], in[1].transpose(-2, -1), false, false, true);
      },
      {x, b}));
  EXPECT_TRUE(gradcheck([&](const V& in) { return linalg::inv(in[0]); }, {x}));
  EXPECT_TRUE(gradcheck([&](const V& in) { return linalg::det(in[0]); }, {x}));
  EXPECT_TRUE(gradcheck([&](const V& in) { return linalg::slogdet(in[0]).second; }, {x}));
  EXPECT_TRUE(gradcheck([&](const V& in) { return ferry::logdet(spd(in[0])); }, {x}));
  EXPECT_TRUE(gradcheck(
      [&](const V& in) { return ferry::cholesky_solve(in[1], shifted(ferry::tril(in[0]))); },
      {x, b}));
}

// f16 and bf16 are computed in f32 and rounded back; the result is the f32 one, rounded.
void check_half(const ferry::Device& dev) {
  const Tensor a = spd_matrix({3, 3}, 7, dev).to(DType::f32);
  for (DType dt : {DType::f16, DType::bf16}) {
    const Tensor ah = a.to(dt);
    const Tensor l = linalg::cholesky(ah);
    EXPECT_EQ(l.dtype(), dt);
    EXPECT_EQ(values(l), values(linalg::cholesky(ah.to(DType::f32)).to(dt)));
    EXPECT_EQ(linalg::det(ah).dtype(), dt);
    EXPECT_EQ(linalg::inv(ah).dtype(), dt);
  }
}
FERRY_TEST_ON_EACH_DEVICE(Linalg, HalfPrecisionComputesInF32, check_half)

void check_empty(const ferry::Device& dev) {
  const ferry::TensorOptions o{.dtype = DType::f32, .device = dev};
  // No matrices: empty results of the batch's shape.
  EXPECT_EQ(linalg::det(ferry::zeros({0, 3, 3}, o)).sizes(), (ferry::Shape{0}));
  EXPECT_EQ(linalg::inv(ferry::zeros({2, 0, 4, 4}, o)).sizes(), (ferry::Shape{2, 0, 4, 4}));
  EXPECT_EQ(linalg::cholesky(ferry::zeros({0, 2, 2}, o)).sizes(), (ferry::Shape{0, 2, 2}));
  EXPECT_EQ(linalg::solve(ferry::zeros({0, 2, 2}, o), ferry::zeros({0, 2, 1}, o)).sizes(),
            (ferry::Shape{0, 2, 1}));
  // 0 x 0 matrices: det 1, log|det| 0, as in PyTorch.
  EXPECT_EQ(values(linalg::det(ferry::zeros({2, 0, 0}, o))), (std::vector<double>{1, 1}));
  EXPECT_EQ(values(linalg::slogdet(ferry::zeros({0, 0}, o)).second), (std::vector<double>{0}));
  EXPECT_EQ(linalg::cholesky(ferry::zeros({0, 0}, o)).sizes(), (ferry::Shape{0, 0}));
}
FERRY_TEST_ON_EACH_DEVICE(Linalg, EmptyBatchesAndMatrices, check_empty)

void check_errors(const ferry::Device& dev) {
  const ferry::TensorOptions o{.dtype = DType::f32, .device = dev};
  // Not positive-definite: the first failing leading minor, and the batch element.
  const Tensor indefinite = ferry::tensor(std::vector<float>{4, 2, 2, 1}, {2, 2}).to(dev);
  EXPECT_FERRY_ERROR(linalg::cholesky(indefinite), ferry::LinAlgError,
                     "linalg.cholesky: The factorization could not be completed",
                     "leading minor of order 2 is not positive-definite");
  const Tensor batch =
      ferry::stack({ferry::eye(2, std::nullopt, o), -ferry::eye(2, std::nullopt, o)});
  EXPECT_FERRY_ERROR(linalg::cholesky(batch), ferry::LinAlgError, "(Batch element 1)", "order 1");
  // LinAlgError is a ValueError.
  EXPECT_THROW(linalg::cholesky(batch), ferry::ValueError);
  // Singular.
  const Tensor singular = ferry::tensor(std::vector<float>{1, 2, 2, 4}, {2, 2}).to(dev);
  const Tensor b = ferry::ones({2, 1}, o);
  EXPECT_FERRY_ERROR(linalg::solve(singular, b), ferry::LinAlgError, "input matrix is singular");
  EXPECT_FERRY_ERROR(linalg::inv(singular), ferry::LinAlgError, "The diagonal element 2 is zero");
  EXPECT_EQ(linalg::det(singular).item<double>(), 0.0);
  // Shapes.
  EXPECT_FERRY_ERROR(linalg::det(ferry::zeros({3}, o)), ferry::ShapeError,
                     "must have at least 2 dimensions");
  EXPECT_FERRY_ERROR(linalg::inv(ferry::zeros({2, 3}, o)), ferry::ShapeError,
                     "batches of square matrices", "2 by 3");
  EXPECT_FERRY_ERROR(linalg::solve(ferry::eye(3, std::nullopt, o), ferry::ones({2, 1}, o)),
                     ferry::ShapeError, "Incompatible shapes of A and B", "3x3 and 2x1");
  EXPECT_FERRY_ERROR(
      linalg::solve_triangular(ferry::eye(3, std::nullopt, o), ferry::ones({3}, o), false),
      ferry::ShapeError, "B must have at least 2 dimensions");
  EXPECT_FERRY_ERROR(linalg::solve(ferry::zeros({2, 3, 3}, o), ferry::zeros({4, 3, 1}, o)),
                     ferry::ShapeError);
  EXPECT_FERRY_ERROR(ferry::cholesky_solve(ferry::ones({3, 1}, o), ferry::eye(2, std::nullopt, o)),
                     ferry::ShapeError, "Incompatible matrix sizes");
  // Dtypes.
  EXPECT_FERRY_ERROR(linalg::det(ferry::zeros({2, 2}, {.dtype = DType::i64, .device = dev})),
                     ferry::DTypeError);
  EXPECT_FERRY_ERROR(linalg::solve(ferry::eye(2, std::nullopt, o),
                                   ferry::ones({2, 1}, {.dtype = DType::f64, .device = dev})),
                     ferry::DTypeError, "Expected A and B to have the same dtype");
  EXPECT_FERRY_ERROR(linalg::cholesky(Tensor()), ferry::Error);
}
FERRY_TEST_ON_EACH_DEVICE(Linalg, ErrorsArePyTorchs, check_errors)

}  // namespace
