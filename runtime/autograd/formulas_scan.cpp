// runtime/autograd/formulas_scan.cpp — backward of prod, cumsum, cumprod,
// cummax and cummin (formulas.hpp): the formulas made of scans. Each is
// written with differentiable ops, so gradients of gradients work too
// (cummax and cummin's scatter aside).
#include <numeric>

#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "dispatch.hpp"
#include "ferry/ops.hpp"

namespace ferry::autograd {
namespace {

// sum_{k >= i} g_k along dim.
Tensor reversed_cumsum(const Tensor& g, std::int64_t dim) {
  return flip(cumsum(flip(g, {dim}), dim), {dim});
}

// Note [cumprod backward]
// d y_k / d x_i = prod_{j <= k, j != i} x_j for k >= i. Before a slice's
// first zero (at z) that is y_k / x_i, so grad_i = sum_{k >= i} g_k y_k / x_i
// (the terms for k >= z are 0 as y_k is). At z itself it is the running
// product with x_z left out: grad_z = sum_{k >= z} g_k cumprod(x with x_z =
// 1)_k. After z every product holds x_z = 0. PyTorch's formula, without its
// branch on whether x has a zero (which would read x back to the host).
Tensor cumprod_backward(const Tensor& x, const Tensor& y, const Tensor& g, std::int64_t dim) {
  if (x.dim() == 0 || x.size(dim) <= 1) return g;
  Tensor is_zero = eq(x, 0);
  Tensor zeros_so_far = cumsum(is_zero, dim);
  Tensor before = eq(zeros_so_far, 0);
  Tensor first_zero = logical_and(is_zero, eq(zeros_so_far, 1));
  Tensor before_term = reversed_cumsum(g * y, dim) / where(before, x, Scalar(1));
  Tensor zero_term = reversed_cumsum(g * cumprod(where(first_zero, Scalar(1), x), dim), dim);
  return where(before, before_term, where(first_zero, zero_term, Scalar(0)));
}

}  // namespace

void record_cumsum(const Tensor& x, std::int64_t dim, const Tensor& out) {
  if (!should_record({&x})) return;
  record("cumsumBackward", {x}, out, [dim](const Tensor& g, const Needs&) -> std::vector<Tensor> {
    return {g.dim() == 0 ? g : reversed_cumsum(g, dim)};
  });
}

void record_cumprod(const Tensor& x, std::int64_t dim, const Tensor& out) {
  if (!should_record({&x})) return;
  record("cumprodBackward", {x}, out,
         [x = Saved(x), y = Saved(out), dim](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {cumprod_backward(x.get(), y.get(), g, dim)};
         });
}

// Each output took its value from x at `indices`: the gradient goes back there.
void record_cum_extremum(std::string_view op, const Tensor& x, std::int64_t dim,
                         const Tensor& indices, const Tensor& values) {
  if (!should_record({&x})) return;
  record(std::string(op) + "Backward", {x}, values,
         [shape = x.sizes(), idx = Saved(indices), dim](const Tensor& g,
                                                        const Needs&) -> std::vector<Tensor> {
           if (g.dim() == 0) return {g};
           return {detail::scatter_add(shape, dim, idx.get(), g)};
         });
}

// The product of the others, for each element of a reduced slice: the
// slices are laid out as rows (kept dims first, reduced dims flattened last)
// and each element gets the running products before it and after it.
void record_prod(const Tensor& x, const std::vector<std::int64_t>& dims, bool, const Tensor& out) {
  if (!should_record({&x})) return;
  record("prodBackward", {x}, out,
         [x = Saved(x), dims](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           Tensor xv = x.get();
           const std::int64_t nd = xv.dim();
           std::vector<bool> reduced(std::size_t(nd), dims.empty());
           for (std::int64_t d : dims)
             if (nd > 0) reduced[std::size_t(detail::wrap_dim(d, nd, "prod"))] = true;
           Shape order, rows_shape, keep_shape = xv.sizes();
           for (std::int64_t d = 0; d < nd; ++d)
             if (!reduced[std::size_t(d)]) {
               order.push_back(d);
               rows_shape.push_back(xv.size(d));
             }
           std::int64_t count = 1;
           for (std::int64_t d = 0; d < nd; ++d)
             if (reduced[std::size_t(d)]) {
               order.push_back(d);
               count *= xv.size(d);
               keep_shape[std::size_t(d)] = 1;
             }
           if (count == 0) return {zeros_like(xv)};
           Tensor permuted = xv.permute(order);
           const Shape permuted_shape = permuted.sizes();
           rows_shape.push_back(count);
           Tensor rows = permuted.reshape(rows_shape);
           const std::int64_t last = std::int64_t(rows_shape.size()) - 1;
           // Exclusive running products from the left and from the right.
           Tensor left = pad(cumprod(rows, last).narrow(last, 0, count - 1), {1, 0}, "constant", 1);
           Tensor right = flip(pad(cumprod(flip(rows, {last}), last).narrow(last, 0, count - 1),
                                   {1, 0}, "constant", 1),
                               {last});
           Shape g_rows = rows_shape;
           g_rows.back() = 1;
           // g holds the kept dims in order, with or without keepdim's 1s.
           Tensor grad_rows = g.reshape(g_rows) * (left * right);
           Shape inverse(order.size());
           for (std::size_t i = 0; i < order.size(); ++i)
             inverse[std::size_t(order[i])] = std::int64_t(i);
           return {grad_rows.reshape(permuted_shape).permute(inverse)};
         });
}

}  // namespace ferry::autograd
