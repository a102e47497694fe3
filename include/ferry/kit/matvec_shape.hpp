// include/ferry/kit/matvec_shape.hpp — when a matmul is a matrix-vector product, and which
// operand is the weight: decided once here for every backend's matrix-vector path (the CPU's
// cpu_kernels_matvec.cpp, Vulkan's vk_kernels_matvec.cpp), so that they take the same calls.
//
// Note [Matrix-vector products]
// matmul's kernels see A [B, M, K] x B [B, K, N] -> C [B, M, N]. When one side has at most
// kMatvecMaxVectors rows (a token's activations times a weight: x · Wᵀ; or W · x), the product
// is bound by reading the other side, "the weight", once: c[s][g] = Σ_k v[s][k] · w[g][k] for
// s < S vectors and g < G weight rows. The weight is laid out one of two ways, each read as
// it is stored (16-bit weights are converted in registers, never widened in memory):
//  - its G rows contiguous in k: a linear layer's W [G, K], whether it is B = Wᵀ (x · Wᵀ) or
//    A = W (W · x); every backend's path takes it;
//  - its K rows contiguous in g (w_along_g): a weight kept as [K, G] and used as x · W (GPT-2's
//    checkpoints store theirs so), or attention's probabilities times V: sums down the
//    columns (the CPU's Note [Weights along the output on the CPU], matvec.comp's ALONG_G).
// The vectors may have any strides. Below kMatvecMinWeight elements the general path's loops
// are as fast.
#pragma once

#include <cstdint>
#include <optional>

#include "ferry/backend.hpp"

namespace ferry {

inline constexpr std::int64_t kMatvecMaxVectors = 8;
inline constexpr std::int64_t kMatvecMinWeight = std::int64_t(1) << 14;

// A matmul call seen as S vectors against G weight rows of K elements, per batch. Strides are
// in elements of each tensor's own view.
struct MatvecShape {
  bool weight_is_b = false;  // W = B's columns (x · Wᵀ), else W = A's rows (W · x)
  bool w_along_g = false;    // the weight's K rows are contiguous in g, not its G rows in k
  std::int64_t batches = 0, S = 0, G = 0, K = 0;
  std::int64_t w_batch = 0;
  std::int64_t w_row = 0;                      // the weight's stride along g (1 when w_along_g)
  std::int64_t w_k = 0;                        // and along k (1 unless w_along_g)
  std::int64_t x_batch = 0, x_s = 0, x_k = 0;  // the vectors
  std::int64_t c_batch = 0, c_s = 0, c_g = 0;  // where c[s][g] goes in C
};

// The matrix-vector form of matmul(A, B) -> C ([B, M, K], [B, K, N], [B, M, N]), or nothing
// when the general path should run.
inline std::optional<MatvecShape> matvec_shape(const TensorArg& A, const TensorArg& B,
                                               const TensorArg& C) {
  const std::int64_t M = C.sizes[1], N = C.sizes[2], K = A.sizes[2];
  MatvecShape s;
  // The weight as B (x · W: few rows M) or as A (W · x: few columns N), contiguous in k first
  // (every backend's form), then in g; neither, and the general path gathers it.
  const bool b_side = M <= kMatvecMaxVectors && N > M, a_side = N <= kMatvecMaxVectors;
  const auto take = [&](bool as_b, bool along_g) {
    s.weight_is_b = as_b;
    s.w_along_g = along_g;
    s.w_k = along_g ? (as_b ? B.strides[1] : A.strides[2]) : 1;
    s.w_row = along_g ? 1 : (as_b ? B.strides[2] : A.strides[1]);
    return true;
  };
  const bool found = (b_side && (B.strides[1] == 1 || K == 1) && take(true, false)) ||
                     (a_side && (A.strides[2] == 1 || K == 1) && take(false, false)) ||
                     (b_side && B.strides[2] == 1 && take(true, true)) ||
                     (a_side && A.strides[1] == 1 && take(false, true));
  if (!found) return std::nullopt;
  const TensorArg &W = s.weight_is_b ? B : A, &X = s.weight_is_b ? A : B;
  s.batches = C.sizes[0];
  s.S = s.weight_is_b ? M : N;
  s.G = s.weight_is_b ? N : M;
  s.K = K;
  if (s.G * K < kMatvecMinWeight) return std::nullopt;
  s.w_batch = W.strides[0];
  // X's vectors as S rows of K: A's rows (strides 1, 2) or B's columns (strides 2, 1).
  s.x_batch = X.strides[0];
  s.x_s = s.weight_is_b ? X.strides[1] : X.strides[2];
  s.x_k = s.weight_is_b ? X.strides[2] : X.strides[1];
  // c[s][g] is C[s][g] when the weight is B, C[g][s] when it is A.
  s.c_batch = C.strides[0];
  s.c_s = s.weight_is_b ? C.strides[1] : C.strides[2];
  s.c_g = s.weight_is_b ? C.strides[2] : C.strides[1];
  return s;
}

}  // namespace ferry
