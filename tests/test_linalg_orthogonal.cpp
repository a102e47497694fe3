// linalg::qr, eigh and eigvalsh (ferry/ops_linalg.hpp) beyond their PyTorch reference cases
// (test_linalg.cpp): in f64 on every device against what they are defined by (A = Q R with Q's
// columns orthonormal and R upper triangular; A V = V diag(lambda) with V orthogonal and lambda
// ascending), LAPACK's choices (no reflection where a column is already zero below the
// diagonal), a closed form (the eigenvalues of the second-difference matrix), repeated
// eigenvalues; gradients against finite differences in f64; f16, empty batches; the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
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

Tensor symmetric_matrix(const ferry::Shape& shape, std::uint64_t seed, const ferry::Device& dev) {
  const Tensor x = random_matrix(shape, seed, dev);
  return x + x.transpose(-2, -1);
}

void check_qr(const ferry::Device& dev) {
  // Square, tall and wide, batched: every reflection of every matrix at once.
  for (const ferry::Shape& shape :
       {ferry::Shape{2, 7, 7}, ferry::Shape{3, 9, 4}, ferry::Shape{2, 4, 9}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    const Tensor a = random_matrix(shape, 1, dev);
    const std::int64_t m = shape[1], n = shape[2], k = std::min(m, n);
    const auto [q, r] = linalg::qr(a);
    EXPECT_EQ(q.sizes(), (ferry::Shape{shape[0], m, k}));
    EXPECT_EQ(r.sizes(), (ferry::Shape{shape[0], k, n}));
    EXPECT_LT(max_abs(ferry::matmul(q, r) - a), 1e-13);
    EXPECT_LT(max_abs(ferry::matmul(q.transpose(-2, -1), q) - identity(k, dev)), 1e-13);
    EXPECT_EQ(max_abs(ferry::tril(r, -1)), 0.0);
    // complete: Q square and orthogonal, R [m, n]; "r": reduced mode's R, Q empty.
    const auto [qc, rc] = linalg::qr(a, "complete");
    EXPECT_EQ(qc.sizes(), (ferry::Shape{shape[0], m, m}));
    EXPECT_LT(max_abs(ferry::matmul(qc, rc) - a), 1e-13);
    EXPECT_LT(max_abs(ferry::matmul(qc.transpose(-2, -1), qc) - identity(m, dev)), 1e-13);
    // (To rounding: LAPACK's orgqr forms k columns and m columns in different blocks.)
    EXPECT_LT(max_abs(qc.narrow(-1, 0, k) - q), 1e-14);
    const auto [q_none, r_only] = linalg::qr(a, "r");
    EXPECT_EQ(q_none.numel(), 0);
    EXPECT_EQ(values(r_only), values(r));
  }
  // LAPACK makes no reflection where the column is already zero below the diagonal, so an upper
  // triangular A is its own R (negative diagonal entries included) and Q is the identity.
  const Tensor t = ferry::tensor(std::vector<double>{-2, 1, 3, 0, 4, -1, 0, 0, -5}, {3, 3}).to(dev);
  const auto [qt, rt] = linalg::qr(t);
  EXPECT_EQ(values(rt), values(t));
  EXPECT_EQ(values(qt), values(identity(3, dev)));
  // Otherwise R's diagonal is -sign(a_jj) |column|: [[3], [4]] gives R = -5.
  const auto [q1, r1] = linalg::qr(ferry::tensor(std::vector<double>{3, 4}, {2, 1}).to(dev));
  EXPECT_NEAR(r1.item<double>(), -5.0, 1e-15);
  EXPECT_LT(max_abs(q1 - ferry::tensor(std::vector<double>{-0.6, -0.8}, {2, 1}).to(dev)), 1e-15);
}
FERRY_TEST_ON_EACH_DEVICE(LinalgOrthogonal, QrIdentities, check_qr)

void check_eigh(const ferry::Device& dev) {
  const std::int64_t n = 12;
  const Tensor a = symmetric_matrix({2, n, n}, 2, dev);
  const auto [w, v] = linalg::eigh(a);
  EXPECT_EQ(w.sizes(), (ferry::Shape{2, n}));
  EXPECT_EQ(v.sizes(), (ferry::Shape{2, n, n}));
  EXPECT_LT(max_abs(ferry::matmul(a, v) - v * w.unsqueeze(-2)), 1e-12);
  EXPECT_LT(max_abs(ferry::matmul(v.transpose(-2, -1), v) - identity(n, dev)), 1e-12);
  const std::vector<double> ws = values(w);
  for (std::size_t i = 1; i < ws.size(); ++i)
    if (i % n != 0) EXPECT_LE(ws[i - 1], ws[i]) << "ascending, at " << i;
  EXPECT_EQ(values(linalg::eigvalsh(a)), ws);
  // Only the triangle named is read: junk in the other changes nothing.
  const Tensor junk = random_matrix({2, n, n}, 3, dev) * 100;
  EXPECT_EQ(values(linalg::eigh(ferry::tril(a) + ferry::triu(junk, 1)).first), ws);
  EXPECT_LT(max_abs(linalg::eigh(ferry::triu(a) + ferry::tril(junk, -1), "U").first - w), 1e-13);

  // The second-difference matrix (2 on the diagonal, -1 beside it):
  // lambda_k = 2 - 2 cos(k pi / (n + 1)), k = 1..n.
  const Tensor ones = ferry::ones({n - 1}, {.dtype = DType::f64, .device = dev});
  const Tensor lap = identity(n, dev) * 2 - ferry::diag(ones, 1) - ferry::diag(ones, -1);
  const std::vector<double> lw = values(linalg::eigvalsh(lap));
  for (std::int64_t k = 1; k <= n; ++k)
    EXPECT_NEAR(lw[std::size_t(k - 1)],
                2 - 2 * std::cos(double(k) * std::numbers::pi / double(n + 1)), 1e-13);

  // Repeated eigenvalues: the all-ones matrix has 0 four times and 5 once; its eigenvectors are
  // still orthonormal.
  const Tensor all_ones = ferry::ones({5, 5}, {.dtype = DType::f64, .device = dev});
  const auto [ow, ov] = linalg::eigh(all_ones);
  EXPECT_LT(max_abs(ow - ferry::tensor(std::vector<double>{0, 0, 0, 0, 5}).to(dev)), 1e-13);
  EXPECT_LT(max_abs(ferry::matmul(ov.transpose(-2, -1), ov) - identity(5, dev)), 1e-13);
  EXPECT_LT(max_abs(ferry::matmul(all_ones, ov) - ov * ow.unsqueeze(-2)), 1e-13);
}
FERRY_TEST_ON_EACH_DEVICE(LinalgOrthogonal, EighIdentities, check_eigh)

// The CPU's fused eigh (LAPACK's syevd where the BLAS has it: Note [LAPACK through OpenBLAS])
// serves every call on the CPU, a gradient recorded or not (the rotations never record one); it
// agrees with the Jacobi rotations every other device runs (debug::CompositesOnly): eigenvalues,
// sign-fixed eigenvectors of distinct eigenvalues, and the gradient attached to either.
TEST(LinalgOrthogonal, FusedEighAgreesWithTheComposition) {
  const ferry::Device cpu = ferry::Device::cpu();
  const Tensor a = symmetric_matrix({3, 9, 9}, 21, cpu).requires_grad_();
  const Tensor upstream = random_matrix({3, 9}, 22, cpu);
  const auto run = [&] {
    a.set_grad({});
    const auto [w, v] = linalg::eigh(a);
    ferry::sum(w * upstream).backward();
    return std::vector<Tensor>{w.detach(), ferry_test::sign_fixed(v.detach()), a.grad()};
  };
  const std::vector<Tensor> fused = run();
  ferry::debug::CompositesOnly composition;
  const std::vector<Tensor> steps = run();
  for (std::size_t i = 0; i < fused.size(); ++i)
    EXPECT_LT(max_abs(fused[i] - steps[i]), 1e-12) << i;
}

// The CPU's fused qr (LAPACK's geqrf and orgqr: Note [LAPACK through OpenBLAS]) runs where no
// gradient is recorded; its reflections are the composition's, so Q and R agree with it entry
// for entry, signs included, in every mode and shape, a skipped reflection (a column already zero
// below the diagonal) and a zero matrix included.
TEST(LinalgOrthogonal, FusedQrAgreesWithTheComposition) {
  const ferry::Device cpu = ferry::Device::cpu();
  const Tensor x = random_matrix({6, 6}, 23, cpu);
  const Tensor skipped = ferry::triu(x) + ferry::tril(x, -3);  // column 0..2 partly zero below
  for (const Tensor& a : {random_matrix({3, 6, 6}, 24, cpu), random_matrix({7, 4}, 25, cpu),
                          random_matrix({2, 4, 7}, 26, cpu), ferry::triu(x), skipped,
                          ferry::zeros({3, 2}, {.dtype = DType::f64})}) {
    for (const char* mode : {"reduced", "complete", "r"}) {
      SCOPED_TRACE(ferry::shape_str(a.sizes()) + " " + mode);
      const auto [q, r] = linalg::qr(a, mode);
      ferry::debug::CompositesOnly composition;
      const auto [q_steps, r_steps] = linalg::qr(a, mode);
      EXPECT_EQ(q.sizes(), q_steps.sizes());
      EXPECT_EQ(r.sizes(), r_steps.sizes());
      if (q.numel() > 0) EXPECT_LT(max_abs(q - q_steps), 1e-12);
      EXPECT_LT(max_abs(r - r_steps), 1e-12);
    }
  }
  // A gradient recorded runs the composition (the kernel's results have no history); f32 too.
  const Tensor a = random_matrix({5, 3}, 27, cpu).to(DType::f32);
  EXPECT_NE(linalg::qr(a.detach().requires_grad_()).second.grad_fn_name(), "");
  const Tensor q = linalg::qr(a).first;
  ferry::debug::CompositesOnly composition;
  EXPECT_LT(max_abs(q - linalg::qr(a).first), 1e-5);
}

TEST(LinalgOrthogonal, GradientsMatchFiniteDifferences) {
  using ferry_test::gradcheck;
  using V = std::vector<Tensor>;
  const ferry::Device cpu = ferry::Device::cpu();
  for (const ferry::Shape& shape :
       {ferry::Shape{2, 4, 4}, ferry::Shape{5, 3}, ferry::Shape{3, 5}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    const Tensor a = random_matrix(shape, 4, cpu);
    EXPECT_TRUE(gradcheck([](const V& in) { return linalg::qr(in[0]).first; }, {a}));
    EXPECT_TRUE(gradcheck([](const V& in) { return linalg::qr(in[0]).second; }, {a}));
  }
  // eigh: through A + A^T (the gradient is symmetric), the values and the sign-fixed vectors.
  const Tensor x = random_matrix({2, 4, 4}, 5, cpu);
  const auto sym = [](const Tensor& y) { return y + y.transpose(-2, -1); };
  EXPECT_TRUE(gradcheck([&](const V& in) { return linalg::eigh(sym(in[0])).first; }, {x}));
  EXPECT_TRUE(gradcheck(
      [&](const V& in) { return ferry_test::sign_fixed(linalg::eigh(sym(in[0]), "U").second); },
      {x}));
  EXPECT_TRUE(gradcheck([&](const V& in) { return linalg::eigvalsh(sym(in[0])); }, {x}));
}

// f16 is computed in f32 and rounded back; empty batches and 0 x 0 matrices.
void check_half_and_empty(const ferry::Device& dev) {
  const Tensor a = symmetric_matrix({4, 4}, 6, dev).to(DType::f32);
  const Tensor ah = a.to(DType::f16);
  EXPECT_EQ(values(linalg::eigvalsh(ah)),
            values(linalg::eigvalsh(ah.to(DType::f32)).to(DType::f16)));
  EXPECT_EQ(linalg::qr(ah).first.dtype(), DType::f16);
  const ferry::TensorOptions o{.dtype = DType::f32, .device = dev};
  const auto [q, r] = linalg::qr(ferry::zeros({0, 3, 2}, o));
  EXPECT_EQ(q.sizes(), (ferry::Shape{0, 3, 2}));
  EXPECT_EQ(r.sizes(), (ferry::Shape{0, 2, 2}));
  const auto [w, v] = linalg::eigh(ferry::zeros({0, 3, 3}, o));
  EXPECT_EQ(w.sizes(), (ferry::Shape{0, 3}));
  EXPECT_EQ(v.sizes(), (ferry::Shape{0, 3, 3}));
  EXPECT_EQ(linalg::eigh(ferry::zeros({0, 0}, o)).second.sizes(), (ferry::Shape{0, 0}));
  EXPECT_EQ(values(linalg::eigvalsh(ferry::full({1, 1}, -2.5, o))), (std::vector<double>{-2.5}));
}
FERRY_TEST_ON_EACH_DEVICE(LinalgOrthogonal, HalfPrecisionAndEmpty, check_half_and_empty)

void check_errors(const ferry::Device& dev) {
  const ferry::TensorOptions o{.dtype = DType::f32, .device = dev};
  EXPECT_FERRY_ERROR(linalg::qr(ferry::eye(2, std::nullopt, o), "full"), ferry::ValueError,
                     "qr received unrecognized mode 'full'");
  EXPECT_FERRY_ERROR(linalg::eigh(ferry::eye(2, std::nullopt, o), "X"), ferry::ValueError,
                     "Expected UPLO argument to be 'L' or 'U', but got X");
  EXPECT_FERRY_ERROR(linalg::eigh(ferry::zeros({2, 3}, o)), ferry::ShapeError,
                     "linalg.eigh: A must be batches of square matrices", "2 by 3");
  EXPECT_FERRY_ERROR(linalg::qr(ferry::zeros({3}, o)), ferry::ShapeError,
                     "must have at least 2 dimensions");
  EXPECT_FERRY_ERROR(linalg::eigvalsh(ferry::zeros({2, 2}, {.dtype = DType::i32, .device = dev})),
                     ferry::DTypeError);
  // Entries whose squares overflow f32 are no error: each matrix is scaled first.
  const Tensor huge = ferry::tensor(std::vector<float>{3e30f, 1e30f, 1e30f, 3e30f}, {2, 2}).to(dev);
  const std::vector<double> hw = values(linalg::eigvalsh(huge));
  EXPECT_NEAR(hw[0], 2e30, 2e24);
  EXPECT_NEAR(hw[1], 4e30, 4e24);
  // A NaN never converges: LinAlgError, as LAPACK's failure to converge is in PyTorch.
  Tensor nan = ferry::eye(3, std::nullopt, o);
  nan = ferry::where(ferry::eq(nan, 0.0), ferry::Scalar(std::nan("")), nan);
  EXPECT_FERRY_ERROR(linalg::eigh(nan), ferry::LinAlgError, "failed to converge");
}
FERRY_TEST_ON_EACH_DEVICE(LinalgOrthogonal, ErrorsArePyTorchs, check_errors)

}  // namespace
