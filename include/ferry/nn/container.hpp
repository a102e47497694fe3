// ferry/nn/container.hpp — the containers of PyTorch's nn: Sequential and ModuleList hold
// other modules as children named "0", "1", ... in order; ModuleDict holds them under the
// names it is given, in insertion order; ParameterList and ParameterDict hold parameters the
// same two ways. Names follow Module's rules (non-empty, no '.', unique: Error).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/nn/module.hpp"

namespace ferry::nn {

// Chains its children's single-input forward():
//   auto mlp = std::make_shared<Sequential>(std::make_shared<Linear>(4, 8),
//                                           std::make_shared<ReLU>(),
//                                           std::make_shared<Linear>(8, 2));
class Sequential : public Module {
 public:
  Sequential() = default;
  template <typename... M> explicit Sequential(std::shared_ptr<M>... modules) {
    (push_back(std::move(modules)), ...);
  }
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules);

  // Appends a child named by its position.
  void push_back(std::shared_ptr<Module> module);
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  // Error when i >= size().
  const std::shared_ptr<Module>& operator[](std::size_t i) const;
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return items_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return items_.end(); }

  // Each child's forward on the previous one's output; an empty Sequential
  // returns x.
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

// A list of children, indexed and iterated; it has no forward of its own.
class ModuleList : public Module {
 public:
  ModuleList() = default;
  explicit ModuleList(std::vector<std::shared_ptr<Module>> modules);

  void push_back(std::shared_ptr<Module> module);
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const std::shared_ptr<Module>& operator[](std::size_t i) const;  // Error when out of range
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return items_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

// Children under their own names, in insertion order; no forward of its own.
class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  explicit ModuleDict(std::vector<NamedModule> modules);

  // Registers `module` as the child `name` (Error when the name is taken or not a valid name).
  void insert(std::string name, std::shared_ptr<Module> module);
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  bool contains(std::string_view name) const;
  const std::shared_ptr<Module>& operator[](std::string_view name) const;  // Error naming the keys
  std::vector<std::string> keys() const;
  std::vector<NamedModule>::const_iterator begin() const { return items_.begin(); }
  std::vector<NamedModule>::const_iterator end() const { return items_.end(); }

 private:
  std::vector<NamedModule> items_;
};

// Parameters named "0", "1", ... in order (each registered with requires_grad).
class ParameterList : public Module {
 public:
  ParameterList() = default;
  explicit ParameterList(std::vector<Tensor> parameters);

  void push_back(Tensor parameter);
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const Tensor& operator[](std::size_t i) const;  // Error when out of range
  std::vector<Tensor>::const_iterator begin() const { return items_.begin(); }
  std::vector<Tensor>::const_iterator end() const { return items_.end(); }

 private:
  std::vector<Tensor> items_;
};

// Parameters under their own names, in insertion order.
class ParameterDict : public Module {
 public:
  ParameterDict() = default;
  explicit ParameterDict(std::vector<NamedTensor> parameters);

  void insert(std::string name, Tensor parameter);
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  bool contains(std::string_view name) const;
  const Tensor& operator[](std::string_view name) const;  // Error naming the keys
  std::vector<std::string> keys() const;
  std::vector<NamedTensor>::const_iterator begin() const { return items_.begin(); }
  std::vector<NamedTensor>::const_iterator end() const { return items_.end(); }

 private:
  std::vector<NamedTensor> items_;
};

}  // namespace ferry::nn
