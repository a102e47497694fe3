// tests/cuda_module_tests.cpp — the CUDA backend module's own code that needs
// no GPU and no driver, linked from the module's objects (cuda/CMakeLists.txt)
// and so built wherever the CUDA toolkit is, CI's machines included:
// - its kernel table implements every op of the CPU backend. The conformance
//   suite counts an op a device lacks as skipped, not failed, and runs on
//   cuda:0 only where a GPU is, so an op added to the CPU backend alone would
//   otherwise go unnoticed until a GPU session.
// - users' kernels compile with the real NVRTC (the launch itself, in
//   test_custom_kernel.cpp, needs a GPU): machine code for the GPU's own
//   architecture, PTX for a GPU newer than NVRTC, compile errors with NVRTC's
//   own log, a GPU older than NVRTC's targets refused with the range.
// - cuDNN's loader answers, and a convolution's sizes become cuDNN's (its
//   symmetric padding, or an explicitly padded copy where the padding is uneven).
// test_cuda_host.cpp tests the module's plain C++ parts; test_kernel_coverage.cpp
// the tables of the devices a machine has.
#include <gtest/gtest.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_conv_geometry.hpp"
#include "cuda_cudnn.hpp"
#include "cuda_device.hpp"
#include "cuda_kernels.hpp"
#include "ferry/error.hpp"
#include "kernel_coverage_util.hpp"

namespace {

namespace fc = ferry::cuda;

// The architectures this NVRTC targets, asked of NVRTC itself.
std::vector<int> supported_archs() {
  int count = 0;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) return {};
  std::vector<int> archs(std::size_t(count), 0);
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return {};
  std::sort(archs.begin(), archs.end());
  return archs;
}

TEST(CudaKernelTable, ImplementsEveryOpTheTableGivesItOnce) {
  std::vector<ferry::OpId> ops;
  for (const auto& [op, fn] : fc::kernel_table()) {
    ops.push_back(op);
    EXPECT_TRUE(bool(fn)) << "'" << ferry::op_name(op) << "' has an empty kernel";
  }
  ferry_test::expect_table_ops(ops, "cuda");
}

const char* kAxpy = R"(
extern "C" __global__ void axpy(const float* x, const float* y, float* out, float a, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

ferry::KernelSource cuda_source(const char* code, const char* name) {
  return {.language = ferry::KernelLanguage::cuda, .code = code, .entry = name, .name = name};
}

// The ELF header of a CUBIN: "\x7f" "ELF", 64-bit, and machine EM_CUDA (190).
void expect_cubin(const std::vector<char>& bin) {
  ASSERT_GT(bin.size(), 64u);
  EXPECT_EQ(std::string(bin.data(), 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(bin[4], 2) << "not a 64-bit ELF file";
  const unsigned machine = unsigned(std::uint8_t(bin[18])) | unsigned(std::uint8_t(bin[19])) << 8;
  EXPECT_EQ(machine, 190u) << "not CUDA machine code (EM_CUDA)";
}

TEST(Nvrtc, CompilesMachineCodeForTheGpusOwnArchitecture) {
  const fc::NvrtcImage turing = fc::nvrtc_compile("cuda:0", 75, cuda_source(kAxpy, "axpy"));
  const fc::NvrtcImage hopper = fc::nvrtc_compile("cuda:0", 90, cuda_source(kAxpy, "axpy"));
  EXPECT_FALSE(turing.ptx);
  EXPECT_EQ(turing.arch, 75);
  expect_cubin(turing.bytes);
  EXPECT_FALSE(hopper.ptx);
  EXPECT_EQ(hopper.arch, 90);
  expect_cubin(hopper.bytes);
  EXPECT_NE(turing.bytes, hopper.bytes);
  // A warning alone (an unused variable) is no error.
  expect_cubin(fc::nvrtc_compile("cuda:0", 75,
                                 cuda_source("extern \"C\" __global__ void f(float* x) { int "
                                             "unused = 1; x[0] = 1.0f; }\n",
                                             "f"))
                   .bytes);
}

// PTX text for `arch`, ending with the NUL cudaLibraryLoadData needs.
void expect_ptx(const fc::NvrtcImage& image, int arch) {
  EXPECT_TRUE(image.ptx);
  EXPECT_EQ(image.arch, arch);
  ASSERT_FALSE(image.bytes.empty());
  EXPECT_EQ(image.bytes.back(), '\0');
  const std::string text(image.bytes.data());
  EXPECT_NE(text.find(".target sm_" + std::to_string(arch)), std::string::npos) << text;
  EXPECT_NE(text.find(".entry axpy"), std::string::npos) << text;
}

TEST(Nvrtc, AGpuNewerThanNvrtcGetsPtxForTheNewestArchitectureBelowIt) {
  const std::vector<int> archs = supported_archs();
  ASSERT_FALSE(archs.empty());
  const int newest = *std::max_element(archs.begin(), archs.end());
  expect_ptx(fc::nvrtc_compile("cuda:0", newest + 10, cuda_source(kAxpy, "axpy")), newest);
  // Between two architectures NVRTC targets: PTX for the lower one, which the
  // GPU's driver can compile (PTX runs on its own and every later architecture).
  for (std::size_t i = 0; i + 1 < archs.size(); ++i) {
    if (archs[i + 1] - archs[i] < 2) continue;
    expect_ptx(fc::nvrtc_compile("cuda:0", archs[i] + 1, cuda_source(kAxpy, "axpy")), archs[i]);
    break;
  }
}

TEST(Nvrtc, ACompileErrorCarriesTheLineAndNvrtcsLog) {
  try {
    fc::nvrtc_compile(
        "cuda:0", 75,
        cuda_source("extern \"C\" __global__ void f(float* x) {\n  x[0] = nope;\n}\n", "bad"));
    FAIL() << "compiled";
  } catch (const ferry::CompileError& e) {
    EXPECT_EQ(e.line(), 2) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("bad"), std::string::npos) << what;
    EXPECT_NE(what.find("nope"), std::string::npos) << what;
    EXPECT_NE(e.log().find("nope"), std::string::npos) << e.log();
  }
}

TEST(Nvrtc, AGpuOlderThanEveryArchitectureItTargetsIsABackendErrorSayingSo) {
  const std::vector<int> archs = supported_archs();
  ASSERT_FALSE(archs.empty());
  const int oldest = *std::min_element(archs.begin(), archs.end());
  try {
    fc::nvrtc_compile("cuda:3", oldest - 1, cuda_source(kAxpy, "axpy"));
    FAIL() << "compiled for sm_" << oldest - 1;
  } catch (const ferry::BackendError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuda:3"), std::string::npos) << what;
    EXPECT_NE(what.find("cannot compile for sm_" + std::to_string(oldest - 1)), std::string::npos)
        << what;
    EXPECT_NE(what.find("it targets sm_" + std::to_string(oldest) + " to sm_"), std::string::npos)
        << what;
    EXPECT_EQ(e.code(), "NVRTC_ERROR_INVALID_OPTION");
  }
}

// ---- cuDNN (Note [cuDNN convolutions]) ----

TEST(Cudnn, StatusSaysWhetherItLoadedAndWhatItTakes) {
  const std::string status = fc::cudnn::status();
  const bool loaded = status.rfind("cuDNN 9.", 0) == 0;
  EXPECT_TRUE(loaded || status.rfind("cuDNN off: ", 0) == 0) << status;
  EXPECT_EQ(fc::cudnn::takes(90, ferry::DType::f32), loaded) << status;
  EXPECT_EQ(fc::cudnn::takes(75, ferry::DType::f16), loaded) << status;
  EXPECT_EQ(fc::cudnn::takes(80, ferry::DType::bf16), loaded) << status;
  EXPECT_FALSE(fc::cudnn::takes(75, ferry::DType::bf16)) << "no bf16 convolutions before Ampere";
  EXPECT_FALSE(fc::cudnn::takes(90, ferry::DType::i32));
}

ferry::TensorArg contiguous(std::vector<std::int64_t> sizes) {
  ferry::TensorArg t;
  t.strides.assign(sizes.size(), 1);
  for (std::size_t i = sizes.size() - 1; i > 0; --i) t.strides[i - 1] = t.strides[i] * sizes[i];
  t.sizes = std::move(sizes);
  return t;
}

// A forward call's geometry: x [2, 4, in...], weight [6, 4 / groups, k...], y [2, 6, out...].
fc::ConvGeometry forward_geometry(std::vector<std::int64_t> in, std::vector<std::int64_t> k,
                                  std::vector<std::int64_t> out, std::vector<std::int64_t> stride,
                                  std::vector<std::int64_t> lo, std::int64_t groups = 1) {
  const std::size_t n = in.size();
  std::vector<std::int64_t> xs{2, 4}, ws{6, 4 / groups}, ys{2, 6};
  xs.insert(xs.end(), in.begin(), in.end());
  ws.insert(ws.end(), k.begin(), k.end());
  ys.insert(ys.end(), out.begin(), out.end());
  const ferry::OpId op =
      n == 1 ? ferry::OpId::conv1d : (n == 2 ? ferry::OpId::conv2d : ferry::OpId::conv3d);
  ferry::OpCall c{op,
                  {contiguous(xs), contiguous(ws)},
                  {contiguous(ys)},
                  {{"stride", stride},
                   {"padding_lo", lo},
                   {"dilation", std::vector<std::int64_t>(n, 1)},
                   {"groups", groups},
                   {"has_bias", false}}};
  return fc::conv_geometry(c, c.inputs[0], c.inputs[1], c.outputs[0]);
}

TEST(CudnnConvGeometry, EvenPaddingGoesToCudnnAsItIs) {
  const fc::ConvGeometry g = forward_geometry({9, 7}, {3, 3}, {5, 4}, {2, 2}, {1, 1}, 2);
  EXPECT_FALSE(g.explicit_pad);
  EXPECT_EQ(g.nd, 2);
  EXPECT_EQ(g.G, 2);
  EXPECT_EQ(g.pad[0], 1);
  EXPECT_EQ(g.pad[1], 1);
  EXPECT_EQ(g.x_dims(), (std::vector<int>{2, 4, 9, 7}));
  EXPECT_EQ(g.w_dims(), (std::vector<int>{6, 2, 3, 3}));
  EXPECT_EQ(g.y_dims(), (std::vector<int>{2, 6, 5, 4}));
}

TEST(CudnnConvGeometry, OneDimensionIsTwoOfHeightOne) {
  const fc::ConvGeometry g = forward_geometry({10}, {3}, {10}, {1}, {1});
  EXPECT_FALSE(g.explicit_pad);
  EXPECT_EQ(g.x_dims(), (std::vector<int>{2, 4, 1, 10}));
  EXPECT_EQ(g.w_dims(), (std::vector<int>{6, 4, 1, 3}));
  EXPECT_EQ(g.pad[0], 0);
  EXPECT_EQ(g.pad[1], 1);
  EXPECT_EQ(g.stride[0], 1);
}

TEST(CudnnConvGeometry, UnevenPaddingGoesThroughAPaddedCopy) {
  // padding='same' with a kernel of 4: one below, two above, along the width only.
  const fc::ConvGeometry g =
      forward_geometry({1, 3, 8}, {1, 1, 4}, {1, 3, 8}, {1, 1, 1}, {0, 0, 1});
  EXPECT_TRUE(g.explicit_pad);
  EXPECT_EQ(g.nd, 3);
  EXPECT_EQ(g.x_dims(), (std::vector<int>{2, 4, 1, 3, 11}));
  EXPECT_EQ(g.pad, (std::array<int, 3>{0, 0, 0}));
  EXPECT_EQ(g.lo[2], 1);
  // An output too short for its low padding would drop input cuDNN cannot drop.
  EXPECT_THROW(forward_geometry({8}, {3}, {3}, {1}, {2}), ferry::UnsupportedError);
}

}  // namespace
