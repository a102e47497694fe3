// runtime/nn/nn_internal.hpp — the argument checks nn's functions and layers share.
// Internal to the core.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

#include "ferry/error.hpp"
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

inline const char* bool_str(bool b) { return b ? "true" : "false"; }

}  // namespace ferry::nn::detail
