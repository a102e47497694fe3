// runtime/autograd/formulas_reduce.cpp — backward of sum, mean, max, min and
// var (formulas.hpp): the output gradient, given back its reduced dims as size
// 1, broadcasts over each reduced slice.
#include <fmt/format.h>

#include <algorithm>

#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "dispatch.hpp"
#include "ferry/ops.hpp"

namespace ferry::autograd {
namespace {

struct Reduced {
  Shape keep_shape;   // the input's shape with every reduced dim set to 1
  std::int64_t count = 1;  // elements per reduced slice
};

// `dims` as the op took them (empty: every dim).
Reduced reduced_of(const Tensor& x, const std::vector<std::int64_t>& dims) {
  Reduced r{x.sizes(), 1};
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    const bool hit = dims.empty() || std::any_of(dims.begin(), dims.end(), [&](std::int64_t k) {
                       return detail::wrap_dim(k, x.dim(), "reduce") == d;
                     });
    if (!hit) continue;
    r.count *= x.size(d);
    r.keep_shape[std::size_t(d)] = 1;
  }
  return r;
}

}  // namespace

void record_sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim,
                const Tensor& out) {
  if (!should_record({&x})) return;
  record("sumBackward", {x}, out,
         [shape = x.sizes(), keep = reduced_of(x, dims).keep_shape](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {g.reshape(keep).expand(shape)};
         });
}

void record_mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim,
                 const Tensor& out) {
  if (!should_record({&x})) return;
  Reduced r = reduced_of(x, dims);
  record("meanBackward", {x}, out,
         [shape = x.sizes(), r](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {(g.reshape(r.keep_shape) / double(r.count)).expand(shape)};
         });
}

// PyTorch's amax/amin backward: the gradient is shared evenly by every element
// that equals the extremum (NaN counting as equal to a NaN result).
void record_extremum(std::string_view op, const Tensor& x, const std::vector<std::int64_t>& dims,
                     bool keepdim, const Tensor& out) {
  if (!should_record({&x})) return;
  record(fmt::format("{}Backward", op), {x}, out,
         [x = Saved(x), out = Saved(out), keep = reduced_of(x, dims).keep_shape,
          dims](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           Tensor xv = x.get(), y = out.get().reshape(keep);
           Tensor hit = where(ne(y, y), ne(xv, xv), eq(xv, y));
           Tensor count = sum(hit, dims, /*keepdim=*/true).reshape(keep).to(g.dtype());
           return {where(hit, g.reshape(keep) / count, Scalar(0))};
         });
}

// d var / dx = 2 (x - mean) / (N - correction), the denominator as the forward used it.
void record_std(const Tensor& var, const Tensor& std) {
  if (!should_record({&var})) return;
  record("stdBackward", {var}, std,
         [s = Saved(std)](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           const Tensor sv = s.get();
           return {where(eq(sv, 0), Scalar(0), g / (2 * sv))};
         });
}

void record_var(const Tensor& x, const std::vector<std::int64_t>& dims, double correction,
                bool keepdim, const Tensor& out) {
  if (!should_record({&x})) return;
  Reduced r = reduced_of(x, dims);
  const double denom = std::max(0.0, double(r.count) - correction);
  record("varBackward", {x}, out,
         [x = Saved(x), r, denom, dims](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           Tensor xv = x.get();
           Tensor centered = xv - mean(xv.to(g.dtype()), dims, /*keepdim=*/true);
           return {(g.reshape(r.keep_shape) * (2.0 / denom)) * centered};
         });
}

}  // namespace ferry::autograd
