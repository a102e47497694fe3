// ferry/op.hpp — what ferry knows about each op: its id, name, arity,
// dtype rule, attributes, differentiability and which built-in backends have
// a kernel for it. For backends (register_kernel, supports) and tools; an
// application calls the ops of ferry/ops.hpp instead.
//
// Note [The op table]
// Every op, kernel or composite, is one row of ops/ops.table, ferry's native_functions.yaml.
// CMake (ops/generate.cmake) turns the table into OpId and the functor-kind
// lists (ferry/op_ids.hpp), the rows op_info() returns, and the Vulkan
// shaders' op codes (ferry_ops.glsl: OP_<NAME> is the OpId's number), so no
// list of ops is kept by hand anywhere else:
//  - front-ends take an op's dtype rule from its row (op_compute_dtype,
//    op_result_dtype, check_op_dtype) instead of deciding it themselves;
//  - the CPU and CUDA backends register their functor kernels from the
//    FERRY_<KIND>_OPS lists, the Vulkan backend loops over the rows;
//  - the kernel-coverage test holds each backend's registered kernels to the
//    table's backends column, and the conformance suite takes its op list
//    and dtypes from the rows;
//  - a device answers supports(op, dtype) from the row and what it can
//    compute (Note [Capabilities] in ferry/backend.hpp).
//
// Note [Composite ops]
// A composite op (impl "composite" in its row: square, clamp, logsumexp) is
// written once, in runtime/ops_composite.cpp, as a composition of other ops,
// so it runs on every device that runs its parts and needs no kernel. It is
// differentiable through its parts (grad "parts": autograd records the ops
// it is made of, as PyTorch's CompositeImplicitAutograd does) or by its own
// formula (grad "formula": mean and var record one node each). A backend may
// still have a fused kernel for one (the row's backends, or a plugin that
// registers it): the fused kernel runs when the device supports the op in
// the dtype and no gradient is being recorded for the call, the composition
// otherwise — unless its grad is "formula" (its front-end records the one node
// whichever ran: cholesky, solve_triangular, lu_factor_ex) or its row names
// backward kernel rows (the column backward,
// OpInfo::backward_kernels(): the convolutions' conv_backward_input and
// conv_backward_weight, batch_norm_backward, the pools', interpolate's and
// scaled_dot_product_attention's): where the device has those too, it runs under autograd too,
// its node calling them (detail::use_fused_kernel_with_backward decides). debug::CompositesOnly
// turns fused kernels off on a thread, which is how the conformance suite holds each fused kernel
// to its composition. Kind "composite" marks an op without a kernel interface (the arguments do not
// fit one of the kernel kinds), which no backend can register.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "ferry/config.hpp"
#include "ferry/dtype.hpp"
#include "ferry/op_ids.hpp"  // generated: OpId, kOpCount, FERRY_<KIND>_OPS

namespace ferry {

// A set of dtypes, one bit per DType.
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<DType> dts) {
    for (DType d : dts) bits_ |= bit(d);
  }
  static constexpr DTypeSet all() {
    return {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32,
            DType::i64, DType::u8,  DType::i8,   DType::i16, DType::boolean};
  }
  static constexpr DTypeSet numeric() { return all().without(DType::boolean); }
  static constexpr DTypeSet floating() { return {DType::f32, DType::f16, DType::bf16, DType::f64}; }
  static constexpr DTypeSet integer() {
    return {DType::i32, DType::i64, DType::u8, DType::i8, DType::i16};
  }
  // The integers and bool: the bitwise ops.
  static constexpr DTypeSet integral() { return integer().with(DType::boolean); }

  constexpr bool has(DType d) const { return (bits_ & bit(d)) != 0; }
  constexpr DTypeSet without(DType d) const { return from_bits(std::uint16_t(bits_ & ~bit(d))); }
  constexpr DTypeSet with(DType d) const { return from_bits(std::uint16_t(bits_ | bit(d))); }
  constexpr DTypeSet operator&(DTypeSet o) const {
    return from_bits(std::uint16_t(bits_ & o.bits_));
  }
  constexpr bool operator==(const DTypeSet&) const = default;
  constexpr bool empty() const { return bits_ == 0; }

 private:
  static constexpr std::uint16_t bit(DType d) { return std::uint16_t(1u << unsigned(d)); }
  static constexpr DTypeSet from_bits(std::uint16_t b) {
    DTypeSet s;
    s.bits_ = b;
    return s;
  }
  std::uint16_t bits_ = 0;
};

// The table's kinds (its kind column; FERRY_OP_KINDS is generated from
// ops/generate.cmake's list): the functor kinds unary, binary, compare and
// activation_backward, the kernel kinds, and composite (no kernel interface,
// only its composition: Note [Composite ops]).
enum class OpKind : std::uint8_t {
#define FERRY_OP_KIND_ENUM(k) k,
  FERRY_OP_KINDS(FERRY_OP_KIND_ENUM)
#undef FERRY_OP_KIND_ENUM
};
// "unary", "index_backward", ...: the kind as the table spells it.
FERRY_EXPORT std::string_view op_kind_name(OpKind kind);
// The dtype the kernel computes in (and supports() is asked about).
enum class OpCompute : std::uint8_t {
  same,   // the inputs' (promoted) dtype
  float_  // integer and bool inputs become f32 first
};
// The output's dtype.
enum class OpResult : std::uint8_t { same, bool_, i64, widen, given };
enum class OpPromote : std::uint8_t { common, none };
// formula: a backward formula in runtime/autograd/; parts: differentiable
// through the ops a composite op is made of.
enum class OpGrad : std::uint8_t { formula, parts, none, backward };
// kernel: every device runs it as a kernel; composite: the core composes it
// (Note [Composite ops]).
enum class OpImpl : std::uint8_t { kernel, composite };
// What an autocast scope does to the op's floating inputs (the table's autocast
// column; Note [Autocast] in ferry/autocast.hpp): none, lower (to the scope's
// f16 or bf16), f32, promote (to the widest of them), banned (an Error).
enum class OpAutocast : std::uint8_t { none, lower, f32, promote, banned };

inline constexpr std::uint8_t kOpOn_cpu = 1, kOpOn_cuda = 2, kOpOn_vulkan = 4;

struct OpInfo {
  OpId id;
  std::string_view name;           // "gelu_tanh"
  std::string_view backward_name;  // its autograd node's name, "gelu_tanhBackward"
  OpKind kind;
  int inputs;   // -1: any number
  int outputs;  // -1: any number
  DTypeSet dtypes;
  OpCompute compute;
  OpResult result;
  OpPromote promote;
  OpGrad grad;
  OpImpl impl;
  std::uint8_t builtin_backends;  // kOpOn_* bits
  std::string_view attrs;         // "dim", "eps,has_weight,has_bias", or empty
  double test_lo, test_hi;        // the inputs the conformance suite draws (its domain)
  OpAutocast autocast = OpAutocast::none;
  // The backward kernel rows (grad backward) its gradient runs where the device has its kernel
  // and theirs (the column backward; Note [Composite ops]): the first backward_count.
  OpId backward_rows[2] = {};
  int backward_count = 0;

  // The dtypes a kernel of this op is dispatched on: `dtypes`, narrowed to the
  // floating ones when the op computes in a float.
  DTypeSet kernel_dtypes() const {
    return compute == OpCompute::float_ ? dtypes & DTypeSet::floating() : dtypes;
  }
  // Whether the built-in backend `backend` ("cpu", "cuda", "vulkan") has a kernel.
  bool builtin_kernel(std::string_view backend) const;
  std::span<const OpId> backward_kernels() const {
    return {backward_rows, std::size_t(backward_count)};
  }
};

// The row of `op`.
FERRY_EXPORT const OpInfo& op_info(OpId op);
inline std::string_view op_name(OpId op) { return op_info(op).name; }
// Every row, in OpId order.
FERRY_EXPORT std::span<const OpInfo> op_table();
// The op named `name`, or nullopt.
FERRY_EXPORT std::optional<OpId> op_from_name(std::string_view name);

// ---- an op's dtype rule, for front-ends and backends alike ----
// DTypeError unless the op takes `dt` (its `dtypes` column); `what` describes
// the operand for the message ("a tensor of shape [2, 3]").
FERRY_EXPORT void check_op_dtype(OpId op, DType dt, std::string_view what);
// The dtype the op's kernel computes in, from the inputs' promoted dtype.
FERRY_EXPORT DType op_compute_dtype(OpId op, DType promoted);
// The output's dtype from the compute dtype (`given` ops: the compute dtype).
FERRY_EXPORT DType op_result_dtype(OpId op, DType compute);

}  // namespace ferry
