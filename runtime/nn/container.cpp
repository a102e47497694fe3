// runtime/nn/container.cpp — the containers (ferry/nn/container.hpp).
#include "ferry/nn/container.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>

#include "ferry/error.hpp"

namespace ferry::nn {
namespace {

const std::shared_ptr<Module>& at(const std::vector<std::shared_ptr<Module>>& items, std::size_t i,
                                  std::string_view what) {
  if (i >= items.size())
    throw Error(
        fmt::format("{}[{}]: index out of range: it holds {} module(s)", what, i, items.size()));
  return items[i];
}

// The entry named `name` of a dict container, or an Error listing the names it has.
template <typename Item>
const Item& by_name(const std::vector<Item>& items, std::string_view name, std::string_view what) {
  for (const Item& item : items)
    if (item.first == name) return item;
  std::vector<std::string_view> keys;
  for (const Item& item : items) keys.push_back(item.first);
  throw Error(
      fmt::format("{}[\"{}\"]: no such key; it holds [{}]", what, name, fmt::join(keys, ", ")));
}

template <typename Item> std::vector<std::string> keys_of(const std::vector<Item>& items) {
  std::vector<std::string> keys;
  for (const Item& item : items) keys.push_back(item.first);
  return keys;
}

}  // namespace

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) {
  for (auto& m : modules) push_back(std::move(m));
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(items_.size()), module);
  items_.push_back(std::move(module));
}

const std::shared_ptr<Module>& Sequential::operator[](std::size_t i) const {
  return at(items_, i, "Sequential");
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& m : items_) y = m->forward(y);
  return y;
}

ModuleList::ModuleList(std::vector<std::shared_ptr<Module>> modules) {
  for (auto& m : modules) push_back(std::move(m));
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(items_.size()), module);
  items_.push_back(std::move(module));
}

const std::shared_ptr<Module>& ModuleList::operator[](std::size_t i) const {
  return at(items_, i, "ModuleList");
}

ModuleDict::ModuleDict(std::vector<NamedModule> modules) {
  for (auto& [name, m] : modules) insert(std::move(name), std::move(m));
}

void ModuleDict::insert(std::string name, std::shared_ptr<Module> module) {
  register_module(name, module);  // checks the name and the module first
  items_.emplace_back(std::move(name), std::move(module));
}

bool ModuleDict::contains(std::string_view name) const {
  return std::any_of(items_.begin(), items_.end(), [&](const auto& i) { return i.first == name; });
}

const std::shared_ptr<Module>& ModuleDict::operator[](std::string_view name) const {
  return by_name(items_, name, "ModuleDict").second;
}

std::vector<std::string> ModuleDict::keys() const { return keys_of(items_); }

ParameterList::ParameterList(std::vector<Tensor> parameters) {
  for (auto& p : parameters) push_back(std::move(p));
}

void ParameterList::push_back(Tensor parameter) {
  items_.push_back(register_parameter(std::to_string(items_.size()), std::move(parameter)));
}

const Tensor& ParameterList::operator[](std::size_t i) const {
  if (i >= items_.size())
    throw Error(fmt::format("ParameterList[{}]: index out of range: it holds {} parameter(s)", i,
                            items_.size()));
  return items_[i];
}

ParameterDict::ParameterDict(std::vector<NamedTensor> parameters) {
  for (auto& [name, p] : parameters) insert(std::move(name), std::move(p));
}

void ParameterDict::insert(std::string name, Tensor parameter) {
  Tensor registered = register_parameter(name, std::move(parameter));
  items_.emplace_back(std::move(name), std::move(registered));
}

bool ParameterDict::contains(std::string_view name) const {
  return std::any_of(items_.begin(), items_.end(), [&](const auto& i) { return i.first == name; });
}

const Tensor& ParameterDict::operator[](std::string_view name) const {
  return by_name(items_, name, "ParameterDict").second;
}

std::vector<std::string> ParameterDict::keys() const { return keys_of(items_); }

}  // namespace ferry::nn
