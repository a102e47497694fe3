// runtime/vulkan/vk_device.hpp — one Vulkan physical device as a ferry device:
// its logical device and compute queue. Its roles are objects of their own that
// it holds: the recorder that batches dispatches and copies into command
// buffers and submits them (vk_recorder.hpp), the memory pools
// (vk_memory_pools.hpp) and the pipelines (vk_pipelines.hpp); Vulkan errors are
// translated in vk_error.hpp.
//
// Note [Vulkan execution]
// Everything a kernel or copy enqueues goes into the open command buffer (the
// batch); the batch is submitted when the host needs a result (a host read,
// synchronize(), a staging download), or when it holds kBatchCommands
// commands so the GPU starts early. Each submission gets a serial and a fence.
// A buffer remembers the serial of the last batch that used it (last_use).
// - Device memory is reusable at once (PyTorch's stream-ordered reuse): a
//   freed range goes straight back to the allocator, tagged with its
//   last_use (Note [Reuse tags] in block_allocator.hpp). Later commands on
//   this queue that get the range are ordered after the old ones by the
//   barrier tracker, whose pending state spans submissions and is kept per
//   byte range of each block's VkBuffer, so a write into reused bytes waits
//   for the reads and writes before it (Note [Barrier placement]). The one
//   party outside queue order is the host: a new buffer's last_use starts at
//   its range's tag, and the host writes mapped memory only after last_use
//   has completed. Blocks whose tags have not completed are never given back
//   to the driver. So a loop that drops its results holds the memory of one
//   iteration, however far the host runs ahead.
// - Staging memory is written by the host, so a staging range is freed only
//   once its batch has completed (a deferred free), and at most
//   kMaxStagingInFlight bytes wait that way: the next staging allocation
//   waits for the oldest batch first.
// - The host runs at most max_batches_in_flight() submitted, unfinished
//   batches ahead (FERRY_VULKAN_MAX_BATCHES_IN_FLIGHT, default 4, i.e. about
//   2,000 commands, like CUDA's launch queue); a submission beyond that
//   waits for the oldest batch first.
// The host reads mapped memory only after the batches that wrote it have
// finished, and every submission ends with a barrier that makes its writes
// visible to the host, so a host read after the fence is safe.
//
// Note [Vulkan threading]
// Any number of host threads may use one VulkanDevice at once. One mutex
// (mutex_) guards the recorder (the open command buffer, the barrier tracker,
// the copy run, descriptor pools), the submission queue and its fences, the
// deferred staging frees, the block tables and the pipeline maps: recording
// is a few microseconds of host work, a queue and a command pool must be
// externally synchronized anyway, and one in-order queue per device keeps
// every thread's commands in its issue order with no cross-thread event
// juggling (a tensor made on one thread is used on another with no sync).
// The lock is never held while the host waits for the GPU: a waiter notes
// itself in waiters_, drops the lock around vkWaitForFences, and retire()
// recycles no fence while anyone waits (they are parked instead), so a wait
// never sees its fence reset. Host copies into and out of mapped memory run
// unlocked too. With a transfer queue (Note [Transfer queue] in
// vk_recorder.hpp) copies may run beside kernels they do not conflict with;
// every conflict is ordered by a semaphore, so results stay those of the
// issue order. Kernels hold no lock between their dispatches; each
// dispatch is atomic, and the tracker orders whatever another thread puts
// between them. Members only read after construction (limits, physical
// properties, the kernel table) need no lock.
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES  // volk loads every entry point at run time
#endif
#include <volk.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ferry/kit/block_allocator.hpp"
#include "vulkan/barrier_tracker.hpp"
#include "vulkan/vk_error.hpp"
#include "vulkan/vk_kernels.hpp"
#include "vulkan/vk_memory_pools.hpp"
#include "vulkan/vk_pipelines.hpp"
#include "vulkan/vk_policy.hpp"
#include "vulkan/vk_recorder.hpp"

namespace ferry::vulkan {

class VulkanDevice;

// The kind (ferry/device_info.hpp) of a Vulkan device type.
DeviceKind device_kind(VkPhysicalDeviceType type);

// A range of one VkBuffer (a memory block's buffer) holding a tensor's storage.
// A sub-buffer (sub_buffer: a slot of a transfer arena) is a range of its
// parent's range: it keeps the parent alive, frees nothing itself, and hands
// its last_use on to the parent so the parent's free waits for it too.
class VulkanBuffer final : public Buffer {
 public:
  VulkanBuffer(VulkanDevice& device, int pool, detail::Allocation a, VkBuffer buffer,
               std::byte* mapped, std::size_t size, std::shared_ptr<Buffer> parent = nullptr)
      : Buffer(size),
        device_(device),
        pool_(pool),
        alloc_(a),
        buffer_(buffer),
        mapped_(mapped),
        parent_(std::move(parent)) {}
  ~VulkanBuffer() override;
  void* host_ptr() const override { return mapped_; }

  VkBuffer handle() const { return buffer_; }
  std::uint64_t offset() const { return alloc_.offset; }  // within handle()
  const detail::Allocation& allocation() const { return alloc_; }
  int pool() const { return pool_; }
  VulkanDevice& device() const { return device_; }

  // The serial of the last batch that used this buffer, or that used its
  // bytes before it was allocated (Note [Vulkan execution]). Under the
  // device's mutex.
  mutable std::uint64_t last_use = 0;

 private:
  VulkanDevice& device_;
  int pool_;
  detail::Allocation alloc_;
  VkBuffer buffer_;
  std::byte* mapped_;
  std::shared_ptr<Buffer> parent_;  // set for a sub-buffer
};

class VulkanDevice final : public DeviceImpl {
 public:
  VulkanDevice(Device device, const PhysicalDevice& physical);
  ~VulkanDevice() override;

  // ---- DeviceImpl ----
  DeviceInfo info() override;
  std::unique_ptr<Buffer> allocate(std::size_t bytes) override;
  void copy_from_host(Buffer& dst, std::size_t dst_offset, const void* src,
                      std::size_t bytes) override;
  void copy_to_host(void* dst, const Buffer& src, std::size_t src_offset,
                    std::size_t bytes) override;
  void copy_within(Buffer& dst, std::size_t dst_offset, const Buffer& src, std::size_t src_offset,
                   std::size_t bytes) override;
  std::unique_ptr<Buffer> sub_buffer(std::shared_ptr<Buffer> parent, std::size_t offset,
                                     std::size_t bytes) override;
  std::unique_ptr<Buffer> allocate_staging(std::size_t bytes) override;
  // VK_EXT_external_memory_host (vk_host_memory.cpp).
  std::unique_ptr<Buffer> register_host_memory(void* ptr, std::size_t bytes) override;
  DeviceCapabilities capabilities() const override;
  // The table's answer narrowed to the dtypes this device computes (computes()).
  bool supports(OpId op, DType dtype) const override;
  MemoryStats memory_stats() override;
  void reset_peak_memory_stats() override;
  void empty_cache() override;
  void synchronize() override;
  // Flushes the open batch; the event is its serial's fence.
  std::unique_ptr<Event> record_event() override;
  // Timestamp queries (Note [Vulkan timing] in vk_recorder.cpp).
  bool start_timing() override;
  void mark_time(std::uint64_t id, bool end) override;
  std::vector<DeviceTimeSpan> stop_timing() override;
  // GLSL through glslang (vk_custom_kernel.cpp, Note [Custom GLSL kernels]).
  std::unique_ptr<CompiledKernel> compile_kernel(const KernelSource& source) override;

  // ---- for kernels (vk_kernels.hpp) ----
  // The bytes of `t`'s buffer its elements can reach, as a descriptor binding.
  // UnsupportedError when that span exceeds the device's storage-buffer range
  // or 2^32 elements (kernels split such tensors first).
  Binding bind(const TensorArg& t, Access access) const;
  void dispatch(const DispatchDesc& d);
  // Whether every kernel can use `dt` on this device (f32 and i32 always; the rest but
  // f64 need the full shader variant; f64 is per op: require_op); require() throws
  // UnsupportedError if not.
  bool computes(DType dt) const;
  void require(DType dt, std::string_view op) const;
  // require(dt), except that f64 passes for an op with an f64 module on a device with
  // shaderFloat64 (Note [f64 on Vulkan] in vk_pipelines.cpp).
  void require_op(OpId op, DType dt) const;
  const KernelLimits& limits() const { return limits_; }
  bool full_variant() const { return full_variant_; }
  // How matmul's f16 products run (Note [Cooperative-matrix GEMM] in vk_kernels_coopmat.cpp).
  CoopmatMode coopmat_mode() const { return coopmat_mode_; }
  // Whether it takes bf16 products too (the emulation always; matrix units where the device
  // has VK_KHR_shader_bfloat16's cooperative matrices).
  bool coopmat_bf16() const { return coopmat_bf16_; }
  // Whether the cooperative-matrix kernels run on operands of `dt`: f16, and bf16 as above.
  bool coopmat_takes(DType dt) const {
    return coopmat_mode_ != CoopmatMode::off &&
           (dt == DType::f16 || (dt == DType::bf16 && coopmat_bf16_));
  }
  // Whether its tiles are chosen by measurement (Note [Measured coopmat tiles]), and the
  // table of those measured.
  bool coopmat_tuning() const { return coopmat_tuning_; }
  // How attention's forward spreads a row's keys (vk_policy.hpp's split_attention()).
  SplitAttention split_attention() const { return split_attention_; }
  std::optional<std::string> coopmat_tile(const TileKey& key);
  void remember_coopmat_tile(const TileKey& key, std::string name);
  // Makes SPIR-V a shader that DispatchDesc::shader can name (a user's kernel);
  // does nothing when `name` is taken.
  void add_shader(const std::string& name, const std::vector<std::uint32_t>& spirv);

  // ---- for the backend and the tests ----
  void release(VulkanBuffer& b);  // from ~VulkanBuffer
  // From a sub-buffer's destructor: the parent's free waits for its uses too.
  void hand_on_last_use(const VulkanBuffer& sub, VulkanBuffer& parent);
  bool is_complete(std::uint64_t serial);  // without waiting
  void wait_for_serial(std::uint64_t serial);
  // Submitted batches the host may run ahead of the GPU (Note [Vulkan execution]).
  std::size_t max_batches_in_flight() const { return recorder_->max_in_flight(); }
  void save_pipeline_cache();
  const PhysicalDevice& physical() const { return physical_; }
  bool memory_is_mapped() const;

 private:
  // kImportedPool: a VulkanBuffer over imported host memory (register_host_memory), with
  // its own VkBuffer and VkDeviceMemory (imported_).
  enum {
    kDevicePool = MemoryPools::kDevice,
    kStagingPool = MemoryPools::kStaging,
    kImportedPool = -1
  };
  // Note [Vulkan threading]: functions taking a Lock (or named *_locked, or
  // called only from those) run with mutex_ held; a Lock& one may release it
  // while it waits for the GPU.
  using Lock = std::unique_lock<std::mutex>;

  void create_device();
  std::unique_ptr<VulkanBuffer> allocate_in(Lock& lock, int pool, std::size_t bytes);

  void synchronize_locked(Lock& lock);
  void check_alive() const;
  void release_imported(Lock& lock, VulkanBuffer& b);

  PhysicalDevice physical_;
  VkDevice device_ = VK_NULL_HANDLE;
  VolkDeviceTable vk_{};
  VkQueue queue_ = VK_NULL_HANDLE;
  std::uint32_t queue_family_ = 0;
  LaneQueue compute_lane_;
  std::optional<LaneQueue> transfer_lane_;  // Note [Transfer queue] in vk_recorder.hpp
  std::string transfer_note_;               // for info()
  std::vector<std::uint32_t> queue_families_;  // the families the lanes use, each once
  bool full_variant_ = false;
  bool f64_ = false;              // shaderFloat64 enabled: the f64 modules run here
  bool fused_attention_ = false;  // vk_policy.hpp's fused_attention()
  SplitAttention split_attention_ = SplitAttention::on;  // vk_policy.hpp's split_attention()
  bool subgroup_reductions_ = false;  // vk_policy.hpp's subgroup_reductions()
  CoopmatMode coopmat_mode_ = CoopmatMode::off;  // vk_policy.hpp's coopmat_mode()
  std::string coopmat_note_;                     // why it is off (or bf16 is), for info()
  bool coopmat_bf16_ = false;                    // coopmat_bf16()
  bool coopmat_tuning_ = false;                  // vk_policy.hpp's coopmat_tuning()
  std::uint64_t coopmat_tiles_measured_ = 0;     // under mutex_
  bool push_descriptors_ = false;
  bool memory_budget_ = false;
  bool host_import_ = false;  // VK_EXT_external_memory_host enabled
  // VK_EXT_calibrated_timestamps enabled, with the device's and CLOCK_MONOTONIC's domains (Note
  // [Vulkan timing]); else why not, for info().
  bool calibrated_timestamps_ = false;
  std::string calibration_note_;
  std::uint64_t host_import_alignment_ = 1;
  std::unordered_map<VkBuffer, VkDeviceMemory> imported_;  // under mutex_
  KernelLimits limits_;
  std::uint64_t storage_alignment_ = 256;
  std::unique_ptr<MemoryPools> memory_;  // made once the VkDevice exists; under mutex_

  std::unique_ptr<Recorder> recorder_;    // made once the VkDevice exists; under mutex_
  std::unique_ptr<Pipelines> pipelines_;  // made once the VkDevice exists; under mutex_
  std::string driver_name_;
  mutable std::mutex mutex_;  // Note [Vulkan threading]
};

}  // namespace ferry::vulkan
