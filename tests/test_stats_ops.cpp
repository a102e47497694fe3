// aminmax, cov, corrcoef, quantile, nanquantile, logcumsumexp, trapezoid, cumulative_trapezoid,
// fmax, fmin, heaviside, float_power, take, index_copy, diag_embed, block_diag and
// cartesian_prod against PyTorch's (tests/data/pytorch_stats_reference.json, written by
// tools/gen_stats_reference.py) on every device: outputs and every floating input's gradient.
// Then f64 gradchecks, the views and stacks (tensor_split, atleast_*d, hstack, vstack, dstack,
// column_stack) against PyTorch's shapes and values, the edges and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "gradcheck.hpp"
#include "op_test_util.hpp"
#include "torch_reference.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry_test::expect_close;
using nlohmann::json;

std::optional<std::int64_t> dim_of(const json& a) {
  return a.contains("dim") ? std::optional(a["dim"].get<std::int64_t>()) : std::nullopt;
}

Tensor run_case(const std::string& op, const json& a, const std::vector<Tensor>& in) {
  if (op == "take") return ferry::take(in[0], in[1]);
  if (op == "index_copy") return ferry::index_copy(in[0], a["dim"], in[1], in[2]);
  if (op == "diag_embed") return ferry::diag_embed(in[0], a["offset"], a["dim1"], a["dim2"]);
  if (op == "block_diag") return ferry::block_diag(in);
  if (op == "cartesian_prod") return ferry::cartesian_prod(in);
  if (op == "aminmax") {
    const ferry::MinMax m = ferry::aminmax(in[0], dim_of(a), a.value("keepdim", false));
    return a["which"] == "min" ? m.min : m.max;
  }
  if (op == "cov")
    return ferry::cov(in[0], a["correction"], in.size() > 1 ? in[1] : Tensor(),
                      in.size() > 2 ? in[2] : Tensor());
  if (op == "corrcoef") return ferry::corrcoef(in[0]);
  if (op == "quantile" || op == "nanquantile") {
    const std::string mode = a.value("interpolation", std::string("linear"));
    const ferry::TensorOptions like{.dtype = in[0].dtype(), .device = in[0].device()};
    const Tensor q =
        in.size() > 1 ? in[1]
        : a["q"].is_array()
            ? ferry::tensor(a["q"].get<std::vector<double>>()).to(in[0].device(), in[0].dtype())
            : ferry::full({}, a["q"].get<double>(), like);
    const bool keepdim = a.value("keepdim", false);
    return op == "quantile" ? ferry::quantile(in[0], q, dim_of(a), keepdim, mode)
                            : ferry::nanquantile(in[0], q, dim_of(a), keepdim, mode);
  }
  if (op == "logcumsumexp") return ferry::logcumsumexp(in[0], a["dim"]);
  if (op == "trapezoid")
    return in.size() > 1 ? ferry::trapezoid(in[0], in[1], a["dim"])
                         : ferry::trapezoid(in[0], a["dx"].get<double>(), a["dim"]);
  if (op == "cumulative_trapezoid")
    return in.size() > 1 ? ferry::cumulative_trapezoid(in[0], in[1], a["dim"])
                         : ferry::cumulative_trapezoid(in[0], a["dx"].get<double>(), a["dim"]);
  if (op == "fmax") return ferry::fmax(in[0], in[1]);
  if (op == "fmin") return ferry::fmin(in[0], in[1]);
  if (op == "heaviside") return ferry::heaviside(in[0], in[1]);
  if (op == "float_power")  // the reference file holds f64 results as f32
    return (in.size() > 1 ? ferry::float_power(in[0], in[1])
                          : ferry::float_power(in[0], a["exponent"].get<double>()))
        .to(DType::f32);
  ADD_FAILURE() << "unknown op " << op;
  return {};
}

void run_reference(const ferry::Device& dev) {
  ferry_test::run_output_reference_file("pytorch_stats_reference.json", dev, 38, run_case);
}

FERRY_TEST_ON_EACH_DEVICE(StatsOps, PyTorchReference, run_reference)

TEST(StatsOps, Gradcheck) {
  using ferry_test::grad_input;
  using In = const std::vector<Tensor>&;
  EXPECT_TRUE(ferry_test::gradcheck([](In in) { return ferry::cov(in[0], 1, {}, in[1]); },
                                    {grad_input({3, 5}, -1, 1, 1), grad_input({5}, 0.5, 1.5, 2)}));
  EXPECT_TRUE(ferry_test::gradcheck([](In in) { return ferry::corrcoef(in[0]); },
                                    {grad_input({3, 6}, -1, 1, 3)}));
  EXPECT_TRUE(
      ferry_test::gradcheck([](In in) { return ferry::quantile(in[0], in[1], 1); },
                            {grad_input({2, 7}, -1, 1, 4), grad_input({3}, 0.05, 0.95, 5)}));
  EXPECT_TRUE(ferry_test::gradcheck([](In in) { return ferry::logcumsumexp(in[0], 0); },
                                    {grad_input({9, 2}, -5, 5, 6)}));
  EXPECT_TRUE(
      ferry_test::gradcheck([](In in) { return ferry::cumulative_trapezoid(in[0], in[1], 1); },
                            {grad_input({2, 5}, -1, 1, 7), grad_input({5}, 0, 3, 8)}));
  EXPECT_TRUE(ferry_test::gradcheck([](In in) { return ferry::diag_embed(in[0], -1, 0, 2); },
                                    {grad_input({3, 2}, -1, 1, 9)}));
  EXPECT_TRUE(ferry_test::gradcheck(
      [](In in) {
        return ferry::block_diag({in[0], in[1]});
      },
      {grad_input({2, 3}, -1, 1, 10), grad_input({4}, -1, 1, 11)}));
}

// The edges PyTorch defines, on every device.
void edges_are_pytorchs(const ferry::Device& dev) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const auto f = [&](std::vector<float> v) { return ferry::tensor(v).to(dev); };
  const auto l = [&](std::vector<std::int64_t> v) { return ferry::tensor(v).to(dev); };
  // logcumsumexp at any spread (one shift for the row would give -inf first), and -inf adds 0.
  expect_close(ferry::logcumsumexp(f({-1000, 0, 1000, -inf}), 0), f({-1000, 0, 1000, 1000}), 1e-6,
               0, "logcumsumexp");
  expect_close(ferry::logcumsumexp(f({3}).reshape({}), 0), f({3}).reshape({}), 0, 0, "0-d");
  // quantile's interpolations on 1..6 at ranks 0.5, 1.5, ... (nearest: ties to even).
  const Tensor six = f({1, 2, 3, 4, 5, 6});
  const Tensor q = f({0.1f, 0.3f, 0.5f, 0.7f, 0.9f});
  expect_close(ferry::quantile(six, q, std::nullopt, false, "nearest"), f({1, 3, 3, 5, 5}), 0, 0,
               "nearest");
  expect_close(ferry::quantile(six, q, std::nullopt, false, "midpoint"),
               f({1.5f, 2.5f, 3.5f, 4.5f, 5.5f}), 1e-6, 0, "midpoint");
  EXPECT_EQ(ferry::quantile(six, q, std::nullopt, true).sizes(), (ferry::Shape{5, 1}));
  EXPECT_EQ(
      ferry::quantile(ferry::ones({2, 3, 4}, {.device = dev}), f({0.2f, 0.4f}), 1, true).sizes(),
      (ferry::Shape{2, 2, 1, 4}));
  // A 16-bit slice longer than 2048, where f16 holds integers only to even ones: the 5000
  // consecutive f16 numbers from 1 (distinct, sorted), at q = 1435 / 2048 (an f16 number), rank
  // 3502.72. Rounded to f16 the rank would be 3502 (11.359375); in f32 it interpolates to
  // 11.365, which rounds to f16's 11.3671875, within half an f16 step (2^-8) of the f32 answer.
  std::vector<float> ladder;
  for (int k = 0; k < 5000; ++k)
    ladder.push_back(std::ldexp(1.0f + float(k % 1024) / 1024, k / 1024));
  const Tensor long16 = ferry::tensor(ladder).to(dev, DType::f16);
  const double q16 = 1435.0 / 2048;
  expect_close(ferry::quantile(long16, q16).to(DType::f32),
               ferry::quantile(long16.to(DType::f32), q16), 0, 1.0 / 256, "f16 over 5000");
  const auto all_nan = ferry::nanquantile(f({nan, nan}), 0.5).to_vector<float>();
  EXPECT_TRUE(std::isnan(all_nan[0]));
  // fmax / fmin ignore one NaN, keep two.
  const auto m = ferry::fmax(f({nan, 1, nan}), f({2, nan, nan})).to_vector<float>();
  EXPECT_EQ(m[0], 2.0f);
  EXPECT_EQ(m[1], 1.0f);
  EXPECT_TRUE(std::isnan(m[2]));
  EXPECT_EQ(ferry::fmin(l({1, 5}), l({3, 2})).to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{1, 2}));
  // float_power is f64 whatever it is given; heaviside of NaN is 0.
  EXPECT_EQ(ferry::float_power(l({2}), 3).dtype(), DType::f64);
  EXPECT_EQ(ferry::float_power(l({2}), 3).item<double>(), 8.0);
  expect_close(ferry::heaviside(f({-1, 0, 2, nan}), f({0.5f})), f({0, 0.5f, 1, 0}), 0, 0,
               "heaviside");
  // cov of one observation has no degrees of freedom: NaN (0 / 0); of one variable, 0-d.
  EXPECT_TRUE(std::isnan(ferry::cov(ferry::ones({2, 1}, {.device = dev})).to_vector<float>()[0]));
  EXPECT_EQ(ferry::cov(f({1, 2, 4})).dim(), 0);
  expect_close(ferry::cov(l({1, 2, 4, 0, 1, 1}).reshape({2, 3})),
               f({7.0f / 3, 2.0f / 3, 2.0f / 3, 1.0f / 3}).reshape({2, 2}), 1e-6, 1e-7, "int cov");
  expect_close(ferry::corrcoef(f({1, 2, 4})), f({1}).reshape({}), 0, 0, "corrcoef of one");
  // trapezoid of integers is f32; of an empty dim, 0.
  EXPECT_EQ(ferry::trapezoid(l({1, 2, 3})).item<float>(), 4.0f);
  EXPECT_EQ(ferry::trapezoid(l({1, 2, 3}), l({1, 2, 4})).item<float>(), 6.5f);
  expect_close(ferry::trapezoid(ferry::zeros({3, 0}, {.device = dev})), f({0, 0, 0}), 0, 0,
               "empty");
  EXPECT_EQ(ferry::cumulative_trapezoid(ferry::zeros({3, 0}, {.device = dev})).sizes(),
            (ferry::Shape{3, 0}));
  // aminmax over everything, kept as 1s; bool too.
  const ferry::MinMax mm = ferry::aminmax(l({1, 5, 3, 2}).reshape({2, 2}), std::nullopt, true);
  EXPECT_EQ(mm.min.sizes(), (ferry::Shape{1, 1}));
  EXPECT_EQ(mm.min.item<std::int64_t>(), 1);
  EXPECT_EQ(mm.max.item<std::int64_t>(), 5);
  // block_diag of nothing is [1, 0]; cartesian_prod of one tensor is that tensor.
  EXPECT_EQ(ferry::block_diag({}).sizes(), (ferry::Shape{1, 0}));
  const Tensor one = l({1, 2});
  EXPECT_TRUE(ferry::cartesian_prod({one}).is_same(one));
  // take and index_copy with a 0-d index.
  EXPECT_EQ(ferry::take(l({4, 5, 6}), l({-1}).reshape({})).item<std::int64_t>(), 6);
  expect_close(ferry::index_copy(ferry::zeros({3, 2}, {.device = dev}), 1, l({1}).reshape({}),
                                 ferry::ones({3, 1}, {.device = dev})),
               f({0, 1, 0, 1, 0, 1}).reshape({3, 2}), 0, 0, "index_copy 0-d index");
  // diag_embed keeps infinities off the diagonal's neighbours.
  expect_close(ferry::diag_embed(f({inf, 1})), f({inf, 0, 0, 1}).reshape({2, 2}), 0, 0,
               "diag_embed inf");
}
FERRY_TEST_ON_EACH_DEVICE(StatsOps, EdgesArePyTorchs, edges_are_pytorchs)

// The views and stacks against PyTorch's shapes and values (torch 1.13).
TEST(StatsOps, SplitsAndStacksArePyTorchs) {
  const Tensor seven = ferry::arange(7.0, {.dtype = DType::i64});
  const auto values = [](const std::vector<Tensor>& parts) {
    std::vector<std::vector<std::int64_t>> out;
    for (const Tensor& p : parts) out.push_back(p.to_vector<std::int64_t>());
    return out;
  };
  using V = std::vector<std::vector<std::int64_t>>;
  EXPECT_EQ(values(ferry::tensor_split(seven, 3)), (V{{0, 1, 2}, {3, 4}, {5, 6}}));
  // Python slice bounds: [0:1], [1:-2], [-2:10], [10:3], [3:].
  EXPECT_EQ(values(ferry::tensor_split(seven, std::vector<std::int64_t>{1, -2, 10, 3})),
            (V{{0}, {1, 2, 3, 4}, {5, 6}, {}, {3, 4, 5, 6}}));
  const std::vector<Tensor> cols = ferry::tensor_split(seven.reshape({1, 7}), 2, 1);
  EXPECT_EQ(cols[0].sizes(), (ferry::Shape{1, 4}));
  EXPECT_EQ(cols[0].storage(), seven.storage()) << "tensor_split returns views";

  const Tensor s = ferry::scalar_tensor(1, {.dtype = DType::i64});
  const Tensor v = ferry::tensor(std::vector<std::int64_t>{2, 3});
  EXPECT_EQ(ferry::hstack({s, v}).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2, 3}));
  const Tensor cs =
      ferry::column_stack({ferry::tensor(std::vector<float>{1, 2}), ferry::ones({2, 2})});
  EXPECT_EQ(cs.to_vector<float>(), (std::vector<float>{1, 1, 1, 2, 1, 1}));
  EXPECT_EQ(ferry::dstack({v, v}).sizes(), (ferry::Shape{1, 2, 2}));
  EXPECT_EQ(ferry::vstack({v, v}).sizes(), (ferry::Shape{2, 2}));
  EXPECT_EQ(ferry::atleast_3d(ferry::ones({2, 3})).sizes(), (ferry::Shape{2, 3, 1}));
  EXPECT_EQ(ferry::atleast_3d(ferry::ones({3})).sizes(), (ferry::Shape{1, 3, 1}));
  EXPECT_EQ(ferry::atleast_2d(s).sizes(), (ferry::Shape{1, 1}));
  EXPECT_EQ(ferry::atleast_1d(s).sizes(), (ferry::Shape{1}));
  EXPECT_EQ(ferry::hstack({ferry::ones({2, 1}), ferry::zeros({2, 2})}).sizes(),
            (ferry::Shape{2, 3}));
}

TEST(StatsOps, ErrorsArePyTorchs) {
  const Tensor x = ferry::ones({2, 3});
  const Tensor i32 = ferry::tensor(std::vector<std::int32_t>{1});
  const auto l = [](std::vector<std::int64_t> v) { return ferry::tensor(v); };
  EXPECT_FERRY_ERROR(ferry::take(x, l({6})), ferry::ShapeError, "take", "6", "-6 to 5");
  EXPECT_FERRY_ERROR(ferry::take(x, i32), ferry::DTypeError, "long", "i32");
  EXPECT_FERRY_ERROR(ferry::index_copy(x, 0, l({2}), ferry::ones({1, 3})), ferry::ShapeError,
                     "index_copy", "2");
  EXPECT_FERRY_ERROR(ferry::index_copy(x, 0, l({-1}), ferry::ones({1, 3})), ferry::ShapeError,
                     "index_copy", "-1");
  EXPECT_FERRY_ERROR(ferry::index_copy(x, 0, l({0, 1}), ferry::ones({1, 3})), ferry::ShapeError,
                     "[2, 3]", "[1, 3]");
  EXPECT_FERRY_ERROR(ferry::index_copy(x, 0, l({0}), ferry::ones({1, 3}, {.dtype = DType::f64})),
                     ferry::DTypeError, "same dtype");
  EXPECT_FERRY_ERROR(ferry::index_copy(x, 0, l({0, 1}).reshape({1, 2}), ferry::ones({2, 3})),
                     ferry::ShapeError, "dimension 1 or 0");
  EXPECT_FERRY_ERROR(ferry::diag_embed(l({1, 2}), 0, 0, -2), ferry::ShapeError, "identical");
  EXPECT_FERRY_ERROR(ferry::block_diag({ferry::ones({1, 1, 1})}), ferry::ShapeError,
                     "2 or fewer dimensions", "Input 0");
  EXPECT_FERRY_ERROR(ferry::cartesian_prod({x}), ferry::ShapeError, "1D", "[2, 3]");
  EXPECT_FERRY_ERROR(ferry::cartesian_prod({}), ferry::ValueError, "non-empty");
  EXPECT_FERRY_ERROR(ferry::aminmax(ferry::zeros({0})), ferry::ShapeError, "empty");
  EXPECT_FERRY_ERROR(ferry::aminmax(ferry::zeros({2, 0}), 1), ferry::ShapeError, "empty");
  EXPECT_FERRY_ERROR(ferry::cov(ferry::ones({2, 3, 1})), ferry::ShapeError, "two or fewer");
  EXPECT_FERRY_ERROR(ferry::cov(x, 1, ferry::ones({3})), ferry::DTypeError, "fweights", "integral");
  EXPECT_FERRY_ERROR(ferry::cov(x, 1, l({1, -2, 3})), ferry::ValueError, "fweights", "negative");
  EXPECT_FERRY_ERROR(ferry::cov(x, 1, {}, l({1, 2, 3})), ferry::DTypeError, "aweights");
  EXPECT_FERRY_ERROR(ferry::cov(x, 1, {}, ferry::tensor(std::vector<float>{1, -2, 3})),
                     ferry::ValueError, "aweights", "negative");
  EXPECT_FERRY_ERROR(ferry::cov(x, 1, l({1, 2})), ferry::ShapeError, "2 != 3");
  EXPECT_FERRY_ERROR(ferry::cov(x.to(DType::boolean)), ferry::DTypeError, "cov", "bool");
  EXPECT_FERRY_ERROR(ferry::quantile(l({1, 2}), 0.5), ferry::DTypeError, "quantile", "i64");
  EXPECT_FERRY_ERROR(ferry::quantile(x, 1.5), ferry::ValueError, "[0, 1]");
  EXPECT_FERRY_ERROR(ferry::quantile(x, ferry::ones({1, 1})), ferry::ShapeError, "scalar or 1D");
  EXPECT_FERRY_ERROR(ferry::quantile(x, ferry::ones({1}, {.dtype = DType::f64})), ferry::DTypeError,
                     "same dtype");
  EXPECT_FERRY_ERROR(ferry::quantile(x, 0.5, std::nullopt, false, "cubic"), ferry::ValueError,
                     "cubic");
  EXPECT_FERRY_ERROR(ferry::nanquantile(ferry::zeros({0}), 0.5), ferry::ShapeError, "non-empty");
  EXPECT_FERRY_ERROR(ferry::logcumsumexp(l({1, 2}), 0), ferry::DTypeError, "logcumsumexp");
  EXPECT_FERRY_ERROR(ferry::trapezoid(x, ferry::ones({2})), ferry::ShapeError, "one `x` value");
  EXPECT_FERRY_ERROR(ferry::heaviside(x, l({1})), ferry::DTypeError, "different dtypes");
  EXPECT_FERRY_ERROR(ferry::tensor_split(ferry::scalar_tensor(1), 2), ferry::ShapeError,
                     "1-dimensional");
  EXPECT_FERRY_ERROR(ferry::tensor_split(x, 0), ferry::ValueError, "larger than 0");
  // heaviside has no gradient.
  Tensor w = ferry::ones({2}).requires_grad_();
  EXPECT_FALSE(ferry::heaviside(w, ferry::ones({1})).requires_grad());
}

}  // namespace
