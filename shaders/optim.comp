// shaders/optim.comp — one parameter's adam_step or sgd_step, in place: the per-element math
// of runtime/math/grad_ops.hpp (adam_update, sgd_update; PyTorch's _single_tensor_adam and
// _single_tensor_sgd), mirrored operation for operation. The host (vk_kernels_optim.cpp)
// records one dispatch per parameter (per part of one, when it exceeds a binding); the
// parameters of a group touch disjoint memory, so no barrier separates them.
//
// Every tensor is contiguous and of one dtype (f32, or f16/bf16 in the full variant),
// computed in float and rounded once on store. The hyper-parameters arrive as floats the host
// computed in double (1 - beta1, 1 - lr * weight_decay, lr / (1 - beta1^step), ...).
// `precise` keeps the driver from fusing a multiply and an add into an fma, so the GPU rounds
// where the CPU does.
//
// Specialization constants: 0 workgroup size, 1 OP (OP_ADAM_STEP, OP_SGD_STEP), 2 the dtype.
// Grid-stride loop over the parameter's elements.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0;
layout(constant_id = 2) const uint DT = 0;

#include "ferry_ops.glsl"  // OP_ADAM_STEP, OP_SGD_STEP: ferry::OpId

// Flag bits: the k* flags in runtime/vulkan/vk_kernels_optim.cpp.
#define F_AMSGRAD 1u
#define F_MAXIMIZE 2u
#define F_DECOUPLED 4u       // AdamW: p *= 1 - lr * weight_decay
#define F_WEIGHT_DECAY 8u    // weight_decay != 0
#define F_MOMENTUM 16u       // momentum != 0: binding 2 is the momentum buffer
#define F_NESTEROV 32u
#define F_INIT_BUFFER 64u    // the momentum buffer's first step

// Bindings: the gradient (read), the parameter, then its state, all read and written:
// adam: exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad); sgd: the momentum buffer. A binding
// the call does not use is bound to the parameter again and never touched.
FERRY_TENSOR(0, g)
FERRY_TENSOR(1, w)
FERRY_TENSOR(2, s1)
FERRY_TENSOR(3, s2)
FERRY_TENSOR(4, s3)

layout(push_constant) uniform Params {
  uint off[5];  // each binding's first element
  uint n;       // elements
  uint flags;
  float lr;
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps;
  float weight_decay;
  float decay_factor;           // 1 - lr * weight_decay
  float step_size;              // lr / (1 - beta1^step)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  float momentum, one_minus_dampening;
} p;

bool flag(uint f) { return (p.flags & f) != 0u; }

void adam(uint i) {
  uint gi = p.off[0] + i, wi = p.off[1] + i, mi = p.off[2] + i, vi = p.off[3] + i;
  float grad = LOAD_F(g, DT, gi);
  precise float param = LOAD_F(w, DT, wi);
  precise float gr = flag(F_MAXIMIZE) ? -grad : grad;
  if (flag(F_DECOUPLED))
    param = param * p.decay_factor;
  else if (flag(F_WEIGHT_DECAY))
    gr = gr + p.weight_decay * param;
  precise float m = LOAD_F(s1, DT, mi) * p.beta1 + p.one_minus_beta1 * gr;
  precise float v = LOAD_F(s2, DT, vi) * p.beta2 + p.one_minus_beta2 * gr * gr;
  precise float second = v;
  if (flag(F_AMSGRAD)) {
    uint xi = p.off[4] + i;
    second = max_f(LOAD_F(s3, DT, xi), v);
    STORE_F(s3, DT, xi, second)
  }
  precise float denom = safe_sqrt(second) / p.bias_correction2_sqrt + p.eps;
  param = param - p.step_size * (m / denom);
  STORE_F(s1, DT, mi, m)
  STORE_F(s2, DT, vi, v)
  STORE_F(w, DT, wi, param)
}

void sgd(uint i) {
  uint gi = p.off[0] + i, wi = p.off[1] + i;
  float grad = LOAD_F(g, DT, gi);
  precise float param = LOAD_F(w, DT, wi);
  precise float d = flag(F_MAXIMIZE) ? -grad : grad;
  if (flag(F_WEIGHT_DECAY)) d = d + p.weight_decay * param;
  if (flag(F_MOMENTUM)) {
    uint bi = p.off[2] + i;
    precise float buf =
        flag(F_INIT_BUFFER) ? d : LOAD_F(s1, DT, bi) * p.momentum + p.one_minus_dampening * d;
    STORE_F(s1, DT, bi, buf)
    d = flag(F_NESTEROV) ? d + p.momentum * buf : buf;
  }
  param = param - p.lr * d;
  STORE_F(w, DT, wi, param)
}

void main() {
  const uint grid = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += grid) {
    if (OP == OP_ADAM_STEP)
      adam(i);
    else
      sgd(i);
  }
}
