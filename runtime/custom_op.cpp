// runtime/custom_op.cpp — the table of user ops and their place in autograd
// (Note [Custom ops] in ferry/custom_op.hpp).
#include "ferry/custom_op.hpp"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>

#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "log_internal.hpp"

namespace ferry {
namespace {

struct OpTable {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const OpDefinition>, std::less<>> ops;
};

OpTable& table() {
  static OpTable t;
  return t;
}

std::shared_ptr<const OpDefinition> find_op(std::string_view name) {
  OpTable& t = table();
  std::lock_guard lock(t.mutex);
  auto it = t.ops.find(name);
  return it == t.ops.end() ? nullptr : it->second;
}

}  // namespace

void register_op(OpDefinition op) {
  if (op.name.empty()) throw Error("register_op: the op needs a name");
  if (!op.forward) throw Error(fmt::format("register_op: op '{}' has no forward", op.name));
  OpTable& t = table();
  std::lock_guard lock(t.mutex);
  if (t.ops.count(op.name))
    throw Error(fmt::format("register_op: an op named '{}' is already registered", op.name));
  std::string name = op.name;
  t.ops.emplace(std::move(name), std::make_shared<const OpDefinition>(std::move(op)));
}

bool has_op(std::string_view name) { return find_op(name) != nullptr; }

Tensor call_op(std::string_view name, const std::vector<Tensor>& inputs) {
  std::shared_ptr<const OpDefinition> op = find_op(name);
  if (!op)
    throw UnsupportedError(
        fmt::format("call_op: no op named '{}' is registered (ferry::register_op adds one)", name));
  const std::string what = fmt::format("op '{}'", name);
  detail::check_same_device(what, inputs);
  Tensor result = autograd::untracked([&] { return op->forward(inputs); });
  if (!result.defined()) throw Error(fmt::format("{}: forward returned an undefined tensor", what));
  for (const Tensor& in : inputs)
    if (in.defined() && in.is_same(result))
      throw Error(
          fmt::format("{}: forward returned one of its inputs; a recorded op must return "
                      "a new tensor (clone() it)",
                      what));
  FERRY_DEBUG("{} on {}: {} inputs -> {}", what, result.device().str(), inputs.size(),
              shape_str(result.sizes()));
  std::vector<autograd::Saved> saved_inputs(inputs.begin(), inputs.end());
  autograd::Saved saved_result(result);
  autograd::record(what, inputs, result,
                   [op, what, saved_inputs = std::move(saved_inputs), saved_result](
                       const Tensor& grad, const autograd::Needs&) -> std::vector<Tensor> {
                     if (!op->backward)
                       throw Error(
                           fmt::format("{} has no backward (register_op was given none), so no "
                                       "gradient flows through it",
                                       what));
                     std::vector<Tensor> ins;
                     ins.reserve(saved_inputs.size());
                     for (const autograd::Saved& s : saved_inputs) ins.push_back(s.get());
                     std::vector<Tensor> grads = op->backward(ins, saved_result.get(), grad);
                     if (grads.size() != ins.size())
                       throw Error(fmt::format("{}: backward returned {} gradients for {} inputs",
                                               what, grads.size(), ins.size()));
                     return grads;
                   });
  return result;
}

}  // namespace ferry
