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

// OptimParams::hp's hyper-parameters, computed by the host in double.
FERRY_CODE(HP_LR, 0u)
FERRY_CODE(HP_BETA1, 1u)
FERRY_CODE(HP_BETA2, 2u)
FERRY_CODE(HP_ONE_MINUS_BETA1, 3u)
FERRY_CODE(HP_ONE_MINUS_BETA2, 4u)
FERRY_CODE(HP_EPS, 5u)
FERRY_CODE(HP_WEIGHT_DECAY, 6u)
FERRY_CODE(HP_DECAY_FACTOR, 7u)           // 1 - lr * weight_decay
FERRY_CODE(HP_STEP_SIZE, 8u)              // lr / (1 - beta1^step)
FERRY_CODE(HP_BIAS_CORRECTION2_SQRT, 9u)  // sqrt(1 - beta2^step)
FERRY_CODE(HP_MOMENTUM, 10u)
FERRY_CODE(HP_ONE_MINUS_DAMPENING, 11u)
FERRY_CODE(HP_COUNT, 12u)

FERRY_PUSH_CONSTANTS(OptimParams) {
  uint off[5];  // each binding's first element
  uint n;       // elements
  uint flags;   // F_*
  // The hyper-parameters, indexed by HP_*: float bits in word k, or (the f64 module) a
  // double's words in 2k and 2k + 1.
  uint hp[24];
}
FERRY_END_PUSH_CONSTANTS(OptimParams)

#endif
