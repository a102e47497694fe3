// runtime/vulkan/vk_split.hpp — cutting tensor views that span more than one storage-buffer
// binding (maxStorageBufferRange, 128 MiB on lavapipe) into parts that each fit, so that a
// kernel dispatches once per part instead of failing.
//
// A kernel hands for_each_part the views it binds, which share the sizes of the dims it may
// cut along (outputs, rows, batches: they index the kernel's independent work). The views are
// cut alike: the outermost such dim in chunks as long as every view allows, or, where not
// even one index of it fits, one index at a time with the next dim chunked in turn. What is
// left when every cut dim is down to one index (a single row, say) may still not fit; the
// kernel then cuts that otherwise or raises UnsupportedError.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "ferry/backend.hpp"
#include "vulkan/vk_kernels.hpp"

namespace ferry::vulkan {

// The bytes of elements a view may span for bind() to take it: bind() moves the start down to
// the device's offset alignment and the end up to 16 bytes.
inline std::uint64_t usable_range(const KernelLimits& lim) {
  const std::uint64_t slack = lim.storage_alignment + 16;
  return lim.max_storage_range > 2 * slack ? lim.max_storage_range - slack
                                           : lim.max_storage_range / 2;
}

// How many indices along `dim` of `t`, its other dims whole, one binding holds: 0 when not
// even one does; the maximum for a stride-0 dim, or for dim < 0 (all of t), when t fits.
inline std::int64_t max_chunk(const KernelLimits& lim, const TensorArg& t, int dim) {
  constexpr std::int64_t kAll = std::numeric_limits<std::int64_t>::max();
  const std::uint64_t esize = dtype_size(t.dtype);
  // bind() also wants fewer than 2^32 elements, counted from the aligned start.
  const std::uint64_t cap =
      std::min<std::uint64_t>(usable_range(lim) / esize, 0xffffffffull - lim.storage_alignment);
  std::uint64_t inner = 1;  // elements reached from the first
  for (int d = 0; d < t.ndim(); ++d) {
    if (t.sizes[d] == 0) return kAll;  // an empty view binds 16 bytes
    if (d != dim) inner += std::uint64_t(t.sizes[d] - 1) * std::uint64_t(t.strides[d]);
  }
  if (inner > cap) return 0;
  if (dim < 0 || t.strides[dim] == 0) return kAll;
  return std::int64_t((cap - inner) / std::uint64_t(t.strides[dim]) + 1);
}

inline bool fits(const KernelLimits& lim, const TensorArg& t) { return max_chunk(lim, t, -1) > 0; }

inline TensorArg narrow(TensorArg t, int dim, std::int64_t start, std::int64_t length) {
  t.offset += start * t.strides[dim];
  t.sizes[dim] = length;
  return t;
}

namespace split_detail {
template <class F> void cut(const KernelLimits& lim, const std::vector<TensorArg>& views,
                            std::vector<std::int64_t>& at, int d, int last, F& f) {
  std::int64_t len = std::numeric_limits<std::int64_t>::max();
  const std::int64_t n = d < last ? views[0].sizes[d] : 0;
  if (d < last)
    for (const TensorArg& v : views) len = std::min(len, max_chunk(lim, v, d));
  if (d == last || len >= n) return f(views, at);
  const std::int64_t step = std::max<std::int64_t>(len, 1);
  for (std::int64_t s = 0; s < n; s += step) {
    std::vector<TensorArg> parts = views;
    for (TensorArg& p : parts) p = narrow(std::move(p), d, s, std::min(step, n - s));
    at[std::size_t(d)] = s;
    if (len >= 1)
      f(parts, at);
    else
      cut(lim, parts, at, d + 1, last, f);
  }
  at[std::size_t(d)] = 0;
}
}  // namespace split_detail

// Calls f(parts, at) for parts of `views` cut alike along dims [first, last), which all views
// have with equal sizes; at[d] is the part's first index along dim d (0 for dims not cut).
// Once with the views themselves when they fit.
template <class F> void for_each_part(const KernelLimits& lim, const std::vector<TensorArg>& views,
                                      int first, int last, F&& f) {
  std::vector<std::int64_t> at(std::size_t(std::max(last, 0)), 0);
  split_detail::cut(lim, views, at, first, last, f);
}

}  // namespace ferry::vulkan
