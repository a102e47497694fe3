// index_select, gather, cat and stack against element-by-element references
// computed here: every dim, negative dims, strided inputs and indices, every
// dtype (1-, 2-, 4- and 8-byte elements), empty tensors, and the typed errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ferry/ferry.hpp"
#include "ferry/kit/index_args.hpp"
#include "op_test_util.hpp"

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;
using ferry_test::as_double;
using ferry_test::expect_close;
using ferry_test::sample_tensor;

namespace {

// Row-major strides of a shape.
Shape strides_of(const Shape& s) {
  Shape st(s.size(), 1);
  for (std::size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// The multi-index of linear index `i` in `shape`.
Shape unravel(std::int64_t i, const Shape& shape) {
  Shape idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

std::int64_t ravel(const Shape& idx, const Shape& shape) {
  std::int64_t off = 0;
  Shape st = strides_of(shape);
  for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * st[d];
  return off;
}

std::vector<double> index_select_ref(const Tensor& x, std::int64_t dim,
                                     const std::vector<std::int64_t>& index) {
  std::vector<double> xv = as_double(x);
  Shape out_shape = x.sizes();
  out_shape[std::size_t(dim)] = std::int64_t(index.size());
  std::int64_t n = 1;
  for (auto v : out_shape) n *= v;
  std::vector<double> out(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < out.size(); ++i) {
    Shape idx = unravel(std::int64_t(i), out_shape);
    idx[std::size_t(dim)] = index[std::size_t(idx[std::size_t(dim)])];
    out[i] = xv[std::size_t(ravel(idx, x.sizes()))];
  }
  return out;
}

std::vector<double> gather_ref(const Tensor& x, std::int64_t dim, const Tensor& index) {
  std::vector<double> xv = as_double(x);
  std::vector<std::int64_t> iv = index.to_vector<std::int64_t>();
  std::vector<double> out(iv.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    Shape idx = unravel(std::int64_t(i), index.sizes());
    idx[std::size_t(dim)] = iv[i];
    out[i] = xv[std::size_t(ravel(idx, x.sizes()))];
  }
  return out;
}

}  // namespace

TEST(IndexSelect, EveryDimMatchesReference) {
  Tensor x = sample_tensor({4, 5, 6});
  std::vector<std::int64_t> iv = {3, 0, 3, 1};
  Tensor index = ferry::tensor(iv);
  for (std::int64_t dim : {0, 1, 2, -1}) {
    Tensor y = ferry::index_select(x, dim, index);
    std::int64_t d = dim < 0 ? dim + 3 : dim;
    Shape want = x.sizes();
    want[std::size_t(d)] = 4;
    EXPECT_EQ(y.sizes(), want);
    expect_close(as_double(y), index_select_ref(x, d, iv), 0, 0, fmt::format("dim {}", dim));
    expect_close(as_double(ferry::index_select(x, dim, index.to(DType::i32))),
                 index_select_ref(x, d, iv), 0, 0, "i32 index");
  }
}

TEST(IndexSelect, StridedInputsAndIndex) {
  Tensor base = sample_tensor({6, 10});
  std::vector<std::int64_t> iv = {4, 1, 1, 0};
  std::vector<std::int64_t> small = {2, 1, 1, 0};
  for (const Tensor& x : {base.t(), base.slice(1, 1, 10, 3), sample_tensor({1, 7}).expand({5, 7})})
    for (std::int64_t dim : {0, 1})
      expect_close(as_double(ferry::index_select(x, dim, ferry::tensor(small))),
                   index_select_ref(x, dim, small), 0, 0, "strided x");
  // A strided index: every other element of [4, 9, 1, 9, 1, 9, 0].
  Tensor sparse = ferry::tensor(std::vector<std::int64_t>{4, 9, 1, 9, 1, 9, 0}).slice(0, 0, 7, 2);
  expect_close(as_double(ferry::index_select(base, 0, sparse)), index_select_ref(base, 0, iv), 0, 0,
               "strided index");
}

TEST(IndexSelect, EveryDtype) {
  Tensor x = ferry::arange(12.0).reshape({3, 4});
  std::vector<std::int64_t> iv = {2, 0, 3};
  for (DType dt : ferry::kAllDTypes) {
    Tensor xd = x.to(dt);
    Tensor y = ferry::index_select(xd, 1, ferry::tensor(iv));
    EXPECT_EQ(y.dtype(), dt);
    expect_close(as_double(y), index_select_ref(xd, 1, iv), 0, 0,
                 std::string(ferry::dtype_name(dt)));
  }
}

TEST(IndexSelect, EmptyAndZeroDim) {
  Tensor x = sample_tensor({3, 4});
  Tensor none = ferry::zeros({0}, {.dtype = DType::i64});
  EXPECT_EQ(ferry::index_select(x, 1, none).sizes(), (Shape{3, 0}));
  EXPECT_EQ(
      ferry::index_select(ferry::zeros({0, 4}), 1, ferry::tensor(std::vector<std::int64_t>{1}))
          .sizes(),
      (Shape{0, 1}));
  // A 0-d index selects one slice, keeping the dim.
  Tensor one = ferry::index_select(x, 0, ferry::scalar_tensor(2));
  EXPECT_EQ(one.sizes(), (Shape{1, 4}));
  expect_close(as_double(one), as_double(x.select(0, 2)), 0, 0, "0-d index");
  // An empty index is fine even on an empty dim.
  EXPECT_EQ(ferry::index_select(ferry::zeros({0, 4}), 0, none).sizes(), (Shape{0, 4}));
}

TEST(IndexSelect, Errors) {
  Tensor x = ferry::ones({3, 4});
  EXPECT_FERRY_ERROR(ferry::index_select(x, 1, ferry::tensor(std::vector<std::int64_t>{0, 4})),
                     ferry::ShapeError, "index_select", "4", "0 to 3");
  EXPECT_FERRY_ERROR(ferry::index_select(x, 0, ferry::tensor(std::vector<std::int64_t>{-1, 0})),
                     ferry::ShapeError, "index_select", "-1");
  EXPECT_FERRY_ERROR(
      ferry::index_select(ferry::zeros({0, 4}), 0, ferry::tensor(std::vector<std::int64_t>{0})),
      ferry::ShapeError, "index_select");
  EXPECT_FERRY_ERROR(ferry::index_select(x, 0, ferry::ones({2})), ferry::DTypeError, "index_select",
                     "f32");
  EXPECT_FERRY_ERROR(ferry::index_select(x, 0, ferry::ones({2}, {.dtype = DType::u8})),
                     ferry::DTypeError, "index_select", "u8");
  EXPECT_FERRY_ERROR(ferry::index_select(x, 0, ferry::zeros({2, 2}, {.dtype = DType::i64})),
                     ferry::ShapeError, "index_select", "[2, 2]");
  EXPECT_FERRY_ERROR(ferry::index_select(x, 2, ferry::zeros({1}, {.dtype = DType::i64})),
                     ferry::ShapeError, "index_select");
}

TEST(Gather, MatchesReference) {
  Tensor x = sample_tensor({3, 5, 4});
  // Index sizes may be smaller than x in the other dims, and larger along dim.
  Tensor i0 =
      ferry::tensor(std::vector<std::int64_t>{2, 0, 1, 1, 0, 2, 2, 2, 1, 0, 0, 0}, {4, 3, 1});
  Tensor i1 =
      ferry::tensor(std::vector<std::int64_t>{4, 0, 3, 3, 1, 2, 0, 0, 4, 4, 2, 1, 0, 1}, {2, 7, 1});
  Tensor i2 = ferry::tensor(std::vector<std::int64_t>{3, 0, 1, 2, 3, 3}, {1, 2, 3});
  expect_close(as_double(ferry::gather(x, 0, i0)), gather_ref(x, 0, i0), 0, 0, "dim 0");
  expect_close(as_double(ferry::gather(x, 1, i1)), gather_ref(x, 1, i1), 0, 0, "dim 1");
  expect_close(as_double(ferry::gather(x, -1, i2)), gather_ref(x, 2, i2), 0, 0, "dim -1");
  EXPECT_EQ(ferry::gather(x, 1, i1).sizes(), (Shape{2, 7, 1}));
  expect_close(as_double(ferry::gather(x, 1, i1.to(DType::i32))), gather_ref(x, 1, i1), 0, 0,
               "i32 index");
  // Strided x and index.
  Tensor xt = x.transpose(0, 2);  // [4, 5, 3]
  Tensor it = ferry::tensor(std::vector<std::int64_t>{1, 4, 0, 2, 3, 3}, {3, 2, 1})
                  .transpose(0, 1);  // [2, 3, 1]
  expect_close(as_double(ferry::gather(xt, 1, it)), gather_ref(xt, 1, it.contiguous()), 0, 0,
               "strided");
  // The classic use: picking each row's label.
  Tensor logits = sample_tensor({4, 10});
  Tensor labels = ferry::tensor(std::vector<std::int64_t>{3, 9, 0, 3}, {4, 1});
  expect_close(as_double(ferry::gather(logits, 1, labels)), gather_ref(logits, 1, labels), 0, 0,
               "labels");
  for (DType dt : ferry::kAllDTypes) {
    Tensor xd = ferry::arange(12.0).reshape({3, 4}).to(dt);
    Tensor idx = ferry::tensor(std::vector<std::int64_t>{3, 0, 2, 1, 1, 1}, {3, 2});
    expect_close(as_double(ferry::gather(xd, 1, idx)), gather_ref(xd, 1, idx), 0, 0, "dtype");
    EXPECT_EQ(ferry::gather(xd, 1, idx).dtype(), dt);
  }
}

TEST(Gather, EmptyZeroDimAndErrors) {
  Tensor x = sample_tensor({3, 4});
  EXPECT_EQ(ferry::gather(x, 1, ferry::zeros({3, 0}, {.dtype = DType::i64})).sizes(),
            (Shape{3, 0}));
  EXPECT_EQ(ferry::gather(ferry::scalar_tensor(5.0), 0, ferry::scalar_tensor(0)).item<float>(),
            5.0f);
  EXPECT_FERRY_ERROR(ferry::gather(x, 1, ferry::zeros({3}, {.dtype = DType::i64})),
                     ferry::ShapeError, "gather", "[3]", "[3, 4]");
  EXPECT_FERRY_ERROR(ferry::gather(x, 1, ferry::zeros({4, 1}, {.dtype = DType::i64})),
                     ferry::ShapeError, "gather", "[4, 1]");
  EXPECT_FERRY_ERROR(ferry::gather(x, 1, ferry::full({1, 1}, 4, {.dtype = DType::i64})),
                     ferry::ShapeError, "gather", "4");
  EXPECT_FERRY_ERROR(ferry::gather(x, 0, ferry::full({1, 1}, -3, {.dtype = DType::i32})),
                     ferry::ShapeError, "gather", "-3");
  EXPECT_FERRY_ERROR(ferry::gather(x, 0, ferry::zeros({1, 1})), ferry::DTypeError, "gather", "f32");
}

TEST(Cat, AlongEveryDim) {
  Tensor a = sample_tensor({2, 3, 4}, -1, 1, 1), b = sample_tensor({2, 5, 4}, -1, 1, 2);
  Tensor c = ferry::cat({a, b}, 1);
  EXPECT_EQ(c.sizes(), (Shape{2, 8, 4}));
  expect_close(as_double(c.narrow(1, 0, 3)), as_double(a), 0, 0, "first part");
  expect_close(as_double(c.narrow(1, 3, 5)), as_double(b), 0, 0, "second part");
  Tensor d = ferry::cat({a, a, a}, -1);
  EXPECT_EQ(d.sizes(), (Shape{2, 3, 12}));
  expect_close(as_double(d.narrow(2, 8, 4)), as_double(a), 0, 0, "dim -1");
  Tensor e = ferry::cat({a, ferry::zeros({1, 3, 4})});
  EXPECT_EQ(e.sizes(), (Shape{3, 3, 4}));
  expect_close(as_double(e.select(0, 2)), std::vector<double>(12, 0.0), 0, 0, "dim 0");
  // Strided inputs and a single tensor.
  Tensor t = sample_tensor({4, 3}).t();  // [3, 4]
  expect_close(as_double(ferry::cat({t, t.slice(0, 0, 3, 2)}, 0).narrow(0, 0, 3)), as_double(t), 0,
               0, "strided");
  expect_close(as_double(ferry::cat({a})), as_double(a), 0, 0, "one tensor");
}

TEST(Cat, PromotesAndSkipsEmptyVectors) {
  Tensor i = ferry::arange(3.0, {.dtype = DType::i32}), f = ferry::tensor(std::vector<float>{0.5f});
  Tensor c = ferry::cat({i, f});
  EXPECT_EQ(c.dtype(), DType::f32);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{0, 1, 2, 0.5f}));
  EXPECT_EQ(ferry::cat({i, ferry::ones({2}, {.dtype = DType::boolean})}).dtype(), DType::i32);
  // [0]-shaped 1-D tensors are skipped whatever the other shapes (PyTorch's legacy rule).
  Tensor m = ferry::ones({2, 3});
  EXPECT_EQ(ferry::cat({ferry::zeros({0}), m, ferry::zeros({0})}, 1).sizes(), (Shape{2, 3}));
  EXPECT_EQ(ferry::cat({ferry::zeros({0}), ferry::zeros({0})}).sizes(), (Shape{0}));
  EXPECT_EQ(ferry::cat({ferry::zeros({2, 0}), m}, 1).sizes(), (Shape{2, 3}));
}

TEST(Cat, Errors) {
  Tensor m = ferry::ones({2, 3});
  EXPECT_FERRY_ERROR(ferry::cat({}), ferry::ShapeError, "cat");
  EXPECT_FERRY_ERROR(ferry::cat({m, ferry::ones({2, 4})}, 0), ferry::ShapeError, "cat",
                     "tensors[1]", "[2, 4]", "[2, 3]");
  EXPECT_FERRY_ERROR(ferry::cat({m, ferry::ones({2, 3, 1})}), ferry::ShapeError, "cat",
                     "tensors[1]");
  EXPECT_FERRY_ERROR(ferry::cat({m, m}, 2), ferry::ShapeError, "cat");
  EXPECT_FERRY_ERROR(ferry::cat({ferry::scalar_tensor(1.0), ferry::scalar_tensor(2.0)}),
                     ferry::ShapeError, "cat", "0-d");
}

TEST(Stack, NewDim) {
  Tensor a = sample_tensor({2, 3}, -1, 1, 1), b = sample_tensor({2, 3}, -1, 1, 2);
  Tensor s0 = ferry::stack({a, b});
  EXPECT_EQ(s0.sizes(), (Shape{2, 2, 3}));
  expect_close(as_double(s0.select(0, 1)), as_double(b), 0, 0, "dim 0");
  Tensor s2 = ferry::stack({a, b, a}, -1);
  EXPECT_EQ(s2.sizes(), (Shape{2, 3, 3}));
  expect_close(as_double(s2.select(2, 1)), as_double(b), 0, 0, "dim -1");
  Tensor s1 = ferry::stack({a.t().t(), b}, 1);
  EXPECT_EQ(s1.sizes(), (Shape{2, 2, 3}));
  expect_close(as_double(s1.select(1, 0)), as_double(a), 0, 0, "dim 1");
  Tensor scalars = ferry::stack({ferry::scalar_tensor(1.0), ferry::scalar_tensor(2.0)});
  EXPECT_EQ(scalars.sizes(), (Shape{2}));
  EXPECT_EQ(scalars.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(ferry::stack({ferry::zeros({0}), ferry::zeros({0})}).sizes(), (Shape{2, 0}));
  EXPECT_EQ(ferry::stack({ferry::ones({2}, {.dtype = DType::u8}), ferry::ones({2})}).dtype(),
            DType::f32);
}

TEST(Stack, Errors) {
  EXPECT_FERRY_ERROR(ferry::stack({}), ferry::ShapeError, "stack");
  EXPECT_FERRY_ERROR(ferry::stack({ferry::ones({2, 3}), ferry::ones({3, 2})}), ferry::ShapeError,
                     "stack", "tensors[1]", "[3, 2]", "[2, 3]");
  EXPECT_FERRY_ERROR(ferry::stack({ferry::ones({2}), ferry::ones({2})}, 2), ferry::ShapeError,
                     "stack");
}

// The operand checks every backend's index kernels share (ferry/kit/index_args.hpp): the 1-D
// index of index_select and index_add seen with the output's (or src's) shape, varying along
// `dim` only, and a call the core would never send refused with the backend named.
TEST(IndexArgs, ViewsAndRefusals) {
  const auto arg = [](Shape sizes, Shape strides) {
    ferry::TensorArg a;
    a.sizes = std::move(sizes);
    a.strides = std::move(strides);
    return a;
  };
  const auto call = [](ferry::OpId op, std::vector<ferry::TensorArg> in, ferry::TensorArg out,
                       std::int64_t dim) {
    return ferry::OpCall{op, std::move(in), {std::move(out)}, ferry::Attrs{{"dim", dim}}};
  };
  const ferry::OpCall select =
      call(ferry::OpId::index_select, {arg({4, 5, 6}, {30, 6, 1}), arg({3}, {2})},
           arg({4, 3, 6}, {18, 6, 1}), 1);
  const ferry::GatherOperands s = ferry::index_select_args(select, "cpu");
  EXPECT_EQ(s.index.sizes, (Shape{4, 3, 6}));
  EXPECT_EQ(s.index.strides, (Shape{0, 2, 0}));
  EXPECT_EQ(s.dim, 1);
  const ferry::OpCall add =
      call(ferry::OpId::index_add, {arg({2, 7}, {7, 1}), arg({7}, {1})}, arg({2, 9}, {9, 1}), 1);
  const ferry::AccumulateOperands a = ferry::index_add_args(add, "cuda");
  EXPECT_EQ(a.index.sizes, (Shape{2, 7}));
  EXPECT_EQ(a.index.strides, (Shape{0, 1}));

  // index_select's index longer than the output along dim; gather's index wider than x off dim.
  const ferry::OpCall long_index =
      call(ferry::OpId::index_select, {arg({4, 5}, {5, 1}), arg({3}, {1})}, arg({4, 2}, {2, 1}), 1);
  EXPECT_FERRY_ERROR(ferry::index_select_args(long_index, "vulkan"), ferry::ShapeError,
                     "index_select", "vulkan kernel");
  const ferry::OpCall wide =
      call(ferry::OpId::gather, {arg({4, 5}, {5, 1}), arg({4, 6}, {6, 1})}, arg({4, 6}, {6, 1}), 0);
  EXPECT_FERRY_ERROR(ferry::gather_args(wide, "cuda"), ferry::ShapeError, "gather", "cuda kernel");
  const ferry::OpCall narrow =
      call(ferry::OpId::gather, {arg({4, 5}, {5, 1}), arg({4, 6}, {6, 1})}, arg({4, 6}, {6, 1}), 1);
  EXPECT_EQ(ferry::gather_args(narrow, "cpu").index.strides, (Shape{6, 1}));
  const ferry::OpCall bad_dim = call(
      ferry::OpId::scatter_add, {arg({2, 3}, {3, 1}), arg({2, 3}, {3, 1})}, arg({2, 3}, {3, 1}), 2);
  EXPECT_FERRY_ERROR(ferry::scatter_add_args(bad_dim, "cpu"), ferry::ShapeError, "scatter_add",
                     "cpu kernel");
}
