// matmul against a naive triple loop in double: 2-D, batched, broadcast
// batches, 1-D operands, strided views (transposed, stepped, expanded), odd and
// empty sizes, every dtype, and the typed errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "ferry/ferry.hpp"
#include "op_test_util.hpp"

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;
using ferry_test::as_double;
using ferry_test::expect_close;
using ferry_test::sample_tensor;

namespace {

// C[b] = A[b] * B[b] for contiguous [nb, M, K] and [nb, K, N] data (a batch of
// stride 0 when that operand has nb_x == 1).
std::vector<double> naive(const std::vector<double>& a, const std::vector<double>& b,
                          std::int64_t nb_a, std::int64_t nb_b, std::int64_t M, std::int64_t K,
                          std::int64_t N) {
  const std::int64_t nb = std::max(nb_a, nb_b);
  std::vector<double> c(std::size_t(nb * M * N), 0.0);
  for (std::int64_t t = 0; t < nb; ++t)
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k)
          s += a[std::size_t((nb_a == 1 ? 0 : t) * M * K + i * K + k)] *
               b[std::size_t((nb_b == 1 ? 0 : t) * K * N + k * N + j)];
        c[std::size_t(t * M * N + i * N + j)] = s;
      }
  return c;
}

// Checks matmul(a, b) for 2-D or 3-D operands against the naive product of their values.
void check(const Tensor& a, const Tensor& b, const std::string& what, double rtol = 1e-5) {
  Tensor c = ferry::matmul(a, b);
  const std::int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const std::int64_t nb_a = a.dim() == 3 ? a.size(0) : 1, nb_b = b.dim() == 3 ? b.size(0) : 1;
  std::vector<double> want = naive(as_double(a), as_double(b), nb_a, nb_b, M, K, N);
  Shape shape = {M, N};
  if (std::max(a.dim(), b.dim()) == 3) shape.insert(shape.begin(), std::max(nb_a, nb_b));
  EXPECT_EQ(c.sizes(), shape) << what;
  expect_close(as_double(c), want, rtol, rtol * double(K + 1), what);
}

}  // namespace

TEST(Matmul, TwoDimensionalOddSizes) {
  for (auto [M, K, N] : std::vector<std::array<std::int64_t, 3>>{{1, 1, 1},
                                                                 {7, 13, 5},
                                                                 {13, 7, 1},
                                                                 {1, 127, 13},
                                                                 {64, 33, 17},
                                                                 {127, 1023, 7},
                                                                 {130, 300, 257}}) {
    check(sample_tensor({M, K}, -1, 1, 1), sample_tensor({K, N}, -1, 1, 2),
          fmt::format("{}x{}x{}", M, K, N));
  }
}

TEST(Matmul, StridedViews) {
  Tensor a = sample_tensor({9, 6}, -1, 1, 3), b = sample_tensor({6, 11}, -1, 1, 4);
  Tensor at = sample_tensor({6, 9}, -1, 1, 5).t();  // transposed: CblasTrans
  Tensor bt = sample_tensor({11, 6}, -1, 1, 6).t();
  check(at, b, "A transposed");
  check(a, bt, "B transposed");
  check(at, bt, "both transposed");
  Tensor stepped = sample_tensor({9, 12}, -1, 1, 7).slice(1, 0, 12, 2);  // inner stride 2: packed
  check(stepped, b, "A stepped");
  check(a, sample_tensor({12, 11}, -1, 1, 8).slice(0, 1, 12, 2), "B rows stepped (row stride 22)");
  check(sample_tensor({1, 6}, -1, 1, 9).expand({9, 6}), b, "A expanded rows (stride 0)");
  check(a, sample_tensor({6, 1}, -1, 1, 10).expand({6, 11}), "B expanded columns");
  check(sample_tensor({20, 30}).slice(0, 2, 11).slice(1, 5, 11), b,
        "A narrowed (offset, row stride 30)");
}

TEST(Matmul, Batched) {
  check(sample_tensor({3, 7, 5}), sample_tensor({3, 5, 4}, -2, 2, 1), "[3,7,5] x [3,5,4]");
  check(sample_tensor({16, 4, 5}), sample_tensor({16, 5, 6}, -2, 2, 1), "many small batches");
  check(sample_tensor({2, 40, 50}), sample_tensor({2, 50, 45}, -2, 2, 1), "two large batches");
  check(sample_tensor({1, 7, 5}), sample_tensor({4, 5, 3}, -2, 2, 1), "broadcast A batch");
  check(sample_tensor({4, 7, 5}), sample_tensor({5, 3}, -2, 2, 1),
        "[B,M,K] x [K,N] folds into one product");
  check(sample_tensor({7, 5}), sample_tensor({4, 5, 3}, -2, 2, 1), "[M,K] x [B,K,N]");
  check(sample_tensor({3, 5, 7}).transpose(1, 2), sample_tensor({3, 5, 4}, -2, 2, 1),
        "transposed batch");
  // Batch dims that broadcast to [2, 3]: the result is [2, 3, M, N].
  Tensor a = sample_tensor({2, 1, 4, 5}), b = sample_tensor({3, 5, 6}, -2, 2, 1);
  Tensor c = ferry::matmul(a, b);
  ASSERT_EQ(c.sizes(), (Shape{2, 3, 4, 6}));
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) {
      Tensor want = ferry::matmul(a.select(0, i).select(0, 0), b.select(0, j));
      expect_close(as_double(c.select(0, i).select(0, j)), as_double(want), 1e-6, 1e-6,
                   "broadcast batch");
    }
  // A 4-D left operand times a matrix.
  Tensor l = sample_tensor({2, 3, 4, 5});
  Tensor m = sample_tensor({5, 2}, -1, 1, 2);
  expect_close(as_double(ferry::matmul(l, m)), as_double(ferry::matmul(l.reshape({6, 4, 5}), m)), 0,
               0, "4-D x 2-D");
  EXPECT_EQ(ferry::matmul(l, m).sizes(), (Shape{2, 3, 4, 2}));
}

TEST(Matmul, VectorOperands) {
  Tensor v = ferry::arange(1.0, 5.0);  // [1, 2, 3, 4]
  Tensor dot = ferry::matmul(v, v);
  EXPECT_EQ(dot.sizes(), Shape{});
  EXPECT_EQ(dot.item<float>(), 30.0f);
  Tensor m = ferry::arange(12.0).reshape({3, 4});
  Tensor mv = ferry::matmul(m, v);
  EXPECT_EQ(mv.sizes(), (Shape{3}));
  EXPECT_EQ(mv.to_vector<float>(), (std::vector<float>{20, 60, 100}));
  Tensor vm = ferry::matmul(ferry::arange(1.0, 4.0), m);  // [1, 2, 3] x [3, 4]
  EXPECT_EQ(vm.sizes(), (Shape{4}));
  EXPECT_EQ(vm.to_vector<float>(), (std::vector<float>{32, 38, 44, 50}));
  Tensor batched = ferry::stack({m, ferry::mul(m, 2.0)});  // [2, 3, 4]
  EXPECT_EQ(ferry::matmul(batched, v).sizes(), (Shape{2, 3}));
  EXPECT_EQ(ferry::matmul(batched, v).to_vector<float>(),
            (std::vector<float>{20, 60, 100, 40, 120, 200}));
  Tensor vb = ferry::matmul(ferry::arange(1.0, 4.0), batched);
  EXPECT_EQ(vb.sizes(), (Shape{2, 4}));
  EXPECT_EQ(vb.to_vector<float>(), (std::vector<float>{32, 38, 44, 50, 64, 76, 88, 100}));
  // Strided vectors.
  Tensor sv = ferry::arange(8.0).slice(0, 0, 8, 2);      // [0, 2, 4, 6]
  EXPECT_EQ(ferry::matmul(sv, v).item<float>(), 40.0f);  // 0*1 + 2*2 + 4*3 + 6*4
}

TEST(Matmul, EmptySizes) {
  Tensor z = ferry::matmul(ferry::ones({3, 0}), ferry::ones({0, 4}));
  EXPECT_EQ(z.sizes(), (Shape{3, 4}));
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(12, 0.0f));
  EXPECT_EQ(ferry::matmul(ferry::ones({0, 5}), ferry::ones({5, 4})).sizes(), (Shape{0, 4}));
  EXPECT_EQ(ferry::matmul(ferry::ones({2, 3, 5}), ferry::ones({2, 5, 0})).sizes(),
            (Shape{2, 3, 0}));
  EXPECT_EQ(ferry::matmul(ferry::ones({0, 3, 5}), ferry::ones({5, 2})).sizes(), (Shape{0, 3, 2}));
  EXPECT_EQ(ferry::matmul(ferry::ones({0}), ferry::ones({0})).item<float>(), 0.0f);
  Tensor zb =
      ferry::matmul(ferry::ones({2, 3, 0}), ferry::ones({0, 4}));  // folded batch with K = 0
  EXPECT_EQ(zb.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(zb.to_vector<float>(), std::vector<float>(24, 0.0f));
  Tensor zi = ferry::matmul(ferry::ones({2, 0}, {.dtype = DType::i32}),
                            ferry::ones({0, 2}, {.dtype = DType::i32}));
  EXPECT_EQ(zi.to_vector<std::int32_t>(), std::vector<std::int32_t>(4, 0));
}

TEST(Matmul, SixteenBitFloats) {
  for (DType dt : {DType::f16, DType::bf16}) {
    const double tol = dt == DType::f16 ? 4e-3 : 2e-2;
    for (std::int64_t nb : {1, 8}) {  // one large product (widened sgemm) and many small ones
      Tensor a = sample_tensor({nb, 20, 40}, -1, 1, 1).to(dt),
             b = sample_tensor({nb, 40, 12}, -1, 1, 2).to(dt);
      Tensor c = ferry::matmul(a, b);
      EXPECT_EQ(c.dtype(), dt);
      expect_close(as_double(c), naive(as_double(a), as_double(b), nb, nb, 20, 40, 12), tol, tol,
                   "16-bit");
    }
    check(sample_tensor({64, 40}).to(dt).t(), sample_tensor({64, 50}).to(dt), "16-bit transposed",
          2e-2);
  }
}

TEST(Matmul, IntegersAreExactAndWrap) {
  Tensor a = ferry::arange(-6.0, 6.0, 1, {.dtype = DType::i64}).reshape({3, 4});
  Tensor b = ferry::arange(8.0, {.dtype = DType::i64}).reshape({4, 2});
  std::vector<double> want = naive(as_double(a), as_double(b), 1, 1, 3, 4, 2);
  for (DType dt : {DType::i32, DType::i64}) {
    Tensor c = ferry::matmul(a.to(dt), b.to(dt));
    EXPECT_EQ(c.dtype(), dt);
    std::vector<std::int64_t> got = c.to_vector<std::int64_t>();
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(double(got[i]), want[i]);
  }
  // u8 wraps modulo 256: 200 * 2 + 100 * 1 = 500 -> 244.
  Tensor u = ferry::tensor(std::vector<std::uint8_t>{200, 100}, {1, 2});
  Tensor w = ferry::tensor(std::vector<std::uint8_t>{2, 1}, {2, 1});
  EXPECT_EQ(ferry::matmul(u, w).item<std::uint8_t>(), 244);
  // i32 wraps like PyTorch: 2^30 * 4 = 2^32 -> 0.
  Tensor big = ferry::full({1, 1}, 1 << 30, {.dtype = DType::i32});
  EXPECT_EQ(ferry::matmul(big, ferry::full({1, 1}, 4, {.dtype = DType::i32})).item<std::int32_t>(),
            0);
  // Batched and strided integers.
  Tensor ab =
      ferry::arange(24.0, {.dtype = DType::i32}).reshape({2, 4, 3}).transpose(1, 2);  // [2, 3, 4]
  Tensor bb = ferry::arange(8.0, {.dtype = DType::i32}).reshape({4, 2});
  std::vector<double> wb = naive(as_double(ab), as_double(bb), 2, 1, 3, 4, 2);
  std::vector<std::int64_t> gb = ferry::matmul(ab, bb).to_vector<std::int64_t>();
  for (std::size_t i = 0; i < gb.size(); ++i) EXPECT_EQ(double(gb[i]), wb[i]);
}

TEST(Matmul, Promotion) {
  Tensor f = sample_tensor({3, 4}), i = ferry::arange(8.0, {.dtype = DType::i32}).reshape({4, 2});
  Tensor c = ferry::matmul(f, i);
  EXPECT_EQ(c.dtype(), DType::f32);
  expect_close(as_double(c), naive(as_double(f), as_double(i), 1, 1, 3, 4, 2), 1e-5, 1e-4,
               "f32 x i32");
  EXPECT_EQ(ferry::matmul(i.t(), ferry::ones({4, 1}, {.dtype = DType::i64})).dtype(), DType::i64);
  EXPECT_EQ(ferry::matmul(f.to(DType::f16), f.t()).dtype(), DType::f32);
}

TEST(Matmul, Errors) {
  Tensor m = ferry::ones({2, 3});
  EXPECT_FERRY_ERROR(ferry::matmul(m, ferry::ones({4, 2})), ferry::ShapeError, "matmul", "[2, 3]",
                     "[4, 2]");
  EXPECT_FERRY_ERROR(ferry::matmul(ferry::ones({3}), ferry::ones({4})), ferry::ShapeError, "matmul",
                     "[3]", "[4]");
  EXPECT_FERRY_ERROR(ferry::matmul(ferry::scalar_tensor(2.0), m), ferry::ShapeError, "matmul");
  EXPECT_FERRY_ERROR(ferry::matmul(m, ferry::scalar_tensor(2.0)), ferry::ShapeError, "matmul");
  EXPECT_FERRY_ERROR(ferry::matmul(ferry::ones({2, 2, 3}), ferry::ones({3, 3, 4})),
                     ferry::ShapeError, "matmul", "[2, 2, 3]", "[3, 3, 4]");
  Tensor b = ferry::ones({2, 2}, {.dtype = DType::boolean});
  EXPECT_FERRY_ERROR(ferry::matmul(b, b), ferry::DTypeError, "matmul", "bool");
}
