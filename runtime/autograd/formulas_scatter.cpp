// runtime/autograd/formulas_scatter.cpp — backward of scatter, scatter_reduce
// and index_put (formulas.hpp), PyTorch's formulas: each source gets the
// gradient of the position it went to (gathered back), x the gradient of its
// positions, both weighted by how the reduction used them.
#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "dispatch.hpp"
#include "ferry/ops.hpp"

namespace ferry::autograd {
namespace {

struct ScatterGrads {
  Tensor x, src;
};

// out = x scattered at (d, idx) from src with `reduce`; g the gradient of out.
ScatterGrads scatter_backward(const Tensor& x, std::int64_t d, const Tensor& idx, const Tensor& src,
                              const Tensor& out, const Tensor& g, std::string_view reduce,
                              bool include_self) {
  const Tensor ones_src = ones(src.sizes(), {.dtype = g.dtype(), .device = g.device()});
  Tensor count = detail::scatter_add(x.sizes(), d, idx, ones_src);  // sources per position
  Tensor hit = gt(count, 0);
  Tensor untouched = where(hit, Scalar(0), g);
  if (reduce == "sum") return {include_self ? g : untouched, gather(g, d, idx)};
  if (reduce == "assign") return {untouched, gather(g, d, idx)};
  if (reduce == "mean") {
    Tensor n = include_self ? count + 1 : clamp(count, Scalar(1), std::nullopt);
    Tensor gn = g / n;
    return {include_self ? gn : untouched, gather(gn, d, idx)};
  }
  if (reduce == "amax" || reduce == "amin") {
    // Shared evenly by x's value (with include_self) and every source equal to the result.
    Tensor src_eq = eq(src, gather(out, d, idx));
    Tensor self_eq = include_self ? eq(x, out) : zeros_like(hit);
    Tensor n = detail::scatter_add(x.sizes(), d, idx, src_eq.to(g.dtype())) + self_eq.to(g.dtype());
    Tensor gn = g / clamp(n, Scalar(1), std::nullopt);
    return {where(hit, where(self_eq, gn, Scalar(0)), g),
            where(src_eq, gather(gn, d, idx), Scalar(0))};
  }
  // prod: d out / d x = the product of the others, with zeros handled as
  // PyTorch does: x's zeros replaced by 1 give x's gradient; a source that is
  // its position's only zero gets the product with itself replaced by 1;
  // sources with a second zero beside them get 0.
  Tensor x_nz = where(eq(x, 0), Scalar(1), x);
  Tensor gx = include_self ? where(hit, g * scatter_reduce(x_nz, d, idx, src, "prod") / x_nz, g)
                           : untouched;
  Tensor src_zero = eq(src, 0);
  Tensor zeros_at = gather(detail::scatter_add(x.sizes(), d, idx, src_zero.to(g.dtype())), d, idx);
  Tensor single_zero = logical_and(src_zero, eq(zeros_at, 1));
  Tensor with_one =
      scatter_reduce(x, d, idx, where(single_zero, Scalar(1), src), "prod", include_self);
  Tensor gs = where(single_zero, gather(g * with_one, d, idx),
                    gather(g * out, d, idx) / where(src_zero, Scalar(1), src));
  return {gx, where(logical_and(src_zero, gt(zeros_at, 1)), Scalar(0), gs)};
}

}  // namespace

void record_scatter_reduce(const Tensor& x, std::int64_t d, const Tensor& index, const Tensor& src,
                           std::string_view reduce, bool include_self, const Tensor& out) {
  if (!should_record({&x, &src})) return;
  record(reduce == "assign" ? "scatterBackward" : "scatter_reduceBackward", {x, src}, out,
         [x = Saved(x), idx = Saved(index), s = Saved(src), y = Saved(out), d,
          reduce = std::string(reduce),
          include_self](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           const Tensor xv = x.get();
           const bool zero_dim = xv.dim() == 0;
           auto flat = [&](const Tensor& t) { return zero_dim ? t.reshape({1}) : t; };
           ScatterGrads r = scatter_backward(flat(xv), d, idx.get(), s.get(), flat(y.get()),
                                             flat(g), reduce, include_self);
           return {r.x.reshape(xv.sizes()), r.src};
         });
}

void record_index_put(const Tensor& x, const Tensor& targets, const Tensor& values,
                      std::string_view reduce, const Tensor& out) {
  if (!should_record({&x, &values})) return;
  record("index_putBackward", {x, values}, out,
         [x = Saved(x), t = Saved(targets), v = Saved(values), y = Saved(out),
          reduce = std::string(reduce)](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           const Tensor xv = x.get(), vv = v.get();
           ScatterGrads r =
               scatter_backward(xv.reshape({-1}), 0, t.get().reshape({-1}), vv.reshape({-1}),
                                y.get().reshape({-1}), g.reshape({-1}), reduce, reduce == "sum");
           return {r.x.reshape(xv.sizes()), r.src.reshape(vv.sizes())};
         });
}

}  // namespace ferry::autograd
