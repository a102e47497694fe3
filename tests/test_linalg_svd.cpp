// linalg::svd, svdvals, pinv, matrix_rank, matrix_norm and lstsq (ferry/ops_linalg.hpp): PyTorch
// 1.13's values and gradients (tests/data/pytorch_svd_reference.json, written by
// tools/gen_svd_reference.py) on every device; in f64 on every device what they are defined by
// (A = U diag(S) Vh with U and Vh orthonormal and S descending, the Penrose conditions, the
// normal equations), rank-deficient and zero matrices, full_matrices' completion, LAPACK's
// gesdd against the Jacobi rotations on the CPU; gradients and second-order gradients against
// finite differences; f16, empty matrices; the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
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

// U's first k columns and Vh's first k rows, each singular pair's sign chosen so that U's column
// has its entry of largest magnitude positive (tools/gen_svd_reference.py fixes PyTorch's so).
std::pair<Tensor, Tensor> sign_fixed(const linalg::SVD& f) {
  const std::int64_t k = f.S.size(-1);
  const Tensor u = f.U.narrow(-1, 0, k), vh = f.Vh.narrow(-2, 0, k);
  const Tensor at = ferry::argmax(ferry::abs(u), -2, true);
  const Tensor sign = ferry::sign(ferry::gather(u, -2, at));
  return {u * sign, vh * sign.transpose(-2, -1)};
}

Tensor run_case(const std::string& op, const json& a, const std::vector<Tensor>& in) {
  const auto number = [&](const char* name) {
    return a.contains(name) ? std::optional<double>(a[name].get<double>()) : std::nullopt;
  };
  const bool hermitian = a.contains("hermitian") && a["hermitian"].get<bool>();
  if (op == "svd") {
    const linalg::SVD f = linalg::svd(in[0], a["full_matrices"].get<bool>());
    const auto [u, vh] = sign_fixed(f);
    return ferry::cat({f.S, u.flatten(-2), vh.flatten(-2)}, -1);
  }
  if (op == "svdvals") return linalg::svdvals(in[0]);
  if (op == "pinv") return linalg::pinv(in[0], {}, hermitian);
  if (op == "matrix_rank")
    return linalg::matrix_rank(in[0], {.atol = number("atol"), .rtol = number("rtol")}, hermitian)
        .to(DType::f32);
  if (op == "matrix_norm") {
    if (a.contains("dim")) {
      const std::pair<std::int64_t, std::int64_t> dims{a["dim"][0], a["dim"][1]};
      return linalg::matrix_norm(in[0], -HUGE_VAL, dims, a["keepdim"].get<bool>());
    }
    std::vector<Tensor> norms{linalg::matrix_norm(in[0]), linalg::matrix_norm(in[0], "nuc")};
    for (double ord : {2.0, -2.0, 1.0, -1.0, HUGE_VAL, -HUGE_VAL})
      norms.push_back(linalg::matrix_norm(in[0], ord));
    return ferry::stack(norms, -1);
  }
  if (op == "lstsq") {
    const linalg::Lstsq r =
        linalg::lstsq(in[0], in[1], std::nullopt, a["driver"].get<std::string>());
    return ferry::cat({r.solution.flatten(), r.residuals.flatten(), r.rank.flatten().to(DType::f32),
                       r.singular_values.flatten()});
  }
  ADD_FAILURE() << "unknown op " << op;
  return {};
}

void run_reference(const ferry::Device& dev) {
  ferry_test::run_output_reference_file("pytorch_svd_reference.json", dev, 27, run_case);
}
FERRY_TEST_ON_EACH_DEVICE(LinalgSvd, PyTorchReference, run_reference)

// A = U diag(S) Vh, U's columns and Vh's rows orthonormal (all of them where full), S descending
// and non-negative.
void expect_svd_of(const Tensor& a, bool full, double tol) {
  const linalg::SVD f = linalg::svd(a, full);
  const std::int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  ASSERT_EQ(f.U.size(-1), full ? m : k);
  ASSERT_EQ(f.Vh.size(-2), full ? n : k);
  const ferry::Device dev = a.device();
  const Tensor u = f.U.narrow(-1, 0, k), vh = f.Vh.narrow(-2, 0, k);
  EXPECT_LT(max_abs(ferry::matmul(u * f.S.unsqueeze(-2), vh) - a), tol);
  EXPECT_LT(max_abs(ferry::matmul(f.U.transpose(-2, -1), f.U) - identity(f.U.size(-1), dev)), tol);
  EXPECT_LT(max_abs(ferry::matmul(f.Vh, f.Vh.transpose(-2, -1)) - identity(f.Vh.size(-2), dev)),
            tol);
  if (k > 1) {
    const Tensor s = f.S;
    EXPECT_EQ(max_abs(ferry::relu(s.narrow(-1, 1, k - 1) - s.narrow(-1, 0, k - 1))), 0.0);
  }
  EXPECT_GE(ferry::amin(f.S).item<double>(), 0.0);
}

void check_identities(const ferry::Device& dev) {
  for (const ferry::Shape& shape :
       {ferry::Shape{2, 7, 7}, ferry::Shape{3, 9, 4}, ferry::Shape{2, 4, 9}, ferry::Shape{1, 1},
        ferry::Shape{6, 1}}) {
    for (bool full : {false, true}) {
      SCOPED_TRACE(::testing::PrintToString(shape) + (full ? " full" : ""));
      expect_svd_of(random_matrix(shape, 1, dev), full, 1e-13);
    }
  }
  // Rank-deficient: a repeated column, a zero matrix, all ones (an exact zero column after one
  // rotation). The zero singular values' vectors are an orthonormal complement.
  const Tensor x = random_matrix({6, 3}, 2, dev);
  const Tensor repeated = ferry::cat({x, x.narrow(-1, 0, 2)}, -1);
  const ferry::TensorOptions o{.dtype = DType::f64, .device = dev};
  for (const Tensor& a :
       {repeated, repeated.transpose(-2, -1), ferry::zeros({3, 4}, o), ferry::ones({4, 4}, o)}) {
    for (bool full : {false, true}) {
      SCOPED_TRACE(ferry::shape_str(a.sizes()) + (full ? " full" : ""));
      expect_svd_of(a, full, 1e-13);
    }
  }
  EXPECT_LT(max_abs(linalg::svdvals(ferry::ones({4, 4}, o)) -
                    ferry::tensor(std::vector<double>{4, 0, 0, 0}).to(dev)),
            1e-14);
  // A closed form: the singular values of diag(3, -2, 0.5) are 3, 2 and 0.5.
  const Tensor d = ferry::diag(ferry::tensor(std::vector<double>{3, -2, 0.5}).to(dev));
  EXPECT_LT(max_abs(linalg::svdvals(d) - ferry::tensor(std::vector<double>{3, 2, 0.5}).to(dev)),
            1e-15);
  // Graded: entries from 1 to 1e-12, each singular value to a few eps of itself.
  const Tensor graded = ferry::matmul(
      linalg::qr(random_matrix({5, 5}, 3, dev)).first,
      ferry::diag(ferry::tensor(std::vector<double>{1, 1e-3, 1e-6, 1e-9, 1e-12}).to(dev)));
  const std::vector<double> sv = values(linalg::svdvals(graded));
  EXPECT_NEAR(sv[0], 1.0, 1e-14);
  EXPECT_NEAR(sv[4], 1e-12, 1e-20);
}
FERRY_TEST_ON_EACH_DEVICE(LinalgSvd, Identities, check_identities)

// The same of the rotations on the CPU (debug::CompositesOnly), which gesdd serves otherwise.
TEST(LinalgSvd, IdentitiesOfTheRotationsOnTheCpu) {
  ferry::debug::CompositesOnly composition;
  check_identities(ferry::Device::cpu());
}

void check_pinv_rank_lstsq(const ferry::Device& dev) {
  const ferry::TensorOptions o{.dtype = DType::f64, .device = dev};
  // The Penrose conditions, A of full rank and of rank 2; hermitian from eigh.
  const Tensor x = random_matrix({2, 5, 2}, 4, dev);
  for (const Tensor& a : {random_matrix({2, 5, 3}, 5, dev), random_matrix({3, 6}, 6, dev),
                          ferry::matmul(x, random_matrix({2, 2, 4}, 7, dev))}) {
    SCOPED_TRACE(ferry::shape_str(a.sizes()));
    const Tensor p = linalg::pinv(a);
    EXPECT_LT(max_abs(ferry::matmul(ferry::matmul(a, p), a) - a), 1e-13);
    EXPECT_LT(max_abs(ferry::matmul(ferry::matmul(p, a), p) - p), 1e-12);
    const Tensor ap = ferry::matmul(a, p), pa = ferry::matmul(p, a);
    EXPECT_LT(max_abs(ap - ap.transpose(-2, -1)), 1e-13);
    EXPECT_LT(max_abs(pa - pa.transpose(-2, -1)), 1e-13);
  }
  const Tensor s = random_matrix({4, 4}, 8, dev);
  const Tensor sym = s + s.transpose(-2, -1);
  EXPECT_LT(max_abs(linalg::pinv(sym, {}, true) - linalg::inv(sym)), 1e-11);
  // The ranks: 2 of the product, the tolerance rule on diag(3, 2, 1, 0.1).
  EXPECT_EQ(values(linalg::matrix_rank(ferry::matmul(x, random_matrix({2, 2, 4}, 7, dev)))),
            (std::vector<double>{2, 2}));
  const Tensor d = ferry::diag(ferry::tensor(std::vector<double>{3, 2, 1, 0.1}).to(dev));
  EXPECT_EQ(linalg::matrix_rank(d).item<std::int64_t>(), 4);
  EXPECT_EQ(linalg::matrix_rank(d, {.rtol = 0.1}).item<std::int64_t>(), 3);
  EXPECT_EQ(linalg::matrix_rank(d, {.atol = 1.5}).item<std::int64_t>(), 2);
  EXPECT_EQ(linalg::matrix_rank(d, {.atol = 1.0, .rtol = 0.0}).item<std::int64_t>(), 2);
  EXPECT_EQ(linalg::matrix_rank(-d, {}, true).item<std::int64_t>(), 4);
  EXPECT_EQ(linalg::matrix_rank(ferry::zeros({3, 3}, o)).item<std::int64_t>(), 0);
  EXPECT_EQ(linalg::matrix_rank(random_matrix({3, 3}, 9, dev)).dtype(), DType::i64);
  // lstsq: the normal equations where A has full column rank; the least-norm solution (in A's
  // row space) where it has not.
  const Tensor a = random_matrix({7, 3}, 10, dev), b = random_matrix({7, 2}, 11, dev);
  const linalg::Lstsq r = linalg::lstsq(a, b, std::nullopt, "gelsd");
  const Tensor at = a.transpose(-2, -1);
  EXPECT_LT(max_abs(ferry::matmul(at, ferry::matmul(a, r.solution) - b)), 1e-13);
  const Tensor residual = ferry::matmul(a, r.solution) - b;
  EXPECT_LT(max_abs(r.residuals - ferry::sum(residual * residual, {-2})), 1e-13);
  EXPECT_EQ(r.rank.item<std::int64_t>(), 3);
  EXPECT_LT(max_abs(r.singular_values - linalg::svdvals(a)), 1e-14);
  const linalg::Lstsq y = linalg::lstsq(a, b);  // gelsy: no residuals, no singular values
  EXPECT_EQ(y.residuals.numel(), 0);
  EXPECT_EQ(y.singular_values.numel(), 0);
  EXPECT_EQ(linalg::lstsq(a, b, std::nullopt, "gels").rank.numel(), 0);
  const Tensor deficient = ferry::cat({a, a.narrow(-1, 0, 1)}, -1);
  const linalg::Lstsq z = linalg::lstsq(deficient, b, std::nullopt, "gelsd");
  EXPECT_EQ(z.rank.item<std::int64_t>(), 3);
  EXPECT_EQ(z.residuals.numel(), 0);  // rank below n: PyTorch gives none
  EXPECT_LT(max_abs(z.solution - ferry::matmul(linalg::pinv(deficient), b)), 1e-13);
  // The duplicated columns share their weight: the least-norm solution.
  EXPECT_LT(max_abs(z.solution.select(0, 0) - z.solution.select(0, 3)), 1e-13);
  // Wide: A X = B exactly, X in A's row space.
  const Tensor w = random_matrix({2, 5}, 12, dev), bw = random_matrix({2, 3}, 13, dev);
  const Tensor xw = linalg::lstsq(w, bw).solution;
  EXPECT_LT(max_abs(ferry::matmul(w, xw) - bw), 1e-13);
  EXPECT_LT(max_abs(xw - ferry::matmul(w.transpose(-2, -1),
                                       linalg::solve(ferry::matmul(w, w.transpose(-2, -1)), bw))),
            1e-13);
  // The norms' closed forms on diag(3, -2, 0.5) in a 2 x 3 x 3 batch over dims (0, 1).
  const Tensor dd = ferry::diag(ferry::tensor(std::vector<double>{3, -2, 0.5}).to(dev));
  EXPECT_NEAR(linalg::matrix_norm(dd, "nuc").item<double>(), 5.5, 1e-14);
  EXPECT_NEAR(linalg::matrix_norm(dd, -2.0).item<double>(), 0.5, 1e-14);
  EXPECT_NEAR(linalg::matrix_norm(dd).item<double>(), std::sqrt(13.25), 1e-14);
  EXPECT_EQ(linalg::matrix_norm(dd.unsqueeze(0).expand({2, 3, 3}), 1.0, {1, 2}, true).sizes(),
            (ferry::Shape{2, 1, 1}));
}
FERRY_TEST_ON_EACH_DEVICE(LinalgSvd, PinvRankLstsqNorms, check_pinv_rank_lstsq)

// svdvals where no gradient is recorded computes the values alone (gesdd's jobz 'N' on the CPU,
// rotations not accumulated elsewhere): they are svd's S, whatever the shape, rank or scale, and
// matrix_rank counts from them; with a gradient recorded, the same values.
void check_values_alone(const ferry::Device& dev) {
  const Tensor x = random_matrix({6, 2}, 50, dev);
  for (const Tensor& a : {random_matrix({5, 3}, 51, dev), random_matrix({3, 7}, 52, dev),
                          random_matrix({2, 4, 4}, 53, dev) * 1e-200,
                          ferry::matmul(x, random_matrix({2, 5}, 54, dev))}) {
    SCOPED_TRACE(ferry::shape_str(a.sizes()));
    const Tensor s = linalg::svd(a, false).S;
    const double scale = max_abs(s);
    EXPECT_LT(max_abs(linalg::svdvals(a) - s), 1e-14 * scale);
    EXPECT_LT(max_abs(linalg::svdvals(a.detach().requires_grad_()) - s), 1e-14 * scale);
  }
  EXPECT_EQ(
      linalg::matrix_rank(ferry::matmul(x, random_matrix({2, 5}, 54, dev))).item<std::int64_t>(),
      2);
  EXPECT_EQ(linalg::svdvals(ferry::zeros({2, 0, 3}, {.dtype = DType::f64, .device = dev})).sizes(),
            (ferry::Shape{2, 0}));
}
FERRY_TEST_ON_EACH_DEVICE(LinalgSvd, ValuesAloneAreSvdsValues, check_values_alone)

TEST(LinalgSvd, ValuesAloneOfTheRotationsOnTheCpu) {
  ferry::debug::CompositesOnly composition;
  check_values_alone(ferry::Device::cpu());
}

// The CPU's gesdd (Note [LAPACK through OpenBLAS]) and the Jacobi rotations every other device
// runs (debug::CompositesOnly) give the same decomposition, sign-fixed, and the same gradient.
TEST(LinalgSvd, FusedSvdAgreesWithTheComposition) {
  const ferry::Device cpu = ferry::Device::cpu();
  for (const ferry::Shape& shape :
       {ferry::Shape{3, 6, 6}, ferry::Shape{8, 5}, ferry::Shape{2, 4, 9}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    const Tensor a = random_matrix(shape, 14, cpu).requires_grad_();
    const Tensor upstream = random_matrix({std::min(shape.end()[-2], shape.end()[-1])}, 15, cpu);
    const auto run = [&] {
      a.set_grad({});
      const linalg::SVD f = linalg::svd(a, false);
      const auto [u, vh] = sign_fixed(f);
      (ferry::sum(f.S * upstream) + ferry::sum(u) * 0.25 + ferry::sum(vh) * 0.5).backward();
      return std::vector<Tensor>{f.S.detach(), u.detach(), vh.detach(), a.grad()};
    };
    const std::vector<Tensor> fused = run();
    ferry::debug::CompositesOnly composition;
    const std::vector<Tensor> steps = run();
    for (std::size_t i = 0; i < fused.size(); ++i)
      EXPECT_LT(max_abs(fused[i] - steps[i]), 1e-12) << i;
  }
}

TEST(LinalgSvd, GradientsMatchFiniteDifferences) {
  using ferry_test::gradcheck;
  using ferry_test::gradgradcheck;
  using V = std::vector<Tensor>;
  const ferry::Device cpu = ferry::Device::cpu();
  // Gauge-invariant functions of the factors: S, U diag(S) (U's sign cancels against Vh's in
  // U Vh), U U^T's projector, and the products through full_matrices' first k columns.
  for (const ferry::Shape& shape :
       {ferry::Shape{2, 4, 4}, ferry::Shape{5, 3}, ferry::Shape{3, 5}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    const Tensor a = random_matrix(shape, 16, cpu);
    for (bool full : {false, true}) {
      const auto uvh = [full](const V& in) {
        const linalg::SVD f = linalg::svd(in[0], full);
        const std::int64_t k = f.S.size(-1);
        return ferry::matmul(f.U.narrow(-1, 0, k), f.Vh.narrow(-2, 0, k));
      };
      EXPECT_TRUE(gradcheck(uvh, {a}));
    }
    EXPECT_TRUE(gradcheck([](const V& in) { return linalg::svdvals(in[0]); }, {a}));
    EXPECT_TRUE(gradcheck(
        [](const V& in) {
          const Tensor u = linalg::svd(in[0], false).U;
          return ferry::matmul(u, u.transpose(-2, -1));
        },
        {a}));
    EXPECT_TRUE(gradcheck([](const V& in) { return linalg::pinv(in[0]); }, {a}));
    EXPECT_TRUE(gradgradcheck([](const V& in) { return linalg::pinv(in[0]); }, {a}));
    EXPECT_TRUE(gradgradcheck([](const V& in) { return linalg::svdvals(in[0]); }, {a}));
    EXPECT_TRUE(gradcheck([](const V& in) { return linalg::matrix_norm(in[0], "nuc"); }, {a}));
    EXPECT_TRUE(gradcheck([](const V& in) { return linalg::matrix_norm(in[0], 2.0); }, {a}));
  }
  const Tensor a = random_matrix({6, 3}, 17, cpu), b = random_matrix({6, 2}, 18, cpu);
  EXPECT_TRUE(gradcheck([](const V& in) { return linalg::lstsq(in[0], in[1]).solution; }, {a, b}));
  const Tensor s = random_matrix({4, 4}, 19, cpu);
  EXPECT_TRUE(gradcheck(
      [](const V& in) { return linalg::pinv(in[0] + in[0].transpose(-2, -1), {}, true); }, {s}));
  // Equal singular values (the identity's): svdvals' gradient is U diag(g) Vh = I's, finite.
  const Tensor eye = identity(3, cpu).requires_grad_();
  ferry::sum(linalg::svdvals(eye)).backward();
  EXPECT_LT(max_abs(eye.grad() - identity(3, cpu)), 1e-15);
}

// f16 is computed in f32 and rounded back; empty matrices have PyTorch's shapes.
void check_half_and_empty(const ferry::Device& dev) {
  const Tensor a = random_matrix({4, 3}, 20, dev).to(DType::f32);
  const Tensor ah = a.to(DType::f16);
  EXPECT_EQ(values(linalg::svdvals(ah)), values(linalg::svdvals(ah.to(DType::f32)).to(DType::f16)));
  EXPECT_EQ(linalg::pinv(ah).dtype(), DType::f16);
  const ferry::TensorOptions o{.dtype = DType::f32, .device = dev};
  const linalg::SVD f = linalg::svd(ferry::zeros({0, 3}, o));
  EXPECT_EQ(f.U.sizes(), (ferry::Shape{0, 0}));
  EXPECT_EQ(f.S.sizes(), (ferry::Shape{0}));
  EXPECT_EQ(values(f.Vh), values(ferry::eye(3, std::nullopt, o)));
  const linalg::SVD g = linalg::svd(ferry::zeros({2, 0, 3}, o), false);
  EXPECT_EQ(g.U.sizes(), (ferry::Shape{2, 0, 0}));
  EXPECT_EQ(g.Vh.sizes(), (ferry::Shape{2, 0, 3}));
  EXPECT_EQ(linalg::pinv(ferry::zeros({2, 0, 3}, o)).sizes(), (ferry::Shape{2, 3, 0}));
  EXPECT_EQ(values(linalg::matrix_rank(ferry::zeros({2, 0, 3}, o))), (std::vector<double>{0, 0}));
  EXPECT_EQ(linalg::lstsq(ferry::zeros({0, 4, 3}, o), ferry::zeros({0, 4, 2}, o)).solution.sizes(),
            (ferry::Shape{0, 3, 2}));
}
FERRY_TEST_ON_EACH_DEVICE(LinalgSvd, HalfPrecisionAndEmpty, check_half_and_empty)

void check_errors(const ferry::Device& dev) {
  using ferry_test::expect_error;
  const ferry::TensorOptions o{.dtype = DType::f32, .device = dev};
  const Tensor a = ferry::ones({3, 2}, o);
  expect_error<ferry::ShapeError>(
      [&] { linalg::svd(ferry::zeros({3}, o)); },
      {"linalg.svd: The input tensor A must have at least 2 dimensions"});
  expect_error<ferry::DTypeError>(
      [&] {
        linalg::svd(ferry::zeros({2, 2}, {.dtype = DType::i32, .device = dev}));
      },
      {});
  Tensor nan = ferry::eye(3, std::nullopt, o);
  nan = ferry::where(ferry::eq(nan, 0.0), ferry::Scalar(std::nan("")), nan);
  expect_error<ferry::LinAlgError>(
      [&] { linalg::svd(nan); },
      {"linalg.svd: The algorithm failed to converge", "non-finite values"});
  expect_error<ferry::ShapeError>([&] { linalg::pinv(a, {}, true); },
                                  {"must be batches of square matrices", "3 by 2"});
  expect_error<ferry::ValueError>([&] { linalg::matrix_norm(a, 3.0); },
                                  {"linalg.matrix_norm: Order 3 not supported."});
  expect_error<ferry::ValueError>([&] { linalg::matrix_norm(a, "abc"); },
                                  {"linalg.matrix_norm: Order abc not supported."});
  expect_error<ferry::ShapeError>(
      [&] {
        linalg::matrix_norm(a, "fro", {0, 0});
      },
      {"linalg.matrix_norm: dims must be different. Got (0, 0)"});
  expect_error<ferry::ShapeError>([&] { linalg::matrix_norm(ferry::zeros({3}, o)); },
                                  {"must have at least 2 dimensions"});
  expect_error<ferry::ValueError>(
      [&] { linalg::lstsq(a, a, std::nullopt, "foo"); },
      {"parameter `driver` should be one of (gels, gelsy, gelsd, gelss)"});
  expect_error<ferry::ShapeError>(
      [&] {
        linalg::lstsq(a, ferry::ones({4, 2}, o));
      },
      {"input.size(-2) should match other.size(-2)"});
  expect_error<ferry::ShapeError>([&] { linalg::lstsq(a, ferry::ones({4}, o)); },
                                  {"input.size(-2) should match other.size(-1)"});
  expect_error<ferry::ShapeError>(
      [&] {
        linalg::lstsq(a, ferry::ones({2, 2, 3, 2}, o));
      },
      {"input.dim() must be greater or equal to other.dim()"});
  expect_error<ferry::DTypeError>(
      [&] {
        linalg::lstsq(a, ferry::ones({3, 2}, {.dtype = DType::f64, .device = dev}));
      },
      {"Expected input and other to have the same dtype"});
  for (const char* driver : {"gels", "gelsy", "gelsd", "gelss"}) {
    SCOPED_TRACE(driver);
    expect_error<ferry::LinAlgError>(
        [&] {
          linalg::lstsq(nan, ferry::ones({3, 2}, o), std::nullopt, driver);
        },
        {"linalg.lstsq: The algorithm failed to converge", "non-finite values"});
  }
}
FERRY_TEST_ON_EACH_DEVICE(LinalgSvd, ErrorsArePyTorchs, check_errors)

// lstsq's LAPACK drivers on the CPU (gels, gelsy, gelsd, gelss) against the composition that
// serves the other devices (pinv(A) B from the SVD): the same solutions, ranks, singular values
// and residuals on tall, wide, batched, broadcast, vector and rank-deficient systems (gels aside:
// it takes A to have full rank, and LAPACK's QR refuses an exactly singular one, as PyTorch's CPU
// does).
TEST(LinalgSvd, LstsqDriversOnTheCpuAreTheComposition) {
  const ferry::Device cpu = ferry::Device::cpu();
  const Tensor x = random_matrix({5, 2}, 30, cpu);
  const Tensor deficient = ferry::cat({x, x.narrow(-1, 0, 1) * 2.0}, -1);  // rank 2 of 3
  struct System {
    Tensor a, b;
    bool full_rank;
  };
  const std::vector<System> systems = {
      {random_matrix({2, 7, 3}, 31, cpu), random_matrix({2, 7, 2}, 32, cpu), true},
      {random_matrix({3, 5}, 33, cpu), random_matrix({3, 4}, 34, cpu), true},
      {random_matrix({1, 6, 3}, 35, cpu), random_matrix({2, 6, 2}, 36, cpu), true},
      {random_matrix({6, 4}, 37, cpu), random_matrix({6}, 38, cpu), true},
      {deficient, random_matrix({5, 2}, 39, cpu), false}};
  for (const char* driver : {"gels", "gelsy", "gelsd", "gelss"}) {
    for (const System& s : systems) {
      SCOPED_TRACE(std::string(driver) + " " + ferry::shape_str(s.a.sizes()) + " " +
                   ferry::shape_str(s.b.sizes()));
      if (!s.full_rank && std::string(driver) == "gels") continue;
      const linalg::Lstsq fused = linalg::lstsq(s.a, s.b, std::nullopt, driver);
      ferry::debug::CompositesOnly composition;
      const linalg::Lstsq composed = linalg::lstsq(s.a, s.b, std::nullopt, driver);
      EXPECT_EQ(fused.solution.sizes(), composed.solution.sizes());
      EXPECT_LT(max_abs(fused.solution - composed.solution), 1e-12);
      EXPECT_EQ(values(fused.rank), values(composed.rank));
      EXPECT_EQ(fused.singular_values.sizes(), composed.singular_values.sizes());
      if (fused.singular_values.numel() > 0)
        EXPECT_LT(max_abs(fused.singular_values - composed.singular_values), 1e-13);
      EXPECT_EQ(fused.residuals.sizes(), composed.residuals.sizes());
      if (fused.residuals.numel() > 0)
        EXPECT_LT(max_abs(fused.residuals - composed.residuals), 1e-12);
    }
  }
  // No right-hand sides, or none in B's batch: A's rank and singular values all the same.
  const linalg::Lstsq none = linalg::lstsq(x, ferry::zeros({5, 0}, {.dtype = DType::f64}), {},
                                           "gelsd");
  EXPECT_EQ(none.solution.sizes(), (ferry::Shape{2, 0}));
  EXPECT_EQ(none.rank.item<std::int64_t>(), 2);
  EXPECT_LT(max_abs(none.singular_values - linalg::svdvals(x)), 1e-14);
  EXPECT_EQ(linalg::lstsq(x.unsqueeze(0), ferry::zeros({0, 5, 2}, {.dtype = DType::f64}))
                .solution.sizes(),
            (ferry::Shape{0, 2, 2}));
  // gels on a column that is exactly zero: R's diagonal holds a zero.
  ferry_test::expect_error<ferry::LinAlgError>(
      [&] {
        linalg::lstsq(ferry::cat({x, ferry::zeros_like(x.narrow(-1, 0, 1))}, -1),
                      random_matrix({5, 2}, 39, cpu), std::nullopt, "gels");
      },
      {"torch.linalg.lstsq: The least squares solution could not be computed", "full rank"});
  // Gradients through the drivers (PyTorch's: pinv(A) B's), broadcast batches and a vector B,
  // second order included.
  using ferry_test::gradcheck;
  using ferry_test::gradgradcheck;
  using V = std::vector<Tensor>;
  const Tensor a = random_matrix({1, 5, 3}, 40, cpu), b = random_matrix({2, 5, 2}, 41, cpu);
  for (const char* driver : {"gels", "gelsd"})
    EXPECT_TRUE(gradcheck(
        [driver](const V& in) {
          return linalg::lstsq(in[0], in[1], std::nullopt, driver).solution;
        },
        {a, b}));
  EXPECT_TRUE(gradcheck([](const V& in) { return linalg::lstsq(in[0], in[1]).solution; },
                        {random_matrix({3, 5}, 42, cpu), random_matrix({3}, 43, cpu)}));
  EXPECT_TRUE(gradgradcheck([](const V& in) { return linalg::lstsq(in[0], in[1]).solution; },
                            {random_matrix({5, 3}, 44, cpu), random_matrix({5, 2}, 45, cpu)}));
}

}  // namespace
