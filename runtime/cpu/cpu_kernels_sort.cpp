// runtime/cpu/cpu_kernels_sort.cpp — the scans (cumsum, cumprod, cummax,
// cummin), the stable sort and the fused topk on the CPU
// (docs/kernel-contract.md, "Scans", "Sort" and "topk").
//
// Note [CPU scans]
// x arrives contiguous as [outer, n, inner]; each of the outer * inner lines
// is scanned along n. With inner > 1 a block of neighbouring lines advances
// together, so the innermost loop runs along contiguous memory. A single
// long line (inner = 1, few lines) is cut into fixed-size chunks: each
// chunk's total in parallel, then the totals' running prefix, then each chunk
// rescanned from its prefix, in parallel again. The chunk size is a constant,
// so the result never depends on the thread count. Floating sums and
// products accumulate in double (PyTorch's CPU accumulates these in double
// too), integers in wrapping 64-bit arithmetic.
//
// Note [CPU sort]
// Each row becomes (key, position) records whose key is an unsigned integer
// ordered as the values are: float bits with the sign folded (negative
// values inverted), -0 made +0 and NaN the largest key; integers with the
// sign bit flipped; descending inverts the key. An LSD radix sort of the
// records by key, stable, keeps equal keys in position order, which is the
// stable sort; short rows use std::sort with the position as tie-break,
// which orders them the same. The values are then read back from x at the
// sorted positions (the key has lost -0's sign and NaN's payload).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
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

constexpr std::int64_t kScanChunk = 1 << 16;  // elements per chunk of a long line
constexpr std::int64_t kScanBlock = 64;       // neighbouring lines scanned together
constexpr std::int64_t kRadixMin = 256;       // shorter rows use std::sort

template <typename T> constexpr bool kIsFloat = !std::is_integral_v<T>;

// ---- scans: a state, one step, and the combine of an earlier and a later state ----

template <typename T, bool kProd> struct CumSumProd {
  using acc_t = std::conditional_t<kIsFloat<T>, double, std::uint64_t>;
  using out_t = std::conditional_t<kIsFloat<T>, T, std::int64_t>;
  struct State {
    acc_t acc;
  };
  static State identity() { return {acc_t(kProd ? 1 : 0)}; }
  static acc_t value(T v) {
    if constexpr (std::is_same_v<T, double>)
      return v;
    else if constexpr (kIsFloat<T>)
      return double(float(v));
    else
      return acc_t(std::int64_t(v));
  }
  static void step(State& s, T v, std::int64_t) {
    if constexpr (kProd)
      s.acc *= value(v);
    else
      s.acc += value(v);
  }
  static State combine(State a, State b) {
    return {kProd ? acc_t(a.acc * b.acc) : acc_t(a.acc + b.acc)};
  }
  static void write(const State& s, out_t* y, std::int64_t*, std::int64_t i) {
    if constexpr (std::is_same_v<T, double> || !kIsFloat<T>)
      y[i] = out_t(s.acc);
    else
      y[i] = out_t(float(s.acc));
  }
};

// Running max (kMax) or min with the position it was last seen at: a later
// equal value takes over, and once a NaN is seen only a later NaN does.
template <typename T, bool kMax> struct CumExtremum {
  using C = compute_t<T>;
  using out_t = T;
  struct State {
    C value;
    std::int64_t index;  // -1: nothing seen
  };
  static bool is_nan(C v) {
    if constexpr (kIsFloat<T>)
      return v != v;
    else
      return false;
  }
  // Whether `later` replaces `earlier`.
  static bool takes_over(C later, C earlier) {
    return is_nan(later) || (!is_nan(earlier) && (kMax ? later >= earlier : later <= earlier));
  }
  static State identity() { return {C(0), -1}; }
  static void step(State& s, T v, std::int64_t k) {
    const C c = C(v);
    if (s.index < 0 || takes_over(c, s.value)) s = {c, k};
  }
  static State combine(State a, State b) {
    return b.index >= 0 && (a.index < 0 || takes_over(b.value, a.value)) ? b : a;
  }
  static void write(const State& s, out_t* y, std::int64_t* idx, std::int64_t i) {
    y[i] = T(s.value);
    idx[i] = s.index;
  }
};

template <typename T, typename Op> void scan(const OpCall& call) {
  using State = typename Op::State;
  using out_t = typename Op::out_t;
  const TensorArg& in = call.inputs.at(0);
  if (in.ndim() != 3 || call.outputs.at(0).numel() != in.numel())
    throw ShapeError(std::string(call.name()) + ": the cpu kernel expects [outer, n, inner]");
  const std::int64_t outer = in.sizes[0], n = in.sizes[1], inner = in.sizes[2];
  const T* x = in.data<T>();
  out_t* y = call.outputs[0].data<out_t>();
  std::int64_t* idx = call.outputs.size() > 1 ? call.outputs[1].data<std::int64_t>() : nullptr;
  if (in.numel() == 0) return;

  if (inner > 1) {
    const std::int64_t blocks = (inner + kScanBlock - 1) / kScanBlock;
    parallel_range(outer * blocks, std::max<std::int64_t>(1, kParallelGrain / (kScanBlock * n)),
                   [&](std::int64_t b, std::int64_t e) {
                     State s[kScanBlock];
                     for (std::int64_t t = b; t < e; ++t) {
                       const std::int64_t o = t / blocks, j0 = (t % blocks) * kScanBlock;
                       const std::int64_t w = std::min(kScanBlock, inner - j0);
                       for (std::int64_t j = 0; j < w; ++j) s[j] = Op::identity();
                       for (std::int64_t k = 0; k < n; ++k) {
                         const std::int64_t base = (o * n + k) * inner + j0;
                         for (std::int64_t j = 0; j < w; ++j) {
                           Op::step(s[j], x[base + j], k);
                           Op::write(s[j], y, idx, base + j);
                         }
                       }
                     }
                   });
    return;
  }
  // Lines along contiguous memory: x + o * n.
  auto run = [&](std::int64_t o, std::int64_t begin, std::int64_t end, State s) {
    const std::int64_t base = o * n;
    for (std::int64_t k = begin; k < end; ++k) {
      Op::step(s, x[base + k], k);
      Op::write(s, y, idx, base + k);
    }
  };
  if (outer >= 4 || n < 2 * kScanChunk) {
    parallel_range(outer, std::max<std::int64_t>(1, kParallelGrain / n),
                   [&](std::int64_t b, std::int64_t e) {
                     for (std::int64_t o = b; o < e; ++o) run(o, 0, n, Op::identity());
                   });
    return;
  }
  const std::int64_t chunks = (n + kScanChunk - 1) / kScanChunk;
  std::vector<State> total(static_cast<std::size_t>(chunks));
  for (std::int64_t o = 0; o < outer; ++o) {
    parallel_range(chunks, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t c = b; c < e; ++c) {
        State s = Op::identity();
        const std::int64_t end = std::min(n, (c + 1) * kScanChunk);
        for (std::int64_t k = c * kScanChunk; k < end; ++k) Op::step(s, x[o * n + k], k);
        total[std::size_t(c)] = s;
      }
    });
    State prefix = Op::identity();  // becomes the state before chunk c
    for (auto& t : total) {
      const State next = Op::combine(prefix, t);
      t = prefix;
      prefix = next;
    }
    parallel_range(chunks, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t c = b; c < e; ++c)
        run(o, c * kScanChunk, std::min(n, (c + 1) * kScanChunk), total[std::size_t(c)]);
    });
  }
}

// ---- sort ----

template <typename T> using key_t =
    std::conditional_t<(sizeof(T) > 4), std::uint64_t, std::uint32_t>;

template <typename T> key_t<T> sort_key(T v, bool descending) {
  using K = key_t<T>;
  K k;
  if constexpr (kIsFloat<T>) {
    using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
    F f = F(v);
    if (f != f) {
      k = std::numeric_limits<K>::max();
    } else {
      if (f == 0) f = 0;  // -0 sorts as +0
      const K bits = std::bit_cast<K>(f);
      const K sign = K(1) << (sizeof(K) * 8 - 1);
      k = (bits & sign) ? K(~bits) : K(bits | sign);
    }
  } else if constexpr (std::is_signed_v<T>) {
    k = K(v) ^ (K(1) << (sizeof(K) * 8 - 1));
  } else {
    k = K(v);
  }
  return descending ? K(~k) : k;
}

template <typename K> struct Record {
  K key;
  std::uint32_t pos;
};

// Stable LSD radix sort of `a` by key, 8 bits a pass, `tmp` as large;
// passes where every key has the same byte are skipped.
template <typename K> void radix_sort(std::vector<Record<K>>& a, std::vector<Record<K>>& tmp) {
  const std::size_t n = a.size();
  tmp.resize(n);
  for (unsigned shift = 0; shift < sizeof(K) * 8; shift += 8) {
    std::size_t count[257] = {};
    for (const auto& r : a) ++count[((r.key >> shift) & 0xff) + 1];
    if (std::any_of(count + 1, count + 257, [&](std::size_t c) { return c == n; })) continue;
    for (int b = 0; b < 256; ++b) count[b + 1] += count[b];
    for (const auto& r : a) tmp[count[(r.key >> shift) & 0xff]++] = r;
    a.swap(tmp);
  }
}

template <typename T> void sort_rows(const OpCall& call) {
  using K = key_t<T>;
  const TensorArg& in = call.inputs.at(0);
  if (in.ndim() != 2) throw ShapeError("sort: the cpu kernel expects [rows, n]");
  const std::int64_t rows = in.sizes[0], n = in.sizes[1];
  if (n > std::int64_t(std::numeric_limits<std::uint32_t>::max()))
    throw UnsupportedError("sort: the cpu kernel sorts rows of < 2^32 elements");
  const bool descending = call.attrs.b("descending");
  const T* x = in.data<T>();
  T* y = call.outputs.at(0).data<T>();
  std::int64_t* idx = call.outputs.at(1).data<std::int64_t>();
  parallel_range(rows, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(n, 1)),
                 [&](std::int64_t b, std::int64_t e) {
                   std::vector<Record<K>> rec, tmp;
                   for (std::int64_t r = b; r < e; ++r) {
                     const T* xr = x + r * n;
                     rec.resize(std::size_t(n));
                     for (std::int64_t i = 0; i < n; ++i)
                       rec[std::size_t(i)] = {sort_key(xr[i], descending), std::uint32_t(i)};
                     if (n < kRadixMin)
                       std::sort(rec.begin(), rec.end(), [](const auto& p, const auto& q) {
                         return p.key < q.key || (p.key == q.key && p.pos < q.pos);
                       });
                     else
                       radix_sort(rec, tmp);
                     for (std::int64_t i = 0; i < n; ++i) {
                       const std::uint32_t p = rec[std::size_t(i)].pos;
                       y[r * n + i] = xr[p];
                       idx[r * n + i] = p;
                     }
                   }
                 });
}

// ---- topk: the first k of the stable sort, by selection ----

// topk's fused kernel (Note [Composite ops]): the k (key, position) records that the stable
// sort would put first (sort_key with descending = largest), kept in a max-heap while a row
// is read once, then sorted. A record enters only if it is below the heap's largest, so ties
// keep the lower position, as the stable sort does, and NaN counts as the largest value. A
// row costs its n keys, n comparisons with the heap's largest key and, for values in random
// order, about k ln(n / k) replacements of O(log k) each, against the sort's passes.
template <typename T> void topk_rows(const OpCall& call) {
  using K = key_t<T>;
  const TensorArg& in = call.inputs.at(0);
  if (in.ndim() != 2) throw ShapeError("topk: the cpu kernel expects [rows, n]");
  const std::int64_t rows = in.sizes[0], n = in.sizes[1], k = call.attrs.i("k");
  if (k < 0 || k > n || n > std::int64_t(std::numeric_limits<std::uint32_t>::max()))
    throw ShapeError(
        fmt::format("topk: the cpu kernel takes 0 <= k <= n < 2^32, got k = {}, n = {}", k, n));
  const bool largest = call.attrs.b("largest");
  const T* x = in.data<T>();
  T* y = call.outputs.at(0).data<T>();
  std::int64_t* idx = call.outputs.at(1).data<std::int64_t>();
  const auto before = [](const Record<K>& p, const Record<K>& q) {
    return p.key < q.key || (p.key == q.key && p.pos < q.pos);
  };
  parallel_range(rows, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(n, 1)),
                 [&](std::int64_t b, std::int64_t e) {
                   std::vector<K> keys(static_cast<std::size_t>(n));
                   std::vector<Record<K>> heap(static_cast<std::size_t>(k));
                   for (std::int64_t r = b; r < e; ++r) {
                     const T* xr = x + r * n;
                     for (std::int64_t i = 0; i < n; ++i)
                       keys[std::size_t(i)] = sort_key(xr[i], largest);
                     for (std::int64_t i = 0; i < k; ++i)
                       heap[std::size_t(i)] = {keys[std::size_t(i)], std::uint32_t(i)};
                     std::make_heap(heap.begin(), heap.end(), before);
                     // A later record goes before the heap's largest only with a smaller key: its
                     // position is larger than every position in the heap.
                     if (k > 0)
                       for (std::int64_t i = k; i < n; ++i) {
                         if (keys[std::size_t(i)] >= heap.front().key) continue;
                         std::pop_heap(heap.begin(), heap.end(), before);
                         heap.back() = {keys[std::size_t(i)], std::uint32_t(i)};
                         std::push_heap(heap.begin(), heap.end(), before);
                       }
                     std::sort_heap(heap.begin(), heap.end(), before);
                     for (std::int64_t i = 0; i < k; ++i) {
                       const std::uint32_t p = heap[std::size_t(i)].pos;
                       y[r * k + i] = xr[p];
                       idx[r * k + i] = p;
                     }
                   }
                 });
}

}  // namespace

void add_sort_kernels(KernelTable& table) {
  table.emplace_back(OpId::cumsum, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_ALL(c.inputs.at(0).dtype, "cumsum",
                       scan<scalar_t, CumSumProd<scalar_t, false>>(c));
  });
  table.emplace_back(OpId::cumprod, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_ALL(c.inputs.at(0).dtype, "cumprod",
                       scan<scalar_t, CumSumProd<scalar_t, true>>(c));
  });
  table.emplace_back(OpId::cummax, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_ALL(c.inputs.at(0).dtype, "cummax",
                       scan<scalar_t, CumExtremum<scalar_t, true>>(c));
  });
  table.emplace_back(OpId::cummin, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_ALL(c.inputs.at(0).dtype, "cummin",
                       scan<scalar_t, CumExtremum<scalar_t, false>>(c));
  });
  table.emplace_back(OpId::sort, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_ALL(c.inputs.at(0).dtype, "sort", sort_rows<scalar_t>(c));
  });
  table.emplace_back(OpId::topk, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_ALL(c.inputs.at(0).dtype, "topk", topk_rows<scalar_t>(c));
  });
}

}  // namespace ferry::cpu
