// runtime/autograd/formulas.hpp — one recorder per differentiable op: the op's
// front-end calls it with its inputs and result, and it attaches the op's
// backward formula to the result when autograd needs one (graph.hpp's
// record()). The formulas live together here, by op family, the way PyTorch
// keeps its derivatives apart from its kernels: a formula is built from ops,
// so it runs on any device that runs the ops. Internal to the core.
//
// Every recorder returns at once unless grad mode is on and an input requires
// grad, so front-ends call them unconditionally.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <tuple>
#include <vector>

#include "ferry/autograd.hpp"
#include "ferry/backend.hpp"
#include "ferry/op.hpp"
#include "ferry/tensor.hpp"

namespace ferry::autograd {

class Node;

// Runs a front-end's forward with grad mode off: its inner views, casts and
// ops are not part of the graph, and the recorder then adds one node for the
// whole op.
template <typename F> Tensor untracked(F&& forward) {
  NoGradGuard no_grad;
  return forward();
}

// Sums a broadcast gradient back to `shape` (over the leading dims it lacks
// and the dims where it has size 1).
Tensor sum_to(const Tensor& grad, const Shape& shape);

// ---- element-wise (formulas_elementwise.cpp) ----
void record_unary(OpId op, const Tensor& x, const Tensor& y);
// Binary ops, also for a scalar operand (passed as the 0-d tensor the op used).
void record_binary(OpId op, const Tensor& a, const Tensor& b, const Tensor& out);
void record_where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void record_cast(const Tensor& x, const Tensor& y);       // Tensor::to(dtype)
void record_to_device(const Tensor& x, const Tensor& y);  // Tensor::to(device)

// ---- views (formulas_views.cpp); sizes, dims and bounds as the view used them ----
void record_reshape(std::string_view op, const Tensor& x,
                    const Tensor& y);  // same elements, new shape
void record_identity(std::string_view op, const Tensor& x, const Tensor& y);  // clone, pin_memory
// y = x.contiguous(): the gradient goes back in x's layout where x is channels-last.
void record_contiguous(const Tensor& x, const Tensor& y);
void record_permute(const Tensor& x, const Shape& dims, const Tensor& y);
void record_transpose(const Tensor& x, std::int64_t d0, std::int64_t d1, const Tensor& y);
void record_slice(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t end,
                  std::int64_t step, const Tensor& y);
void record_select(const Tensor& x, std::int64_t dim, std::int64_t index, const Tensor& y);
void record_expand(const Tensor& x, const Tensor& y);
// An in-place write of `result` through `view` into the memory of `base`, the
// view's root, which requires grad (Note [In-place through a view]).
void record_write_through_view(const Tensor& base, const Tensor& view, const Tensor& result);
// The grad_fn of `view` as a view of its base's current history (the same note).
std::shared_ptr<Node> view_of_base(const Tensor& base, const Tensor& view);

// ---- reductions (formulas_reduce.cpp); dims as the caller gave them ----
void record_sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim,
                const Tensor& out);
void record_prod(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim,
                 const Tensor& out);
// cumsum, cumprod (of x already cast to the result dtype); cummax and cummin's values.
void record_cumsum(const Tensor& x, std::int64_t dim, const Tensor& out);
void record_cumprod(const Tensor& x, std::int64_t dim, const Tensor& out);
void record_cum_extremum(std::string_view op, const Tensor& x, std::int64_t dim,
                         const Tensor& indices, const Tensor& values);
void record_mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim,
                 const Tensor& out);
void record_extremum(std::string_view op, const Tensor& x, const std::vector<std::int64_t>& dims,
                     bool keepdim, const Tensor& out);  // max, min
// std = sqrt(var): the gradient to var is g / (2 std), 0 where std is 0 (a constant slice),
// as PyTorch's std_backward masks it; sqrt's own formula would give inf x 0 = NaN there.
void record_std(const Tensor& var, const Tensor& std);
void record_var(const Tensor& x, const std::vector<std::int64_t>& dims, double correction,
                bool keepdim, const Tensor& out);

// ---- linear algebra and nn (formulas_nn.cpp) ----
void record_matmul(const Tensor& a, const Tensor& b, const Tensor& out);
void record_softmax(std::string_view op, const Tensor& x, std::int64_t dim, const Tensor& y);
// A convolution a device's kernel computed (runtime/ops_conv.cpp), `forward` its op: its
// backward runs the conv_backward_input and conv_backward_weight kernels with the forward's
// attributes (detail::ConvKernels).
void record_conv(OpId forward, const Tensor& x, const Tensor& w, const Tensor& b,
                 const Attrs& attrs, const Tensor& y);
// A batch_norm the device's kernel computed (runtime/nn/normalization.cpp) from x, its mean
// and variance [C] (the batch's in training, the running ones in eval): its backward is the
// batch_norm_backward kernel with the forward's attributes.
void record_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const Tensor& mean, const Tensor& var, const Attrs& attrs, const Tensor& y);
// scaled_dot_product_attention by the device's kernel (runtime/nn/attention.cpp): q, k, v in
// the kernel's form, its additive mask (or undefined) and attributes, its output and
// logsumexp; the backward is one scaled_dot_product_attention_backward kernel.
void record_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                      const Attrs& attrs, const Tensor& out, const Tensor& lse);
// A pool the device's kernel `forward` computed (runtime/ops_pool.cpp), x [N, C, *in] and,
// for max pooling, indices [N, C, *out] (undefined for average pooling), in the layout of the
// forward's attributes: its backward is the max_pool_backward or avg_pool_backward kernel, in
// that layout.
void record_pool(OpId forward, const Tensor& x, const Tensor& indices, const Attrs& attrs,
                 const Tensor& y);
// A 2-D resampling the device's kernel computed (interpolate, runtime/ops_resample.cpp), x
// [N, C, H, W] in the layout of the forward's attributes and its tables (index and weight per
// dim): its backward is the interpolate_backward kernel with the same tables, in that layout.
void record_resample(const Tensor& x, const std::vector<Tensor>& tables, const Attrs& attrs,
                     const Tensor& y);
// grid_sample by the device's kernel (x and grid contiguous, as the kernel ran on them): its
// backward is the grid_sample_backward kernel, asked for the gradients autograd wants.
void record_grid_sample(const Tensor& x, const Tensor& grid, const Attrs& attrs, const Tensor& y);
// mean and rstd are layer_norm's saved statistics ([rows]); with fused_backward (decided at
// the forward, where debug::CompositesOnly is seen) the backward is one layer_norm_backward
// kernel, else the composition.
void record_layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                       const Tensor& bias, const Tensor& mean, const Tensor& rstd, double eps,
                       const Tensor& y, bool fused_backward);
// padding_idx (in range, wrapped): that row's gradient stays zero.
void record_embedding(const Tensor& weight, const Tensor& indices, const Tensor& out,
                      std::optional<std::int64_t> padding_idx, bool scale_grad_by_freq);
// binary_cross_entropy's unreduced loss (weighted where weight is defined), with PyTorch's
// gradients: w (x - t) / max(x (1 - x), 1e-12) for x, finite where x is 0 or 1.
void record_binary_cross_entropy(const Tensor& x, const Tensor& target, const Tensor& weight,
                                 const Tensor& loss);
void record_index_select(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& out);
void record_gather(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& out);
// scatter ("assign"), scatter_reduce and index_put (index is i64 and src
// the sources as the forward used them; index_put's targets are linear
// positions in x, values expanded to them).
void record_scatter_reduce(const Tensor& x, std::int64_t d, const Tensor& index, const Tensor& src,
                           std::string_view reduce, bool include_self, const Tensor& out);
void record_index_put(const Tensor& x, const Tensor& targets, const Tensor& values,
                      std::string_view reduce, const Tensor& out);
void record_cat(const std::vector<Tensor>& tensors, std::int64_t dim, const Tensor& out);

// ---- factorizations (formulas_linalg.cpp): PyTorch's closed forms, whichever path (a LAPACK
// kernel or the composition, run untracked) computed the result ----
// l: the lower Cholesky factor of a (linalg.cholesky with upper takes it of A^T).
void record_cholesky(const Tensor& a, const Tensor& l);
// x: linalg.solve_triangular(a, b, upper, left, unitriangular)'s result.
void record_solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left,
                             bool unitriangular, const Tensor& x);
// lu: linalg.lu_factor_ex(a)'s packed factors, pivots its int32 pivots.
void record_lu_factor(const Tensor& a, const Tensor& lu, const Tensor& pivots);
// det: linalg.det(a), with lu, pivots lu_factor_ex(a)'s and permutation_sign the sign of its
// row swaps ([...]); logabsdet: linalg.slogdet(a)'s second result, from the same factors.
void record_det(const Tensor& a, const Tensor& lu, const Tensor& pivots,
                const Tensor& permutation_sign, const Tensor& det);
void record_slogdet(const Tensor& a, const Tensor& lu, const Tensor& pivots,
                    const Tensor& logabsdet);
// q [..., m, k], r [..., k, n]: linalg.qr(a)'s reduced factors, computed untracked. Returns
// them tracked: views of the one recorded node's output, which holds both side by side (a node
// has one output).
std::pair<Tensor, Tensor> record_qr(const Tensor& a, const Tensor& q, const Tensor& r);
// values [..., n] and vectors [..., n, n]: eigh's results for a's symmetric part, computed
// untracked. Returns them tracked, as record_qr does.
std::pair<Tensor, Tensor> record_eigh(const Tensor& a, const Tensor& values, const Tensor& vectors);
// u, s, vh: linalg.svd(a, full_matrices)'s factors, computed untracked. Returns them tracked, as
// record_qr does.
std::tuple<Tensor, Tensor, Tensor> record_svd(const Tensor& a, const Tensor& u, const Tensor& s,
                                              const Tensor& vh, bool full_matrices);
// p: linalg.pinv(a), computed untracked (from a's SVD or eigh).
void record_pinv(const Tensor& a, const Tensor& p);
// x [..., n, k]: linalg.lstsq(a, b)'s solution (a [..., m, n], b [..., m, k], batches that
// broadcast), computed untracked by whichever driver. PyTorch's gradient: that of pinv(a) b, pinv
// at its default tolerances.
void record_lstsq(const Tensor& a, const Tensor& b, const Tensor& x);
// e: linalg.matrix_exp(a), computed untracked. PyTorch's gradient: the upper-right block of
// matrix_exp([[a^T, g], [0, a^T]]).
void record_matrix_exp(const Tensor& a, const Tensor& e);
void record_stack(const std::vector<Tensor>& tensors, std::int64_t dim, const Tensor& out);

}  // namespace ferry::autograd

namespace ferry::detail {

// The kernels only backward passes use (docs/kernel-contract.md, "Ops for
// training"): activation gradients from (grad, z), and accumulation of `src`
// into a new zero tensor of `shape` along `dim`.
Tensor activation_backward(OpId op, const Tensor& grad, const Tensor& z);
Tensor index_add(const Shape& shape, std::int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter_add(const Shape& shape, std::int64_t dim, const Tensor& index, const Tensor& src);

// A kernel whose result is linear in its first input, the rest fixed (the pools' indices,
// interpolate's tables): runs `op` on `in` into a new tensor of `sizes` in `format` (the first
// input's dtype and device), recorded with `adjoint` of the result's gradient as the first
// input's gradient, so that a second backward passes it (Note [Higher-order gradients]).
Tensor linear_kernel(OpId op, const std::vector<Tensor>& in, const Shape& sizes,
                     MemoryFormat format, const Attrs& attrs,
                     std::function<Tensor(const Tensor&)> adjoint);

// A convolution's kernels, forward and both backward ones, each recorded with the others as its
// derivatives (each is bilinear in its two operands), for the backward of one forward call:
// `forward` its op, `attrs` its attributes (the layout among them), the sizes its operands'.
struct ConvKernels {
  OpId forward;
  Attrs attrs;
  Shape x_sizes, w_sizes, y_sizes;
  // dx from the output's gradient g and the weight (conv_backward_input).
  Tensor input_grad(const Tensor& g, const Tensor& w) const;
  // dw, and db when `bias` (conv_backward_weight), from the input and g.
  std::pair<Tensor, Tensor> weight_grad(const Tensor& x, const Tensor& g, bool bias) const;
  // The forward without a bias.
  Tensor output(const Tensor& x, const Tensor& w) const;
};
// Folds values into out (contiguous) at linear positions `targets` (i64, values'
// shape) with reduce (scatter_reduce's, or "assign"): runtime/ops_scatter.cpp.
void scatter_fold(Tensor& out, const Tensor& targets, const Tensor& values, std::string_view reduce,
                  bool include_self);

}  // namespace ferry::detail
