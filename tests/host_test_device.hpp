// tests/host_test_device.hpp — a device of a test's own over host memory, for
// tests that need a backend with particular kernels or copies (a sloppy
// kernel, a counting one, peer copies). Execution is synchronous.
#pragma once

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "ferry/backend.hpp"

namespace ferry_test {

// calloc'd memory with kPadding spare bytes past the end, so that a kernel
// writing past its output corrupts no heap. host_ptr() is the memory when
// `visible`, else null: the core must then treat it as device memory.
class HostTestBuffer final : public ferry::Buffer {
 public:
  static constexpr std::size_t kPadding = 64;
  HostTestBuffer(std::size_t n, bool visible)
      : Buffer(n), p_(static_cast<std::byte*>(std::calloc(n + kPadding, 1))), visible_(visible) {}
  ~HostTestBuffer() override { std::free(p_); }
  void* host_ptr() const override { return visible_ ? p_ : nullptr; }
  std::byte* bytes() const { return p_; }

 private:
  std::byte* p_;
  bool visible_;
};

inline std::byte* bytes_of(const ferry::Buffer& b) {
  return static_cast<const HostTestBuffer&>(b).bytes();
}

// A device named `type`:`index` whose buffers are HostTestBuffers; a test
// registers its kernels in its constructor and overrides what it studies.
class HostTestDevice : public ferry::DeviceImpl {
 public:
  HostTestDevice(const std::string& type, int index, bool host_visible = true)
      : DeviceImpl(ferry::Device::unchecked(type, index)), host_visible_(host_visible) {}
  ferry::DeviceInfo info() override {
    ferry::DeviceInfo d;
    d.name = device().str() + " (a test device over host memory)";
    d.caps = capabilities();
    return d;
  }
  ferry::DeviceCapabilities capabilities() const override {
    return {.host_visible_memory = host_visible_};
  }
  std::unique_ptr<ferry::Buffer> allocate(std::size_t n) override {
    return std::make_unique<HostTestBuffer>(n, host_visible_);
  }
  void copy_from_host(ferry::Buffer& d, std::size_t o, const void* s, std::size_t n) override {
    std::memcpy(bytes_of(d) + o, s, n);
  }
  void copy_to_host(void* d, const ferry::Buffer& s, std::size_t o, std::size_t n) override {
    std::memcpy(d, bytes_of(s) + o, n);
  }
  void copy_within(ferry::Buffer& d, std::size_t doff, const ferry::Buffer& s, std::size_t soff,
                   std::size_t n) override {
    std::memcpy(bytes_of(d) + doff, bytes_of(s) + soff, n);
  }
  void synchronize() override {}

 private:
  bool host_visible_;
};

}  // namespace ferry_test
