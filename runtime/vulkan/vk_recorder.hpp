// runtime/vulkan/vk_recorder.hpp — the recorder of one Vulkan device: it
// batches commands into command buffers with the barriers between them,
// submits the batches to the device's queue (and its transfer queue, Note
// [Transfer queue]), follows their completion by serial, and hands staging
// memory back once the batch that used it is done (Note [Vulkan execution] in
// vk_device.hpp). The device holds one and records every dispatch and copy
// through it.
//
// Threads (Note [Vulkan threading]): the recorder has no lock of its own; every
// member runs with the device's mutex held, and the ones taking a Lock& release
// it while the host waits for the GPU.
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES  // volk loads every entry point at run time
#endif
#include <volk.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/kit/block_allocator.hpp"
#include "vulkan/barrier_tracker.hpp"
#include "vulkan/queue_order.hpp"
#include "vulkan/vk_memory_pools.hpp"

namespace ferry::vulkan {

class VulkanBuffer;

// Submit once a batch holds this many commands.
inline constexpr std::uint32_t kBatchCommands = 512;
// Staging bytes whose frees may wait for their batches (Note [Vulkan execution]).
inline constexpr std::uint64_t kMaxStagingInFlight = std::uint64_t(256) << 20;

// Note [Transfer queue]
// A discrete GPU has copy engines besides its compute units, reached through a
// queue family that only transfers. Copies between host memory and the device
// (staging ranges, registered host memory) recorded on such a queue run while
// the compute queue keeps computing: a migration or the data loader's next
// batch uploads under the current step's kernels. With a transfer queue the
// recorder keeps two lanes, each with its own command buffers, barrier tracker
// (a transfer-only family's barriers name only transfer stages) and timeline
// semaphore, signalled with each batch's serial. The serials come from one
// counter, and a lane's batch is submitted only after every open batch of the
// other lane with a lower serial, so batches are submitted, and complete, in
// serial order: completed_serial() and every per-serial rule of Note [Vulkan
// execution] hold unchanged across the lanes. Between the lanes, QueueOrder
// (Note [Cross-queue order]) finds the other lane's last conflicting batch; the
// command's batch waits on that lane's semaphore for it (submitting it first
// when it is still open), which orders the work and makes its writes visible.
// Blocks are created with concurrent sharing between the two families, so no
// ownership transfers are needed. FERRY_VULKAN_TRANSFER_QUEUE=force gives a
// device without a transfer-only family a second lane on its compute family (a
// second queue, or the same queue), which is how lavapipe tests this path.
enum class Lane : int { compute = 0, transfer = 1 };

// A queue a lane records for.
struct LaneQueue {
  VkQueue queue = VK_NULL_HANDLE;
  std::uint32_t family = 0;
  StageMask stages = kDeviceStages;  // the stages its commands run in
  std::uint32_t timestamp_bits = 0;  // its family's timestampValidBits; 0: untimed
  bool host_query_reset = false;     // reset its query pools on the host (no compute stage)
};

class Recorder {
 public:
  using Lock = std::unique_lock<std::mutex>;

  // `name` (e.g. "vulkan:0") is for messages; `serialize` puts a barrier
  // before every command (FERRY_VULKAN_SERIALIZE); at most `max_in_flight`
  // submitted batches may be unfinished; `transfer`, when set, is the
  // transfer lane's queue (Note [Transfer queue]). Creates the command pools.
  Recorder(const VolkDeviceTable& vk, VkDevice device, const LaneQueue& compute,
           const std::optional<LaneQueue>& transfer, std::string name, bool serialize,
           std::size_t max_in_flight, MemoryPools& memory);
  // The device must be idle (vkDeviceWaitIdle) first.
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // ---- recording into the compute lane's open batch ----
  // Before a dispatch with these buffer uses: orders it after the transfer
  // lane's conflicting work, records the barrier the barrier tracker asks for
  // (Note [Barrier placement]) and counts the command; the open batch's
  // command buffer is batch() afterwards.
  void before_command(Stage stage, std::span<const Use> uses);
  // The same, marking `buffers` as used by the open batch.
  void before_command(Stage stage, std::span<const Use> uses,
                      std::initializer_list<const VulkanBuffer*> buffers);
  // After the command: submits when the batch is large.
  void after_command(bool writes);
  // A descriptor set from the open batch's pools (reset when it completes).
  VkDescriptorSet allocate_descriptor_set(VkDescriptorSetLayout layout);
  VkCommandBuffer batch() const { return lanes_[0].cb; }
  // The serial of the compute lane's open batch: what a dispatch recorded now gets.
  std::uint64_t batch_serial() const { return lanes_[0].serial; }

  // Records a copy of `region` from s to d on `lane` (the compute lane when
  // there is no transfer lane), joined to the lane's open copy run when it can
  // be (Note [Copy runs] in vk_recorder.cpp), and marks both as used.
  void record_copy(const VulkanBuffer& s, const VulkanBuffer& d, const VkBufferCopy& region,
                   Lane lane = Lane::compute);
  bool has_transfer_lane() const { return lane_count_ == 2; }

  // ---- submission and completion ----
  void flush();  // submits every open batch
  // Waits until `serial` has completed, then retires; releases `lock` while it waits.
  void wait_for(Lock& lock, std::uint64_t serial);
  // Waits while more than max_in_flight() batches are in flight.
  void throttle(Lock& lock);
  // Submits the open batches and waits for every batch.
  void synchronize(Lock& lock);
  // Retires the batches whose fences have signalled, without waiting, and
  // frees the staging memory they held.
  void retire();
  // Every batch up to this serial has finished.
  std::uint64_t completed_serial() const { return completed_serial_; }
  // The serial an event recorded now waits for: the newest batch, open or submitted.
  std::uint64_t last_serial() const { return next_serial_ - 1; }
  // Batches submitted so far, on both lanes.
  std::uint64_t submitted() const { return submitted_; }

  // ---- staging frees ----
  // Frees `a` of memory pool `pool` once batch `serial` has completed.
  void free_after(std::uint64_t serial, int pool, const detail::Allocation& a);
  // Waits for the oldest batches holding deferred staging until `bytes` more fit
  // under kMaxStagingInFlight.
  void make_room_for_staging(Lock& lock, std::uint64_t bytes);

  // ---- timestamps for the profiler (Note [Vulkan timing] in vk_recorder_timing.cpp) ----
  // Starts writing timestamps, `period_ns` nanoseconds per tick. Maps the
  // device's clock onto the host's by sampling both at once where `calibrated`
  // (VK_EXT_calibrated_timestamps enabled), else by submitting one timestamp
  // and waiting for it. Does nothing when the compute lane's family has no
  // timestamps.
  void start_timing(Lock& lock, double period_ns, bool calibrated);
  bool timing() const { return timing_; }
  // How the last start_timing mapped the clocks, and how closely.
  const std::string& calibration_note() const { return calibration_note_; }
  // The start (`end` false) or end of span `id`: a start is written before
  // the next command, in that command's lane; an end in the lane of its start.
  void write_timestamp(std::uint64_t id, bool end);
  // Waits for every batch and returns the spans timed since start_timing.
  std::vector<DeviceTimeSpan> stop_timing(Lock& lock);

  // ---- state ----
  // Set once a submission or a wait reported VK_ERROR_DEVICE_LOST.
  bool lost() const { return lost_; }
  // BackendError once the device is lost.
  void check_alive() const;
  const std::string& lost_reason() const { return lost_reason_; }
  std::size_t max_in_flight() const { return max_in_flight_; }
  std::size_t in_flight() const { return in_flight_.size(); }
  // Barriers recorded on both lanes.
  std::uint64_t barriers_recorded() const;
  // Semaphore waits between the lanes (Note [Transfer queue]).
  std::uint64_t cross_lane_waits() const { return cross_lane_waits_; }

 private:
  // A batch's timestamp queries: one pool, and what each query marks (a
  // span's id shifted left by one, the low bit set for its end).
  struct Queries {
    VkQueryPool pool = VK_NULL_HANDLE;
    std::vector<std::uint64_t> marks;
  };
  struct Submission {
    int lane = 0;
    Queries queries;
    std::uint64_t serial = 0;
    VkFence fence = VK_NULL_HANDLE;
    VkCommandBuffer cb = VK_NULL_HANDLE;
    std::vector<VkDescriptorPool> descriptor_pools;
  };
  struct DeferredFree {
    int pool;
    detail::Allocation allocation;
  };
  // Copies not yet recorded: one vkCmdCopyBuffer from src to dst (Note [Copy runs]).
  struct CopyRun {
    VkBuffer src = VK_NULL_HANDLE, dst = VK_NULL_HANDLE;
    std::vector<VkBufferCopy> regions;
  };
  // One queue's recording state (Note [Transfer queue]).
  struct LaneState {
    LaneQueue q;
    VkCommandPool command_pool = VK_NULL_HANDLE;
    VkSemaphore timeline = VK_NULL_HANDLE;  // with two lanes: signalled with each batch's serial
    BarrierTracker tracker;
    VkCommandBuffer cb = VK_NULL_HANDLE;  // the open batch
    std::uint64_t serial = 0;             // the open batch's
    std::uint64_t wait = 0;  // the other lane's timeline value the open batch waits for
    CopyRun copy_run;
    std::uint32_t commands = 0;
    bool writes = false;
    std::vector<VkDescriptorPool> pools;
    Queries queries;
    std::uint64_t valid_mask = ~std::uint64_t(0);  // of its timestamps
    std::vector<VkCommandBuffer> free_cbs;
  };

  // Opens the lane's batch, if none is open; it gets the next serial.
  VkCommandBuffer open_batch(int lane);
  // Before a command on `lane` with `uses`: orders it after the other lane
  // (Note [Transfer queue]), writes pending span starts, opens the batch.
  void begin_command(int lane, std::span<const Use> uses);
  void flush_lane(int lane);  // submits its open batch, after the other's older one
  void end_copy_run(LaneState& l);  // records the lane's open copy run, if any
  void record_barrier(LaneState& l, const std::optional<Barrier>& b);
  void recycle_fence(VkFence f);
  void mark_lost(VkResult r, const char* where);
  // Timing (vk_recorder_timing.cpp).
  void write_stamp(int lane, std::uint64_t mark);
  void write_pending_starts(int lane);
  void read_timestamps(int lane, Queries& q);  // of a completed batch; recycles its pool

  const VolkDeviceTable& vk_;
  VkDevice device_;
  std::string name_;
  MemoryPools& memory_;
  std::size_t max_in_flight_;
  bool lost_ = false;
  std::string lost_reason_;

  LaneState lanes_[2];
  int lane_count_ = 1;
  QueueOrder order_;  // with two lanes (Note [Cross-queue order])
  std::uint64_t cross_lane_waits_ = 0;
  std::uint64_t next_serial_ = 1;       // the next batch opened gets it
  std::uint64_t completed_serial_ = 0;  // every batch up to this one has finished
  std::uint64_t submitted_ = 0;
  std::deque<Submission> in_flight_;    // in serial order, both lanes
  std::uint32_t waiters_ = 0;           // threads in vkWaitForFences (Note [Vulkan threading])
  std::vector<VkFence> parked_fences_;  // signalled, to be reset once waiters_ is 0
  std::vector<VkFence> free_fences_;
  std::vector<VkDescriptorPool> free_descriptor_pools_;
  std::multimap<std::uint64_t, DeferredFree> deferred_;  // staging ranges, by batch serial
  std::uint64_t deferred_bytes_ = 0;

  bool timing_ = false;
  double period_ns_ = 1;
  std::int64_t clock_offset_ns_ = 0;  // host ns = ticks * period_ns_ + this
  std::string calibration_note_ = "not started";
  std::vector<VkQueryPool> free_query_pools_;
  std::vector<std::uint64_t> pending_starts_;           // span starts before their command
  std::unordered_map<std::uint64_t, int> span_lane_;    // started spans: the lane of the start
  std::vector<std::pair<std::uint64_t, std::uint64_t>>
      stamps_;  // (mark, ticks) of completed batches
};

}  // namespace ferry::vulkan
