// runtime/autocast.cpp — the autocast scopes and the casts front-ends make under them (Note
// [Autocast] in ferry/autocast.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "autocast_internal.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"

namespace ferry {
namespace {

DType default_dtype(std::string_view device_type) {
  return device_type == "cpu" ? DType::bf16 : DType::f16;
}

// One thread's autocast: the scopes' settings per device type, how many Autocast objects are
// alive (the cache lives until the outermost ends), and how many ops or backward passes have
// turned it off for what they run.
struct ThreadState {
  std::vector<detail::AutocastState::Entry> entries;
  int depth = 0;
  int suspended = 0;
  bool cache_enabled = true;
  int enabled_types = 0;  // entries with enabled set: autocast_on()'s test
  // The low casts of parameters (f32 leaves that require grad), by the parameter's
  // TensorImpl: the parameter itself is held so that its address is not reused, and the
  // version of its storage when cast, so that a write since (an optimizer step inside the
  // scope) makes a new cast instead of handing out the old values.
  struct CachedCast {
    Tensor param, cast;
    std::uint64_t version;
  };
  std::unordered_map<const void*, CachedCast> cache;

  detail::AutocastState::Entry* find(std::string_view type) {
    for (auto& e : entries)
      if (e.device_type == type) return &e;
    return nullptr;
  }
  detail::AutocastState::Entry& entry(std::string_view type) {
    if (auto* e = find(type)) return *e;
    entries.push_back({std::string(type), false, default_dtype(type)});
    return entries.back();
  }
  void recount() {
    enabled_types =
        int(std::count_if(entries.begin(), entries.end(), [](const auto& e) { return e.enabled; }));
  }
};

ThreadState& state() {
  thread_local ThreadState s;
  return s;
}

bool eligible(const Tensor& t, std::string_view device_type) {
  return t.defined() && is_floating(t.dtype()) && t.dtype() != DType::f64 &&
         t.device().type() == device_type;
}

}  // namespace

Autocast::Autocast(std::string_view device_type, std::optional<DType> dtype, bool enabled,
                   bool cache_enabled) {
  if (device_type.empty())
    throw ValueError("Autocast: device_type is empty; name one, e.g. \"cuda\" or \"cpu\"");
  const DType dt = dtype.value_or(default_dtype(device_type));
  if (dt != DType::f16 && dt != DType::bf16)
    throw DTypeError(
        fmt::format("Autocast: the low dtype must be f16 or bf16, got {}; to compute in f32, leave "
                    "autocast off",
                    dtype_name(dt)));
  ThreadState& s = state();
  auto& e = s.entry(device_type);
  device_type_ = std::string(device_type);
  prev_enabled_ = e.enabled;
  prev_dtype_ = e.dtype;
  prev_cache_ = s.cache_enabled;
  e.enabled = enabled;
  e.dtype = dt;
  s.cache_enabled = cache_enabled;
  s.recount();
  ++s.depth;
}

Autocast::~Autocast() {
  ThreadState& s = state();
  auto& e = s.entry(device_type_);
  e.enabled = prev_enabled_;
  e.dtype = prev_dtype_;
  s.cache_enabled = prev_cache_;
  s.recount();
  if (--s.depth == 0) s.cache.clear();
}

bool is_autocast_enabled(std::string_view device_type) {
  const auto* e = state().find(device_type);
  return e && e->enabled;
}

DType autocast_dtype(std::string_view device_type) {
  const auto* e = state().find(device_type);
  return e ? e->dtype : default_dtype(device_type);
}

void clear_autocast_cache() { state().cache.clear(); }

std::optional<DType> autocast_target(OpId op, std::string_view device_type, DType input) {
  const auto* e = state().find(device_type);
  if (!e || !e->enabled || !is_floating(input) || input == DType::f64) return std::nullopt;
  switch (op_info(op).autocast) {
    case OpAutocast::lower:
      return e->dtype;
    case OpAutocast::f32:
      return DType::f32;
    case OpAutocast::promote:
      return input;
    case OpAutocast::none:
    case OpAutocast::banned:
      break;
  }
  return std::nullopt;
}

namespace detail {

bool autocast_on() noexcept {
  const ThreadState& s = state();
  return s.enabled_types > 0 && s.suspended == 0;
}

AutocastOp::AutocastOp(OpId op, std::initializer_list<const Tensor*> inputs) {
  if (!autocast_on()) return;
  // Whatever this decides, the ops the front-end runs see autocast off: they compute in the
  // dtypes decided here (and a front-end that calls itself with the cast inputs ends).
  ++state().suspended;
  suspended_ = true;
  const OpInfo& info = op_info(op);
  if (info.autocast == OpAutocast::none) return;
  // The op's device type: its first defined input's (a front-end checks they agree).
  for (const Tensor* t : inputs)
    if (t->defined()) {
      device_type_ = t->device().type();
      break;
    }
  const auto* e = state().find(device_type_);
  if (!e || !e->enabled) return;
  bool any = false;
  DType widest = DType::f16;
  for (const Tensor* t : inputs)
    if (eligible(*t, device_type_)) {
      widest = any ? promote_types(widest, t->dtype()) : t->dtype();
      any = true;
    }
  switch (info.autocast) {
    case OpAutocast::lower:
      target_ = e->dtype;
      break;
    case OpAutocast::f32:
      target_ = DType::f32;
      break;
    case OpAutocast::promote:
      if (any) target_ = widest;
      break;
    case OpAutocast::banned:
      if (any) {
        --state().suspended;
        suspended_ = false;
        throw Error(fmt::format(
            "{}: unsafe to autocast (the log of a 16-bit probability overflows); compute "
            "logits and call binary_cross_entropy_with_logits, which autocast runs in f32, or "
            "leave the autocast scope for this op",
            info.name));
      }
      break;
    case OpAutocast::none:
      break;
  }
}

AutocastOp::~AutocastOp() {
  if (suspended_) --state().suspended;
}

Tensor AutocastOp::operator()(const Tensor& t) const {
  if (!target_ || !eligible(t, device_type_) || t.dtype() == *target_) return t;
  ThreadState& s = state();
  // A parameter's low cast is made once per outermost scope (PyTorch's cached_cast): only
  // while gradients are recorded, so a cast made under NoGradGuard, without a graph, is
  // never handed to an op that records one.
  const bool cacheable = s.cache_enabled && s.depth > 0 && *target_ != DType::f32 &&
                         t.dtype() == DType::f32 && t.requires_grad() && t.is_leaf() &&
                         is_grad_enabled();
  if (!cacheable) return t.to(*target_);
  const void* key = t.impl_ptr().get();
  const std::uint64_t version = t.storage()->version();
  auto it = s.cache.find(key);
  if (it != s.cache.end() && it->second.cast.dtype() == *target_ && it->second.version == version &&
      it->second.cast.device() == t.device())
    return it->second.cast;
  Tensor cast = t.to(*target_);
  s.cache[key] = {t, cast, version};
  return cast;
}

AutocastState autocast_state() { return {state().entries, state().cache_enabled}; }

struct AutocastStateGuard::Saved {
  std::vector<AutocastState::Entry> entries;
  int depth, suspended;
  bool cache_enabled;
  std::unordered_map<const void*, ThreadState::CachedCast> cache;
};

AutocastStateGuard::AutocastStateGuard(const AutocastState& st) {
  ThreadState& s = state();
  prev_ = std::make_unique<Saved>(
      Saved{s.entries, s.depth, s.suspended, s.cache_enabled, std::move(s.cache)});
  s.entries = st.entries;
  s.cache.clear();
  s.depth = 1;
  s.suspended = 0;
  s.cache_enabled = st.cache_enabled;
  s.recount();
}

AutocastStateGuard::~AutocastStateGuard() {
  ThreadState& s = state();
  s.entries = std::move(prev_->entries);
  s.depth = prev_->depth;
  s.suspended = prev_->suspended;
  s.cache_enabled = prev_->cache_enabled;
  s.cache = std::move(prev_->cache);
  s.recount();
}

AutocastSuspended::AutocastSuspended() { ++state().suspended; }
AutocastSuspended::~AutocastSuspended() { --state().suspended; }

}  // namespace detail
}  // namespace ferry
