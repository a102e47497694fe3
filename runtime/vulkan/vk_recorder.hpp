// runtime/vulkan/vk_recorder.hpp — the recorder of one Vulkan device: it
// batches commands into command buffers with the barriers between them,
// submits the batches to the device's queue, follows their completion by
// serial, and hands staging memory back once the batch that used it is done
// (Note [Vulkan execution] in vk_device.hpp). The device holds one and records
// every dispatch and copy through it.
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
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/kit/block_allocator.hpp"
#include "vulkan/barrier_tracker.hpp"
#include "vulkan/vk_memory_pools.hpp"

namespace ferry::vulkan {

class VulkanBuffer;

// Submit once a batch holds this many commands.
inline constexpr std::uint32_t kBatchCommands = 512;
// Staging bytes whose frees may wait for their batches (Note [Vulkan execution]).
inline constexpr std::uint64_t kMaxStagingInFlight = std::uint64_t(256) << 20;

class Recorder {
 public:
  using Lock = std::unique_lock<std::mutex>;

  // `name` (e.g. "vulkan:0") is for messages; `serialize` puts a barrier
  // before every command (FERRY_VULKAN_SERIALIZE); at most `max_in_flight`
  // submitted batches may be unfinished. Creates the command pool.
  Recorder(const VolkDeviceTable& vk, VkDevice device, VkQueue queue, std::uint32_t queue_family,
           std::string name, bool serialize, std::size_t max_in_flight, MemoryPools& memory);
  // The device must be idle (vkDeviceWaitIdle) first.
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // ---- recording into the open batch ----
  // The open batch's command buffer, begun if there was none.
  VkCommandBuffer open_batch();
  // Before a command with these buffer uses: records the barrier the barrier
  // tracker asks for (Note [Barrier placement]) and counts the command; the
  // open batch's command buffer is batch() afterwards.
  void before_command(Stage stage, std::span<const Use> uses);
  // The same, marking `buffers` as used by the open batch.
  void before_command(Stage stage, std::span<const Use> uses,
                      std::initializer_list<const VulkanBuffer*> buffers);
  // After the command: submits when the batch is large.
  void after_command(bool writes);
  // Records a copy of `region` from s to d, joined to the open copy run when
  // it can be (Note [Copy runs] in vk_recorder.cpp), and marks both as used.
  void record_copy(const VulkanBuffer& s, const VulkanBuffer& d, const VkBufferCopy& region);
  // A descriptor set from the open batch's pools (reset when it completes).
  VkDescriptorSet allocate_descriptor_set(VkDescriptorSetLayout layout);
  VkCommandBuffer batch() const { return batch_cb_; }

  // ---- submission and completion ----
  void flush();  // submits the open batch, if any
  // Waits until `serial` has completed, then retires; releases `lock` while it waits.
  void wait_for(Lock& lock, std::uint64_t serial);
  // Waits while more than max_in_flight() batches are in flight.
  void throttle(Lock& lock);
  // Submits the open batch and waits for every batch.
  void synchronize(Lock& lock);
  // Retires the batches whose fences have signalled, without waiting, and
  // frees the staging memory they held.
  void retire();
  // The serial of the open (or next) batch: what a command recorded now gets.
  std::uint64_t batch_serial() const { return batch_serial_; }
  // Every batch up to this serial has finished.
  std::uint64_t completed_serial() const { return completed_serial_; }
  // The serial an event recorded now waits for: the open batch, else the last submitted.
  std::uint64_t last_serial() const { return batch_cb_ ? batch_serial_ : batch_serial_ - 1; }

  // ---- staging frees ----
  // Frees `a` of memory pool `pool` once batch `serial` has completed.
  void free_after(std::uint64_t serial, int pool, const detail::Allocation& a);
  // Waits for the oldest batches holding deferred staging until `bytes` more fit
  // under kMaxStagingInFlight.
  void make_room_for_staging(Lock& lock, std::uint64_t bytes);

  // ---- timestamps for the profiler (Note [Vulkan timing] in vk_recorder.cpp) ----
  // Starts writing timestamps: `period_ns` nanoseconds per tick, of which the
  // low `valid_bits` bits count. Maps the device's clock onto the host's by
  // submitting one timestamp and waiting for it.
  void start_timing(Lock& lock, double period_ns, std::uint32_t valid_bits);
  bool timing() const { return timing_; }
  // Writes the device's clock into the open batch: the start of span `id`, or
  // its end when `end`.
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
  const BarrierTracker& tracker() const { return tracker_; }

 private:
  // A batch's timestamp queries: one pool, and what each query marks (a
  // span's id shifted left by one, the low bit set for its end).
  struct Queries {
    VkQueryPool pool = VK_NULL_HANDLE;
    std::vector<std::uint64_t> marks;
  };
  struct Submission {
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

  void end_copy_run();  // records the open copy run, if any
  void record_barrier(const std::optional<Barrier>& b);
  void recycle_fence(VkFence f);
  void mark_lost(VkResult r, const char* where);
  void read_timestamps(Queries& q);  // of a completed batch; recycles its pool

  const VolkDeviceTable& vk_;
  VkDevice device_;
  VkQueue queue_;
  std::string name_;
  MemoryPools& memory_;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  std::size_t max_in_flight_;
  bool lost_ = false;
  std::string lost_reason_;

  BarrierTracker tracker_;
  VkCommandBuffer batch_cb_ = VK_NULL_HANDLE;
  CopyRun copy_run_;
  std::uint32_t batch_commands_ = 0;
  bool batch_writes_ = false;
  std::vector<VkDescriptorPool> batch_pools_;
  std::uint64_t batch_serial_ = 1;      // serial of the open (or next) batch
  std::uint64_t completed_serial_ = 0;  // every batch up to this one has finished
  std::deque<Submission> in_flight_;
  std::uint32_t waiters_ = 0;           // threads in vkWaitForFences (Note [Vulkan threading])
  std::vector<VkFence> parked_fences_;  // signalled, to be reset once waiters_ is 0
  std::vector<VkFence> free_fences_;
  std::vector<VkCommandBuffer> free_cbs_;
  std::vector<VkDescriptorPool> free_descriptor_pools_;
  std::multimap<std::uint64_t, DeferredFree> deferred_;  // staging ranges, by batch serial
  std::uint64_t deferred_bytes_ = 0;

  bool timing_ = false;
  double period_ns_ = 1;
  std::uint64_t valid_mask_ = ~std::uint64_t(0);
  std::int64_t clock_offset_ns_ = 0;  // host ns = ticks * period_ns_ + this
  Queries batch_queries_;             // the open batch's
  std::vector<VkQueryPool> free_query_pools_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>>
      stamps_;  // (mark, ticks) of completed batches
};

}  // namespace ferry::vulkan
