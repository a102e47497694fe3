// cuda/cuda_kernels_attention.cu — scaled_dot_product_attention and its backward, fused: the
// L×S scores are never stored (the form of the call: contiguous q [B, Hq, L, E], k [B, Hk, S,
// E], v [B, Hk, S, EV], an additive mask [Bm, Hm, L, S] in q's dtype, the logsumexp per query
// row in the compute type; Note [Scaled dot-product attention] in runtime/nn/attention.cpp).
// The host side, which checks the operands (ferry/kit/attention_args.hpp, as on every
// backend), is cuda_attention.cpp.
//
// Note [Fused attention on CUDA]
// The scheme of Note [Fused attention on Vulkan] (shaders/attention.comp), block for workgroup:
// FlashAttention-2's online softmax with one thread per row of the result and kBC-row tiles of
// the other side in shared memory, in f32 whatever the stored dtype (double for f64).
// - forward: a thread is a query row i of one head; per key tile it forms kBC scores, keeps the
//   running maximum m, the sum l of exp(s - m) and the unnormalised output, rescaled when m
//   grows; it writes o / l and the logsumexp m + log l (0 and +inf for a row with every key
//   left out). A thread holds kEC head elements at a time: longer heads go in chunks for the
//   scores and in passes of kEC output columns.
// - backward: a statistics pass (D = rowsum(dO o O) per query row, into scratch), then dq (a
//   thread per query row, P = exp(s - lse) recomputed tile by tile, dS = P (dO vᵀ - D), dq +=
//   scale dS k), then dk and dv (a thread per key row of a key/value head, over the query
//   tiles of every query head of its group: dv += Pᵀ dO, dk += scale dSᵀ q). Each gradient
//   element has one writer: no atomics, and the same result on every run.
// It runs on the CUDA cores: the tensor-core tiles of FlashAttention proper are future work
// (docs/cuda.md), so the composition's cuBLAS products can be faster where the L×S scores fit;
// what this kernel guarantees is memory linear in the sequence.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>

#include "cuda_attention.hpp"
#include "cuda_loops.cuh"

namespace ferry::cuda {
namespace {

constexpr int kRows = 64;  // rows of the result per block, one a thread
constexpr int kBC = 16;    // rows of the shared tiles
constexpr int kEC = 64;    // head-dim elements a thread holds at a time

template <typename C> __device__ __forceinline__ C neg_inf() {
  return -std::numeric_limits<C>::infinity();
}

// exp(x - m), with exp(-inf - anything) = 0.
template <typename C> __device__ __forceinline__ C exp_from(C x, C m) {
  return x == neg_inf<C>() ? C(0) : std::exp(x - m);
}

// The score of query row i and key j, scaled and masked: -inf where the key is left out.
template <typename T, typename C> __device__ __forceinline__ C masked(C dot, std::int64_t i,
                                                                      std::int64_t j, const T* mrow,
                                                                      const AttentionParams& p) {
  if (j >= p.S || (p.causal && j > i)) return neg_inf<C>();
  C x = dot * C(p.scale);
  if (p.has_mask) x += C(mrow[j]);
  return x;
}

// Rows [r0, r0 + kBC) (below `rows`), columns [c0, c0 + kEC) (below `cols`) of the row-major
// [rows, cols] matrix at `base` into `tile`, zeros outside. Every thread of the block calls it.
template <typename T, typename C> __device__ void load_tile(C* tile, const T* base, std::int64_t r0,
                                                            std::int64_t rows, std::int64_t c0,
                                                            std::int64_t cols) {
  __syncthreads();
  for (int x = int(threadIdx.x); x < kBC * kEC; x += int(blockDim.x)) {
    const std::int64_t r = r0 + x / kEC, c = c0 + x % kEC;
    tile[x] = r < rows && c < cols ? C(base[r * cols + c]) : C(0);
  }
  __syncthreads();
}

// s[jj] = a · b_{j0 + jj} over the whole dim `n`, a's elements read from `a`, the b rows (of
// the [rows, n] matrix at `b`) passing through `tile`.
template <typename T, typename C> __device__ void dots(C (&s)[kBC], const T* a, const T* b,
                                                       std::int64_t j0, std::int64_t rows,
                                                       std::int64_t n, C* tile) {
#pragma unroll
  for (int jj = 0; jj < kBC; ++jj) s[jj] = C(0);
  for (std::int64_t e0 = 0; e0 < n; e0 += kEC) {
    load_tile(tile, b, j0, rows, e0, n);
    for (int e = 0; e < kEC && e0 + e < n; ++e) {
      const C ae = C(a[e0 + e]);
#pragma unroll
      for (int jj = 0; jj < kBC; ++jj) s[jj] += ae * tile[jj * kEC + e];
    }
  }
}

// kDq false: the forward (out, lse written); true: dq (reads dO, lse and D).
template <typename T, bool kDq> __global__ void __launch_bounds__(kRows)
    attention_rows(const T* q, const T* k, const T* v, const T* mask, const T* dout,
                   const compute_t<T>* lse_in, const compute_t<T>* d_in, T* out,
                   compute_t<T>* lse_out, AttentionParams p) {
  using C = compute_t<T>;
  __shared__ C tile_e[kBC * kEC];
  __shared__ C tile_v[kBC * kEC];
  const std::int64_t Hk = p.Hq / p.group;
  for (std::int64_t bh = blockIdx.y; bh < p.B * p.Hq; bh += gridDim.y) {
    const std::int64_t b = bh / p.Hq, h = bh % p.Hq, kv = b * Hk + h / p.group;
    const T* kb = k + kv * p.S * p.E;
    const T* vb = v + kv * p.S * p.EV;
    for (std::int64_t blk = blockIdx.x; blk * kRows < p.L; blk += gridDim.x) {
      const std::int64_t i = blk * kRows + threadIdx.x, ic = i < p.L ? i : p.L - 1;
      const bool valid = i < p.L;
      const std::int64_t row = bh * p.L + ic;
      const T* qrow = q + row * p.E;
      const T* mrow = p.has_mask ? mask + b * p.mask_sb + h * p.mask_sh + ic * p.S : nullptr;
      // Causal: the block's last row sees no key past it (the same bound for every thread).
      const std::int64_t kend =
          p.causal ? (p.S < blk * kRows + kRows ? p.S : blk * kRows + kRows) : p.S;
      C s[kBC];
      if constexpr (!kDq) {
        for (std::int64_t c0 = 0; c0 < p.EV; c0 += kEC) {
          C m = neg_inf<C>(), l = C(0), o[kEC];
#pragma unroll
          for (int c = 0; c < kEC; ++c) o[c] = C(0);
          for (std::int64_t j0 = 0; j0 < kend; j0 += kBC) {
            dots(s, qrow, kb, j0, p.S, p.E, tile_e);
            load_tile(tile_v, vb, j0, p.S, c0, p.EV);
            C mt = neg_inf<C>();
#pragma unroll
            for (int jj = 0; jj < kBC; ++jj) {
              s[jj] = masked(s[jj], ic, j0 + jj, mrow, p);
              mt = s[jj] > mt ? s[jj] : mt;
            }
            const C mn = m > mt ? m : mt;
            if (mn != neg_inf<C>()) {  // else every key so far is left out: nothing to add
              const C corr = exp_from(m, mn);
              l *= corr;
#pragma unroll
              for (int c = 0; c < kEC; ++c) o[c] *= corr;
              for (int jj = 0; jj < kBC; ++jj) {
                const C pj = exp_from(s[jj], mn);
                l += pj;
#pragma unroll
                for (int c = 0; c < kEC; ++c) o[c] += pj * tile_v[jj * kEC + c];
              }
              m = mn;
            }
          }
          if (valid) {
            T* orow = out + row * p.EV;
            for (int c = 0; c < kEC && c0 + c < p.EV; ++c)
              orow[c0 + c] = T(l == C(0) ? C(0) : o[c] / l);
            if (c0 == 0)
              lse_out[row] = l == C(0) ? std::numeric_limits<C>::infinity() : m + std::log(l);
          }
        }
      } else {
        const C lse = lse_in[row], D = d_in[row];
        const T* dorow = dout + row * p.EV;
        for (std::int64_t g0 = 0; g0 < p.E; g0 += kEC) {
          C dq[kEC];
#pragma unroll
          for (int e = 0; e < kEC; ++e) dq[e] = C(0);
          for (std::int64_t j0 = 0; j0 < kend; j0 += kBC) {
            C dp[kBC];
            dots(s, qrow, kb, j0, p.S, p.E, tile_e);
            dots(dp, dorow, vb, j0, p.S, p.EV, tile_v);
            load_tile(tile_e, kb, j0, p.S, g0, p.E);
            for (int jj = 0; jj < kBC; ++jj) {
              const C pj = exp_from(masked(s[jj], ic, j0 + jj, mrow, p), lse);
              const C ds = pj * (dp[jj] - D);
#pragma unroll
              for (int e = 0; e < kEC; ++e) dq[e] += ds * tile_e[jj * kEC + e];
            }
          }
          if (valid) {
            T* dqrow = out + row * p.E;
            for (int e = 0; e < kEC && g0 + e < p.E; ++e) dqrow[g0 + e] = T(dq[e] * C(p.scale));
          }
        }
      }
    }
  }
}

// dk and dv: a thread per key row j of key/value head (b, kvh), over the query tiles of the
// group's query heads (q's and dO's rows through shared memory).
template <typename T> __global__ void __launch_bounds__(kRows)
    attention_dkv(const T* q, const T* k, const T* v, const T* mask, const T* dout,
                  const compute_t<T>* lse_in, const compute_t<T>* d_in, T* dk_out, T* dv_out,
                  AttentionParams p) {
  using C = compute_t<T>;
  __shared__ C tile_e[kBC * kEC];
  __shared__ C tile_v[kBC * kEC];
  const std::int64_t Hk = p.Hq / p.group;
  const std::int64_t passes_e = (p.E + kEC - 1) / kEC, passes_v = (p.EV + kEC - 1) / kEC;
  const std::int64_t passes = passes_e > passes_v ? passes_e : passes_v;
  for (std::int64_t bk = blockIdx.y; bk < p.B * Hk; bk += gridDim.y) {
    const std::int64_t b = bk / Hk, kvh = bk % Hk;
    for (std::int64_t blk = blockIdx.x; blk * kRows < p.S; blk += gridDim.x) {
      const std::int64_t j = blk * kRows + threadIdx.x, jc = j < p.S ? j : p.S - 1;
      const bool valid = j < p.S;
      const std::int64_t jr = bk * p.S + jc;
      const T* krow = k + jr * p.E;
      const T* vrow = v + jr * p.EV;
      // Causal: rows i < blk * kRows see none of this block's keys.
      const std::int64_t istart = p.causal ? (blk * kRows < p.L ? blk * kRows : p.L) : 0;
      for (std::int64_t pass = 0; pass < passes; ++pass) {
        const std::int64_t g0 = pass * kEC;
        C dk[kEC], dv[kEC];
#pragma unroll
        for (int e = 0; e < kEC; ++e) dk[e] = dv[e] = C(0);
        for (std::int64_t hh = 0; hh < p.group; ++hh) {
          const std::int64_t h = kvh * p.group + hh, bh = b * p.Hq + h;
          const T* qb = q + bh * p.L * p.E;
          const T* dob = dout + bh * p.L * p.EV;
          const T* mb = p.has_mask ? mask + b * p.mask_sb + h * p.mask_sh : nullptr;
          for (std::int64_t i0 = istart; i0 < p.L; i0 += kBC) {
            C s[kBC], dp[kBC], pr[kBC], ds[kBC];
            dots(s, krow, qb, i0, p.L, p.E, tile_e);
            dots(dp, vrow, dob, i0, p.L, p.EV, tile_v);
#pragma unroll
            for (int ii = 0; ii < kBC; ++ii) {
              const std::int64_t i = i0 + ii;
              pr[ii] = ds[ii] = C(0);
              if (i < p.L) {
                const std::int64_t r = bh * p.L + i;
                pr[ii] = exp_from(masked(s[ii], i, jc, mb ? mb + i * p.S : nullptr, p), lse_in[r]);
                ds[ii] = pr[ii] * (dp[ii] - d_in[r]);
              }
            }
            // This pass's columns of q and dO (the tiles again unless they are the last loaded).
            if (p.E > kEC || pass > 0) load_tile(tile_e, qb, i0, p.L, g0, p.E);
            if (p.EV > kEC || pass > 0) load_tile(tile_v, dob, i0, p.L, g0, p.EV);
            for (int ii = 0; ii < kBC; ++ii) {
#pragma unroll
              for (int e = 0; e < kEC; ++e) {
                dk[e] += ds[ii] * tile_e[ii * kEC + e];
                dv[e] += pr[ii] * tile_v[ii * kEC + e];
              }
            }
          }
        }
        if (valid) {
          for (int e = 0; e < kEC && g0 + e < p.E; ++e)
            dk_out[jr * p.E + g0 + e] = T(dk[e] * C(p.scale));
          for (int e = 0; e < kEC && g0 + e < p.EV; ++e) dv_out[jr * p.EV + g0 + e] = T(dv[e]);
        }
      }
    }
  }
}

// D = rowsum(dO o O) per query row.
template <typename T> __global__ void attention_stats(const T* dout, const T* out,
                                                      compute_t<T>* d_out, std::int64_t rows,
                                                      std::int64_t ev) {
  using C = compute_t<T>;
  for (std::int64_t r = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += std::int64_t(gridDim.x) * blockDim.x) {
    C d = C(0);
    for (std::int64_t c = 0; c < ev; ++c) d += C(dout[r * ev + c]) * C(out[r * ev + c]);
    d_out[r] = d;
  }
}

// Blocks: x over the rows in kRows, y over the heads (at most 65535: the kernels stride).
dim3 grid(std::int64_t rows, std::int64_t heads) {
  const std::int64_t x = (rows + kRows - 1) / kRows;
  return dim3(unsigned(x < 1 ? 1 : x), unsigned(heads < 1 ? 1 : (heads > 65535 ? 65535 : heads)));
}

template <typename T>
void forward(CudaDevice& dev, const AttentionParams& p, const AttentionForward& a) {
  using C = compute_t<T>;
  attention_rows<T, false><<<grid(p.L, p.B * p.Hq), kRows, 0, dev.stream()>>>(
      static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
      static_cast<const T*>(a.mask), nullptr, nullptr, nullptr, static_cast<T*>(a.out),
      static_cast<C*>(a.lse), p);
  check_launch(dev, "scaled_dot_product_attention");
}

template <typename T>
void backward(CudaDevice& dev, const AttentionParams& p, const AttentionBackward& a) {
  using C = compute_t<T>;
  const T *q = static_cast<const T*>(a.q), *k = static_cast<const T*>(a.k),
          *v = static_cast<const T*>(a.v), *mask = static_cast<const T*>(a.mask),
          *dout = static_cast<const T*>(a.dout);
  const C* lse = static_cast<const C*>(a.lse);
  const std::int64_t rows = p.B * p.Hq * p.L, Hk = p.Hq / p.group;
  const std::unique_ptr<Buffer> scratch =
      rows ? dev.allocate(std::size_t(rows) * sizeof(C)) : nullptr;
  C* D = scratch ? ptr_of<C>(scratch) : nullptr;
  if (rows > 0) {
    attention_stats<T><<<grid_for(dev, rows, kThreads), kThreads, 0, dev.stream()>>>(
        dout, static_cast<const T*>(a.out), D, rows, p.EV);
    check_launch(dev, "scaled_dot_product_attention_backward (statistics)");
    if (p.E > 0) {
      attention_rows<T, true><<<grid(p.L, p.B * p.Hq), kRows, 0, dev.stream()>>>(
          q, k, v, mask, dout, lse, D, static_cast<T*>(a.dq), nullptr, p);
      check_launch(dev, "scaled_dot_product_attention_backward (dq)");
    }
  }
  if (p.B * Hk * p.S > 0 && (p.E > 0 || p.EV > 0)) {
    attention_dkv<T><<<grid(p.S, p.B * Hk), kRows, 0, dev.stream()>>>(
        q, k, v, mask, dout, lse, D, static_cast<T*>(a.dk), static_cast<T*>(a.dv), p);
    check_launch(dev, "scaled_dot_product_attention_backward (dk, dv)");
  }
}

}  // namespace

void launch_attention_forward(CudaDevice& dev, DType dtype, const AttentionParams& p,
                              const AttentionForward& a) {
  dev.make_current();
  FERRY_CUDA_DISPATCH_FLOATING(dtype, "scaled_dot_product_attention", forward<scalar_t>(dev, p, a));
}

void launch_attention_backward(CudaDevice& dev, DType dtype, const AttentionParams& p,
                               const AttentionBackward& a) {
  dev.make_current();
  FERRY_CUDA_DISPATCH_FLOATING(dtype, "scaled_dot_product_attention_backward",
                               backward<scalar_t>(dev, p, a));
}

}  // namespace ferry::cuda
