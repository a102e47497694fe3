// cuda/cuda_deferred.hpp — memory whose reuse must wait for the GPU.
//
// Note [Stream-ordered reuse]
// A buffer freed on the host may still be in use by work the GPU has not run
// yet. For work on the device's own op stream nothing needs waiting: the
// caching allocator hands the range to the next tensor, whose work is enqueued
// on the same in-order stream after the old work (PyTorch's rule, and why its
// allocator is "stream-aware"). Two cases do need waiting, and both go
// through DeferredReleases:
// - a buffer also used on *another* stream (the destination device's stream
//   of a peer copy reads it): on free, an event is recorded on each of those
//   streams and the range returns to the allocator once all have completed;
// - pinned host staging memory: the host writes it again only after the copy
//   that reads it has completed, so each staging range is released by the
//   event recorded after its copy.
// The bookkeeping has no CUDA in it (a Fence is anything that can say "done"),
// so tests/test_cuda_host.cpp checks it with fake fences on any machine.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

namespace ferry::cuda {

// A completion marker: a cudaEvent_t in the backend, a flag in tests.
class Fence {
 public:
  virtual ~Fence() = default;
  virtual bool done() = 0;  // non-blocking
  virtual void wait() = 0;  // blocks until done
};

class DeferredReleases {
 public:
  DeferredReleases() = default;
  DeferredReleases(const DeferredReleases&) = delete;
  DeferredReleases& operator=(const DeferredReleases&) = delete;
  ~DeferredReleases();  // waits for and runs every pending release

  // Runs `release` once every fence in `fences` is done: at once when the list
  // is empty, else at a later collect(), wait_oldest() or drain(). `bytes` is
  // what the release frees (for the in-flight bound of pinned staging).
  // `release` must not throw.
  void defer(std::vector<std::shared_ptr<Fence>> fences, std::function<void()> release,
             std::uint64_t bytes = 0);
  // Runs, oldest first, every pending release whose fences are done. Later
  // entries may complete before earlier ones (other streams), so the scan goes
  // over all of them. Returns how many ran.
  std::size_t collect();
  // Waits for the oldest pending entry and runs its release; false when none.
  bool wait_oldest();
  // Waits for and runs every pending release.
  void drain();

  std::size_t pending() const { return entries_.size(); }
  std::uint64_t pending_bytes() const { return pending_bytes_; }

 private:
  struct Entry {
    std::vector<std::shared_ptr<Fence>> fences;
    std::function<void()> release;
    std::uint64_t bytes;
  };
  static bool all_done(Entry& e);
  std::deque<Entry> entries_;
  std::uint64_t pending_bytes_ = 0;
};

}  // namespace ferry::cuda
