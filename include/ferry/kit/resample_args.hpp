// include/ferry/kit/resample_args.hpp — the operands of interpolate's 2-D kernels
// (interpolate and interpolate_backward, docs/kernel-contract.md): the planes and the per-dim
// tables, checked once here for the CPU and Vulkan kernels alike.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>

#include "ferry/backend.hpp"
#include "ferry/error.hpp"

namespace ferry {

// The planes (h, w the input's, oh, ow the output's) and each table's taps.
struct ResampleArgs {
  std::int64_t h, w, oh, ow, taps_h, taps_w;
};

// The tables' weights' dtype: the compute type of `dt` (f64 for f64, else f32).
inline DType resample_weight_dtype(DType dt) { return dt == DType::f64 ? DType::f64 : DType::f32; }

// `in` [N, C, H, W] (x, or dx) and `out` [N, C, OH, OW] (y, or g), of one floating dtype; inputs
// 1-4: per dim (rows, then columns) its indices (i64) and weights (the compute type), each
// [taps, OH] (or [taps, OW]) and contiguous. The layouts (contiguous or channels-last) are the
// kernel's to check; that each index lies inside the plane needs the values (the CPU's kernel
// checks them).
inline ResampleArgs resample_args(const OpCall& call, const TensorArg& in, const TensorArg& out) {
  if (in.ndim() != 4 || out.ndim() != 4 || in.sizes[0] != out.sizes[0] ||
      in.sizes[1] != out.sizes[1] || in.dtype != out.dtype || !is_floating(in.dtype))
    throw ShapeError(fmt::format(
        "{}: expected [N, C, H, W] and [N, C, OH, OW] of one floating dtype, got {} {} and {} {}",
        call.name(), dtype_name(in.dtype), fmt::join(in.sizes, "x"), dtype_name(out.dtype),
        fmt::join(out.sizes, "x")));
  const DType weight = resample_weight_dtype(in.dtype);
  const auto taps = [&](std::size_t at, std::int64_t n) {
    const TensorArg &ix = call.inputs.at(at), &wt = call.inputs.at(at + 1);
    if (ix.dtype != DType::i64 || wt.dtype != weight || ix.ndim() != 2 || ix.sizes[1] != n ||
        wt.sizes != ix.sizes || !ix.is_contiguous() || !wt.is_contiguous())
      throw ShapeError(fmt::format(
          "{}: expected each dim's table as contiguous i64 indices and {} weights [taps, {}], "
          "got {} {} and {} {}",
          call.name(), dtype_name(weight), n, dtype_name(ix.dtype), fmt::join(ix.sizes, "x"),
          dtype_name(wt.dtype), fmt::join(wt.sizes, "x")));
    return ix.sizes[0];
  };
  if (call.inputs.size() != 5)
    throw ShapeError(fmt::format("{}: expected 5 inputs (a tensor and 2 tables), got {}",
                                 call.name(), call.inputs.size()));
  return {in.sizes[2],  in.sizes[3],           out.sizes[2],
          out.sizes[3], taps(1, out.sizes[2]), taps(3, out.sizes[3])};
}

}  // namespace ferry
