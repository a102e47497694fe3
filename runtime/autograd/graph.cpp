// runtime/autograd/graph.cpp — grad mode, recording, saved tensors and leaf
// accumulation (Note [Autograd] in ferry/autograd.hpp, Note [Backward graph
// ownership] in graph.hpp).
#include "autograd/graph.hpp"

#include <fmt/format.h>

#include <atomic>

#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"

namespace ferry {
namespace {
thread_local bool t_grad_enabled = true;
}  // namespace

bool is_grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }

namespace autograd {
namespace {

bool needs_grad(const Tensor& t) {
  if (!t.defined()) return false;
  const auto& m = t.impl_ptr()->autograd;
  return m && (m->requires_grad || m->grad_fn);
}

// A node whose backward is a formula (a lambda holding Saved tensors).
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, BackwardFn fn) : Node(std::move(name)), fn_(std::move(fn)) {}

  std::vector<Tensor> apply(const Tensor& grad) override {
    if (!fn_)
      throw Error(fmt::format(
          "backward: tried to go through the graph a second time, but {} already freed the "
          "tensors it saved; pass retain_graph = true to the first backward() if you need to "
          "backward twice",
          name()));
    std::vector<bool> needs(next.size());
    for (std::size_t i = 0; i < next.size(); ++i) needs[i] = next[i] != nullptr;
    return fn_(grad, Needs(std::move(needs)));
  }
  void release() override { fn_ = nullptr; }

 private:
  BackwardFn fn_;
};

}  // namespace

std::uint64_t Node::next_sequence() {
  static std::atomic<std::uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

namespace {
thread_local const std::shared_ptr<Node>* t_applying = nullptr;

// `t` (detached) as a result of `node`: a gradient of it flows into node.
Tensor with_history(const Tensor& t, const std::shared_ptr<Node>& node) {
  Tensor alias = t.detach();
  meta_of(alias).grad_fn = node;
  return alias;
}
}  // namespace

ApplyingNode::ApplyingNode(const std::shared_ptr<Node>* node) : previous_(t_applying) {
  t_applying = node;
}
ApplyingNode::~ApplyingNode() { t_applying = previous_; }
const std::shared_ptr<Node>* ApplyingNode::current() { return t_applying; }

Saved::Saved(const Tensor& t) {
  if (!t.defined()) return;
  tensor_ = t.detach();
  version_ = t.storage()->version();
  if (needs_grad(t)) history_ = gradient_edge(t);
}

Tensor Saved::get() const {
  if (tensor_.defined() && tensor_.storage()->version() != version_)
    throw Error(fmt::format(
        "backward: a tensor saved for the gradient (shape {}, {}, on {}) was modified in place "
        "after it was used (version {} now, {} when saved), so its gradient would be wrong; "
        "clone() it before modifying it, or modify it after backward()",
        shape_str(tensor_.sizes()), dtype_name(tensor_.dtype()), tensor_.device().str(),
        tensor_.storage()->version(), version_));
  if (!t_applying || !tensor_.defined() || !is_grad_enabled()) return tensor_;
  // Note [Higher-order gradients]: the tensor with its history.
  if (history_) return with_history(tensor_, history_);
  const std::shared_ptr<Node>& node = *t_applying;
  const Node::Output& out = node->output;
  if (out.storage != tensor_.storage().get() || !is_floating(tensor_.dtype())) return tensor_;
  if (tensor_.storage_offset() != out.offset || tensor_.sizes() != out.sizes ||
      tensor_.strides() != out.strides)
    throw UnsupportedError(fmt::format(
        "backward with create_graph: {} saved a view of its own output (shape {}, output {}), "
        "whose history a second backward cannot follow",
        node->name(), shape_str(tensor_.sizes()), shape_str(out.sizes)));
  return with_history(tensor_, node);
}

AutogradMeta& meta_of(const Tensor& t) {
  auto& m = t.impl_ptr()->autograd;
  if (!m) m = std::make_shared<AutogradMeta>();
  return *m;
}

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  if (!needs_grad(t)) return nullptr;
  AutogradMeta& m = meta_of(t);
  const std::shared_ptr<TensorImpl> root = t.impl_ptr()->view_base.lock();
  if (m.grad_fn && root && root->autograd && root->autograd->history != m.base_history) {
    // Note [In-place through a view]: the base was written in place since.
    m.grad_fn = view_of_base(Tensor(root), t);
    m.base_history = root->autograd->history;
  }
  if (m.grad_fn) return m.grad_fn;
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    m.grad_accumulator = acc;
  }
  return acc;
}

bool should_record(std::initializer_list<const Tensor*> tensors) {
  if (!t_grad_enabled) return false;
  for (const Tensor* t : tensors)
    if (t && needs_grad(*t)) return true;
  return false;
}

bool should_record(const std::vector<Tensor>& tensors) {
  if (!t_grad_enabled) return false;
  for (const Tensor& t : tensors)
    if (needs_grad(t)) return true;
  return false;
}

namespace {

// Gives `output` the node `node`, with an edge to each input (Note [Backward graph ownership]).
void attach(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
            const Tensor& output) {
  node->next.reserve(inputs.size());
  node->inputs.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    if (in.defined() && in.is_same(output))
      throw Error(
          fmt::format("autograd: {} returned one of its inputs as its result; "
                      "a recorded op must make a new tensor (a bug in ferry)",
                      node->name()));
    node->next.push_back(gradient_edge(in));
    node->inputs.push_back(in.defined() ? InputInfo{in.sizes(), in.dtype(), in.device()}
                                        : InputInfo{});
    if (in.defined() && in.requires_grad() && in.storage() == output.storage()) {
      node->view = true;
      const auto& meta = in.impl_ptr()->autograd;
      const Node* base = meta ? meta->grad_fn.get() : nullptr;
      node->view_of_leaf |= !base || base->view_of_leaf;
      const std::shared_ptr<TensorImpl> root = output.impl_ptr()->view_base.lock();
      meta_of(output).base_history = root && root->autograd ? root->autograd->history : 0;
    }
  }
  node->output = {output.storage().get(), output.storage_offset(), output.sizes(),
                  output.strides()};
  meta_of(output).grad_fn = node;
}

}  // namespace

void record(std::string name, const std::vector<Tensor>& inputs, const Tensor& output,
            BackwardFn backward) {
  if (!should_record(inputs) || !is_floating(output.dtype())) return;
  attach(std::make_shared<FunctionNode>(std::move(name), std::move(backward)), inputs, output);
}

void record_part(std::string name, const Tensor& input, const Tensor& output, PartFn part) {
  if (!should_record({&input}) || !is_floating(output.dtype())) return;
  attach(std::make_shared<PartNode>(std::move(name), std::move(part)), {input}, output);
}

std::shared_ptr<Node> make_part_node(std::string name, PartFn part) {
  return std::make_shared<PartNode>(std::move(name), std::move(part));
}

std::vector<Tensor> PartNode::apply(const Tensor& grad) {
  const InputInfo& in = inputs.at(0);
  Tensor whole = zeros(in.sizes, {.dtype = in.dtype, .device = in.device});
  part_(whole).copy_(grad);
  return {whole};
}

std::shared_ptr<Node> make_node(std::string name, BackwardFn backward) {
  return std::make_shared<FunctionNode>(std::move(name), std::move(backward));
}

void record_without_derivative(std::string_view name, const std::vector<Tensor>& inputs,
                               const std::vector<Tensor>& outputs) {
  for (const Tensor& out : outputs) {
    if (!out.defined()) continue;
    record(std::string(name) + "Backward", inputs, out,
           [name = std::string(name)](const Tensor&, const Needs&) -> std::vector<Tensor> {
             throw UnsupportedError(fmt::format(
                 "backward: {} has no derivative of its own in ferry, so a gradient computed "
                 "with create_graph cannot be differentiated through it (a second backward, "
                 "e.g. a gradient penalty or a Hessian-vector product, reached it)",
                 name));
           });
  }
}

std::unordered_set<const TensorImpl*> leaves_reached_from(const Tensor& root) {
  std::unordered_set<const TensorImpl*> reached;
  std::unordered_set<const Node*> seen;
  std::vector<std::shared_ptr<Node>> stack;
  if (root.defined() && root.impl_ptr()->autograd && root.impl_ptr()->autograd->grad_fn)
    stack.push_back(root.impl_ptr()->autograd->grad_fn);
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    if (!n || !seen.insert(n.get()).second) continue;
    if (auto* acc = dynamic_cast<AccumulateGrad*>(n.get())) reached.insert(acc->leaf().get());
    for (const auto& next : n->next) stack.push_back(next);
  }
  return reached;
}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad) {
  AutogradMeta& m = *leaf_->autograd;
  if (!m.requires_grad) return {};  // requires_grad_(false) after the graph was built
  if (!m.grad.defined()) {
    // Keep the gradient itself when nothing else can see its memory (the
    // engine hands over its only handle); otherwise keep a copy, so that two
    // leaves never share one grad tensor. Dense in either layout: a
    // channels-last weight's gradient comes channels-last from its kernel.
    const bool dense =
        grad.is_contiguous() || grad.suggest_memory_format() != MemoryFormat::contiguous;
    const bool owned = grad.impl_ptr().use_count() == 1 && grad.storage().use_count() == 1 &&
                       grad.storage_offset() == 0 && dense &&
                       grad.storage()->nbytes() == std::size_t(grad.numel()) * grad.element_size();
    m.grad = owned ? grad : grad.clone();
  } else if (is_grad_enabled()) {
    // Note [Higher-order gradients]: the engine turns grad mode on only for create_graph, which
    // keeps the gradient's graph in grad(): later gradients add out of place, as PyTorch's
    // AccumulateGrad adds then.
    m.grad = add(m.grad, grad);
  } else {
    // Later gradients add in place, so grad() keeps its identity (and memory).
    detail::run_kernel(OpId::add, {m.grad, grad}, {m.grad});
    m.grad.storage()->bump_version();
  }
  for (const auto& [id, hook] : m.post_accumulate_hooks) hook(m.grad);
  return {};
}

}  // namespace autograd
}  // namespace ferry
