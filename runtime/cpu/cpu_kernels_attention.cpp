// runtime/cpu/cpu_kernels_attention.cpp — scaled_dot_product_attention's fused kernels on the
// CPU, forward and backward (docs/kernel-contract.md; the front-end and the kernel's form of
// the call: Note [Scaled dot-product attention] in runtime/nn/attention.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_clones.hpp"  // FERRY_CPU_CLONES on the block loops
#include "cpu/cpu_loops.hpp"
#include "ferry/kit/attention_args.hpp"
#include "ferry/profiler.hpp"

namespace ferry::cpu {
namespace {

// Note [Fused attention on the CPU]
// FlashAttention-2's scheme, blocked for the caches instead of a GPU's shared memory:
// - forward: a task is kRows query rows of one head. It walks the keys kCols at a time and
//   keeps per row the running maximum m of the scaled, masked scores, the running sum l of
//   exp(s - m) and the unnormalised output o; a block with a larger maximum rescales l and o
//   by exp(m_old - m_new). It writes o / l and the row's logsumexp m + log l. The scratch is a
//   few blocks per thread: the L×S scores are never held.
// - backward: a task is one key/value head of one batch item, so the task owns dK and dV of
//   that head (the grouped query heads included) and dQ of the rows it walks. Block by block
//   it recomputes P = exp(S - lse), then dP = dO Vᵀ, dS = P (dP - D) with D = rowsum(dO o O),
//   and adds dV += Pᵀ dO, dQ += scale dS K, dK += scale dSᵀ Q in the compute type.
// - is_causal keeps key j for query i when j <= i and skips the blocks past the diagonal; the
//   mask is added to the scaled scores. A row with every key masked has l = 0: its output is 0
//   and its logsumexp +inf, which makes its probabilities 0 in the backward.
// - A block of a few query rows (kDotRows, a decoding step's) reads the keys and values where
//   they lie instead: its scores are dot products of q with the keys' rows (key_dots), its
//   outputs sums of the values' rows (value_rows), one pass over each in memory order.
// - Every other product is a block product (gemm_acc) with rows of the result held in vector
//   registers, K and V transposed per key block where the product needs them so; exp is a
//   polynomial (cephes' expf) the compiler vectorises. The f32 loops run at about three times
//   the composition's speed on OpenBLAS (docs/benchmarks-cpu.md).
constexpr std::int64_t kRows = 32;  // query rows per block
constexpr std::int64_t kCols = 64;  // keys per block
// Blocks of at most this many query rows (a decoding step's) take their scores as dot products
// of the keys' rows where they lie, and their outputs from the values' rows where they lie,
// with no transposed or converted copy of either (f32): such a block reads each key once for
// a few rows, so the copy cost as much as the products. On a 2-core AMD EPYC (ferry-bench
// attention/decode, q [1, 8, 1, 64], f32) the copying kernel read k and v at 23.6 and 13.6
// GB/s for 2,048 and 8,192 keys, 0.75 and 0.53 of the composition (docs/benchmarks-cpu.md).
constexpr std::int64_t kDotRows = 4;
// Keys per block of such rows: longer walks over one of k and v before the other. 512 read
// the 8,192 keys at 23.0 and 25.6 GB/s where 64 read them at 18.9 and 17.9 (two A/B runs).
constexpr std::int64_t kDotCols = 512;

using Geometry = AttentionGeometry;  // ferry/kit/attention_args.hpp

// exp, with 0 for x below the float range (-inf included) and NaN kept.
inline float softmax_exp(float x) {
  // A NaN x is clamped to a number here (no NaN reaches the integer conversion below) and
  // comes back at the end.
  const float xc = std::min(x > -87.3f ? x : -87.3f, 88.7f);
  // n = round(x / ln 2) by the 1.5 * 2^23 trick, r = x - n ln 2 in two parts (Cody and Waite).
  const float n = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;
  const float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  const float two_n = std::bit_cast<float>((std::int32_t(n) + 127) << 23);
  const float e = p * two_n;
  return x < -87.3f ? 0.f : (x != x ? x : e);
}
inline double softmax_exp(double x) { return std::exp(x); }

// c[M][N] += a[M][K] · b[K][N]: b and c row-major (leading dims ldb, ldc), a read through
// strides (a_rs, a_cs), so a transposed block is read as it is. R rows of c times one vector
// of `Bytes` of columns stay in registers across the K loop (GCC's vector extension), so each
// load of b feeds R multiply-adds of broadcast elements of a. The vector is the CPU's own
// register (gemm_acc picks it): GCC lowers a wider one piece by piece through the stack, as
// a 64-byte vector in the x86-64-v3 clone was (vmovq and vpinsrq of 8-byte pieces between the
// FMAs), which left the fused forward at 11 GFLOP/s, 0.3 of the matmul composition, on a
// 2-core AMD EPYC with AVX2 (ferry-bench attention/L512, 2026-11-29).
template <typename C, int R, int Bytes>
[[gnu::always_inline]] inline void gemm_rows(std::int64_t i, std::int64_t N, std::int64_t K,
                                             const C* a, std::int64_t a_rs, std::int64_t a_cs,
                                             const C* b, std::int64_t ldb, C* c, std::int64_t ldc) {
  typedef C V __attribute__((vector_size(Bytes)));
  constexpr int W = int(sizeof(V) / sizeof(C));
  std::int64_t j = 0;
  for (; j + W <= N; j += W) {
    V acc[R];
    for (int r = 0; r < R; ++r) std::memcpy(&acc[r], c + (i + r) * ldc + j, sizeof(V));
    for (std::int64_t k = 0; k < K; ++k) {
      V bk;
      std::memcpy(&bk, b + k * ldb + j, sizeof(V));
      for (int r = 0; r < R; ++r) acc[r] += a[(i + r) * a_rs + k * a_cs] * bk;
    }
    for (int r = 0; r < R; ++r) std::memcpy(c + (i + r) * ldc + j, &acc[r], sizeof(V));
  }
  for (; j < N; ++j)
    for (int r = 0; r < R; ++r) {
      C sum = c[(i + r) * ldc + j];
      for (std::int64_t k = 0; k < K; ++k) sum += a[(i + r) * a_rs + k * a_cs] * b[k * ldb + j];
      c[(i + r) * ldc + j] = sum;
    }
}

// The CPU's vector register in bytes, the width the block loops' vector types take (gemm_rows
// says why no wider).
inline int vector_bytes() {
  static const int bytes = __builtin_cpu_supports("avx512f") ? 64
                           : __builtin_cpu_supports("avx2")  ? 32
                                                             : 16;
  return bytes;
}
// Returns fn<C, B>(args...) for the CPU's vector width B. A macro, not a function taking a
// lambda: a lambda's body is a function of its own, which FERRY_CPU_CLONES would not clone.
#define FERRY_BY_VECTOR_BYTES(fn, ...) \
  switch (vector_bytes()) {            \
    case 64:                           \
      return fn<C, 64>(__VA_ARGS__);   \
    case 32:                           \
      return fn<C, 32>(__VA_ARGS__);   \
    default:                           \
      return fn<C, 16>(__VA_ARGS__);   \
  }

// Eight rows at a time (8 accumulator registers and b's), then four, then one.
template <typename C, int Bytes>
[[gnu::always_inline]] inline void gemm_acc_by(std::int64_t M, std::int64_t N, std::int64_t K,
                                               const C* a, std::int64_t a_rs, std::int64_t a_cs,
                                               const C* b, std::int64_t ldb, C* c,
                                               std::int64_t ldc) {
  std::int64_t i = 0;
  for (; i + 8 <= M; i += 8) gemm_rows<C, 8, Bytes>(i, N, K, a, a_rs, a_cs, b, ldb, c, ldc);
  for (; i + 4 <= M; i += 4) gemm_rows<C, 4, Bytes>(i, N, K, a, a_rs, a_cs, b, ldb, c, ldc);
  for (; i < M; ++i) gemm_rows<C, 1, Bytes>(i, N, K, a, a_rs, a_cs, b, ldb, c, ldc);
}

template <typename C> FERRY_CPU_CLONES void gemm_acc(std::int64_t M, std::int64_t N, std::int64_t K,
                                                     const C* a, std::int64_t a_rs,
                                                     std::int64_t a_cs, const C* b,
                                                     std::int64_t ldb, C* c, std::int64_t ldc) {
  FERRY_BY_VECTOR_BYTES(gemm_acc_by, M, N, K, a, a_rs, a_cs, b, ldb, c, ldc)
}

// s[r][j] = q[r] · k[j] for `rows` query rows (q [rows][E]) against n keys read as they lie
// (k [n][E]), s with leading dim ld: the decoding step's scores (Note [Fused attention on
// the CPU]). Four keys at a time in vector registers, summed across at the end.
template <typename C, int Bytes>
[[gnu::always_inline]] inline void key_dots_by(std::int64_t rows, std::int64_t n, std::int64_t E,
                                               const C* q, const C* k, C* s, std::int64_t ld) {
  typedef C V __attribute__((vector_size(Bytes)));
  constexpr int W = int(sizeof(V) / sizeof(C));
  const std::int64_t Ev = E / W * W;
  const auto across = [](V v) {
    C sum = 0;
    for (int w = 0; w < W; ++w) sum += v[w];
    return sum;
  };
  for (std::int64_t r = 0; r < rows; ++r) {
    const C* qr = q + r * E;
    C* sr = s + r * ld;
    std::int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      V acc[4] = {};
      for (std::int64_t e = 0; e < Ev; e += W) {
        V qv;
        std::memcpy(&qv, qr + e, sizeof(V));
        for (int u = 0; u < 4; ++u) {
          V kv;
          std::memcpy(&kv, k + (j + u) * E + e, sizeof(V));
          acc[u] += qv * kv;
        }
      }
      for (int u = 0; u < 4; ++u) {
        C sum = across(acc[u]);
        for (std::int64_t e = Ev; e < E; ++e) sum += qr[e] * k[(j + u) * E + e];
        sr[j + u] = sum;
      }
    }
    for (; j < n; ++j) {
      C sum = 0;
      for (std::int64_t e = 0; e < E; ++e) sum += qr[e] * k[j * E + e];
      sr[j] = sum;
    }
  }
}

template <typename C> FERRY_CPU_CLONES void key_dots(std::int64_t rows, std::int64_t n,
                                                     std::int64_t E, const C* q, const C* k, C* s,
                                                     std::int64_t ld) {
  FERRY_BY_VECTOR_BYTES(key_dots_by, rows, n, E, q, k, s, ld)
}

// o[r] += Σ_j p[r][j] v[j] for `rows` rows (p with leading dim ld, o [rows][Ev]), walking
// v's n rows in order, as they lie: the decoding step's outputs (gemm_acc walks v a column
// chunk at a time, which for a single row is a strided walk over the block).
template <typename C, int Bytes>
[[gnu::always_inline]] inline void value_rows_by(std::int64_t rows, std::int64_t n, std::int64_t Ev,
                                                 const C* p, std::int64_t ld, const C* v, C* o) {
  typedef C V __attribute__((vector_size(Bytes)));
  constexpr int W = int(sizeof(V) / sizeof(C));
  const std::int64_t Evv = Ev / W * W;
  for (std::int64_t j = 0; j < n; ++j) {
    const C* vj = v + j * Ev;
    for (std::int64_t r = 0; r < rows; ++r) {
      const C pj = p[r * ld + j];
      C* orow = o + r * Ev;
      std::int64_t e = 0;
      for (; e < Evv; e += W) {
        V ov, vv;
        std::memcpy(&ov, orow + e, sizeof(V));
        std::memcpy(&vv, vj + e, sizeof(V));
        ov += pj * vv;
        std::memcpy(orow + e, &ov, sizeof(V));
      }
      for (; e < Ev; ++e) orow[e] += pj * vj[e];
    }
  }
}

template <typename C> FERRY_CPU_CLONES void value_rows(std::int64_t rows, std::int64_t n,
                                                       std::int64_t Ev, const C* p, std::int64_t ld,
                                                       const C* v, C* o) {
  FERRY_BY_VECTOR_BYTES(value_rows_by, rows, n, Ev, p, ld, v, o)
}

// Rows [j0, j0 + n) of a [rows, dim] matrix of T into `out` as C: row-major ([n][dim]) and,
// when `transposed`, also as [dim][kCols].
template <typename T, typename C> void load_rows(const T* m, std::int64_t j0, std::int64_t n,
                                                 std::int64_t dim, C* rows, C* transposed) {
#ifdef FERRY_CPU_FEATURE_PATHS
  if constexpr (std::is_same_v<T, Half> && std::is_same_v<C, float>)
    if (rows && !transposed && cpu_has_f16c())
      return halves_to_floats_f16c(m + j0 * dim, n * dim, rows);
#endif
  for (std::int64_t j = 0; j < n; ++j) {
    const T* src = m + (j0 + j) * dim;
    for (std::int64_t e = 0; e < dim; ++e) {
      const C x = C(src[e]);
      if (rows) rows[j * dim + e] = x;
      if (transposed) transposed[e * kCols + j] = x;
    }
  }
}

// The scaled, masked scores of query rows [i0, i0 + rows) (q, [rows][E]) against keys
// [j0, j0 + n) (kt, [E][kCols]) into s [rows][kCols]: q · kt * scale + mask, -inf past the
// diagonal when causal.
template <typename T, typename C>
inline void finish_scores(const Geometry& g, const T* mask_h, std::int64_t i0, std::int64_t rows,
                          std::int64_t j0, std::int64_t n, C* s, std::int64_t ld);
template <typename T, typename C> inline void block_scores(const Geometry& g, const C* q,
                                                           const C* kt, const T* mask_h,
                                                           std::int64_t i0, std::int64_t rows,
                                                           std::int64_t j0, std::int64_t n, C* s) {
  std::fill(s, s + rows * kCols, C(0));
  gemm_acc(rows, n, g.E, q, g.E, std::int64_t(1), kt, kCols, s, kCols);
  finish_scores(g, mask_h, i0, rows, j0, n, s, kCols);
}

// s [rows][ld] of q · k: scaled, the mask added, -inf past the diagonal when causal.
template <typename T, typename C>
inline void finish_scores(const Geometry& g, const T* mask_h, std::int64_t i0, std::int64_t rows,
                          std::int64_t j0, std::int64_t n, C* s, std::int64_t ld) {
  const C scale = C(g.scale);
  for (std::int64_t r = 0; r < rows; ++r) {
    C* sr = s + r * ld;
    const std::int64_t i = i0 + r;
    for (std::int64_t j = 0; j < n; ++j) sr[j] *= scale;
    if (mask_h)
      for (std::int64_t j = 0; j < n; ++j) sr[j] += C(mask_h[i * g.S + j0 + j]);
    if (g.causal)
      for (std::int64_t j = std::max<std::int64_t>(0, i + 1 - j0); j < n; ++j)
        sr[j] = -std::numeric_limits<C>::infinity();
  }
}

template <typename T>
const T* mask_of(const Geometry& g, const T* mask, std::int64_t b, std::int64_t h) {
  if (!mask) return nullptr;
  return mask + ((g.Bm == 1 ? 0 : b) * g.Hm + (g.Hm == 1 ? 0 : h)) * g.L * g.S;
}

using Stat = float;  // the logsumexp's type (double for f64)
template <typename T> using stat_t = std::conditional_t<std::is_same_v<T, double>, double, Stat>;

// A piece of a decoding step's keys (Note [Split keys on the CPU]): where a partial sum goes.
template <typename C> struct KeyPiece {
  std::int64_t begin = 0, end = std::numeric_limits<std::int64_t>::max();
  C* partial = nullptr;  // [rows] m, [rows] l, [rows][Ev] o; null: write out and lse
};

// Query rows [i0, i1) of head h of batch item b, against the keys of `piece`.
template <typename T>
FERRY_CPU_CLONES void forward_block(const Geometry& g, const T* q, const T* k, const T* v,
                                    const T* mask, T* out, stat_t<T>* lse, std::int64_t b,
                                    std::int64_t h, std::int64_t i0, std::int64_t i1,
                                    std::vector<compute_t<T>>& scratch,
                                    const KeyPiece<compute_t<T>>& piece) {
  using C = compute_t<T>;
  const std::int64_t rows = i1 - i0, hk = h / (g.Hq / g.Hk);
  // A few rows walk the keys where they lie (copied only to convert), cols at a time.
  const bool dots = rows <= kDotRows, copies = !dots || !std::is_same_v<T, C>;
  const std::int64_t cols = dots ? kDotCols : kCols;
  scratch.resize(std::size_t(rows * (g.E + g.Ev + 2 + cols) + (copies ? cols * (g.E + g.Ev) : 0)));
  C* qb = scratch.data();                      // [rows][E]
  C* o = qb + rows * g.E;                      // [rows][Ev]
  C* m = o + rows * g.Ev;                      // [rows]
  C* l = m + rows;                             // [rows]
  C* s = l + rows;                             // [rows][cols]: scores, then probabilities
  C* kt = s + rows * cols;                     // [E][kCols], or k's rows [cols][E] converted
  C* vb = copies ? kt + cols * g.E : nullptr;  // [cols][Ev]
  const std::int64_t head = b * g.Hq + h, kv_head = b * g.Hk + hk;
  load_rows(q + head * g.L * g.E, i0, rows, g.E, qb, static_cast<C*>(nullptr));
  std::fill(o, o + rows * g.Ev, C(0));
  std::fill(m, m + rows, -std::numeric_limits<C>::infinity());
  std::fill(l, l + rows, C(0));
  const T* mask_h = mask_of(g, mask, b, h);
  const std::int64_t key_end = std::min(g.causal ? std::min(g.S, i1) : g.S, piece.end);
  const T *k_h = k + kv_head * g.S * g.E, *v_h = v + kv_head * g.S * g.Ev;
  for (std::int64_t j0 = piece.begin; j0 < key_end; j0 += cols) {
    const std::int64_t n = std::min(cols, key_end - j0);
    const C* vr = vb;  // v's rows [j0, j0 + n) as C
    if (dots) {
      // The keys' and values' rows as they lie where T is C, else converted row by row.
      const C* kr = kt;
      if constexpr (std::is_same_v<T, C>) {
        kr = k_h + j0 * g.E;
        vr = v_h + j0 * g.Ev;
      } else {
        load_rows(k_h, j0, n, g.E, kt, static_cast<C*>(nullptr));
        load_rows(v_h, j0, n, g.Ev, vb, static_cast<C*>(nullptr));
      }
      key_dots(rows, n, g.E, qb, kr, s, cols);
      finish_scores(g, mask_h, i0, rows, j0, n, s, cols);
    } else {
      load_rows(k_h, j0, n, g.E, static_cast<C*>(nullptr), kt);
      load_rows(v_h, j0, n, g.Ev, vb, static_cast<C*>(nullptr));
      block_scores(g, qb, kt, mask_h, i0, rows, j0, n, s);
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      C* sr = s + r * cols;
      C mx = m[r];
      for (std::int64_t j = 0; j < n; ++j) mx = std::max(mx, sr[j]);
      if (mx == -std::numeric_limits<C>::infinity()) {  // every key so far masked
        std::fill(sr, sr + n, C(0));
        continue;
      }
      const C alpha = softmax_exp(m[r] - mx);
      C sum = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        sr[j] = softmax_exp(sr[j] - mx);
        sum += sr[j];
      }
      l[r] = l[r] * alpha + sum;
      m[r] = mx;
      if (alpha != C(1))
        for (std::int64_t e = 0; e < g.Ev; ++e) o[r * g.Ev + e] *= alpha;
    }
    if (dots)
      value_rows(rows, n, g.Ev, s, cols, vr, o);
    else
      gemm_acc(rows, g.Ev, n, s, kCols, std::int64_t(1), vr, g.Ev, o, g.Ev);
  }
  if (piece.partial) {
    std::copy(m, m + rows, piece.partial);
    std::copy(l, l + rows, piece.partial + rows);
    std::copy(o, o + rows * g.Ev, piece.partial + 2 * rows);
    return;
  }
  T* out_h = out + head * g.L * g.Ev;
  stat_t<T>* lse_h = lse + head * g.L;
  for (std::int64_t r = 0; r < rows; ++r) {
    const bool empty = l[r] == C(0);
    const C inv = empty ? C(0) : C(1) / l[r];
    for (std::int64_t e = 0; e < g.Ev; ++e) out_h[(i0 + r) * g.Ev + e] = T(o[r * g.Ev + e] * inv);
    lse_h[i0 + r] =
        empty ? std::numeric_limits<stat_t<T>>::infinity() : stat_t<T>(m[r] + std::log(l[r]));
  }
}

// Note [Split keys on the CPU]
// A decoding step has a task per head (its few query rows are one block), so a machine with
// more threads than the step has heads would leave the rest idle, and one long sequence of a
// single head would run on one core. There, as FlashAttention's split-KV decoding does, each
// head's keys are cut into pieces of at least 2 x kDotCols, a task a piece: each keeps its own
// running maximum m, sum l and unnormalised output o, and a second loop merges a head's pieces
// (M = max m, L = sum of l exp(m - M), o likewise; out = O / L, lse = M + log L). A piece whose
// keys are all masked has m = -inf and adds nothing; a row with every key masked ends as in
// one piece (output 0, logsumexp +inf).
std::int64_t key_pieces(const Geometry& g, std::int64_t tasks, std::int64_t threads) {
  if (g.L > kDotRows || g.causal || tasks == 0 || tasks >= threads) return 1;
  return std::max<std::int64_t>(1, std::min((threads + tasks - 1) / tasks, g.S / (2 * kDotCols)));
}

template <typename T> void split_attention(const Geometry& g, const T* q, const T* k, const T* v,
                                           const T* mask, T* out, stat_t<T>* lse,
                                           std::int64_t pieces) {
  using C = compute_t<T>;
  const std::int64_t heads = g.B * g.Hq, rows = g.L, stride = rows * (2 + g.Ev);
  const std::int64_t piece_len = (g.S + pieces - 1) / pieces;
  if (profiler::enabled())
    profiler::note_kernel(
        fmt::format("split-key attention, {} pieces of {} keys", pieces, piece_len));
  std::vector<C> partials(std::size_t(heads * pieces * stride));
  parallel_range(heads * pieces, 1, [&](std::int64_t t0, std::int64_t t1) {
    std::vector<C> scratch;
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t bh = t / pieces, p = t % pieces;
      const KeyPiece<C> piece{p * piece_len, std::min(g.S, (p + 1) * piece_len),
                              partials.data() + t * stride};
      forward_block<T>(g, q, k, v, mask, out, lse, bh / g.Hq, bh % g.Hq, 0, rows, scratch, piece);
    }
  });
  std::vector<C> o(std::size_t(g.Ev));
  for (std::int64_t bh = 0; bh < heads; ++bh)
    for (std::int64_t r = 0; r < rows; ++r) {
      const C* first = partials.data() + bh * pieces * stride;
      C mx = -std::numeric_limits<C>::infinity();
      for (std::int64_t p = 0; p < pieces; ++p) mx = std::max(mx, first[p * stride + r]);
      C sum = 0;
      std::fill(o.begin(), o.end(), C(0));
      if (mx != -std::numeric_limits<C>::infinity())
        for (std::int64_t p = 0; p < pieces; ++p) {
          const C* part = first + p * stride;
          if (part[r] == -std::numeric_limits<C>::infinity()) continue;
          const C w = softmax_exp(part[r] - mx);
          sum += part[rows + r] * w;
          for (std::int64_t e = 0; e < g.Ev; ++e)
            o[std::size_t(e)] += part[2 * rows + r * g.Ev + e] * w;
        }
      const bool empty = sum == C(0);
      const C inv = empty ? C(0) : C(1) / sum;
      for (std::int64_t e = 0; e < g.Ev; ++e)
        out[(bh * rows + r) * g.Ev + e] = T(o[std::size_t(e)] * inv);
      lse[bh * rows + r] =
          empty ? std::numeric_limits<stat_t<T>>::infinity() : stat_t<T>(mx + std::log(sum));
    }
}

// inputs q [B, Hq, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev], [mask [Bm, Hm, L, S]]; outputs
// out [B, Hq, L, Ev], lse [B, Hq, L].
template <typename T> void attention_kernel(const OpCall& call) {
  const Geometry g = attention_forward_args(call, dtype_of<stat_t<T>>());
  const T* q = call.inputs.at(0).data<T>();
  const T* k = call.inputs.at(1).data<T>();
  const T* v = call.inputs.at(2).data<T>();
  const T* mask = g.has_mask ? call.inputs.at(3).data<T>() : nullptr;
  T* out = call.outputs.at(0).data<T>();
  stat_t<T>* lse = call.outputs.at(1).data<stat_t<T>>();
  const std::int64_t blocks = (g.L + kRows - 1) / kRows, tasks = g.B * g.Hq * blocks;
  const std::int64_t pieces = key_pieces(g, tasks, omp_get_max_threads());
  if (pieces > 1) return split_attention<T>(g, q, k, v, mask, out, lse, pieces);
  parallel_range(tasks, 1, [&](std::int64_t t0, std::int64_t t1) {
    std::vector<compute_t<T>> scratch;
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t bh = t / blocks, i0 = (t % blocks) * kRows;
      forward_block<T>(g, q, k, v, mask, out, lse, bh / g.Hq, bh % g.Hq, i0,
                       std::min(g.L, i0 + kRows), scratch, {});
    }
  });
}

struct Grads {
  const void *g, *q, *k, *v, *o, *lse, *mask;
  void *dq, *dk, *dv;
};

// dK and dV of key/value head hk of batch item b, and dQ of its query heads.
template <typename T> FERRY_CPU_CLONES void backward_head(const Geometry& g, const Grads& p,
                                                          std::int64_t b, std::int64_t hk,
                                                          std::vector<compute_t<T>>& scratch) {
  using C = compute_t<T>;
  const T *gp = static_cast<const T*>(p.g), *qp = static_cast<const T*>(p.q),
          *kp = static_cast<const T*>(p.k), *vp = static_cast<const T*>(p.v),
          *op = static_cast<const T*>(p.o), *maskp = static_cast<const T*>(p.mask);
  const stat_t<T>* lsep = static_cast<const stat_t<T>*>(p.lse);
  const std::int64_t E = g.E, Ev = g.Ev, group = g.Hq / g.Hk;
  scratch.resize(
      std::size_t(g.S * (E + Ev) + kRows * (2 * E + Ev + 2 + 2 * kCols) + kCols * (2 * E + Ev)));
  C* dk = scratch.data();     // [S][E]
  C* dv = dk + g.S * E;       // [S][Ev]
  C* qb = dv + g.S * Ev;      // [rows][E]
  C* dq = qb + kRows * E;     // [rows][E]
  C* dob = dq + kRows * E;    // [rows][Ev]
  C* D = dob + kRows * Ev;    // [rows]
  C* lse = D + kRows;         // [rows]
  C* kb = lse + kRows;        // [kCols][E]
  C* kt = kb + kCols * E;     // [E][kCols]
  C* vt = kt + kCols * E;     // [Ev][kCols]
  C* s = vt + kCols * Ev;     // [rows][kCols]: scores, then probabilities
  C* ds = s + kRows * kCols;  // [rows][kCols]: dP, then dS (scaled)
  std::fill(dk, dk + g.S * (E + Ev), C(0));
  const std::int64_t kv_head = b * g.Hk + hk;
  const T* k_h = kp + kv_head * g.S * E;
  const T* v_h = vp + kv_head * g.S * Ev;
  for (std::int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    const std::int64_t head = b * g.Hq + h;
    const T* mask_h = mask_of(g, maskp, b, h);
    for (std::int64_t i0 = 0; i0 < g.L; i0 += kRows) {
      const std::int64_t rows = std::min(kRows, g.L - i0);
      load_rows(qp + head * g.L * E, i0, rows, E, qb, static_cast<C*>(nullptr));
      load_rows(gp + head * g.L * Ev, i0, rows, Ev, dob, static_cast<C*>(nullptr));
      std::fill(dq, dq + rows * E, C(0));
      for (std::int64_t r = 0; r < rows; ++r) {
        const T* orow = op + (head * g.L + i0 + r) * Ev;
        C d = 0;
        for (std::int64_t e = 0; e < Ev; ++e) d += dob[r * Ev + e] * C(orow[e]);
        D[r] = d;
        lse[r] = C(lsep[head * g.L + i0 + r]);
      }
      const std::int64_t key_end = g.causal ? std::min(g.S, i0 + rows) : g.S;
      for (std::int64_t j0 = 0; j0 < key_end; j0 += kCols) {
        const std::int64_t n = std::min(kCols, key_end - j0);
        load_rows(k_h, j0, n, E, kb, kt);
        load_rows(v_h, j0, n, Ev, static_cast<C*>(nullptr), vt);
        block_scores(g, qb, kt, mask_h, i0, rows, j0, n, s);
        std::fill(ds, ds + rows * kCols, C(0));
        gemm_acc(rows, n, Ev, dob, Ev, std::int64_t(1), vt, kCols, ds, kCols);  // dP = dO Vᵀ
        const C scale = C(g.scale);
        for (std::int64_t r = 0; r < rows; ++r) {
          C *sr = s + r * kCols, *dsr = ds + r * kCols;
          for (std::int64_t j = 0; j < n; ++j) {
            sr[j] = softmax_exp(sr[j] - lse[r]);
            dsr[j] = sr[j] * (dsr[j] - D[r]) * scale;
          }
        }
        // dV += Pᵀ dO, dK += dSᵀ Q (P and dS read transposed), dQ += dS K.
        gemm_acc(n, Ev, rows, s, std::int64_t(1), kCols, dob, Ev, dv + j0 * Ev, Ev);
        gemm_acc(n, E, rows, ds, std::int64_t(1), kCols, qb, E, dk + j0 * E, E);
        gemm_acc(rows, E, n, ds, kCols, std::int64_t(1), kb, E, dq, E);
      }
      T* dq_out = static_cast<T*>(p.dq) + (head * g.L + i0) * E;
      for (std::int64_t x = 0; x < rows * E; ++x) dq_out[x] = T(dq[x]);
    }
  }
  T* dk_out = static_cast<T*>(p.dk) + kv_head * g.S * E;
  T* dv_out = static_cast<T*>(p.dv) + kv_head * g.S * Ev;
  for (std::int64_t x = 0; x < g.S * E; ++x) dk_out[x] = T(dk[x]);
  for (std::int64_t x = 0; x < g.S * Ev; ++x) dv_out[x] = T(dv[x]);
}

// inputs dout, q, k, v, out, lse, [mask]; outputs dq, dk, dv (the forward's shapes).
template <typename T> void attention_backward_kernel(const OpCall& call) {
  const Geometry g = attention_backward_args(call, dtype_of<stat_t<T>>());
  const Grads p{call.inputs.at(0).data<T>(),
                call.inputs.at(1).data<T>(),
                call.inputs.at(2).data<T>(),
                call.inputs.at(3).data<T>(),
                call.inputs.at(4).data<T>(),
                call.inputs.at(5).data<stat_t<T>>(),
                g.has_mask ? call.inputs.at(6).data<T>() : nullptr,
                call.outputs.at(0).data<T>(),
                call.outputs.at(1).data<T>(),
                call.outputs.at(2).data<T>()};
  parallel_range(g.B * g.Hk, 1, [&](std::int64_t t0, std::int64_t t1) {
    std::vector<compute_t<T>> scratch;
    for (std::int64_t t = t0; t < t1; ++t) backward_head<T>(g, p, t / g.Hk, t % g.Hk, scratch);
  });
}

}  // namespace

void add_attention_kernels(KernelTable& table) {
  table.emplace_back(OpId::scaled_dot_product_attention, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, c.name(), attention_kernel<scalar_t>(c));
  });
  table.emplace_back(OpId::scaled_dot_product_attention_backward, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(1).dtype, c.name(), attention_backward_kernel<scalar_t>(c));
  });
}

}  // namespace ferry::cpu
