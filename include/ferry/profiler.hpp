// ferry/profiler.hpp — where the time and the memory go: a timeline of the
// ops, copies, host waits and allocations a program makes, on every device,
// written as a Chrome trace (chrome://tracing, ui.perfetto.dev) and summed
// as a table like torch.profiler's key_averages().
//
//   {
//     ferry::profiler::Scope prof;                 // records from here
//     { auto r = ferry::profiler::range("forward"); loss = model.forward(x); }
//     loss.backward();
//     opt.step();
//     prof.stop().save("step.json");               // or prof.profile() after it ends
//   }
//   FERRY_PROFILE=run.json ./app                     // the whole program, unchanged
//
// Note [Profiler]
// Off, the profiler costs one relaxed atomic load per op, copy and
// allocation (docs/profiling.md measures it). On, it records
//  - every op as the kernel call the dispatcher makes (runtime/dispatch.cpp):
//    its name from the op table, the device, the inputs' dtypes and shapes,
//    the host span of the call (enqueue on an asynchronous device) and the
//    device's own span of the work (Note [Device timing] in
//    ferry/backend.hpp: Vulkan timestamp queries, CUDA events; on the CPU,
//    whose kernels finish before the call returns, the host span);
//  - every copy the core and the transfer planner make: direction, bytes and
//    route (Note [Copy routes]), host and device spans;
//  - host waits (ferry::synchronize, the planner's waits);
//  - every Storage allocated and freed, with the device allocator's
//    allocated and reserved bytes after it (ferry/memory.hpp);
//  - ranges: the user's (range()), a migration's groups and chunks, the data
//    loader's batches, a process group's collectives (ferry/distributed.hpp).
// Ops that an op composes from other ops show as the kernels it runs, inside
// the ranges around them. Events recorded by any thread go into one list, in
// the order their spans end; a thread is numbered by its first event.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/config.hpp"

namespace ferry::profiler {

enum class EventKind {
  op,      // a kernel call
  copy,    // bytes moved between or within devices
  wait,    // the host waiting for a device
  memory,  // a Storage allocated (bytes > 0) or freed
  range,   // a named range of host time
};
FERRY_EXPORT const char* kind_name(EventKind kind);

// Times are steady_clock nanoseconds since the profile started.
struct Event {
  EventKind kind = EventKind::op;
  std::uint64_t id = 0;      // unique within the profile; links host and device spans
  std::string name;          // op name, "copy", "synchronize", a range's name, "alloc"/"free"
  std::string device;        // "cpu:0", "vulkan:0"; empty for a range
  std::uint32_t thread = 0;  // the host thread that issued it
  std::int64_t begin_ns = 0, end_ns = 0;  // host: the call (enqueue) or the range
  // The device's own span (Note [Device timing]), or -1 where the device's
  // clock did not report one (a memory event, a range, a host wait, or a
  // device without a clock of its own).
  std::int64_t device_begin_ns = -1, device_end_ns = -1;
  std::string inputs;  // an op's inputs, "f32[64, 784], f32[128, 784]"
  // A copy's route ("cpu:0 -> vulkan:0, upload"); the kernel an op chose
  // where its device has several (note_kernel).
  std::string detail;
  std::uint64_t bytes = 0;  // a copy's bytes; an allocation's or a free's bytes
  // memory: the device allocator's counters just after the event.
  std::uint64_t allocated = 0, reserved = 0;

  bool has_device_time() const { return device_begin_ns >= 0 && device_end_ns >= 0; }
  // The device span's length where there is one, else the host span's.
  std::int64_t duration_ns() const {
    return has_device_time() ? device_end_ns - device_begin_ns : end_ns - begin_ns;
  }
};

// One row of key_averages(): the ops (and copies) of one name on one device.
struct OpStats {
  std::string name, device;
  EventKind kind = EventKind::op;
  std::uint64_t calls = 0;
  std::int64_t device_total_ns = 0;  // Event::duration_ns summed
  std::int64_t host_total_ns = 0;    // the host spans summed (enqueue on a GPU)
  std::uint64_t bytes = 0;           // copies: bytes moved
  double device_mean_us() const { return calls ? double(device_total_ns) / 1e3 / calls : 0; }
};

class FERRY_EXPORT Profile {
 public:
  Profile() = default;
  explicit Profile(std::vector<Event> events) : events_(std::move(events)) {}

  // In the order their spans ended on the host.
  const std::vector<Event>& events() const { return events_; }
  // Per op name and device (ops and copies): calls, times, bytes; sorted by
  // device_total_ns, largest first.
  std::vector<OpStats> key_averages() const;
  // key_averages() as a table of at most `rows` rows.
  std::string table(std::size_t rows = 25) const;
  // The Chrome trace event format (JSON): a process per device and one for the
  // host with a track per thread, flow arrows from an op's host span to its
  // device span, and a memory counter per device.
  std::string chrome_trace() const;
  // Writes chrome_trace() to `path`; Error naming the path when it cannot.
  void save(const std::string& path) const;

 private:
  std::vector<Event> events_;
};

struct Options {
  bool device_timing = true;  // ask devices for their own spans (Note [Device timing])
  bool record_shapes = true;  // Event::inputs
  bool memory = true;         // EventKind::memory events
};

// Starts recording. Error when the profiler is already recording (a second
// Scope, or FERRY_PROFILE set for the whole program).
FERRY_EXPORT void start(const Options& options = {});
// Stops recording: waits for the devices that timed work and returns what was
// recorded. Error when it is not recording.
FERRY_EXPORT Profile stop();
FERRY_EXPORT bool enabled();

// Records from construction until stop() or destruction.
class FERRY_EXPORT Scope {
 public:
  explicit Scope(const Options& options = {});
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  // Stops (once) and returns the profile.
  const Profile& stop();
  const Profile& profile() const { return profile_; }  // empty until stop()

 private:
  bool running_ = true;
  Profile profile_;
};

// A named range of host time on the calling thread, from construction to
// destruction (or end()); nothing is recorded when the profiler is off.
class FERRY_EXPORT Range {
 public:
  Range() = default;  // records nothing
  explicit Range(std::string_view name);
  ~Range() { end(); }
  Range(Range&& other) noexcept;
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
  Range& operator=(Range&&) = delete;
  void end();

 private:
  std::uint64_t id_ = 0;  // 0: not recording
  std::int64_t begin_ns_ = 0;
  std::string name_;
};
[[nodiscard]] inline Range range(std::string_view name) { return Range(name); }

// For backends: names the kernel the running op chose where a device has
// several ("oneDNN", "im2col + BLAS", "gemm tile 64x64"), shown as the op's
// Event::detail. Does nothing outside an op or when the profiler is off;
// check enabled() before building a name.
FERRY_EXPORT void note_kernel(std::string_view name);

}  // namespace ferry::profiler
