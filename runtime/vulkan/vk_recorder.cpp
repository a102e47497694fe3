// runtime/vulkan/vk_recorder.cpp — the Recorder (vk_recorder.hpp): batching
// commands into command buffers, barriers, copy runs, descriptor pools, the
// transfer lane (Note [Transfer queue]), submission, completion and deferred
// staging frees (Note [Vulkan execution] in vk_device.hpp). Timestamps are in
// vk_recorder_timing.cpp.
#include "vulkan/vk_recorder.hpp"

#include <fmt/format.h>

#include <chrono>
#include <unordered_map>
#include <utility>

#include "ferry/error.hpp"
#include "log_internal.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_error.hpp"

namespace ferry::vulkan {

static_assert(mask(Stage::compute) == VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
static_assert(mask(Stage::transfer) == VK_PIPELINE_STAGE_TRANSFER_BIT);
static_assert(mask(Stage::host) == VK_PIPELINE_STAGE_HOST_BIT);
static_assert(mask(AccessBit::shader_read) == VK_ACCESS_SHADER_READ_BIT);
static_assert(mask(AccessBit::shader_write) == VK_ACCESS_SHADER_WRITE_BIT);
static_assert(mask(AccessBit::transfer_read) == VK_ACCESS_TRANSFER_READ_BIT);
static_assert(mask(AccessBit::transfer_write) == VK_ACCESS_TRANSFER_WRITE_BIT);
static_assert(mask(AccessBit::host_read) == VK_ACCESS_HOST_READ_BIT);

Recorder::Recorder(const VolkDeviceTable& vk, VkDevice device, const LaneQueue& compute,
                   const std::optional<LaneQueue>& transfer, std::string name, bool serialize,
                   std::size_t max_in_flight, MemoryPools& memory)
    : vk_(vk),
      device_(device),
      name_(std::move(name)),
      memory_(memory),
      max_in_flight_(max_in_flight) {
  lane_count_ = transfer ? 2 : 1;
  for (int i = 0; i < lane_count_; ++i) {
    LaneState& l = lanes_[i];
    l.q = i == 0 ? compute : *transfer;
    l.tracker = BarrierTracker(serialize, l.q.stages);
    if (l.q.timestamp_bits > 0 && l.q.timestamp_bits < 64)
      l.valid_mask = (std::uint64_t(1) << l.q.timestamp_bits) - 1;
    VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    cpi.queueFamilyIndex = l.q.family;
    check(vk_.vkCreateCommandPool(device_, &cpi, nullptr, &l.command_pool),
          "vkCreateCommandPool");
    if (lane_count_ == 2) {
      VkSemaphoreTypeCreateInfo type{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
      type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
      VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
      sci.pNext = &type;
      check(vk_.vkCreateSemaphore(device_, &sci, nullptr, &l.timeline), "vkCreateSemaphore");
    }
  }
}

Recorder::~Recorder() {
  for (VkFence f : free_fences_) vk_.vkDestroyFence(device_, f, nullptr);
  for (VkFence f : parked_fences_) vk_.vkDestroyFence(device_, f, nullptr);
  for (VkDescriptorPool p : free_descriptor_pools_)
    vk_.vkDestroyDescriptorPool(device_, p, nullptr);
  for (VkQueryPool q : free_query_pools_) vk_.vkDestroyQueryPool(device_, q, nullptr);
  for (auto& s : in_flight_) {
    vk_.vkDestroyFence(device_, s.fence, nullptr);
    for (VkDescriptorPool p : s.descriptor_pools) vk_.vkDestroyDescriptorPool(device_, p, nullptr);
    if (s.queries.pool) vk_.vkDestroyQueryPool(device_, s.queries.pool, nullptr);
  }
  for (int i = 0; i < lane_count_; ++i) {
    LaneState& l = lanes_[i];
    for (VkDescriptorPool p : l.pools) vk_.vkDestroyDescriptorPool(device_, p, nullptr);
    if (l.queries.pool) vk_.vkDestroyQueryPool(device_, l.queries.pool, nullptr);
    if (l.timeline) vk_.vkDestroySemaphore(device_, l.timeline, nullptr);
    // The command buffers go with their pool.
    vk_.vkDestroyCommandPool(device_, l.command_pool, nullptr);
  }
}

void Recorder::check_alive() const {
  if (lost_)
    throw BackendError(fmt::format("{}: the device was lost earlier ({}); restart the process to "
                                   "use it again",
                                   name_, lost_reason_),
                       "VK_ERROR_DEVICE_LOST");
}

void Recorder::mark_lost(VkResult r, const char* where) {
  if (r == VK_ERROR_DEVICE_LOST) lost_ = true, lost_reason_ = where;
  throw_result(r, where);
}

std::uint64_t Recorder::barriers_recorded() const {
  std::uint64_t n = 0;
  for (int i = 0; i < lane_count_; ++i) n += lanes_[i].tracker.stats().barriers();
  return n;
}

VkCommandBuffer Recorder::open_batch(int lane) {
  LaneState& l = lanes_[lane];
  if (l.cb) return l.cb;
  check_alive();
  if (!l.free_cbs.empty()) {
    l.cb = l.free_cbs.back();
    l.free_cbs.pop_back();
  } else {
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = l.command_pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(vk_.vkAllocateCommandBuffers(device_, &ai, &l.cb), "vkAllocateCommandBuffers");
  }
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  if (VkResult r = vk_.vkBeginCommandBuffer(l.cb, &bi); r != VK_SUCCESS) {
    l.free_cbs.push_back(std::exchange(l.cb, VK_NULL_HANDLE));
    throw_result(r, "vkBeginCommandBuffer");
  }
  l.serial = next_serial_++;
  l.commands = 0;
  l.writes = false;
  return l.cb;
}

void Recorder::begin_command(int lane, std::span<const Use> uses) {
  LaneState& l = lanes_[lane];
  std::uint64_t wait = 0;
  if (lane_count_ == 2) {
    // Note [Transfer queue]: the other lane's conflicting batch goes first.
    wait = order_.need(lane, uses, completed_serial_);
    LaneState& other = lanes_[1 - lane];
    if (wait > 0 && other.cb && other.serial <= wait) flush_lane(1 - lane);
  }
  write_pending_starts(lane);
  open_batch(lane);
  if (lane_count_ == 2) {
    order_.record(lane, l.serial, uses);
    if (wait > l.wait) l.wait = wait, ++cross_lane_waits_;
  }
}

void Recorder::before_command(Stage stage, std::span<const Use> uses,
                              std::initializer_list<const VulkanBuffer*> buffers) {
  before_command(stage, uses);
  for (const VulkanBuffer* vb : buffers) vb->last_use = lanes_[0].serial;
}

void Recorder::before_command(Stage stage, std::span<const Use> uses) {
  begin_command(0, uses);
  LaneState& l = lanes_[0];
  end_copy_run(l);  // the copies recorded so far come first
  record_barrier(l, l.tracker.before(stage, uses));
  ++l.commands;
}

void Recorder::record_barrier(LaneState& l, const std::optional<Barrier>& b) {
  if (!b) return;
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = b->src_access;
  mb.dstAccessMask = b->dst_access;
  vk_.vkCmdPipelineBarrier(l.cb, b->src_stages, b->dst_stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
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
// batch stays bounded. Each lane has its own run.
void Recorder::record_copy(const VulkanBuffer& s, const VulkanBuffer& d,
                           const VkBufferCopy& region, Lane which) {
  const int lane = lane_count_ == 2 ? int(which) : 0;
  const Use uses[] = {{{std::uint64_t(s.handle()), region.srcOffset, region.size}, Access::read},
                      {{std::uint64_t(d.handle()), region.dstOffset, region.size}, Access::write}};
  begin_command(lane, uses);
  LaneState& l = lanes_[lane];
  CopyRun& run = l.copy_run;
  const std::optional<Barrier> barrier = l.tracker.before(Stage::transfer, uses);
  if (barrier || run.src != s.handle() || run.dst != d.handle()) {
    end_copy_run(l);
    record_barrier(l, barrier);
    run.src = s.handle();
    run.dst = d.handle();
  }
  std::vector<VkBufferCopy>& r = run.regions;
  if (!r.empty() && r.back().srcOffset + r.back().size == region.srcOffset &&
      r.back().dstOffset + r.back().size == region.dstOffset)
    r.back().size += region.size;
  else
    r.push_back(region);
  s.last_use = l.serial;
  d.last_use = l.serial;
  ++l.commands;
  l.writes = true;
  if (l.commands >= kBatchCommands) flush_lane(lane);
}

void Recorder::end_copy_run(LaneState& l) {
  CopyRun& run = l.copy_run;
  if (!run.regions.empty())
    vk_.vkCmdCopyBuffer(l.cb, run.src, run.dst, std::uint32_t(run.regions.size()),
                        run.regions.data());
  run.regions.clear();
  run.src = run.dst = VK_NULL_HANDLE;
}

void Recorder::after_command(bool writes) {
  LaneState& l = lanes_[0];
  l.writes = l.writes || writes;
  if (l.commands >= kBatchCommands) flush_lane(0);
}

void Recorder::flush() {
  // The newer open batch last: flush_lane submits the older one first.
  int newest = -1;
  for (int i = 0; i < lane_count_; ++i)
    if (lanes_[i].cb && (newest < 0 || lanes_[i].serial > lanes_[newest].serial)) newest = i;
  if (newest >= 0) flush_lane(newest);
}

void Recorder::flush_lane(int lane) {
  LaneState& l = lanes_[lane];
  if (!l.cb) return;
  // Batches are submitted in serial order (Note [Transfer queue]).
  if (lane_count_ == 2) {
    LaneState& other = lanes_[1 - lane];
    if (other.cb && other.serial < l.serial) flush_lane(1 - lane);
  }
  end_copy_run(l);
  if (l.writes) {
    // Makes this batch's writes visible to the host once its fence has signalled.
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    const bool compute = l.q.stages & mask(Stage::compute);
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | (compute ? VK_ACCESS_SHADER_WRITE_BIT : 0);
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vk_.vkCmdPipelineBarrier(l.cb, l.q.stages, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr,
                             0, nullptr);
  }
  check(vk_.vkEndCommandBuffer(l.cb), "vkEndCommandBuffer");
  Submission s;
  s.lane = lane;
  s.serial = l.serial;
  s.cb = std::exchange(l.cb, VK_NULL_HANDLE);
  s.descriptor_pools = std::move(l.pools);
  l.pools.clear();
  s.queries = std::exchange(l.queries, Queries{});
  const std::uint64_t wait = std::exchange(l.wait, 0);
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
  // With two lanes every batch signals its lane's timeline with its serial, and
  // waits on the other lane's for the last batch it conflicts with.
  VkTimelineSemaphoreSubmitInfo ts{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  const VkPipelineStageFlags wait_stage = l.q.stages;
  if (lane_count_ == 2) {
    si.pNext = &ts;
    si.signalSemaphoreCount = 1;
    si.pSignalSemaphores = &l.timeline;
    ts.signalSemaphoreValueCount = 1;
    ts.pSignalSemaphoreValues = &s.serial;
    if (wait > completed_serial_) {
      si.waitSemaphoreCount = 1;
      si.pWaitSemaphores = &lanes_[1 - lane].timeline;
      si.pWaitDstStageMask = &wait_stage;
      ts.waitSemaphoreValueCount = 1;
      ts.pWaitSemaphoreValues = &wait;
    }
  }
  VkResult r = vk_.vkQueueSubmit(l.q.queue, 1, &si, s.fence);
  if (r != VK_SUCCESS) {
    free_fences_.push_back(s.fence);
    l.free_cbs.push_back(s.cb);
    if (s.queries.pool) free_query_pools_.push_back(s.queries.pool);
    mark_lost(r, "vkQueueSubmit");
  }
  ++submitted_;
  FERRY_DEBUG("{}: submitted batch {} ({} commands{})", name_, s.serial, l.commands,
              lane == 1 ? ", transfer queue" : "");
  in_flight_.push_back(std::move(s));
}

// Note [Vulkan threading]: the lock is released around vkWaitForFences, so
// other threads keep recording while this one waits; waiters_ keeps retire()
// from resetting the fence under it.
void Recorder::wait_for(Lock& lock, std::uint64_t serial) {
  if (serial == 0 || serial <= completed_serial_) return;
  // Submit the open batches up to `serial` (flush_lane takes the older one first).
  for (int i = lane_count_ - 1; i >= 0; --i)
    if (lanes_[i].cb && lanes_[i].serial <= serial) flush_lane(i);
  while (serial > completed_serial_ && !in_flight_.empty()) {
    VkFence fence = in_flight_.front().fence;
    ++waiters_;
    lock.unlock();
    VkResult r = vk_.vkWaitForFences(device_, 1, &fence, VK_TRUE, UINT64_MAX);
    lock.lock();
    --waiters_;
    if (r != VK_SUCCESS) {
      mark_lost(r, "vkWaitForFences");
    }
    retire();
  }
}

void Recorder::throttle(Lock& lock) {
  while (in_flight_.size() > max_in_flight_) wait_for(lock, in_flight_.front().serial);
}

void Recorder::recycle_fence(VkFence f) {
  check(vk_.vkResetFences(device_, 1, &f), "vkResetFences");
  free_fences_.push_back(f);
}

void Recorder::retire() {
  const std::uint64_t was = completed_serial_;
  while (!in_flight_.empty()) {
    Submission& s = in_flight_.front();
    VkResult r = vk_.vkGetFenceStatus(device_, s.fence);
    if (r == VK_NOT_READY) break;
    if (r != VK_SUCCESS) {
      mark_lost(r, "vkGetFenceStatus");
    }
    if (waiters_ > 0)
      parked_fences_.push_back(s.fence);  // another thread may be waiting on it
    else
      recycle_fence(s.fence);
    if (s.queries.pool) read_timestamps(s.lane, s.queries);
    check(vk_.vkResetCommandBuffer(s.cb, 0), "vkResetCommandBuffer");
    lanes_[s.lane].free_cbs.push_back(s.cb);
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
  if (lane_count_ == 2 && completed_serial_ != was) order_.retire(completed_serial_);
  while (!deferred_.empty() && deferred_.begin()->first <= completed_serial_) {
    const DeferredFree& d = deferred_.begin()->second;
    memory_.allocator(d.pool).free(d.allocation);
    deferred_bytes_ -= d.allocation.size;
    deferred_.erase(deferred_.begin());
  }
}

void Recorder::synchronize(Lock& lock) {
  flush();
  wait_for(lock, last_serial());
}

void Recorder::free_after(std::uint64_t serial, int pool, const detail::Allocation& a) {
  deferred_.emplace(serial, DeferredFree{pool, a});
  deferred_bytes_ += a.size;
}

void Recorder::make_room_for_staging(Lock& lock, std::uint64_t bytes) {
  retire();
  while (!deferred_.empty() && deferred_bytes_ + bytes > kMaxStagingInFlight)
    wait_for(lock, deferred_.begin()->first);
}

VkDescriptorSet Recorder::allocate_descriptor_set(VkDescriptorSetLayout set_layout) {
  // Pools belong to the open batch and are reset when it has completed.
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::vector<VkDescriptorPool>& batch_pools = lanes_[0].pools;
    if (!batch_pools.empty()) {
      VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
      ai.descriptorPool = batch_pools.back();
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
    batch_pools.push_back(pool);
  }
  throw BackendError("vulkan: could not allocate a descriptor set from a fresh pool",
                     "VK_ERROR_OUT_OF_POOL_MEMORY");
}

}  // namespace ferry::vulkan
