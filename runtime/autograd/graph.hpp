// runtime/autograd/graph.hpp — the backward graph: nodes, edges, saved tensors,
// and the per-tensor metadata (Note [Autograd] in ferry/autograd.hpp).
// Internal to the core.
//
// Note [Backward graph ownership]
// A result owns its node (AutogradMeta::grad_fn); a node owns the nodes of its
// inputs through its edges, so a graph lives exactly as long as some result of
// it does. Nothing points back up the graph: saved tensors are kept as
// detached handles (no autograd metadata, so a node that saves its own output
// does not own itself) beside the node their history ended in when saved (an
// input's, made before the node that saves it), a leaf's AccumulateGrad node
// is shared through a weak pointer in the leaf's metadata, and a node that
// must fill a result's grad() (retain_grad) reaches that metadata through a
// weak pointer.
//
// Note [Higher-order gradients]
// backward() and grad() with create_graph run the formulas with grad mode on,
// so the gradients they return are results of recorded ops, with a graph that
// a second backward() differentiates (PyTorch's create_graph=True: Hessian-vector
// products, gradient penalties). For that the formulas must see the saved
// tensors with their history, as PyTorch's SavedVariable gives them back:
// Saved::get() returns, while the engine applies a node in that mode, an alias
// whose grad_fn is the node the tensor's history ended in when it was saved (a
// leaf's AccumulateGrad for a leaf), or, for the node's own output (saved
// before the node existed, so with no history then), the node itself, found
// by the output's memory (Node::output). The formulas are ops, so most are
// differentiable as they stand; the kernels that only backward passes run
// (relu_backward, index_add ...) get formulas of their own where they are
// cheap (runtime/autograd/backward_ops.cpp), and the others (convolutions',
// pools', the norms', attention's, resampling's) a node that raises
// UnsupportedError when a second backward reaches it, rather than a silently
// missing term (record_without_derivative).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "ferry/tensor.hpp"

namespace ferry::autograd {

class Node;

struct AutogradMeta {
  bool requires_grad = false;            // leaves: the user asked for gradients
  Tensor grad;                           // leaves, and results that retain_grad()
  std::shared_ptr<Node> grad_fn;         // results of recorded ops
  std::weak_ptr<Node> grad_accumulator;  // leaves: their one AccumulateGrad
  // How many in-place writes replaced this tensor's grad_fn, and, for a view
  // (TensorImpl::view_base), that count of its base's when the view's grad_fn
  // was made: a view whose base was written since gets a grad_fn made again
  // from the base's (gradient_edge), as PyTorch regenerates it.
  std::uint64_t history = 0, base_history = 0;
  // Leaves: called with grad after AccumulateGrad adds into it, by id.
  std::vector<std::pair<std::uint64_t, std::function<void(const Tensor&)>>> post_accumulate_hooks;
  // Note [Gradient hooks]: a leaf's register_hook hooks, by id, and, for a result, the nodes its
  // hooks were put on (its grad_fn then: an in-place write since gives it another), for
  // remove_hook.
  std::vector<std::pair<std::uint64_t, Tensor::GradHook>> hooks;
  std::vector<std::pair<std::uint64_t, std::weak_ptr<Node>>> hooked_nodes;
};

// What a node knows of one forward input, to check the gradient it returns.
struct InputInfo {
  Shape sizes;
  DType dtype = DType::f32;
  Device device = Device::cpu();
};

class Node {
 public:
  explicit Node(std::string name) : name_(std::move(name)), sequence_(next_sequence()) {}
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // The gradients of the forward inputs (one per edge; undefined where an
  // input needs none) from the gradient of the forward output.
  virtual std::vector<Tensor> apply(const Tensor& grad) = 0;
  // Frees what apply() needed (backward without retain_graph).
  virtual void release() {}

  const std::string& name() const { return name_; }
  // Nodes made later run first when several are ready (as in PyTorch).
  std::uint64_t sequence() const { return sequence_; }
  // The node of each forward input; null where that input needs no gradient.
  std::vector<std::shared_ptr<Node>> next;
  std::vector<InputInfo> inputs;  // parallel to next
  // The output's metadata when the output retains its gradient.
  std::weak_ptr<AutogradMeta> retained;
  // The output's register_hook hooks, by id (Note [Gradient hooks] in ferry/autograd.hpp).
  std::vector<std::pair<std::uint64_t, Tensor::GradHook>> hooks;
  // Whether the output shares an input's memory (a view op), and whether the
  // memory is, through views, a leaf's that requires grad: the in-place ops'
  // checks (Note [In-place ops] in runtime/ops_inplace.cpp).
  bool view = false;
  bool view_of_leaf = false;
  // The output's memory and place in it, which Saved::get() knows the node's own saved output
  // by (Note [Higher-order gradients]). The storage is only compared, never followed.
  struct Output {
    const void* storage = nullptr;
    std::int64_t offset = 0;
    Shape sizes, strides;
  } output;

  // Note [One backward at a time]: a backward pass claims every node it will
  // visit, so two threads differentiating one graph (or two graphs that share
  // nodes, such as one leaf's AccumulateGrad) get an Error instead of racing
  // on the node's buffers and the leaf's grad(). False when already claimed.
  bool claim() { return !claimed_.exchange(true, std::memory_order_acquire); }
  void unclaim() { claimed_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> claimed_{false};
  static std::uint64_t next_sequence();
  std::string name_;
  std::uint64_t sequence_;
};

// The node of a leaf: adds the gradient into the leaf's grad().
class AccumulateGrad final : public Node {
 public:
  // view_of_leaf: the memory of a tensor whose grad_fn is this node (a saved leaf seen with
  // its history, Note [Higher-order gradients]) is the leaf's.
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf)
      : Node("AccumulateGrad"), leaf_(std::move(leaf)) {
    view_of_leaf = true;
  }
  std::vector<Tensor> apply(const Tensor& grad) override;
  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// Which inputs of a node want a gradient (a formula skips the others).
class Needs {
 public:
  explicit Needs(std::vector<bool> needs) : needs_(std::move(needs)) {}
  bool operator[](std::size_t i) const { return i < needs_.size() && needs_[i]; }

 private:
  std::vector<bool> needs_;
};

// A backward formula: input gradients from the output gradient.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad, const Needs& needs)>;

// A tensor kept for backward: a detached handle plus the version of its
// storage when it was saved; get() raises Error if it was written in place
// since. An undefined tensor saves as undefined. While the engine builds a
// graph of the gradients (create_graph), get() gives the tensor with its
// history (Note [Higher-order gradients]).
class Saved {
 public:
  Saved() = default;
  Saved(const Tensor& t);  // NOLINT(google-explicit-constructor): saving reads as assignment
  Tensor get() const;

 private:
  Tensor tensor_;
  std::uint64_t version_ = 0;
  std::shared_ptr<Node> history_;  // where a gradient of the tensor went when it was saved
};

// The node the engine is applying while it builds a graph of the gradients (create_graph),
// else null: what Saved::get() and the ops that refuse a second backward ask. Set for the
// calling thread by the engine, for the span of one apply().
class ApplyingNode {
 public:
  explicit ApplyingNode(const std::shared_ptr<Node>* node);
  ~ApplyingNode();
  ApplyingNode(const ApplyingNode&) = delete;
  ApplyingNode& operator=(const ApplyingNode&) = delete;
  static const std::shared_ptr<Node>* current();

 private:
  const std::shared_ptr<Node>* previous_;
};

// ---- recording (what op front-ends call) ----

// True when grad mode is on and a defined tensor among `tensors` requires grad.
bool should_record(std::initializer_list<const Tensor*> tensors);
bool should_record(const std::vector<Tensor>& tensors);

// Makes `output` the result of a node named `name` with edges to `inputs`
// (undefined inputs and those that need no gradient get none). Does nothing
// unless should_record(inputs) or when `output` is not floating (integer and
// bool results never require grad). `output` must be a new tensor, not one of
// the inputs.
void record(std::string name, const std::vector<Tensor>& inputs, const Tensor& output,
            BackwardFn backward);

// A node whose backward is `backward`, with no edges yet: for the graph
// surgery of in-place writes (runtime/autograd/formulas_views.cpp).
std::shared_ptr<Node> make_node(std::string name, BackwardFn backward);

// For a kernel with no derivative of its own (a backward kernel run while the engine builds a
// graph of the gradients): gives each floating output a node that raises UnsupportedError,
// naming `name`, if a backward reaches it (Note [Higher-order gradients]). Nothing unless
// should_record(inputs).
void record_without_derivative(std::string_view name, const std::vector<Tensor>& inputs,
                               const std::vector<Tensor>& outputs);

// Note [Gradients of parts]
// A view that selects part of its input (slice, narrow, select, and so chunk, split and
// unbind) has the output's gradient in that part of the input's gradient and zeros elsewhere.
// Formed view by view, that is a zero tensor of the input's size for every view: an LSTM's time
// steps, each a slice of one [steps · batch, 4 · hidden] projection, filled and added a tensor
// of that size per step (Note [Recurrent layers] in runtime/nn/rnn.cpp). So the node of such a
// view, a PartNode, hands the engine the gradient of its part alone, and the engine adds it into
// that part of the input's gradient buffer, which it makes (zeros) once and owns: k parts of a
// tensor cost one fill of it and the parts' own sizes, as PyTorch's SplitBackward's one cat.
// A buffer the engine made, and so owns, takes later gradients in place as well; a gradient a
// formula returned may be shared and is only read. Run on its own, a PartNode's apply() gives
// the whole gradient, zeros around the part.

// The part, as a view of `whole`, a contiguous tensor of the input's shape.
using PartFn = std::function<Tensor(const Tensor& whole)>;

class PartNode final : public Node {
 public:
  PartNode(std::string name, PartFn part) : Node(std::move(name)), part_(std::move(part)) {}
  std::vector<Tensor> apply(const Tensor& grad) override;
  Tensor part_of(const Tensor& whole) const { return part_(whole); }

 private:
  PartFn part_;
};

// record() for a view op whose output is `part` of `input` (Note [Gradients of parts]).
void record_part(std::string name, const Tensor& input, const Tensor& output, PartFn part);
// A PartNode with no edges yet (the graph surgery of in-place writes).
std::shared_ptr<Node> make_part_node(std::string name, PartFn part);

// The leaves whose AccumulateGrad a backward from `root` would reach (none when root has no
// grad_fn): what DistributedDataParallel's find_unused_parameters asks before backward runs.
std::unordered_set<const TensorImpl*> leaves_reached_from(const Tensor& root);

// The metadata of a tensor, made on first use.
AutogradMeta& meta_of(const Tensor& t);
// The node a gradient for `t` flows into: its grad_fn, or its leaf's
// AccumulateGrad (made on first use); null when it needs no gradient.
std::shared_ptr<Node> gradient_edge(const Tensor& t);

}  // namespace ferry::autograd
