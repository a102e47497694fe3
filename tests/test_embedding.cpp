// F.embedding's and F.embedding_bag's max_norm, norm_type and scale_grad_by_freq against closed
// forms on every device (PyTorch's numbers for the same options: test_nn_reference.cpp), then
// the modules' repr and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "ferry/nn.hpp"
#include "op_test_util.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
namespace nn = ferry::nn;
namespace F = ferry::nn::functional;

Tensor ids(std::vector<std::int64_t> v, const ferry::Device& dev) {
  return ferry::tensor(v).to(dev);
}

// Rows of norm 5 (3-4), 5, 0.5 and 10 (6-8): max_norm 2 shrinks the named rows above it to
// 2 / (norm + 1e-7) of themselves and leaves the rest (and the rows not named) alone.
void renorm_scales_only_the_named_rows_above_max_norm(const ferry::Device& dev) {
  Tensor w = ferry::tensor(std::vector<float>{3, 4, 0, 5, 0.3f, 0.4f, 6, 8}, {4, 2}).to(dev);
  w.requires_grad_();
  const std::uint64_t version = w.storage()->version();
  {
    ferry::NoGradGuard no_grad;  // as F.embedding runs it
    ferry::embedding_renorm_(w, ids({0, 2, 0}, dev), 2.0);
  }
  const double s = 2.0 / (5.0 + 1e-7);
  ferry_test::expect_close(ferry_test::as_double(w), {3 * s, 4 * s, 0, 5, 0.3, 0.4, 6, 8}, 1e-6,
                           1e-6);
  EXPECT_GT(w.storage()->version(), version) << "an in-place write bumps the version";
  EXPECT_TRUE(w.is_leaf());

  // Through the module: the lookup sees the renormalised rows; the 1-norm of row 3 is 14.
  nn::Embedding emb(4, 2, F::EmbeddingOptions{.max_norm = 7.0, .norm_type = 1.0}, {.device = dev});
  {
    ferry::NoGradGuard no_grad;
    emb.weight.copy_(ferry::tensor(std::vector<float>{3, 4, 0, 5, 0.3f, 0.4f, 6, 8}, {4, 2}));
  }
  const Tensor out = emb.forward(ids({3, 1}, dev));
  const double t = 7.0 / (14.0 + 1e-7);
  ferry_test::expect_close(ferry_test::as_double(out), {6 * t, 8 * t, 0, 5}, 1e-6, 1e-6);
  ferry_test::expect_close(ferry_test::as_double(emb.weight.select(0, 0)), {3, 4}, 0, 0);
  EXPECT_TRUE(emb.weight.is_leaf()) << "the renormalisation is not recorded by autograd";
  // No index at all: nothing to do.
  Tensor none = emb.weight;
  ferry::embedding_renorm_(none, ferry::zeros({0}, {.dtype = DType::i64, .device = dev}), 1.0);
  ferry_test::expect_close(ferry_test::as_double(emb.weight.select(0, 0)), {3, 4}, 0, 0);
}
FERRY_TEST_ON_EACH_DEVICE(Embedding, RenormScalesOnlyTheNamedRowsAboveMaxNorm,
                          renorm_scales_only_the_named_rows_above_max_norm)

// The gradient of sum(out * R) for row r is the sum of R over r's lookups divided by their
// count: the mean of those R rows. The padding row's lookups count but give nothing.
void scale_grad_by_freq_averages_a_rows_lookups(const ferry::Device& dev) {
  nn::Embedding emb(4, 2, F::EmbeddingOptions{.padding_idx = 3, .scale_grad_by_freq = true},
                    {.device = dev});
  const Tensor x = ids({1, 1, 2, 1, 3, 3}, dev);
  const Tensor R =
      ferry::tensor(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {6, 2}).to(dev);
  ferry::sum(emb.forward(x) * R).backward();
  ferry_test::expect_close(ferry_test::as_double(emb.weight.grad()),
                           {0, 0, (1 + 3 + 7) / 3.0, (2 + 4 + 8) / 3.0, 5, 6, 0, 0}, 1e-6, 1e-6);

  // In a bag, the count is over the whole input: index 1 appears twice across two bags.
  nn::EmbeddingBag bag(4, 2, {.mode = "sum", .scale_grad_by_freq = true}, {.device = dev});
  ferry::sum(bag.forward(ids({1, 2, 1, 0}, dev), ids({0, 2}, dev)) *
             ferry::tensor(std::vector<float>{1, 2, 10, 20}, {2, 2}).to(dev))
      .backward();
  ferry_test::expect_close(ferry_test::as_double(bag.weight.grad()),
                           {10, 20, (1 + 10) / 2.0, (2 + 20) / 2.0, 1, 2, 0, 0}, 1e-6, 1e-6);
}
FERRY_TEST_ON_EACH_DEVICE(Embedding, ScaleGradByFreqAveragesARowsLookups,
                          scale_grad_by_freq_averages_a_rows_lookups)

TEST(Embedding, ReprNamesTheOptionsInPyTorchsOrder) {
  EXPECT_EQ(nn::Embedding(
                10, 3,
                F::EmbeddingOptions{
                    .padding_idx = 2, .max_norm = 1.5, .norm_type = 1, .scale_grad_by_freq = true})
                .extra_repr(),
            "10, 3, padding_idx=2, max_norm=1.5, norm_type=1, scale_grad_by_freq=true");
  EXPECT_EQ(nn::Embedding(10, 3).extra_repr(), "10, 3");
  EXPECT_EQ(
      nn::EmbeddingBag(10, 3, {.mode = "sum", .padding_idx = 0, .max_norm = 2.0}).extra_repr(),
      "10, 3, max_norm=2, mode='sum', padding_idx=0");
}

TEST(Embedding, BadOptionsAreTypedAndLeaveTheWeightAlone) {
  Tensor w = ferry::tensor(std::vector<float>{3, 4, 0, 5}, {2, 2});
  const auto x = ferry::tensor(std::vector<std::int64_t>{0, 1});
  EXPECT_FERRY_ERROR(ferry::embedding_renorm_(w, x, -1.0), ferry::ValueError, "max_norm", "-1");
  EXPECT_FERRY_ERROR(ferry::embedding_renorm_(w, x, 1.0, 0.0), ferry::ValueError, "norm_type");
  EXPECT_FERRY_ERROR(ferry::embedding_renorm_(w, ferry::ones({2}), 1.0), ferry::DTypeError,
                     "embedding_renorm_");
  Tensor flat = ferry::ones({4});
  EXPECT_FERRY_ERROR(ferry::embedding_renorm_(flat, x, 1.0), ferry::ShapeError, "2-D", "[4]");
  // An index past the table is refused before any row is written.
  EXPECT_FERRY_ERROR(
      ferry::embedding_renorm_(w, ferry::tensor(std::vector<std::int64_t>{0, 2}), 1.0),
      ferry::ShapeError, "embedding_renorm_", "2");
  ferry_test::expect_close(ferry_test::as_double(w), {3, 4, 0, 5}, 0, 0);
  EXPECT_FERRY_ERROR(F::embedding_bag(x, w, ferry::tensor(std::vector<std::int64_t>{0}),
                                      {.mode = "max", .scale_grad_by_freq = true}),
                     ferry::ValueError, "max", "scale_grad_by_freq");
}

}  // namespace
