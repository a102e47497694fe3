// runtime/vulkan/queue_order.hpp — which of the other queue's batches a command must wait for,
// when a Vulkan device records on two queues (Note [Transfer queue] in vk_recorder.hpp).
//
// Note [Cross-queue order]
// Within one queue the barrier tracker orders commands (Note [Barrier placement]). Between two
// queues nothing is ordered but what a semaphore orders: a batch of queue A that reads bytes a
// batch of queue B wrote (or writes bytes B read or wrote) must wait on B's timeline semaphore
// for that batch's value. This class finds those values. Each queue's batches carry serials
// from one counter shared by both queues, increasing on each queue; for each queue it keeps,
// per byte range of each buffer, the serial of the last batch that read it and the last that
// wrote it. A command's need() is the highest serial of the *other* queue that touched the
// same bytes in a conflicting way (write after write, read after write, write after read), and
// record() notes its own uses. A semaphore wait also makes the other queue's writes available
// and visible, so no barrier is needed on top of it.
//
// The ranges are byte ranges of blocks (VkBuffers), not of tensors, so memory freed on one
// queue and reused at once on the other (stream-ordered reuse, Note [Vulkan execution]) is
// ordered like any other overlap. Batches known complete need no wait: need() ignores serials
// up to `completed`, and retire() forgets them, so the state holds only unfinished work.
// No Vulkan headers: tested on its own (tests/test_vulkan_queue_order.cpp). Not thread-safe;
// one recorder owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>

#include "vulkan/barrier_tracker.hpp"

namespace ferry::vulkan {

class QueueOrder {
 public:
  static constexpr int kQueues = 2;

  // The highest serial of the queue other than `queue` whose batch used bytes of `uses` in a
  // way that conflicts with them; 0 when there is none above `completed`. `queue` is 0 or 1.
  std::uint64_t need(int queue, std::span<const Use> uses, std::uint64_t completed) const;
  // Notes that batch `serial` of `queue` makes `uses`. Serials of one queue never decrease.
  void record(int queue, std::uint64_t serial, std::span<const Use> uses);
  // Forgets every use by a batch up to `completed`.
  void retire(std::uint64_t completed);
  // Intervals held, to check the state stays small.
  std::size_t tracked_intervals() const;

 private:
  // Disjoint half-open intervals [begin, end) keyed by begin, each with its last serials.
  struct Span {
    std::uint64_t end = 0;
    std::uint64_t read = 0, write = 0;
  };
  using Spans = std::map<std::uint64_t, Span>;
  using PerBuffer = std::unordered_map<std::uint64_t, Spans>;
  // Splits the span holding `at`, if any, so that a span starts at `at`.
  static void split(Spans& spans, std::uint64_t at);

  PerBuffer queues_[kQueues];
};

}  // namespace ferry::vulkan
