// Custom kernels (ferry/custom_kernel.hpp) and custom ops (ferry/custom_op.hpp):
// GLSL kernels compiled at run time on vulkan:0 (lavapipe in CI, with the
// validation layer on), CUDA C++ kernels through NVRTC on cuda:0 where there
// is one; results held to ferry's own ops, gradients to closed forms.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "test_devices.hpp"

namespace {

using ferry::CustomKernel;
using ferry::Device;
using ferry::KernelLanguage;
using ferry::KernelSource;
using ferry::LaunchGrid;
using ferry::Tensor;

// out[i] = a * x[i] + y[i] for i < n.
const char* kAxpyGlsl = R"(#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer Y { float y[]; };
layout(set = 0, binding = 2) writeonly buffer Out { float out_[]; };
layout(push_constant) uniform Params { float a; uint n; } p;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < p.n) out_[i] = p.a * x[i] + y[i];
}
)";

const char* kAxpyCuda = R"(
extern "C" __global__ void axpy(const float* x, const float* y, float* out, float a, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

// out[c][r] = in[r][c] for an in of rows x cols: a 2-D grid.
const char* kTransposeGlsl = R"(#version 450
layout(local_size_x = 8, local_size_y = 8) in;
layout(set = 0, binding = 0) readonly buffer In { float in_[]; };
layout(set = 0, binding = 1) writeonly buffer Out { float out_[]; };
layout(push_constant) uniform Params { uint rows; uint cols; } p;
void main() {
  uint c = gl_GlobalInvocationID.x, r = gl_GlobalInvocationID.y;
  if (r < p.rows && c < p.cols) out_[c * p.rows + r] = in_[r * p.cols + c];
}
)";

KernelSource glsl(const char* code, std::string name = "test") {
  return {.language = KernelLanguage::glsl, .code = code, .name = std::move(name)};
}

#define REQUIRE_DEVICE(name)                                                           \
  do {                                                                                 \
    if (!ferry::is_available(name))                                                    \
      GTEST_SKIP() << name << " is not available here: " << ferry::describe_devices(); \
  } while (0)

void expect_axpy(const Device& dev, const CustomKernel& k) {
  ferry::manual_seed(3);
  const std::int64_t n = 1000;  // not a multiple of the group size: the kernel's bound check
  Tensor x = ferry::randn({n}).to(dev), y = ferry::randn({n}).to(dev);
  Tensor out = ferry::empty({n}, {.device = dev});
  k.launch({x, y}, {out}, {2.5f, std::uint32_t(n)});
  ferry_test::expect_close(out.to_vector<double>(), (x * 2.5 + y).to_vector<double>(), 1e-6, 1e-6,
                           "axpy");
}

TEST(CustomKernel, GlslRunsOnVulkanAndMatchesFerrysOps) {
  REQUIRE_DEVICE("vulkan:0");
  const Device dev("vulkan:0");
  CustomKernel k(dev, glsl(kAxpyGlsl, "axpy"));
  EXPECT_EQ(k.group_size(), (std::array<std::uint32_t, 3>{64, 1, 1}));
  expect_axpy(dev, k);
  // Its output feeds ferry's ops, and ferry's ops feed it, in one batch.
  Tensor x = ferry::ones({256}, {.device = dev}) * 3.0;
  Tensor out = ferry::empty({256}, {.device = dev});
  k.launch({x, x * 2.0}, {out}, {1.0f, std::uint32_t(256)});
  Tensor again = ferry::empty({256}, {.device = dev});
  k.launch({out + 1.0, out}, {again}, {-1.0f, std::uint32_t(256)});
  EXPECT_EQ(ferry::sum(again).item<float>(), -1.0f * 256);
}

TEST(CustomKernel, GridCanBeGivenIn2DAndStridedInputsAreCopied) {
  REQUIRE_DEVICE("vulkan:0");
  const Device dev("vulkan:0");
  CustomKernel k(dev, glsl(kTransposeGlsl, "transpose"));
  const std::int64_t rows = 13, cols = 21;
  Tensor in = ferry::arange(0, double(rows * cols), 1).reshape({rows, cols}).to(dev);
  Tensor out = ferry::empty({cols, rows}, {.device = dev});
  k.launch({in}, {out}, {std::uint32_t(rows), std::uint32_t(cols)},
           {.items = {std::uint64_t(cols), std::uint64_t(rows), 1}});
  EXPECT_EQ(out.to_vector<float>(), in.t().contiguous().to_vector<float>());
  // A transposed view as input: the kernel reads a contiguous copy of it.
  Tensor view = in.t();  // [cols, rows], strided
  Tensor back = ferry::empty({rows, cols}, {.device = dev});
  k.launch({view}, {back}, {std::uint32_t(cols), std::uint32_t(rows)},
           {.items = {std::uint64_t(rows), std::uint64_t(cols), 1}});
  EXPECT_EQ(back.to_vector<float>(), in.to_vector<float>());
}

TEST(CustomKernel, ABrokenKernelSaysWhichLineAndWhy) {
  REQUIRE_DEVICE("vulkan:0");
  const char* broken = R"(#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
void main() { x[gl_GlobalInvocationID.x] = undefined_thing; }
)";
  try {
    CustomKernel k(Device("vulkan:0"), glsl(broken, "broken"));
    FAIL() << "compiled";
  } catch (const ferry::CompileError& e) {
    EXPECT_EQ(e.line(), 4);
    const std::string what = e.what();
    EXPECT_NE(what.find("'broken' (GLSL)"), std::string::npos) << what;
    EXPECT_NE(what.find("line 4"), std::string::npos) << what;
    EXPECT_NE(what.find("undefined_thing"), std::string::npos) << what;
    EXPECT_NE(what.find("undeclared identifier"), std::string::npos) << what;
    EXPECT_NE(e.log().find("ERROR"), std::string::npos) << e.log();
  }
}

TEST(CustomKernel, ArgumentsThatDoNotFitAreRefused) {
  REQUIRE_DEVICE("vulkan:0");
  const Device dev("vulkan:0");
  CustomKernel k(dev, glsl(kAxpyGlsl, "axpy"));
  Tensor x = ferry::ones({8}, {.device = dev});
  Tensor out = ferry::empty({8}, {.device = dev});
  // Two tensors for a shader that uses binding 2.
  EXPECT_FERRY_ERROR((k.launch({x}, {out}, {1.0f, std::uint32_t(8)})), ferry::Error, "binding 2",
                     "2 tensors");
  // Scalars that do not fill the push-constant block.
  EXPECT_FERRY_ERROR((k.launch({x, x}, {out}, {1.0f})), ferry::Error, "4 bytes", "has 8");
  // A tensor on another device.
  EXPECT_FERRY_ERROR((k.launch({x, ferry::ones({8})}, {out}, {1.0f, std::uint32_t(8)})),
                     ferry::DeviceMismatchError, "input 1", "cpu", "vulkan:0");
  // An output that is a view.
  Tensor big = ferry::zeros({16}, {.device = dev});
  EXPECT_FERRY_ERROR((k.launch({x, x}, {big.slice(0, 8, 16)}, {1.0f, std::uint32_t(8)})),
                     ferry::ShapeError, "output 0", "view");
  EXPECT_EQ(big.to_vector<float>(), std::vector<float>(16, 0.0f));
  // No output and no grid.
  EXPECT_FERRY_ERROR((k.launch({x, x, out}, {}, {1.0f, std::uint32_t(8)})), ferry::ShapeError,
                     "grid");
  // A CUDA kernel for a Vulkan device, and any kernel for the CPU.
  EXPECT_FERRY_ERROR(
      (CustomKernel(dev, {.language = KernelLanguage::cuda, .code = kAxpyCuda, .entry = "axpy"})),
      ferry::UnsupportedError, "vulkan:0", "CUDA C++");
  EXPECT_FERRY_ERROR((CustomKernel(Device::cpu(), glsl(kAxpyGlsl))), ferry::UnsupportedError, "cpu",
                     "GLSL");
}

TEST(CustomKernel, CudaRunsThroughNvrtc) {
  REQUIRE_DEVICE("cuda:0");
  const Device dev("cuda:0");
  CustomKernel k(
      dev, {.language = KernelLanguage::cuda, .code = kAxpyCuda, .entry = "axpy", .name = "axpy"});
  expect_axpy(dev, k);
  try {
    CustomKernel bad(dev,
                     {.language = KernelLanguage::cuda,
                      .code = "extern \"C\" __global__ void f(float* x) {\n  x[0] = nope;\n}\n",
                      .entry = "f",
                      .name = "bad"});
    FAIL() << "compiled";
  } catch (const ferry::CompileError& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos) << e.what();
  }
  EXPECT_FERRY_ERROR(
      (CustomKernel(dev,
                    {.language = KernelLanguage::cuda, .code = kAxpyCuda, .entry = "not_there"})),
      ferry::Error, "not_there");
}

// ---------------------------------------------------------------- custom ops

// y = x^2 * c on any device: a GLSL kernel on Vulkan, a CUDA kernel on CUDA,
// ferry's ops elsewhere; dy/dx = 2 c x.
const char* kSquareGlsl = R"(#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params { float c; uint n; } p;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < p.n) y[i] = p.c * x[i] * x[i];
}
)";
const char* kSquareCuda = R"(
extern "C" __global__ void scaled_square(const float* x, float* y, float c, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = c * x[i] * x[i];
}
)";

Tensor scaled_square_forward(const Tensor& x) {
  const Device& dev = x.device();
  if (dev.is_cpu()) return x * x * 3.0;
  static std::map<std::string, CustomKernel> kernels;
  auto it = kernels.find(dev.str());
  if (it == kernels.end()) {
    KernelSource src = dev.str().rfind("cuda", 0) == 0
                           ? KernelSource{.language = KernelLanguage::cuda,
                                          .code = kSquareCuda,
                                          .entry = "scaled_square",
                                          .name = "scaled_square"}
                           : glsl(kSquareGlsl, "scaled_square");
    it = kernels.emplace(dev.str(), CustomKernel(dev, src)).first;
  }
  Tensor xc = x.contiguous();
  Tensor y = ferry::empty(x.shape(), {.device = dev});
  it->second.launch({xc}, {y}, {3.0f, std::uint32_t(x.numel())});
  return y;
}

void register_scaled_square() {
  if (ferry::has_op("test.scaled_square")) return;
  ferry::register_op(
      {.name = "test.scaled_square",
       .forward = [](const std::vector<Tensor>& in) { return scaled_square_forward(in.at(0)); },
       .backward = [](const std::vector<Tensor>& in, const Tensor&, const Tensor& grad)
           -> std::vector<Tensor> { return {grad * in.at(0) * 6.0}; }});
}

class CustomOp : public ::testing::TestWithParam<std::string> {};

TEST_P(CustomOp, ForwardAndBackwardMatchTheClosedForm) {
  FERRY_SKIP_UNLESS_DEVICE(GetParam());
  register_scaled_square();
  const Device dev(GetParam());
  Tensor x = ferry::tensor(std::vector<float>{-2, -0.5f, 0, 1, 3}).to(dev).requires_grad_();
  Tensor y = ferry::call_op("test.scaled_square", {x});
  EXPECT_EQ(y.device(), dev);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{12, 0.75f, 0, 3, 27}));
  ferry::sum(y * 2.0).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{-24, -6, 0, 12, 36}));
  // Under NoGradGuard nothing is recorded.
  {
    ferry::NoGradGuard no_grad;
    EXPECT_FALSE(ferry::call_op("test.scaled_square", {x}).requires_grad());
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, CustomOp, ::testing::ValuesIn(ferry_test::all_device_names()),
                         [](const auto& info) { return ferry_test::backend_of(info.param); });

TEST(CustomOpRegistry, BadUseIsRefused) {
  register_scaled_square();
  EXPECT_FERRY_ERROR((ferry::call_op("test.no_such_op", {ferry::ones({2})})),
                     ferry::UnsupportedError, "test.no_such_op", "register_op");
  EXPECT_FERRY_ERROR((ferry::register_op(
                         {.name = "test.scaled_square",
                          .forward = [](const std::vector<Tensor>& in) { return in[0].clone(); }})),
                     ferry::Error, "already registered");
  EXPECT_FERRY_ERROR((ferry::register_op({.name = "test.no_forward"})), ferry::Error, "no forward");
  if (ferry::is_available("vulkan:0"))
    EXPECT_FERRY_ERROR(
        (ferry::call_op("test.scaled_square",
                        {ferry::ones({2}), ferry::ones({2}, {.device = Device("vulkan:0")})})),
        ferry::DeviceMismatchError, "test.scaled_square", "vulkan:0", "cpu");
  // An op without a backward: forward works, backward through it names it.
  if (!ferry::has_op("test.no_backward"))
    ferry::register_op({.name = "test.no_backward",
                        .forward = [](const std::vector<Tensor>& in) { return in[0] * 2.0; }});
  Tensor x = ferry::ones({3}).requires_grad_();
  Tensor y = ferry::call_op("test.no_backward", {x});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 2, 2}));
  EXPECT_FERRY_ERROR((ferry::sum(y).backward()), ferry::Error, "test.no_backward", "no backward");
  // A forward that returns its input is refused rather than recorded as itself.
  if (!ferry::has_op("test.identity"))
    ferry::register_op(
        {.name = "test.identity", .forward = [](const std::vector<Tensor>& in) { return in[0]; }});
  EXPECT_FERRY_ERROR((ferry::call_op("test.identity", {x})), ferry::Error,
                     "returned one of its inputs");
}

TEST(CustomOpRegistry, AnInputChangedBeforeBackwardIsCaught) {
  register_scaled_square();
  Tensor x = ferry::ones({4}).requires_grad_();
  Tensor h = x * 1.0;  // not a leaf, so it may be written in place under NoGradGuard
  Tensor y = ferry::call_op("test.scaled_square", {h});
  {
    ferry::NoGradGuard no_grad;
    h.fill_(5.0);
  }
  EXPECT_THROW(ferry::sum(y).backward(), ferry::Error);
}

}  // namespace
