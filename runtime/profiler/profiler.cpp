// runtime/profiler/profiler.cpp — the recording session of ferry::profiler
// (Note [Profiler] in ferry/profiler.hpp): start and stop, the hooks the core
// calls (profiler_hooks.hpp), ranges, and FERRY_PROFILE. The outputs are in
// trace.cpp.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "ferry/error.hpp"
#include "profiler/profiler_hooks.hpp"

namespace ferry::profiler {

const char* kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::op:
      return "op";
    case EventKind::copy:
      return "copy";
    case EventKind::wait:
      return "wait";
    case EventKind::memory:
      return "memory";
    case EventKind::range:
      return "range";
  }
  return "?";
}

namespace detail {

std::atomic<bool> g_recording{false};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

// Note [Profiler session]
// One session at a time, under one mutex: events from every thread go into
// one list as their spans end (an op costs a few hundred nanoseconds of
// recording, far below the kernel it records). `generation` counts sessions:
// a Work begun in one session and ending after stop() (another thread's op
// in flight) is dropped rather than added to the next session. A device is
// asked to start timing when the session first meets it, and stop() asks
// each such device for its spans after recording has ended, so that no
// bracket is left open.
struct Session {
  std::mutex mutex;
  Options options;
  std::uint64_t generation = 0;
  std::int64_t origin_ns = 0;
  std::uint64_t next_id = 1;
  std::vector<Event> events;
  std::unordered_map<DeviceImpl*, bool> devices;  // met this session: whether it times itself
};

Session& session() {
  static Session* s = new Session();  // never destroyed: FERRY_PROFILE stops at exit
  return *s;
}

std::uint32_t thread_number() {
  static std::atomic<std::uint32_t> next{0};
  thread_local const std::uint32_t n = next.fetch_add(1);
  return n;
}

// Whether `device` times its own work this session; asks it on first meeting.
// With the session's mutex held.
bool device_times_itself(Session& s, DeviceImpl& device) {
  auto it = s.devices.find(&device);
  if (it != s.devices.end()) return it->second;
  const bool timed = s.options.device_timing && device.start_timing();
  s.devices.emplace(&device, timed);
  return timed;
}

}  // namespace

namespace {
thread_local Work* t_current_work = nullptr;
}

Work* Work::current() { return t_current_work; }

Work::Work(EventKind kind, DeviceImpl& device, std::string_view name, bool device_timed)
    : outer_(std::exchange(t_current_work, this)), device_(&device) {
  Session& s = session();
  event_.kind = kind;
  event_.name = name;
  event_.device = device.device().str();
  event_.thread = thread_number();
  {
    std::lock_guard lock(s.mutex);
    generation_ = s.generation;
    record_shapes_ = s.options.record_shapes;
    event_.id = s.next_id++;
    // Decided once, here: whether the device's clock or the host's times the
    // work (a wait has neither; a copy that waits inside the call keeps only
    // its host span).
    if (kind != EventKind::wait) {
      const bool own_clock = device_times_itself(s, device);
      marked_ = own_clock && device_timed;
      host_clock_ = !own_clock;
    }
  }
  // The host span starts before the device's clock is written, so that the
  // device span cannot start before it (CUDA runs an event on an idle stream
  // at once).
  event_.begin_ns = now_ns();
  if (marked_) device.mark_time(event_.id, false);
}

Work::~Work() {
  t_current_work = outer_;
  if (marked_) {
    try {
      device_->mark_time(event_.id, true);
    } catch (...) {
      // a lost device: its error surfaces from the work itself
    }
  }
  event_.end_ns = now_ns();
  if (dropped_) return;
  Session& s = session();
  std::lock_guard lock(s.mutex);
  if (!on() || s.generation != generation_) return;
  // A device without a clock of its own has finished the work when the call
  // returns (Note [Device timing]): the host span is the device's.
  if (host_clock_) {
    event_.device_begin_ns = event_.begin_ns;
    event_.device_end_ns = event_.end_ns;
  }
  s.events.push_back(std::move(event_));
}

const char* copy_name(const DeviceImpl& src, const DeviceImpl& dst) {
  const bool from_host = src.device().is_cpu(), to_host = dst.device().is_cpu();
  if (from_host) return to_host ? "copy HtoH" : "copy HtoD";
  return to_host ? "copy DtoH" : "copy DtoD";
}

void record_memory(DeviceImpl& device, bool alloc, std::uint64_t bytes) {
  Session& s = session();
  {
    std::lock_guard lock(s.mutex);
    if (!s.options.memory) return;
  }
  Event e;
  e.kind = EventKind::memory;
  e.name = alloc ? "alloc" : "free";
  e.device = device.device().str();
  e.thread = thread_number();
  e.bytes = bytes;
  const MemoryStats m = device.memory_stats();
  e.allocated = m.allocated;
  e.reserved = m.reserved;
  e.begin_ns = e.end_ns = now_ns();
  std::lock_guard lock(s.mutex);
  if (!on()) return;
  e.id = s.next_id++;
  s.events.push_back(std::move(e));
}

}  // namespace detail

using detail::now_ns;
using detail::on;
using detail::session;

void start(const Options& options) {
#ifdef FERRY_NO_PROFILER_HOOKS
  throw UnsupportedError(
      "profiler::start: this libferry was built with FERRY_PROFILER_HOOKS=OFF; rebuild with it "
      "ON (the default) to profile");
#endif
  auto& s = session();
  std::lock_guard lock(s.mutex);
  if (on())
    throw Error(
        "profiler::start: the profiler is already recording (another Scope, or FERRY_PROFILE "
        "for the whole program); stop it first");
  s.options = options;
  s.events.clear();
  s.devices.clear();
  s.next_id = 1;
  s.origin_ns = now_ns();
  detail::g_recording.store(true, std::memory_order_relaxed);
}

bool enabled() { return on(); }

Profile stop() {
  auto& s = session();
  std::vector<Event> events;
  std::unordered_map<DeviceImpl*, bool> devices;
  std::int64_t origin = 0;
  {
    std::lock_guard lock(s.mutex);
    if (!on()) throw Error("profiler::stop: the profiler is not recording; start it first");
    detail::g_recording.store(false, std::memory_order_relaxed);
    ++s.generation;
    events = std::move(s.events);
    s.events.clear();
    devices = std::move(s.devices);
    s.devices.clear();
    origin = s.origin_ns;
  }
  // The devices' own spans, joined to their events by id.
  std::unordered_map<std::uint64_t, DeviceTimeSpan> spans;
  for (const auto& [device, timed] : devices) {
    if (!timed) continue;
    for (const DeviceTimeSpan& sp : device->stop_timing()) spans.emplace(sp.id, sp);
  }
  for (Event& e : events) {
    if (auto it = spans.find(e.id); it != spans.end()) {
      e.device_begin_ns = it->second.begin_ns;
      e.device_end_ns = it->second.end_ns;
    }
    e.begin_ns -= origin;
    e.end_ns -= origin;
    if (e.has_device_time()) {
      e.device_begin_ns -= origin;
      e.device_end_ns -= origin;
    }
  }
  return Profile(std::move(events));
}

void note_kernel(std::string_view name) {
  if (!on()) return;
  if (detail::Work* w = detail::Work::current()) w->set_detail(name);
}

// ---- Scope and Range ----

Scope::Scope(const Options& options) { start(options); }

Scope::~Scope() {
  if (running_) {
    try {
      profile_ = profiler::stop();
    } catch (...) {
      // destructors do not throw; a failed stop leaves the profile empty
    }
  }
}

const Profile& Scope::stop() {
  if (running_) {
    running_ = false;
    profile_ = profiler::stop();
  }
  return profile_;
}

Range::Range(std::string_view name) {
  if (!on()) return;
  {
    auto& s = session();
    std::lock_guard lock(s.mutex);
    id_ = s.next_id++;
  }
  name_ = name;
  begin_ns_ = now_ns();
}

Range::Range(Range&& other) noexcept
    : id_(std::exchange(other.id_, 0)), begin_ns_(other.begin_ns_), name_(std::move(other.name_)) {}

void Range::end() {
  if (id_ == 0) return;
  Event e;
  e.kind = EventKind::range;
  e.id = std::exchange(id_, 0);
  e.name = std::move(name_);
  e.thread = detail::thread_number();
  e.begin_ns = begin_ns_;
  e.end_ns = now_ns();
  auto& s = session();
  std::lock_guard lock(s.mutex);
  if (on()) s.events.push_back(std::move(e));
}

// ---- FERRY_PROFILE: the whole program ----
//
// Starts when libferry loads and writes the trace when the program exits
// (std::exit or returning from main), with the table on stderr. The devices
// are never destroyed (ferry/backend.hpp), so they can still be asked for
// their spans then.
namespace {
std::string& env_profile_path() {
  static std::string* path = new std::string();
  return *path;
}

void write_env_profile() {
  if (!on()) return;
  try {
    const Profile p = stop();
    p.save(env_profile_path());
    std::fprintf(stderr, "ferry: FERRY_PROFILE: %zu events written to %s\n%s", p.events().size(),
                 env_profile_path().c_str(), p.table(15).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry: FERRY_PROFILE: the profile was not written: %s\n", e.what());
  }
}

const bool env_profile_started = [] {
  const char* path = std::getenv("FERRY_PROFILE");
  if (!path || !*path) return false;
  env_profile_path() = path;
  try {
    start();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry: FERRY_PROFILE is set but nothing is recorded: %s\n", e.what());
    return false;
  }
  std::atexit(write_env_profile);
  return true;
}();
}  // namespace

}  // namespace ferry::profiler
