// cuda/cuda_error.hpp — CUDA runtime and cuBLAS failures as ferry errors, in
// one place (Note [Kernel contract]: vendor codes become BackendError once per
// backend). No CUDA header here: the translation is plain string work, so
// ferry_tests checks it on a machine without the toolkit's driver.
#pragma once

#include <string>
#include <string_view>

namespace ferry::cuda {

// What a CUDA error name means for the caller.
enum class ErrorClass {
  out_of_memory,  // cudaErrorMemoryAllocation: release caches and retry, then OutOfMemoryError
  no_driver,      // no or too old a driver: the backend is unavailable
  no_device,      // a driver but no usable GPU: the backend is unavailable
  sticky,         // the context is corrupt (illegal address, launch failure, ECC, ...):
                  // every later call fails too; the process must restart to use the GPU
  other,
};
ErrorClass classify_error(std::string_view name);

// "cuda:0: cudaMemcpyAsync: cudaErrorIllegalAddress (an illegal memory access was
// encountered)", with a hint appended for sticky errors.
std::string error_message(std::string_view where, std::string_view call, std::string_view name,
                          std::string_view description);

// Throws BackendError with code = `name` and error_message(...) as its text.
[[noreturn]] void throw_error(std::string_view where, std::string_view call, std::string_view name,
                              std::string_view description);

// Backend::unavailable_reason for a failed device query: "cuda: no NVIDIA driver
// found (cudaErrorInsufficientDriver: ...)", "cuda: no CUDA-capable GPU found (...)".
std::string unavailable_reason(std::string_view name, std::string_view description);

// NVRTC's log of a failed compile ("name.cu(12): error: identifier \"x\" is
// undefined") as CompileError: the first error's line and message, the
// offending source line, and the whole log. `kernel` names the kernel.
[[noreturn]] void throw_compile_error(std::string_view kernel, std::string_view code,
                                      std::string_view log);

// cuBLAS status names (cublasGetStatusName) go through the same path.
inline constexpr std::string_view kCublasAllocFailed = "CUBLAS_STATUS_ALLOC_FAILED";

}  // namespace ferry::cuda
