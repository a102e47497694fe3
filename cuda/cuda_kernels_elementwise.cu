// cuda/cuda_kernels_elementwise.cu — unary, binary, comparison, where,
// copy/cast, fill and arange on CUDA: the ops and dtypes of
// runtime/cpu/cpu_kernels_elementwise.cpp, f64 included (computed in double).
// The math of each op is a functor of include/ferry/kit/math/elementwise_ops.hpp,
// the one the CPU runs (Note [Functor adapters]); the strided, vectorized
// launch is launch_elementwise (Note [CUDA element-wise engine]).
#include <array>
#include <cstring>
#include <type_traits>

#include "cuda_elementwise.cuh"

namespace ferry::cuda {
namespace {

namespace ops = math::ops;

// ---- unary and binary ops through the element-wise engine ----

template <typename T, typename Op> void unary(CudaDevice& dev, const OpCall& c, const char* op) {
  launch_elementwise<T, T, 1>(dev, c.outputs[0], {&c.inputs[0]}, UnaryFn<T, Op>{}, op);
}

template <typename T, typename Out, typename Op>
void binary(CudaDevice& dev, const OpCall& c, const char* op) {
  launch_elementwise<Out, T, 2>(dev, c.outputs[0], {&c.inputs[0], &c.inputs[1]},
                                BinaryFn<T, Out, Op>{}, op);
}

// Inputs of the output's dtype and shape, computed per the dispatch's dtype set.
enum class Set { floating, numeric, all, integer, integral };

template <Set S, typename Op> KernelFn unary_kernel(const char* op) {
  return [op](DeviceImpl& d, const OpCall& c) {
    const TensorArg& out = check_operands(c, 1, op);
    check_dtype(c.inputs[0], out.dtype, "the input", op);
    CudaDevice& dev = cuda_device(d);
    if constexpr (S == Set::floating) {
      FERRY_CUDA_DISPATCH_FLOATING(out.dtype, op, unary<scalar_t, Op>(dev, c, op));
    } else if constexpr (S == Set::numeric) {
      FERRY_CUDA_DISPATCH_NUMERIC(out.dtype, op, unary<scalar_t, Op>(dev, c, op));
    } else if constexpr (S == Set::integer) {
      FERRY_CUDA_DISPATCH_INT(out.dtype, op, unary<scalar_t, Op>(dev, c, op));
    } else if constexpr (S == Set::integral) {
      FERRY_CUDA_DISPATCH_INTEGRAL(out.dtype, op, unary<scalar_t, Op>(dev, c, op));
    } else {
      FERRY_CUDA_DISPATCH_ALL(out.dtype, op, unary<scalar_t, Op>(dev, c, op));
    }
  };
}

template <Set S, typename Op> KernelFn binary_kernel(const char* op) {
  return [op](DeviceImpl& d, const OpCall& c) {
    const TensorArg& out = check_operands(c, 2, op);
    check_dtype(c.inputs[0], out.dtype, "the first input", op);
    check_dtype(c.inputs[1], out.dtype, "the second input", op);
    CudaDevice& dev = cuda_device(d);
    if constexpr (S == Set::floating) {
      FERRY_CUDA_DISPATCH_FLOATING(out.dtype, op, binary<scalar_t, scalar_t, Op>(dev, c, op));
    } else if constexpr (S == Set::numeric) {
      FERRY_CUDA_DISPATCH_NUMERIC(out.dtype, op, binary<scalar_t, scalar_t, Op>(dev, c, op));
    } else if constexpr (S == Set::integer) {
      FERRY_CUDA_DISPATCH_INT(out.dtype, op, binary<scalar_t, scalar_t, Op>(dev, c, op));
    } else if constexpr (S == Set::integral) {
      FERRY_CUDA_DISPATCH_INTEGRAL(out.dtype, op, binary<scalar_t, scalar_t, Op>(dev, c, op));
    } else {
      FERRY_CUDA_DISPATCH_ALL(out.dtype, op, binary<scalar_t, scalar_t, Op>(dev, c, op));
    }
  };
}

// Two inputs of one dtype (any), a bool output.
template <typename Op> KernelFn comparison_kernel(const char* op) {
  return [op](DeviceImpl& d, const OpCall& c) {
    const TensorArg& out = check_operands(c, 2, op);
    check_dtype(out, DType::boolean, "the output", op);
    check_dtype(c.inputs[1], c.inputs[0].dtype, "the second input", op);
    CudaDevice& dev = cuda_device(d);
    FERRY_CUDA_DISPATCH_ALL(c.inputs[0].dtype, op, binary<scalar_t, bool, Op>(dev, c, op));
  };
}

// ---- where: out = cond ? a : b, all four broadcast and possibly strided ----

// where only moves elements, so T is the element's bits (bits_t).
template <typename T, typename Index> __global__ void __launch_bounds__(kThreads)
    where_kernel_impl(T* __restrict__ out, const std::uint8_t* __restrict__ cond,
                      const T* __restrict__ a, const T* __restrict__ b, OffsetCalc<4, Index> oc,
                      std::int64_t n) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    std::int64_t off[4];
    oc.get(Index(i), off);
    out[off[0]] = cond[off[1]] != 0 ? a[off[2]] : b[off[3]];
  }
}

template <typename T> void launch_where(CudaDevice& dev, const OpCall& c) {
  const TensorArg& out = c.outputs[0];
  const std::int64_t n = out.numel();
  if (n == 0) return;
  const std::array<const TensorArg*, 4> args = {&out, &c.inputs[0], &c.inputs[1], &c.inputs[2]};
  T* o = static_cast<T*>(data_ptr(out));
  const auto* cond = static_cast<const std::uint8_t*>(data_ptr(c.inputs[0]));
  const T* a = static_cast<const T*>(data_ptr(c.inputs[1]));
  const T* b = static_cast<const T*>(data_ptr(c.inputs[2]));
  const unsigned blocks = grid_for(dev, n, kThreads);
  dev.make_current();
  if (fits_uint32(n))
    where_kernel_impl<<<blocks, kThreads, 0, dev.stream()>>>(
        o, cond, a, b, make_offset_calc<4, std::uint32_t>(args, "where"), n);
  else
    where_kernel_impl<<<blocks, kThreads, 0, dev.stream()>>>(
        o, cond, a, b, make_offset_calc<4, std::uint64_t>(args, "where"), n);
  check_launch(dev, "where");
}

void where_kernel(DeviceImpl& d, const OpCall& c) {
  const TensorArg& out = check_operands(c, 3, "where");
  check_dtype(c.inputs[0], DType::boolean, "the condition", "where");
  check_dtype(c.inputs[1], out.dtype, "the first value", "where");
  check_dtype(c.inputs[2], out.dtype, "the second value", "where");
  CudaDevice& dev = cuda_device(d);
  FERRY_CUDA_DISPATCH_ALL(out.dtype, "where", launch_where<bits_t<scalar_t>>(dev, c));
}

// ---- copy: any dtype to any dtype, f64 included ----

template <typename To, typename From> struct ConvertFn {
  __device__ To operator()(From v) const { return math::convert<To>(v); }
};

// A conversion between two different dtypes (a same-dtype copy never gets
// here, and instantiating it per dtype would only add kernels).
template <typename To, typename From>
void convert_copy(CudaDevice& dev, const TensorArg& out, const TensorArg& in) {
  if constexpr (!std::is_same_v<To, From>)
    launch_elementwise<To, From, 1>(dev, out, {&in}, ConvertFn<To, From>{}, "copy");
}

// Strided copy with dtype conversion: the one kernel behind contiguous(),
// clone(), to(dtype) and copy_(). A same-dtype copy moves bits (convert<T>(T)
// is the identity), one instantiation per element size.
void copy_kernel(DeviceImpl& d, const OpCall& c) {
  const TensorArg& out = check_operands(c, 1, "copy");
  const TensorArg& in = c.inputs[0];
  CudaDevice& dev = cuda_device(d);
  if (in.dtype == out.dtype) {
    FERRY_CUDA_DISPATCH_ALL(out.dtype, "copy", {
      using B = bits_t<scalar_t>;
      launch_elementwise<B, B, 1>(dev, out, {&in}, ConvertFn<B, B>{}, "copy");
    });
    return;
  }
  FERRY_CUDA_DISPATCH_ALL(out.dtype, "copy", {
    using To = scalar_t;
    FERRY_CUDA_DISPATCH_ALL(in.dtype, "copy", convert_copy<To, scalar_t>(dev, out, in));
  });
}

// ---- fill and arange: no input ----

template <typename T> struct ConstantFn {
  T value;
  __device__ T operator()(std::int64_t) const { return value; }
};

// Every dtype, f64 included; the value converts on the host by the CPU's rule.
void fill_kernel(DeviceImpl& d, const OpCall& c) {
  if (!c.inputs.empty() || c.outputs.size() != 1)
    throw ShapeError("fill: the cuda kernel takes no input and one output");
  const double v = c.attrs.f("value");
  const std::int64_t iv = c.attrs.i("ivalue");
  CudaDevice& dev = cuda_device(d);
  FERRY_CUDA_DISPATCH_ALL(c.outputs[0].dtype, "fill", {
    using B = bits_t<scalar_t>;  // the value's bits: one kernel per element size
    const scalar_t value = math::from_double<scalar_t>(v, iv);
    B bits;
    std::memcpy(&bits, &value, sizeof bits);
    launch_generate<B>(dev, c.outputs[0], ConstantFn<B>{bits}, "fill");
  });
}

template <typename T> struct ArangeFn {
  double start, step;
  __device__ T operator()(std::int64_t i) const {
    return math::arange_element<T>(start, step, i);  // bit-identical to the CPU's
  }
};

void arange_kernel(DeviceImpl& d, const OpCall& c) {
  if (!c.inputs.empty() || c.outputs.size() != 1 || c.outputs[0].ndim() != 1)
    throw ShapeError("arange: the cuda kernel takes no input and a 1-D output");
  const double start = c.attrs.f("start"), step = c.attrs.f("step");
  CudaDevice& dev = cuda_device(d);
  FERRY_CUDA_DISPATCH_NUMERIC(
      c.outputs[0].dtype, "arange",
      launch_generate<scalar_t>(dev, c.outputs[0], ArangeFn<scalar_t>{start, step}, "arange"));
}

}  // namespace

// The dtype sets of the op table's functor lists (FERRY_<KIND>_OPS).
#define FERRY_CUDA_SET_all Set::all
#define FERRY_CUDA_SET_numeric Set::numeric
#define FERRY_CUDA_SET_float Set::floating
#define FERRY_CUDA_SET_int Set::integer
#define FERRY_CUDA_SET_integral Set::integral

void add_elementwise_kernels(KernelTable& t) {
  // One kernel per row of the op table's functor kinds.
#define FERRY_UNARY(name, F, set) \
  t.emplace_back(OpId::name, unary_kernel<FERRY_CUDA_SET_##set, ops::F>(#name));
#define FERRY_BINARY(name, F, set) \
  t.emplace_back(OpId::name, binary_kernel<FERRY_CUDA_SET_##set, ops::F>(#name));
#define FERRY_COMPARE(name, F, set) t.emplace_back(OpId::name, comparison_kernel<ops::F>(#name));
  FERRY_UNARY_OPS(FERRY_UNARY)
  FERRY_BINARY_OPS(FERRY_BINARY)
  FERRY_COMPARE_OPS(FERRY_COMPARE)
#undef FERRY_UNARY
#undef FERRY_BINARY
#undef FERRY_COMPARE

  t.emplace_back(OpId::where, where_kernel);
  t.emplace_back(OpId::copy, copy_kernel);
  t.emplace_back(OpId::fill, fill_kernel);
  t.emplace_back(OpId::arange, arange_kernel);
}

}  // namespace ferry::cuda
