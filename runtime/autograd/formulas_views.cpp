// runtime/autograd/formulas_views.cpp — backward of views, contiguous() and
// clone() (formulas.hpp). A view's gradient is the output gradient put back
// into the input's layout: reshaped, permuted back, summed over expanded
// dims, or written into the viewed part of a zero tensor.
#include <fmt/format.h>

#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "ferry/ops.hpp"

namespace ferry::autograd {
namespace {

// A zero tensor of the input's shape whose `part` (a view of it) holds g.
template <typename Part> Tensor scatter_into_zeros(const Shape& shape, const Tensor& g, Part part) {
  Tensor z = zeros(shape, {.dtype = g.dtype(), .device = g.device()});
  part(z).copy_(g);
  return z;
}

}  // namespace

void record_reshape(std::string_view op, const Tensor& x, const Tensor& y) {
  if (!should_record({&x})) return;
  record(fmt::format("{}Backward", op), {x}, y,
         [shape = x.sizes()](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {g.reshape(shape)};
         });
}

void record_identity(std::string_view op, const Tensor& x, const Tensor& y) {
  if (!should_record({&x})) return;
  record(fmt::format("{}Backward", op), {x}, y,
         [](const Tensor& g, const Needs&) -> std::vector<Tensor> { return {g}; });
}

void record_permute(const Tensor& x, const Shape& dims, const Tensor& y) {
  if (!should_record({&x})) return;
  Shape inverse(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int64_t d = dims[i] < 0 ? dims[i] + std::int64_t(dims.size()) : dims[i];
    inverse[std::size_t(d)] = std::int64_t(i);
  }
  record("permuteBackward", {x}, y, [inverse](const Tensor& g, const Needs&) -> std::vector<Tensor> {
    return {g.permute(inverse)};
  });
}

void record_transpose(const Tensor& x, std::int64_t d0, std::int64_t d1, const Tensor& y) {
  if (!should_record({&x})) return;
  record("transposeBackward", {x}, y, [d0, d1](const Tensor& g, const Needs&) -> std::vector<Tensor> {
    return {g.transpose(d0, d1)};
  });
}

void record_slice(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t end,
                  std::int64_t step, const Tensor& y) {
  if (!should_record({&x})) return;
  record("sliceBackward", {x}, y,
         [shape = x.sizes(), dim, start, end, step](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {scatter_into_zeros(shape, g, [&](const Tensor& z) { return z.slice(dim, start, end, step); })};
         });
}

void record_select(const Tensor& x, std::int64_t dim, std::int64_t index, const Tensor& y) {
  if (!should_record({&x})) return;
  record("selectBackward", {x}, y,
         [shape = x.sizes(), dim, index](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {scatter_into_zeros(shape, g, [&](const Tensor& z) { return z.select(dim, index); })};
         });
}

void record_expand(const Tensor& x, const Tensor& y) {
  if (!should_record({&x})) return;
  record("expandBackward", {x}, y, [shape = x.sizes()](const Tensor& g, const Needs&) -> std::vector<Tensor> {
    return {sum_to(g, shape)};
  });
}

}  // namespace ferry::autograd
