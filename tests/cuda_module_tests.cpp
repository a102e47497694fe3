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
// test_cuda_host.cpp tests the module's plain C++ parts; test_kernel_coverage.cpp
// the tables of the devices a machine has.
#include <gtest/gtest.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace
