// ferry/ops_sort.hpp — scans, sorting and selection along one dim, with
// PyTorch's semantics: cumsum, cumprod, cummax, cummin, sort, argsort, topk,
// kthvalue, median and mode. Negative dims count from the end; a 0-d input
// counts as one element along dim 0 or -1. NaN sorts above every number (last
// in an ascending sort, first in a descending one), and the sorts are stable,
// so that the result is the same on every device. Included by ferry/ops.hpp.
#pragma once

#include <cstdint>
#include <optional>

#include "ferry/dtype.hpp"
#include "ferry/tensor.hpp"

namespace ferry {

// A selection's values and their i64 positions along the dim, as PyTorch's
// (values, indices) named tuples; structured bindings work.
struct ValuesIndices {
  Tensor values;
  Tensor indices;
};

// Running sum / product along dim. Integer and bool inputs give i64; `dtype`
// casts the input first (PyTorch's dtype argument).
Tensor cumsum(const Tensor& x, std::int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor cumprod(const Tensor& x, std::int64_t dim, std::optional<DType> dtype = std::nullopt);
// Running maximum / minimum and the position it was last seen at (ties take
// the later position); once a NaN is met the values stay NaN, at the latest
// NaN's position, as PyTorch's.
ValuesIndices cummax(const Tensor& x, std::int64_t dim);
ValuesIndices cummin(const Tensor& x, std::int64_t dim);

// Stable sort along dim: equal elements keep their order, ascending or
// descending. PyTorch's stable=False may order ties either way; ferry's
// order is always the stable one.
ValuesIndices sort(const Tensor& x, std::int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& x, std::int64_t dim = -1, bool descending = false);
// The k largest (or smallest) elements along dim, in sorted order (ties in
// their original order; `sorted` = false is accepted and gives the same).
ValuesIndices topk(const Tensor& x, std::int64_t k, std::int64_t dim = -1, bool largest = true,
                   bool sorted = true);
// The k-th smallest element along dim (k counts from 1).
ValuesIndices kthvalue(const Tensor& x, std::int64_t k, std::int64_t dim = -1,
                       bool keepdim = false);
// The lower median ((n - 1) / 2-th smallest); NaN, at the first NaN's
// position, when the slice holds one. Without dim: over every element, the
// value only.
Tensor median(const Tensor& x);
ValuesIndices median(const Tensor& x, std::int64_t dim, bool keepdim = false);
// The most frequent value along dim (the smallest of equally frequent ones)
// and its last position.
ValuesIndices mode(const Tensor& x, std::int64_t dim = -1, bool keepdim = false);

}  // namespace ferry
