// Convolutions on the cooperative-matrix path (Note [Convolutions on cooperative matrices] in
// runtime/vulkan/vk_kernels_conv.cpp), on vulkan:0 with FERRY_VULKAN_COOPMAT=emulate (ctest's
// coopmat_vulkan_emulated): forward passes, input and weight gradients in f16 and bf16, the
// module each takes, against the CPU's f32 rounded once.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "coopmat_test_util.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"

namespace {

using namespace ferry_test::coopmat;

// Note [Convolutions on cooperative matrices]: f16 forward passes of one group, pointwise ones
// through matmul's modules, the rest through the CONV modules' implicit GEMM, against the CPU in
// f32 rounded once to f16.
TEST(Coopmat, ConvolutionsRunOnIt) {
  if (!path_is_on()) GTEST_SKIP() << coopmat_property();
  const ferry::Device dev("vulkan:0");
  ferry::manual_seed(13);
  enum Path { pointwise, implicit_gemm, glsl };
  struct Case {
    ferry::Shape x, w;
    bool bias;
    std::vector<std::int64_t> stride, padding, dilation;
    std::int64_t groups;
    Path path;
    const char* what;
  };
  for (const Case& k : std::vector<Case>{
           {{2, 16, 8, 8}, {24, 16, 1, 1}, false, {1}, {0}, {1}, 1, pointwise, "1x1"},
           {{3, 40, 5, 8}, {72, 40, 1, 1}, false, {1}, {0}, {1}, 1, pointwise, "1x1, ragged"},
           {{2, 16, 8, 8}, {24, 16, 1, 1}, true, {1}, {0}, {1}, 1, implicit_gemm, "1x1, bias"},
           {{2, 16, 8, 8}, {24, 16, 1, 1}, false, {2}, {0}, {1}, 1, implicit_gemm, "1x1, stride 2"},
           {{2, 12, 5, 5}, {24, 12, 1, 1}, false, {1}, {0}, {1}, 1, pointwise, "12 ch, 5x5"},
           {{2, 16, 8, 8}, {24, 16, 3, 3}, true, {1}, {1}, {1}, 1, implicit_gemm, "3x3, pad 1"},
           // A first layer: 3 channels, 7x7 taps (147: the weight's rows load half by half),
           // stride 2, 64 filters over 128-column blocks of 2 x 9 x 9 positions.
           {{2, 3, 17, 17}, {64, 3, 7, 7}, true, {2}, {3}, {1}, 1, implicit_gemm, "7x7/2, 3 ch"},
           // A late layer: 7x7 positions (49 per sample, the batch folded into the columns).
           {{5, 32, 7, 7}, {40, 32, 3, 3}, false, {1}, {1}, {1}, 1, implicit_gemm, "7x7 maps"},
           {{1, 8, 11, 9}, {16, 8, 3, 2}, false, {2, 1}, {1, 0}, {2, 3}, 1, implicit_gemm, "dil"},
           {{2, 8, 6, 6}, {136, 8, 3, 3}, false, {1}, {0}, {1}, 1, implicit_gemm, "136 filters"},
           {{2, 16, 8, 8}, {16, 8, 3, 3}, false, {1}, {1}, {1}, 2, glsl, "2 groups"}}) {
    const Tensor x = halves(k.x), w = halves(k.w), b = k.bias ? halves({k.w[0]}) : Tensor();
    Tensor got;
    const std::string kernel = op_kernel(
        "conv2d",
        [&] {
          return ferry::conv2d(x.to(dev), w.to(dev), k.bias ? b.to(dev) : Tensor(), k.stride,
                               k.padding, k.dilation, k.groups);
        },
        &got);
    EXPECT_EQ(kernel.find("coopmat") != std::string::npos, k.path != glsl)
        << k.what << ": " << kernel;
    EXPECT_EQ(kernel.find("_conv") != std::string::npos, k.path == implicit_gemm)
        << k.what << ": " << kernel;
    const Tensor want =
        ferry::conv2d(x.to(DType::f32), w.to(DType::f32), k.bias ? b.to(DType::f32) : Tensor(),
                      k.stride, k.padding, k.dilation, k.groups)
            .to(DType::f16);
    ferry_test::expect_close(ferry_test::as_double(got), ferry_test::as_double(want), 2e-3, 2e-3,
                             k.what);
  }
  // One and three spatial dims, an empty batch (the GLSL path: nothing to multiply), and f32
  // (the GLSL path).
  const Tensor x1 = halves({3, 8, 50}), w1 = halves({24, 8, 5});
  expect_module_matches_cpu(
      "conv1d", "_conv",
      [&](const Place& at) { return ferry::conv1d(at(x1), at(w1), {}, {2}, {2}); }, "conv1d");
  const Tensor x3 = halves({2, 8, 5, 6, 7}), w3 = halves({16, 8, 3, 3, 3}), b3 = halves({16});
  expect_module_matches_cpu(
      "conv3d", "_conv",
      [&](const Place& at) { return ferry::conv3d(at(x3), at(w3), at(b3), {1}, {1}); }, "conv3d");
  const Tensor x0 = halves({0, 8, 6, 6}), w0 = halves({16, 8, 3, 3});
  expect_module_matches_cpu(
      "conv2d", "", [&](const Place& at) { return ferry::conv2d(at(x0), at(w0)); },
      "an empty batch");
  const Tensor x32 = ferry::randn({2, 8, 6, 6}), w32 = ferry::randn({16, 8, 3, 3});
  Tensor got;
  EXPECT_EQ(op_kernel(
                "conv2d", [&] { return ferry::conv2d(x32.to(dev), w32.to(dev)); }, &got)
                .find("coopmat"),
            std::string::npos);
}

// conv1d's and conv3d's gradient (padding 1; conv3d's stride `conv3d_stride`) of x (`wrt` 0)
// or w (1) on module `suffix` of `op`, against the CPU's.
void expect_conv1d_conv3d_gradients_match(const char* op, const char* suffix, int wrt,
                                          std::int64_t conv3d_stride) {
  using Conv = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const ferry::ConvSizes&,
                          const ferry::ConvPadding&, const ferry::ConvSizes&, std::int64_t);
  for (const auto& [conv, xs, ws, stride, what] :
       {std::tuple{Conv(ferry::conv1d), ferry::Shape{3, 8, 50}, ferry::Shape{24, 8, 5},
                   std::int64_t{1}, "conv1d"},
        std::tuple{Conv(ferry::conv3d), ferry::Shape{2, 8, 5, 6, 7}, ferry::Shape{16, 8, 3, 3, 3},
                   conv3d_stride, "conv3d"}}) {
    const Tensor x = halves(xs), w = halves(ws);
    const Tensor g =
        halves(conv(x.to(DType::f32), w.to(DType::f32), {}, {stride}, 1, {1}, 1).sizes());
    expect_module_matches_cpu(
        op, suffix,
        [&](const Place& at) {
          Tensor in[2] = {at(x), at(w)};
          in[wrt].requires_grad_();
          return ferry::autograd::grad({conv(in[0], in[1], {}, {stride}, 1, {1}, 1)}, {in[wrt]},
                                       {at(g)})[0];
        },
        fmt::format("{}, stride {}", what, stride));
  }
}

// The input gradient of a convolution on the CONV=2 modules (the transposed convolution, its
// kernel flipped; strided ones multiply zeros where a tap lands between gy's positions);
// against the CPU's f32 gradient rounded once to f16.
TEST(Coopmat, ConvolutionInputGradientsRunOnIt) {
  if (!path_is_on()) GTEST_SKIP() << coopmat_property();
  const ferry::Device dev("vulkan:0");
  ferry::manual_seed(17);
  struct Case {
    ferry::Shape x, w;
    std::vector<std::int64_t> stride, padding, dilation;
    bool coopmat;
    const char* what;
  };
  for (const Case& k : std::vector<Case>{
           {{2, 16, 8, 8}, {24, 16, 3, 3}, {1}, {1}, {1}, true, "3x3, pad 1"},
           {{3, 5, 9, 7}, {12, 5, 3, 2}, {1}, {0, 1}, {2, 1}, true, "dilated, unequal, odd"},
           {{2, 8, 6, 6}, {16, 8, 5, 5}, {1}, {4}, {1}, true, "5x5, padding 4 (> kernel - 1)"},
           {{4, 24, 7, 7}, {40, 24, 1, 1}, {1}, {0}, {1}, true, "1x1, 7x7 maps"},
           // Strided: taps that land between gy's positions multiply zeros.
           {{2, 16, 8, 8}, {24, 16, 3, 3}, {2}, {1}, {1}, true, "stride 2"},
           {{2, 16, 9, 9}, {24, 16, 3, 3}, {2}, {1}, {1}, true, "stride 2, odd map"},
           {{3, 8, 14, 14}, {16, 8, 1, 1}, {2}, {0}, {1}, true, "1x1, stride 2 (a downsample)"},
           {{2, 5, 11, 10},
            {12, 5, 3, 2},
            {3, 2},
            {2, 1},
            {2, 1},
            true,
            "strides 3 and 2, dilated, odd"}}) {
    const Tensor x = halves(k.x), w = halves(k.w);
    const Tensor g = halves(
        ferry::conv2d(x.to(DType::f32), w.to(DType::f32), {}, k.stride, k.padding, k.dilation)
            .sizes());
    expect_module_matches_cpu(
        "conv_backward_input", k.coopmat ? "_conv_dgrad" : "",
        [&](const Place& at) {
          const Tensor xr = at(x).requires_grad_();
          const Tensor y = ferry::conv2d(xr, at(w), {}, k.stride, k.padding, k.dilation);
          return ferry::autograd::grad({y}, {xr}, {at(g)})[0];
        },
        k.what);
  }
  expect_conv1d_conv3d_gradients_match("conv_backward_input", "_conv_dgrad", 0, 2);
}

// The weight's gradient: a sum over the batch cut into pieces of f32 partial sums (Note
// [Convolutions on cooperative matrices]); the larger batches here make two pieces, of
// unequal lengths where the positions are odd.
TEST(Coopmat, ConvolutionWeightGradientsRunOnIt) {
  if (!path_is_on()) GTEST_SKIP() << coopmat_property();
  ferry::manual_seed(19);
  struct Case {
    ferry::Shape x, w;
    std::vector<std::int64_t> stride, padding, dilation;
    bool bias;
    const char* what;
  };
  for (const Case& k : std::vector<Case>{
           {{2, 16, 8, 8}, {24, 16, 3, 3}, {1}, {1}, {1}, false, "3x3, pad 1, positions in eights"},
           {{3, 5, 9, 7}, {12, 5, 3, 2}, {1}, {0, 1}, {2, 1}, true, "dilated, unequal, odd, bias"},
           {{2, 16, 9, 9}, {24, 16, 3, 3}, {2}, {1}, {1}, false, "stride 2"},
           {{4, 24, 7, 7}, {40, 24, 1, 1}, {1}, {0}, {1}, false, "1x1, 7x7 maps"},
           {{8, 16, 16, 16}, {24, 16, 3, 3}, {1}, {1}, {1}, false, "two pieces"},
           {{13, 8, 15, 15}, {16, 8, 3, 3}, {1}, {1}, {1}, false, "two unequal pieces"}}) {
    const Tensor x = halves(k.x), w = halves(k.w), b = halves({k.w[0]});
    const Tensor g = halves(
        ferry::conv2d(x.to(DType::f32), w.to(DType::f32), {}, k.stride, k.padding, k.dilation)
            .sizes());
    expect_module_matches_cpu(
        "conv_backward_weight", "_conv_wgrad",
        [&](const Place& at) {
          const Tensor wr = at(w).requires_grad_();
          const Tensor y =
              ferry::conv2d(at(x), wr, k.bias ? at(b) : Tensor{}, k.stride, k.padding, k.dilation);
          return ferry::autograd::grad({y}, {wr}, {at(g)})[0];
        },
        k.what);
  }
  expect_conv1d_conv3d_gradients_match("conv_backward_weight", "_conv_wgrad", 1, 1);
}

// bf16 convolutions on the bf16 modules: forward (pointwise through matmul's, the rest through
// the CONV ones), input and weight gradients, against the CPU's f32 rounded once to bf16.
TEST(Coopmat, Bf16ConvolutionsRunOnIt) {
  if (!path_is_on()) GTEST_SKIP() << coopmat_property();
  if (coopmat_property().find("bf16 matmul") == std::string::npos)
    GTEST_SKIP() << "no bf16 on the path: " << coopmat_property();
  ferry::manual_seed(37);
  auto bf16 = [](const ferry::Shape& s) { return ferry::randn(s).to(DType::bf16); };
  const Tensor x = bf16({3, 16, 9, 9}), w = bf16({24, 16, 3, 3}), b = bf16({24});
  const Tensor w1 = bf16({24, 16, 1, 1}), g = bf16({3, 24, 5, 5});
  const double tol = 2e-2;
  expect_module_matches_cpu(
      "conv2d", "_bf16", [&](const Place& at) { return ferry::conv2d(at(x), at(w1)); }, "bf16 1x1",
      tol);
  expect_module_matches_cpu(
      "conv2d", "_conv_bf16",
      [&](const Place& at) { return ferry::conv2d(at(x), at(w), at(b), {2}, {1}); },
      "bf16 3x3/2, bias", tol);
  for (const auto& [wrt, op, module] : {std::tuple{0, "conv_backward_input", "_conv_dgrad_bf16"},
                                        std::tuple{1, "conv_backward_weight", "_conv_wgrad_bf16"}})
    expect_module_matches_cpu(
        op, module,
        [&](const Place& at) {
          Tensor in[2] = {at(x), at(w)};
          in[wrt].requires_grad_();
          const Tensor y = ferry::conv2d(in[0], in[1], {}, {2}, {1});
          return ferry::autograd::grad({y}, {in[wrt]}, {at(g)})[0];
        },
        fmt::format("bf16 3x3/2, the gradient of input {}", wrt), tol);
}

}  // namespace
