// runtime/state_dict.cpp — the ordered name -> tensor map behind state_dict()
// and safetensors files.
#include "ferry/state_dict.hpp"

#include <fmt/format.h>

#include "ferry/error.hpp"

namespace ferry {

void StateDict::insert(std::string name, Tensor tensor) {
  if (contains(name))
    throw Error(fmt::format("state dict: the key '{}' is already there; keys must be unique", name));
  index_.emplace(name, entries_.size());
  entries_.emplace_back(std::move(name), std::move(tensor));
}

void StateDict::insert_or_assign(std::string name, Tensor tensor) {
  auto it = index_.find(name);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(tensor);
    return;
  }
  insert(std::move(name), std::move(tensor));
}

bool StateDict::erase(std::string_view name) {
  auto it = index_.find(std::string(name));
  if (it == index_.end()) return false;
  entries_.erase(entries_.begin() + std::ptrdiff_t(it->second));
  index_.clear();
  for (std::size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
  return true;
}

const Tensor* StateDict::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

const Tensor& StateDict::at(std::string_view name) const {
  if (const Tensor* t = find(name)) return *t;
  std::string have;
  for (std::size_t i = 0; i < entries_.size() && i < 8; ++i)
    have += (i ? ", " : "") + entries_[i].first;
  if (entries_.size() > 8) have += fmt::format(", ... ({} keys in all)", entries_.size());
  throw Error(fmt::format("state dict: no key '{}' (keys: {})", name,
                          have.empty() ? std::string("none") : have));
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> k;
  k.reserve(entries_.size());
  for (const auto& e : entries_) k.push_back(e.first);
  return k;
}

StateDict StateDict::strip_prefix(std::string_view prefix) const {
  StateDict out;
  for (const auto& [name, t] : entries_)
    if (std::string_view(name).substr(0, prefix.size()) == prefix)
      out.insert(name.substr(prefix.size()), t);
  for (const auto& [k, v] : metadata)
    if (std::string_view(k).substr(0, prefix.size()) == prefix)
      out.metadata.emplace(k.substr(prefix.size()), v);
  return out;
}

StateDict StateDict::add_prefix(std::string_view prefix) const {
  StateDict out;
  for (const auto& [name, t] : entries_) out.insert(std::string(prefix) + name, t);
  for (const auto& [k, v] : metadata) out.metadata.emplace(std::string(prefix) + k, v);
  return out;
}

void StateDict::merge(const StateDict& other) {
  // Every clash is found before anything changes, so a failed merge leaves *this as it was.
  for (const auto& [name, t] : other)
    if (contains(name)) throw Error(fmt::format("state dict: both have the key '{}'", name));
  for (const auto& [k, v] : other.metadata)
    if (metadata.count(k))
      throw Error(fmt::format("state dict: both have the metadata key '{}'", k));
  for (const auto& [name, t] : other) insert(name, t);
  for (const auto& [k, v] : other.metadata) metadata.emplace(k, v);
}

}  // namespace ferry
