// runtime/ops_internal.hpp — op front-ends other parts of the core reuse with
// their own name in error messages, or whose extra outputs autograd needs.
// Internal to the core.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

#include "deferred_checks.hpp"
#include "ferry/op.hpp"
#include "ferry/tensor.hpp"

namespace ferry::detail {

// An index tensor as i64 (i32 is widened; another dtype is a DTypeError), and
// the ShapeError of an index outside [0, size) of `dim` (Note [Index bounds]
// in ops_index.cpp); `op` names the caller in both. `when`: CheckTime::deferrable for an op
// that writes a fresh tensor (Note [Deferred checks] in deferred_checks.hpp).
Tensor as_index(std::string_view op, const Tensor& index);
void check_bounds(std::string_view op, const Tensor& index, std::int64_t dim, std::int64_t size,
                  const Shape& x_shape, CheckTime when = CheckTime::at_call);
// The least and the greatest element of a non-empty integer tensor as an i64 [2] on its device
// (index_range_values), or read back to the host in one transfer (index_range: one sync on a
// GPU): the range checks of check_bounds and of the ops whose indices have rules of their own
// (nll_loss's ignore_index, max_unpool's output planes).
Tensor index_range_values(const Tensor& index);
std::pair<std::int64_t, std::int64_t> index_range(const Tensor& index);
// gather for an index the core made and knows in range (a pivot row from argmax, a rotation's
// partner): no check_bounds, so no host read; recorded for autograd as gather is.
Tensor gather_in_range(const Tensor& x, std::int64_t dim, const Tensor& index);

// x = f(x) in place, checked and recorded (Note [In-place ops] in
// ferry/ops_inplace.hpp): every `_` op, and copy_ and fill_ where autograd is
// involved. Under grad mode f reads a copy of x, unless `reads_x` is false (copy_
// and fill_ make their result without x: no copy is made).
Tensor& write_in_place(std::string_view op, Tensor& x,
                       const std::function<Tensor(const Tensor&)>& f, bool reads_x = true);

// index_select with `op` naming the caller in errors (embedding uses it); `check_range` false
// for an index the core made and knows in range (index_select_in_range).
Tensor index_select(std::string_view op, const Tensor& x, std::int64_t dim, const Tensor& index,
                    bool check_range = true);
// index_select for positions the core computed on the host, in range by construction (flip's,
// pad's and diagonal's): no check_bounds, so no read back (a GPU sync: diagonal alone is under
// det, slogdet, cholesky and their gradients); recorded for autograd as index_select is.
Tensor index_select_in_range(const Tensor& x, std::int64_t dim, const Tensor& index);
// An embedding's padding_idx in [0, rows): a negative one counts from the end; ValueError
// (naming `who`) outside [-rows, rows). embedding() and nn::Embedding share it.
std::int64_t padding_row(std::string_view who, std::int64_t rows, std::int64_t padding_idx);

// layer_norm's forward with the statistics its backward needs: y has x's
// shape and dtype; mean and rstd (1 / sqrt(var + eps), biased variance) are
// f32 (f64 when x is f64) of shape [rows], rows = x.numel() / prod(normalized_shape).
struct LayerNormResult {
  Tensor y, mean, rstd;
};
LayerNormResult layer_norm_forward(const Tensor& x, const Shape& normalized_shape,
                                   const Tensor& weight, const Tensor& bias, double eps);

// Error naming op unless every tensor is defined (the composite ops' operands).
void check_defined(std::string_view op, std::initializer_list<const Tensor*> tensors);

// x itself when it is floating, else x in f32: how the composite ops whose rows compute in
// float (logit, cov, trapezoid, ...) take integer and bool inputs.
Tensor as_floating(const Tensor& x);

// DTypeError unless op's row takes x's dtype (Note [The op table] in
// ferry/op.hpp). Every front-end calls it on every op, so the message is
// only formatted when the check fails.
void check_dtype(OpId op, const Tensor& x);

// A unary or activation row's kernel on x, with the row's dtype rule and
// autograd formula (ops_elementwise.cpp).
Tensor unary_kernel(OpId op, const Tensor& x);

// Note [Composite ops] in ferry/op.hpp (ops_composite.cpp): whether composite
// op `op` runs as x's device's fused kernel, computing in `compute` (under
// autograd only for a row whose grad is "formula", the node its front-end
// records serving either path); and the
// unary composite ops by id (unary_op's way to them).
bool use_fused_kernel(OpId op, const Tensor& x, DType compute);
// The same for an op whose row names backward kernel rows (OpInfo::backward_kernels(): the
// convolutions, batch_norm, the pools...), so it runs under autograd too: x's device supports
// `op` and those rows in x's dtype, x is not empty, and debug::CompositesOnly is off.
bool use_fused_kernel_with_backward(const Tensor& x, OpId op);

// A reduction's dims (ops_reduce.cpp): x permuted with the kept dims first, in order, and
// the reduced ones last; `dims` empty means every dim; a repeated or out-of-range dim is a
// ShapeError naming `op`.
struct ReducePlan {
  Tensor permuted;  // kept dims first (in order), then the reduced dims
  std::int64_t reduce_ndim = 0;
  Shape out_sizes;         // the kept sizes
  Shape keepdim_sizes;     // the input's sizes with every reduced dim set to 1
  std::int64_t count = 1;  // elements per reduced slice
};
ReducePlan plan_reduce(std::string_view op, const Tensor& x, const std::vector<std::int64_t>& dims);
Tensor composite_unary(OpId op, const Tensor& x);
Tensor composite_binary(OpId op, const Tensor& a, const Tensor& b);

}  // namespace ferry::detail
