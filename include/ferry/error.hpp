// ferry/error.hpp — the exceptions every public function throws.
//
// Contract: a public function either succeeds or throws a subclass of
// ferry::Error; it never aborts the process on bad input. A message says what
// was asked, what was found and what to do about it. Vendor error codes become
// BackendError in exactly one place per backend.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace ferry {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// An unknown, malformed or unavailable device name.
class DeviceError : public Error {
  using Error::Error;
};

// The inputs of one op live on different devices.
class DeviceMismatchError : public Error {
  using Error::Error;
};

// Shapes that do not fit together (broadcast, matmul, reshape, index ranges).
class ShapeError : public Error {
  using Error::Error;
};

// A dtype an op does not accept, or a conversion that is not allowed.
class DTypeError : public Error {
  using Error::Error;
};

// An argument whose value the op does not define: an integer division by
// zero, a count or probability out of range (PyTorch's ValueError and
// ZeroDivisionError).
class ValueError : public Error {
  using Error::Error;
};

// A factorization the input's values leave undefined: a matrix that is not positive-definite
// (linalg::cholesky) or is singular (linalg::solve, linalg::inv), PyTorch's
// torch.linalg.LinAlgError. A ValueError, so that a caller catching those catches it.
class LinAlgError : public ValueError {
  using ValueError::ValueError;
};

// A device could not allocate `requested` bytes; `available` is what it
// reported free at the time (after its caches were released).
class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(const std::string& message, std::uint64_t requested, std::uint64_t available,
                   std::string device)
      : Error(message), requested_(requested), available_(available), device_(std::move(device)) {}
  std::uint64_t requested() const { return requested_; }
  std::uint64_t available() const { return available_; }
  const std::string& device() const { return device_; }

 private:
  std::uint64_t requested_;
  std::uint64_t available_;
  std::string device_;
};

// An op, dtype or ability a device does not provide. Nothing falls back to
// the CPU silently: the caller decides.
class UnsupportedError : public Error {
  using Error::Error;
};

// A driver or runtime call failed; `code` is the vendor's own name for it
// (VK_ERROR_DEVICE_LOST, cudaErrorIllegalAddress, dlopen's message, ...).
class BackendError : public Error {
 public:
  BackendError(const std::string& message, std::string code)
      : Error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

// A file that is not what it claims to be: `offset` is the byte where the
// reader found the problem.
class FormatError : public Error {
 public:
  FormatError(const std::string& message, std::string file, std::uint64_t offset)
      : Error(message), file_(std::move(file)), offset_(offset) {}
  const std::string& file() const { return file_; }
  std::uint64_t offset() const { return offset_; }

 private:
  std::string file_;
  std::uint64_t offset_;
};

// Code handed to a compiler at run time (a custom kernel: GLSL or CUDA C++)
// that does not compile. `line` is the first error's line in that code (0
// when the compiler named none); `log` is the compiler's whole output.
class CompileError : public Error {
 public:
  CompileError(const std::string& message, int line, std::string log)
      : Error(message), line_(line), log_(std::move(log)) {}
  int line() const { return line_; }
  const std::string& log() const { return log_; }

 private:
  int line_;
  std::string log_;
};

}  // namespace ferry
