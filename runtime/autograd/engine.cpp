// runtime/autograd/engine.cpp — runs the backward graph (Note [Autograd] in
// ferry/autograd.hpp).
//
// Note [Backward order]
// A node runs once every node that feeds it a gradient has run, so its
// gradient is complete (the sum over all uses of its output) before its
// formula sees it. The engine first counts, for each node reachable from the
// roots, how many edges point at it; a node is ready when that count drops to
// zero. Among ready nodes the most recently created runs first (PyTorch's
// order), which frees a layer's activations soon after its backward. Graphs
// are walked with explicit stacks, so a deep graph (a long unrolled loop)
// cannot overflow the call stack.
#include <fmt/format.h>

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autocast_internal.hpp"
#include "autograd/graph.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "profiler/profiler_hooks.hpp"

namespace ferry::autograd {
namespace {

struct Task {
  bool retain_graph = false;
  bool create_graph = false;  // Note [Higher-order gradients] in graph.hpp
  bool accumulate = true;  // false for grad(): leaves' grad() are left alone
  std::unordered_map<Node*, std::size_t> capture;  // grad(): node -> index of its input
  std::vector<Tensor> captured;
};

// Every node reachable from `roots`, with how many edges point at it.
std::unordered_map<Node*, int> count_dependencies(const std::vector<std::shared_ptr<Node>>& roots) {
  std::unordered_map<Node*, int> deps;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const auto& r : roots)
    if (seen.insert(r.get()).second) stack.push_back(r.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    deps.try_emplace(n, 0);
    for (const auto& child : n->next) {
      if (!child) continue;
      ++deps[child.get()];
      if (seen.insert(child.get()).second) stack.push_back(child.get());
    }
  }
  return deps;
}

// grad(): the nodes worth running — those from which a captured node can be
// reached through at least one edge (post-order walk).
std::unordered_set<Node*> nodes_to_run(const std::vector<std::shared_ptr<Node>>& roots,
                                       const std::unordered_map<Node*, std::size_t>& capture) {
  std::unordered_map<Node*, bool> leads;  // finished nodes: does a captured node lie below?
  std::unordered_set<Node*> run;
  struct Frame {
    Node* node;
    std::size_t child;
  };
  std::vector<Frame> stack;
  for (const auto& r : roots) {
    if (leads.count(r.get())) continue;
    stack.push_back({r.get(), 0});
    leads.emplace(r.get(), false);
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.child < f.node->next.size()) {
        Node* c = f.node->next[f.child++].get();
        if (c && leads.emplace(c, false).second) stack.push_back({c, 0});
        continue;
      }
      bool below = false;
      for (const auto& c : f.node->next)
        if (c && (capture.count(c.get()) || leads[c.get()])) below = true;
      leads[f.node] = below;
      if (below) run.insert(f.node);
      stack.pop_back();
    }
  }
  return run;
}

void add_into(Tensor& slot, const Tensor& g) { slot = slot.defined() ? add(slot, g) : g; }

// A node's gradient as it builds up (Note [Gradients of parts] in graph.hpp): `owned` when the
// engine made the tensor, so that nothing else sees it and later gradients add in place.
struct Buffer {
  Tensor grad;
  bool owned = false;
};

// With create_graph every sum is a recorded op, out of place (`owned` stays false).
void add_into(Buffer& b, const Tensor& g, bool create_graph) {
  if (!b.grad.defined()) {
    b.grad = g;
  } else if (create_graph) {
    b.grad = add(b.grad, g);
  } else if (b.owned) {
    b.grad.add_(g);
  } else {
    b.grad = add(b.grad, g);
    b.owned = true;
  }
}

// Adds g, the gradient of the part `node` selects, into that part of the input's buffer. The
// buffer is made contiguous and the engine's own first: a part is cut at its offset and strides
// within a contiguous tensor of the input's shape (the views of in-place writes, Note [In-place
// through a view]), and a gradient that came in channels-last or transposed is laid out
// otherwise.
void add_part(Buffer& b, const PartNode& node, const Tensor& g) {
  const InputInfo& in = node.inputs.at(0);
  if (!b.grad.defined()) {
    b = {zeros(in.sizes, {.dtype = in.dtype, .device = in.device}), true};
  } else if (!b.grad.is_contiguous()) {
    b = {b.grad.contiguous(), true};  // a new tensor
  } else if (!b.owned) {
    b = {b.grad.clone(), true};
  }
  Tensor part = node.part_of(b.grad);
  if (part.sizes() != g.sizes() || g.dtype() != in.dtype || g.device() != in.device)
    throw Error(fmt::format(
        "autograd: {} gave its part a gradient of shape {} ({}, on {}) but the part is {} ({}, "
        "on {}) (a bug in ferry's backward formula)",
        node.name(), shape_str(g.sizes()), dtype_name(g.dtype()), g.device().str(),
        shape_str(part.sizes()), dtype_name(in.dtype), in.device.str()));
  part.add_(g);
}

// add_part's sum as recorded ops (create_graph): the part's gradient placed in zeros, a node
// whose own backward takes the part back out, as PyTorch's SliceBackward's is a slice.
void add_part_recorded(Buffer& b, const std::shared_ptr<Node>& node, const Tensor& g) {
  Tensor whole;
  {
    NoGradGuard no_grad;
    whole = node->apply(g.detach()).at(0);
  }
  record(node->name() + "Backward", {g}, whole,
         [node](const Tensor& gg, const Needs&) -> std::vector<Tensor> {
           return {static_cast<const PartNode&>(*node).part_of(gg.contiguous())};
         });
  add_into(b, whole, true);
}

// A formula's result must fit the input it is for; a mismatch is a bug in a
// formula, reported by name rather than as a confusing later error.
void check_gradient(const Node& n, std::size_t i, const Tensor& g) {
  const InputInfo& want = n.inputs[i];
  if (g.sizes() != want.sizes || g.dtype() != want.dtype || g.device() != want.device)
    throw Error(fmt::format(
        "autograd: {} gave input {} a gradient of shape {} ({}, on {}) but the input is {} ({}, "
        "on {}) (a bug in ferry's backward formula)",
        n.name(), i, shape_str(g.sizes()), dtype_name(g.dtype()), g.device().str(),
        shape_str(want.sizes), dtype_name(want.dtype), want.device.str()));
}

// Note [Gradient hooks] (ferry/autograd.hpp): the register_hook hooks of the tensor whose
// gradient `node` receives (a leaf's, through its AccumulateGrad), in order, each on the last
// one's result; a replacement must be the gradient's like.
Tensor run_hooks(const Node& node, Tensor grad) {
  const auto* acc = dynamic_cast<const AccumulateGrad*>(&node);
  // A copy: a hook may remove itself, or another.
  std::vector<std::pair<std::uint64_t, Tensor::GradHook>> hooks;
  if (!acc)
    hooks = node.hooks;
  else if (const auto& meta = acc->leaf()->autograd)
    hooks = meta->hooks;
  for (const auto& [id, hook] : hooks) {
    Tensor out = hook(grad);
    if (!out.defined()) continue;
    const std::string where = acc ? "a leaf's" : "the tensor " + node.name() + " made's";
    if (out.sizes() != grad.sizes())
      throw ShapeError(fmt::format(
          "register_hook: a hook on {} gradient returned a tensor of shape {}, but the gradient "
          "has shape {}; a hook returns the gradient's like, or nothing",
          where, shape_str(out.sizes()), shape_str(grad.sizes())));
    if (out.dtype() != grad.dtype())
      throw DTypeError(fmt::format(
          "register_hook: a hook on {} gradient returned a tensor of dtype {}, but the gradient "
          "is {}; a hook returns the gradient's like, or nothing",
          where, dtype_name(out.dtype()), dtype_name(grad.dtype())));
    if (out.device() != grad.device())
      throw DeviceMismatchError(fmt::format(
          "register_hook: a hook on {} gradient returned a tensor on {}, but the gradient is on "
          "{}; a hook returns the gradient's like, or nothing",
          where, out.device().str(), grad.device().str()));
    grad = std::move(out);
  }
  return grad;
}

void keep_retained(Node& n, const Tensor& g) {
  auto meta = n.retained.lock();
  if (!meta) return;
  meta->grad = meta->grad.defined() ? add(meta->grad, g) : g.clone();
}

// Note [One backward at a time] (graph.hpp): holds the claim on every node of
// a pass, released when the pass ends however it ends.
class Claims {
 public:
  explicit Claims(const std::unordered_map<Node*, int>& nodes) {
    held_.reserve(nodes.size());
    for (const auto& [node, count] : nodes) {
      if (!node->claim()) {
        release();
        throw Error(fmt::format(
            "backward: the graph's {} node is already being differentiated by another "
            "backward() or grad() running at the same time (on another thread); a graph, and "
            "every leaf in it, takes one backward pass at a time: give each thread its own "
            "graph and its own parameters, or wait for the other pass to finish",
            node->name()));
      }
      held_.push_back(node);
    }
  }
  ~Claims() { release(); }
  Claims(const Claims&) = delete;
  Claims& operator=(const Claims&) = delete;

 private:
  void release() {
    for (Node* n : held_) n->unclaim();
    held_.clear();
  }
  std::vector<Node*> held_;
};

void execute(const std::vector<std::shared_ptr<Node>>& roots, const std::vector<Tensor>& grads,
             Task& task) {
  // Formulas are ops like any other: recorded only when the gradients get a graph of their own
  // (Note [Higher-order gradients] in graph.hpp). A pass nested in another's apply (a
  // checkpoint's) sets both for its own span.
  const bool create_graph = task.create_graph;
  const bool was_enabled = is_grad_enabled();
  set_grad_enabled(create_graph);
  struct Restore {
    bool on;
    ~Restore() { set_grad_enabled(on); }
  } restore{was_enabled};
  const ApplyingNode none(nullptr);
  std::unordered_map<Node*, int> deps = count_dependencies(roots);
  Claims claims(deps);
  std::unordered_set<Node*> run;
  if (!task.accumulate) run = nodes_to_run(roots, task.capture);
  std::unordered_map<Node*, Buffer> buffers;
  std::unordered_map<Node*, std::shared_ptr<Node>> owners;  // keeps queued nodes alive
  auto by_sequence = [](const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) {
    return a->sequence() < b->sequence();
  };
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>,
                      decltype(by_sequence)>
      ready(by_sequence);
  for (std::size_t i = 0; i < roots.size(); ++i) {
    add_into(buffers[roots[i].get()], grads[i], create_graph);
    if (deps[roots[i].get()] == 0 && owners.emplace(roots[i].get(), roots[i]).second)
      ready.push(roots[i]);
  }
  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    Tensor grad;
    if (auto it = buffers.find(node.get()); it != buffers.end()) {
      grad = std::move(it->second.grad);
      buffers.erase(it);
    }
    const auto c = task.capture.find(node.get());
    const bool capture = c != task.capture.end() && grad.defined();
    const bool is_leaf = dynamic_cast<AccumulateGrad*>(node.get()) != nullptr;
    const bool apply =
        grad.defined() && (task.accumulate ? true : !is_leaf && run.count(node.get()));
    if (capture || apply) grad = run_hooks(*node, std::move(grad));
    if (capture) add_into(task.captured[c->second], grad);  // a recorded op with create_graph
    if (apply) {
      if (task.accumulate) keep_retained(*node, grad);
      // Note [Profiler]: each node's backward as a range around the kernels it runs.
      profiler::Range range =
          profiler::detail::on() ? profiler::Range(node->name()) : profiler::Range();
      std::vector<Tensor> in_grads;
      if (const auto* part = dynamic_cast<const PartNode*>(node.get())) {
        if (node->next[0] && create_graph)
          add_part_recorded(buffers[node->next[0].get()], node, grad);
        else if (node->next[0])
          add_part(buffers[node->next[0].get()], *part, grad);
      } else {
        const ApplyingNode applying(create_graph ? &node : nullptr);
        in_grads = node->apply(std::move(grad));
      }
      range.end();
      for (std::size_t i = 0; i < in_grads.size() && i < node->next.size(); ++i) {
        if (!node->next[i] || !in_grads[i].defined()) continue;
        check_gradient(*node, i, in_grads[i]);
        add_into(buffers[node->next[i].get()], in_grads[i], create_graph);
      }
      if (!task.retain_graph) node->release();
    }
    for (const auto& child : node->next) {
      if (!child) continue;
      if (--deps[child.get()] == 0 && owners.emplace(child.get(), child).second) ready.push(child);
    }
    owners.erase(node.get());
  }
}

// The gradients to start from: given ones, checked against their results, or
// 1 for one-element results.
std::vector<Tensor> root_gradients(std::string_view who, const std::vector<Tensor>& tensors,
                                   const std::vector<Tensor>& grads, bool create_graph) {
  if (!grads.empty() && grads.size() != tensors.size())
    throw Error(fmt::format("{}: {} tensors but {} gradients; give one gradient per tensor", who,
                            tensors.size(), grads.size()));
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined()) throw Error(fmt::format("{}: tensors[{}] is undefined", who, i));
    Tensor g = grads.empty() ? Tensor() : grads[i];
    if (!g.defined()) {
      if (t.numel() != 1)
        throw Error(fmt::format(
            "{}: tensors[{}] has {} elements (shape {}); a gradient can only be implied for a "
            "one-element result, so pass d(loss)/d(result), e.g. ferry::ones_like(result)",
            who, i, t.numel(), shape_str(t.sizes())));
      out.push_back(ones_like(t.detach()));
      continue;
    }
    if (g.sizes() != t.sizes())
      throw ShapeError(
          fmt::format("{}: the gradient of tensors[{}] has shape {} but the tensor "
                      "has shape {}; they must be equal",
                      who, i, shape_str(g.sizes()), shape_str(t.sizes())));
    if (g.device() != t.device())
      throw DeviceMismatchError(fmt::format(
          "{}: the gradient of tensors[{}] is on {} but the tensor is on {}; move it first", who, i,
          g.device().str(), t.device().str()));
    // With create_graph a given gradient keeps its history, as PyTorch's grad_outputs do.
    out.push_back((create_graph ? g : g.detach()).to(t.dtype()));
  }
  return out;
}

std::vector<std::shared_ptr<Node>> root_nodes(std::string_view who,
                                              const std::vector<Tensor>& tensors) {
  std::vector<std::shared_ptr<Node>> roots;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    auto node = gradient_edge(tensors[i]);
    if (!node)
      throw Error(
          fmt::format("{}: tensors[{}] does not require grad and has no backward graph; call "
                      "requires_grad_() on the inputs before the ops, outside any NoGradGuard",
                      who, i));
    roots.push_back(std::move(node));
  }
  return roots;
}

}  // namespace

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
              bool retain_graph, bool create_graph) {
  const detail::AutocastSuspended no_autocast;  // each gradient in its forward's dtypes
  std::vector<Tensor> grads = root_gradients("backward", tensors, grad_tensors, create_graph);
  Task task;
  task.retain_graph = retain_graph || create_graph;
  task.create_graph = create_graph;
  execute(root_nodes("backward", tensors), grads, task);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool allow_unused, bool create_graph) {
  const detail::AutocastSuspended no_autocast;
  std::vector<Tensor> grads = root_gradients("grad", outputs, grad_outputs, create_graph);
  Task task;
  task.retain_graph = retain_graph || create_graph;
  task.create_graph = create_graph;
  task.accumulate = false;
  task.captured.resize(inputs.size());
  std::vector<std::shared_ptr<Node>> input_nodes;  // kept alive while the task runs
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    auto node = inputs[i].defined() ? gradient_edge(inputs[i]) : nullptr;
    if (!node)
      throw Error(
          fmt::format("grad: inputs[{}] does not require grad; call requires_grad_() on it "
                      "before the ops",
                      i));
    if (!task.capture.emplace(node.get(), i).second)
      throw Error(fmt::format("grad: inputs[{}] appears twice", i));
    input_nodes.push_back(std::move(node));
  }
  execute(root_nodes("grad", outputs), grads, task);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (task.captured[i].defined()) continue;
    if (!allow_unused)
      throw Error(fmt::format(
          "grad: the outputs do not depend on inputs[{}] (shape {}); pass allow_unused = true to "
          "get an undefined tensor for it",
          i, shape_str(inputs[i].sizes())));
  }
  return task.captured;
}

}  // namespace ferry::autograd
