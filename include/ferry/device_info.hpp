// ferry/device_info.hpp — what a device says about itself.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "ferry/device.hpp"

namespace ferry {

enum class DeviceKind { cpu, discrete_gpu, integrated_gpu, virtual_gpu, cpu_gpu, other };
// "cpu", "discrete GPU", "integrated GPU", "virtual GPU", "CPU-type GPU", "other".
const char* device_kind_name(DeviceKind k);

// What a device can do beyond the ops (DeviceImpl::capabilities(), Note
// [Capabilities] in ferry/backend.hpp); which ops and dtypes it computes is
// DeviceImpl::supports(op, dtype).
struct DeviceCapabilities {
  bool f16 = false;  // f16 arithmetic in kernels (storage alone is always supported)
  bool bf16 = false;
  bool int64 = false;                // 64-bit integer arithmetic in kernels
  bool host_visible_memory = false;  // device memory the host can map (CPU, lavapipe, iGPUs)
  bool peer_copy = false;            // direct copies from other devices (copy_from_peer)
  bool sub_buffers = false;          // buffers inside a buffer (sub_buffer)
  bool staging = false;              // host memory the device copies with (allocate_staging)
  bool host_registration = false;    // pins host memory for its DMA (register_host_memory)
  // The scatter_reduce kernel also takes its targets unsorted, in the sources' order, and folds
  // each target's values in that order, and takes the index form (docs/kernel-contract.md): the
  // core then skips its sort, and for scatter and scatter_reduce its targets and range check.
  bool scatter_in_order = false;
  // The CNN layers' kernels (conv2d/3d, batch_norm, max_pool2d and their backward rows) also
  // take their activations channels-last, and a convolution's weight, as the attributes
  // `channels_last` and `weight_channels_last` say (docs/kernel-contract.md, "Layouts"): the
  // core then hands a channels-last model's tensors over as they are, where it would otherwise
  // copy them to contiguous and the results back.
  bool channels_last_cnn = false;
  // The cholesky, lu_factor_ex and solve_triangular kernels block their work themselves
  // (LAPACK's potrf and getrf, BLAS's trsm): the core hands them whole matrices of any order.
  // Elsewhere the core works on orders above 64 in blocks, the diagonal ones (LU's panels of
  // columns) by the kernel and the rest by matmul (Note [Blocked factorizations and solves] in
  // runtime/ops_factorize.cpp).
  bool blocked_linalg = false;
};

struct DeviceInfo {
  std::string device;   // "vulkan:0"; for an unavailable backend its name alone, "cuda"
  std::string backend;  // "vulkan"
  int index = 0;
  bool available = false;
  std::string unavailable_reason;  // why not, when !available, e.g. "cuda: no CUDA driver found
                                   // (libcuda.so.1)"
  std::string name;                // "NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string vendor;              // "NVIDIA", "Mesa", "GenuineIntel"
  std::string driver;              // driver name and version, when the backend knows them
  DeviceKind kind = DeviceKind::other;
  std::uint64_t memory_total = 0;       // bytes
  std::uint64_t memory_free = 0;        // bytes, as the driver reports it now
  std::uint64_t max_allocation = 0;     // largest single buffer, bytes
  std::array<std::uint8_t, 16> uuid{};  // same card, same UUID across backends
  DeviceCapabilities caps;
  std::map<std::string, std::string> properties;  // backend-specific extras (subgroup size, ...)

  std::string uuid_str() const;  // 8-4-4-4-12 hex
};

}  // namespace ferry
