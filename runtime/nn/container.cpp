// runtime/nn/container.cpp — Sequential and ModuleList (ferry/nn/container.hpp).
#include "ferry/nn/container.hpp"

#include <fmt/format.h>

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

}  // namespace ferry::nn
