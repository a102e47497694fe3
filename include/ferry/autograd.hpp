// ferry/autograd.hpp — reverse-mode automatic differentiation.
//
// Note [Autograd]
// A tensor that requires grad is either a leaf (made by the user, then
// requires_grad_() — a model's parameters) or the result of an op on such
// tensors. While grad mode is on (the default; NoGradGuard turns it off for a
// scope, per thread), every differentiable op whose inputs require grad
// attaches a node to its result: the op's backward formula, the tensors it
// saved, and edges to the nodes of its inputs. backward() walks that graph
// from the result back to the leaves and adds each leaf's gradient into its
// grad(), on the leaf's own device: the formulas are ops like any other, so
// they run wherever the tensors live, with no copy through the host.
//
// Semantics follow PyTorch: only floating tensors can require grad; outputs
// of integer or bool dtype (comparisons, argmax, casts to int) never do;
// broadcasting is undone by summing a gradient back to its input's shape; a
// leaf's gradient accumulates across backward() calls until zeroed; the graph
// is freed by backward() unless retain_graph is set, and a second backward()
// through a freed graph raises Error. A tensor saved for backward that is
// modified in place before backward() runs (an optimizer step, copy_, fill_)
// makes backward() raise Error instead of computing a wrong gradient: every
// storage carries a version counter that in-place writes bump. The in-place
// `_` ops (ferry/ops_inplace.hpp) are recorded, PyTorch's way, and refuse a
// leaf that requires grad or a view of one (Note [In-place ops]); copy_ and
// fill_ are not recorded, so they refuse any tensor that requires grad while
// grad mode is on (update parameters under NoGradGuard, as the optimizers do).
//
// Higher-order gradients: with create_graph, backward() and grad() record the
// ops of the backward pass itself, so the gradients they return have a graph
// of their own that another backward() or grad() differentiates (PyTorch's
// create_graph=True: gradient penalties, Hessian-vector products). create_graph
// keeps the graph (retain_graph), and backward() then leaves in grad() a
// gradient with that history, which holds the graph until grad() is reset
// (zero_grad), as in PyTorch. Ops whose backward kernel has no derivative of
// its own raise UnsupportedError, naming the kernel, when a second backward
// reaches them (docs/autograd.md lists them; Note [Higher-order gradients]).
//
// Note [Gradient hooks]
// Tensor::register_hook is PyTorch's (the autograd note's "Backward Hooks execution", PyTorch 2's
// order). A result's hooks go on the node its gradient flows into (its grad_fn when registered:
// an in-place write afterwards leaves them with the value before it); a leaf's are kept with the
// leaf and run by its AccumulateGrad. The engine runs them when that node's gradient is whole
// (the sum over every use), before anything sees it: grad() captures (autograd::grad's inputs,
// leaves or not: their hooks run there too), retain_grad(), the node's formula or the leaf's
// accumulation, then the post-accumulate hooks. Each runs on the last one's result; a defined
// return replaces the gradient and must be its like (ShapeError, DTypeError or
// DeviceMismatchError, naming the hook's tensor). Under create_graph a hook's ops are recorded
// like the formulas', and a later pass through the same node runs the hook again, as in PyTorch.
//
// Thread-safety: grad mode is per thread (a NoGradGuard on one thread leaves
// the others recording, as in PyTorch). Threads may run backward() and
// grad() at the same time on graphs that share no node; a pass that reaches
// a node another pass is running through (the same graph, or a leaf that
// both graphs accumulate into) raises Error naming the node and changes
// nothing (Note [One backward at a time] in runtime/autograd/graph.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ferry/tensor.hpp"

namespace ferry {

// Grad mode for the current thread.
bool is_grad_enabled();
void set_grad_enabled(bool enabled);

// Turns grad mode off for a scope (inference, parameter updates); restores
// the previous mode on exit.
class NoGradGuard {
 public:
  NoGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Turns grad mode on for a scope (inside a NoGradGuard).
class EnableGradGuard {
 public:
  EnableGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(true); }
  ~EnableGradGuard() { set_grad_enabled(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

namespace autograd {

// Backpropagates from several results at once (their gradients add up).
// grad_tensors[i] is d(loss)/d(tensors[i]); it may be left out (empty vector,
// or an undefined tensor) for one-element results, meaning 1. Errors: a result
// that does not require grad, a missing gradient for a result of more than one
// element, a gradient of another shape (ShapeError) or device. create_graph: see
// "Higher-order gradients" above (implies retain_graph).
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              bool retain_graph = false, bool create_graph = false);

// The gradients of `outputs` with respect to `inputs`, returned instead of
// accumulated into any grad(): result[i] has inputs[i]'s shape. An input the
// outputs do not depend on gives an undefined tensor when allow_unused,
// else Error. With create_graph the results are differentiable (and the graph
// is retained).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool allow_unused = false, bool create_graph = false);

// Calls hook(leaf.grad()) each time backward() has added into the gradient of `leaf`, on the
// thread running backward (PyTorch's Tensor.register_post_accumulate_grad_hook:
// DistributedDataParallel starts a bucket's all-reduce from it). Returns an id for
// remove_post_accumulate_grad_hook. Error unless `leaf` is a leaf that requires grad.
std::uint64_t register_post_accumulate_grad_hook(const Tensor& leaf,
                                                 std::function<void(const Tensor& grad)> hook);
void remove_post_accumulate_grad_hook(const Tensor& leaf, std::uint64_t id);  // unknown: no-op

}  // namespace autograd
}  // namespace ferry
