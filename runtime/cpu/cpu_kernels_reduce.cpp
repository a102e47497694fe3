// runtime/cpu/cpu_kernels_reduce.cpp — sum, prod, max, min and argmax on the CPU.
//
// Note [CPU reductions]
// The front-end permutes the input so that the kept dims come first and the
// `reduce_ndim` reduced dims last; the output is contiguous over the kept dims
// (docs/kernel-contract.md). Both groups are collapsed (size-1 dims dropped,
// dims contiguous in memory merged), which preserves the row-major order of
// each group, so the linear index of an element within the reduced sub-space —
// what argmax reports — is simply its position in the walk below.
// Three schedules, chosen from the shape only (never from the thread count, so
// that a result does not change with the machine):
//  - "inner": each output reduces its own slice; threads split the outputs.
//    Runs along the innermost reduced dim use several accumulators so the
//    compiler can vectorize without reassociating one sum.
//  - "outer": the innermost kept dim is contiguous and the reduced dims are not
//    (sum over dim 0 of a row-major matrix). A block of neighbouring outputs is
//    accumulated together, so the innermost loop runs along contiguous memory.
//  - "chunked": few outputs with long slices (a full reduction). Each slice is
//    cut into fixed-size chunks reduced in parallel; the partial results are
//    combined in chunk order.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_loops.hpp"
#include "ferry/kit/math/scalar_ops.hpp"

namespace ferry::cpu {
namespace {

constexpr std::int64_t kChunk = 1 << 15;  // elements per partial result ("chunked")
constexpr std::int64_t kOuterBlock = 64;  // outputs accumulated together ("outer")
constexpr int kLanes = 8;                 // independent accumulators in a contiguous run

template <typename T> constexpr bool kIsFloat = !std::is_integral_v<T>;  // f32, f16, bf16, f64

// ---- the operations: identity, a run, one step, combine, store ----

// Sum and product: double for the floating types (the contract asks for an
// obviously exact reference; f64 values enter it unrounded), wrapping 64-bit
// arithmetic for integers and bool.
template <typename T, bool kProd> struct SumProdOp {
  using acc_t = std::conditional_t<kIsFloat<T>, double, std::uint64_t>;
  using out_t = std::conditional_t<kIsFloat<T>, T, std::int64_t>;
  static acc_t identity() { return kProd ? 1 : 0; }
  static acc_t value(T v) {
    if constexpr (std::is_same_v<T, double>)
      return v;
    else if constexpr (kIsFloat<T>)
      return double(float(v));
    else
      return acc_t(std::int64_t(v));
  }
  static void fold(acc_t& a, acc_t b) {
    if constexpr (kProd)
      a *= b;
    else
      a += b;
  }
  static void step(acc_t& a, T v, std::int64_t) { fold(a, value(v)); }
  static void run(acc_t& a, const T* p, std::int64_t n, std::int64_t s, std::int64_t) {
    if (s == 1) {
      acc_t lane[kLanes];
      for (auto& l : lane) l = identity();
      std::int64_t i = 0;
      for (; i + kLanes <= n; i += kLanes)
        for (int j = 0; j < kLanes; ++j) fold(lane[j], value(p[i + j]));
      for (; i < n; ++i) fold(lane[0], value(p[i]));
      for (int j = 1; j < kLanes; j *= 2)
        for (int k = 0; k + j < kLanes; k += 2 * j) fold(lane[k], lane[k + j]);
      fold(a, lane[0]);
    } else {
      for (std::int64_t i = 0; i < n; ++i) fold(a, value(p[i * s]));
    }
  }
  static void combine(acc_t& a, const acc_t& b) { fold(a, b); }
  static out_t result(acc_t a) {
    if constexpr (std::is_same_v<T, double>)
      return a;
    else if constexpr (kIsFloat<T>)
      return out_t(float(a));
    else
      return out_t(a);  // modular, like PyTorch's int64 sum and prod
  }
};
template <typename T> using SumOp = SumProdOp<T, false>;
template <typename T> using ProdOp = SumProdOp<T, true>;

// Max (kMax) or min: NaN propagates — once a NaN is seen the result stays NaN.
template <typename T, bool kMax> struct ExtremumOp {
  using C = compute_t<T>;
  using acc_t = C;
  using out_t = T;
  static acc_t identity() {
    if constexpr (kIsFloat<T>)
      return kMax ? -INFINITY : INFINITY;
    else if constexpr (std::is_same_v<T, bool>)
      return !kMax;
    else
      return kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  // `v` replaces `a` when it is better, or NaN (a NaN `a` is never replaced:
  // no comparison with it is true).
  static bool better(C v, C a) {
    if constexpr (kIsFloat<T>)
      return (kMax ? v > a : v < a) || v != v;
    else
      return kMax ? v > a : v < a;
  }
  static void step(acc_t& a, T v, std::int64_t) {
    C c = C(v);
    a = better(c, a) ? c : a;
  }
  static void run(acc_t& a, const T* p, std::int64_t n, std::int64_t s, std::int64_t) {
    if (s == 1) {
      // NaN is tracked in its own lanes so that the comparison loop stays a
      // plain max/min the compiler vectorizes.
      acc_t lane[kLanes];
      std::int32_t nan[kLanes] = {};
      for (auto& l : lane) l = identity();
      std::int64_t i = 0;
      for (; i + kLanes <= n; i += kLanes)
        for (int j = 0; j < kLanes; ++j) {
          C c = C(p[i + j]);
          lane[j] = (kMax ? c > lane[j] : c < lane[j]) ? c : lane[j];
          if constexpr (kIsFloat<T>) nan[j] |= std::int32_t(c != c);
        }
      for (; i < n; ++i) step(a, p[i], 0);
      for (int j = 0; j < kLanes; ++j) {
        combine(a, lane[j]);
        if constexpr (kIsFloat<T>)
          if (nan[j]) a = std::numeric_limits<C>::quiet_NaN();
      }
    } else {
      for (std::int64_t i = 0; i < n; ++i) step(a, p[i * s], 0);
    }
  }
  static void combine(acc_t& a, const acc_t& b) { a = better(b, a) ? b : a; }
  static out_t result(acc_t a) { return out_t(a); }
};

// Argmax: the first maximum; NaN counts as the maximum, so the first NaN wins.
template <typename T> struct ArgmaxOp {
  using C = compute_t<T>;
  struct acc_t {
    C value;
    std::int64_t index;  // -1: nothing seen yet
  };
  using out_t = std::int64_t;
  static acc_t identity() { return {C(0), -1}; }
  // Strictly better, so that an equal later element never displaces an earlier one.
  static bool better(C v, C a) {
    if constexpr (kIsFloat<T>)
      return v > a || (v != v && a == a);
    else
      return v > a;
  }
  static void step(acc_t& a, T v, std::int64_t r) {
    C c = C(v);
    if (a.index < 0 || better(c, a.value)) a = {c, r};
  }
  static void run(acc_t& a, const T* p, std::int64_t n, std::int64_t s, std::int64_t r) {
    for (std::int64_t i = 0; i < n; ++i) step(a, p[i * s], r + i);
  }
  // `b` covers later elements than `a`.
  static void combine(acc_t& a, const acc_t& b) {
    if (b.index >= 0 && (a.index < 0 || better(b.value, a.value))) a = b;
  }
  static out_t result(acc_t a) { return a.index; }
};

// ---- geometry ----

struct Dims {
  std::vector<std::int64_t> sizes, strides;  // collapsed, outermost first
  std::int64_t numel = 1;
};

// Drops size-1 dims and merges neighbours that are contiguous in memory.
Dims collapse(const std::int64_t* sizes, const std::int64_t* strides, int n) {
  Dims d;
  for (int i = 0; i < n; ++i) {
    d.numel *= sizes[i];
    if (sizes[i] == 1) continue;
    if (!d.sizes.empty() && d.strides.back() == strides[i] * sizes[i]) {
      d.sizes.back() *= sizes[i];
      d.strides.back() = strides[i];
    } else {
      d.sizes.push_back(sizes[i]);
      d.strides.push_back(strides[i]);
    }
  }
  return d;
}

// The element offset of linear index `i` within `d`.
std::int64_t offset_of(const Dims& d, std::int64_t i) {
  std::int64_t off = 0;
  for (std::size_t k = d.sizes.size(); k-- > 0;) {
    off += (i % d.sizes[k]) * d.strides[k];
    i /= d.sizes[k];
  }
  return off;
}

// Calls fn(p, n, stride, r) for the runs along the innermost dim of `d`
// covering linear indices [begin, end); `r` is the linear index of p[0].
template <typename T, typename Fn>
void walk(const T* base, const Dims& d, std::int64_t begin, std::int64_t end, const Fn& fn) {
  if (begin >= end) return;
  if (d.sizes.empty()) {  // one element
    fn(base, std::int64_t(1), std::int64_t(1), std::int64_t(0));
    return;
  }
  if (d.sizes.size() == 1) {  // the common case after collapsing: one run
    fn(base + begin * d.strides[0], end - begin, d.strides[0], begin);
    return;
  }
  const std::size_t nd = d.sizes.size();
  const std::int64_t inner = d.sizes[nd - 1];
  std::vector<std::int64_t> idx(nd);
  std::int64_t rem = begin;
  for (std::size_t k = nd; k-- > 0;) {
    idx[k] = rem % d.sizes[k];
    rem /= d.sizes[k];
  }
  while (begin < end) {
    std::int64_t off = 0;
    for (std::size_t k = 0; k < nd; ++k) off += idx[k] * d.strides[k];
    std::int64_t n = std::min(inner - idx[nd - 1], end - begin);
    fn(base + off, n, d.strides[nd - 1], begin);
    begin += n;
    idx[nd - 1] += n;
    for (std::size_t k = nd - 1; k > 0 && idx[k] == d.sizes[k]; --k) {
      idx[k] = 0;
      ++idx[k - 1];
    }
  }
}

// Splits [0, tasks) over threads, each task costing about `work` elements.
template <typename Body>
void parallel_tasks(std::int64_t tasks, std::int64_t work, const Body& body) {
  parallel_range(tasks, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(work, 1)),
                 body);
}

template <typename T, typename Op> void reduce(const OpCall& call) {
  using acc_t = typename Op::acc_t;
  using out_t = typename Op::out_t;
  const TensorArg& in = call.inputs.at(0);
  const TensorArg& out = call.outputs.at(0);
  const int reduce_ndim = int(call.attrs.i("reduce_ndim"));
  const int keep_ndim = in.ndim() - reduce_ndim;
  if (reduce_ndim < 0 || keep_ndim < 0)
    throw ShapeError(std::string(call.name()) + ": reduce_ndim is out of range for the input");
  const Dims kept = collapse(in.sizes.data(), in.strides.data(), keep_ndim);
  if (out.numel() != kept.numel)
    throw ShapeError(std::string(call.name()) +
                     ": the output does not match the input's kept dims");
  const Dims red =
      collapse(in.sizes.data() + keep_ndim, in.strides.data() + keep_ndim, reduce_ndim);
  const T* x = in.data<T>();
  out_t* y = out.data<out_t>();
  const std::int64_t n_out = kept.numel, n_red = red.numel;
  if (n_out == 0) return;

  auto reduce_slice = [&](const T* base, std::int64_t begin, std::int64_t end) {
    acc_t acc = Op::identity();
    walk(base, red, begin, end, [&](const T* p, std::int64_t n, std::int64_t s, std::int64_t r) {
      Op::run(acc, p, n, s, r);
    });
    return acc;
  };

  const bool outer = !kept.sizes.empty() && kept.strides.back() == 1 && kept.sizes.back() >= 8 &&
                     !red.sizes.empty() && red.strides.back() != 1;
  if (outer) {
    const std::int64_t inner = kept.sizes.back();
    const std::int64_t blocks_per_row = (inner + kOuterBlock - 1) / kOuterBlock;
    const std::int64_t rows = n_out / inner;
    parallel_tasks(rows * blocks_per_row, kOuterBlock * n_red, [&](std::int64_t b, std::int64_t e) {
      acc_t acc[kOuterBlock];
      for (std::int64_t task = b; task < e; ++task) {
        const std::int64_t row = task / blocks_per_row;
        const std::int64_t j0 = (task % blocks_per_row) * kOuterBlock;
        const std::int64_t w = std::min(kOuterBlock, inner - j0);
        const std::int64_t o0 = row * inner + j0;  // first output of the block
        for (std::int64_t j = 0; j < w; ++j) acc[j] = Op::identity();
        walk(x + offset_of(kept, o0), red, 0, n_red,
             [&](const T* p, std::int64_t n, std::int64_t s, std::int64_t r) {
               for (std::int64_t i = 0; i < n; ++i) {
                 const T* q = p + i * s;
                 for (std::int64_t j = 0; j < w; ++j) Op::step(acc[j], q[j], r + i);
               }
             });
        for (std::int64_t j = 0; j < w; ++j) y[o0 + j] = Op::result(acc[j]);
      }
    });
  } else if (n_out < 16 && n_red >= 2 * kChunk) {
    const std::int64_t chunks = (n_red + kChunk - 1) / kChunk;
    std::vector<acc_t> partial(static_cast<std::size_t>(chunks));
    for (std::int64_t o = 0; o < n_out; ++o) {
      const T* base = x + offset_of(kept, o);
      parallel_range(chunks, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t c = b; c < e; ++c)
          partial[std::size_t(c)] =
              reduce_slice(base, c * kChunk, std::min(n_red, (c + 1) * kChunk));
      });
      acc_t acc = partial[0];
      for (std::int64_t c = 1; c < chunks; ++c) Op::combine(acc, partial[std::size_t(c)]);
      y[o] = Op::result(acc);
    }
  } else {
    parallel_tasks(n_out, n_red, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t o = b; o < e; ++o)
        y[o] = Op::result(reduce_slice(x + offset_of(kept, o), 0, n_red));
    });
  }
}

}  // namespace

void add_reduce_kernels(KernelTable& table) {
  table.emplace_back(OpId::sum, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_ALL(c.inputs.at(0).dtype, "sum", reduce<scalar_t, SumOp<scalar_t>>(c));
  });
  table.emplace_back(OpId::prod, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_ALL(c.inputs.at(0).dtype, "prod", reduce<scalar_t, ProdOp<scalar_t>>(c));
  });
  table.emplace_back(OpId::max, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_ALL(c.inputs.at(0).dtype, "max",
                       reduce<scalar_t, ExtremumOp<scalar_t, true>>(c));
  });
  table.emplace_back(OpId::min, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_ALL(c.inputs.at(0).dtype, "min",
                       reduce<scalar_t, ExtremumOp<scalar_t, false>>(c));
  });
  table.emplace_back(OpId::argmax, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_ALL(c.inputs.at(0).dtype, "argmax", reduce<scalar_t, ArgmaxOp<scalar_t>>(c));
  });
}

}  // namespace ferry::cpu
