// ferry/ops_shape.hpp — the indexing and shape ops beyond the Tensor's own
// views (ferry/tensor.hpp): PyTorch's flip, roll, repeat, tile, triu, pad,
// one_hot, masked_fill, split, ... with its semantics (negative dims count
// from the end; errors are ShapeError, DTypeError or ValueError). The copying
// ones are composite ops of the op table (docs/ops.md); split, chunk, unbind,
// movedim, swapaxes, unflatten and meshgrid return views. Included by
// ferry/ops.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ferry/tensor.hpp"

namespace ferry {

// Copies.
Tensor flip(const Tensor& x, const std::vector<std::int64_t>& dims);
// Shifted by shifts[i] along dims[i], wrapping; no dims: over the flattened tensor.
Tensor roll(const Tensor& x, const std::vector<std::int64_t>& shifts,
            const std::vector<std::int64_t>& dims = {});
// Tensor.repeat: sizes[i] copies along each dim (extra leading sizes add dims).
Tensor repeat(const Tensor& x, const std::vector<std::int64_t>& sizes);
Tensor tile(const Tensor& x, const std::vector<std::int64_t>& reps);  // repeat, reps padded with 1s
// Each element `repeats` times in a row along dim (no dim: flattened).
Tensor repeat_interleave(const Tensor& x, std::int64_t repeats,
                         std::optional<std::int64_t> dim = std::nullopt);
// The upper / lower triangle of the last two dims from the given diagonal, 0 elsewhere.
Tensor triu(const Tensor& x, std::int64_t diagonal = 0);
Tensor tril(const Tensor& x, std::int64_t diagonal = 0);
// The diagonal (i, i + offset) of dims dim1, dim2, as the last dim (a copy).
Tensor diagonal(const Tensor& x, std::int64_t offset = 0, std::int64_t dim1 = 0,
                std::int64_t dim2 = 1);
// 1-D x: the matrix with x on that diagonal; 2-D x: its diagonal.
Tensor diag(const Tensor& x, std::int64_t diagonal = 0);
Tensor trace(const Tensor& x);  // the sum of a matrix's diagonal
// F.pad: (left, right) pairs from the last dim backwards; mode constant
// (with value), reflect, replicate or circular; negative pads crop.
Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads,
           std::string_view mode = "constant", double value = 0);
// i64 rows of num_classes (-1: the largest index + 1) with a 1 at each index.
Tensor one_hot(const Tensor& indices, std::int64_t num_classes = -1);
// value (cast to x's dtype) where the bool mask, broadcast to x, is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);  // 0-d value
// value at the positions `index` (i32 or i64, negative counting from the end) of dim.
Tensor index_fill(const Tensor& x, std::int64_t dim, const Tensor& index, const Scalar& value);
// gather, the indices broadcast against x in every dim but dim (no dim: flattened).
Tensor take_along_dim(const Tensor& x, const Tensor& indices,
                      std::optional<std::int64_t> dim = std::nullopt);
Tensor narrow_copy(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length);
// repeat_interleave with a count per element along dim (i32 or i64, one
// count for all, or one per element; no dim: flattened).
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats,
                         std::optional<std::int64_t> dim = std::nullopt);
// Rotated by 90 degrees k times in the plane of dims, from the first towards the second.
Tensor rot90(const Tensor& x, std::int64_t k = 1, const std::vector<std::int64_t>& dims = {0, 1});

// torch.take: x's elements at the flat (row-major) positions `index` (i64; negative counts from
// the end), in index's shape.
Tensor take(const Tensor& x, const Tensor& index);
// Tensor.index_copy: x with the slices source.select(dim, i) written at index[i] along dim
// (index i64, 0-d or 1-D, in range; source x's shape but index's length at dim, and x's
// dtype). A position named twice keeps the later slice (Note [Deterministic scatter]).
Tensor index_copy(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& source);
// torch.diag_embed: a tensor whose (dim1, dim2) planes hold x's last dim on the diagonal
// `offset` (above the main one when positive), zeros elsewhere; one dim more than x.
Tensor diag_embed(const Tensor& x, std::int64_t offset = 0, std::int64_t dim1 = -2,
                  std::int64_t dim2 = -1);
// torch.block_diag: the 0-, 1- or 2-D tensors (0-D as [1, 1], 1-D as one row) on the diagonal
// of one matrix, in their promoted dtype; none gives a [1, 0] f32 matrix, as PyTorch's.
Tensor block_diag(const std::vector<Tensor>& tensors);
// torch.cartesian_prod: every combination of the 1-D tensors' elements, [prod(sizes), count],
// the last varying fastest (one tensor: itself).
Tensor cartesian_prod(const std::vector<Tensor>& tensors);

// Note [Deterministic scatter]
// scatter, scatter_reduce and index_put write several sources to one
// position in a fixed order, the order of the sources' elements (row-major):
// a plain scatter keeps the last one, a reduction folds them into x's value
// (include_self) in that order. Every device sorts the targets the same
// stable way first (runtime/ops_scatter.cpp), so the results agree bit for
// bit, where PyTorch leaves duplicates to the device's luck.
//
// x with src's elements written at `index` along dim (PyTorch's scatter;
// index i64 or i32 of x's dims, src at least index's size); reduce "add" or
// "multiply" combines with x's value instead.
Tensor scatter(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src,
               std::string_view reduce = "");
Tensor scatter(const Tensor& x, std::int64_t dim, const Tensor& index, const Scalar& value,
               std::string_view reduce = "");
// reduce: "sum", "prod", "mean" (integers: floor division), "amax", "amin";
// include_self: x's value takes part (PyTorch's scatter_reduce).
Tensor scatter_reduce(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src,
                      std::string_view reduce, bool include_self = true);
// x[indices[0], indices[1], ...] = values (accumulate: +=): the index tensors
// (i64, i32 or one bool mask) index x's leading dims and broadcast together;
// values broadcast to the selected elements.
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate = false);

// Data-dependent sizes (each reads a count back to the host, as PyTorch's do).
// The elements where the bool mask (broadcast with x) is true, as a 1-D tensor.
Tensor masked_select(const Tensor& x, const Tensor& mask);
// x with the mask's true positions filled, in order, from source's first elements.
Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source);
// The i64 coordinates [count, x.dim()] of x's nonzero elements, row-major.
Tensor nonzero(const Tensor& x);
// nonzero as one 1-D tensor per dim (PyTorch's where(cond) and nonzero(as_tuple=True)).
std::vector<Tensor> where(const Tensor& cond);
// For each value, the index in the sorted last dim of sorted_sequence where it
// would be inserted keeping the order: before equal elements, or after them
// (right). A 1-D sequence serves values of any shape; else the sequences are
// rows matching values' leading dims. i64, or i32 with out_int32.
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool right = false,
                    bool out_int32 = false);
// searchsorted(boundaries, x) with a 1-D boundaries (PyTorch's bucketize).
Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool right = false,
                 bool out_int32 = false);
// The distinct values of the flattened x, ascending (NaNs each their own), with
// each element's position among them (inverse, x's shape) and each value's count.
struct UniqueResult {
  Tensor values, inverse, counts;
};
UniqueResult unique(const Tensor& x, bool sorted = true, bool return_inverse = false,
                    bool return_counts = false);

// Views.
std::vector<Tensor> split(const Tensor& x, std::int64_t split_size, std::int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes,
                          std::int64_t dim = 0);
// torch.tensor_split: `sections` views along dim, the first size % sections of them one
// longer; or the views between the given indices, which are taken as Python slice bounds
// (negative counts from the end, past the end clamps, a bound below the previous gives an
// empty view).
std::vector<Tensor> tensor_split(const Tensor& x, std::int64_t sections, std::int64_t dim = 0);
std::vector<Tensor> tensor_split(const Tensor& x, const std::vector<std::int64_t>& indices,
                                 std::int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, std::int64_t dim = 0);
std::vector<Tensor> unbind(const Tensor& x, std::int64_t dim = 0);
Tensor movedim(const Tensor& x, std::int64_t source, std::int64_t destination);
Tensor swapaxes(const Tensor& x, std::int64_t dim0, std::int64_t dim1);
Tensor unflatten(const Tensor& x, std::int64_t dim, const Shape& sizes);  // one -1 allowed
// torch.atleast_1d / 2d / 3d: x viewed with at least that many dims (0-D -> [1], [1, 1],
// [1, 1, 1]; 1-D [n] -> [1, n] and [1, n, 1]; 2-D [m, n] -> [m, n, 1]).
Tensor atleast_1d(const Tensor& x);
Tensor atleast_2d(const Tensor& x);
Tensor atleast_3d(const Tensor& x);
// Copies: torch.hstack (cat along dim 1, or 0 for 1-D tensors), vstack (rows: cat of
// atleast_2d along 0), dstack (depth: atleast_3d along 2) and column_stack (0-D and 1-D
// tensors as columns, cat along 1).
Tensor hstack(const std::vector<Tensor>& tensors);
Tensor vstack(const std::vector<Tensor>& tensors);
Tensor dstack(const std::vector<Tensor>& tensors);
Tensor column_stack(const std::vector<Tensor>& tensors);
// Coordinate grids of 0-d or 1-d tensors; indexing "ij" (matrix) or "xy" (Cartesian).
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, std::string_view indexing = "ij");

}  // namespace ferry
