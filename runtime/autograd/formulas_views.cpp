// runtime/autograd/formulas_views.cpp — backward of views, contiguous() and
// clone() (formulas.hpp). A view's gradient is the output gradient put back
// into the input's layout: reshaped, permuted back, summed over expanded
// dims, or, for a view of a part, the part's gradient, which the engine adds into
// that part of the input's (Note [Gradients of parts] in graph.hpp).
#include <fmt/format.h>

#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"

namespace ferry::autograd {

void record_reshape(std::string_view op, const Tensor& x, const Tensor& y) {
  if (!should_record({&x})) return;
  record(fmt::format("{}Backward", op), {x}, y,
         [shape = x.sizes()](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {g.reshape(shape)};
         });
}

void record_identity(std::string_view op, const Tensor& x, const Tensor& y) {
  if (!should_record({&x})) return;
  record(fmt::format("{}Backward", op), {x}, y,
         [](const Tensor& g, const Needs&) -> std::vector<Tensor> { return {g}; });
}

// An op that computes on a channels-last input's contiguous copy (the pools, and batch_norm
// where the device's kernels take NCHW alone) hands its input's gradient back contiguous; were it
// left so, the ops before it would meet one operand in each layout (relu_backward of a
// channels-last output and a contiguous gradient), which walks one of them strided, element by
// element (see activation_backward in backward_ops.cpp for what that cost). Converting the gradient
// once here costs one copy.
void record_contiguous(const Tensor& x, const Tensor& y) {
  if (!should_record({&x})) return;
  record(
      "contiguousBackward", {x}, y,
      [format = x.suggest_memory_format()](const Tensor& g, const Needs&) -> std::vector<Tensor> {
        return {format == MemoryFormat::contiguous ? g : g.contiguous(format)};
      });
}

void record_permute(const Tensor& x, const Shape& dims, const Tensor& y) {
  if (!should_record({&x})) return;
  Shape inverse(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int64_t d = dims[i] < 0 ? dims[i] + std::int64_t(dims.size()) : dims[i];
    inverse[std::size_t(d)] = std::int64_t(i);
  }
  record("permuteBackward", {x}, y,
         [inverse](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {g.permute(inverse)};
         });
}

void record_transpose(const Tensor& x, std::int64_t d0, std::int64_t d1, const Tensor& y) {
  if (!should_record({&x})) return;
  record("transposeBackward", {x}, y,
         [d0, d1](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {g.transpose(d0, d1)};
         });
}

void record_slice(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t end,
                  std::int64_t step, const Tensor& y) {
  if (!should_record({&x})) return;
  record_part("sliceBackward", x, y, [dim, start, end, step](const Tensor& whole) {
    return whole.slice(dim, start, end, step);
  });
}

void record_select(const Tensor& x, std::int64_t dim, std::int64_t index, const Tensor& y) {
  if (!should_record({&x})) return;
  record_part("selectBackward", x, y,
              [dim, index](const Tensor& whole) { return whole.select(dim, index); });
}

void record_expand(const Tensor& x, const Tensor& y) {
  if (!should_record({&x})) return;
  record("expandBackward", {x}, y,
         [shape = x.sizes()](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {sum_to(g, shape)};
         });
}

// Note [In-place through a view]
// PyTorch's CopySlices. A write of `result` through `view` changes its base B
// (the root whose memory the view shares; contiguous, not a leaf) in place,
// so B's history becomes B_new = B_old with the view's elements replaced by
// result: B's node is now one whose gradient goes to B_old with those elements
// zeroed and to result as those elements, and the view becomes a view of
// B_new (its elements of B's gradient). The view's geometry is its sizes,
// strides and offset within B, which hold in any tensor of B's shape and
// contiguous layout, so each gradient is cut out of the incoming one as a
// view. Every in-place write that replaces a tensor's grad_fn counts in its
// AutogradMeta::history; another view of B whose grad_fn predates the write
// (it may see written elements) gets a new one, a view of B's current
// history, when it is next used (gradient_edge).
namespace {

// The elements of `view` within t, a contiguous tensor of base's shape: a view that is itself
// recorded as a part of t where autograd records (a backward that builds a graph, Note
// [Higher-order gradients] in graph.hpp), so that a gradient cut out this way is differentiable.
struct PartOf {
  Shape sizes, strides;
  std::int64_t offset;
  Tensor operator()(const Tensor& t) const {
    Tensor v = detail::make_view(t, sizes, strides, t.storage_offset() + offset);
    record_part("AsStridedBackward", t, v, *this);
    return v;
  }
};

std::function<Tensor(const Tensor&)> part_of(const Tensor& base, const Tensor& view) {
  return PartOf{view.sizes(), view.strides(), view.storage_offset() - base.storage_offset()};
}

}  // namespace

std::shared_ptr<Node> view_of_base(const Tensor& base, const Tensor& view) {
  if (!base.is_contiguous())
    throw Error(fmt::format(
        "autograd: a view's base (shape {}) was written in place and is not contiguous, so the "
        "view's gradient cannot be cut out of the base's; clone() the view before the write",
        shape_str(base.sizes())));
  std::shared_ptr<Node> node = make_part_node("AsStridedBackward", part_of(base, view));
  node->next = {gradient_edge(base)};
  node->inputs = {InputInfo{base.sizes(), base.dtype(), base.device()}};
  node->view = true;
  return node;
}

void record_write_through_view(const Tensor& base, const Tensor& view, const Tensor& result) {
  std::shared_ptr<Node> copy_slices = make_node(
      "CopySlices",
      [part = part_of(base, view)](const Tensor& g, const Needs& needs) -> std::vector<Tensor> {
        const Tensor gc = g.contiguous();
        std::vector<Tensor> grads(2);
        if (needs[0]) {
          if (ApplyingNode::current()) {
            // A backward that builds a graph (Note [Higher-order gradients] in graph.hpp):
            // the same zeros by ops, which record.
            Tensor keep = ones(gc.sizes(), {.dtype = DType::boolean, .device = gc.device()});
            {
              NoGradGuard no_grad;
              part(keep).fill_(false);
            }
            grads[0] = where(keep, gc, Scalar(0.0));
          } else {
            grads[0] = gc.clone();
            Tensor written = part(grads[0]);
            written.fill_(0);
          }
        }
        if (needs[1]) grads[1] = part(gc).contiguous();
        return grads;
      });
  copy_slices->next = {gradient_edge(base), gradient_edge(result)};
  copy_slices->inputs = {InputInfo{base.sizes(), base.dtype(), base.device()},
                         InputInfo{result.sizes(), result.dtype(), result.device()}};
  AutogradMeta& b = meta_of(base);
  b.grad_fn = std::move(copy_slices);
  ++b.history;
  AutogradMeta& v = meta_of(view);
  v.grad_fn = view_of_base(base, view);
  v.base_history = b.history;
}

}  // namespace ferry::autograd
