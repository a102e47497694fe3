// cuda/cuda_error.cpp — see cuda_error.hpp.
#include "cuda_error.hpp"

#include <fmt/format.h>

#include <array>
#include <string>

#include "ferry/kit/compile_error.hpp"
#include "ferry/error.hpp"

namespace ferry::cuda {

ErrorClass classify_error(std::string_view name) {
  if (name == "cudaErrorMemoryAllocation" || name == kCublasAllocFailed)
    return ErrorClass::out_of_memory;
  if (name == "cudaErrorInsufficientDriver" || name == "cudaErrorNoDriver" ||
      name == "cudaErrorSharedObjectInitFailed" || name == "cudaErrorCompatNotSupportedOnDevice" ||
      name == "cudaErrorSystemDriverMismatch")
    return ErrorClass::no_driver;
  if (name == "cudaErrorNoDevice" || name == "cudaErrorDevicesUnavailable" ||
      name == "cudaErrorInvalidDevice" || name == "cudaErrorNoKernelImageForDevice" ||
      name == "cudaErrorUnsupportedPtxVersion")
    return ErrorClass::no_device;
  // The errors after which the CUDA context cannot be used again (the runtime's
  // documentation: "the process must be terminated and relaunched").
  static constexpr std::array<std::string_view, 9> kSticky = {
      "cudaErrorIllegalAddress",      "cudaErrorLaunchFailure",      "cudaErrorECCUncorrectable",
      "cudaErrorHardwareStackError",  "cudaErrorIllegalInstruction", "cudaErrorMisalignedAddress",
      "cudaErrorInvalidAddressSpace", "cudaErrorInvalidPc",          "cudaErrorAssert"};
  for (std::string_view s : kSticky)
    if (name == s) return ErrorClass::sticky;
  return ErrorClass::other;
}

std::string error_message(std::string_view where, std::string_view call, std::string_view name,
                          std::string_view description) {
  std::string msg = fmt::format("{}: {} failed: {} ({})", where, call, name, description);
  switch (classify_error(name)) {
    case ErrorClass::sticky:
      msg +=
          "; the CUDA context is lost and every later call on this device fails: restart the "
          "process (compute-sanitizer finds the kernel that caused it)";
      break;
    case ErrorClass::no_driver:
      msg += "; install or update the NVIDIA driver";
      break;
    default:
      break;
  }
  return msg;
}

void throw_error(std::string_view where, std::string_view call, std::string_view name,
                 std::string_view description) {
  throw BackendError(error_message(where, call, name, description), std::string(name));
}

std::string unavailable_reason(std::string_view name, std::string_view description) {
  switch (classify_error(name)) {
    case ErrorClass::no_driver:
      return fmt::format("cuda: no usable NVIDIA driver found ({}: {})", name, description);
    case ErrorClass::no_device:
      return fmt::format("cuda: no CUDA-capable GPU found ({}: {})", name, description);
    default:
      return fmt::format("cuda: the CUDA runtime could not start ({}: {})", name, description);
  }
}

// NVRTC's first "<file>(<line>): [catastrophic ]error[ #N-D]: <message>".
void throw_compile_error(std::string_view kernel, std::string_view code, std::string_view log) {
  int line = 0;
  std::string_view message = log.substr(0, log.find('\n'));
  for (std::string_view l : detail::log_lines(log)) {
    const std::size_t close = l.find("): ");
    const std::size_t open = l.rfind('(', close);
    if (close == std::string_view::npos || open == std::string_view::npos) continue;
    const auto number = detail::parse_line_number(l.substr(open + 1, close - open - 1));
    std::string_view rest = l.substr(close + 3);
    if (rest.starts_with("catastrophic ")) rest.remove_prefix(13);
    const std::size_t colon = rest.find(": ");
    if (!number || !rest.starts_with("error") || colon == std::string_view::npos) continue;
    line = *number;
    message = rest.substr(colon + 2);
    break;
  }
  detail::throw_kernel_compile_error(kernel, "CUDA C++", code, line, message, std::string(log));
}

}  // namespace ferry::cuda
