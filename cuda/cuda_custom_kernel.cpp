// cuda/cuda_custom_kernel.cpp — users' CUDA C++ kernels on a CUDA device
// (Note [Custom kernels] in ferry/custom_kernel.hpp): compiled by NVRTC when
// the CustomKernel is made, to machine code for the device's own architecture
// (or to PTX the driver compiles, on a GPU newer than NVRTC), loaded with the
// runtime's library API (cudaLibraryLoadData, so the module still links no
// driver library: Note [CUDA is optional at build time]), and launched on the
// device's op stream with the tensors' pointers and the scalars as the entry
// function's parameters, in order.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_device.hpp"
#include "cuda_error.hpp"
#include "ferry/error.hpp"
#include "log_internal.hpp"

namespace ferry::cuda {
namespace {

// "NVRTC 13.0": errors name the compiler, whose targets vary by version.
std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("NVRTC {}.{}", major, minor);
}

// BackendError for a failed NVRTC call, with NVRTC's version and its log
// (which names a refused option, say) when there is one.
void check_nvrtc(const std::string& device, nvrtcResult r, const char* call,
                 const std::string& log = {}) {
  if (r == NVRTC_SUCCESS) return;
  throw BackendError(fmt::format("{}: {} ({}) failed: {}{}{}", device, call, nvrtc_version(),
                                 nvrtcGetErrorString(r), log.empty() ? "" : ": ", log),
                     nvrtcGetErrorString(r));
}

}  // namespace

NvrtcImage nvrtc_compile(const std::string& device, int cc, const KernelSource& src) {
  // The newest architecture this NVRTC targets up to cc.
  int count = 0;
  check_nvrtc(device, nvrtcGetNumSupportedArchs(&count), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(std::size_t(count > 0 ? count : 0));
  if (count > 0)
    check_nvrtc(device, nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  NvrtcImage image;
  for (int a : archs)
    if (a <= cc && a > image.arch) image.arch = a;
  if (image.arch == 0) {
    const auto [lo, hi] = std::minmax_element(archs.begin(), archs.end());
    throw BackendError(
        fmt::format("{}: {} cannot compile for sm_{}: it targets sm_{} to sm_{}", device,
                    nvrtc_version(), cc, lo == archs.end() ? 0 : *lo, hi == archs.end() ? 0 : *hi),
        "NVRTC_ERROR_INVALID_OPTION");
  }
  image.ptx = image.arch != cc;

  nvrtcProgram prog = nullptr;
  const std::string file = src.name + ".cu";
  check_nvrtc(device,
              nvrtcCreateProgram(&prog, src.code.c_str(), file.c_str(), 0, nullptr, nullptr),
              "nvrtcCreateProgram");
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  const std::string arch =
      fmt::format("--gpu-architecture={}_{}", image.ptx ? "compute" : "sm", image.arch);
  const char* options[] = {arch.c_str(), "--std=c++17"};
  const nvrtcResult r = nvrtcCompileProgram(prog, 2, options);
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) nvrtcGetProgramLog(prog, log.data());
  log.resize(std::strlen(log.c_str()));  // without the terminating NUL
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
  if (r == NVRTC_ERROR_COMPILATION) throw_compile_error(src.name, src.code, log);
  check_nvrtc(device, r, fmt::format("nvrtcCompileProgram ({})", arch).c_str(), log);
  std::size_t size = 0;
  if (image.ptx) {
    check_nvrtc(device, nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize");
    image.bytes.resize(size);
    check_nvrtc(device, nvrtcGetPTX(prog, image.bytes.data()), "nvrtcGetPTX");
  } else {
    check_nvrtc(device, nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
    image.bytes.resize(size);
    check_nvrtc(device, nvrtcGetCUBIN(prog, image.bytes.data()), "nvrtcGetCUBIN");
  }
  return image;
}

namespace {

class CudaCompiledKernel final : public CompiledKernel {
 public:
  CudaCompiledKernel(CudaDevice& dev, const KernelSource& src) : dev_(dev), name_(src.name) {
    const NvrtcImage image = nvrtc_compile(dev.device().str(), dev.compute_capability(), src);
    if (image.ptx)
      FERRY_INFO(
          "custom kernel '{}': NVRTC has no sm_{}; the driver compiles its PTX for "
          "compute_{}",
          name_, dev.compute_capability(), image.arch);
    dev.make_current();
    dev.check(cudaLibraryLoadData(&library_, image.bytes.data(), nullptr, nullptr, 0, nullptr,
                                  nullptr, 0),
              "cudaLibraryLoadData");
    const cudaError_t err = cudaLibraryGetKernel(&kernel_, library_, src.entry.c_str());
    if (err != cudaSuccess) {
      cudaGetLastError();
      cudaLibraryUnload(library_);
      throw Error(fmt::format(
          "custom kernel '{}': its code has no extern \"C\" __global__ function named '{}' ({})",
          name_, src.entry, cudaGetErrorName(err)));
    }
  }

  ~CudaCompiledKernel() override {
    // Launches still queued may use the code: wait for them first. Errors are
    // ignored here (a lost device, or a runtime already shut down at exit).
    dev_.make_current();
    cudaStreamSynchronize(dev_.stream());
    cudaLibraryUnload(library_);
    cudaGetLastError();
  }

  std::array<std::uint32_t, 3> group_size(const LaunchGrid& grid) const override {
    return grid.block;
  }

  void launch(const std::vector<TensorArg>& tensors, std::size_t,
              const std::vector<KernelScalar>& scalars, const LaunchGrid& grid,
              const std::array<std::uint32_t, 3>& groups) override {
    const std::uint64_t threads = std::uint64_t(grid.block[0]) * grid.block[1] * grid.block[2];
    if (threads == 0 || threads > 1024)
      throw Error(
          fmt::format("custom kernel '{}': a block of {}x{}x{} threads; CUDA takes 1 to "
                      "1024",
                      name_, grid.block[0], grid.block[1], grid.block[2]));
    // Parameter i of the entry function points at argument i's value.
    std::vector<void*> pointers;
    pointers.reserve(tensors.size());
    for (const TensorArg& t : tensors) pointers.push_back(data_ptr(t));
    std::vector<KernelScalar> values = scalars;
    std::vector<void*> args;
    args.reserve(pointers.size() + values.size());
    for (void*& p : pointers) args.push_back(&p);
    for (KernelScalar& v : values) std::visit([&](auto& x) { args.push_back(&x); }, v);
    dev_.make_current();
    dev_.check(cudaLaunchKernel(reinterpret_cast<const void*>(kernel_),
                                dim3(groups[0], groups[1], groups[2]),
                                dim3(grid.block[0], grid.block[1], grid.block[2]), args.data(), 0,
                                dev_.stream()),
               "cudaLaunchKernel");
  }

 private:
  CudaDevice& dev_;
  std::string name_;
  cudaLibrary_t library_ = nullptr;
  cudaKernel_t kernel_ = nullptr;
};

}  // namespace

std::unique_ptr<CompiledKernel> CudaDevice::compile_kernel(const KernelSource& source) {
  if (source.language != KernelLanguage::cuda)
    return DeviceImpl::compile_kernel(source);  // UnsupportedError naming both
  return std::make_unique<CudaCompiledKernel>(*this, source);
}

}  // namespace ferry::cuda
