// include/ferry/kit/layer_norm_args.hpp — the operands of layer_norm_backward as every
// backend's kernel reads them (docs/kernel-contract.md), checked once here for the CPU and
// Vulkan kernels alike.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ferry/backend.hpp"
#include "ferry/error.hpp"

namespace ferry {

// g, x [rows, n] (x's dtype); mean, rstd [rows] (the forward's: f32, f64 for an f64 x); the
// weight [n] (x's dtype) if has_weight. Outputs dx [rows, n] (x's dtype), dweight and dbias
// [n] (the statistics' dtype).
struct LayerNormGradOperands {
  const TensorArg &g, &x, &mean, &rstd;
  const TensorArg* weight;  // null without one
  const TensorArg &dx, &dweight, &dbias;
  std::int64_t rows, n;
};

// `call`'s operands, named and checked: a typed error (naming `backend`'s kernel) for dtypes
// or shapes that disagree, never a read past them.
inline LayerNormGradOperands layer_norm_backward_args(const OpCall& call,
                                                      std::string_view backend) {
  const bool has_w = call.attrs.b("has_weight");
  const LayerNormGradOperands a{call.inputs.at(0),
                                call.inputs.at(1),
                                call.inputs.at(2),
                                call.inputs.at(3),
                                has_w ? &call.inputs.at(4) : nullptr,
                                call.outputs.at(0),
                                call.outputs.at(1),
                                call.outputs.at(2),
                                0,
                                0};
  const std::string op = "layer_norm_backward: ";
  const auto name = [](DType t) { return std::string(dtype_name(t)); };
  if (!is_floating(a.x.dtype))
    throw UnsupportedError(op + "takes a floating input, not " + name(a.x.dtype));
  const DType stats = a.x.dtype == DType::f64 ? DType::f64 : DType::f32;
  for (const TensorArg* t : {&a.mean, &a.rstd, &a.dweight, &a.dbias})
    if (t->dtype != stats)
      throw DTypeError(op + "the " + std::string(backend) +
                       " kernel takes the statistics and writes the parameters' gradients as " +
                       name(stats) + " for a " + name(a.x.dtype) + " input, got " + name(t->dtype));
  for (const TensorArg* t : {&a.g, &a.dx, a.weight})
    if (t && t->dtype != a.x.dtype)
      throw DTypeError(op + "g, dx and the weight must be x's " + name(a.x.dtype) + ", got " +
                       name(t->dtype));
  if (a.x.ndim() != 2 || a.g.sizes != a.x.sizes || a.dx.sizes != a.x.sizes)
    throw ShapeError(op + "the gradient, input and output must be one [rows, n]");
  const std::int64_t rows = a.x.sizes[0], n = a.x.sizes[1];
  if (a.mean.numel() != rows || a.rstd.numel() != rows || a.dweight.numel() != n ||
      a.dbias.numel() != n || (a.weight && a.weight->numel() != n))
    throw ShapeError(op + "mean and rstd must have " + std::to_string(rows) +
                     " elements and the weight and the parameters' gradients " + std::to_string(n));
  return {a.g, a.x, a.mean, a.rstd, a.weight, a.dx, a.dweight, a.dbias, rows, n};
}

}  // namespace ferry
