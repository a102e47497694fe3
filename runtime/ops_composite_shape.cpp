// runtime/ops_composite_shape.cpp — the composite indexing and shape ops
// (Note [Composite ops] in ferry/op.hpp): flip, roll, repeat, tile,
// repeat_interleave, triu, tril, diagonal, diag, trace, pad, one_hot,
// masked_fill, index_fill and take_along_dim as compositions of views,
// index_select, gather, cat, where and arange; and the view functions
// (split, chunk, unbind, movedim, swapaxes, unflatten, meshgrid) that make no
// copy. All run on every device and are differentiable through their parts.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "dispatch.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {

using detail::wrap_dim;

namespace {

// An i64 index vector made on the host and moved to `like`'s device.
Tensor index_on(const std::vector<std::int64_t>& idx, const Tensor& like) {
  return tensor(idx).to(like.device());
}

}  // namespace

Tensor flip(const Tensor& x, const std::vector<std::int64_t>& dims) {
  Tensor y = x;
  std::vector<bool> seen(std::size_t(std::max<std::int64_t>(x.dim(), 1)), false);
  for (std::int64_t d : dims) {
    const std::int64_t dd = wrap_dim(d, x.dim(), "flip");
    if (seen[std::size_t(dd)]) throw ShapeError(fmt::format("flip: dim {} is given twice", d));
    seen[std::size_t(dd)] = true;
    const std::int64_t n = x.size(dd);
    std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) idx[std::size_t(i)] = n - 1 - i;
    y = detail::index_select_in_range(y, dd, index_on(idx, x));
  }
  return dims.empty() ? y.clone() : y;
}

// Elements shifted by `shifts[i]` along dims[i], wrapping around; with no dims,
// over the flattened tensor.
Tensor roll(const Tensor& x, const std::vector<std::int64_t>& shifts,
            const std::vector<std::int64_t>& dims) {
  if (dims.empty()) {
    if (shifts.size() != 1)
      throw ShapeError(fmt::format("roll: without dims, give one shift (got {})", shifts.size()));
    return roll(x.reshape({-1}), shifts, {0}).reshape(x.sizes());
  }
  if (shifts.size() != dims.size())
    throw ShapeError(fmt::format("roll: {} shifts for {} dims", shifts.size(), dims.size()));
  Tensor y = x;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int64_t d = wrap_dim(dims[i], x.dim(), "roll"), n = x.size(d);
    if (n == 0) continue;
    const std::int64_t s = ((shifts[i] % n) + n) % n;
    if (s != 0) y = cat({y.slice(d, n - s, n), y.slice(d, 0, n - s)}, d);
  }
  return y.is_same(x) ? x.clone() : y;
}

// x repeated `sizes[i]` times along each dim (leading sizes add dims), as
// PyTorch's Tensor.repeat: each dim viewed as [1, n], expanded to [r, n].
Tensor repeat(const Tensor& x, const std::vector<std::int64_t>& sizes) {
  if (std::int64_t(sizes.size()) < x.dim())
    throw ShapeError(
        fmt::format("repeat: {} sizes for a tensor of {} dims; give at least one per dim",
                    sizes.size(), x.dim()));
  for (std::int64_t r : sizes)
    if (r < 0) throw ShapeError(fmt::format("repeat: a negative count ({})", r));
  const std::size_t lead = sizes.size() - std::size_t(x.dim());
  Shape viewed, expanded, out;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::int64_t n = i < lead ? 1 : x.size(std::int64_t(i - lead));
    viewed.insert(viewed.end(), {1, n});
    expanded.insert(expanded.end(), {sizes[i], n});
    out.push_back(sizes[i] * n);
  }
  return x.reshape(viewed).expand(expanded).reshape(out);
}

Tensor tile(const Tensor& x, const std::vector<std::int64_t>& reps) {
  std::vector<std::int64_t> sizes = reps;
  if (std::int64_t(sizes.size()) < x.dim())
    sizes.insert(sizes.begin(), std::size_t(x.dim()) - sizes.size(), 1);
  return repeat(x, sizes);
}

// Each element `repeats` times in a row along dim (over the flattened tensor
// when dim is not given).
Tensor repeat_interleave(const Tensor& x, std::int64_t repeats, std::optional<std::int64_t> dim) {
  if (repeats < 0) throw ShapeError(fmt::format("repeat_interleave: repeats is {}", repeats));
  if (!dim) return repeat_interleave(x.reshape({-1}), repeats, 0);
  const std::int64_t d = wrap_dim(*dim, x.dim(), "repeat_interleave");
  Shape expanded = x.sizes(), out = x.sizes();
  expanded.insert(expanded.begin() + d + 1, repeats);
  out[std::size_t(d)] *= repeats;
  return x.unsqueeze(d + 1).expand(expanded).reshape(out);
}

namespace {

// Whether element (i, j) of the last two dims is on or above the k-th diagonal.
Tensor upper_mask(const Tensor& x, std::int64_t k, const char* op) {
  if (x.dim() < 2)
    throw ShapeError(
        fmt::format("{}: needs at least 2 dims, got shape {}", op, shape_str(x.sizes())));
  const TensorOptions opt = {.dtype = DType::i64, .device = x.device()};
  Tensor rows = arange(double(x.size(-2)), opt).unsqueeze(1);
  Tensor cols = arange(double(x.size(-1)), opt).unsqueeze(0);
  return ge(cols - rows, k);
}

// A zero that keeps x's dtype in where (false for bool).
Scalar zero_of(const Tensor& x) { return x.dtype() == DType::boolean ? Scalar(false) : Scalar(0); }

}  // namespace

Tensor triu(const Tensor& x, std::int64_t diagonal) {
  return where(upper_mask(x, diagonal, "triu"), x, zero_of(x));
}

Tensor tril(const Tensor& x, std::int64_t diagonal) {
  return where(upper_mask(x, diagonal + 1, "tril"), zero_of(x), x);
}

// The elements (i, i + offset) of dims dim1 and dim2, as the last dim (a copy;
// PyTorch's is a view).
Tensor diagonal(const Tensor& x, std::int64_t offset, std::int64_t dim1, std::int64_t dim2) {
  if (x.dim() < 2)
    throw ShapeError(
        fmt::format("diagonal: needs at least 2 dims, got shape {}", shape_str(x.sizes())));
  const std::int64_t d1 = wrap_dim(dim1, x.dim(), "diagonal"),
                     d2 = wrap_dim(dim2, x.dim(), "diagonal");
  if (d1 == d2) throw ShapeError(fmt::format("diagonal: dim1 and dim2 are both {}", d1));
  Shape order;
  for (std::int64_t d = 0; d < x.dim(); ++d)
    if (d != d1 && d != d2) order.push_back(d);
  order.push_back(d1);
  order.push_back(d2);
  Tensor m = x.permute(order);
  const std::int64_t r = x.size(d1), c = x.size(d2);
  const std::int64_t n =
      std::max<std::int64_t>(0, offset >= 0 ? std::min(r, c - offset) : std::min(r + offset, c));
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    idx[std::size_t(i)] = (offset >= 0 ? i : i - offset) * c + (offset >= 0 ? i + offset : i);
  Shape flat(m.sizes().begin(), m.sizes().end() - 2);
  flat.push_back(r * c);
  return detail::index_select_in_range(m.reshape(flat), -1, index_on(idx, x));
}

// 1-D: a square matrix with x on the offset-th diagonal; 2-D: that diagonal.
Tensor diag(const Tensor& x, std::int64_t offset) {
  if (x.dim() == 2) return diagonal(x, offset, 0, 1);
  if (x.dim() != 1)
    throw ShapeError(fmt::format("diag: takes 1 or 2 dims, got shape {}", shape_str(x.sizes())));
  const std::int64_t n = x.size(0), a = offset < 0 ? -offset : offset, m = n + a;
  // Row i holds x[i] at column i + offset (offset >= 0); column j holds x[j]
  // at row j - offset (offset < 0): x padded to m, broadcast along the other dim.
  // (Plain statements: a braced list inside ?: ended its temporaries' lifetime
  // early under GCC 12, which ASan reported as a use after scope.)
  Tensor xp = x;
  if (a != 0) {
    const Tensor pad_zeros = zeros({a}, {.dtype = x.dtype(), .device = x.device()});
    xp = cat(std::vector<Tensor>{x, pad_zeros});
  }
  const Shape square = {m, m};
  Tensor values;
  if (offset >= 0)
    values = xp.unsqueeze(1).expand(square);
  else
    values = xp.unsqueeze(0).expand(square);
  const TensorOptions opt = {.dtype = DType::i64, .device = x.device()};
  Tensor on = eq(arange(double(m), opt).unsqueeze(0) - arange(double(m), opt).unsqueeze(1), offset);
  return where(on, values, zeros_like(values));
}

Tensor trace(const Tensor& x) {
  if (x.dim() != 2)
    throw ShapeError(fmt::format("trace: takes a matrix, got shape {}", shape_str(x.sizes())));
  return sum(diagonal(x));
}

// PyTorch's F.pad: pads = (left, right) pairs from the last dim backwards.
// constant fills with `value`; reflect mirrors without the edge, replicate
// repeats it, circular wraps (the last three through index_select).
// Negative pads crop.
Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads, std::string_view mode,
           double value) {
  if (pads.size() % 2 != 0 || std::int64_t(pads.size()) > 2 * x.dim())
    throw ShapeError(
        fmt::format("pad: {} pads for a tensor of {} dims; give (left, right) pairs, "
                    "at most one per dim",
                    pads.size(), x.dim()));
  if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "circular")
    throw ValueError(
        fmt::format("pad: mode \"{}\" is not one of constant, reflect, replicate, circular", mode));
  Tensor y = x;
  for (std::size_t k = 0; k < pads.size() / 2; ++k) {
    const std::int64_t d = x.dim() - 1 - std::int64_t(k);
    std::int64_t left = pads[2 * k], right = pads[2 * k + 1];
    const std::int64_t n = y.size(d);
    if (left < 0) y = y.slice(d, -left, n), left = 0;  // crops first
    if (right < 0) y = y.slice(d, 0, y.size(d) + right), right = 0;
    if (left == 0 && right == 0) continue;
    const std::int64_t m = y.size(d);
    if (mode == "constant") {
      auto block = [&](std::int64_t size) {
        Shape s = y.sizes();
        s[std::size_t(d)] = size;
        return full(s, value, {.dtype = y.dtype(), .device = y.device()});
      };
      y = cat({block(left), y, block(right)}, d);
      continue;
    }
    if (m == 0) throw ShapeError(fmt::format("pad: mode {} cannot pad an empty dim {}", mode, d));
    if (mode == "reflect" && (left >= m || right >= m))
      throw ShapeError(
          fmt::format("pad: reflect padding ({}, {}) must be less than the dim's size {} (dim {})",
                      left, right, m, d));
    if (mode == "circular" && (left > m || right > m))
      throw ShapeError(
          fmt::format("pad: circular padding ({}, {}) must not exceed the dim's size {} (dim {})",
                      left, right, m, d));
    std::vector<std::int64_t> idx;
    for (std::int64_t i = -left; i < m + right; ++i) {
      std::int64_t j = i;
      if (mode == "replicate") j = std::clamp<std::int64_t>(i, 0, m - 1);
      if (mode == "circular") j = ((i % m) + m) % m;
      if (mode == "reflect") j = i < 0 ? -i : (i >= m ? 2 * (m - 1) - i : i);
      idx.push_back(j);
    }
    y = detail::index_select_in_range(y, d, index_on(idx, y));
  }
  return y.is_same(x) ? x.clone() : y;
}

// i64 one-hot rows of length num_classes (-1: the largest index + 1).
Tensor one_hot(const Tensor& indices, std::int64_t num_classes) {
  if (indices.dtype() != DType::i64)
    throw DTypeError(
        fmt::format("one_hot: the indices must be i64, got {}", dtype_name(indices.dtype())));
  if (indices.numel() > 0 && min(indices).item<std::int64_t>() < 0)
    throw ValueError("one_hot: an index is negative");
  if (num_classes < 0)
    num_classes = indices.numel() == 0 ? 0 : max(indices).item<std::int64_t>() + 1;
  else if (indices.numel() > 0 && max(indices).item<std::int64_t>() >= num_classes)
    throw ValueError(fmt::format("one_hot: an index is at least num_classes ({})", num_classes));
  Tensor classes = arange(double(num_classes), {.dtype = DType::i64, .device = indices.device()});
  return eq(indices.unsqueeze(-1), classes).to(DType::i64);
}

// value where mask (broadcast to x's shape) is true; value is cast to x's
// dtype, as PyTorch's.
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  return masked_fill(x, mask, scalar_tensor(value, {.dtype = x.dtype(), .device = x.device()}));
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  if (value.dim() != 0)
    throw ShapeError(
        fmt::format("masked_fill: the value must be 0-d, got shape {}", shape_str(value.sizes())));
  if (mask.dtype() != DType::boolean)
    throw DTypeError(
        fmt::format("masked_fill: the mask must be bool, got {}", dtype_name(mask.dtype())));
  if (broadcast_shapes(x.sizes(), mask.sizes()) != x.sizes())
    throw ShapeError(fmt::format("masked_fill: a mask of shape {} does not broadcast to x's {}",
                                 shape_str(mask.sizes()), shape_str(x.sizes())));
  return where(mask, value.to(x.device(), x.dtype()), x);
}

// value at the positions `index` of dim, x elsewhere.
Tensor index_fill(const Tensor& x, std::int64_t dim, const Tensor& index, const Scalar& value) {
  const std::int64_t d = wrap_dim(dim, std::max<std::int64_t>(x.dim(), 1), "index_fill");
  const std::int64_t n = x.dim() == 0 ? 1 : x.size(d);
  Tensor idx = index.reshape({-1}).to(DType::i64);
  if (idx.numel() > 0 && (min(idx).item<std::int64_t>() < -n || max(idx).item<std::int64_t>() >= n))
    throw ShapeError(
        fmt::format("index_fill: an index is out of range for dim {} of size {}", d, n));
  idx = where(lt(idx, 0), idx + n, idx);
  Tensor positions = arange(double(n), {.dtype = DType::i64, .device = x.device()});
  Tensor hit = any(eq(positions.unsqueeze(1), idx.unsqueeze(0)), {1});  // [n]
  if (x.dim() == 0) return masked_fill(x, hit.reshape({}), value);
  Shape s(std::size_t(x.dim()), 1);
  s[std::size_t(d)] = n;
  return masked_fill(x, hit.reshape(s), value);
}

// gather with the index broadcast against x in every dim but `dim`.
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<std::int64_t> dim) {
  if (!dim) return gather(x.reshape({-1}), 0, indices.reshape({-1}));
  if (indices.dim() != x.dim())
    throw ShapeError(
        fmt::format("take_along_dim: the indices have {} dims, x has {}", indices.dim(), x.dim()));
  const std::int64_t d = wrap_dim(*dim, x.dim(), "take_along_dim");
  Shape xs = x.sizes(), is = indices.sizes();
  xs[std::size_t(d)] = 1;
  is[std::size_t(d)] = 1;
  Shape b = broadcast_shapes(xs, is);
  Shape bx = b, bi = b;
  bx[std::size_t(d)] = x.size(d);
  bi[std::size_t(d)] = indices.size(d);
  return gather(x.expand(bx), d, indices.expand(bi));
}

// ---- views: no copy, differentiable as views.
std::vector<Tensor> split(const Tensor& x, std::int64_t split_size, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim(), "split"), n = x.size(d);
  if (split_size <= 0 && n > 0)
    throw ShapeError(fmt::format("split: split_size must be positive, got {}", split_size));
  std::vector<Tensor> parts;
  for (std::int64_t s = 0; s < n; s += split_size)
    parts.push_back(x.slice(d, s, std::min(n, s + split_size)));
  if (parts.empty()) parts.push_back(x);
  return parts;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes,
                          std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim(), "split");
  if (std::accumulate(sizes.begin(), sizes.end(), std::int64_t(0)) != x.size(d))
    throw ShapeError(fmt::format("split: the sizes add up to {}, not dim {}'s size {}",
                                 std::accumulate(sizes.begin(), sizes.end(), std::int64_t(0)), d,
                                 x.size(d)));
  std::vector<Tensor> parts;
  std::int64_t at = 0;
  for (std::int64_t s : sizes) {
    if (s < 0) throw ShapeError(fmt::format("split: a negative size ({})", s));
    parts.push_back(x.slice(d, at, at + s));
    at += s;
  }
  return parts;
}

std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, std::int64_t dim) {
  if (chunks <= 0) throw ShapeError(fmt::format("chunk: chunks must be positive, got {}", chunks));
  const std::int64_t n = x.size(wrap_dim(dim, x.dim(), "chunk"));
  return split(x, std::max<std::int64_t>(1, (n + chunks - 1) / chunks), dim);
}

std::vector<Tensor> unbind(const Tensor& x, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim(), "unbind");
  std::vector<Tensor> parts;
  for (std::int64_t i = 0; i < x.size(d); ++i) parts.push_back(x.select(d, i));
  return parts;
}

Tensor narrow_copy(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length) {
  return x.narrow(dim, start, length).clone();
}

Tensor movedim(const Tensor& x, std::int64_t source, std::int64_t destination) {
  const std::int64_t s = wrap_dim(source, x.dim(), "movedim");
  const std::int64_t t = wrap_dim(destination, x.dim(), "movedim");
  Shape order;
  for (std::int64_t d = 0; d < x.dim(); ++d)
    if (d != s) order.push_back(d);
  order.insert(order.begin() + t, s);
  return x.permute(order);
}

Tensor swapaxes(const Tensor& x, std::int64_t dim0, std::int64_t dim1) {
  return x.transpose(dim0, dim1);
}

Tensor unflatten(const Tensor& x, std::int64_t dim, const Shape& sizes) {
  const std::int64_t d = wrap_dim(dim, x.dim(), "unflatten");
  Shape s = x.sizes();
  s.erase(s.begin() + d);
  s.insert(s.begin() + d, sizes.begin(), sizes.end());
  return x.reshape(s);  // ShapeError when the sizes do not make dim d's
}

std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, std::string_view indexing) {
  if (indexing != "ij" && indexing != "xy")
    throw ValueError(
        fmt::format("meshgrid: indexing must be \"ij\" or \"xy\", got \"{}\"", indexing));
  Shape out;
  for (const Tensor& t : tensors) {
    if (t.dim() > 1)
      throw ShapeError(
          fmt::format("meshgrid: takes 0-d or 1-d tensors, got shape {}", shape_str(t.sizes())));
    out.push_back(t.numel());
  }
  const bool xy = indexing == "xy" && out.size() >= 2;
  if (xy) std::swap(out[0], out[1]);
  std::vector<Tensor> grids;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    std::size_t at = i;
    if (xy && i < 2) at = 1 - i;
    Shape s(out.size(), 1);
    s[at] = out[at];
    grids.push_back(tensors[i].reshape(s).expand(out));
  }
  return grids;
}

}  // namespace ferry
