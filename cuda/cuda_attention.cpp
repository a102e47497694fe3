// cuda/cuda_attention.cpp — scaled_dot_product_attention and its backward on CUDA, host side:
// the operands checked as on every backend (ferry/kit/attention_args.hpp), then the fused
// kernels of cuda_kernels_attention.cu (Note [Fused attention on CUDA]).
#include "cuda_attention.hpp"

#include <fmt/format.h>

#include "cuda_kernels.hpp"
#include "ferry/kit/attention_args.hpp"

namespace ferry::cuda {
namespace {

AttentionParams params(const AttentionGeometry& g) {
  AttentionParams p{};
  p.B = g.B, p.Hq = g.Hq, p.group = g.Hq / g.Hk, p.L = g.L, p.S = g.S, p.E = g.E, p.EV = g.Ev;
  p.mask_sb = g.Bm == 1 ? 0 : g.Hm * g.L * g.S;
  p.mask_sh = g.Hm == 1 ? 0 : g.L * g.S;
  p.scale = g.scale;
  p.causal = g.causal;
  p.has_mask = g.has_mask;
  return p;
}

void require_contiguous(const OpCall& c) {
  for (const auto* list : {&c.inputs, &c.outputs})
    for (const TensorArg& t : *list)
      if (!t.is_contiguous())
        throw Error(fmt::format("{}: the cuda kernel takes contiguous tensors", c.name()));
}

// The statistics' dtype: f64 for f64, else f32.
DType stat_dtype(DType dt) { return dt == DType::f64 ? DType::f64 : DType::f32; }

void forward(DeviceImpl& d, const OpCall& c) {
  const DType dt = c.inputs.at(0).dtype;
  const AttentionGeometry g = attention_forward_args(c, stat_dtype(dt));
  require_contiguous(c);
  if (g.B * g.Hq * g.L == 0 || g.Ev == 0) return;
  launch_attention_forward(cuda_device(d), dt, params(g),
                           {data_ptr(c.inputs[0]), data_ptr(c.inputs[1]), data_ptr(c.inputs[2]),
                            g.has_mask ? data_ptr(c.inputs[3]) : nullptr, data_ptr(c.outputs[0]),
                            data_ptr(c.outputs[1])});
}

void backward(DeviceImpl& d, const OpCall& c) {
  const DType dt = c.inputs.at(1).dtype;
  const AttentionGeometry g = attention_backward_args(c, stat_dtype(dt));
  require_contiguous(c);
  launch_attention_backward(
      cuda_device(d), dt, params(g),
      {data_ptr(c.inputs[0]), data_ptr(c.inputs[1]), data_ptr(c.inputs[2]), data_ptr(c.inputs[3]),
       data_ptr(c.inputs[4]), data_ptr(c.inputs[5]), g.has_mask ? data_ptr(c.inputs[6]) : nullptr,
       data_ptr(c.outputs[0]), data_ptr(c.outputs[1]), data_ptr(c.outputs[2])});
}

}  // namespace

void add_attention_kernels(KernelTable& table) {
  table.emplace_back(OpId::scaled_dot_product_attention, forward);
  table.emplace_back(OpId::scaled_dot_product_attention_backward, backward);
}

}  // namespace ferry::cuda
