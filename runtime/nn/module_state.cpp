// runtime/nn/module_state.cpp — Module::state_dict and load_state_dict.
//
// Note [Loading a state dict]
// load_state_dict writes into the tensors the module already has, with
// copy_ under NoGradGuard: each keeps its TensorImpl, storage, device and
// dtype, so whatever holds it (an optimizer, a tied module, a view) sees the
// new values, and the source may live anywhere in any dtype. The load is all
// or nothing for bad input: every key, shape and tensor is checked first,
// and only a state dict that passes is copied.
//
// Ties: the module's keys are grouped by tensor identity. Two names of one
// tied weight (or of a module registered under two parents) are one group; a
// key is missing only when no key of its group is in the state dict, so a
// checkpoint written with one name of a tie loads. When several keys of a
// group are present they are copied in order (a state dict of the same
// model holds the same values under each).
//
// Conversions: a source of another dtype is converted before anything is
// written, on the source's device (the CPU, for a checkpoint) so that the
// target device never holds a second copy of the model; the writes are then
// plain same-dtype copies. A device failure during those (out of memory, a
// lost device) is not bad input and can still stop a load part way.
#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>

#include "dispatch.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/nn/module.hpp"

namespace ferry::nn {
namespace {

std::string list_keys(const std::vector<std::string>& keys) {
  std::string s;
  for (const std::string& k : keys) s += (s.empty() ? "'" : ", '") + k + "'";
  return s;
}

}  // namespace

// PyTorch's _save_to_state_dict order: own parameters, own persistent
// buffers, then every child (every registration: a shared child appears under
// each of its names, as a tied parameter does).
void Module::collect_state(const std::string& prefix, std::vector<NamedTensor>& out,
                           bool detached) const {
  for (const Slot& s : parameters_)
    out.emplace_back(prefix + s.name, detached ? s.tensor.detach() : s.tensor);
  for (const Slot& s : buffers_)
    if (s.persistent) out.emplace_back(prefix + s.name, detached ? s.tensor.detach() : s.tensor);
  for (const auto& [name, child] : children_)
    child->collect_state(prefix + name + ".", out, detached);
}

StateDict Module::state_dict() const {
  std::vector<NamedTensor> entries;
  collect_state("", entries, /*detached=*/true);
  StateDict sd;
  for (auto& [name, t] : entries) sd.insert(std::move(name), std::move(t));
  return sd;
}

IncompatibleKeys Module::load_state_dict(const StateDict& state, bool strict) {
  std::vector<NamedTensor> targets;
  collect_state("", targets, /*detached=*/false);

  // Tie groups (Note [Loading a state dict]): the keys present per tensor.
  std::unordered_map<const TensorImpl*, int> present_per_tensor;
  std::unordered_set<std::string> own_keys;
  for (const auto& [key, t] : targets) {
    own_keys.insert(key);
    if (state.contains(key)) ++present_per_tensor[t.impl_ptr().get()];
  }

  IncompatibleKeys result;
  std::vector<std::string> mismatched, undefined;
  for (const auto& [key, t] : targets) {
    const Tensor* src = state.find(key);
    if (!src) {
      if (present_per_tensor[t.impl_ptr().get()] == 0) result.missing_keys.push_back(key);
      continue;
    }
    if (!src->defined()) {
      undefined.push_back(key);
    } else if (src->sizes() != t.sizes()) {
      mismatched.push_back(fmt::format("'{}': the module's is {}, the state dict's is {}", key,
                                       shape_str(t.sizes()), shape_str(src->sizes())));
    }
  }
  for (const auto& [key, t] : state)
    if (!own_keys.count(key)) result.unexpected_keys.push_back(key);

  if (!undefined.empty())
    throw Error(
        fmt::format("load_state_dict into {}: the state dict's tensors for {} are "
                    "undefined; nothing was loaded",
                    name(), list_keys(undefined)));
  if (!mismatched.empty()) {
    std::string msg = fmt::format(
        "load_state_dict into {}: {} tensor(s) have the wrong shape, so nothing was loaded:",
        name(), mismatched.size());
    for (const std::string& m : mismatched) msg += "\n  " + m;
    if (strict && !result.missing_keys.empty())
      msg += "\nmissing keys: " + list_keys(result.missing_keys);
    if (strict && !result.unexpected_keys.empty())
      msg += "\nunexpected keys: " + list_keys(result.unexpected_keys);
    throw ShapeError(msg);
  }
  if (strict && !result.empty()) {
    std::string msg = fmt::format(
        "load_state_dict into {}: the keys do not match, so nothing was "
        "loaded (pass strict=false to load the keys both have):",
        name());
    if (!result.missing_keys.empty())
      msg += fmt::format("\n  missing keys (the module has them, the state dict does not): {}",
                         list_keys(result.missing_keys));
    if (!result.unexpected_keys.empty())
      msg += fmt::format("\n  unexpected keys (the state dict has them, the module does not): {}",
                         list_keys(result.unexpected_keys));
    throw Error(msg);
  }

  // Note [Loading a state dict]: dtype conversions run first, where the
  // source lives (a checkpoint on the CPU converts there; a device that
  // cannot convert that dtype hands the work to the target's), so a
  // conversion a device refuses fails before any tensor is written. What is
  // left is same-dtype copies.
  NoGradGuard no_grad;
  std::vector<std::pair<Tensor*, Tensor>> copies;
  for (auto& [key, t] : targets) {
    const Tensor* src = state.find(key);
    if (!src) continue;
    // A state dict of this very module: copying a tensor onto itself is a no-op.
    if (src->storage() == t.storage() && src->storage_offset() == t.storage_offset() &&
        src->strides() == t.strides() && src->dtype() == t.dtype())
      continue;
    Tensor value = *src;
    // Converted where the value is when its device can, else on t's.
    if (value.dtype() != t.dtype())
      value = detail::can_convert(value.storage()->impl(), value.dtype(), t.dtype())
                  ? value.to(t.dtype())
                  : value.to(t.device(), t.dtype());
    copies.emplace_back(&t, std::move(value));
  }
  for (auto& [t, value] : copies) t->copy_(value);
  return result;
}

}  // namespace ferry::nn
