// ferry/nn/module.hpp — nn::Module: the model graph. A module holds named
// parameters, named buffers and named child modules, and everything that
// walks a model (optimizers, state_dict, the transfer planner, printing)
// walks it through the listings declared here.
//
// Note [Module graph]
// A module registers its tensors and children under names that are unique
// within it; dotted paths ("encoder.layers.0.weight") name them from the
// root. Listings are pre-order in registration order, PyTorch's order: a
// module's own entries, then each child's, recursively.
//
// Tensors are handles (Note [Tensors and storages]), so registering a tensor
// shares it: a parameter registered by two modules (weight tying) is one
// tensor, identified by its TensorImpl (Tensor::is_same). The listings that
// feed optimizers and migrations (named_parameters, parameters, named_buffers,
// buffers) list such a tensor once, under its first name in traversal order,
// and a module registered under two parents is listed once by named_modules,
// so an optimizer updates a tied weight once with the sum of the gradients of
// both uses (autograd adds them). state_dict() lists a tied tensor under every
// name, as PyTorch's does, and load_state_dict accepts either name or both.
//
// Thread-compatible: building a module, and loading into it, must not race
// with other use of it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ferry/state_dict.hpp"
#include "ferry/tensor.hpp"

namespace ferry::nn {

class Module;

using NamedTensor = std::pair<std::string, Tensor>;
using NamedModule = std::pair<std::string, std::shared_ptr<Module>>;

// What a non-strict load_state_dict left out: keys the module has that the
// state dict lacks, and keys the state dict has that the module lacks.
struct IncompatibleKeys {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
  bool empty() const { return missing_keys.empty() && unexpected_keys.empty(); }
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  Module() = default;
  virtual ~Module() = default;
  // Copying would share every parameter between the copies without saying
  // so; a module is moved, or held by shared_ptr.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;

  // ---- registration. A name must be non-empty, contain no '.', and not be
  // used by another parameter, buffer or child of this module (Error).

  // Registers `tensor` (defined, a leaf: not the result of a recorded op) as
  // a parameter and sets its requires_grad. A tensor another module already
  // holds stays the same tensor (weight tying). Returns the tensor.
  Tensor register_parameter(std::string name, Tensor tensor, bool requires_grad = true);
  // Registers a buffer: state that is not trained (BatchNorm's running
  // statistics). A persistent buffer is part of state_dict().
  Tensor register_buffer(std::string name, Tensor tensor, bool persistent = true);
  // Registers a child module and returns it, typed, so that
  //   fc1 = register_module("fc1", std::make_shared<Linear>(16, 32));
  // keeps a typed handle. Error when `module` is null or is this module.
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    static_assert(std::is_base_of_v<Module, M>, "register_module needs an nn::Module");
    register_module_impl(std::move(name), module);
    return module;
  }
  // Replaces the tensor of a registered parameter (Error when there is none
  // by that name) and returns it: how a built-in layer's weight is tied to
  // another module's, e.g.
  //   head->weight = head->replace_parameter("weight", embedding->weight);
  // The layer's own field must be updated too, as above: forward uses it.
  Tensor replace_parameter(std::string_view name, Tensor tensor, bool requires_grad = true);

  // ---- listings (Note [Module graph]): dotted names, pre-order in
  // registration order. Each tensor and each module is listed once.
  std::vector<NamedTensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  // Persistent and non-persistent buffers.
  std::vector<NamedTensor> named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  // Every tensor the module tree holds, as a migration moves them
  // (ferry/transfer.hpp): each module's parameters, each parameter's gradient
  // as "<name>.grad" when it has one, and its buffers. Unlike the listings
  // above, a tensor held under two names (a tied weight) appears under each,
  // so that a plan's explain() can report the tie.
  std::vector<NamedTensor> named_tensors() const;
  // This module first, as "". A module not owned by a shared_ptr (one on the
  // stack) is listed through a non-owning shared_ptr, valid while it lives.
  std::vector<NamedModule> named_modules();
  std::vector<std::shared_ptr<Module>> modules();
  std::vector<NamedModule> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;

  // The tensor or child registered here under `name` (not a dotted path);
  // Error naming what there is when there is none.
  Tensor parameter(std::string_view name) const;
  Tensor buffer(std::string_view name) const;
  std::shared_ptr<Module> child(std::string_view name) const;

  // ---- modes
  // Sets training mode on this module and every descendant; returns *this.
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }
  // Clears every parameter's gradient (set_to_none), or zeroes it in place.
  void zero_grad(bool set_to_none = true);

  // ---- moving
  // Moves every parameter, gradient and buffer (persistent or not) to
  // `device` through the transfer planner (ferry/transfer.hpp): one batched,
  // all-or-nothing hop in which tied weights stay tied and views stay views.
  // Tensors keep their identity, so an optimizer holding the parameters keeps
  // updating them; its state moves only with ferry::migrate(module,
  // optimizer, device). Returns *this.
  Module& to(const Device& device);
  // Converts floating parameters, gradients and buffers to `dtype` where they
  // are (integer buffers keep theirs). The tensors are rebound to memory of
  // the new dtype (Note [All or nothing] in ferry/transfer.hpp).
  Module& to(DType dtype);
  Module& to(const Device& device, DType dtype);
  // PyTorch's module.to(memory_format=...): rebinds every 4-D and 5-D parameter, gradient and
  // buffer to a copy in `format` (channels_last converts 4-D tensors and refuses 5-D ones,
  // channels_last_3d the reverse, as PyTorch does; contiguous converts both; preserve changes
  // nothing). Tensors of other ranks, and those already in the format, stay as they are. Like
  // to(dtype), the tensors keep their identity (an optimizer holding the parameters follows)
  // and a tied weight stays one tensor; views of them that are not listed stay on the old
  // memory. Every copy is made before any tensor is rebound: a ShapeError (a tensor of the
  // wrong rank, named) or an allocation failure changes nothing.
  Module& to(MemoryFormat format);

  // ---- state
  // Parameters and persistent buffers under dotted names: each module's own
  // parameters, then its own buffers, then its children's, recursively. A
  // tied tensor appears under every name. The tensors are detached handles
  // sharing memory with the module.
  StateDict state_dict() const;
  // Copies `state`'s values into the module's existing tensors, which keep
  // their identity, device and dtype (a source on another device or of
  // another dtype is converted), so an optimizer holding the parameters keeps
  // working. Every key and shape is checked, and every dtype conversion made,
  // before anything is written: bad input changes nothing. A key the module has but `state` lacks
  // is missing unless the same tensor is present under another of its names (a tied weight).
  // Errors: a mis-shaped entry is a ShapeError (always, strict or not) naming
  // every such key with both shapes; with strict, missing or unexpected keys
  // are an Error naming every one. Non-strict returns them instead.
  IncompatibleKeys load_state_dict(const StateDict& state, bool strict = true);

  // ---- forward and printing
  // The single-input forward that Sequential chains. The default raises
  // UnsupportedError naming the module: modules with other signatures
  // (losses: input and target) declare their own.
  virtual Tensor forward(const Tensor& input);
  // The module's type name as printed ("Linear"); by default the class name
  // without its namespace.
  virtual std::string name() const;
  // The text inside the parentheses ("in_features=16, out_features=32,
  // bias=true"); empty by default.
  virtual std::string extra_repr() const { return {}; }
  // The tree as PyTorch's print(model) shows it.
  std::string str() const;

 private:
  struct Slot {
    std::string name;
    Tensor tensor;
    bool persistent = true;  // buffers only
  };
  void register_module_impl(std::string name, std::shared_ptr<Module> module);
  void check_new_name(std::string_view what, const std::string& name) const;
  void collect_state(const std::string& prefix, std::vector<NamedTensor>& out, bool detached) const;

  std::vector<Slot> parameters_;
  std::vector<Slot> buffers_;
  std::vector<NamedModule> children_;
  bool training_ = true;
};

std::ostream& operator<<(std::ostream& os, const Module& module);

}  // namespace ferry::nn
