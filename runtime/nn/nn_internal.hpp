// runtime/nn/nn_internal.hpp — the argument checks nn's functions and layers share.
// Internal to the core.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

#include "ferry/error.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/ops.hpp"
#include "ferry/tensor.hpp"

namespace ferry::nn::detail {

inline void check_defined(std::string_view fn, std::string_view arg, const Tensor& t) {
  if (!t.defined()) throw Error(fmt::format("{}: {} is undefined", fn, arg));
}

inline void check_floating(std::string_view fn, std::string_view arg, const Tensor& t) {
  if (!is_floating(t.dtype()))
    throw DTypeError(fmt::format(
        "{}: {} must be floating (f32, f16, bf16, f64), got {} (shape {}); convert it first, "
        "e.g. x.to(ferry::DType::f32)",
        fn, arg, dtype_name(t.dtype()), shape_str(t.sizes())));
}

// A layer's parameter options: f32 unless given, a floating dtype.
inline TensorOptions param_options(std::string_view layer, const TensorOptions& o) {
  const DType dt = o.dtype_or(DType::f32);
  if (!is_floating(dt))
    throw DTypeError(fmt::format("{}: parameters must be floating (f32, f16, bf16, f64), got {}",
                                 layer, dtype_name(dt)));
  return {.dtype = dt, .device = o.device};
}

inline void check_size(std::string_view layer, std::string_view what, std::int64_t v) {
  if (v < 0) throw ShapeError(fmt::format("{}: {} must be >= 0, got {}", layer, what, v));
}

// A loss's per-element values reduced as `reduction` says.
inline Tensor reduce_loss(const Tensor& per_element, Reduction reduction) {
  switch (reduction) {
    case Reduction::none:
      return per_element;
    case Reduction::sum:
      return sum(per_element);
    case Reduction::mean:
      break;
  }
  return mean(per_element);
}

// The input and target of an element-wise loss: defined, one shape, floating.
inline void check_pair(std::string_view op, const Tensor& input, const Tensor& target) {
  if (!input.defined() || !target.defined())
    throw Error(fmt::format("{}: the input and the target must be defined", op));
  if (input.sizes() != target.sizes())
    throw ShapeError(fmt::format("{}: the input has shape {} but the target has shape {}", op,
                                 shape_str(input.sizes()), shape_str(target.sizes())));
  if (!is_floating(input.dtype()) || !is_floating(target.dtype()))
    throw DTypeError(fmt::format("{}: the input and the target must be floating, got {} and {}", op,
                                 dtype_name(input.dtype()), dtype_name(target.dtype())));
}

inline const char* bool_str(bool b) { return b ? "true" : "false"; }

}  // namespace ferry::nn::detail
