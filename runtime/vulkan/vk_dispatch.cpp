// runtime/vulkan/vk_dispatch.cpp — what the device does through its recorder
// (vk_recorder.hpp): binding tensors and dispatching kernels, events,
// synchronization, buffer lifetimes, and the device's dtype and capability
// answers (Note [Vulkan execution] in vk_device.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "ferry/error.hpp"
#include "log_internal.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_recorder.hpp"

namespace ferry::vulkan {

void throw_past_loop_budget(const VulkanDevice& dev, std::string_view op, std::string_view what) {
  throw UnsupportedError(fmt::format(
      "{}: on {}, whose compiler ends a shader's loops after {} iterations (Note [Loop budget] in "
      "runtime/vulkan/vk_kernels.hpp), {}",
      op, dev.device().str(), dev.limits().loop_budget, what));
}

std::array<std::uint32_t, 3> plane_grid_within_budget(const VulkanDevice& dev, std::string_view op,
                                                      std::uint64_t planes, std::uint64_t area,
                                                      std::uint32_t wg, std::uint64_t cost) {
  const KernelLimits& lim = dev.limits();
  const std::array<std::uint32_t, 3> grid = plane_grid(lim, planes, area, wg, cost);
  const std::uint64_t iterations = plane_loop_iterations(grid, planes, area, wg, cost);
  if (lim.loop_budget != 0 && iterations > lim.loop_budget)
    throw_past_loop_budget(dev, op,
                           fmt::format("a thread would run {} ({} a position)", iterations, cost));
  return grid;
}

std::uint32_t dtype_code(DType dt) {
  switch (dt) {
    case DType::f32:
      return abi::DT_F32;
    case DType::f16:
      return abi::DT_F16;
    case DType::bf16:
      return abi::DT_BF16;
    case DType::i32:
      return abi::DT_I32;
    case DType::i64:
      return abi::DT_I64;
    case DType::u8:
      return abi::DT_U8;
    case DType::boolean:
      return abi::DT_BOOL;
    case DType::i8:
      return abi::DT_I8;
    case DType::i16:
      return abi::DT_I16;
    case DType::f64:
      return abi::DT_F64;  // the f64 modules' (Note [f64 on Vulkan] in vk_pipelines.cpp)
  }
  throw UnsupportedError(
      fmt::format("vulkan: no shader takes dtype {}; cast to f32 first, or compute it on the cpu",
                  dtype_name(dt)));
}

VulkanDevice& vulkan_device(DeviceImpl& d) { return static_cast<VulkanDevice&>(d); }

VulkanBuffer::~VulkanBuffer() {
  if (parent_) {
    device_.hand_on_last_use(*this, static_cast<VulkanBuffer&>(*parent_));
    return;  // the parent frees the memory
  }
  device_.release(*this);
}

// f64 computes in the ops with an f64 module, on devices with shaderFloat64 (Note [f64 on
// Vulkan] in vk_pipelines.cpp): supports() and require_op() say which; the other kernels refuse
// it through require().
bool VulkanDevice::computes(DType dt) const {
  if (dt == DType::f64) return false;
  return full_variant_ || dt == DType::f32 || dt == DType::i32;
}

bool VulkanDevice::supports(OpId op, DType dtype) const {
  if ((op == OpId::scaled_dot_product_attention ||
       op == OpId::scaled_dot_product_attention_backward) &&
      !fused_attention_)
    return false;  // the composition runs (vk_policy.hpp)
  // Comparisons also write a bool, which the f32/i32 shader variant lacks.
  if (op_info(op).result == OpResult::bool_ && !computes(DType::boolean)) return false;
  if (dtype == DType::f64)
    return (moves_element_bytes(op) || (f64_ && has_f64_module(std::uint32_t(op)))) &&
           DeviceImpl::supports(op, dtype);
  return computes(dtype) && DeviceImpl::supports(op, dtype);
}

DeviceCapabilities VulkanDevice::capabilities() const {
  return {.f16 = full_variant_,
          .bf16 = full_variant_,
          .int64 = full_variant_,
          .host_visible_memory = memory_is_mapped(),
          .peer_copy = false,
          .sub_buffers = true,
          .staging = true,
          .host_registration = host_import_};
}

void VulkanDevice::require_op(OpId op, DType dt) const {
  if (dt == DType::f64 && f64_ && has_f64_module(std::uint32_t(op))) return;
  require(dt, op_name(op));
}

void VulkanDevice::require(DType dt, std::string_view op) const {
  if (dt == DType::f64) {
    const std::string why =
        f64_ ? std::string("has no f64 shader module in this build (Note [f64 on Vulkan])")
        : full_variant_ ? fmt::format("needs shaderFloat64, which this device ({}) lacks",
                                      physical_.props.deviceName)
                        : fmt::format(
                              "needs the full shader variant, which this device ({}) does not run "
                              "(it lacks 64-bit integers or 8/16-bit storage, or "
                              "FERRY_VULKAN_BASE_SHADERS is set)",
                              physical_.props.deviceName);
    throw UnsupportedError(fmt::format(
        "{}: {} on f64 {}; the cpu and cuda backends compute every op on f64: move the tensor "
        "with .cpu(), or cast it with .to(ferry::DType::f32) first",
        device().str(), op, why));
  }
  if (!computes(dt))
    throw UnsupportedError(fmt::format(
        "{}: {} on {} needs 64-bit integers and 8/16-bit storage buffers, which this device ({}) "
        "lacks; it computes f32 and i32 only",
        device().str(), op, dtype_name(dt), physical_.props.deviceName));
}

void VulkanDevice::check_alive() const { recorder_->check_alive(); }

// ---- memory lifetime ----

void VulkanDevice::hand_on_last_use(const VulkanBuffer& sub, VulkanBuffer& parent) {
  std::lock_guard lock(mutex_);
  parent.last_use = std::max(parent.last_use, sub.last_use);
}

// Note [Vulkan execution]: device memory goes back at once, tagged with the
// batch that used it last; staging memory, which the host writes, only once
// that batch has finished.
void VulkanDevice::release(VulkanBuffer& b) {
  Lock lock(mutex_);
  if (b.pool() == kImportedPool) return release_imported(lock, b);
  const bool pending = b.last_use > recorder_->completed_serial() && !recorder_->lost();
  if (pending && b.pool() == kStagingPool)
    return recorder_->free_after(b.last_use, b.pool(), b.allocation());
  memory_->allocator(b.pool()).free(b.allocation(), pending ? b.last_use : 0);
}

namespace {
class VulkanEvent final : public Event {
 public:
  VulkanEvent(VulkanDevice& d, std::uint64_t serial) : device_(d), serial_(serial) {}
  void wait() override { device_.wait_for_serial(serial_); }
  bool query() override { return device_.is_complete(serial_); }

 private:
  VulkanDevice& device_;
  std::uint64_t serial_;
};
}  // namespace

std::unique_ptr<Event> VulkanDevice::record_event() {
  Lock lock(mutex_);
  check_alive();
  const std::uint64_t serial = recorder_->last_serial();
  recorder_->flush();  // the GPU starts on it now; the event waits for this batch's fence
  recorder_->throttle(lock);
  return std::make_unique<VulkanEvent>(*this, serial);
}

bool VulkanDevice::is_complete(std::uint64_t serial) {
  Lock lock(mutex_);
  recorder_->retire();
  return serial <= recorder_->completed_serial();
}

void VulkanDevice::wait_for_serial(std::uint64_t serial) {
  Lock lock(mutex_);
  recorder_->wait_for(lock, serial);
}

void VulkanDevice::synchronize() {
  Lock lock(mutex_);
  synchronize_locked(lock);
}

void VulkanDevice::synchronize_locked(Lock& lock) {
  check_alive();
  recorder_->synchronize(lock);
}

// ---- timing for the profiler (Note [Vulkan timing] in vk_recorder.cpp) ----

bool VulkanDevice::start_timing() {
  Lock lock(mutex_);
  check_alive();
  // A queue without timestamps still runs ahead of the host: its spans stay
  // unknown rather than host-timed.
  recorder_->start_timing(lock, physical_.props.limits.timestampPeriod, calibrated_timestamps_);
  return true;
}

void VulkanDevice::mark_time(std::uint64_t id, bool end) {
  Lock lock(mutex_);
  if (!recorder_->lost()) recorder_->write_timestamp(id, end);
}

std::vector<DeviceTimeSpan> VulkanDevice::stop_timing() {
  Lock lock(mutex_);
  if (!recorder_->timing() || recorder_->lost()) return {};
  return recorder_->stop_timing(lock);
}

// ---- dispatch ----

Binding VulkanDevice::bind(const TensorArg& t, Access access) const {
  auto* vb = dynamic_cast<const VulkanBuffer*>(t.buffer);
  if (!vb || &vb->device() != this)
    throw DeviceError(
        fmt::format("{}: a kernel argument is not a buffer of this device", device().str()));
  const std::uint64_t esize = dtype_size(t.dtype);
  // Elements the view can reach: offset + sum((size - 1) * stride); strides are >= 0.
  std::uint64_t last = std::uint64_t(t.offset);
  bool empty = false;
  for (int d = 0; d < t.ndim(); ++d) {
    if (t.sizes[d] == 0)
      empty = true;
    else
      last += std::uint64_t(t.sizes[d] - 1) * std::uint64_t(t.strides[d]);
  }
  const std::uint64_t alloc_size = vb->allocation().size;
  std::uint64_t first_byte = std::uint64_t(t.offset) * esize;
  std::uint64_t end_byte = empty ? first_byte : (last + 1) * esize;
  std::uint64_t begin = first_byte / storage_alignment_ * storage_alignment_;
  // Round the end up to 16 bytes (the widest alias a shader declares is 8), within the range.
  std::uint64_t end = std::min(alloc_size, (end_byte + 15) / 16 * 16);
  if (end <= begin) end = std::min(alloc_size, begin + 16);
  if (end - begin > limits_.max_storage_range)
    throw UnsupportedError(fmt::format(
        "{}: a tensor view spanning {} bytes exceeds the device's storage-buffer range ({} "
        "bytes), and this op could not split it into parts that fit",
        device().str(), end - begin, limits_.max_storage_range));
  if ((end_byte - begin) / esize > 0xffffffffull)
    throw UnsupportedError(
        fmt::format("{}: a tensor view spanning more than 2^32 elements is not "
                    "supported by this op",
                    device().str()));
  Binding b;
  b.buffer = vb;
  b.offset = vb->offset() + begin;
  b.size = end - begin;
  b.access = access;
  b.element_offset = std::uint32_t((first_byte - begin) / esize);
  return b;
}

void VulkanDevice::dispatch(const DispatchDesc& d) {
  Lock lock(mutex_);
  check_alive();
  if (d.push_size > kMaxPushBytes)
    throw Error(fmt::format("vulkan: {}: {} bytes of push constants (at most {})", d.shader,
                            d.push_size, kMaxPushBytes));
  const Pipelines::Layout& layout = pipelines_->layout_for(d.bindings.size());
  VkPipeline pipeline = pipelines_->pipeline_for(d, layout);

  // Fixed arrays: this runs for every op, and a shader binds a handful of tensors.
  const std::size_t n = d.bindings.size();
  if (n > kMaxBindings)
    throw Error(fmt::format("vulkan: {}: {} bindings (at most {})", d.shader, n, kMaxBindings));
  std::array<Use, kMaxBindings> uses;
  std::array<VkDescriptorBufferInfo, kMaxBindings> infos;
  std::array<VkWriteDescriptorSet, kMaxBindings> writes_ds;
  bool writes = false;
  for (std::size_t i = 0; i < n; ++i) {
    const Binding& b = d.bindings[i];
    auto* vb = static_cast<const VulkanBuffer*>(b.buffer);
    uses[i] = {{std::uint64_t(vb->handle()), b.offset, b.size}, b.access};
    writes = writes || b.access == Access::write;
    infos[i] = {vb->handle(), b.offset, b.size};
    VkWriteDescriptorSet& w = writes_ds[i];
    w = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w.dstBinding = std::uint32_t(i);
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &infos[i];
  }
  recorder_->before_command(Stage::compute, std::span<const Use>(uses.data(), n));
  const std::uint64_t serial = recorder_->batch_serial();
  for (std::size_t i = 0; i < n; ++i)
    static_cast<const VulkanBuffer*>(d.bindings[i].buffer)->last_use = serial;
  VkCommandBuffer cb = recorder_->batch();

  vk_.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  if (push_descriptors_) {
    vk_.vkCmdPushDescriptorSetKHR(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout.pipeline_layout, 0,
                                  std::uint32_t(n), writes_ds.data());
  } else {
    VkDescriptorSet set = recorder_->allocate_descriptor_set(layout.set_layout);
    for (std::size_t i = 0; i < n; ++i) writes_ds[i].dstSet = set;
    vk_.vkUpdateDescriptorSets(device_, std::uint32_t(n), writes_ds.data(), 0, nullptr);
    vk_.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout.pipeline_layout, 0, 1,
                                &set, 0, nullptr);
  }
  // The whole range is pushed, zero-padded, so no byte a shader may read is undefined.
  std::uint8_t push[kMaxPushBytes] = {};
  if (d.push_size) std::memcpy(push, d.push, d.push_size);
  vk_.vkCmdPushConstants(cb, layout.pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, kMaxPushBytes,
                         push);
  vk_.vkCmdDispatch(cb, d.groups[0], d.groups[1], d.groups[2]);
  recorder_->after_command(writes);
  recorder_->throttle(lock);
}

}  // namespace ferry::vulkan
