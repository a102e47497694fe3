// include/ferry/kit/attention_args.hpp — the operands of scaled_dot_product_attention's fused
// kernels as every backend reads them (the form of the call: Note [Scaled dot-product
// attention] in runtime/nn/attention.cpp), checked once here for the CPU, Vulkan and CUDA
// kernels alike, before any touches memory.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

#include "ferry/backend.hpp"
#include "ferry/error.hpp"

namespace ferry {

struct AttentionGeometry {
  std::int64_t B = 0, Hq = 0, Hk = 0, L = 0, S = 0, E = 0, Ev = 0, Bm = 0, Hm = 0;
  double scale = 1;
  bool causal = false, has_mask = false;
};

namespace detail {

inline void expect_attention_shape(std::string_view op, std::string_view what, const TensorArg& t,
                                   const Shape& want) {
  if (t.sizes != want)
    throw ShapeError(fmt::format("{}: {} must have shape {}, got {}", op, what, shape_str(want),
                                 shape_str(t.sizes)));
}

// q, k and v from inputs[first...], the mask (with has_mask) from inputs[mask_at].
inline AttentionGeometry attention_geometry(const OpCall& call, std::size_t first,
                                            std::size_t mask_at) {
  const std::string_view op = call.name();
  const TensorArg &q = call.inputs.at(first), &k = call.inputs.at(first + 1),
                  &v = call.inputs.at(first + 2);
  if (q.sizes.size() != 4 || k.sizes.size() != 4 || v.sizes.size() != 4)
    throw ShapeError(fmt::format("{}: q, k and v must be [B, H, rows, dim], got {}, {} and {}", op,
                                 shape_str(q.sizes), shape_str(k.sizes), shape_str(v.sizes)));
  AttentionGeometry g;
  g.B = q.sizes[0], g.Hq = q.sizes[1], g.L = q.sizes[2], g.E = q.sizes[3];
  g.Hk = k.sizes[1], g.S = k.sizes[2], g.Ev = v.sizes[3];
  expect_attention_shape(op, "k", k, {g.B, g.Hk, g.S, g.E});
  expect_attention_shape(op, "v", v, {g.B, g.Hk, g.S, g.Ev});
  if (g.Hk == 0 || g.Hq % g.Hk != 0)
    throw ShapeError(
        fmt::format("{}: the {} key heads must divide the {} query heads", op, g.Hk, g.Hq));
  g.scale = call.attrs.f("scale");
  g.causal = call.attrs.b("is_causal");
  g.has_mask = call.attrs.b("has_mask");
  if (g.has_mask) {
    const TensorArg& m = call.inputs.at(mask_at);
    if (m.sizes.size() != 4 || (m.sizes[0] != 1 && m.sizes[0] != g.B) ||
        (m.sizes[1] != 1 && m.sizes[1] != g.Hq) || m.sizes[2] != g.L || m.sizes[3] != g.S)
      throw ShapeError(fmt::format("{}: the mask must be [1 or {}, 1 or {}, {}, {}], got {}", op,
                                   g.B, g.Hq, g.L, g.S, shape_str(m.sizes)));
    g.Bm = m.sizes[0], g.Hm = m.sizes[1];
  }
  return g;
}

inline void expect_lse_dtype(std::string_view op, const TensorArg& lse, DType stat) {
  if (lse.dtype != stat)
    throw DTypeError(fmt::format("{}: the logsumexp must be {}", op, dtype_name(stat)));
}

}  // namespace detail

// The forward: inputs q [B, Hq, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev], [mask [Bm, Hm, L, S]];
// outputs out [B, Hq, L, Ev] and lse [B, Hq, L] of dtype `stat` (f32; f64 for f64).
inline AttentionGeometry attention_forward_args(const OpCall& call, DType stat) {
  const AttentionGeometry g = detail::attention_geometry(call, 0, 3);
  detail::expect_attention_shape(call.name(), "the output", call.outputs.at(0),
                                 {g.B, g.Hq, g.L, g.Ev});
  detail::expect_attention_shape(call.name(), "the logsumexp", call.outputs.at(1),
                                 {g.B, g.Hq, g.L});
  detail::expect_lse_dtype(call.name(), call.outputs.at(1), stat);
  return g;
}

// The backward: inputs dout, q, k, v, out, lse, [mask]; outputs dq, dk, dv (the forward's
// shapes).
inline AttentionGeometry attention_backward_args(const OpCall& call, DType stat) {
  const AttentionGeometry g = detail::attention_geometry(call, 1, 6);
  const std::string_view op = call.name();
  using detail::expect_attention_shape;
  expect_attention_shape(op, "the output's gradient", call.inputs.at(0), {g.B, g.Hq, g.L, g.Ev});
  expect_attention_shape(op, "the output", call.inputs.at(4), {g.B, g.Hq, g.L, g.Ev});
  expect_attention_shape(op, "the logsumexp", call.inputs.at(5), {g.B, g.Hq, g.L});
  expect_attention_shape(op, "dq", call.outputs.at(0), {g.B, g.Hq, g.L, g.E});
  expect_attention_shape(op, "dk", call.outputs.at(1), {g.B, g.Hk, g.S, g.E});
  expect_attention_shape(op, "dv", call.outputs.at(2), {g.B, g.Hk, g.S, g.Ev});
  detail::expect_lse_dtype(op, call.inputs.at(5), stat);
  return g;
}

}  // namespace ferry
