// ferry/ops_inplace.hpp — the in-place forms of the element-wise ops and of
// the indexing writes, PyTorch's `_` ops: op_(x, ...) computes op(x, ...) and
// writes it into x's memory, so every view of x sees it, and returns x.
//
// Note [In-place ops]
// The result must keep x's shape (a broadcast that would grow x is a
// ShapeError) and cast to x's dtype by PyTorch's rule (a floating result into
// an integer x, or a non-bool one into a bool x, is a DTypeError), and x must
// not be an expanded view (ValueError: its elements share memory); nothing is
// written when any of these fails. Under grad mode the op is recorded: x takes the
// op's place in the graph, as in PyTorch, and the op reads x through a copy,
// so what it saves for its backward is not the memory it overwrites. Another
// op that saved x before the write makes backward() raise (the version
// counter, Note [Autograd] in ferry/autograd.hpp). PyTorch's errors: an
// in-place op on a leaf that requires grad, or on a view of one, raises
// Error. Through a view of a non-leaf that requires grad, the write rewrites
// the base's history as PyTorch's CopySlices does (Note [In-place through a
// view] in runtime/autograd/formulas_views.cpp). A view made with grad mode off
// (under a NoGradGuard), written in place with grad mode on where the write
// would be tracked (its base required grad, or the op's other operand requires
// it), raises Error, as PyTorch's "a view was created in no_grad mode" does.
// Included by ferry/ops.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ferry/op_ids.hpp"
#include "ferry/tensor.hpp"

namespace ferry {

// Every unary kernel row: exp_(x), floor_(x), sigmoid_(x), ...
#define FERRY_INPLACE_UNARY_DECL_(name, Functor, dtypes) Tensor& name##_(Tensor& x);
FERRY_UNARY_OPS(FERRY_INPLACE_UNARY_DECL_)
#undef FERRY_INPLACE_UNARY_DECL_
// Every binary and comparison kernel row: add_(x, y), pow_(x, 2), eq_(x, y) (1 or 0 in x's dtype),
// ...
#define FERRY_INPLACE_BINARY_DECL_(name, Functor, dtypes) \
  Tensor& name##_(Tensor& x, const Tensor& other);        \
  Tensor& name##_(Tensor& x, const Scalar& other);
FERRY_BINARY_OPS(FERRY_INPLACE_BINARY_DECL_)
FERRY_COMPARE_OPS(FERRY_INPLACE_BINARY_DECL_)
#undef FERRY_INPLACE_BINARY_DECL_

// The composite element-wise ops.
Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor& clamp_(Tensor& x, const Tensor& min, const Tensor& max = {});
Tensor& clip_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor& round_(Tensor& x, std::int64_t decimals);
Tensor& elu_(Tensor& x, double alpha = 1);
Tensor& celu_(Tensor& x, double alpha = 1);
Tensor& leaky_relu_(Tensor& x, double negative_slope = 0.01);
Tensor& hardtanh_(Tensor& x, double min_val = -1, double max_val = 1);
Tensor& relu6_(Tensor& x);
Tensor& nan_to_num_(Tensor& x, double nan = 0, std::optional<double> posinf = std::nullopt,
                    std::optional<double> neginf = std::nullopt);
Tensor& logical_not_(Tensor& x);
Tensor& bitwise_not_(Tensor& x);
Tensor& logical_and_(Tensor& x, const Tensor& other);
Tensor& logical_or_(Tensor& x, const Tensor& other);
Tensor& logical_xor_(Tensor& x, const Tensor& other);
Tensor& lerp_(Tensor& x, const Tensor& end, const Tensor& weight);
Tensor& lerp_(Tensor& x, const Tensor& end, const Scalar& weight);
Tensor& addcmul_(Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
Tensor& addcdiv_(Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);

// The indexing writes.
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value);
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Tensor& value);
Tensor& masked_scatter_(Tensor& x, const Tensor& mask, const Tensor& source);
Tensor& index_fill_(Tensor& x, std::int64_t dim, const Tensor& index, const Scalar& value);
Tensor& index_add_(Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& source,
                   const Scalar& alpha = 1);
Tensor& scatter_(Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src,
                 std::string_view reduce = "");
Tensor& scatter_(Tensor& x, std::int64_t dim, const Tensor& index, const Scalar& value,
                 std::string_view reduce = "");
Tensor& scatter_reduce_(Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src,
                        std::string_view reduce, bool include_self = true);
Tensor& index_put_(Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                   bool accumulate = false);

// x + alpha * source summed into x's rows `index` along dim (PyTorch's
// index_add; duplicates accumulate in a fixed order, Note [Deterministic scatter]).
Tensor index_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha = 1);

}  // namespace ferry
