// runtime/vulkan/queue_order.cpp — Note [Cross-queue order].
#include "vulkan/queue_order.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace ferry::vulkan {
namespace {

void check_queue(int queue) {
  if (queue < 0 || queue >= QueueOrder::kQueues)
    throw std::invalid_argument("QueueOrder: the queue must be 0 or 1");
}

}  // namespace

std::uint64_t QueueOrder::need(int queue, std::span<const Use> uses,
                               std::uint64_t completed) const {
  check_queue(queue);
  const PerBuffer& other = queues_[1 - queue];
  std::uint64_t wait = 0;
  for (const Use& u : uses) {
    const std::uint64_t begin = u.range.offset, end = u.range.end();
    if (begin >= end) continue;
    auto buffer = other.find(u.range.buffer);
    if (buffer == other.end()) continue;
    const Spans& spans = buffer->second;
    // The span starting at or before `begin` may reach into the range; then every later one
    // that starts before `end`.
    auto it = spans.upper_bound(begin);
    if (it != spans.begin() && std::prev(it)->second.end > begin) --it;
    for (; it != spans.end() && it->first < end; ++it) {
      wait = std::max(wait, it->second.write);  // read or write after the other's write
      if (u.access == Access::write) wait = std::max(wait, it->second.read);  // after its read
    }
  }
  return wait > completed ? wait : 0;
}

void QueueOrder::split(Spans& spans, std::uint64_t at) {
  auto it = spans.upper_bound(at);
  if (it == spans.begin()) return;
  --it;
  if (it->first == at || it->second.end <= at) return;
  Span right = it->second;
  it->second.end = at;
  spans.emplace_hint(std::next(it), at, right);
}

void QueueOrder::record(int queue, std::uint64_t serial, std::span<const Use> uses) {
  check_queue(queue);
  for (const Use& u : uses) {
    const std::uint64_t begin = u.range.offset, end = u.range.end();
    if (begin >= end) continue;
    Spans& spans = queues_[queue][u.range.buffer];
    split(spans, begin);
    split(spans, end);
    // Now every span overlapping [begin, end) lies inside it; fill the gaps between them.
    std::uint64_t at = begin;
    auto it = spans.lower_bound(begin);
    while (at < end) {
      if (it == spans.end() || it->first > at) {
        const std::uint64_t gap_end = it == spans.end() ? end : std::min(end, it->first);
        it = spans.emplace_hint(it, at, Span{gap_end, 0, 0});
      }
      (u.access == Access::write ? it->second.write : it->second.read) = serial;
      at = it->second.end;
      ++it;
    }
    // Merge runs of equal neighbours from just before `begin` to just after `end`, so that
    // whole tensors used by one batch stay one span.
    auto first = spans.lower_bound(begin);
    if (first != spans.begin()) --first;
    for (auto cur = first; cur != spans.end() && cur->first <= end;) {
      auto next = std::next(cur);
      if (next != spans.end() && cur->second.end == next->first &&
          cur->second.read == next->second.read && cur->second.write == next->second.write) {
        cur->second.end = next->second.end;
        spans.erase(next);
      } else {
        cur = next;
      }
    }
  }
}

void QueueOrder::retire(std::uint64_t completed) {
  for (PerBuffer& per_buffer : queues_) {
    for (auto b = per_buffer.begin(); b != per_buffer.end();) {
      Spans& spans = b->second;
      for (auto it = spans.begin(); it != spans.end();) {
        if (std::max(it->second.read, it->second.write) <= completed)
          it = spans.erase(it);
        else
          ++it;
      }
      b = spans.empty() ? per_buffer.erase(b) : std::next(b);
    }
  }
}

std::size_t QueueOrder::tracked_intervals() const {
  std::size_t n = 0;
  for (const PerBuffer& per_buffer : queues_)
    for (const auto& [buffer, spans] : per_buffer) n += spans.size();
  return n;
}

}  // namespace ferry::vulkan
