// runtime/vulkan/barrier_tracker.cpp — Note [Barrier placement].
#include "vulkan/barrier_tracker.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace ferry::vulkan {
namespace {

// A full barrier: every earlier command and access before every later one.
constexpr Barrier kSerializeBarrier{
    mask(Stage::all_commands), mask(Stage::all_commands), mask(AccessBit::memory_write),
    mask(AccessBit::memory_read) | mask(AccessBit::memory_write), BarrierKind::serialize};

void count(BarrierStats& stats, BarrierKind kind) {
  switch (kind) {
    case BarrierKind::raw:
      ++stats.raw;
      break;
    case BarrierKind::waw:
      ++stats.waw;
      break;
    case BarrierKind::war:
      ++stats.war;
      break;
    case BarrierKind::host_read:
      ++stats.host_read;
      break;
    case BarrierKind::serialize:
      ++stats.serialize;
      break;
  }
}

}  // namespace

AccessMask access_bit(Stage stage, Access access) {
  const bool write = access == Access::write;
  switch (stage) {
    case Stage::compute:
      return mask(write ? AccessBit::shader_write : AccessBit::shader_read);
    case Stage::transfer:
      return mask(write ? AccessBit::transfer_write : AccessBit::transfer_read);
    case Stage::host:
      return mask(write ? AccessBit::host_write : AccessBit::host_read);
    case Stage::all_commands:
      return mask(write ? AccessBit::memory_write : AccessBit::memory_read);
  }
  return 0;
}

const char* to_string(BarrierKind kind) {
  switch (kind) {
    case BarrierKind::raw:
      return "read-after-write";
    case BarrierKind::waw:
      return "write-after-write";
    case BarrierKind::war:
      return "write-after-read";
    case BarrierKind::host_read:
      return "host-read";
    case BarrierKind::serialize:
      return "serialize";
  }
  return "?";
}

bool BarrierTracker::IntervalSet::overlaps(std::uint64_t begin, std::uint64_t end) const {
  if (begin >= end) return false;
  // The only candidates: the last span starting at or before `begin`, and the first after it.
  auto next = spans_.upper_bound(begin);
  if (next != spans_.end() && next->first < end) return true;
  return next != spans_.begin() && std::prev(next)->second > begin;
}

void BarrierTracker::IntervalSet::add(std::uint64_t begin, std::uint64_t end) {
  if (begin >= end) return;
  // Merge with every span that overlaps or touches [begin, end); touching spans merge too, so
  // contiguous tensors in one sub-allocated buffer stay a single span. The union is exact, so
  // a query overlaps the merged span exactly when it overlaps one of the originals.
  auto it = spans_.upper_bound(begin);
  if (it != spans_.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= begin) {
      begin = prev->first;
      end = std::max(end, prev->second);
      it = prev;
    }
  }
  while (it != spans_.end() && it->first <= end) {
    end = std::max(end, it->second);
    it = spans_.erase(it);
  }
  spans_.emplace_hint(it, begin, end);
}

bool BarrierTracker::overlaps(const PerBuffer& set, const Range& r) {
  auto it = set.find(r.buffer);
  return it != set.end() && it->second.overlaps(r.offset, r.end());
}

void BarrierTracker::add(PerBuffer& set, const Range& r) {
  if (r.size == 0) return;  // no map entry for an empty range
  set[r.buffer].add(r.offset, r.end());
}

std::optional<Barrier> BarrierTracker::before(Stage stage, std::span<const Use> uses) {
  if ((stage != Stage::compute && stage != Stage::transfer) || !(mask(stage) & stages_)) {
    throw std::invalid_argument(
        "BarrierTracker::before: a recorded command's stage must be compute or transfer, and "
        "one of the queue's stages");
  }
  ++stats_.commands;

  std::optional<Barrier> barrier;
  if (serialize_) {
    if (command_since_barrier_) barrier = kSerializeBarrier;
    command_since_barrier_ = true;
    command_since_host_barrier_ = true;
  } else {
    // Check every use against the state before this command, so its own uses never conflict.
    bool raw = false, waw = false, war = false;
    for (const Use& u : uses) {
      const bool write = u.access == Access::write;
      if (overlaps(writes_, u.range)) (write ? waw : raw) = true;
      if (write && overlaps(reads_, u.range)) war = true;
    }
    if (raw || waw || war) {
      // Note [Barrier placement]: the barrier retires every pending access, so its masks
      // cover all of them, not only the conflicting ones.
      const AccessMask dst_access =
          (stages_ & mask(Stage::compute) ? access_bit(Stage::compute, Access::read) |
                                                access_bit(Stage::compute, Access::write)
                                          : 0) |
          (stages_ & mask(Stage::transfer) ? access_bit(Stage::transfer, Access::read) |
                                                 access_bit(Stage::transfer, Access::write)
                                           : 0);
      barrier = Barrier{pending_stages_, stages_, pending_write_access_,
                        pending_write_access_ != 0 ? dst_access : 0,
                        raw   ? BarrierKind::raw
                        : waw ? BarrierKind::waw
                              : BarrierKind::war};
      reads_.clear();
      writes_.clear();
      pending_stages_ = 0;
      pending_write_access_ = 0;
    }
    for (const Use& u : uses) {
      const bool write = u.access == Access::write;
      add(write ? writes_ : reads_, u.range);
      pending_stages_ |= mask(stage);
      if (write) {
        pending_write_access_ |= access_bit(stage, u.access);
        add(host_unsynced_, u.range);
        host_stages_ |= mask(stage);
        host_access_ |= access_bit(stage, u.access);
      }
    }
  }
  if (barrier) count(stats_, barrier->kind);
  return barrier;
}

std::optional<Barrier> BarrierTracker::before_host_read(std::span<const Range> ranges) {
  ++stats_.host_reads;
  std::optional<Barrier> barrier;
  if (serialize_) {
    if (command_since_host_barrier_) {
      barrier = Barrier{mask(Stage::all_commands), mask(Stage::host), mask(AccessBit::memory_write),
                        mask(AccessBit::host_read), BarrierKind::serialize};
    }
    command_since_host_barrier_ = false;
  } else {
    const bool needed = std::any_of(ranges.begin(), ranges.end(),
                                    [&](const Range& r) { return overlaps(host_unsynced_, r); });
    if (needed) {
      // Global, like the device barriers: every write since the last host barrier becomes
      // visible to the host, so all of them are forgotten.
      barrier = Barrier{host_stages_, mask(Stage::host), host_access_, mask(AccessBit::host_read),
                        BarrierKind::host_read};
      host_unsynced_.clear();
      host_stages_ = 0;
      host_access_ = 0;
    }
  }
  if (barrier) count(stats_, barrier->kind);
  return barrier;
}

void BarrierTracker::reset() {
  reads_.clear();
  writes_.clear();
  host_unsynced_.clear();
  pending_stages_ = pending_write_access_ = host_stages_ = host_access_ = 0;
  command_since_barrier_ = command_since_host_barrier_ = false;
}

std::size_t BarrierTracker::tracked_intervals() const {
  std::size_t n = 0;
  for (const PerBuffer* set : {&reads_, &writes_, &host_unsynced_}) {
    for (const auto& [buffer, spans] : *set) n += spans.size();
  }
  return n;
}

}  // namespace ferry::vulkan
