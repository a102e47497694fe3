// runtime/cpu/cpu_kernels_elementwise.cpp — unary, binary, comparison, where,
// clamp (fused), copy/cast, fill and arange on the CPU. Inputs arrive broadcast to the output's
// shape and in the dtype the op computes in (Note [Kernel contract]); the math
// of each op is a functor of include/ferry/kit/math/elementwise_ops.hpp, shared with the
// CUDA backend (Note [Element-wise functors]).
#include <cstring>
#include <limits>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_loops.hpp"
#include "cpu/cpu_vector_math.hpp"
#include "ferry/kit/math/elementwise_ops.hpp"
#include "ferry/kit/math/scalar_ops.hpp"

namespace ferry::cpu {
namespace {

template <typename T> T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// out[i] = f(in[i]) in compute_t<T>.
template <typename T, typename F> void unary_loop(const OpCall& c, F f) {
  using C = compute_t<T>;
  const bool streaming = stream_output(c.outputs[0]);
  loop_nd<2>({&c.outputs[0], &c.inputs[0]}, [&](const LoopRun<2>& r) {
    if (r.stride[0] == sizeof(T) && r.stride[1] == sizeof(T)) {
      const T* __restrict in = reinterpret_cast<const T*>(r.ptr[1]);
      write_run(reinterpret_cast<T*>(r.ptr[0]), r.n, streaming,
                [&](T* __restrict o, std::int64_t at, std::int64_t n) {
                  std::int64_t i = 0;
#ifdef FERRY_HAVE_LIBMVEC
                  if constexpr (std::is_same_v<T, float> && has_vector_form<F>)
                    i = vector_unary<F>(o, in + at, n);  // Note [CPU vector math]
#endif
                  for (; i < n; ++i) o[i] = T(f(C(in[at + i])));
                });
    } else {
      for (std::int64_t i = 0; i < r.n; ++i)
        *reinterpret_cast<T*>(r.ptr[0] + i * r.stride[0]) =
            T(f(C(*reinterpret_cast<const T*>(r.ptr[1] + i * r.stride[1]))));
    }
  });
}

// out[i] = f(a[i], b[i]); Out is T for arithmetic and bool for comparisons.
// Unit-stride and scalar-operand runs get loops the compiler vectorizes.
template <typename T, typename Out, typename F> void binary_loop(const OpCall& c, F f) {
  using C = compute_t<T>;
  const bool streaming = stream_output(c.outputs[0]);
  loop_nd<3>({&c.outputs[0], &c.inputs[0], &c.inputs[1]}, [&](const LoopRun<3>& r) {
    const T* __restrict a = reinterpret_cast<const T*>(r.ptr[1]);
    const T* __restrict b = reinterpret_cast<const T*>(r.ptr[2]);
    const std::int64_t n = r.n;
    auto write = [&](const auto& body) {
      write_run(reinterpret_cast<Out*>(r.ptr[0]), n, streaming, body);
    };
    if (r.stride[0] == sizeof(Out) && r.stride[1] == sizeof(T) && r.stride[2] == sizeof(T)) {
      write([&](Out* __restrict o, std::int64_t at, std::int64_t m) {
        std::int64_t i = 0;
#ifdef FERRY_HAVE_LIBMVEC
        if constexpr (std::is_same_v<T, float> && std::is_same_v<Out, float> && has_vector_form<F>)
          i = vector_binary<F>(o, a + at, b + at, m);  // Note [CPU vector math]
#endif
        for (; i < m; ++i) o[i] = Out(f(C(a[at + i]), C(b[at + i])));
      });
    } else if (r.stride[0] == sizeof(Out) && r.stride[1] == sizeof(T) && r.stride[2] == 0) {
      const C bv = C(b[0]);
      write([&](Out* __restrict o, std::int64_t at, std::int64_t m) {
        for (std::int64_t i = 0; i < m; ++i) o[i] = Out(f(C(a[at + i]), bv));
      });
    } else if (r.stride[0] == sizeof(Out) && r.stride[1] == 0 && r.stride[2] == sizeof(T)) {
      const C av = C(a[0]);
      write([&](Out* __restrict o, std::int64_t at, std::int64_t m) {
        for (std::int64_t i = 0; i < m; ++i) o[i] = Out(f(av, C(b[at + i])));
      });
    } else {
      for (std::int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(r.ptr[0] + i * r.stride[0]) =
            Out(f(C(*reinterpret_cast<const T*>(r.ptr[1] + i * r.stride[1])),
                  C(*reinterpret_cast<const T*>(r.ptr[2] + i * r.stride[2]))));
    }
  });
}

// The dispatch of each dtype set of the op table's functor lists
// (FERRY_<KIND>_OPS in ferry/op_ids.hpp).
#define FERRY_CPU_DISPATCH_SET_all FERRY_DISPATCH_ALL
#define FERRY_CPU_DISPATCH_SET_numeric FERRY_DISPATCH_NUMERIC
#define FERRY_CPU_DISPATCH_SET_float FERRY_DISPATCH_FLOATING
#define FERRY_CPU_DISPATCH_SET_int FERRY_DISPATCH_INT
#define FERRY_CPU_DISPATCH_SET_integral FERRY_DISPATCH_INTEGRAL

// o[i] = c[i] ? a[i] : b[i] over one contiguous run, a and b each contiguous or one broadcast
// value (masked_fill, clamp's bounds): both sides are loaded every time, so the select is a
// blend the compiler vectorizes, not a branch.
template <typename T, bool ScalarA, bool ScalarB>
void where_run(T* o, const std::uint8_t* __restrict c, const T* __restrict a, const T* __restrict b,
               std::int64_t n, bool streaming) {
  write_run(o, n, streaming, [&](T* __restrict d, std::int64_t at, std::int64_t m) {
    for (std::int64_t i = 0; i < m; ++i) {
      const T av = a[ScalarA ? 0 : at + i], bv = b[ScalarB ? 0 : at + i];
      d[i] = c[at + i] ? av : bv;
    }
  });
}

void where_kernel(DeviceImpl&, const OpCall& c) {
  const bool streaming = stream_output(c.outputs[0]);
  FERRY_DISPATCH_ALL(c.outputs[0].dtype, "where", {
    loop_nd<4>({&c.outputs[0], &c.inputs[0], &c.inputs[1], &c.inputs[2]}, [&](const LoopRun<4>& r) {
      constexpr std::int64_t es = sizeof(scalar_t);
      if (r.stride[0] == es && r.stride[1] == 1 && (r.stride[2] == es || r.stride[2] == 0) &&
          (r.stride[3] == es || r.stride[3] == 0)) {
        auto* o = reinterpret_cast<scalar_t*>(r.ptr[0]);
        const auto* cond = reinterpret_cast<const std::uint8_t*>(r.ptr[1]);
        const auto* a = reinterpret_cast<const scalar_t*>(r.ptr[2]);
        const auto* b = reinterpret_cast<const scalar_t*>(r.ptr[3]);
        if (r.stride[2] == 0 && r.stride[3] == 0)
          where_run<scalar_t, true, true>(o, cond, a, b, r.n, streaming);
        else if (r.stride[2] == 0)
          where_run<scalar_t, true, false>(o, cond, a, b, r.n, streaming);
        else if (r.stride[3] == 0)
          where_run<scalar_t, false, true>(o, cond, a, b, r.n, streaming);
        else
          where_run<scalar_t, false, false>(o, cond, a, b, r.n, streaming);
        return;
      }
      for (std::int64_t i = 0; i < r.n; ++i) {
        bool cond = *reinterpret_cast<const bool*>(r.ptr[1] + i * r.stride[1]);
        *reinterpret_cast<scalar_t*>(r.ptr[0] + i * r.stride[0]) =
            *reinterpret_cast<const scalar_t*>(r.ptr[cond ? 2 : 3] + i * r.stride[cond ? 2 : 3]);
      }
    });
  });
}

// clamp's fused kernel (Note [Composite ops]): x < lo ? lo : x, then > hi ? hi,
// the composition's two selects in one pass. A missing bound is the dtype's
// lowest or highest value (an infinity for floats: -inf stays -inf), and a NaN
// bound is never taken, as in the composition.
template <typename T> void clamp_loop(const OpCall& c) {
  using C = compute_t<T>;
  using Limits = std::numeric_limits<C>;
  const Attrs& a = c.attrs;
  const C none_lo = Limits::has_infinity ? -Limits::infinity() : Limits::lowest();
  const C none_hi = Limits::has_infinity ? Limits::infinity() : Limits::max();
  const C lo = a.has("min") ? C(math::from_double<T>(a.f("min"), a.i("min_i"))) : none_lo;
  const C hi = a.has("max") ? C(math::from_double<T>(a.f("max"), a.i("max_i"))) : none_hi;
  unary_loop<T>(c, [lo, hi](C v) {
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
  });
}

template <typename To, typename From> void copy_loop(const OpCall& c) {
  loop_nd<2>({&c.outputs[0], &c.inputs[0]}, [&](const LoopRun<2>& r) {
    if constexpr (std::is_same_v<To, From>) {
      if (r.stride[0] == sizeof(To) && r.stride[1] == sizeof(From)) {
        std::memcpy(r.ptr[0], r.ptr[1], std::size_t(r.n) * sizeof(To));
        return;
      }
    }
    if (r.stride[0] == sizeof(To) && r.stride[1] == sizeof(From)) {
      To* __restrict o = reinterpret_cast<To*>(r.ptr[0]);
      const From* __restrict in = reinterpret_cast<const From*>(r.ptr[1]);
      for (std::int64_t i = 0; i < r.n; ++i) o[i] = math::convert<To>(in[i]);
    } else {
      for (std::int64_t i = 0; i < r.n; ++i)
        *reinterpret_cast<To*>(r.ptr[0] + i * r.stride[0]) =
            math::convert<To>(load<From>(r.ptr[1] + i * r.stride[1]));
    }
  });
}

// Strided copy with dtype conversion: the one kernel behind contiguous(),
// clone(), to(dtype) and copy_().
void copy_kernel(DeviceImpl&, const OpCall& c) {
  FERRY_DISPATCH_ALL(c.outputs[0].dtype, "copy", {
    using To = scalar_t;
    FERRY_DISPATCH_ALL(c.inputs[0].dtype, "copy", copy_loop<To, scalar_t>(c));
  });
}

void fill_kernel(DeviceImpl&, const OpCall& c) {
  const double v = c.attrs.f("value");
  const std::int64_t iv = c.attrs.i("ivalue");
  FERRY_DISPATCH_ALL(c.outputs[0].dtype, "fill", {
    const scalar_t value = math::from_double<scalar_t>(v, iv);
    loop_nd<1>({&c.outputs[0]}, [&](const LoopRun<1>& r) {
      for (std::int64_t i = 0; i < r.n; ++i)
        *reinterpret_cast<scalar_t*>(r.ptr[0] + i * r.stride[0]) = value;
    });
  });
}

void arange_kernel(DeviceImpl&, const OpCall& c) {
  const double start = c.attrs.f("start"), step = c.attrs.f("step");
  const TensorArg& out = c.outputs[0];
  FERRY_DISPATCH_NUMERIC(out.dtype, "arange", {
    scalar_t* o = out.data<scalar_t>();
    parallel_range(out.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i)
        o[i * out.strides[0]] = math::arange_element<scalar_t>(start, step, i);
    });
  });
}

}  // namespace

void add_elementwise_kernels(KernelTable& t) {
  namespace ops = math::ops;
  // One kernel per row of the op table's functor kinds; the functor computes
  // in compute_t<scalar_t> (float, or double for f64).
#define FERRY_UNARY(name, F, set)                                                               \
  t.emplace_back(OpId::name, [](DeviceImpl&, const OpCall& c) {                                 \
    FERRY_CPU_DISPATCH_SET_##set(c.outputs[0].dtype, #name, unary_loop<scalar_t>(c, ops::F{})); \
  });
#define FERRY_BINARY(name, F, set)                                                \
  t.emplace_back(OpId::name, [](DeviceImpl&, const OpCall& c) {                   \
    FERRY_CPU_DISPATCH_SET_##set(c.outputs[0].dtype, #name,                       \
                                 (binary_loop<scalar_t, scalar_t>(c, ops::F{}))); \
  });
#define FERRY_COMPARE(name, F, set)                                           \
  t.emplace_back(OpId::name, [](DeviceImpl&, const OpCall& c) {               \
    FERRY_CPU_DISPATCH_SET_##set(c.inputs[0].dtype, #name,                    \
                                 (binary_loop<scalar_t, bool>(c, ops::F{}))); \
  });
  FERRY_UNARY_OPS(FERRY_UNARY)
  FERRY_BINARY_OPS(FERRY_BINARY)
  FERRY_COMPARE_OPS(FERRY_COMPARE)
#undef FERRY_UNARY
#undef FERRY_BINARY
#undef FERRY_COMPARE

  t.emplace_back(OpId::where, where_kernel);
  t.emplace_back(OpId::clamp, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_NUMERIC(c.outputs[0].dtype, "clamp", clamp_loop<scalar_t>(c));
  });
  t.emplace_back(OpId::copy, copy_kernel);
  t.emplace_back(OpId::fill, fill_kernel);
  t.emplace_back(OpId::arange, arange_kernel);
}

}  // namespace ferry::cpu
