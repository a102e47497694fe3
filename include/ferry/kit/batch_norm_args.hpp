// include/ferry/kit/batch_norm_args.hpp — the operands of batch_norm and batch_norm_backward
// as every backend's kernel reads them (docs/kernel-contract.md), their dtypes and shapes
// checked once here for the CPU and Vulkan kernels alike; each kernel checks the layouts it
// takes.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/error.hpp"

namespace ferry {

struct BatchNormOperands {
  bool backward = false, training = false;
  double eps = 0;
  const TensorArg* x = nullptr;    // [N, C, *], floating
  const TensorArg* g = nullptr;    // the backward's gradient flowing in (x's shape and dtype)
  const TensorArg* out = nullptr;  // y, or the backward's dx (x's shape and dtype)
  const TensorArg *weight = nullptr, *bias = nullptr;  // [C] in x's dtype, where given
  // [C] in the statistics' dtype, where the call has them. Inputs: eval's running mean and
  // variance, the backward's (the forward's). Outputs: the training forward's batch mean and
  // biased variance, the backward's gradients of the weight and bias.
  const TensorArg *mean = nullptr, *var = nullptr;
  const TensorArg *batch_mean = nullptr, *batch_var = nullptr;
  const TensorArg *dweight = nullptr, *dbias = nullptr;
  std::int64_t N = 0, C = 0, area = 0;  // area: a channel's elements in one sample
  DType stats = DType::f32;             // f64 for an f64 x
};

// `call`'s operands (batch_norm's, or batch_norm_backward's where `backward`), named and
// checked: a typed error, naming `backend`'s kernel, for dtypes or shapes that disagree, never
// a read past them.
inline BatchNormOperands batch_norm_args(const OpCall& call, bool backward,
                                         std::string_view backend) {
  BatchNormOperands o{
      .backward = backward, .training = call.attrs.b("training"), .eps = call.attrs.f("eps")};
  const bool has_w = call.attrs.b("has_weight");
  std::size_t next = 0;
  if (backward) {
    o.g = &call.inputs.at(next++);
    o.x = &call.inputs.at(next++);
    o.mean = &call.inputs.at(next++);
    o.var = &call.inputs.at(next++);
    if (has_w) o.weight = &call.inputs.at(next++);
    o.dweight = &call.outputs.at(1);
    o.dbias = &call.outputs.at(2);
  } else {
    o.x = &call.inputs.at(next++);
    if (has_w) o.weight = &call.inputs.at(next++);
    if (call.attrs.b("has_bias")) o.bias = &call.inputs.at(next++);
    if (!o.training) {
      o.mean = &call.inputs.at(next++);
      o.var = &call.inputs.at(next++);
    } else {
      o.batch_mean = &call.outputs.at(1);
      o.batch_var = &call.outputs.at(2);
    }
  }
  o.out = &call.outputs.at(0);
  const TensorArg& x = *o.x;
  if (!is_floating(x.dtype))
    throw DTypeError(
        fmt::format("{}: takes a floating input, not {}", call.name(), dtype_name(x.dtype)));
  if (x.ndim() < 2)
    throw ShapeError(fmt::format("{}: the {} kernel takes x [N, C, *], got {} dims", call.name(),
                                 backend, x.ndim()));
  o.stats = x.dtype == DType::f64 ? DType::f64 : DType::f32;
  o.N = x.sizes[0];
  o.C = x.sizes[1];
  o.area = o.N * o.C == 0 ? 0 : x.numel() / (o.N * o.C);
  for (const TensorArg* t : {o.g, o.out})
    if (t && (t->dtype != x.dtype || t->sizes != x.sizes))
      throw ShapeError(fmt::format("{}: the gradient, input and output must be one {} [{}]",
                                   call.name(), dtype_name(x.dtype), fmt::join(x.sizes, ", ")));
  const std::vector<std::int64_t> per_channel{o.C};
  for (const TensorArg* t :
       {o.weight, o.bias, o.mean, o.var, o.batch_mean, o.batch_var, o.dweight, o.dbias}) {
    if (!t) continue;
    const DType want = t == o.weight || t == o.bias ? x.dtype : o.stats;
    if (t->dtype != want)
      throw DTypeError(fmt::format(
          "{}: the {} kernel takes the weight and bias as {} and the statistics as {} for a {} "
          "input, got {}",
          call.name(), backend, dtype_name(x.dtype), dtype_name(o.stats), dtype_name(x.dtype),
          dtype_name(t->dtype)));
    if (t->sizes != per_channel)
      throw ShapeError(fmt::format("{}: the per-channel vectors must be [{}], got [{}]",
                                   call.name(), o.C, fmt::join(t->sizes, ", ")));
  }
  return o;
}

}  // namespace ferry
