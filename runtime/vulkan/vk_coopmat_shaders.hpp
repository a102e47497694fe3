// runtime/vulkan/vk_coopmat_shaders.hpp — the SPIR-V of shaders/gemm_coopmat.slang and
// shaders/attention_coopmat.slang, compiled at
// build time by Slang's compiler (tools/slangc/ferry_slangc.cpp, shaders/coopmat.cmake) and
// embedded in the module, one entry per tile variant and kind. Empty when the build had no
// Slang compiler; kCoopmatBuildNote then says why (Note [Cooperative-matrix GEMM] in
// runtime/vulkan/vk_kernels_coopmat.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::vulkan {

// How the kernel reads its B operand.
enum class CoopmatOperandB : std::uint32_t {
  rows,              // B[b, K, N], rows contiguous
  transposed,        // B_TRANS=1: B as Bt[b, N, K], rows contiguous (a Linear's weight)
  conv_input,        // CONV=1: the im2col matrix of a convolution's input, gathered as it is staged
  conv_output_grad,  // CONV=2: the same of its output's gradient, for its input's gradient
  conv_weight_grad,  // CONV=3: the input's im2col matrix transposed, for the weight's gradient
};
// How many layouts there are: the module table's and the tile file's bound.
inline constexpr std::uint32_t kCoopmatLayouts = 5;

struct EmbeddedCoopmatShader {
  // "gemm_coopmat_w2x2_t4x4_k32", "attention_coopmat_d64_w4_k32",
  // "attention_dkv_coopmat_d64_w2_k32"; "_f32out" for an f32 result; "_bt" where B comes
  // transposed, "_conv..." for convolutions,
  // "_bf16" for bf16, "_emulated" for the scalar emulation.
  const char* name;
  bool emulated;  // EMULATE_COOPMAT=1: plain scalar code, runs on any device (lavapipe)
  CoopmatOperandB b;
  bool bf16;  // BF16=1: bf16 operands and result, else f16
  // The tiling (shaders/gemm_coopmat.slang): WARPS_M x WARPS_N subgroups of 32, each TM x TN
  // 16x16 accumulators; K stepped by BK.
  std::uint32_t warps_m, warps_n, tm, tn, bk;
  // 0 for the GEMMs; an attention module's (shaders/attention_coopmat.slang,
  // shaders/attention_backward_coopmat.slang) head dim D, its WARPS subgroups of 16 rows in
  // warps_m and the other side's rows per step (TILE_KEYS, TILE) in bk.
  std::uint32_t head_dim;
  // An attention module's pass, shaders/abi/attention.h's ATTN_MODE_FORWARD, _DQ or _DKV (0
  // for the GEMMs).
  std::uint32_t attention_pass;
  // OUT_F32=1 ("_f32out"): a GEMM of bf16 operands with an f32 result, for f32 products
  // through bf16 x 3 (Note [f32 products on cooperative matrices] in vk_kernels_coopmat.cpp).
  bool f32_result;
  const std::uint32_t* words;
  std::size_t word_count;
};

extern const EmbeddedCoopmatShader kEmbeddedCoopmatShaders[];
extern const std::size_t kEmbeddedCoopmatShaderCount;
// Empty when the modules were built; otherwise why not ("no Slang compiler: ...").
extern const char* const kCoopmatBuildNote;

}  // namespace ferry::vulkan
