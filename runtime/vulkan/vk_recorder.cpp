// runtime/vulkan/vk_recorder.cpp — batching commands into command buffers,
// barriers, descriptors, submission, completion and deferred frees
// (Note [Vulkan execution] in vk_device.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "ferry/error.hpp"
#include "log_internal.hpp"
#include "vulkan/vk_device.hpp"

namespace ferry::vulkan {

static_assert(mask(Stage::compute) == VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
static_assert(mask(Stage::transfer) == VK_PIPELINE_STAGE_TRANSFER_BIT);
static_assert(mask(Stage::host) == VK_PIPELINE_STAGE_HOST_BIT);
static_assert(mask(AccessBit::shader_read) == VK_ACCESS_SHADER_READ_BIT);
static_assert(mask(AccessBit::shader_write) == VK_ACCESS_SHADER_WRITE_BIT);
static_assert(mask(AccessBit::transfer_read) == VK_ACCESS_TRANSFER_READ_BIT);
static_assert(mask(AccessBit::transfer_write) == VK_ACCESS_TRANSFER_WRITE_BIT);
static_assert(mask(AccessBit::host_read) == VK_ACCESS_HOST_READ_BIT);

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
    case DType::f64:
      break;  // no shader computes f64; require() refuses it before this is reached
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

// f64 is a CPU dtype (double-precision references, F64 checkpoints): no shader
// computes it, and GPUs that have f64 at all run it at a small fraction of f32.
bool VulkanDevice::computes(DType dt) const {
  if (dt == DType::f64) return false;
  return full_variant_ || dt == DType::f32 || dt == DType::i32;
}

bool VulkanDevice::supports(OpId op, DType dtype) const {
  // Comparisons also write a bool, which the f32/i32 shader variant lacks.
  if (op_info(op).result == OpResult::bool_ && !computes(DType::boolean)) return false;
  return computes(dtype) && DeviceImpl::supports(op, dtype);
}

DeviceCapabilities VulkanDevice::capabilities() const {
  return {.f16 = full_variant_,
          .bf16 = full_variant_,
          .int64 = full_variant_,
          .host_visible_memory = memory_is_mapped(),
          .peer_copy = false,
          .sub_buffers = true,
          .staging = true};
}

void VulkanDevice::require(DType dt, std::string_view op) const {
  if (dt == DType::f64)
    throw UnsupportedError(
        fmt::format("{}: {} on f64 is not supported by the vulkan backend (f64 is a cpu dtype, for "
                    "double-precision references); move the tensor with .cpu(), or cast it with "
                    ".to(ferry::DType::f32) on the cpu first",
                    device().str(), op));
  if (!computes(dt))
    throw UnsupportedError(fmt::format(
        "{}: {} on {} needs 64-bit integers and 8/16-bit storage buffers, which this device ({}) "
        "lacks; it computes f32 and i32 only",
        device().str(), op, dtype_name(dt), physical_.props.deviceName));
}

void VulkanDevice::check_alive() const {
  if (lost_)
    throw BackendError(fmt::format("{}: the device was lost earlier ({}); restart the process to "
                                   "use it again",
                                   device().str(), lost_reason_),
                       "VK_ERROR_DEVICE_LOST");
}

// ---- memory lifetime ----

void VulkanDevice::hand_on_last_use(const VulkanBuffer& sub, VulkanBuffer& parent) {
  std::lock_guard lock(mutex_);
  parent.last_use = std::max(parent.last_use, sub.last_use);
}

// Note [Vulkan execution]: device memory goes back at once, tagged with the
// batch that used it last; staging memory, which the host writes, only once
// that batch has finished.
void VulkanDevice::release(VulkanBuffer& b) {
  std::lock_guard lock(mutex_);
  const bool pending = b.last_use > completed_serial_ && !lost_;
  if (pending && b.pool() == kStagingPool) {
    deferred_.emplace(b.last_use, DeferredFree{b.pool(), b.allocation()});
    deferred_bytes_ += b.allocation().size;
    return;
  }
  memory_->allocator(b.pool()).free(b.allocation(), pending ? b.last_use : 0);
}

// ---- recording ----

VkCommandBuffer VulkanDevice::open_batch() {
  if (batch_cb_) return batch_cb_;
  check_alive();
  if (!free_cbs_.empty()) {
    batch_cb_ = free_cbs_.back();
    free_cbs_.pop_back();
  } else {
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = command_pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(vk_.vkAllocateCommandBuffers(device_, &ai, &batch_cb_), "vkAllocateCommandBuffers");
  }
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vk_.vkBeginCommandBuffer(batch_cb_, &bi), "vkBeginCommandBuffer");
  batch_commands_ = 0;
  batch_writes_ = false;
  return batch_cb_;
}

void VulkanDevice::before_command(Stage stage, std::span<const Use> uses,
                                  std::initializer_list<const VulkanBuffer*> buffers) {
  before_command(stage, uses);
  for (const VulkanBuffer* vb : buffers) vb->last_use = batch_serial_;
}

void VulkanDevice::before_command(Stage stage, std::span<const Use> uses) {
  open_batch();
  end_copy_run();  // the copies recorded so far come first
  record_barrier(tracker_.before(stage, uses));
  ++batch_commands_;
}

void VulkanDevice::record_barrier(const std::optional<Barrier>& b) {
  if (!b) return;
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = b->src_access;
  mb.dstAccessMask = b->dst_access;
  vk_.vkCmdPipelineBarrier(batch_cb_, b->src_stages, b->dst_stages, 0, 1, &mb, 0, nullptr, 0,
                           nullptr);
}

// Note [Copy runs]
// A migration of many small tensors makes thousands of buffer copies in a
// row (the transfer planner's gathers into staging memory), and most of them
// go between the same two VkBuffers: a memory block holds many tensors, and a
// transfer arena or a staging chunk is one range of one block. Such a copy
// that needs no barrier before it (the tracker found no hazard with anything
// recorded since the last barrier, the run's copies included) joins the open
// run, and the run is recorded as one vkCmdCopyBuffer with many regions
// (adjacent regions merged) when anything else is recorded, a barrier is
// needed, or the batch is submitted. Within a run no two regions conflict,
// so the union rule of vkCmdCopyBuffer for src == dst holds. Each copy still
// counts as a command towards the batch size, so barrier-tracker work per
// batch stays bounded.
void VulkanDevice::record_copy(const VulkanBuffer& s, const VulkanBuffer& d,
                               const VkBufferCopy& region) {
  const Use uses[] = {{{std::uint64_t(s.handle()), region.srcOffset, region.size}, Access::read},
                      {{std::uint64_t(d.handle()), region.dstOffset, region.size}, Access::write}};
  open_batch();
  const std::optional<Barrier> barrier = tracker_.before(Stage::transfer, uses);
  if (barrier || copy_run_.src != s.handle() || copy_run_.dst != d.handle()) {
    end_copy_run();
    record_barrier(barrier);
    copy_run_.src = s.handle();
    copy_run_.dst = d.handle();
  }
  std::vector<VkBufferCopy>& r = copy_run_.regions;
  if (!r.empty() && r.back().srcOffset + r.back().size == region.srcOffset &&
      r.back().dstOffset + r.back().size == region.dstOffset)
    r.back().size += region.size;
  else
    r.push_back(region);
  s.last_use = batch_serial_;
  d.last_use = batch_serial_;
  ++batch_commands_;
  after_command(true);
}

void VulkanDevice::end_copy_run() {
  if (!copy_run_.regions.empty())
    vk_.vkCmdCopyBuffer(batch_cb_, copy_run_.src, copy_run_.dst,
                        std::uint32_t(copy_run_.regions.size()), copy_run_.regions.data());
  copy_run_.regions.clear();
  copy_run_.src = copy_run_.dst = VK_NULL_HANDLE;
}

void VulkanDevice::after_command(bool writes) {
  batch_writes_ = batch_writes_ || writes;
  if (batch_commands_ >= kBatchCommands) flush();
}

void VulkanDevice::flush() {
  if (!batch_cb_) return;
  end_copy_run();
  if (batch_writes_) {
    // Makes this batch's writes visible to the host once its fence has signalled.
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vk_.vkCmdPipelineBarrier(batch_cb_,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  }
  check(vk_.vkEndCommandBuffer(batch_cb_), "vkEndCommandBuffer");
  Submission s;
  s.serial = batch_serial_;
  s.cb = batch_cb_;
  s.descriptor_pools = std::move(batch_pools_);
  batch_pools_.clear();
  batch_cb_ = VK_NULL_HANDLE;
  if (!free_fences_.empty()) {
    s.fence = free_fences_.back();
    free_fences_.pop_back();
  } else {
    VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    check(vk_.vkCreateFence(device_, &fi, nullptr, &s.fence), "vkCreateFence");
  }
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &s.cb;
  VkResult r = vk_.vkQueueSubmit(queue_, 1, &si, s.fence);
  ++batch_serial_;
  if (r != VK_SUCCESS) {
    free_fences_.push_back(s.fence);
    free_cbs_.push_back(s.cb);
    if (r == VK_ERROR_DEVICE_LOST) lost_ = true, lost_reason_ = "vkQueueSubmit";
    throw_result(r, "vkQueueSubmit");
  }
  FERRY_DEBUG("{}: submitted batch {} ({} commands)", device().str(), s.serial, batch_commands_);
  in_flight_.push_back(std::move(s));
}

// Note [Vulkan threading]: the lock is released around vkWaitForFences, so
// other threads keep recording while this one waits; waiters_ keeps retire()
// from resetting the fence under it.
void VulkanDevice::wait_for(Lock& lock, std::uint64_t serial) {
  if (serial == 0 || serial <= completed_serial_) return;
  if (serial >= batch_serial_) flush();
  while (serial > completed_serial_ && !in_flight_.empty()) {
    VkFence fence = in_flight_.front().fence;
    ++waiters_;
    lock.unlock();
    VkResult r = vk_.vkWaitForFences(device_, 1, &fence, VK_TRUE, UINT64_MAX);
    lock.lock();
    --waiters_;
    if (r != VK_SUCCESS) {
      if (r == VK_ERROR_DEVICE_LOST) lost_ = true, lost_reason_ = "vkWaitForFences";
      throw_result(r, "vkWaitForFences");
    }
    retire();
  }
}

void VulkanDevice::throttle(Lock& lock) {
  while (in_flight_.size() > max_in_flight_) wait_for(lock, in_flight_.front().serial);
}

void VulkanDevice::recycle_fence(VkFence f) {
  check(vk_.vkResetFences(device_, 1, &f), "vkResetFences");
  free_fences_.push_back(f);
}

void VulkanDevice::retire() {
  while (!in_flight_.empty()) {
    Submission& s = in_flight_.front();
    VkResult r = vk_.vkGetFenceStatus(device_, s.fence);
    if (r == VK_NOT_READY) break;
    if (r != VK_SUCCESS) {
      if (r == VK_ERROR_DEVICE_LOST) lost_ = true, lost_reason_ = "vkGetFenceStatus";
      throw_result(r, "waiting for a batch");
    }
    if (waiters_ > 0)
      parked_fences_.push_back(s.fence);  // another thread may be waiting on it
    else
      recycle_fence(s.fence);
    check(vk_.vkResetCommandBuffer(s.cb, 0), "vkResetCommandBuffer");
    free_cbs_.push_back(s.cb);
    for (VkDescriptorPool p : s.descriptor_pools) {
      check(vk_.vkResetDescriptorPool(device_, p, 0), "vkResetDescriptorPool");
      free_descriptor_pools_.push_back(p);
    }
    completed_serial_ = s.serial;
    in_flight_.pop_front();
  }
  if (waiters_ == 0) {
    for (VkFence f : parked_fences_) recycle_fence(f);
    parked_fences_.clear();
  }
  while (!deferred_.empty() && deferred_.begin()->first <= completed_serial_) {
    const DeferredFree& d = deferred_.begin()->second;
    memory_->allocator(d.pool).free(d.allocation);
    deferred_bytes_ -= d.allocation.size;
    deferred_.erase(deferred_.begin());
  }
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
  const std::uint64_t serial = batch_cb_ ? batch_serial_ : batch_serial_ - 1;
  flush();  // the GPU starts on it now; the event waits for this batch's fence
  throttle(lock);
  return std::make_unique<VulkanEvent>(*this, serial);
}

bool VulkanDevice::is_complete(std::uint64_t serial) {
  Lock lock(mutex_);
  retire();
  return serial <= completed_serial_;
}

void VulkanDevice::wait_for_serial(std::uint64_t serial) {
  Lock lock(mutex_);
  wait_for(lock, serial);
}

void VulkanDevice::synchronize() {
  Lock lock(mutex_);
  synchronize_locked(lock);
}

void VulkanDevice::synchronize_locked(Lock& lock) {
  check_alive();
  flush();
  wait_for(lock, batch_serial_ - 1);
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
  before_command(Stage::compute, std::span<const Use>(uses.data(), n));
  for (std::size_t i = 0; i < n; ++i)
    static_cast<const VulkanBuffer*>(d.bindings[i].buffer)->last_use = batch_serial_;

  vk_.vkCmdBindPipeline(batch_cb_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  if (push_descriptors_) {
    vk_.vkCmdPushDescriptorSetKHR(batch_cb_, VK_PIPELINE_BIND_POINT_COMPUTE, layout.pipeline_layout,
                                  0, std::uint32_t(n), writes_ds.data());
  } else {
    VkDescriptorSet set = allocate_descriptor_set(layout.set_layout);
    for (std::size_t i = 0; i < n; ++i) writes_ds[i].dstSet = set;
    vk_.vkUpdateDescriptorSets(device_, std::uint32_t(n), writes_ds.data(), 0, nullptr);
    vk_.vkCmdBindDescriptorSets(batch_cb_, VK_PIPELINE_BIND_POINT_COMPUTE, layout.pipeline_layout,
                                0, 1, &set, 0, nullptr);
  }
  // The whole range is pushed, zero-padded, so no byte a shader may read is undefined.
  std::uint8_t push[kMaxPushBytes] = {};
  if (d.push_size) std::memcpy(push, d.push, d.push_size);
  vk_.vkCmdPushConstants(batch_cb_, layout.pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                         kMaxPushBytes, push);
  vk_.vkCmdDispatch(batch_cb_, d.groups[0], d.groups[1], d.groups[2]);
  after_command(writes);
  throttle(lock);
}

VkDescriptorSet VulkanDevice::allocate_descriptor_set(VkDescriptorSetLayout set_layout) {
  // Pools belong to the open batch and are reset when it has completed.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!batch_pools_.empty()) {
      VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
      ai.descriptorPool = batch_pools_.back();
      ai.descriptorSetCount = 1;
      ai.pSetLayouts = &set_layout;
      VkDescriptorSet set;
      VkResult r = vk_.vkAllocateDescriptorSets(device_, &ai, &set);
      if (r == VK_SUCCESS) return set;
      if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
        throw_result(r, "vkAllocateDescriptorSets");
    }
    VkDescriptorPool pool;
    if (!free_descriptor_pools_.empty()) {
      pool = free_descriptor_pools_.back();
      free_descriptor_pools_.pop_back();
    } else {
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kBatchCommands * 8};
      VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      pi.maxSets = kBatchCommands;
      pi.poolSizeCount = 1;
      pi.pPoolSizes = &size;
      check(vk_.vkCreateDescriptorPool(device_, &pi, nullptr, &pool), "vkCreateDescriptorPool");
    }
    batch_pools_.push_back(pool);
  }
  throw BackendError("vulkan: could not allocate a descriptor set from a fresh pool",
                     "VK_ERROR_OUT_OF_POOL_MEMORY");
}

}  // namespace ferry::vulkan
