// runtime/cpu/cpu_device.cpp — the CPU device: aligned host memory, memcpy
// copies, synchronous execution, and the kernel table.
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "cpu/cpu_allocator.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_blas.hpp"
#include "cpu/cpu_loops.hpp"
#include "cpu/cpu_vector_math.hpp"
#include "cpu/onednn.hpp"
#include "ferry/error.hpp"
#include "ferry/kit/conv_ops.hpp"

namespace ferry {
namespace {

class CpuBuffer final : public Buffer {
 public:
  CpuBuffer(cpu::CachingAllocator& allocator, void* p, std::size_t size, std::size_t capacity)
      : Buffer(size), allocator_(allocator), p_(p), capacity_(capacity) {}
  ~CpuBuffer() override { allocator_.release(p_, capacity_); }
  void* host_ptr() const override { return p_; }

 private:
  cpu::CachingAllocator& allocator_;
  void* p_;
  std::size_t capacity_;
};

// Bytes [offset, offset + size) of another buffer (a transfer arena's slot).
class CpuSubBuffer final : public Buffer {
 public:
  CpuSubBuffer(std::shared_ptr<Buffer> parent, std::size_t offset, std::size_t size)
      : Buffer(size), parent_(std::move(parent)), offset_(offset) {}
  void* host_ptr() const override { return static_cast<char*>(parent_->host_ptr()) + offset_; }
  Registration registration(const DeviceImpl& device) const override {
    Registration r = parent_->registration(device);
    if (r.buffer) r.offset += offset_;
    return r;
  }

 private:
  std::shared_ptr<Buffer> parent_;
  std::size_t offset_;
};

// A /proc/meminfo field in bytes (0 when missing).
std::uint64_t meminfo(const std::string& key) {
  std::ifstream f("/proc/meminfo");
  std::string k, unit;
  std::uint64_t v = 0;
  while (f >> k >> v >> unit)
    if (k == key + ":") return v * 1024;
  return 0;
}

std::string cpuinfo(const std::string& key) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return {};
}

// The machine's identity as a UUID: systemd's /etc/machine-id is 128 random
// bits written as 32 hex digits (all zeros when it is missing).
std::array<std::uint8_t, 16> machine_uuid() {
  std::array<std::uint8_t, 16> uuid{};
  std::ifstream f("/etc/machine-id");
  std::string hex;
  if (!(f >> hex) || hex.size() != 32) return uuid;
  for (std::size_t i = 0; i < 16; ++i) {
    unsigned byte = 0;
    if (std::sscanf(hex.c_str() + 2 * i, "%2x", &byte) != 1) return {};
    uuid[i] = std::uint8_t(byte);
  }
  return uuid;
}

class CpuDevice final : public DeviceImpl {
 public:
  // The cache keeps at most an eighth of RAM.
  CpuDevice()
      : DeviceImpl(Device::cpu()),
        allocator_(meminfo("MemTotal") / 8, meminfo("MemTotal") + meminfo("SwapTotal")) {
    cpu::KernelTable table;
    cpu::add_elementwise_kernels(table);
    cpu::add_random_kernels(table);
    cpu::add_reduce_kernels(table);
    cpu::add_linalg_kernels(table);
    cpu::add_lapack_kernels(table);
    cpu::add_nn_kernels(table);
    cpu::add_index_kernels(table);
    cpu::add_grad_kernels(table);
    cpu::add_optim_kernels(table);
    cpu::add_sort_kernels(table);
    cpu::add_scatter_kernels(table);
    cpu::add_conv_kernels(table);
    cpu::add_cnn_kernels(table);
    cpu::add_pool_kernels(table);
    cpu::add_resample_kernels(table);
    cpu::add_grid_sample_kernels(table);
    cpu::add_attention_kernels(table);
    for (auto& [name, fn] : table) register_kernel(name, std::move(fn));
    cpu::warn_about_blas_once();  // reads FERRY_CPU_SGEMM
#ifdef FERRY_HAVE_LIBMVEC
    cpu::vector_width();  // reads FERRY_CPU_VECTOR_WIDTH (Note [CPU vector math])
#endif
  }

  // The convolution kernels compute f32 and f64 (cpu_kernels_conv.cpp); the 16-bit types take
  // the composition.
  bool supports(OpId op, DType dtype) const override {
    if (is_conv_kernel_op(op) && !cpu::conv_supports(dtype)) return false;
    return DeviceImpl::supports(op, dtype);
  }

  DeviceInfo info() override {
    DeviceInfo d;
    d.device = "cpu";
    d.backend = "cpu";
    d.available = true;
    d.name = cpuinfo("model name");
    if (d.name.empty()) d.name = "CPU";
    d.vendor = cpuinfo("vendor_id");
    d.driver = fmt::format("ferry cpu backend, {} threads, {}, {}", omp_get_max_threads(),
                           cpu::blas_status(), cpu::onednn::status());
    d.kind = DeviceKind::cpu;
    d.memory_total = meminfo("MemTotal");
    d.memory_free = meminfo("MemAvailable");
    d.max_allocation = d.memory_total;
    d.uuid = machine_uuid();
    d.caps = capabilities();
    d.properties["threads"] = std::to_string(omp_get_max_threads());
    return d;
  }

  std::unique_ptr<Buffer> allocate(std::size_t bytes) override {
    // A request beyond RAM + swap fails in the allocator rather than in the
    // kernel's overcommit logic (and without a sanitizer's allocation-size abort).
    failure_point(*this, "allocate");
    std::size_t capacity = 0;
    void* p = allocator_.allocate(bytes, &capacity);
    if (!p) {
      std::uint64_t avail = meminfo("MemAvailable");
      throw OutOfMemoryError(
          fmt::format("cpu: out of memory allocating {} bytes ({} bytes available); "
                      "free tensors or use a smaller batch",
                      bytes, avail),
          bytes, avail, "cpu");
    }
    return std::make_unique<CpuBuffer>(allocator_, p, bytes, capacity);
  }

  std::unique_ptr<Buffer> sub_buffer(std::shared_ptr<Buffer> parent, std::size_t offset,
                                     std::size_t bytes) override {
    if (!parent || !parent->host_ptr() || offset + bytes > parent->size())
      throw Error(fmt::format("cpu: sub_buffer [{}, {}) is not inside a cpu buffer of {} bytes",
                              offset, offset + bytes, parent ? parent->size() : 0));
    return std::make_unique<CpuSubBuffer>(std::move(parent), offset, bytes);
  }
  DeviceCapabilities capabilities() const override {
    return {.f16 = true,
            .bf16 = true,
            .int64 = true,
            .host_visible_memory = true,
            .peer_copy = false,
            .sub_buffers = true,
            .staging = false,
            .scatter_in_order = true,
            .channels_last_cnn = true,
            .blocked_linalg = true};
  }

  void copy_from_host(Buffer& dst, std::size_t off, const void* src, std::size_t bytes) override {
    failure_point(*this, "copy_from_host");
    host_memcpy(static_cast<char*>(dst.host_ptr()) + off, src, bytes);
  }
  void copy_to_host(void* dst, const Buffer& src, std::size_t off, std::size_t bytes) override {
    failure_point(*this, "copy_to_host");
    host_memcpy(dst, static_cast<const char*>(src.host_ptr()) + off, bytes);
  }
  void copy_within(Buffer& dst, std::size_t doff, const Buffer& src, std::size_t soff,
                   std::size_t bytes) override {
    // memmove semantics are not needed: distinct storages never overlap.
    failure_point(*this, "copy_within");
    host_memcpy(static_cast<char*>(dst.host_ptr()) + doff,
                static_cast<const char*>(src.host_ptr()) + soff, bytes);
  }
  void synchronize() override {}  // kernels run to completion before they return

  MemoryStats memory_stats() override { return allocator_.stats(); }
  void reset_peak_memory_stats() override { allocator_.reset_peak(); }
  void empty_cache() override { allocator_.empty_cache(); }

 private:
  cpu::CachingAllocator allocator_;
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::vector<DeviceImpl*> devices() override { return {&device_}; }

 private:
  CpuDevice device_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace ferry
