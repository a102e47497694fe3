// tests/conformance/cases_reduce.cpp — sum, mean, max, min, var, argmax over
// dim sets with and without keepdim, softmax and log_softmax.
#include <cmath>

#include "catalog.hpp"

namespace ferry::conformance {
namespace {

struct ReduceShape {
  Shape shape;
  std::vector<std::int64_t> dims;
  std::string cls;
  std::function<Inputs(const Inputs&)> view;
  std::string view_label;
};

std::vector<ReduceShape> reduce_shapes() {
  return {
      {{}, {}, "scalar", {}, ""},
      {{1023}, {}, "odd", {}, ""},
      {{7, 13}, {1}, "odd", {}, ""},
      {{7, 13}, {0}, "odd", {}, ""},
      {{3, 5, 7}, {0, 2}, "odd", {}, ""},
      {{3, 5, 7}, {-1}, "odd", {}, ""},
      {{1, 1, 1}, {1}, "size-1", {}, ""},
      {{127, 13}, {0}, "odd", {}, ""},
      {{13, 7}, {1}, "non-contiguous", [](const Inputs& in) { return Inputs{in[0].t()}; }, ".t()"},
      {{9, 40},
       {0},
       "non-contiguous",
       [](const Inputs& in) { return Inputs{in[0].slice(1, 1, 40, 3)}; },
       "[:, 1::3]"},
      {{0, 5}, {1}, "empty", {}, ""},
      {{(std::int64_t(1) << 24) + 5}, {}, "large", {}, ""},
  };
}

// A reduction's API call; the dtypes it is tested in are those of the
// suite's dtypes its op-table row takes.
struct ReduceOp {
  OpId op;
  bool empty_ok;  // max/min/argmax of an empty slice is an error
  std::function<Tensor(const Tensor&, const std::vector<std::int64_t>&, bool)> fn;
  double nmse;
  std::vector<DType> dtypes() const {
    std::vector<DType> v;
    for (DType dt : kAll)
      if (op_info(op).dtypes.has(dt)) v.push_back(dt);
    return v;
  }
};

std::vector<ReduceOp> reduce_ops() {
  return {
      {OpId::sum, true, [](const Tensor& x, const auto& d, bool k) { return ferry::sum(x, d, k); },
       1e-12},
      {OpId::mean, true,
       [](const Tensor& x, const auto& d, bool k) { return ferry::mean(x, d, k); }, 1e-12},
      {OpId::max, false, [](const Tensor& x, const auto& d, bool k) { return ferry::max(x, d, k); },
       0},
      {OpId::min, false, [](const Tensor& x, const auto& d, bool k) { return ferry::min(x, d, k); },
       0},
      {OpId::var, true,
       [](const Tensor& x, const auto& d, bool k) { return ferry::var(x, d, 1, k); }, 1e-10},
      {OpId::logsumexp, true,
       [](const Tensor& x, const auto& d, bool k) { return ferry::logsumexp(x, d, k); }, 1e-10},
      {OpId::argmax, false,
       [](const Tensor& x, const auto& d, bool k) {
         return d.empty() ? ferry::argmax(x, std::nullopt, k) : ferry::argmax(x, d[0], k);
       },
       0},
  };
}

}  // namespace

void add_reduction_cases(std::vector<Case>& out) {
  for (const ReduceOp& op : reduce_ops())
    for (DType dt : op.dtypes())
      for (const ReduceShape& rs : reduce_shapes()) {
        if (rs.cls == "empty" && !op.empty_ok) continue;
        // One large case per kernel: var and logsumexp are compositions of them.
        if (rs.cls == "large" &&
            (dt != DType::f32 || op.op == OpId::var || op.op == OpId::logsumexp))
          continue;
        if (op.op == OpId::argmax && rs.dims.size() > 1) continue;
        for (bool keepdim : {false, true}) {
          if (rs.cls == "large" && keepdim) continue;
          std::string label = fmt::format("{}{} dims={}{}", shape_str(rs.shape), rs.view_label,
                                          shape_str(rs.dims), keepdim ? " keepdim" : "");
          out.push_back({std::string(op_name(op.op)), dt, label, rs.cls, threshold(dt, op.nmse),
                         inputs_of({{rs.shape}}, dt), rs.view,
                         [fn = op.fn, dims = rs.dims, keepdim](const Inputs& in) {
                           return fn(in[0], dims, keepdim);
                         }});
        }
      }
  // logsumexp over rows holding ±inf and NaN, and over large values.
  for (DType dt : kFloat) {
    out.push_back({"logsumexp",
                   dt,
                   "[4, 3] dims=[1] ±inf/NaN rows",
                   "special",
                   threshold(dt, 1e-10),
                   [dt] {
                     const float inf = INFINITY;
                     std::vector<float> v = {-inf, -inf, -inf, inf, 1,   -inf,
                                             NAN,  0,    1,    inf, inf, 2};
                     return Inputs{tensor(v, {4, 3}).to(dt)};
                   },
                   {},
                   [](const Inputs& in) { return ferry::logsumexp(in[0], {1}); }});
    out.push_back({"logsumexp",
                   dt,
                   "[7, 13] dims=[0] values ~1000",
                   "odd",
                   threshold(dt, 1e-10),
                   inputs_of({{{7, 13}}, 990, 1010}, dt),
                   {},
                   [](const Inputs& in) { return ferry::logsumexp(in[0], {0}, true); }});
  }
  // softmax / log_softmax along each dim, with rows of large values.
  for (const char* name : {"softmax", "log_softmax"})
    for (DType dt : kFloat)
      for (std::int64_t dim : {0, 1, -1}) {
        auto run = [name = std::string(name), dim](const Inputs& in) {
          return name == "softmax" ? ferry::softmax(in[0], dim) : ferry::log_softmax(in[0], dim);
        };
        out.push_back({name,
                       dt,
                       fmt::format("[7, 13] dim={}", dim),
                       "odd",
                       threshold(dt, 1e-10),
                       inputs_of({{{7, 13}}, -5, 5}, dt),
                       {},
                       run});
        out.push_back({name, dt, fmt::format("[13, 7].t() dim={} values ~1000", dim),
                       "non-contiguous", threshold(dt, 1e-10),
                       inputs_of({{{13, 7}}, 990, 1010}, dt),
                       [](const Inputs& in) { return Inputs{in[0].t()}; }, run});
        out.push_back({name,
                       dt,
                       fmt::format("[3, 1023] dim={}", dim),
                       "odd",
                       threshold(dt, 1e-10),
                       inputs_of({{{3, 1023}}, -5, 5}, dt),
                       {},
                       run});
      }
}

}  // namespace ferry::conformance
