// ferry/nn/container.hpp — Sequential and ModuleList: modules that hold
// other modules as children named "0", "1", ... in order.
#pragma once

#include <cstddef>
#include <memory>
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

}  // namespace ferry::nn
