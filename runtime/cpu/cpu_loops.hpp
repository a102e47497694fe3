// runtime/cpu/cpu_loops.hpp — the CPU's strided iteration engine and dtype
// dispatch, used by every CPU kernel.
//
// Note [CPU loops]
// loop_nd walks N operands of one shape (strides in elements, possibly 0 for
// broadcast dims): it drops size-1 dims, merges dims that are contiguous in
// every operand, splits the linear index range over OpenMP threads (only above
// kParallelGrain elements, where threading pays), and calls `inner` once per
// run along the innermost dim with byte pointers and byte strides. Kernels
// special-case unit strides inside `inner` so the compiler vectorizes them.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ferry/backend.hpp"
#include "ferry/error.hpp"
#include "ferry/kit/math/scalar_ops.hpp"
#include "parallel.hpp"

namespace ferry::cpu {

inline constexpr std::int64_t kParallelGrain = 32768;

template <std::size_t N> struct LoopRun {
  std::array<char*, N> ptr;
  std::array<std::int64_t, N> stride;  // bytes
  std::int64_t n;
};

using detail::parallel_range;  // the core's (parallel.hpp)

// `args[i]` describes operand i (outputs first by convention); all share sizes of args[0].
template <std::size_t N, typename Inner>
void loop_nd(const std::array<const TensorArg*, N>& args, const Inner& inner) {
  const auto& sizes0 = args[0]->sizes;
  std::int64_t total = 1;
  for (auto s : sizes0) total *= s;
  if (total == 0) return;
  // Collapse: drop size-1 dims, merge dims contiguous in every operand.
  std::vector<std::int64_t> sizes;
  std::array<std::vector<std::int64_t>, N> strides;
  for (std::size_t d = 0; d < sizes0.size(); ++d) {
    if (sizes0[d] == 1) continue;
    bool merge = !sizes.empty();
    for (std::size_t k = 0; k < N && merge; ++k)
      merge = strides[k].back() == args[k]->strides[d] * sizes0[d];
    if (merge) {
      sizes.back() *= sizes0[d];
      for (std::size_t k = 0; k < N; ++k) strides[k].back() = args[k]->strides[d];
    } else {
      sizes.push_back(sizes0[d]);
      for (std::size_t k = 0; k < N; ++k) strides[k].push_back(args[k]->strides[d]);
    }
  }
  if (sizes.empty()) {
    sizes.push_back(1);
    for (std::size_t k = 0; k < N; ++k) strides[k].push_back(0);
  }
  std::array<char*, N> base;
  std::array<std::int64_t, N> elsize;
  for (std::size_t k = 0; k < N; ++k) {
    elsize[k] = std::int64_t(dtype_size(args[k]->dtype));
    base[k] = static_cast<char*>(args[k]->buffer->host_ptr()) + args[k]->offset * elsize[k];
  }
  const std::size_t nd = sizes.size();
  const std::int64_t inner_size = sizes[nd - 1];
  parallel_range(total, kParallelGrain, [&](std::int64_t begin, std::int64_t end) {
    std::vector<std::int64_t> idx(nd);
    std::int64_t rem = begin;
    for (std::size_t d = nd; d-- > 0;) {
      idx[d] = rem % sizes[d];
      rem /= sizes[d];
    }
    LoopRun<N> run;
    for (std::size_t k = 0; k < N; ++k) run.stride[k] = strides[k][nd - 1] * elsize[k];
    while (begin < end) {
      for (std::size_t k = 0; k < N; ++k) {
        std::int64_t off = 0;
        for (std::size_t d = 0; d < nd; ++d) off += idx[d] * strides[k][d];
        run.ptr[k] = base[k] + off * elsize[k];
      }
      run.n = std::min(inner_size - idx[nd - 1], end - begin);
      inner(run);
      begin += run.n;
      idx[nd - 1] += run.n;
      for (std::size_t d = nd - 1; d > 0 && idx[d] == sizes[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
      }
    }
  });
}

// Note [Streaming stores]
// An element-wise output far larger than the last-level cache is read by the
// next op from memory anyway, so writing it through the cache only costs: each
// store first reads its line (read-for-ownership), a third of the traffic of
// y = f(x). Such runs are computed in L1-sized blocks on the stack and copied
// out with non-temporal stores, as glibc's memcpy does past its threshold; the
// 2-thread memcpy baseline of ferry-bench's element-wise ops does the same.
// Outputs below kStreamBytes stay in cache for the op that reads them next.
inline constexpr std::int64_t kStreamBytes = std::int64_t(32) << 20;

inline bool stream_output(const TensorArg& out) {
  return out.numel() * std::int64_t(dtype_size(out.dtype)) >= kStreamBytes;
}

// Writes the n elements of a contiguous run at `o`: body(dst, at, count) computes
// elements [at, at + count) into dst. With `streaming`, whole 16-byte-aligned blocks
// go through a stack buffer and non-temporal stores; otherwise body writes o itself.
// Every piece goes through the one call of body below, so each kernel's loop is
// inlined (and vectorized) once, not once per piece: the CPU's element-wise kernels
// instantiate this for some 800 functor and dtype pairs, and four inlined copies
// each made cpu_kernels_elementwise.cpp the costliest file of the build.
template <typename T, typename Body>
void write_run(T* o, std::int64_t n, bool streaming, const Body& body) {
  std::int64_t head = n;  // the elements written in place before the first block
#if defined(__SSE2__)
  constexpr std::int64_t kBlockBytes = 4096;
  constexpr std::int64_t kBlock = kBlockBytes / std::int64_t(sizeof(T));
  static_assert(kBlockBytes % sizeof(T) == 0);
  streaming = streaming && n >= 2 * kBlock && reinterpret_cast<std::uintptr_t>(o) % sizeof(T) == 0;
  alignas(64) unsigned char block[kBlockBytes];
  if (streaming)
    for (head = 0; head < n && reinterpret_cast<std::uintptr_t>(o + head) % 16 != 0;) ++head;
#else
  streaming = false;
  constexpr std::int64_t kBlock = 1;
#endif
  for (std::int64_t at = 0; at < n;) {
    const bool staged = streaming && at >= head && at + kBlock <= n;
    const std::int64_t count = at < head ? head - at : staged ? kBlock : n - at;
#if defined(__SSE2__)
    body(staged ? reinterpret_cast<T*>(block) : o + at, at, count);
    if (staged) {
      auto* dst = reinterpret_cast<__m128i*>(o + at);
      const auto* src = reinterpret_cast<const __m128i*>(block);
      for (std::int64_t k = 0; k < kBlockBytes / 16; ++k)
        _mm_stream_si128(dst + k, _mm_load_si128(src + k));
    }
#else
    body(o + at, at, count);
#endif
    at += count;
  }
#if defined(__SSE2__)
  if (streaming) _mm_sfence();  // the streamed lines are visible before the kernel returns
#endif
}

// Runs the statement(s) given with `scalar_t` bound to the host type of
// `dtype`; a dtype outside the case list is an UnsupportedError naming the op.
#define FERRY_CPU_CASE(DT, ...)              \
  case DType::DT: {                          \
    using scalar_t = dtype_cpp_t<DType::DT>; \
    __VA_ARGS__;                             \
    break;                                   \
  }
#define FERRY_CPU_FLOAT_CASES(...)  \
  FERRY_CPU_CASE(f32, __VA_ARGS__)  \
  FERRY_CPU_CASE(f16, __VA_ARGS__)  \
  FERRY_CPU_CASE(bf16, __VA_ARGS__) \
  FERRY_CPU_CASE(f64, __VA_ARGS__)
#define FERRY_CPU_INT_CASES(...)   \
  FERRY_CPU_CASE(i32, __VA_ARGS__) \
  FERRY_CPU_CASE(i64, __VA_ARGS__) \
  FERRY_CPU_CASE(u8, __VA_ARGS__)  \
  FERRY_CPU_CASE(i8, __VA_ARGS__)  \
  FERRY_CPU_CASE(i16, __VA_ARGS__)
#define FERRY_CPU_INTEGRAL_CASES(...) \
  FERRY_CPU_INT_CASES(__VA_ARGS__)    \
  FERRY_CPU_CASE(boolean, __VA_ARGS__)
#define FERRY_CPU_NUMERIC_CASES(...) \
  FERRY_CPU_FLOAT_CASES(__VA_ARGS__) \
  FERRY_CPU_INT_CASES(__VA_ARGS__)
#define FERRY_CPU_ALL_CASES(...)       \
  FERRY_CPU_NUMERIC_CASES(__VA_ARGS__) \
  FERRY_CPU_CASE(boolean, __VA_ARGS__)
#define FERRY_CPU_DISPATCH(dtype, op, CASES, ...)                                        \
  switch (dtype) {                                                                       \
    CASES(__VA_ARGS__)                                                                   \
    default:                                                                             \
      throw UnsupportedError(std::string(op) + ": the cpu kernel does not take dtype " + \
                             std::string(dtype_name(dtype)));                            \
  }
// Every dtype; every dtype but bool; f32, f16, bf16 and f64; i8, i16, i32, i64 and u8;
// those and bool.
#define FERRY_DISPATCH_ALL(dtype, op, ...) \
  FERRY_CPU_DISPATCH(dtype, op, FERRY_CPU_ALL_CASES, __VA_ARGS__)
#define FERRY_DISPATCH_NUMERIC(dtype, op, ...) \
  FERRY_CPU_DISPATCH(dtype, op, FERRY_CPU_NUMERIC_CASES, __VA_ARGS__)
#define FERRY_DISPATCH_FLOATING(dtype, op, ...) \
  FERRY_CPU_DISPATCH(dtype, op, FERRY_CPU_FLOAT_CASES, __VA_ARGS__)
#define FERRY_DISPATCH_INT(dtype, op, ...) \
  FERRY_CPU_DISPATCH(dtype, op, FERRY_CPU_INT_CASES, __VA_ARGS__)
#define FERRY_DISPATCH_INTEGRAL(dtype, op, ...) \
  FERRY_CPU_DISPATCH(dtype, op, FERRY_CPU_INTEGRAL_CASES, __VA_ARGS__)

// The type a kernel computes in (include/ferry/kit/math/scalar_ops.hpp, shared with CUDA).
using math::compute_t;

}  // namespace ferry::cpu
