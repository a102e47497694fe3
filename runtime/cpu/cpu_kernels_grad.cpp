// runtime/cpu/cpu_kernels_grad.cpp — the kernels only backward passes use
// (docs/kernel-contract.md, "Ops for training"): the fused activation
// derivatives, and index_add / scatter_add, which accumulate into their output.
//
// Note [Deterministic accumulation]
// index_add and scatter_add are one loop. Seen with src's shape, out has its
// own strides but stride 0 along `dim` (the coordinate along `dim` comes from
// the index), and the index has src's shape too (index_add's varies along `dim`
// only). Every other coordinate o names one output line along `dim`; the
// contributions to it are j = 0, 1, ... along src's `dim`, each adding
// src[o, j] into out[o, index[o, j]]. One thread owns a whole line and adds its
// contributions in increasing j, so the sum of any output element is formed in
// the same order on every run, thread count and backend (shaders/index_add.comp
// does the same, one invocation per line). Threads split the lines, never j.
// Floats add in their compute type and round on every store (as PyTorch's
// index_add_ on a Half tensor does); integers wrap.
#include <fmt/format.h>

#include <atomic>
#include <cstring>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_loops.hpp"
#include "cpu/cpu_vector_math.hpp"
#include "ferry/kit/index_args.hpp"
#include "ferry/kit/math/elementwise_ops.hpp"
#include "ferry/kit/math/scalar_ops.hpp"

namespace ferry::cpu {
namespace {

// ---- activation backward: out = f(grad, z) ----

template <typename T, typename F> void grad_loop(const OpCall& c, F f) {
  using C = compute_t<T>;
  loop_nd<3>({&c.outputs[0], &c.inputs[0], &c.inputs[1]}, [&](const LoopRun<3>& r) {
    T* __restrict o = reinterpret_cast<T*>(r.ptr[0]);
    const T* __restrict g = reinterpret_cast<const T*>(r.ptr[1]);
    const T* __restrict z = reinterpret_cast<const T*>(r.ptr[2]);
    if (r.stride[0] == sizeof(T) && r.stride[1] == sizeof(T) && r.stride[2] == sizeof(T)) {
      std::int64_t i = 0;
#ifdef FERRY_HAVE_LIBMVEC
      if constexpr (std::is_same_v<T, float> && has_vector_form<F>)
        i = vector_binary<F>(o, g, z, r.n);  // Note [CPU vector math]
#endif
      for (; i < r.n; ++i) o[i] = T(f(C(g[i]), C(z[i])));
    } else {
      for (std::int64_t i = 0; i < r.n; ++i)
        *reinterpret_cast<T*>(r.ptr[0] + i * r.stride[0]) =
            T(f(C(*reinterpret_cast<const T*>(r.ptr[1] + i * r.stride[1])),
                C(*reinterpret_cast<const T*>(r.ptr[2] + i * r.stride[2]))));
    }
  });
}

// `f` is a functor of math/elementwise_ops.hpp: it takes and returns
// compute_t<scalar_t>, float or double for f64.
template <typename F> KernelFn activation_backward(OpId id, F f) {
  return [id, f](DeviceImpl&, const OpCall& c) {
    const std::string_view op = op_name(id);
    if (c.inputs.size() != 2 || c.outputs.size() != 1)
      throw ShapeError(fmt::format("{}: the cpu kernel takes (grad, z) -> out", op));
    const DType dt = c.outputs[0].dtype;
    if (c.inputs[0].dtype != dt || c.inputs[1].dtype != dt)
      throw DTypeError(fmt::format("{}: grad ({}) and z ({}) must have the output's dtype ({})", op,
                                   dtype_name(c.inputs[0].dtype), dtype_name(c.inputs[1].dtype),
                                   dtype_name(dt)));
    if (c.inputs[0].sizes != c.outputs[0].sizes || c.inputs[1].sizes != c.outputs[0].sizes)
      throw ShapeError(fmt::format("{}: grad and z must have the output's shape", op));
    FERRY_DISPATCH_FLOATING(dt, op, grad_loop<scalar_t>(c, f));
  };
}

// ---- index_add, scatter_add (Note [Deterministic accumulation]) ----

template <typename T> void accumulate(T* o, const T* s) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    *o = T(float(*o) + float(*s));
  else if constexpr (std::is_floating_point_v<T>)
    *o = *o + *s;
  else
    *o = math::wrap_add(*o, *s);
}

// The three views, with src's shape, as accumulate_lines walks them.
struct AccumulateArgs {
  std::vector<std::int64_t> sizes;            // src's sizes without `dim`
  std::vector<std::int64_t> strides[3];       // out, src, index, without `dim`
  std::int64_t count = 0;                     // contributions per line: src.size(dim)
  std::int64_t src_step = 0, index_step = 0;  // src's and the index's strides along dim
  std::int64_t out_step = 0, out_size = 0;    // out's stride and size along dim
};

template <typename T> void accumulate_lines(const AccumulateArgs& a, T* out, const T* src,
                                            const std::int64_t* index, std::atomic<bool>& failed,
                                            std::atomic<std::int64_t>& bad) {
  // Lines are walked in runs along the innermost other dim, and each run takes its
  // contributions j in order, the run's lines side by side: the order each element sees is
  // still increasing j, and the inner loop has unit stride for index_add along an outer dim
  // (an embedding's backward).
  std::vector<std::int64_t> sizes = a.sizes;
  std::vector<std::int64_t> strides[3] = {a.strides[0], a.strides[1], a.strides[2]};
  if (sizes.empty()) {
    sizes.push_back(1);
    for (auto& s : strides) s.push_back(0);
  }
  std::int64_t lines = 1;
  for (auto s : sizes) lines *= s;
  const std::size_t nd = sizes.size();
  const std::int64_t inner = sizes[nd - 1];
  const std::int64_t so = strides[0][nd - 1], ss = strides[1][nd - 1], si = strides[2][nd - 1];
  // A line costs `count` additions: split the lines so each thread gets enough work.
  const std::int64_t grain =
      std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(a.count, 1));
  parallel_range(lines, grain, [&](std::int64_t begin, std::int64_t end) {
    std::vector<std::int64_t> idx(nd);
    std::int64_t rem = begin;
    for (std::size_t d = nd; d-- > 0;) {
      idx[d] = rem % sizes[d];
      rem /= sizes[d];
    }
    while (begin < end) {
      std::int64_t off[3] = {0, 0, 0};
      for (std::size_t d = 0; d < nd; ++d)
        for (int t = 0; t < 3; ++t) off[t] += idx[d] * strides[t][d];
      const std::int64_t n = std::min(inner - idx[nd - 1], end - begin);
      T* o = out + off[0];
      const T* s = src + off[1];
      const std::int64_t* ix = index + off[2];
      for (std::int64_t j = 0; j < a.count; ++j) {
        const std::int64_t* ixj = ix + j * a.index_step;
        const T* sj = s + j * a.src_step;
        for (std::int64_t i = 0; i < n; ++i) {
          const std::int64_t v = ixj[i * si];
          if (v < 0 || v >= a.out_size) {
            if (!failed.exchange(true)) bad = v;
            continue;  // never write outside out
          }
          accumulate(o + i * so + v * a.out_step, sj + i * ss);
        }
      }
      begin += n;
      idx[nd - 1] += n;
      for (std::size_t d = nd - 1; d > 0 && idx[d] == sizes[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
      }
    }
  });
}

// `index_view` has src's shape (strides may be 0).
void accumulate_along(std::string_view op, const TensorArg& src, const TensorArg& index_view,
                      const TensorArg& out, int dim) {
  if (index_view.dtype != DType::i64)
    throw DTypeError(
        fmt::format("{}: the index must be i64, not {}", op, dtype_name(index_view.dtype)));
  if (src.dtype != out.dtype)
    throw DTypeError(fmt::format("{}: src ({}) must have the output's dtype ({})", op,
                                 dtype_name(src.dtype), dtype_name(out.dtype)));
  AccumulateArgs a;
  for (int d = 0; d < src.ndim(); ++d) {
    if (d == dim) continue;
    a.sizes.push_back(src.sizes[std::size_t(d)]);
    a.strides[0].push_back(out.strides[std::size_t(d)]);
    a.strides[1].push_back(src.strides[std::size_t(d)]);
    a.strides[2].push_back(index_view.strides[std::size_t(d)]);
  }
  const auto ud = std::size_t(dim);
  a.count = src.sizes[ud];
  a.src_step = src.strides[ud];
  a.index_step = index_view.strides[ud];
  a.out_step = out.strides[ud];
  a.out_size = out.sizes[ud];
  if (src.numel() == 0 || out.numel() == 0) return;
  std::atomic<bool> failed{false};
  std::atomic<std::int64_t> bad{0};
  const std::int64_t* ix = index_view.data<std::int64_t>();
  // bool is not numeric: PyTorch's index_add_ on bool is an OR, which no gradient needs.
  FERRY_DISPATCH_NUMERIC(
      out.dtype, op,
      accumulate_lines<scalar_t>(a, out.data<scalar_t>(), src.data<scalar_t>(), ix, failed, bad));
  if (failed)
    throw ShapeError(
        fmt::format("{}: index {} is out of range for dim {} of size {} (valid: 0 to {})", op,
                    bad.load(), dim, a.out_size, a.out_size - 1));
}

void index_add_kernel(DeviceImpl&, const OpCall& call) {
  const AccumulateOperands a = index_add_args(call, "cpu");
  accumulate_along("index_add", a.src, a.index, a.out, a.dim);
}

void scatter_add_kernel(DeviceImpl&, const OpCall& call) {
  const AccumulateOperands a = scatter_add_args(call, "cpu");
  accumulate_along("scatter_add", a.src, a.index, a.out, a.dim);
}

}  // namespace

void add_grad_kernels(KernelTable& t) {
  namespace ops = math::ops;
#define FERRY_ACTIVATION_BACKWARD(name, F, set) \
  t.emplace_back(OpId::name, activation_backward(OpId::name, ops::F{}));
  FERRY_ACTIVATION_BACKWARD_OPS(FERRY_ACTIVATION_BACKWARD)
#undef FERRY_ACTIVATION_BACKWARD
  t.emplace_back(OpId::index_add, index_add_kernel);
  t.emplace_back(OpId::scatter_add, scatter_add_kernel);
}

}  // namespace ferry::cpu
