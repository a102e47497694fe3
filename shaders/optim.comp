// shaders/optim.comp — one parameter's adam_step or sgd_step, in place: the per-element math
// of include/ferry/kit/math/grad_ops.hpp (adam_update, sgd_update; PyTorch's _single_tensor_adam and
// _single_tensor_sgd), mirrored operation for operation. The host (vk_kernels_optim.cpp)
// records one dispatch per parameter (per part of one, when it exceeds a binding); the
// parameters of a group touch disjoint memory, so no barrier separates them.
//
// Every tensor is contiguous and of one dtype (f32, or f16/bf16 in the full variant),
// computed in float and rounded once on store. The hyper-parameters arrive as floats the host
// computed in double (1 - beta1, 1 - lr * weight_decay, lr / (1 - beta1^step), ...). The f64
// module (Note [f64 on Vulkan] in runtime/vulkan/vk_pipelines.cpp) computes in double, from
// the hyper-parameters as doubles, as the CPU does.
// ferry-f64-ops: adam_step sgd_step
// `precise` keeps the driver from fusing a multiply and an add into an fma, so the GPU rounds
// where the CPU does.
//
// Specialization and push constants, flag bits: shaders/abi/optim.h. Grid-stride loop over
// the parameter's elements.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/optim.h"  // spec and push constants, codes: shared with the host

#include "ferry_ops.glsl"  // OP_ADAM_STEP, OP_SGD_STEP: ferry::OpId

// Bindings: the gradient (read), the parameter, then its state, all read and written:
// adam: exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad); sgd: the momentum buffer. A binding
// the call does not use is bound to the parameter again and never touched.
FERRY_TENSOR(0, g)
FERRY_TENSOR(1, w)
FERRY_TENSOR(2, s1)
FERRY_TENSOR(3, s2)
FERRY_TENSOR(4, s3)

bool flag(uint f) { return (p.flags & f) != 0u; }
// Hyper-parameter k (HP_*).
#ifdef FERRY_F64
double hp(uint k) { return packDouble2x32(uvec2(p.hp[2u * k], p.hp[2u * k + 1u])); }
#else
float hp(uint k) { return uintBitsToFloat(p.hp[k]); }
#endif

void adam(uint i) {
  uint gi = p.off[0] + i, wi = p.off[1] + i, mi = p.off[2] + i, vi = p.off[3] + i;
  FTYPE grad = LOAD_F(g, DT, gi);
  precise FTYPE param = LOAD_F(w, DT, wi);
  precise FTYPE gr = flag(F_MAXIMIZE) ? -grad : grad;
  if (flag(F_DECOUPLED))
    param = param * hp(HP_DECAY_FACTOR);
  else if (flag(F_WEIGHT_DECAY))
    gr = gr + hp(HP_WEIGHT_DECAY) * param;
  precise FTYPE m = LOAD_F(s1, DT, mi) * hp(HP_BETA1) + hp(HP_ONE_MINUS_BETA1) * gr;
  precise FTYPE v = LOAD_F(s2, DT, vi) * hp(HP_BETA2) + hp(HP_ONE_MINUS_BETA2) * gr * gr;
  precise FTYPE second = v;
  if (flag(F_AMSGRAD)) {
    uint xi = p.off[4] + i;
    second = max_f(LOAD_F(s3, DT, xi), v);
    STORE_F(s3, DT, xi, second)
  }
  precise FTYPE denom = safe_sqrt(second) / hp(HP_BIAS_CORRECTION2_SQRT) + hp(HP_EPS);
  param = param - hp(HP_STEP_SIZE) * (m / denom);
  STORE_F(s1, DT, mi, m)
  STORE_F(s2, DT, vi, v)
  STORE_F(w, DT, wi, param)
}

void sgd(uint i) {
  uint gi = p.off[0] + i, wi = p.off[1] + i;
  FTYPE grad = LOAD_F(g, DT, gi);
  precise FTYPE param = LOAD_F(w, DT, wi);
  precise FTYPE d = flag(F_MAXIMIZE) ? -grad : grad;
  if (flag(F_WEIGHT_DECAY)) d = d + hp(HP_WEIGHT_DECAY) * param;
  if (flag(F_MOMENTUM)) {
    uint bi = p.off[2] + i;
    precise FTYPE buf =
        flag(F_INIT_BUFFER) ? d : LOAD_F(s1, DT, bi) * hp(HP_MOMENTUM) + hp(HP_ONE_MINUS_DAMPENING) * d;
    STORE_F(s1, DT, bi, buf)
    d = flag(F_NESTEROV) ? d + hp(HP_MOMENTUM) * buf : buf;
  }
  param = param - hp(HP_LR) * d;
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
