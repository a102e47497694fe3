// ferry/autocast.hpp — automatic mixed precision (torch.autocast): a scope in which the
// ops that are fast and safe in 16 bits take f16 or bf16 inputs, and those that need range
// or accumulate take f32, whatever dtype the model's tensors hold.
//
// Note [Autocast]
// An Autocast scope is per thread (like PyTorch's) and per device type: Autocast
// amp("cuda", DType::f16) changes what ops on cuda tensors compute in, not ops on cpu
// tensors. In the scope, an op casts its floating inputs as its row of ops/ops.table says
// (the autocast column, OpAutocast), before the op runs, so the result and its gradient
// follow from the cast:
//  - low (matmul, linear, the convolutions, scaled_dot_product_attention): f32 inputs
//    become the scope's dtype. These run on tensor cores, and accumulate in f32 inside
//    the kernel anyway.
//  - f32 (softmax, log_softmax, the norms, the losses, sum, prod, cumsum, exp, log, pow
//    and the other ops whose 16-bit results lose range or precision): f16 and bf16 inputs
//    become f32, and so is the result.
//  - promote (addcmul, addcdiv, atan2, index_put, scatter_add): the inputs meet at the
//    widest floating dtype among them.
//  - banned (binary_cross_entropy): refused with an Error that names
//    binary_cross_entropy_with_logits, whose log-sum-exp form is safe in 16 bits.
//  - every other op runs in its inputs' dtype: an f16 tensor from a matmul stays f16
//    through relu, add, dropout and view ops.
// f64 tensors are never cast, nor are tensors on other device types. The lists are
// PyTorch's CUDA policy (AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32,
// AT_FORALL_FP32_SET_OPT_DTYPE, AT_FORALL_PROMOTE in ATen/autocast_mode.h), applied on
// every device type: tests/data/pytorch_autocast_policy.json holds them, and
// test_autocast.cpp holds the table's column to them. (PyTorch's CPU autocast uses a
// different, older list: it keeps softmax and layer_norm in bf16.)
//
// Inside an op that autocast cast, autocast is off: linear's bias add runs in the low
// dtype, as PyTorch's linear kernel does, instead of being promoted back to f32.
//
// The casts are recorded by autograd, so gradients reach f32 parameters as f32. The low
// cast of an f32 leaf that requires grad (a parameter) is cached until the outermost scope
// of the thread ends, so a weight used by several ops in one forward is converted once;
// cache_enabled = false turns that off. backward() runs with autocast off (the gradient of
// each op follows the dtypes of its forward); ferry::checkpoint's recomputation runs under
// the autocast state of the first forward.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ferry/config.hpp"
#include "ferry/dtype.hpp"
#include "ferry/op.hpp"

namespace ferry {

// Enables (or, with enabled = false, disables) autocast for `device_type` ("cpu", "cuda",
// "vulkan", a plugin's type) on this thread until destroyed; scopes nest, the innermost
// deciding. dtype: f16 or bf16 (DTypeError otherwise); by default bf16 on "cpu" and f16
// elsewhere, as PyTorch. An empty device_type is a ValueError.
class FERRY_EXPORT Autocast {
 public:
  explicit Autocast(std::string_view device_type, std::optional<DType> dtype = std::nullopt,
                    bool enabled = true, bool cache_enabled = true);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  std::string device_type_;
  bool prev_enabled_;
  DType prev_dtype_;
  bool prev_cache_;
};

// Whether autocast is on for `device_type` on this thread, and the dtype it lowers to (the
// default for the type when no scope set one).
FERRY_EXPORT bool is_autocast_enabled(std::string_view device_type);
FERRY_EXPORT DType autocast_dtype(std::string_view device_type);
// Drops the cached casts of parameters (the outermost scope's end does this).
FERRY_EXPORT void clear_autocast_cache();

// The dtype `op` computes in under the thread's autocast state when its floating inputs on
// `device_type` are `input` (promote: the widest of them): what the op's row says, for
// tools and tests; nullopt when autocast leaves the inputs as they are.
FERRY_EXPORT std::optional<DType> autocast_target(OpId op, std::string_view device_type,
                                                  DType input);

}  // namespace ferry
