// runtime/deferred_checks.cpp — Note [Deferred checks] in deferred_checks.hpp.
#include "deferred_checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "dispatch.hpp"
#include "ferry/debug.hpp"
#include "ferry/error.hpp"
#include "ferry/kit/env.hpp"
#include "ferry/ops.hpp"

namespace ferry {
namespace debug {
namespace {
// -1 until the first use reads FERRY_SYNC_CHECKS; set_sync_checks overrides it.
std::atomic<int> g_sync_checks{-1};
}  // namespace

void set_sync_checks(bool enabled) { g_sync_checks.store(enabled ? 1 : 0); }

bool sync_checks() {
  int v = g_sync_checks.load(std::memory_order_relaxed);
  if (v < 0) {
    int unread = -1;
    v = kit::env::flag("FERRY_SYNC_CHECKS") ? 1 : 0;
    g_sync_checks.compare_exchange_strong(unread, v);  // a concurrent set_sync_checks wins
    v = g_sync_checks.load(std::memory_order_relaxed);
  }
  return v == 1;
}
}  // namespace debug

namespace detail {
namespace {

struct Pending {
  DeviceImpl* device;
  Tensor values;  // i64, on `device`
  CheckVerdict verdict;
  CheckError error;
};

[[noreturn]] void raise(CheckError error, std::string message) {
  if (error == CheckError::value) throw ValueError(std::move(message));
  throw ShapeError(std::move(message));
}

// This thread's pending checks, oldest first (per thread: the error belongs to the code that
// made it, and one thread's read must not raise another's).
thread_local std::vector<Pending> t_pending;

// Reads `checks` in one transfer and throws the first failure's error.
void decide(const std::vector<Pending>& checks, const Device& device) {
  std::vector<Tensor> parts;
  parts.reserve(checks.size());
  for (const Pending& c : checks) parts.push_back(c.values.reshape({-1}));
  // The read below is a copy out of `device`, which calls raise_deferred_checks again; the
  // caller has taken these checks off the list, so it finds none of them.
  const std::vector<std::int64_t> v =
      (parts.size() == 1 ? parts[0] : cat(parts)).to_vector<std::int64_t>();
  std::size_t at = 0;
  for (const Pending& c : checks) {
    const auto n = std::size_t(c.values.numel());
    std::string message = c.verdict(std::span<const std::int64_t>(v.data() + at, n));
    at += n;
    if (!message.empty())
      raise(c.error, fmt::format("{} (raised at this read of {}, the first after that call: Note "
                                 "[Deferred checks]; FERRY_SYNC_CHECKS=1 raises it at the call)",
                                 message, device.str()));
  }
}

}  // namespace

void check_values(const Tensor& values, CheckVerdict verdict, CheckError error, CheckTime when) {
  DeviceImpl& device = impl_of(values);
  if (when == CheckTime::at_call || device.device().is_cpu() || debug::sync_checks()) {
    const std::vector<std::int64_t> v = values.to_vector<std::int64_t>();
    std::string message = verdict(v);
    if (!message.empty()) raise(error, std::move(message));
    return;
  }
  if (t_pending.size() >= debug::kMaxDeferredChecks) {
    // Read them all: one wait per device holding any.
    while (!t_pending.empty()) raise_deferred_checks(*t_pending.front().device);
  }
  t_pending.push_back({&device, values, std::move(verdict), error});
}

void raise_deferred_checks(DeviceImpl& device) {
  std::vector<Pending>& pending = t_pending;
  if (std::none_of(pending.begin(), pending.end(),
                   [&](const Pending& p) { return p.device == &device; }))
    return;  // the common case: one thread-local load and a short scan
  std::vector<Pending> mine;
  std::vector<Pending> others;
  for (Pending& p : pending) (p.device == &device ? mine : others).push_back(std::move(p));
  pending = std::move(others);
  if (!mine.empty()) decide(mine, device.device());
}

}  // namespace detail
}  // namespace ferry
