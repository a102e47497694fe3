// runtime/cpu/cpu_kernels_scatter.cpp — scatter_reduce on the CPU, in both of
// the forms a scatter_in_order device takes (docs/kernel-contract.md,
// "scatter_reduce"): linear targets in the sources' order, or the index form
// (values and index of one shape, and `dim`), which finds each target itself.
//
// Note [CPU scatter_reduce]
// One writer per target and each target's values folded in the sources'
// order: the order of the stably sorted runs the GPU kernels fold, so every
// device agrees exactly, without the sort. Threads own disjoint sets of
// targets:
//  - targets form: a range of targets each; every thread reads all sources
//    and folds those landing in its range.
//  - index form: a target keeps every coordinate of its source but the one
//    along dim, so the sources of one "column" (all coordinates but dim's
//    fixed) land only on that column's targets. Threads split the columns and
//    read only their own sources: one pass over index and values in all, with
//    the range check of each index in the same pass.
// Floats fold in their compute type (float, double for f64) and integers in
// wrapping 64 bits, as the GPU kernels do; where that is T itself and the
// target's own value starts the fold, it goes straight into the output.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_loops.hpp"
#include "ferry/kit/math/scalar_ops.hpp"
#include "ferry/kit/scatter_fold.hpp"

namespace ferry::cpu {
namespace {

using Fold = ScatterFold;

template <typename T> constexpr bool kIsFloat = !std::is_integral_v<T>;
template <typename T> using fold_t = std::conditional_t<kIsFloat<T>, compute_t<T>, std::int64_t>;

// Calls body(combine) with the fold as a functor, chosen once (the loops are the whole cost).
template <typename T, typename Body> void with_combine(Fold fold, const Body& body) {
  using C = fold_t<T>;
  switch (fold) {
    case Fold::prod:
      return body([](C a, C b) -> C {
        if constexpr (kIsFloat<T>)
          return a * b;
        else
          return C(std::uint64_t(a) * std::uint64_t(b));
      });
    case Fold::amax:
      return body([](C a, C b) -> C { return math::maximum(a, b); });
    case Fold::amin:
      return body([](C a, C b) -> C { return math::minimum(a, b); });
    case Fold::assign:
      return body([](C, C b) -> C { return b; });
    default:
      return body([](C a, C b) -> C {
        if constexpr (kIsFloat<T>)
          return a + b;
        else
          return C(std::uint64_t(a) + std::uint64_t(b));
      });
  }
}

// The fold of one thread's set of targets, numbered locally by slot.
// visit_sources(visit) calls visit(target, slot, value) for each of the set's
// sources in the sources' order; target_of(slot) names a slot's target.
// `hits` (and `acc`, unless the fold is direct) hold at least as many entries
// as there are slots, hits all 0; run leaves them so, touching only the slots
// hit, so that a thread reuses them across many small sets.
template <typename T> struct SlotFold {
  using C = fold_t<T>;
  Fold fold;
  bool self;  // the target's value starts its fold
  T* y;

  // Straight into y where the fold's type is T and nothing is left for the end (mean divides).
  bool direct() const { return std::is_same_v<C, T> && fold != Fold::mean; }

  struct Scratch {
    std::vector<C> acc;
    std::vector<std::int64_t> hits, touched;
    void reserve(bool direct, std::int64_t slots) {
      if (std::int64_t(hits.size()) < slots) hits.resize(std::size_t(slots), 0);
      if (!direct && std::int64_t(acc.size()) < slots) acc.resize(std::size_t(slots));
    }
  };

  template <typename Combine, typename Visit, typename TargetOf>
  void run(const Combine& combine, const Visit& visit_sources, const TargetOf& target_of,
           Scratch& sc) const {
    const bool dir = direct();
    if (dir && self) {  // no state: each value folds into its target at once
      T* const out = y;
      visit_sources([out, &combine](std::int64_t target, std::int64_t, T v) {
        out[target] = T(combine(C(out[target]), C(v)));
      });
      return;
    }
    sc.touched.clear();
    visit_sources([&](std::int64_t target, std::int64_t slot, T v) {
      const bool first = sc.hits[std::size_t(slot)]++ == 0;
      if (first) sc.touched.push_back(slot);
      C* a;
      if constexpr (std::is_same_v<C, T>)
        a = dir ? y + target : &sc.acc[std::size_t(slot)];
      else
        a = &sc.acc[std::size_t(slot)];
      *a = first ? (self ? combine(C(y[target]), C(v)) : C(v)) : combine(*a, C(v));
    });
    for (const std::int64_t s : sc.touched) {
      const std::int64_t n = sc.hits[std::size_t(s)];
      sc.hits[std::size_t(s)] = 0;
      if (dir) continue;
      C a = sc.acc[std::size_t(s)];
      if (fold == Fold::mean) {
        const std::int64_t count = n + (self ? 1 : 0);
        if constexpr (kIsFloat<T>) {
          a = a / C(count);
        } else {
          const std::int64_t q = a / count;  // floor division, as PyTorch's integer mean
          a = (a % count != 0 && a < 0) ? q - 1 : q;
        }
      }
      y[target_of(s)] = T(a);  // slots no source names keep their value
    }
  }
};

template <typename T> SlotFold<T> slot_fold(const OpCall& call) {
  const Fold fold = scatter_fold_of(call.attrs.s("reduce"));
  return {fold, call.attrs.b("include_self") && fold != Fold::assign, call.outputs.at(0).data<T>()};
}

// Targets form: values and i64 targets, 1-D, into a 1-D output.
template <typename T> void scatter_targets_form(const OpCall& call) {
  const TensorArg &src = call.inputs.at(0), &tgt = call.inputs.at(1), &out = call.outputs.at(0);
  if (src.ndim() != 1 || tgt.ndim() != 1 || out.ndim() != 1 || tgt.dtype != DType::i64 ||
      src.sizes[0] != tgt.sizes[0])
    throw ShapeError("scatter_reduce: the cpu kernel expects 1-D values, i64 targets and output");
  const SlotFold<T> f = slot_fold<T>(call);
  const std::int64_t m = src.sizes[0], n_out = out.sizes[0];
  const T* v = src.data<T>();
  const std::int64_t* t = tgt.data<std::int64_t>();
  auto fold_range = [&](std::int64_t b, std::int64_t e) {
    typename SlotFold<T>::Scratch sc;
    sc.reserve(f.direct(), e - b);
    with_combine<T>(f.fold, [&](const auto& combine) {
      f.run(
          combine,
          [&](const auto& visit) {
            for (std::int64_t i = 0; i < m; ++i)
              if (t[i] >= b && t[i] < e) visit(t[i], t[i] - b, v[i]);
          },
          [b](std::int64_t s) { return b + s; }, sc);
    });
  };
  if (m < kParallelGrain)
    fold_range(0, n_out);
  else
    parallel_range(n_out, 1, fold_range);
}

// Index form: values and i64 index contiguous of one shape, the output contiguous with as many
// dims, attribute dim. Viewed as [outer, len, inner] around dim; a column is one (outer, inner)
// pair, and a block of neighbouring inner positions of one outer row is folded together, so the
// innermost loop runs along contiguous memory.
template <typename T> void scatter_index_form(const OpCall& call) {
  const TensorArg &src = call.inputs.at(0), &index = call.inputs.at(1), &out = call.outputs.at(0);
  const std::int64_t d = call.attrs.i("dim"), nd = index.ndim();
  if (index.dtype != DType::i64 || src.sizes != index.sizes || out.ndim() != nd || d < 0 || d >= nd)
    throw ShapeError(
        "scatter_reduce: the cpu kernel's index form expects values and an i64 index of one "
        "shape, an output with as many dims, and dim among them");
  const SlotFold<T> f = slot_fold<T>(call);
  const Shape& is = index.sizes;
  const Shape& ostride = out.strides;  // in elements
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t j = 0; j < d; ++j) outer *= is[std::size_t(j)];
  for (std::int64_t j = d + 1; j < nd; ++j) inner *= is[std::size_t(j)];
  const std::int64_t len = is[std::size_t(d)], size = out.sizes[std::size_t(d)];
  const std::int64_t dstride = ostride[std::size_t(d)];
  if (outer * len * inner == 0) return;
  // The output offset of index coordinates [from, to) of the linear position p over them.
  auto offset_of = [&](std::int64_t p, std::int64_t from, std::int64_t to) {
    std::int64_t off = 0;
    for (std::int64_t j = to; j-- > from;) {
      off += (p % is[std::size_t(j)]) * ostride[std::size_t(j)];
      p /= is[std::size_t(j)];
    }
    return off;
  };
  const T* v = src.data<T>();
  const std::int64_t* ix = index.data<std::int64_t>();
  // Slots per block: each inner position of the block owns `size` of them.
  // (A dim of size 0 takes no index: every one is out of range, flagged below.)
  const std::int64_t block =
      size == 0 ? 1 : std::clamp<std::int64_t>((std::int64_t(1) << 16) / size, 1, 1024);
  std::atomic<bool> out_of_range{false};
  auto fold_columns = [&](std::int64_t b, std::int64_t e) {
    typename SlotFold<T>::Scratch sc;
    std::vector<std::int64_t> qoff;
    bool bad = false;
    with_combine<T>(f.fold, [&](const auto& combine) {
      for (std::int64_t c = b; c < e;) {
        const std::int64_t o = c / inner, qb = c % inner;
        const std::int64_t qe = std::min({inner, qb + block, qb + (e - c)}), w = qe - qb;
        const std::int64_t base = offset_of(o, 0, d);
        qoff.resize(std::size_t(w));
        sc.reserve(f.direct(), size * w);
        for (std::int64_t q = qb; q < qe; ++q) qoff[std::size_t(q - qb)] = offset_of(q, d + 1, nd);
        f.run(
            combine,
            [&](const auto& visit) {
              const T* __restrict vals = v + o * len * inner + qb;
              const std::int64_t* __restrict idx = ix + o * len * inner + qb;
              const std::int64_t* __restrict qo = qoff.data();
              const std::int64_t at = base, step = dstride, n = size;
              if (w == 1) {  // one column (dim last, or a long dim): a flat loop along it
                const std::int64_t column = at + qo[0];
                for (std::int64_t k = 0, p = 0; k < len; ++k, p += inner) {
                  const std::int64_t i = idx[p];
                  if (std::uint64_t(i) >= std::uint64_t(n)) {
                    bad = true;
                    continue;
                  }
                  visit(column + i * step, i, vals[p]);
                }
                return;
              }
              for (std::int64_t k = 0; k < len; ++k) {
                const std::int64_t row = k * inner;
                for (std::int64_t q = 0; q < w; ++q) {
                  const std::int64_t i = idx[row + q];
                  if (std::uint64_t(i) >= std::uint64_t(n)) {
                    bad = true;
                    continue;
                  }
                  visit(at + i * step + qo[q], i * w + q, vals[row + q]);
                }
              }
            },
            [&](std::int64_t s) { return base + (s / w) * dstride + qoff[std::size_t(s % w)]; },
            sc);
        c += w;
      }
    });
    if (bad) out_of_range = true;
  };
  const std::int64_t columns = outer * inner;
  parallel_range(columns, std::max<std::int64_t>(1, kParallelGrain / len), fold_columns);
  if (out_of_range)
    throw ShapeError(fmt::format(
        "scatter_reduce: an index is out of range for dim {} of size {} (valid indices are 0 to "
        "{}); the output is left unspecified",
        d, size, size - 1));
}

}  // namespace

void add_scatter_kernels(KernelTable& table) {
  table.emplace_back(OpId::scatter_reduce, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_ALL(c.inputs.at(0).dtype, "scatter_reduce", {
      if (c.attrs.has("dim"))
        scatter_index_form<scalar_t>(c);
      else
        scatter_targets_form<scalar_t>(c);
    });
  });
}

}  // namespace ferry::cpu
