// cuda/cuda_deferred.cpp — see Note [Stream-ordered reuse] in cuda_deferred.hpp.
#include "cuda_deferred.hpp"

#include <utility>

namespace ferry::cuda {

DeferredReleases::~DeferredReleases() {
  try {
    drain();
  } catch (...) {
    // A lost device cannot say when its work ended; leaking the ranges is the
    // only safe choice, and the process is going away with the device anyway.
  }
}

bool DeferredReleases::all_done(Entry& e) {
  for (auto& f : e.fences)
    if (!f->done()) return false;
  return true;
}

void DeferredReleases::defer(std::vector<std::shared_ptr<Fence>> fences,
                             std::function<void()> release, std::uint64_t bytes) {
  if (fences.empty()) {
    release();
    return;
  }
  entries_.push_back(Entry{std::move(fences), std::move(release), bytes});
  pending_bytes_ += bytes;
}

std::size_t DeferredReleases::collect() {
  std::size_t ran = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (all_done(*it)) {
      Entry e = std::move(*it);
      it = entries_.erase(it);
      pending_bytes_ -= e.bytes;
      e.release();
      ++ran;
    } else {
      ++it;
    }
  }
  return ran;
}

bool DeferredReleases::wait_oldest() {
  if (entries_.empty()) return false;
  for (auto& f : entries_.front().fences) f->wait();
  Entry e = std::move(entries_.front());
  entries_.pop_front();
  pending_bytes_ -= e.bytes;
  e.release();
  return true;
}

void DeferredReleases::drain() {
  while (wait_oldest()) {
  }
}

}  // namespace ferry::cuda
