// runtime/nn/module.cpp — nn::Module's registration, listings, modes and
// printing (Note [Module graph] in ferry/nn/module.hpp). state_dict and
// load_state_dict are in module_state.cpp.
#include "ferry/nn/module.hpp"

#include <cxxabi.h>
#include <fmt/format.h>

#include <cstdlib>
#include <ostream>
#include <sstream>
#include <typeinfo>
#include <unordered_set>

#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/memory_format.hpp"
#include "ferry/transfer.hpp"
#include "memory_format_internal.hpp"

namespace ferry::nn {
namespace {

// Every module of the tree once, pre-order, with its dotted path: the walk
// behind every deduplicating listing. A module reached a second time (the
// same child under two parents) is skipped with its whole subtree, as
// PyTorch's named_modules does.
void walk_modules(const Module& m, const std::string& prefix,
                  std::unordered_set<const Module*>& seen,
                  std::vector<std::pair<std::string, const Module*>>& out) {
  if (!seen.insert(&m).second) return;
  out.emplace_back(prefix, &m);
  for (const auto& [name, child] : m.named_children())
    walk_modules(*child, prefix.empty() ? name : prefix + "." + name, seen, out);
}

std::vector<std::pair<std::string, const Module*>> all_modules(const Module& root) {
  std::unordered_set<const Module*> seen;
  std::vector<std::pair<std::string, const Module*>> out;
  walk_modules(root, "", seen, out);
  return out;
}

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// Indents every line but the first by two spaces (PyTorch's _addindent).
std::string indent_tail(const std::string& s) {
  std::string out;
  for (char c : s) {
    out += c;
    if (c == '\n') out += "  ";
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------- registration

void Module::check_new_name(std::string_view what, const std::string& name) const {
  if (name.empty())
    throw Error(fmt::format("{}: the name is empty; give the {} a name unique within {}", what,
                            what == "register_module" ? "child" : "tensor", this->name()));
  if (name.find('.') != std::string::npos)
    throw Error(fmt::format(
        "{}: the name '{}' contains '.', which separates the parts of a dotted path; use another "
        "character, e.g. '_'",
        what, name));
  auto used_by = [&]() -> const char* {
    for (const Slot& s : parameters_)
      if (s.name == name) return "a parameter";
    for (const Slot& s : buffers_)
      if (s.name == name) return "a buffer";
    for (const auto& c : children_)
      if (c.first == name) return "a child module";
    return nullptr;
  }();
  if (used_by)
    throw Error(
        fmt::format("{}: {} already has {} named '{}'; names must be unique within a module", what,
                    this->name(), used_by, name));
}

Tensor Module::register_parameter(std::string name, Tensor tensor, bool requires_grad) {
  check_new_name("register_parameter", name);
  if (!tensor.defined())
    throw Error(fmt::format(
        "register_parameter: the tensor for '{}' is undefined; leave an absent parameter "
        "unregistered",
        name));
  if (!tensor.is_leaf())
    throw Error(fmt::format(
        "register_parameter: the tensor for '{}' is the result of {}, not a leaf; register "
        "tensor.detach() (or make it under NoGradGuard)",
        name, tensor.grad_fn_name()));
  tensor.requires_grad_(requires_grad);
  parameters_.push_back({std::move(name), tensor, true});
  return tensor;
}

Tensor Module::register_buffer(std::string name, Tensor tensor, bool persistent) {
  check_new_name("register_buffer", name);
  if (!tensor.defined())
    throw Error(fmt::format(
        "register_buffer: the tensor for '{}' is undefined; leave an absent buffer unregistered",
        name));
  buffers_.push_back({std::move(name), tensor, persistent});
  return tensor;
}

void Module::register_module_impl(std::string name, std::shared_ptr<Module> module) {
  check_new_name("register_module", name);
  if (!module) throw Error(fmt::format("register_module: the module for '{}' is null", name));
  if (module.get() == this)
    throw Error(
        fmt::format("register_module: '{}' is this module itself; a module cannot be its "
                    "own child",
                    name));
  children_.emplace_back(std::move(name), std::move(module));
}

Tensor Module::replace_parameter(std::string_view name, Tensor tensor, bool requires_grad) {
  for (Slot& s : parameters_) {
    if (s.name != name) continue;
    if (!tensor.defined() || !tensor.is_leaf())
      throw Error(fmt::format(
          "replace_parameter: the tensor for '{}' must be defined and a leaf (not the result of "
          "a recorded op)",
          name));
    tensor.requires_grad_(requires_grad);
    s.tensor = tensor;
    return tensor;
  }
  std::string have;
  for (const Slot& s : parameters_) have += (have.empty() ? "" : ", ") + s.name;
  throw Error(
      fmt::format("replace_parameter: {} has no parameter '{}' (it has: {}); use "
                  "register_parameter to add one",
                  this->name(), name, have.empty() ? "none" : have));
}

// ---------------------------------------------------------------- listings

std::vector<NamedTensor> Module::named_parameters(bool recurse) const {
  std::vector<NamedTensor> out;
  std::unordered_set<const TensorImpl*> seen;
  auto mods =
      recurse ? all_modules(*this) : std::vector<std::pair<std::string, const Module*>>{{"", this}};
  for (const auto& [prefix, m] : mods)
    for (const Slot& s : m->parameters_)
      if (seen.insert(s.tensor.impl_ptr().get()).second)
        out.emplace_back(join(prefix, s.name), s.tensor);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(std::move(t));
  return out;
}

std::vector<NamedTensor> Module::named_buffers(bool recurse) const {
  std::vector<NamedTensor> out;
  std::unordered_set<const TensorImpl*> seen;
  auto mods =
      recurse ? all_modules(*this) : std::vector<std::pair<std::string, const Module*>>{{"", this}};
  for (const auto& [prefix, m] : mods)
    for (const Slot& s : m->buffers_)
      if (seen.insert(s.tensor.impl_ptr().get()).second)
        out.emplace_back(join(prefix, s.name), s.tensor);
  return out;
}

std::vector<NamedTensor> Module::named_tensors() const {
  std::vector<NamedTensor> out;
  for (const auto& [prefix, m] : all_modules(*this)) {
    for (const Slot& s : m->parameters_) {
      out.emplace_back(join(prefix, s.name), s.tensor);
      if (Tensor g = s.tensor.grad(); g.defined())
        out.emplace_back(join(prefix, s.name) + ".grad", g);
    }
    for (const Slot& s : m->buffers_) out.emplace_back(join(prefix, s.name), s.tensor);
  }
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(std::move(t));
  return out;
}

std::vector<NamedModule> Module::named_modules() {
  // Children are held by shared_ptr; the root may not be (a model on the
  // stack), so it is handed out through a non-owning alias.
  std::shared_ptr<Module> self = weak_from_this().lock();
  if (!self) self = std::shared_ptr<Module>(std::shared_ptr<Module>(), this);
  std::vector<NamedModule> out;
  std::unordered_set<const Module*> seen{this};
  out.emplace_back("", self);
  // Pre-order with the shared_ptrs the parents hold.
  auto visit = [&](auto&& self_fn, const Module& m, const std::string& prefix) -> void {
    for (const auto& [name, child] : m.children_) {
      if (!seen.insert(child.get()).second) continue;
      const std::string path = join(prefix, name);
      out.emplace_back(path, child);
      self_fn(self_fn, *child, path);
    }
  };
  visit(visit, *this, "");
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules() {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [name, m] : named_modules()) out.push_back(std::move(m));
  return out;
}

std::vector<NamedModule> Module::named_children() const {
  std::vector<NamedModule> out;
  std::unordered_set<const Module*> seen;
  for (const auto& c : children_)
    if (seen.insert(c.second.get()).second) out.push_back(c);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [name, m] : named_children()) out.push_back(std::move(m));
  return out;
}

namespace {

template <typename List, typename Name> std::string names_of(const List& list, Name name_of) {
  std::string s;
  for (const auto& e : list) s += (s.empty() ? "" : ", ") + name_of(e);
  return s.empty() ? "none" : s;
}

}  // namespace

Tensor Module::parameter(std::string_view name) const {
  for (const Slot& s : parameters_)
    if (s.name == name) return s.tensor;
  throw Error(fmt::format("parameter: {} has no parameter '{}' (it has: {})", this->name(), name,
                          names_of(parameters_, [](const Slot& s) { return s.name; })));
}

Tensor Module::buffer(std::string_view name) const {
  for (const Slot& s : buffers_)
    if (s.name == name) return s.tensor;
  throw Error(fmt::format("buffer: {} has no buffer '{}' (it has: {})", this->name(), name,
                          names_of(buffers_, [](const Slot& s) { return s.name; })));
}

std::shared_ptr<Module> Module::child(std::string_view name) const {
  for (const auto& c : children_)
    if (c.first == name) return c.second;
  throw Error(fmt::format("child: {} has no child module '{}' (it has: {})", this->name(), name,
                          names_of(children_, [](const NamedModule& c) { return c.first; })));
}

// ---------------------------------------------------------------- modes

Module& Module::to(const Device& device) {
  migrate(*this, device);
  return *this;
}

Module& Module::to(DType dtype) {
  TransferOptions options;
  options.dtype = dtype;
  plan_migration(named_tensors(), std::nullopt, options).execute();
  return *this;
}

Module& Module::to(const Device& device, DType dtype) {
  TransferOptions options;
  options.dtype = dtype;
  migrate(*this, device, options);
  return *this;
}

Module& Module::to(MemoryFormat format) {
  if (format == MemoryFormat::preserve) return *this;
  NoGradGuard no_grad;
  // Each tensor once (a tied weight is listed under each name), every copy made before any
  // tensor is rebound (Note [All or nothing] in ferry/transfer.hpp).
  std::unordered_set<const TensorImpl*> seen;
  std::vector<std::pair<Tensor, Tensor>> rebinds;  // (tensor, its copy in `format`)
  for (const auto& [name, t] : named_tensors()) {
    if ((t.dim() != 4 && t.dim() != 5) || !seen.insert(t.impl_ptr().get()).second) continue;
    if (format != MemoryFormat::contiguous && t.dim() != detail::rank_of(format))
      throw ShapeError(fmt::format(
          "{}.to({}): '{}' has shape {}, and {} takes {}-D tensors (PyTorch refuses it too); "
          "nothing was converted",
          this->name(), memory_format_name(format), name, shape_str(t.sizes()),
          memory_format_name(format), detail::rank_of(format)));
    if (!t.is_contiguous(format)) rebinds.emplace_back(t, Tensor());
  }
  for (auto& [t, copy] : rebinds) copy = t.contiguous(format);
  // The commit: swaps, which cannot fail.
  for (auto& [t, copy] : rebinds) {
    TensorImpl& impl = *t.impl_ptr();
    TensorImpl& made = *copy.impl_ptr();
    impl.storage.swap(made.storage);
    impl.strides.swap(made.strides);
    std::swap(impl.offset, made.offset);
  }
  return *this;
}

Module& Module::train(bool on) {
  training_ = on;
  for (const auto& c : children_) c.second->train(on);
  return *this;
}

void Module::zero_grad(bool set_to_none) {
  for (const Tensor& p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad({});
    } else {
      NoGradGuard no_grad;
      g.zero_();
    }
  }
}

// ---------------------------------------------------------------- forward, printing

Tensor Module::forward(const Tensor&) {
  throw UnsupportedError(fmt::format(
      "{}.forward(input): this module has no single-input forward; call its own forward "
      "(override Module::forward to use it in a Sequential)",
      name()));
}

std::string Module::name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string full = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  // Drop the scopes: "ferry::nn::Linear" -> "Linear", "(anonymous namespace)::Mlp" -> "Mlp",
  // "ns::Wrapper<ns::Inner>" -> "Wrapper<ns::Inner>" (only a "::" outside brackets counts).
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i + 1 < full.size(); ++i) {
    const char c = full[i];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (depth == 0 && c == ':' && full[i + 1] == ':') start = i + 2;
  }
  return full.substr(start);
}

std::string Module::str() const {
  // PyTorch's Module.__repr__: the extra_repr lines, then "(name): child"
  // per child, each indented; one line when there are neither children nor
  // several extra lines.
  std::vector<std::string> lines;
  const std::string extra = extra_repr();
  if (!extra.empty()) {
    std::istringstream in(extra);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  for (const auto& [name, child] : children_)
    lines.push_back("(" + name + "): " + indent_tail(child->str()));
  std::string out = this->name() + "(";
  if (!lines.empty()) {
    if (children_.empty() && lines.size() == 1) {
      out += lines[0];
    } else {
      out += "\n";
      for (const std::string& l : lines) out += "  " + l + "\n";
    }
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Module& module) { return os << module.str(); }

}  // namespace ferry::nn
