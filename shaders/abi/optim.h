// shaders/abi/optim.h — the interface of shaders/optim.comp and
// runtime/vulkan/vk_kernels_optim.cpp (Note [Shader interfaces] in abi.h).
#ifndef FERRY_SHADER_ABI_OPTIM_H
#define FERRY_SHADER_ABI_OPTIM_H
#include "abi.h"

#define FERRY_OPTIM_SPEC(X)                               \
  X(1, uint, OP, 0) /* OpId: OP_ADAM_STEP, OP_SGD_STEP */ \
  X(2, uint, DT, 0) /* the parameter's dtype (floating) */
FERRY_SPEC_CONSTANTS(OptimSpec, FERRY_OPTIM_SPEC)

// Bits of OptimParams::flags.
FERRY_CODE(F_AMSGRAD, 1u)
FERRY_CODE(F_MAXIMIZE, 2u)
FERRY_CODE(F_DECOUPLED, 4u)     // AdamW: p *= 1 - lr * weight_decay
FERRY_CODE(F_WEIGHT_DECAY, 8u)  // weight_decay != 0
FERRY_CODE(F_MOMENTUM, 16u)     // momentum != 0: binding 2 is the momentum buffer
FERRY_CODE(F_NESTEROV, 32u)
FERRY_CODE(F_INIT_BUFFER, 64u)  // the momentum buffer's first step

FERRY_PUSH_CONSTANTS(OptimParams) {
  uint off[5];  // each binding's first element
  uint n;       // elements
  uint flags;   // F_*
  float lr;
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps;
  float weight_decay;
  float decay_factor;           // 1 - lr * weight_decay
  float step_size;              // lr / (1 - beta1^step)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  float momentum, one_minus_dampening;
}
FERRY_END_PUSH_CONSTANTS(OptimParams)

#endif
