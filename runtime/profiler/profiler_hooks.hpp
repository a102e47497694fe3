// runtime/profiler/profiler_hooks.hpp — what the core calls to tell the
// profiler (ferry/profiler.hpp) about its work. Every hook sits behind on(),
// one relaxed atomic load: the whole cost of the profiler when it is off.
//
//   std::optional<profiler::detail::Work> w;
//   if (profiler::detail::on()) w.emplace(EventKind::copy, device, "copy");
//   ... enqueue the work on `device` ...
//   // ~Work records the host span and asks the device for its own
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ferry/backend.hpp"
#include "ferry/profiler.hpp"

namespace ferry::profiler::detail {

extern std::atomic<bool> g_recording;
// FERRY_PROFILER_HOOKS=OFF (CMake) compiles every hook out, to measure what
// the hooks cost when off (benchmarks/bench_profiler.cpp).
#ifdef FERRY_NO_PROFILER_HOOKS
constexpr bool on() { return false; }
#else
inline bool on() { return g_recording.load(std::memory_order_relaxed); }
#endif

// steady_clock nanoseconds.
std::int64_t now_ns();

// Work enqueued on one device: an op, a copy or a host wait, from
// construction to destruction. Construct it only when on(). For an op or a
// copy the device brackets the work with its clock (Note [Device timing]);
// `device_timed` false leaves the device span unknown (a copy that waits for
// the device inside the call would time the host's turnaround too).
class Work {
 public:
  Work(EventKind kind, DeviceImpl& device, std::string_view name, bool device_timed = true);
  ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  bool record_shapes() const { return record_shapes_; }
  void set_inputs(std::string s) { event_.inputs = std::move(s); }
  void set_detail(std::string_view s) { event_.detail = s; }
  void set_bytes(std::uint64_t n) { event_.bytes = n; }
  // Records nothing after all (a peer copy the device refused).
  void drop() { dropped_ = true; }
  // The innermost Work of the calling thread (note_kernel's target), or nullptr.
  static Work* current();

 private:
  Event event_;
  Work* outer_;  // the thread's current Work before this one
  DeviceImpl* device_;
  std::uint64_t generation_;
  bool marked_ = false;      // the device was asked to bracket the work
  bool host_clock_ = false;  // the device has no clock of its own: the host span is its span
  bool record_shapes_ = true;
  bool dropped_ = false;
};

// A copy's event name, by direction: "copy HtoD", "copy DtoH", "copy DtoD"
// (on one device or between two) or "copy HtoH"; its route goes in the
// event's detail.
const char* copy_name(const DeviceImpl& src, const DeviceImpl& dst);

// A Work when the profiler records, nothing otherwise: for a scope that
// knows its bytes and route up front.
class MaybeWork {
 public:
  MaybeWork(EventKind kind, DeviceImpl& device, std::string_view name, std::uint64_t bytes = 0,
            std::string_view detail = {}, bool device_timed = true) {
    if (on()) [[unlikely]] {
      work_.emplace(kind, device, name, device_timed);
      work_->set_bytes(bytes);
      work_->set_detail(detail);
    }
  }

 private:
  std::optional<Work> work_;
};

// A Storage of `bytes` allocated (alloc) or freed on `device`; reads the
// device's allocator counters. Call when on().
void record_memory(DeviceImpl& device, bool alloc, std::uint64_t bytes);

}  // namespace ferry::profiler::detail
