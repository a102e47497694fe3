// runtime/autocast_internal.hpp — how front-ends apply an op's autocast policy (Note
// [Autocast] in ferry/autocast.hpp), and the thread state autograd saves and restores.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/autocast.hpp"
#include "ferry/tensor.hpp"

namespace ferry::detail {

// Whether an autocast scope is on for some device type on this thread, and not suspended:
// the one test a front-end makes when there is none.
bool autocast_on() noexcept;
// Whether `op`'s front-end must cast its inputs: autocast is on and the op has a policy.
inline bool autocast_applies(OpId op) {
  return autocast_on() && op_info(op).autocast != OpAutocast::none;
}

// At the top of the front-end of an op whose row has an autocast policy: decides the dtype
// the op's floating inputs become (from all of them, for promote), refuses a banned op, and
// turns autocast off for the ops the front-end runs until it is destroyed (they compute in
// what this cast decided).
//   detail::AutocastOp ac(OpId::matmul, {&a0, &b0});
//   const Tensor a = ac(a0), b = ac(b0);
class AutocastOp {
 public:
  AutocastOp(OpId op, std::initializer_list<const Tensor*> inputs);
  ~AutocastOp();
  AutocastOp(const AutocastOp&) = delete;
  AutocastOp& operator=(const AutocastOp&) = delete;
  // t cast to the op's dtype, or t when autocast leaves it (off, f64, integer, another
  // device type, undefined).
  Tensor operator()(const Tensor& t) const;

 private:
  std::optional<DType> target_;
  std::string device_type_;
  bool suspended_ = false;
};

// The thread's autocast configuration, as checkpoint saves it at the first forward.
struct AutocastState {
  struct Entry {
    std::string device_type;
    bool enabled;
    DType dtype;
  };
  std::vector<Entry> entries;
  bool cache_enabled = true;
};
AutocastState autocast_state();

// Installs `state` as an outermost scope (nothing suspended, an empty cast cache, dropped at
// the end) until destroyed: checkpoint's recomputation runs under the forward's state, and
// casts a parameter once as the forward did.
class AutocastStateGuard {
 public:
  explicit AutocastStateGuard(const AutocastState& state);
  ~AutocastStateGuard();
  AutocastStateGuard(const AutocastStateGuard&) = delete;
  AutocastStateGuard& operator=(const AutocastStateGuard&) = delete;

 private:
  struct Saved;
  std::unique_ptr<Saved> prev_;
};

// Autocast off until destroyed: backward() runs each op's gradient in its forward's dtypes.
class AutocastSuspended {
 public:
  AutocastSuspended();
  ~AutocastSuspended();
  AutocastSuspended(const AutocastSuspended&) = delete;
  AutocastSuspended& operator=(const AutocastSuspended&) = delete;
};

}  // namespace ferry::detail
