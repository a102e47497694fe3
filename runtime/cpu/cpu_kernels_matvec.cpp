// runtime/cpu/cpu_kernels_matvec.cpp — matmul's matrix-vector path on the CPU: products with
// at most kMatvecMaxVectors rows on one side (a token's activations times a weight, a weight times
// a vector), which are bound by reading the weight once (Note [Matrix-vector products on the CPU]).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_clones.hpp"  // FERRY_CPU_CLONES, FERRY_CPU_FEATURE_PATHS
#include "cpu/cpu_loops.hpp"
#include "ferry/kit/matvec_shape.hpp"

namespace ferry::cpu {
namespace {

// Note [Matrix-vector products on the CPU]
// Which calls come here, and the names S, G, K, weight and vectors: Note [Matrix-vector
// products] (ferry/kit/matvec_shape.hpp). The weight is read once, as it is: 16-bit rows are
// converted in registers (GCC's vector extension: integer and float vector operations for f16,
// a shift for bf16), never widened in memory, which is what the general path (widen both
// operands, sgemm) did for every call, at a hundred times the cost. The vectors are widened to
// f32 once (S · K floats, in cache). Threads split the weight's rows; each row's S sums are
// kept in S vector registers and reduced at the end, in f32 (f64 stays on its BLAS path).
constexpr int kLanes = 16;
typedef float Vf __attribute__((vector_size(kLanes * sizeof(float))));
typedef std::uint16_t Vh __attribute__((vector_size(kLanes * sizeof(std::uint16_t))));
typedef std::uint32_t Vu __attribute__((vector_size(kLanes * sizeof(std::uint32_t))));

// kLanes weights from p, as floats (an out-parameter: a 64-byte vector returned by value would
// have a different ABI in each clone).
template <typename T> [[gnu::always_inline]] inline void load(const T* p, Vf& v) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(&v, p, sizeof v);
  } else if constexpr (std::is_same_v<T, Half>) {
    // In integer and float vector operations, which every clone keeps in vectors (GCC
    // converts a _Float16 vector one element at a time): the exponent and mantissa moved
    // into a float's places and scaled by 2^112 (subnormals included), infinities and NaNs
    // given the float's all-ones exponent, then the sign.
    Vh b;
    std::memcpy(&b, p, sizeof b);
    const Vu h = __builtin_convertvector(b, Vu);
    const Vu em = h & 0x7fffu, moved = em << 13;
    Vf magnitude;
    std::memcpy(&magnitude, &moved, sizeof magnitude);
    magnitude *= 0x1p112f;
    Vu bits;
    std::memcpy(&bits, &magnitude, sizeof bits);
    bits = em >= 0x7c00u ? (moved | 0x7f800000u) : bits;
    bits |= (h & 0x8000u) << 16;
    std::memcpy(&v, &bits, sizeof v);
  } else {
    Vh b;
    std::memcpy(&b, p, sizeof b);
    const Vu wide = __builtin_convertvector(b, Vu) << 16;
    std::memcpy(&v, &wide, sizeof v);
  }
}

// Rows [g, g + RG) of the weight against the S vectors: RG rows at a time, so that a few
// streams of the weight are in flight and RG · S sums are independent chains.
template <typename T, int S, int RG>
[[gnu::always_inline]] inline void row_group(const T* w, std::int64_t w_row, const float* v,
                                             std::int64_t K, std::int64_t g, float* c,
                                             std::int64_t c_s, std::int64_t c_g) {
  Vf acc[RG][S] = {};
  std::int64_t k = 0;
  for (; k + kLanes <= K; k += kLanes) {
    Vf x[RG];
    for (int r = 0; r < RG; ++r) load(w + (g + r) * w_row + k, x[r]);
    for (int s = 0; s < S; ++s) {
      Vf vs;
      std::memcpy(&vs, v + s * K + k, sizeof vs);
      for (int r = 0; r < RG; ++r) acc[r][s] += x[r] * vs;
    }
  }
  for (int r = 0; r < RG; ++r) {
    const T* row = w + (g + r) * w_row;
    for (int s = 0; s < S; ++s) {
      float sum = 0;
      for (int l = 0; l < kLanes; ++l) sum += acc[r][s][l];
      for (std::int64_t kk = k; kk < K; ++kk) sum += float(row[kk]) * v[s * K + kk];
      c[s * c_s + (g + r) * c_g] = sum;
    }
  }
}

template <typename T, int S>
FERRY_CPU_CLONES void weight_rows(const T* w, std::int64_t w_row, const float* v, std::int64_t K,
                                  std::int64_t g0, std::int64_t g1, float* c, std::int64_t c_s,
                                  std::int64_t c_g) {
  constexpr int RG = S <= 2 ? 4 : S <= 4 ? 2 : 1;
  std::int64_t g = g0;
  for (; g + RG <= g1; g += RG) row_group<T, S, RG>(w, w_row, v, K, g, c, c_s, c_g);
  for (; g < g1; ++g) row_group<T, S, 1>(w, w_row, v, K, g, c, c_s, c_g);
}

#ifdef FERRY_CPU_FEATURE_PATHS
// f16 rows where the CPU has F16C (x86-64-v3 and up): vcvtph2ps converts eight halves in one
// instruction, three times faster than the portable bit operations of load(). row_group's
// loop with that load; a separate function because the intrinsics need its target.
template <int S, int RG>
__attribute__((target("avx2,fma,f16c"))) void half_group_f16c(const Half* w, std::int64_t w_row,
                                                              const float* v, std::int64_t K,
                                                              std::int64_t g, float* c,
                                                              std::int64_t c_s, std::int64_t c_g) {
  __m256 acc[RG][S][2];
  for (int r = 0; r < RG; ++r)
    for (int s = 0; s < S; ++s) acc[r][s][0] = acc[r][s][1] = _mm256_setzero_ps();
  std::int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m256 x[RG][2];
    for (int r = 0; r < RG; ++r) {
      const auto* p = reinterpret_cast<const __m128i*>(w + (g + r) * w_row + k);
      x[r][0] = _mm256_cvtph_ps(_mm_loadu_si128(p));
      x[r][1] = _mm256_cvtph_ps(_mm_loadu_si128(p + 1));
    }
    for (int s = 0; s < S; ++s)
      for (int h = 0; h < 2; ++h) {
        const __m256 vs = _mm256_loadu_ps(v + s * K + k + 8 * h);
        for (int r = 0; r < RG; ++r) acc[r][s][h] = _mm256_fmadd_ps(x[r][h], vs, acc[r][s][h]);
      }
  }
  for (int r = 0; r < RG; ++r) {
    const Half* row = w + (g + r) * w_row;
    for (int s = 0; s < S; ++s) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, _mm256_add_ps(acc[r][s][0], acc[r][s][1]));
      float sum = 0;
      for (float l : lanes) sum += l;
      for (std::int64_t kk = k; kk < K; ++kk) sum += float(row[kk]) * v[s * K + kk];
      c[s * c_s + (g + r) * c_g] = sum;
    }
  }
}

template <int S> __attribute__((target("avx2,fma,f16c"))) void half_rows_f16c(
    const Half* w, std::int64_t w_row, const float* v, std::int64_t K, std::int64_t g0,
    std::int64_t g1, float* c, std::int64_t c_s, std::int64_t c_g) {
  constexpr int RG = S <= 2 ? 4 : S <= 4 ? 2 : 1;
  std::int64_t g = g0;
  for (; g + RG <= g1; g += RG) half_group_f16c<S, RG>(w, w_row, v, K, g, c, c_s, c_g);
  for (; g < g1; ++g) half_group_f16c<S, 1>(w, w_row, v, K, g, c, c_s, c_g);
}

#endif

template <typename T, int S> void run_rows(const T* w, std::int64_t w_row, const float* v,
                                           std::int64_t K, std::int64_t G, float* c,
                                           std::int64_t c_s, std::int64_t c_g) {
  // A few hundred kilobytes of weight per task.
  const std::int64_t grain = std::max<std::int64_t>(1, (1 << 18) / std::max<std::int64_t>(1, K));
  parallel_range(G, grain, [&](std::int64_t g0, std::int64_t g1) {
#ifdef FERRY_CPU_FEATURE_PATHS
    if constexpr (std::is_same_v<T, Half>)
      if (cpu_has_f16c()) return half_rows_f16c<S>(w, w_row, v, K, g0, g1, c, c_s, c_g);
#endif
    weight_rows<T, S>(w, w_row, v, K, g0, g1, c, c_s, c_g);
  });
}

template <typename T> void dispatch_rows(std::int64_t S, const T* w, std::int64_t w_row,
                                         const float* v, std::int64_t K, std::int64_t G, float* c,
                                         std::int64_t c_s, std::int64_t c_g) {
  switch (S) {
    case 1:
      return run_rows<T, 1>(w, w_row, v, K, G, c, c_s, c_g);
    case 2:
      return run_rows<T, 2>(w, w_row, v, K, G, c, c_s, c_g);
    case 3:
      return run_rows<T, 3>(w, w_row, v, K, G, c, c_s, c_g);
    case 4:
      return run_rows<T, 4>(w, w_row, v, K, G, c, c_s, c_g);
    case 5:
      return run_rows<T, 5>(w, w_row, v, K, G, c, c_s, c_g);
    case 6:
      return run_rows<T, 6>(w, w_row, v, K, G, c, c_s, c_g);
    case 7:
      return run_rows<T, 7>(w, w_row, v, K, G, c, c_s, c_g);
    default:
      return run_rows<T, 8>(w, w_row, v, K, G, c, c_s, c_g);
  }
}

// Note [Weights along the output on the CPU]
// The weight's second layout (w_along_g, Note [Matrix-vector products]): its K rows are
// contiguous in g, so c[s][g] = Σ_k v[s][k] W[k][g] runs down its columns. A task takes a block
// of up to kColumnBlock columns of one batch (halved, down to 128, while there are fewer
// blocks than threads) and keeps their S sums a column in an array; for each group of
// kRowsAtOnce rows of k it adds each v[s][k] times the block's piece of that row, converted
// to floats: in registers (vcvtph2ps, or a shift for bf16) where the CPU has AVX2, FMA and
// F16C, else into a buffer of the pieces first (f32 pieces are read in place). The weight is
// still read once, from memory, as it is stored; the sums and the buffer are tens of kilobytes,
// in the caches. Tasks are (batch, block) pairs, so attention's per-head products (64
// columns, thousands of keys) spread over the threads as a large weight does.
constexpr std::int64_t kColumnBlock = 1024;
constexpr int kRowsAtOnce = 8;  // row pieces in flight, and one pass over the sums for each

// n (at most kColumnBlock) weights from p as floats: p itself for f32, else converted into buf.
template <typename T> const float* as_floats(const T* p, std::int64_t n, float* buf) {
  if constexpr (std::is_same_v<T, float>) {
    return p;
  } else {
#ifdef FERRY_CPU_FEATURE_PATHS
    if constexpr (std::is_same_v<T, Half>)
      if (cpu_has_f16c()) {
        halves_to_floats_f16c(p, n, buf);
        return buf;
      }
#endif
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      Vf x;
      load(p + i, x);
      std::memcpy(buf + i, &x, sizeof x);
    }
    for (; i < n; ++i) buf[i] = float(p[i]);
    return buf;
  }
}

// acc[s * kColumnBlock + j] = Σ_k v[s * K + k] · w[k * w_k + j], for j < n and s < S.
template <typename T>
FERRY_CPU_CLONES void column_sums(const T* w, std::int64_t w_k, const float* v, std::int64_t S,
                                  std::int64_t K, std::int64_t n, float* __restrict acc) {
  alignas(64) float buf[kRowsAtOnce][kColumnBlock];
  std::fill(acc, acc + S * kColumnBlock, 0.0f);
  std::int64_t k = 0;
  for (; k + kRowsAtOnce <= K; k += kRowsAtOnce) {
    const float* __restrict r[kRowsAtOnce];
    for (int q = 0; q < kRowsAtOnce; ++q) r[q] = as_floats(w + (k + q) * w_k, n, buf[q]);
    for (std::int64_t s = 0; s < S; ++s) {
      const float* vs = v + s * K + k;
      float* __restrict a = acc + s * kColumnBlock;
      for (std::int64_t j = 0; j < n; ++j) {
        float sum = a[j];
        for (int q = 0; q < kRowsAtOnce; ++q) sum += vs[q] * r[q][j];
        a[j] = sum;
      }
    }
  }
  for (; k < K; ++k) {
    const float* __restrict r = as_floats(w + k * w_k, n, buf[0]);
    for (std::int64_t s = 0; s < S; ++s) {
      const float vk = v[s * K + k];
      float* __restrict a = acc + s * kColumnBlock;
      for (std::int64_t j = 0; j < n; ++j) a[j] += vk * r[j];
    }
  }
}

#ifdef FERRY_CPU_FEATURE_PATHS
// column_sums for f16 and bf16 where the CPU has AVX2, FMA and F16C: the pieces converted in
// registers as they are added, with no buffer between ([1, 4096] x [4096, 14336] on a 2-core
// AVX-512 VM: f16 5.6 -> 3.1 ms, bf16 5.7 -> 3.3 ms).
template <typename T>
__attribute__((target("avx2,fma,f16c"))) void column_sums_x86(const T* w, std::int64_t w_k,
                                                              const float* v, std::int64_t S,
                                                              std::int64_t K, std::int64_t n,
                                                              float* __restrict acc) {
  std::fill(acc, acc + S * kColumnBlock, 0.0f);
  const std::int64_t n8 = n / 8 * 8;
  std::int64_t k = 0;
  for (; k + kRowsAtOnce <= K; k += kRowsAtOnce)
    for (std::int64_t s = 0; s < S; ++s) {
      const float* vs = v + s * K + k;
      __m256 vq[kRowsAtOnce];
      for (int q = 0; q < kRowsAtOnce; ++q) vq[q] = _mm256_set1_ps(vs[q]);
      float* a = acc + s * kColumnBlock;
      for (std::int64_t j = 0; j < n8; j += 8) {
        __m256 sum = _mm256_loadu_ps(a + j);
        for (int q = 0; q < kRowsAtOnce; ++q) {
          const __m128i h =
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + (k + q) * w_k + j));
          __m256 x;
          if constexpr (std::is_same_v<T, Half>)
            x = _mm256_cvtph_ps(h);
          else  // bf16: the float's high half
            x = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
          sum = _mm256_fmadd_ps(x, vq[q], sum);
        }
        _mm256_storeu_ps(a + j, sum);
      }
      for (std::int64_t j = n8; j < n; ++j)
        for (int q = 0; q < kRowsAtOnce; ++q) a[j] += vs[q] * float(w[(k + q) * w_k + j]);
    }
  for (; k < K; ++k)
    for (std::int64_t s = 0; s < S; ++s)
      for (std::int64_t j = 0; j < n; ++j)
        acc[s * kColumnBlock + j] += v[s * K + k] * float(w[k * w_k + j]);
}
#endif

// Batch b's S vectors as f32 rows of K (v [S][K]), whatever their strides and dtype.
template <typename T>
void widen_vectors(const MatvecShape& m, const T* x, std::int64_t b, float* v) {
  const T* xb = x + b * m.x_batch;
  for (std::int64_t s = 0; s < m.S; ++s)
    for (std::int64_t k = 0; k < m.K; ++k) v[s * m.K + k] = float(xb[s * m.x_s + k * m.x_k]);
}

template <typename T> void matvec_columns(const MatvecShape& m, const T* w, const T* x, T* c) {
  std::int64_t width = kColumnBlock;
  const auto blocks_of = [&](std::int64_t wd) { return (m.G + wd - 1) / wd; };
  while (width > 128 && m.batches * blocks_of(width) < omp_get_max_threads()) width /= 2;
  const std::int64_t blocks = blocks_of(width);
  parallel_range(m.batches * blocks, 1, [&](std::int64_t t0, std::int64_t t1) {
    std::vector<float> v(std::size_t(m.S * m.K)), acc(std::size_t(m.S * kColumnBlock));
    std::int64_t widened = -1;  // the batch whose vectors v holds
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t b = t / blocks, g0 = (t % blocks) * width;
      const std::int64_t n = std::min(width, m.G - g0);
      if (widened != b) {
        widen_vectors(m, x, b, v.data());
        widened = b;
      }
      const T* wb = w + b * m.w_batch + g0;
      bool summed = false;
#ifdef FERRY_CPU_FEATURE_PATHS
      if constexpr (!std::is_same_v<T, float>)
        if (cpu_has_f16c()) {
          column_sums_x86(wb, m.w_k, v.data(), m.S, m.K, n, acc.data());
          summed = true;
        }
#endif
      if (!summed) column_sums(wb, m.w_k, v.data(), m.S, m.K, n, acc.data());
      T* cb = c + b * m.c_batch + g0 * m.c_g;
      for (std::int64_t s = 0; s < m.S; ++s)
        for (std::int64_t j = 0; j < n; ++j)
          cb[s * m.c_s + j * m.c_g] = T(acc[std::size_t(s * kColumnBlock + j)]);
    }
  });
}

template <typename T> bool matvec(const OpCall& call) {
  const TensorArg &A = call.inputs[0], &B = call.inputs[1], &C = call.outputs[0];
  const std::optional<MatvecShape> shape = matvec_shape(A, B, C);
  if (!shape) return false;
  const MatvecShape& m = *shape;
  const TensorArg &W = m.weight_is_b ? B : A, &X = m.weight_is_b ? A : B;
  if (m.w_along_g) {
    matvec_columns<T>(m, W.data<T>(), X.data<T>(), C.data<T>());
    return true;
  }
  std::vector<float> v(std::size_t(m.S * m.K)), c;
  const bool f32_out = std::is_same_v<T, float> && C.is_contiguous();
  if (!f32_out) c.resize(std::size_t(m.S * m.G));
  for (std::int64_t b = 0; b < m.batches; ++b) {
    widen_vectors(m, X.data<T>(), b, v.data());
    T* dst = C.data<T>() + b * m.c_batch;
    float* out = f32_out ? reinterpret_cast<float*>(dst) : c.data();
    dispatch_rows<T>(m.S, W.data<T>() + b * m.w_batch, m.w_row, v.data(), m.K, m.G, out,
                     f32_out ? m.c_s : 1, f32_out ? m.c_g : m.S);
    if (!f32_out)
      for (std::int64_t s = 0; s < m.S; ++s)
        for (std::int64_t g = 0; g < m.G; ++g)
          dst[s * m.c_s + g * m.c_g] = T(c[std::size_t(g * m.S + s)]);
  }
  return true;
}

}  // namespace

bool try_matvec(const OpCall& call) {
  switch (call.outputs.at(0).dtype) {
    case DType::f32:
      return matvec<float>(call);
    case DType::f16:
      return matvec<Half>(call);
    case DType::bf16:
      return matvec<BFloat16>(call);
    default:
      return false;
  }
}

}  // namespace ferry::cpu
