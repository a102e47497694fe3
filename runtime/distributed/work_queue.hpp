// runtime/distributed/work_queue.hpp — the order a process group's calls run in, and the
// timeout that ends a job a peer left hanging (Note [Process groups] in ferry/distributed.hpp).
//
// A group runs one call at a time, in the order its ranks issued them, on its own thread; the
// async forms return a Work that waits for theirs. A blocking form's call runs on its caller's
// thread where nothing is queued or running: it then needs no WorkState, no std::function and
// no hand-off, and its error is thrown where the blocking form would have rethrown it. The
// group's thread watches such a call all the same, so no rank waits forever either way.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "distributed/call.hpp"
#include "distributed/collectives.hpp"
#include "ferry/distributed.hpp"

namespace ferry::distributed {

// Prints what `rank` was running and ends the whole job (through the library, so that every
// rank ends): no rank may wait forever for a peer that died or hangs in another call.
[[noreturn]] void end_job_after_timeout(int rank, const Described& what,
                                        std::chrono::milliseconds timeout, Collectives* lib);

// A queued call's completion, which its Work waits for (at most the group's timeout).
class WorkState {
 public:
  WorkState(Described what, std::chrono::milliseconds timeout, int rank, Collectives* lib)
      : what_(what), timeout_(timeout), rank_(rank), lib_(lib) {}

  const Described& what() const { return what_; }
  void finish(std::exception_ptr error);
  bool done() const { return done_flag_.load(std::memory_order_acquire); }
  void wait() const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  std::atomic<bool> done_flag_{false};  // done_, read without the mutex while spinning
  static constexpr int kSpins = 2000;
  std::exception_ptr error_;
  Described what_;
  std::chrono::milliseconds timeout_;
  int rank_;
  Collectives* lib_;
};

// One group's calls, run one at a time in the order issued.
class CallQueue {
 public:
  // `lib` (the group's module, joined: rank() is known) outlives the queue.
  CallQueue(std::chrono::milliseconds timeout, Collectives* lib);
  ~CallQueue();  // runs what is queued, then ends the thread
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;

  // Runs `body` once every call issued before it has run: here, at once, when `here_if_idle`
  // (a blocking form's call) and nothing is queued or running, then returning a completed
  // Work (body's exception propagates); else on the queue's thread, returning the Work that
  // waits for it (and rethrows body's exception).
  template <typename Body> Work enqueue(Described what, Body&& body, bool here_if_idle) {
    std::unique_lock lock(mutex_);
    what.number = ++issued_;
    if (here_if_idle && queue_.empty() && !running_) {
      running_ = true;  // watched by the queue's thread as running_here_
      running_here_ = what;
      lock.unlock();
      struct Done {  // on return or throw
        CallQueue& q;
        ~Done() { q.finished_here(); }
      } done{*this};
      body();
      return Work();
    }
    auto state = std::make_shared<WorkState>(what, timeout_, rank_, lib_);
    queue_.push_back(Job{state, std::function<void()>(std::forward<Body>(body))});
    lock.unlock();
    cv_.notify_all();
    return Work(state);
  }

 private:
  struct Job {
    std::shared_ptr<WorkState> state;
    std::function<void()> body;
  };
  void finished_here();
  void run();  // the queue's thread

  std::chrono::milliseconds timeout_;
  Collectives* lib_;
  int rank_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool running_ = false;                   // a call is in the library (one at a time)
  std::optional<Described> running_here_;  // the call a blocking caller runs itself
  bool stopping_ = false;
  std::uint64_t issued_ = 0;
  std::thread worker_;  // last: starts once the rest is built
};

// Whether the call being issued on this thread comes from a blocking form of `g` (which may
// run it here: CallQueue::enqueue's `here_if_idle`). Reading it clears it: the blocking form
// issues one call.
bool take_blocking_mark(const ProcessGroup* g);

}  // namespace ferry::distributed
