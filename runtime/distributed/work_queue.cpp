// runtime/distributed/work_queue.cpp — a process group's calls in order, the Works that wait
// for them, and the blocking forms (work_queue.hpp).
#include "distributed/work_queue.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace ferry::distributed {

void end_job_after_timeout(int rank, const Described& what, std::chrono::milliseconds timeout,
                           Collectives* lib) {
  std::fprintf(stderr,
               "ferry.distributed: rank %d: %s did not complete within %.1f s (a peer may have "
               "died, hung, or called something else); ending the job\n",
               rank, what.str().c_str(), double(timeout.count()) / 1000.0);
  std::fflush(stderr);
  lib->abort_job(3);
  std::_Exit(3);  // abort_job ends the processes; should the library return, this one ends here
}

void WorkState::finish(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    error_ = std::move(error);
    done_flag_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void WorkState::wait() const {
  // A short collective completes within microseconds: looking again for a while costs less
  // than a sleep and a wake-up (Note [Process groups]).
  for (int i = 0; i < kSpins; ++i) {
    if (done_flag_.load(std::memory_order_acquire)) {
      if (error_) std::rethrow_exception(error_);  // written before the flag, never after
      return;
    }
    std::this_thread::yield();
  }
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, timeout_, [&] { return done_; }))
    end_job_after_timeout(rank_, what_, timeout_, lib_);
  if (error_) std::rethrow_exception(error_);
}

void Work::wait() const {
  if (state_) state_->wait();
}
bool Work::is_completed() const { return !state_ || state_->done(); }

CallQueue::CallQueue(std::chrono::milliseconds timeout, Collectives* lib)
    : timeout_(timeout), lib_(lib), rank_(lib->rank()), worker_([this] { run(); }) {}

CallQueue::~CallQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void CallQueue::finished_here() {
  std::unique_lock lock(mutex_);
  running_ = false;
  running_here_.reset();
  const bool more = !queue_.empty();  // issued meanwhile by other threads
  lock.unlock();
  if (more) cv_.notify_all();
}

// Runs the queued calls in order, and ends the job when a call run on its caller's thread
// outlasts the timeout (that thread is inside the library). It times such a call from when it
// first sees it, looking every `watch`, so that the caller reads no clock: the job ends between
// the timeout and two `watch`es later. A queued call's range in a profile ends before its Work
// is finished: a waiter that stops its profile as soon as wait() returns finds the range in it.
void CallQueue::run() {
  const auto watch = std::clamp<std::chrono::milliseconds>(
      timeout_ / 10, std::chrono::milliseconds(10), std::chrono::seconds(1));
  std::uint64_t seen = 0;  // the number of the call seen running here, and since when
  std::chrono::steady_clock::time_point seen_since;
  std::unique_lock lock(mutex_);
  for (;;) {
    if (!running_ && !queue_.empty()) {
      Job job = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      lock.unlock();
      std::exception_ptr error;
      try {
        job.body();
      } catch (...) {
        error = std::current_exception();
      }
      job.state->finish(std::move(error));
      lock.lock();
      running_ = false;
      continue;
    }
    if (stopping_ && queue_.empty() && !running_) return;
    if (running_here_) {
      const auto now = std::chrono::steady_clock::now();
      if (running_here_->number != seen) {
        seen = running_here_->number;
        seen_since = now;
      } else if (now - seen_since > timeout_) {
        end_job_after_timeout(rank_, *running_here_, timeout_, lib_);
      }
    }
    cv_.wait_for(lock, watch);
  }
}

namespace {

// Set by a blocking form for the one call it issues.
thread_local const ProcessGroup* t_blocking_group = nullptr;

// Issues one call of `g` from a blocking form, then waits for it.
template <typename Issue> void blocking(const ProcessGroup& g, Issue&& issue) {
  t_blocking_group = &g;
  Work w;
  try {
    w = issue();
  } catch (...) {
    t_blocking_group = nullptr;  // refused before it was queued, or run here and failed
    throw;
  }
  w.wait();
}

}  // namespace

bool take_blocking_mark(const ProcessGroup* g) {
  const bool mine = t_blocking_group == g;
  t_blocking_group = nullptr;
  return mine;
}

void ProcessGroup::allreduce(const Tensor& t, ReduceOp op) {
  blocking(*this, [&] { return allreduce_async(t, op); });
}
void ProcessGroup::broadcast(const Tensor& t, int root) {
  blocking(*this, [&] { return broadcast_async(t, root); });
}
void ProcessGroup::allgather(const Tensor& out, const Tensor& in) {
  blocking(*this, [&] { return allgather_async(out, in); });
}
void ProcessGroup::reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) {
  blocking(*this, [&] { return reduce_scatter_async(out, in, op); });
}
void ProcessGroup::all_to_all(const Tensor& out, const Tensor& in) {
  blocking(*this, [&] { return all_to_all_async(out, in); });
}
void ProcessGroup::barrier() {
  blocking(*this, [&] { return barrier_async(); });
}
void ProcessGroup::send(const Tensor& t, int dst, int tag) {
  blocking(*this, [&] { return send_async(t, dst, tag); });
}
void ProcessGroup::recv(const Tensor& t, int src, int tag) {
  blocking(*this, [&] { return recv_async(t, src, tag); });
}

}  // namespace ferry::distributed
