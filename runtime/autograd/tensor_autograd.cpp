// runtime/autograd/tensor_autograd.cpp — Tensor's autograd methods
// (Note [Autograd] in ferry/autograd.hpp).
#include <fmt/format.h>

#include <atomic>

#include "autograd/graph.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"

namespace ferry {

using autograd::meta_of;

const std::shared_ptr<TensorImpl>& Tensor::checked_impl() const {
  impl();  // throws for an undefined tensor
  return impl_;
}

Tensor& Tensor::requires_grad_(bool requires_grad) {
  const auto& m = checked_impl()->autograd;
  if (m && m->grad_fn) {
    if (!requires_grad)
      throw Error(fmt::format(
          "requires_grad_(false): this tensor is the result of {}, not a leaf; use detach() to "
          "get a tensor without history",
          m->grad_fn->name()));
    return *this;  // a result of recorded ops already requires grad
  }
  if (requires_grad && !is_floating(dtype()))
    throw DTypeError(fmt::format(
        "requires_grad_: only floating tensors can require gradients, this one is {} (shape {}); "
        "convert it first, e.g. x.to(ferry::DType::f32)",
        dtype_name(dtype()), shape_str(sizes())));
  if (requires_grad || m) meta_of(*this).requires_grad = requires_grad;
  return *this;
}

std::uint64_t autograd::register_post_accumulate_grad_hook(
    const Tensor& leaf, std::function<void(const Tensor& grad)> hook) {
  if (!leaf.requires_grad() || !leaf.is_leaf())
    throw Error(fmt::format(
        "register_post_accumulate_grad_hook: only a leaf that requires grad accumulates a "
        "gradient; this tensor (shape {}) {}",
        shape_str(leaf.sizes()),
        leaf.requires_grad() ? "is the result of " + leaf.grad_fn_name()
                             : "does not require grad"));
  static std::atomic<std::uint64_t> next_id{1};
  const std::uint64_t id = next_id++;
  meta_of(leaf).post_accumulate_hooks.emplace_back(id, std::move(hook));
  return id;
}

void autograd::remove_post_accumulate_grad_hook(const Tensor& leaf, std::uint64_t id) {
  const auto& m = leaf.impl_ptr()->autograd;
  if (!m) return;
  std::erase_if(m->post_accumulate_hooks, [id](const auto& h) { return h.first == id; });
}

bool Tensor::requires_grad() const {
  const auto& m = checked_impl()->autograd;
  return m && (m->requires_grad || m->grad_fn);
}

bool Tensor::is_leaf() const {
  const auto& m = checked_impl()->autograd;
  return !m || !m->grad_fn;
}

Tensor Tensor::grad() const {
  const auto& m = checked_impl()->autograd;
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) const {
  checked_impl();
  if (grad.defined()) {
    if (grad.sizes() != sizes() || grad.dtype() != dtype())
      throw ShapeError(fmt::format(
          "set_grad: the gradient is {} {} but the tensor is {} {}; they must be the same",
          dtype_name(grad.dtype()), shape_str(grad.sizes()), dtype_name(dtype()),
          shape_str(sizes())));
    if (grad.device() != device())
      throw DeviceMismatchError(
          fmt::format("set_grad: the gradient is on {} but the tensor is on {}; move it first",
                      grad.device().str(), device().str()));
  } else if (!impl_->autograd) {
    return;  // nothing to clear
  }
  meta_of(*this).grad = grad.defined() ? grad.detach() : Tensor();
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  autograd::backward({*this},
                     gradient.defined() ? std::vector<Tensor>{gradient} : std::vector<Tensor>{},
                     retain_graph, create_graph);
}

Tensor Tensor::detach() const {
  const TensorImpl& me = *checked_impl();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = me.storage;
  impl->sizes = me.sizes;
  impl->strides = me.strides;
  impl->offset = me.offset;
  impl->dtype = me.dtype;
  return Tensor(std::move(impl));
}

void Tensor::retain_grad() const {
  const auto& m = checked_impl()->autograd;
  if (!m || (!m->requires_grad && !m->grad_fn))
    throw Error("retain_grad: this tensor does not require grad, so it gets no gradient");
  if (m->grad_fn) m->grad_fn->retained = m;  // a leaf keeps its gradient anyway
}

std::uint64_t Tensor::add_grad_hook(GradHook hook) const {
  const auto& m = checked_impl()->autograd;
  if (!m || (!m->requires_grad && !m->grad_fn))
    throw Error(fmt::format(
        "register_hook: cannot register a hook on a tensor that doesn't require gradient (shape "
        "{}); call requires_grad_() on it, or on the inputs it is made from, first",
        shape_str(sizes())));
  static std::atomic<std::uint64_t> next_id{1};
  const std::uint64_t id = next_id++;
  if (is_leaf()) {
    m->hooks.emplace_back(id, std::move(hook));
    return id;
  }
  // A result's hooks go on the node its gradient flows into (a view's made again where its
  // base was written in place since), as PyTorch's tensor pre-hooks go on its grad_fn.
  const std::shared_ptr<autograd::Node> node = autograd::gradient_edge(*this);
  node->hooks.emplace_back(id, std::move(hook));
  std::erase_if(m->hooked_nodes, [](const auto& h) { return h.second.expired(); });
  m->hooked_nodes.emplace_back(id, node);
  return id;
}

void Tensor::remove_hook(std::uint64_t id) const {
  const auto& m = checked_impl()->autograd;
  if (!m) return;
  std::erase_if(m->hooks, [id](const auto& h) { return h.first == id; });
  for (const auto& [hook_id, weak] : m->hooked_nodes)
    if (const auto node = weak.lock(); node && hook_id == id)
      std::erase_if(node->hooks, [id](const auto& h) { return h.first == id; });
  std::erase_if(m->hooked_nodes, [id](const auto& h) { return h.first == id; });
}

std::string Tensor::grad_fn_name() const {
  const auto& m = checked_impl()->autograd;
  return m && m->grad_fn ? m->grad_fn->name() : std::string();
}

}  // namespace ferry
