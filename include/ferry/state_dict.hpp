// ferry/state_dict.hpp — named tensors in a stable order, with string metadata:
// what a module's state_dict(), an optimizer's state_dict() and a safetensors
// file hold.
//
// Entries keep the order they were inserted in (a module lists its parameters
// and buffers in registration order, as PyTorch's OrderedDict does). The
// tensors are handles: a StateDict shares memory with the module it came from
// until a loader copies values in. Thread-compatible.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ferry/tensor.hpp"

namespace ferry {

class StateDict {
 public:
  using Entry = std::pair<std::string, Tensor>;

  // Adds `name`; Error when it is already there (names are unique).
  void insert(std::string name, Tensor tensor);
  // Adds `name` or replaces its tensor, keeping its place in the order.
  void insert_or_assign(std::string name, Tensor tensor);
  bool erase(std::string_view name);  // true when it was there

  bool contains(std::string_view name) const { return index_.count(std::string(name)) != 0; }
  // The tensor of `name`, or nullptr.
  const Tensor* find(std::string_view name) const;
  // The tensor of `name`; Error naming the key and what is there when missing.
  const Tensor& at(std::string_view name) const;

  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }
  std::vector<std::string> keys() const;

  // Every entry whose name starts with `prefix`, with the prefix removed (the
  // metadata of those keys too). Used to split one checkpoint file into the
  // model's and the optimizer's parts.
  StateDict strip_prefix(std::string_view prefix) const;
  // Every entry (and metadata key) with `prefix` put in front.
  StateDict add_prefix(std::string_view prefix) const;
  // Adds every entry and metadata key of `other`; Error on a name both have.
  void merge(const StateDict& other);

  // String key/value pairs stored with the tensors (safetensors' __metadata__):
  // an optimizer's hyper-parameters, a model's version, ...
  std::map<std::string, std::string> metadata;

 private:
  std::vector<Entry> entries_;
  std::unordered_map<std::string, std::size_t> index_;
};

}  // namespace ferry
