// Tensors: factories, views sharing storage, copies, conversions, printing.
#include <gtest/gtest.h>

#include <cmath>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;

namespace {
std::vector<float> iota(int n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[std::size_t(i)] = float(i);
  return v;
}
}  // namespace

TEST(Tensor, FactoriesFillShapesAndDtypes) {
  Tensor z = ferry::zeros({2, 3});
  EXPECT_EQ(z.sizes(), (Shape{2, 3}));
  EXPECT_EQ(z.strides(), (Shape{3, 1}));
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(ferry::ones({4}, {.dtype = DType::i64}).to_vector<std::int64_t>(),
            std::vector<std::int64_t>(4, 1));
  EXPECT_EQ(ferry::full({2}, 2.5, {.dtype = DType::bf16}).to_vector<float>(),
            (std::vector<float>{2.5f, 2.5f}));
  EXPECT_EQ(ferry::full({3}, true).dtype(), DType::f32);
  EXPECT_EQ(ferry::full({3}, true, {.dtype = DType::boolean}).to_vector<bool>(),
            (std::vector<bool>{true, true, true}));
  EXPECT_EQ(ferry::arange(5).to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(ferry::arange(1, 2, 0.25).to_vector<float>(),
            (std::vector<float>{1, 1.25f, 1.5f, 1.75f}));
  EXPECT_EQ(ferry::arange(5, 0, -2, {.dtype = DType::i32}).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{5, 3, 1}));
  EXPECT_EQ(ferry::arange(0).numel(), 0);
  Tensor s = ferry::scalar_tensor(3);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.dtype(), DType::i64);
  EXPECT_EQ(s.item<std::int64_t>(), 3);
  Tensor e = ferry::empty({0, 5});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_TRUE(e.to_vector<float>().empty());
}

TEST(Tensor, FromVectorEveryDtype) {
  EXPECT_EQ(ferry::tensor(std::vector<std::int32_t>{1, -2}).dtype(), DType::i32);
  EXPECT_EQ(ferry::tensor(std::vector<std::uint8_t>{1, 255}).to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{1, 255}));
  EXPECT_EQ(ferry::tensor(std::vector<bool>{true, false}).to_vector<bool>(),
            (std::vector<bool>{true, false}));
  Tensor h = ferry::tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, {.dtype = DType::f16});
  EXPECT_EQ(h.dtype(), DType::f16);
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(ferry::tensor(std::vector<float>{1, 2, 3}, {2, 2}), ferry::ShapeError);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = ferry::tensor(iota(12), {3, 4});
  Tensor v = t.view({4, 3});
  EXPECT_EQ(v.storage(), t.storage());
  Tensor row = t.select(0, 1);
  row.fill_(-1);
  EXPECT_EQ(t.to_vector<float>()[4], -1.0f);
  EXPECT_EQ(t.to_vector<float>()[7], -1.0f);
  EXPECT_EQ(v.to_vector<float>()[5], -1.0f);  // seen through the other view too
}

TEST(Tensor, ViewOpsComputeSizesStridesAndOffsets) {
  Tensor t = ferry::tensor(iota(24), {2, 3, 4});
  Tensor p = t.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(p.contiguous().to_vector<float>()[1], 4.0f);
  Tensor s = t.slice(2, 1, 4, 2);  // columns 1 and 3
  EXPECT_EQ(s.sizes(), (Shape{2, 3, 2}));
  EXPECT_EQ(s.storage_offset(), 1);
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));
  EXPECT_EQ(t.narrow(1, 1, 2).to_vector<float>()[0], 4.0f);
  EXPECT_EQ(t.transpose(0, 2).sizes(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.unsqueeze(1).sizes(), (Shape{2, 1, 3, 4}));
  EXPECT_EQ(t.unsqueeze(-1).sizes(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(t.unsqueeze(1).squeeze().sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.unsqueeze(0).squeeze(0).sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.flatten(1).sizes(), (Shape{2, 12}));
  EXPECT_EQ(t.reshape({-1, 6}).sizes(), (Shape{4, 6}));
  Tensor e = ferry::tensor(std::vector<float>{1, 2, 3}, {3, 1}).expand({3, 4});
  EXPECT_EQ(e.strides(), (Shape{1, 0}));
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}));
  EXPECT_EQ(e.expand({2, 3, 4}).sizes(), (Shape{2, 3, 4}));
}

TEST(Tensor, ReshapeCopiesOnlyWhenItMust) {
  Tensor t = ferry::tensor(iota(6), {2, 3});
  EXPECT_EQ(t.reshape({3, 2}).storage(), t.storage());
  Tensor tt = t.t();
  EXPECT_THROW(tt.view({6}), ferry::ShapeError);
  Tensor r = tt.reshape({6});
  EXPECT_NE(r.storage(), t.storage());
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  // Merging dims that stay contiguous is a view even after slicing rows.
  Tensor rows = ferry::tensor(iota(24), {6, 4}).slice(0, 0, 6, 2);
  EXPECT_EQ(rows.unsqueeze(0).reshape({3, 4}).storage(), rows.storage());
}

TEST(Tensor, BadViewsAreShapeErrors) {
  Tensor t = ferry::zeros({2, 3});
  EXPECT_THROW(t.view({4, 2}), ferry::ShapeError);
  EXPECT_THROW(t.reshape({-1, -1}), ferry::ShapeError);
  EXPECT_THROW(t.permute({0, 0}), ferry::ShapeError);
  EXPECT_THROW(t.permute({0}), ferry::ShapeError);
  EXPECT_THROW(t.select(0, 2), ferry::ShapeError);
  EXPECT_THROW(t.narrow(1, 2, 2), ferry::ShapeError);
  EXPECT_THROW(t.expand({3, 3}), ferry::ShapeError);
  EXPECT_THROW(t.transpose(0, 2), ferry::ShapeError);
  EXPECT_THROW(t.slice(0, 0, 1, 0), ferry::ShapeError);
  EXPECT_THROW(t.item<float>(), ferry::ShapeError);
  EXPECT_THROW(Tensor().sizes(), ferry::Error);
  try {
    t.view({5});
  } catch (const ferry::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[5]"), std::string::npos) << e.what();
  }
}

TEST(Tensor, ConversionsRoundAndSaturate) {
  Tensor f = ferry::tensor(std::vector<float>{-2.7f, 2.7f, NAN, 1e10f, -1e10f, 0.5f});
  EXPECT_EQ(f.to(DType::i32).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{-2, 2, 0, INT32_MAX, INT32_MIN, 0}));
  EXPECT_EQ(f.to(DType::boolean).to_vector<bool>(),
            (std::vector<bool>{true, true, true, true, true, true}));
  EXPECT_EQ(
      ferry::tensor(std::vector<std::int64_t>{300, -1}).to(DType::u8).to_vector<std::uint8_t>(),
      (std::vector<std::uint8_t>{44, 255}));  // integer narrowing wraps like PyTorch
  EXPECT_EQ(ferry::tensor(std::vector<float>{65520.0f}).to(DType::f16).to_vector<float>()[0],
            INFINITY);
  Tensor same = f.to(DType::f32);
  EXPECT_TRUE(same.is_same(f));
}

TEST(Tensor, CopyBroadcastsAndConverts) {
  Tensor dst = ferry::zeros({2, 3}, {.dtype = DType::i64});
  dst.copy_(ferry::tensor(std::vector<float>{1.9f, 2.1f, -3.5f}));
  EXPECT_EQ(dst.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2, -3, 1, 2, -3}));
  Tensor t = ferry::tensor(iota(6), {2, 3});
  t.t().copy_(ferry::tensor(iota(6), {3, 2}));  // writes through a transposed view
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 2, 4, 1, 3, 5}));
  Tensor c = t.clone();
  EXPECT_NE(c.storage(), t.storage());
  c.fill_(0);
  EXPECT_EQ(t.to_vector<float>()[1], 2.0f);
}

TEST(Tensor, LargeStridedCopyIsExact) {
  // > 2^24 elements through the threaded strided path.
  const std::int64_t rows = 4099, cols = 4099;
  Tensor t = ferry::arange(0, double(rows * cols), 1, {.dtype = DType::i32}).view({rows, cols});
  Tensor tt = t.t().contiguous();
  auto v = tt.to_vector<std::int32_t>();
  for (std::int64_t i : {std::int64_t(0), std::int64_t(1), rows * cols / 2 + 17, rows * cols - 1}) {
    std::int64_t r = i / cols, c = i % cols;
    ASSERT_EQ(v[std::size_t(i)], std::int32_t(c * cols + r)) << i;
  }
}

TEST(Tensor, PrintsLikePyTorch) {
  Tensor t = ferry::tensor(std::vector<float>{1, 2.5f, -3, 4}, {2, 2});
  EXPECT_EQ(t.str(), "tensor([[ 1.0000,  2.5000],\n        [-3.0000,  4.0000]])");
  EXPECT_EQ(ferry::tensor(std::vector<std::int64_t>{1, 22}).str(), "tensor([ 1, 22])");
  EXPECT_EQ(ferry::tensor(std::vector<bool>{true}).str(), "tensor([True])");
  EXPECT_EQ(ferry::tensor(std::vector<float>{1}).to(DType::f16).str(),
            "tensor([1.0000], dtype=f16)");
  EXPECT_EQ(ferry::empty({0, 3}).str(), "tensor([], size=[0, 3])");
  std::string big = ferry::zeros({2000}).str();
  EXPECT_NE(big.find("..."), std::string::npos);
  EXPECT_LT(big.size(), 200u);
  // Nested dims: a blank line between blocks, rows aligned under the first.
  EXPECT_EQ(ferry::arange(8).to(DType::i64).view({2, 2, 2}).str(),
            "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])");
  // Rows elided past 1000 elements, three at each end, as torch.zeros(2000, 2, dtype=int64).
  EXPECT_EQ(ferry::zeros({2000, 2}, {.dtype = DType::i64}).str(),
            "tensor([[0, 0],\n        [0, 0],\n        [0, 0],\n        ...,\n        [0, 0],\n"
            "        [0, 0],\n        [0, 0]])");
}

TEST(Tensor, StorageExchangeKeepsViewsOfTheSameStorage) {
  // Note [Tensors and storages]: the transfer planner commits a move by
  // swapping a Storage's memory in place; every view of it follows.
  Tensor t = ferry::arange(6).view({2, 3});
  Tensor col = t.select(1, 1);           // elements 1 and 4
  Tensor donor = ferry::arange(10, 16);  // memory that already holds the "moved" bytes
  ferry::DeviceImpl& cpu = ferry::device_impl(ferry::Device::cpu());
  std::unique_ptr<ferry::Buffer> moved = donor.storage()->exchange(cpu, cpu.allocate(0));
  std::unique_ptr<ferry::Buffer> old = t.storage()->exchange(cpu, std::move(moved));
  EXPECT_EQ(old->size(), 24u);
  EXPECT_EQ(col.storage(), t.storage());
  EXPECT_EQ(col.to_vector<float>(), (std::vector<float>{11, 14}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{10, 11, 12, 13, 14, 15}));
}
