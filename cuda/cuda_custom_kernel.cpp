// cuda/cuda_custom_kernel.cpp — users' CUDA C++ kernels on a CUDA device
// (Note [Custom kernels] in ferry/custom_kernel.hpp): compiled by NVRTC to
// machine code for the device's own architecture when the CustomKernel is
// made, loaded with the runtime's library API (cudaLibraryLoadData, so the
// module still links no driver library: Note [CUDA is optional at build
// time]), and launched on the device's op stream with the tensors' pointers
// and the scalars as the entry function's parameters, in order.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nvrtc.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda_device.hpp"
#include "cuda_error.hpp"
#include "ferry/error.hpp"

namespace ferry::cuda {
namespace {

// BackendError for a failed NVRTC call, with NVRTC's version and its log
// (which names a refused option, say) when there is one.
void check_nvrtc(const std::string& device, nvrtcResult r, const char* call,
                 const std::string& log = {}) {
  if (r == NVRTC_SUCCESS) return;
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  throw BackendError(fmt::format("{}: {} (NVRTC {}.{}) failed: {}{}{}", device, call, major, minor,
                                 nvrtcGetErrorString(r), log.empty() ? "" : ": ", log),
                     nvrtcGetErrorString(r));
}

}  // namespace

std::vector<char> nvrtc_compile(const std::string& device, int compute_capability,
                                const KernelSource& src) {
  nvrtcProgram prog = nullptr;
  const std::string file = src.name + ".cu";
  check_nvrtc(device,
              nvrtcCreateProgram(&prog, src.code.c_str(), file.c_str(), 0, nullptr, nullptr),
              "nvrtcCreateProgram");
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  const std::string arch = fmt::format("--gpu-architecture=sm_{}", compute_capability);
  const char* options[] = {arch.c_str(), "--std=c++17"};
  const nvrtcResult r = nvrtcCompileProgram(prog, 2, options);
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) nvrtcGetProgramLog(prog, log.data());
  log.resize(std::strlen(log.c_str()));  // without the terminating NUL
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
  if (r == NVRTC_ERROR_COMPILATION) throw_compile_error(src.name, src.code, log);
  if (r != NVRTC_SUCCESS) {
    // Most likely a GPU newer than this NVRTC: say which architectures it has.
    int count = 0;
    std::vector<int> archs;
    if (nvrtcGetNumSupportedArchs(&count) == NVRTC_SUCCESS && count > 0) {
      archs.resize(std::size_t(count));
      if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) archs.clear();
    }
    const std::string call = fmt::format("nvrtcCompileProgram for sm_{}", compute_capability);
    check_nvrtc(device, r, call.c_str(),
                archs.empty() ? log
                              : fmt::format("{} (it targets sm_{} to sm_{})", log, archs.front(),
                                            archs.back()));
  }
  std::size_t size = 0;
  check_nvrtc(device, nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
  std::vector<char> cubin(size);
  check_nvrtc(device, nvrtcGetCUBIN(prog, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

namespace {

class CudaCompiledKernel final : public CompiledKernel {
 public:
  CudaCompiledKernel(CudaDevice& dev, const KernelSource& src) : dev_(dev), name_(src.name) {
    const std::vector<char> cubin =
        nvrtc_compile(dev.device().str(), dev.compute_capability(), src);
    dev.make_current();
    dev.check(
        cudaLibraryLoadData(&library_, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
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
