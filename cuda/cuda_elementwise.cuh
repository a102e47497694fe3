// cuda/cuda_elementwise.cuh — what the element-wise kernel files share
// (cuda_kernels_{elementwise,grad,random}.cu): the adapters that run a functor
// of include/ferry/kit/math/elementwise_ops.hpp on stored elements, the operand checks,
// and the engine for kernels with no input (fill, arange, random draws).
// Device code only: include it from .cu files.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda_loops.cuh"
#include "ferry/error.hpp"
#include "ferry/kit/math/elementwise_ops.hpp"

namespace ferry::cuda {

// Note [Functor adapters]
// A stored element T is widened to compute_t<T> (float for f16/bf16, through
// ferry::Half / BFloat16's software conversions, so the bits match the CPU's),
// the shared functor computes, and the result is stored as Out: T for
// arithmetic, bool for comparisons. The CPU's loops do exactly this
// (runtime/cpu/cpu_kernels_elementwise.cpp), so only the device's math
// library (exp, erf, tanh, ...) and nvcc's FMA contraction separate the two.
template <typename T, typename Op> struct UnaryFn {
  __device__ T operator()(T x) const { return T(Op{}(compute_t<T>(x))); }
};
template <typename T, typename Out, typename Op> struct BinaryFn {
  __device__ Out operator()(T a, T b) const {
    using C = compute_t<T>;
    return Out(Op{}(C(a), C(b)));
  }
};

// The unsigned type of N bytes: kernels that only move elements (same-dtype
// copy, where) are instantiated per element size, not per dtype.
template <std::size_t N> struct BitsOf;
template <> struct BitsOf<1> { using type = std::uint8_t; };
template <> struct BitsOf<2> { using type = std::uint16_t; };
template <> struct BitsOf<4> { using type = std::uint32_t; };
template <> struct BitsOf<8> { using type = std::uint64_t; };
template <typename T> using bits_t = typename BitsOf<sizeof(T)>::type;

// Checks the operands the core hands an element-wise kernel (Note [Kernel
// contract]): one output and `nin` inputs of the output's shape (broadcast
// already). The core guarantees this; the check costs nothing next to a launch
// and keeps a malformed call from sending a kernel outside a buffer.
inline const TensorArg& check_operands(const OpCall& c, std::size_t nin, const char* op) {
  if (c.inputs.size() != nin || c.outputs.size() != 1)
    throw ShapeError(std::string(op) + ": the cuda kernel takes " + std::to_string(nin) +
                     " input(s) and one output");
  const TensorArg& out = c.outputs[0];
  for (const TensorArg& in : c.inputs)
    if (in.sizes != out.sizes)
      throw ShapeError(std::string(op) + ": every input must have the output's shape");
  return out;
}

// DTypeError unless `a` (named `what`) has dtype `dt`.
inline void check_dtype(const TensorArg& a, DType dt, const char* what, const char* op) {
  if (a.dtype != dt)
    throw DTypeError(std::string(op) + ": " + what + " must be " + std::string(dtype_name(dt)) +
                     ", not " + std::string(dtype_name(a.dtype)));
}

// ---- kernels with no input: out[i] = gen(i) for row-major index i ----

template <typename T, typename Index, typename G> __global__ void __launch_bounds__(kThreads)
    generate_kernel(T* __restrict__ out, OffsetCalc<1, Index> oc, std::int64_t n, G gen) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    std::int64_t off[1];
    oc.get(Index(i), off);
    out[off[0]] = gen(i);
  }
}

// Writes gen(i) (a device functor std::int64_t -> T) to element i of `out`, in
// row-major order of its shape, whatever its strides: a random draw's element i
// gets counter offset + i on a strided view too. A contiguous output coalesces
// to one dim, where the offset calculator is one multiply.
template <typename T, typename G>
void launch_generate(CudaDevice& dev, const TensorArg& out, G gen, const char* op) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  T* o = static_cast<T*>(data_ptr(out));
  const unsigned blocks = grid_for(dev, n, kThreads);
  dev.make_current();
  if (fits_uint32(n))
    generate_kernel<T><<<blocks, kThreads, 0, dev.stream()>>>(
        o, make_offset_calc<1, std::uint32_t>({&out}, op), n, gen);
  else
    generate_kernel<T><<<blocks, kThreads, 0, dev.stream()>>>(
        o, make_offset_calc<1, std::uint64_t>({&out}, op), n, gen);
  check_launch(dev, op);
}

}  // namespace ferry::cuda
