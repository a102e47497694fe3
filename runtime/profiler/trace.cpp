// runtime/profiler/trace.cpp — a Profile's outputs (ferry/profiler.hpp): the
// key_averages() table and the Chrome trace event format.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "ferry/error.hpp"
#include "ferry/profiler.hpp"

namespace ferry::profiler {

std::vector<OpStats> Profile::key_averages() const {
  std::map<std::tuple<std::string, std::string, EventKind>, OpStats> rows;
  for (const Event& e : events_) {
    if (e.kind == EventKind::memory) continue;
    OpStats& r = rows[{e.name, e.device, e.kind}];
    r.name = e.name;
    r.device = e.device;
    r.kind = e.kind;
    ++r.calls;
    r.device_total_ns += e.duration_ns();
    r.host_total_ns += e.end_ns - e.begin_ns;
    r.bytes += e.bytes;
  }
  std::vector<OpStats> out;
  out.reserve(rows.size());
  for (auto& [key, r] : rows) out.push_back(std::move(r));
  std::stable_sort(out.begin(), out.end(), [](const OpStats& a, const OpStats& b) {
    return a.device_total_ns > b.device_total_ns;
  });
  return out;
}

namespace {
std::string human_time(std::int64_t ns) {
  if (ns >= 1'000'000'000) return fmt::format("{:.3f} s", double(ns) / 1e9);
  if (ns >= 1'000'000) return fmt::format("{:.3f} ms", double(ns) / 1e6);
  return fmt::format("{:.3f} us", double(ns) / 1e3);
}

std::string human_bytes(std::uint64_t b) {
  if (b == 0) return "";
  if (b >= (1u << 30)) return fmt::format("{:.2f} GiB", double(b) / double(1u << 30));
  if (b >= (1u << 20)) return fmt::format("{:.2f} MiB", double(b) / double(1u << 20));
  if (b >= (1u << 10)) return fmt::format("{:.2f} KiB", double(b) / double(1u << 10));
  return fmt::format("{} B", b);
}
}  // namespace

std::string Profile::table(std::size_t rows) const {
  const std::vector<OpStats> stats = key_averages();
  // Each device's share is of its ops' and copies' time: ranges and host
  // waits contain other rows.
  std::map<std::string, std::int64_t> device_total;
  for (const OpStats& r : stats)
    if (r.kind == EventKind::op || r.kind == EventKind::copy)
      device_total[r.device] += r.device_total_ns;
  std::string out =
      fmt::format("{:<28} {:<6} {:<10} {:>7} {:>13} {:>7} {:>13} {:>13} {:>11}\n", "Name", "Kind",
                  "Device", "Calls", "Device total", "%", "Device mean", "Host total", "Bytes");
  out += std::string(115, '-') + "\n";
  std::size_t shown = 0;
  for (const OpStats& r : stats) {
    if (shown++ == rows) break;
    const std::int64_t total = device_total[r.device];
    const bool share = (r.kind == EventKind::op || r.kind == EventKind::copy) && total > 0;
    std::string name = r.name.size() > 28 ? r.name.substr(0, 25) + "..." : r.name;
    out +=
        fmt::format("{:<28} {:<6} {:<10} {:>7} {:>13} {:>7} {:>13} {:>13} {:>11}\n", name,
                    kind_name(r.kind), r.device, r.calls, human_time(r.device_total_ns),
                    share ? fmt::format("{:.1f}", 100.0 * double(r.device_total_ns) / total) : "",
                    human_time(std::int64_t(r.device_mean_us() * 1e3)), human_time(r.host_total_ns),
                    human_bytes(r.bytes));
  }
  if (stats.size() > rows) out += fmt::format("({} more rows)\n", stats.size() - rows);
  return out;
}

// Note [Trace layout]
// Chrome's trace event format, as chrome://tracing and ui.perfetto.dev read
// it. Process 1 is the host, with a track per thread: ranges, and the host
// span of every op, copy and wait (an op's host span on a GPU is its
// enqueue). Each device is a process of its own (2, 3, ... in the order the
// profile met them) named by the device, and each op or copy with a device
// span shows there too: on the track "queue" for a device with a clock of its
// own (its spans follow each other: Note [Vulkan timing]; a span whose
// bracket interleaved with another thread's goes on a further lane), or, on a device timed
// by the host clock (the CPU), on a track per issuing thread, since threads
// run kernels at once. A flow arrow ("s" to "f") joins an op's host span to
// its device span. Each device's memory is a counter ("C") of the
// allocator's allocated and reserved bytes after each allocation and free.
// Times are microseconds since the profile started.
std::string Profile::chrome_trace() const {
  using nlohmann::json;
  json trace = json::array();
  auto meta = [&](const char* what, int pid, int tid, const std::string& name) {
    json m = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", {{"name", name}}}};
    if (tid >= 0) m["tid"] = tid;
    trace.push_back(std::move(m));
  };
  auto us = [](std::int64_t ns) { return double(ns) / 1e3; };
  constexpr int kHost = 1;
  meta("process_name", kHost, -1, "host");
  std::map<std::string, int> pids;     // device -> process
  std::map<std::string, bool> queued;  // device -> spans on one queue track
  std::map<std::pair<int, int>, bool> named_tracks;
  for (const Event& e : events_) {
    if (e.device.empty() || pids.count(e.device)) continue;
    const int pid = int(pids.size()) + 2;
    pids[e.device] = pid;
    meta("process_name", pid, -1, e.device);
    trace.push_back({{"ph", "M"},
                     {"name", "process_sort_index"},
                     {"pid", pid},
                     {"args", {{"sort_index", pid}}}});
  }
  // A device has its own clock when any of its device spans differs from the
  // host span around it.
  for (const Event& e : events_)
    if (e.has_device_time() && (e.device_begin_ns != e.begin_ns || e.device_end_ns != e.end_ns))
      queued[e.device] = true;
  // Spans of one queue follow each other, except where threads enqueued at
  // once and their brackets interleaved (Note [Device timing]): such a span
  // goes on the first further lane where it overlaps nothing.
  std::map<std::uint64_t, int> lane;  // event id -> lane, on a queued device
  {
    std::map<std::string, std::vector<const Event*>> spans;
    for (const Event& e : events_)
      if (e.has_device_time() && queued[e.device]) spans[e.device].push_back(&e);
    for (auto& [device, list] : spans) {
      std::stable_sort(list.begin(), list.end(), [](const Event* a, const Event* b) {
        return a->device_begin_ns < b->device_begin_ns;
      });
      std::vector<std::int64_t> lane_end;
      for (const Event* e : list) {
        std::size_t l = 0;
        while (l < lane_end.size() && lane_end[l] > e->device_begin_ns) ++l;
        if (l == lane_end.size()) lane_end.push_back(0);
        lane_end[l] = e->device_end_ns;
        lane[e->id] = int(l);
      }
    }
  }
  auto track = [&](int pid, int tid, const std::string& name) {
    if (named_tracks.emplace(std::pair{pid, tid}, true).second) meta("thread_name", pid, tid, name);
  };
  for (const Event& e : events_) {
    const int host_tid = int(e.thread) + 1;
    if (e.kind == EventKind::memory) {
      trace.push_back({{"ph", "C"},
                       {"name", "memory"},
                       {"pid", pids[e.device]},
                       {"ts", us(e.begin_ns)},
                       {"args", {{"allocated", e.allocated}, {"reserved", e.reserved}}}});
      continue;
    }
    track(kHost, host_tid, fmt::format("thread {}", e.thread));
    json args = json::object();
    if (!e.device.empty()) args["device"] = e.device;
    if (!e.inputs.empty()) args["inputs"] = e.inputs;
    if (!e.detail.empty()) args["route"] = e.detail;
    if (e.bytes) args["bytes"] = e.bytes;
    trace.push_back({{"ph", "X"},
                     {"name", e.name},
                     {"cat", kind_name(e.kind)},
                     {"pid", kHost},
                     {"tid", host_tid},
                     {"ts", us(e.begin_ns)},
                     {"dur", us(e.end_ns - e.begin_ns)},
                     {"id", e.id},
                     {"args", args}});
    if (!e.has_device_time()) continue;
    const int pid = pids[e.device];
    const int tid = queued[e.device] ? 1 + lane[e.id] : host_tid;
    track(pid, tid,
          !queued[e.device] ? fmt::format("thread {}", e.thread)
          : tid == 1        ? std::string("queue")
                            : fmt::format("queue, interleaved brackets {}", tid - 1));
    trace.push_back({{"ph", "X"},
                     {"name", e.name},
                     {"cat", std::string(kind_name(e.kind)) + " on device"},
                     {"pid", pid},
                     {"tid", tid},
                     {"ts", us(e.device_begin_ns)},
                     {"dur", us(e.device_end_ns - e.device_begin_ns)},
                     {"id", e.id},
                     {"args", args}});
    trace.push_back({{"ph", "s"},
                     {"name", "enqueue"},
                     {"cat", "flow"},
                     {"id", e.id},
                     {"pid", kHost},
                     {"tid", host_tid},
                     {"ts", us(e.begin_ns)}});
    trace.push_back({{"ph", "f"},
                     {"bp", "e"},
                     {"name", "enqueue"},
                     {"cat", "flow"},
                     {"id", e.id},
                     {"pid", pid},
                     {"tid", tid},
                     {"ts", us(e.device_begin_ns)}});
  }
  json doc = {{"traceEvents", std::move(trace)}, {"displayTimeUnit", "ms"}};
  return doc.dump();
}

void Profile::save(const std::string& path) const {
  const std::string json = chrome_trace();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f)
    throw Error(
        fmt::format("profiler: cannot open '{}' for writing: {}", path, std::strerror(errno)));
  f.write(json.data(), std::streamsize(json.size()));
  f.close();
  if (!f) throw Error(fmt::format("profiler: cannot write '{}': {}", path, std::strerror(errno)));
}

}  // namespace ferry::profiler
