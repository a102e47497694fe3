// runtime/vulkan/vk_recorder_timing.cpp — the Recorder's timestamps for the
// profiler (Note [Vulkan timing]).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <utility>

#include "ferry/error.hpp"
#include "vulkan/vk_error.hpp"
#include "vulkan/vk_recorder.hpp"

namespace ferry::vulkan {

// Note [Vulkan timing]
// While the profiler runs (Note [Device timing] in ferry/backend.hpp), each
// batch that holds a bracketed op or copy gets a timestamp query pool with room
// for two timestamps per command, reset by the batch's own command buffer
// before its first timestamp (on a transfer-only queue, which cannot reset
// queries, by the host when the pool is taken: it is free only once its last
// batch has completed); a batch whose pool is full is submitted first. A
// span's start is written just before the next command recorded after it, in
// that command's lane (Note [Transfer queue]), and its end in the same lane; a
// span with no command writes both in the compute lane. Both are written at
// BOTTOM_OF_PIPE: once every command before has finished. Commands with no
// barrier between them may overlap on a GPU; so timed, each span holds the
// time from the end of the work before it to the end of its own, the spans of
// one lane never overlap (a trace viewer needs its slices nested; the
// transfer lane's overlap the compute lane's, and the trace puts them on a
// further track), and they add up to the lane's busy time. The open copy run
// is recorded first, so the timestamp is ordered after its copies. Results are
// read without waiting when the batch retires (its fence has signalled) and
// the pool goes back to a free list. The device's ticks are mapped onto the
// host's steady clock (CLOCK_MONOTONIC) at start_timing:
// - where the device has VK_EXT_calibrated_timestamps with its own and
//   CLOCK_MONOTONIC's domains (lavapipe does), by the driver sampling both at
//   once: of kCalibrationSamples samples the one with the least reported
//   deviation is kept, and no wait is needed;
// - else by timestamps submitted alone: each is written between the host's
//   submit and the end of its wait, and is taken to be written at the end, so
//   that no span can appear to start before the host enqueued it; of
//   kCalibrationSamples tries, the one with the shortest wait is kept (on
//   lavapipe one wait took 7 ms, when its queue thread was slow to wake, and
//   the mapping was that much off). FERRY_VULKAN_CALIBRATED_TIMESTAMPS=0
//   forces this way.
// The device's `clock_calibration` property says which ran, and how closely.
// A lane whose family has no timestamps leaves its spans unknown.
static constexpr std::uint32_t kQueriesPerBatch = 2 * kBatchCommands + 64;
static constexpr std::uint64_t kCalibrationMark = ~std::uint64_t(0);
static constexpr int kCalibrationSamples = 5;

void Recorder::write_stamp(int lane, std::uint64_t mark) {
  LaneState& l = lanes_[lane];
  if (l.queries.marks.size() == kQueriesPerBatch) flush_lane(lane);
  open_batch(lane);
  end_copy_run(l);
  Queries& q = l.queries;
  if (!q.pool) {
    if (!free_query_pools_.empty()) {
      q.pool = free_query_pools_.back();
      free_query_pools_.pop_back();
    } else {
      VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qi.queryCount = kQueriesPerBatch;
      check(vk_.vkCreateQueryPool(device_, &qi, nullptr, &q.pool), "vkCreateQueryPool");
    }
    if (l.q.host_query_reset)
      vk_.vkResetQueryPool(device_, q.pool, 0, kQueriesPerBatch);
    else
      vk_.vkCmdResetQueryPool(l.cb, q.pool, 0, kQueriesPerBatch);
  }
  vk_.vkCmdWriteTimestamp(l.cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, q.pool,
                          std::uint32_t(q.marks.size()));
  q.marks.push_back(mark);
}

void Recorder::write_pending_starts(int lane) {
  if (pending_starts_.empty()) return;
  const std::vector<std::uint64_t> starts = std::exchange(pending_starts_, {});
  for (std::uint64_t id : starts) {
    span_lane_[id] = lane;
    if (lanes_[lane].q.timestamp_bits > 0) write_stamp(lane, id << 1);
  }
}

void Recorder::write_timestamp(std::uint64_t id, bool end) {
  if (!timing_) return;
  if (!end) {
    pending_starts_.push_back(id);
    return;
  }
  if (auto it = std::find(pending_starts_.begin(), pending_starts_.end(), id);
      it != pending_starts_.end()) {
    pending_starts_.erase(it);  // no command since its start: both in the compute lane
    write_stamp(0, id << 1);
    write_stamp(0, id << 1 | 1);
    return;
  }
  auto it = span_lane_.find(id);
  if (it == span_lane_.end()) return;
  const int lane = it->second;
  span_lane_.erase(it);
  if (lanes_[lane].q.timestamp_bits > 0) write_stamp(lane, id << 1 | 1);
}

void Recorder::read_timestamps(int lane, Queries& q) {
  const std::size_t n = q.marks.size();
  std::vector<std::uint64_t> ticks(n);
  if (n > 0)
    check(vk_.vkGetQueryPoolResults(device_, q.pool, 0, std::uint32_t(n), n * sizeof(std::uint64_t),
                                    ticks.data(), sizeof(std::uint64_t), VK_QUERY_RESULT_64_BIT),
          "vkGetQueryPoolResults");
  for (std::size_t i = 0; i < n; ++i)
    stamps_.emplace_back(q.marks[i], ticks[i] & lanes_[lane].valid_mask);
  free_query_pools_.push_back(q.pool);
  q = Queries{};
}

void Recorder::start_timing(Lock& lock, double period_ns, bool calibrated) {
  if (lanes_[0].q.timestamp_bits == 0) {
    calibration_note_ = "none: the compute queue has no timestamps";
    return;
  }
  if (!calibrated) synchronize(lock);  // an idle queue: each timestamp is written at once
  stamps_.clear();
  pending_starts_.clear();
  span_lane_.clear();
  timing_ = true;
  period_ns_ = period_ns;
  if (calibrated) {
    // Both clocks sampled by the driver at once; the pair with the least uncertainty is kept.
    // steady_clock is CLOCK_MONOTONIC (libstdc++ and libc++ on Linux).
    VkCalibratedTimestampInfoEXT info[2] = {{VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT},
                                            {VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT}};
    info[0].timeDomain = VK_TIME_DOMAIN_DEVICE_EXT;
    info[1].timeDomain = VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT;
    std::uint64_t best_deviation = ~std::uint64_t(0);
    for (int sample = 0; sample < kCalibrationSamples; ++sample) {
      std::uint64_t stamps[2] = {}, deviation = 0;
      check(vk_.vkGetCalibratedTimestampsEXT(device_, 2, info, stamps, &deviation),
            "vkGetCalibratedTimestampsEXT");
      if (deviation >= best_deviation) continue;
      best_deviation = deviation;
      clock_offset_ns_ = std::int64_t(stamps[1]) -
                         std::int64_t(double(stamps[0] & lanes_[0].valid_mask) * period_ns_);
    }
    calibration_note_ =
        fmt::format("VK_EXT_calibrated_timestamps, deviation {} ns", best_deviation);
    return;
  }
  auto ns = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  };
  std::int64_t best_window = -1;
  for (int sample = 0; sample < kCalibrationSamples; ++sample) {
    write_stamp(0, kCalibrationMark);
    const auto t0 = std::chrono::steady_clock::now();
    synchronize(lock);
    const auto t1 = std::chrono::steady_clock::now();
    for (auto it = stamps_.begin(); it != stamps_.end(); ++it) {
      if (it->first != kCalibrationMark) continue;
      if (best_window < 0 || ns(t1) - ns(t0) < best_window) {
        best_window = ns(t1) - ns(t0);
        clock_offset_ns_ = ns(t1) - std::int64_t(double(it->second) * period_ns_);
      }
      stamps_.erase(it);
      break;
    }
  }
  calibration_note_ = fmt::format("submitted timestamps, window {} ns", best_window);
}

std::vector<DeviceTimeSpan> Recorder::stop_timing(Lock& lock) {
  synchronize(lock);
  timing_ = false;
  pending_starts_.clear();
  span_lane_.clear();
  std::unordered_map<std::uint64_t, DeviceTimeSpan> spans;
  for (const auto& [mark, ticks] : stamps_) {
    DeviceTimeSpan& sp = spans[mark >> 1];
    sp.id = mark >> 1;
    const std::int64_t ns = std::int64_t(double(ticks) * period_ns_) + clock_offset_ns_;
    (mark & 1 ? sp.end_ns : sp.begin_ns) = ns;
  }
  stamps_.clear();
  std::vector<DeviceTimeSpan> out;
  out.reserve(spans.size());
  for (const auto& [id, sp] : spans)
    if (sp.begin_ns != 0 && sp.end_ns != 0) out.push_back(sp);
  return out;
}

}  // namespace ferry::vulkan
