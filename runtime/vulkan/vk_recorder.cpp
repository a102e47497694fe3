// runtime/vulkan/vk_recorder.cpp — the Recorder (vk_recorder.hpp): batching
// commands into command buffers, barriers, copy runs, descriptor pools,
// submission, completion and deferred staging frees (Note [Vulkan execution]
// in vk_device.hpp).
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

Recorder::Recorder(const VolkDeviceTable& vk, VkDevice device, VkQueue queue,
                   std::uint32_t queue_family, std::string name, bool serialize,
                   std::size_t max_in_flight, MemoryPools& memory)
    : vk_(vk),
      device_(device),
      queue_(queue),
      name_(std::move(name)),
      memory_(memory),
      max_in_flight_(max_in_flight),
      tracker_(serialize) {
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cpi.queueFamilyIndex = queue_family;
  check(vk_.vkCreateCommandPool(device_, &cpi, nullptr, &command_pool_), "vkCreateCommandPool");
}

Recorder::~Recorder() {
  for (VkFence f : free_fences_) vk_.vkDestroyFence(device_, f, nullptr);
  for (VkFence f : parked_fences_) vk_.vkDestroyFence(device_, f, nullptr);
  for (auto& s : in_flight_) vk_.vkDestroyFence(device_, s.fence, nullptr);
  for (VkDescriptorPool p : free_descriptor_pools_)
    vk_.vkDestroyDescriptorPool(device_, p, nullptr);
  for (VkDescriptorPool p : batch_pools_) vk_.vkDestroyDescriptorPool(device_, p, nullptr);
  for (auto& s : in_flight_)
    for (VkDescriptorPool p : s.descriptor_pools) vk_.vkDestroyDescriptorPool(device_, p, nullptr);
  for (VkQueryPool q : free_query_pools_) vk_.vkDestroyQueryPool(device_, q, nullptr);
  if (batch_queries_.pool) vk_.vkDestroyQueryPool(device_, batch_queries_.pool, nullptr);
  for (auto& s : in_flight_)
    if (s.queries.pool) vk_.vkDestroyQueryPool(device_, s.queries.pool, nullptr);
  // The command buffers go with their pool.
  vk_.vkDestroyCommandPool(device_, command_pool_, nullptr);
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

VkCommandBuffer Recorder::open_batch() {
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

void Recorder::before_command(Stage stage, std::span<const Use> uses,
                              std::initializer_list<const VulkanBuffer*> buffers) {
  before_command(stage, uses);
  for (const VulkanBuffer* vb : buffers) vb->last_use = batch_serial_;
}

void Recorder::before_command(Stage stage, std::span<const Use> uses) {
  open_batch();
  end_copy_run();  // the copies recorded so far come first
  record_barrier(tracker_.before(stage, uses));
  ++batch_commands_;
}

void Recorder::record_barrier(const std::optional<Barrier>& b) {
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
void Recorder::record_copy(const VulkanBuffer& s, const VulkanBuffer& d,
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

void Recorder::end_copy_run() {
  if (!copy_run_.regions.empty())
    vk_.vkCmdCopyBuffer(batch_cb_, copy_run_.src, copy_run_.dst,
                        std::uint32_t(copy_run_.regions.size()), copy_run_.regions.data());
  copy_run_.regions.clear();
  copy_run_.src = copy_run_.dst = VK_NULL_HANDLE;
}

void Recorder::after_command(bool writes) {
  batch_writes_ = batch_writes_ || writes;
  if (batch_commands_ >= kBatchCommands) flush();
}

void Recorder::flush() {
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
  s.queries = std::exchange(batch_queries_, Queries{});
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
    if (s.queries.pool) free_query_pools_.push_back(s.queries.pool);
    mark_lost(r, "vkQueueSubmit");
  }
  FERRY_DEBUG("{}: submitted batch {} ({} commands)", name_, s.serial, batch_commands_);
  in_flight_.push_back(std::move(s));
}

// Note [Vulkan threading]: the lock is released around vkWaitForFences, so
// other threads keep recording while this one waits; waiters_ keeps retire()
// from resetting the fence under it.
void Recorder::wait_for(Lock& lock, std::uint64_t serial) {
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
    if (s.queries.pool) read_timestamps(s.queries);
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
    memory_.allocator(d.pool).free(d.allocation);
    deferred_bytes_ -= d.allocation.size;
    deferred_.erase(deferred_.begin());
  }
}

void Recorder::synchronize(Lock& lock) {
  flush();
  wait_for(lock, batch_serial_ - 1);
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

// Note [Vulkan timing]
// While the profiler runs (Note [Device timing] in ferry/backend.hpp), each
// batch that holds a bracketed op or copy gets a timestamp query pool, reset
// by the batch's own command buffer before its first timestamp, with room for
// two timestamps per command; a batch whose pool is full is submitted first.
// Both ends of a span are written at BOTTOM_OF_PIPE: once every command
// before has finished. Commands with no barrier between them may overlap on a
// GPU; so timed, each span holds the time from the end of the work before it
// to the end of its own, the spans of one queue never overlap (a trace viewer
// needs its slices nested), and they add up to the queue's busy time. The open
// copy run is recorded first, so the timestamp is
// ordered after its copies. Results are read without waiting when the batch
// retires (its fence has signalled) and the pool goes back to a free list.
// The device's ticks are mapped onto the host's steady clock by timestamps
// submitted alone at start_timing: each is written between the host's submit
// and the end of its wait, and is taken to be written at the end, so that no
// span can appear to start before the host enqueued it; of
// kCalibrationSamples tries, the one with the shortest wait is kept (on
// lavapipe one wait took 7 ms, when its queue thread was slow to wake, and
// the mapping was that much off). VK_EXT_calibrated_timestamps would do
// better where a driver has it.
static constexpr std::uint32_t kQueriesPerBatch = 2 * kBatchCommands + 64;
static constexpr std::uint64_t kCalibrationMark = ~std::uint64_t(0);
static constexpr int kCalibrationSamples = 5;

void Recorder::write_timestamp(std::uint64_t id, bool end) {
  if (!timing_) return;
  if (batch_queries_.marks.size() == kQueriesPerBatch) flush();
  open_batch();
  end_copy_run();
  Queries& q = batch_queries_;
  if (!q.pool) {
    if (!free_query_pools_.empty()) {
      q.pool = free_query_pools_.back();
      free_query_pools_.pop_back();
    } else {
      VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qi.queryCount = kQueriesPerBatch;
      check(vk_.vkCreateQueryPool(device_, &qi, nullptr, &q.pool), "vkCreateQueryPool");
    }
    vk_.vkCmdResetQueryPool(batch_cb_, q.pool, 0, kQueriesPerBatch);
  }
  vk_.vkCmdWriteTimestamp(batch_cb_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, q.pool,
                          std::uint32_t(q.marks.size()));
  q.marks.push_back(id == kCalibrationMark ? id : id << 1 | std::uint64_t(end));
}

void Recorder::read_timestamps(Queries& q) {
  const std::size_t n = q.marks.size();
  std::vector<std::uint64_t> ticks(n);
  if (n > 0)
    check(vk_.vkGetQueryPoolResults(device_, q.pool, 0, std::uint32_t(n), n * sizeof(std::uint64_t),
                                    ticks.data(), sizeof(std::uint64_t), VK_QUERY_RESULT_64_BIT),
          "vkGetQueryPoolResults");
  for (std::size_t i = 0; i < n; ++i) stamps_.emplace_back(q.marks[i], ticks[i] & valid_mask_);
  free_query_pools_.push_back(q.pool);
  q = Queries{};
}

void Recorder::start_timing(Lock& lock, double period_ns, std::uint32_t valid_bits) {
  synchronize(lock);  // an idle queue: each calibration timestamp is written at once
  stamps_.clear();
  timing_ = true;
  period_ns_ = period_ns;
  valid_mask_ = valid_bits >= 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << valid_bits) - 1;
  auto ns = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  };
  std::int64_t best_window = -1;
  for (int sample = 0; sample < kCalibrationSamples; ++sample) {
    write_timestamp(kCalibrationMark, false);
    const auto t0 = std::chrono::steady_clock::now();
    synchronize(lock);
    const auto t1 = std::chrono::steady_clock::now();
    for (auto it = stamps_.begin(); it != stamps_.end(); ++it) {
      if (it->first != kCalibrationMark) continue;
      if (best_window < 0 || ns(t1) - ns(t0) < best_window) {
        best_window = ns(t1) - ns(t0);
        clock_offset_ns_ = ns(t1) - std::int64_t(double(it->second) * period_ns_);
      }
      stamps_.erase(it);
      break;
    }
  }
}

std::vector<DeviceTimeSpan> Recorder::stop_timing(Lock& lock) {
  synchronize(lock);
  timing_ = false;
  std::unordered_map<std::uint64_t, DeviceTimeSpan> spans;
  for (const auto& [mark, ticks] : stamps_) {
    DeviceTimeSpan& sp = spans[mark >> 1];
    sp.id = mark >> 1;
    const std::int64_t ns = std::int64_t(double(ticks) * period_ns_) + clock_offset_ns_;
    (mark & 1 ? sp.end_ns : sp.begin_ns) = ns;
  }
  stamps_.clear();
  std::vector<DeviceTimeSpan> out;
  out.reserve(spans.size());
  for (const auto& [id, sp] : spans)
    if (sp.begin_ns != 0 && sp.end_ns != 0) out.push_back(sp);
  return out;
}

VkDescriptorSet Recorder::allocate_descriptor_set(VkDescriptorSetLayout set_layout) {
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
