// conv1d/2d/3d, unfold and fold (ferry/ops_conv.hpp): against PyTorch's results and
// gradients (tests/data/pytorch_conv_reference.json, written by tools/gen_conv_reference.py)
// on every device, against finite differences in f64 on the CPU, and PyTorch's errors for
// bad geometry, typed, with nothing computed.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "gradcheck.hpp"
#include "op_test_util.hpp"
#include "torch_reference.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding pytorch_conv_reference.json"
#endif

namespace {

using ferry::DType;
using ferry::Tensor;
using nlohmann::json;

using ferry_test::sizes;

Tensor call(const std::string& op, const json& a, const std::vector<Tensor>& in) {
  if (op == "unfold")
    return ferry::unfold(in[0], sizes(a, "kernel_size", 1), sizes(a, "dilation", 1),
                         sizes(a, "padding", 0), sizes(a, "stride", 1));
  if (op == "fold")
    return ferry::fold(in[0], sizes(a, "output_size", 1), sizes(a, "kernel_size", 1),
                       sizes(a, "dilation", 1), sizes(a, "padding", 0), sizes(a, "stride", 1));
  const ferry::ConvPadding padding = a.contains("padding") && a["padding"].is_string()
                                         ? ferry::ConvPadding(a["padding"].get<std::string>())
                                         : ferry::ConvPadding(sizes(a, "padding", 0));
  const Tensor bias = in.size() > 2 ? in[2] : Tensor();
  const auto stride = sizes(a, "stride", 1), dilation = sizes(a, "dilation", 1);
  const std::int64_t groups = a.value("groups", std::int64_t(1));
  if (op == "conv1d") return ferry::conv1d(in[0], in[1], bias, stride, padding, dilation, groups);
  if (op == "conv2d") return ferry::conv2d(in[0], in[1], bias, stride, padding, dilation, groups);
  EXPECT_EQ(op, "conv3d");
  return ferry::conv3d(in[0], in[1], bias, stride, padding, dilation, groups);
}

void run_reference(const ferry::Device& dev) {
  ferry_test::run_reference_file(
      "pytorch_conv_reference.json", dev, 20,
      [](const std::string& op, const json& attrs, const std::vector<Tensor>& in,
         const std::vector<Tensor>&) { return ferry_test::ReferenceResult{call(op, attrs, in)}; });
}

FERRY_TEST_ON_EACH_DEVICE(Conv, PyTorchReference, run_reference)

Tensor f64_input(const ferry::Shape& s, std::uint64_t seed) {
  ferry::manual_seed(seed);
  return ferry::rand(s, {.dtype = DType::f64}) * 2.0 - 1.0;
}

// Finite differences in double through every geometry knob at once.
TEST(Conv, GradcheckInDouble) {
  using In = std::vector<Tensor>;
  EXPECT_TRUE(ferry_test::gradcheck(
      [](const In& in) {
        return ferry::conv2d(in[0], in[1], in[2], {2, 1}, {1, 0}, {1, 2}, 2);
      },
      {f64_input({2, 4, 6, 7}, 1), f64_input({4, 2, 3, 2}, 2), f64_input({4}, 3)}));
  EXPECT_TRUE(ferry_test::gradcheck(
      [](const In& in) { return ferry::conv1d(in[0], in[1], in[2], {1}, "same", {2}); },
      {f64_input({2, 3, 8}, 4), f64_input({2, 3, 4}, 5), f64_input({2}, 6)}));
  EXPECT_TRUE(ferry_test::gradcheck(
      [](const In& in) {
        return ferry::conv3d(in[0], in[1], Tensor(), {1, 2, 1}, {0, 1, 1});
      },
      {f64_input({1, 2, 3, 4, 3}, 7), f64_input({3, 2, 2, 2, 2}, 8)}));
  EXPECT_TRUE(ferry_test::gradcheck(
      [](const In& in) {
        return ferry::fold(ferry::unfold(in[0], {2, 3}, {1}, {1}, {2, 1}) * 1.5, {5, 4}, {2, 3},
                           {1}, {1}, {2, 1});
      },
      {f64_input({2, 2, 5, 4}, 9)}));
}

// Note [CPU convolution's threads]: a batch whose samples the CPU's im2col path splits over
// threads (8 samples on 2 threads) gives what the same samples give one at a time (a batch of
// one runs unsplit), forward and both gradients, the weight's summed over the samples. f64
// keeps oneDNN out (it computes f32 only); the 1x1/2 case is im2col in f32 too.
TEST(Conv, CpuBatchSplitOverThreadsGivesWhatOneSampleAtATimeGives) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  struct Case {
    ferry::Shape x, w;
    std::vector<std::int64_t> stride, padding;
    std::int64_t groups;
    DType dtype;
  };
  for (const Case& k : {Case{{8, 4, 7, 6}, {6, 4, 1, 1}, {2}, {0}, 1, DType::f32},
                        Case{{8, 4, 7, 6}, {6, 4, 1, 1}, {1}, {0}, 1, DType::f64},
                        Case{{8, 4, 7, 6}, {6, 2, 3, 2}, {2, 1}, {1}, 2, DType::f64}}) {
    SCOPED_TRACE(ferry::shape_str(k.w));
    const Tensor x0 = f64_input(k.x, 1).to(k.dtype), w0 = f64_input(k.w, 2).to(k.dtype),
                 b0 = f64_input({k.w[0]}, 3).to(k.dtype);
    auto run = [&](std::int64_t first, std::int64_t count) {
      Tensor x = x0.narrow(0, first, count).contiguous().requires_grad_();
      Tensor w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
      Tensor y = ferry::conv2d(x, w, b, k.stride, k.padding, {1}, k.groups);
      ferry::sum(y * ferry::cos(y)).backward();
      return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad()};
    };
    const std::vector<Tensor> batch = run(0, k.x[0]);
    std::vector<std::vector<Tensor>> one;
    for (std::int64_t n = 0; n < k.x[0]; ++n) one.push_back(run(n, 1));
    auto gather = [&](std::size_t i) {
      std::vector<Tensor> parts;
      for (const auto& r : one) parts.push_back(r[i]);
      return i < 2 ? ferry::cat(parts, 0) : ferry::sum(ferry::stack(parts, 0), {0});
    };
    const double tol = k.dtype == DType::f64 ? 1e-12 : 1e-4;
    for (std::size_t i = 0; i < 4; ++i)
      ferry_test::expect_close(batch[i].to(DType::f64).to_vector<double>(),
                               gather(i).to(DType::f64).to_vector<double>(), tol, tol,
                               "output " + std::to_string(i));
  }
  omp_set_num_threads(threads);
}

// f16 and bf16 on the CPU run the f32 kernels on the widened operands and round each result
// once, as PyTorch's CPU convolutions do: the forward pass and all three gradients equal, bit
// for bit, the f32 pass over the same (16-bit) values rounded to the dtype. The composition
// that ran before (unfold, matmul, fold) rounded the input's gradient twice.
TEST(Conv, CpuSixteenBitConvolutionsAreTheF32KernelsRoundedOnce) {
  struct Case {
    ferry::Shape x, w;
    std::vector<std::int64_t> stride, padding;
    std::int64_t groups;
    bool channels_last;
  };
  for (const Case& k : {Case{{3, 8, 17, 15}, {6, 8, 5, 5}, {2}, {2}, 1, false},
                        Case{{2, 6, 9, 11}, {6, 2, 3, 3}, {1}, {1}, 3, false},
                        Case{{2, 4, 9, 7}, {8, 4, 3, 3}, {2, 1}, {1}, 1, true},
                        Case{{2, 4, 9, 7}, {8, 4, 1, 1}, {1}, {0}, 1, false}})
    for (const DType dt : {DType::f16, DType::bf16}) {
      SCOPED_TRACE(ferry::shape_str(k.w) + " " + std::string(ferry::dtype_name(dt)));
      const Tensor x0 = f64_input(k.x, 4).to(dt), w0 = f64_input(k.w, 5).to(dt),
                   b0 = f64_input({k.w[0]}, 6).to(dt);
      auto run = [&](DType as) {
        Tensor x = x0.to(as).detach(), w = w0.to(as).detach();  // leaves of their own
        if (k.channels_last) x = x.contiguous(ferry::MemoryFormat::channels_last);
        x.requires_grad_();
        w.requires_grad_();
        Tensor b = b0.to(as).detach().requires_grad_(), y;
        const std::size_t calls = ferry_test::kernel_calls(
            "conv2d", [&] { y = ferry::conv2d(x, w, b, k.stride, k.padding, {1}, k.groups); });
        EXPECT_EQ(calls, 1u) << "the kernel ran, not the composition";
        y.backward(f64_input(y.sizes(), 7).to(dt).to(as));
        return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad()};
      };
      const std::vector<Tensor> half = run(dt), wide = run(DType::f32);
      for (std::size_t i = 0; i < 4; ++i)
        EXPECT_EQ(ferry_test::as_double(half[i]), ferry_test::as_double(wide[i].to(dt)))
            << (i == 0   ? "y"
                : i == 1 ? "dx"
                : i == 2 ? "dw"
                         : "db");
    }
}

// PyTorch's errors, as ShapeError (ValueError for a padding string it does not know or
// 'same' with a stride), naming the sizes.
TEST(Conv, BadGeometryIsAShapeErrorNamingTheSizes) {
  const Tensor x = ferry::ones({2, 3, 5, 5}), w = ferry::ones({4, 3, 3, 3});
  EXPECT_FERRY_ERROR(ferry::conv2d(x, ferry::ones({4, 2, 3, 3})), ferry::ShapeError, "conv2d",
                     "[4, 2, 3, 3]", "[2, 3, 5, 5]", "2 channels", "got 3");
  EXPECT_FERRY_ERROR(
      ferry::conv2d(ferry::ones({2, 4, 5, 5}), ferry::ones({6, 2, 3, 3}), {}, {1}, 0, {1}, 4),
      ferry::ShapeError, "divisible by groups (4)", "[6, 2, 3, 3]");
  EXPECT_FERRY_ERROR(
      ferry::conv2d(ferry::ones({2, 4, 5, 5}), ferry::ones({6, 1, 3, 3}), {}, {1}, 0, {1}, 2),
      ferry::ShapeError, "groups=2", "[6, 1, 3, 3]", "2 channels", "got 4");
  EXPECT_FERRY_ERROR(ferry::conv2d(x, ferry::ones({4, 3, 7, 7})), ferry::ShapeError, "5 x 5",
                     "7 x 7");
  EXPECT_FERRY_ERROR(ferry::conv2d(x, w, {}, {0}), ferry::ShapeError, "non-positive stride");
  EXPECT_FERRY_ERROR(ferry::conv2d(x, w, {}, {1}, -1), ferry::ShapeError, "negative padding");
  EXPECT_FERRY_ERROR(ferry::conv2d(x, w, {}, {2}, "same"), ferry::ValueError, "strided");
  EXPECT_FERRY_ERROR(ferry::conv2d(x, w, {}, {1}, "full"), ferry::ValueError, "'full'");
  EXPECT_FERRY_ERROR(ferry::conv2d(x, w, ferry::ones({3})), ferry::ShapeError, "bias", "[3]");
  EXPECT_FERRY_ERROR(ferry::conv2d(ferry::ones({5, 5}), w), ferry::ShapeError, "[5, 5]");
  EXPECT_FERRY_ERROR(ferry::conv1d(x, w), ferry::ShapeError, "conv1d");
  EXPECT_FERRY_ERROR(ferry::conv2d(x, w, {}, {1, 1, 1}), ferry::ShapeError, "stride", "3 values");
  EXPECT_FERRY_ERROR(ferry::conv2d(x.to(DType::f64), w), ferry::DTypeError, "f64", "f32");
  EXPECT_FERRY_ERROR(ferry::conv2d(ferry::ones({2, 3, 5, 5}, {.dtype = DType::i32}), w),
                     ferry::DTypeError, "conv2d");
  EXPECT_FERRY_ERROR(ferry::fold(ferry::ones({2, 12, 7}), {4, 4}, {2}), ferry::ShapeError,
                     "sliding blocks", "7");
  EXPECT_FERRY_ERROR(ferry::fold(ferry::ones({2, 10, 9}), {4, 4}, {2}), ferry::ShapeError,
                     "divisible");
  EXPECT_FERRY_ERROR(ferry::unfold(ferry::ones({3, 4}), {2}), ferry::ShapeError, "[3, 4]");
}

}  // namespace

namespace {

// Conv2d as PyTorch builds it: parameter names and shapes, U(±1/√fan_in) values, the printed
// form, and a forward that is F.conv2d's (after F.pad for the other padding modes).
TEST(ConvModule, ParametersInitAndForwardArePyTorchs) {
  ferry::manual_seed(0);
  ferry::nn::Conv2d conv(4, 6, {3, 2}, {2, 1}, 1, {1}, 2);
  const auto params = conv.named_parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].first, "weight");
  EXPECT_EQ(params[1].first, "bias");
  EXPECT_EQ(conv.weight.sizes(), (ferry::Shape{6, 2, 3, 2}));
  EXPECT_EQ(conv.bias.sizes(), (ferry::Shape{6}));
  const double bound = 1.0 / std::sqrt(2.0 * 3 * 2);  // fan_in = in / groups * kh * kw
  for (const Tensor& p : {conv.weight, conv.bias})
    for (float v : p.to_vector<float>()) EXPECT_LE(std::fabs(v), bound);
  EXPECT_GT(ferry::amax(ferry::abs(conv.weight), {}).item<float>(), 0.5 * bound);
  EXPECT_EQ(conv.str(),
            "Conv2d(4, 6, kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), groups=2)");
  const Tensor x = ferry::rand({2, 4, 7, 5});
  const std::vector<float> want =
      ferry::conv2d(x, conv.weight, conv.bias, {2, 1}, 1, {1}, 2).to_vector<float>();
  EXPECT_EQ(conv.forward(x).to_vector<float>(), want);

  ferry::nn::Conv1d reflect(2, 3, {3}, {1}, "same", {1}, 1, false, "reflect");
  EXPECT_FALSE(reflect.bias.defined());
  EXPECT_EQ(reflect.str(),
            "Conv1d(2, 3, kernel_size=(3,), stride=(1,), padding=same, bias=False, "
            "padding_mode=reflect)");
  const Tensor s = ferry::rand({1, 2, 6});
  EXPECT_EQ(reflect.forward(s).to_vector<float>(),
            ferry::conv1d(ferry::pad(s, {1, 1}, "reflect"), reflect.weight).to_vector<float>());
  EXPECT_THROW(ferry::nn::Conv2d(4, 6, {3}, {1}, 0, {1}, 4), ferry::ShapeError);
  EXPECT_THROW(ferry::nn::Conv2d(4, 6, {3}, {1}, 0, {1}, 1, true, "mirror"), ferry::ValueError);
  EXPECT_THROW(ferry::nn::Conv3d(4, 6, {3, 3}), ferry::ShapeError);
}

// A small CNN learns to tell vertical from horizontal bars on every device.
TEST(ConvModule, ASmallCnnLearnsBars) {
  for (const ferry::Device& dev : ferry_test::devices()) {
    SCOPED_TRACE(dev.str());
    ferry::manual_seed(1);
    ferry::nn::Conv2d conv(1, 4, {3}, {1}, 1, {1}, 1, true, "zeros", {.device = dev});
    ferry::nn::Linear head(4 * 6 * 6, 2, true, {.device = dev});
    std::vector<float> images;
    std::vector<std::int64_t> labels;
    for (int i = 0; i < 16; ++i) {
      const bool vertical = i % 2 == 0;
      const int at = i / 2 % 6;
      for (int r = 0; r < 6; ++r)
        for (int c = 0; c < 6; ++c) images.push_back((vertical ? c : r) == at ? 1.0f : 0.0f);
      labels.push_back(vertical ? 1 : 0);
    }
    const Tensor x = ferry::tensor(images, {16, 1, 6, 6}).to(dev);
    const Tensor y = ferry::tensor(labels).to(dev);
    std::vector<Tensor> params{conv.weight, conv.bias, head.weight, head.bias};
    ferry::optim::SGD sgd(params, {.lr = 0.1, .momentum = 0.9});
    float first = 0, last = 0;
    for (int step = 0; step < 60; ++step) {
      sgd.zero_grad();
      Tensor logits = head.forward(ferry::relu(conv.forward(x)).flatten(1));
      Tensor loss = ferry::nn::functional::cross_entropy(logits, y);
      loss.backward();
      sgd.step();
      (step == 0 ? first : last) = loss.item<float>();
    }
    EXPECT_LT(last, 0.1f * first);
    const Tensor pred = ferry::argmax(head.forward(ferry::relu(conv.forward(x)).flatten(1)), 1);
    EXPECT_EQ(pred.to_vector<std::int64_t>(), labels);
  }
}

}  // namespace
