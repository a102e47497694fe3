// tests/conformance/cases_reduce.cpp — sum, mean, max, min, var, argmax over
// dim sets with and without keepdim, softmax and log_softmax; the composites among them
// held to their compositions.
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
  bool keepdim_ok = true;  // count_nonzero has no keepdim
  std::vector<DType> dtypes() const {
    std::vector<DType> v;
    for (DType dt : kAll)
      if (op_info(op).dtypes.has(dt)) v.push_back(dt);
    return v;
  }
};

// var or std and the mean, as one tensor.
Tensor joined(const std::pair<Tensor, Tensor>& r) {
  return cat({r.first.reshape({-1}), r.second.reshape({-1})});
}

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
      {OpId::argmin, false,
       [](const Tensor& x, const auto& d, bool k) {
         return d.empty() ? ferry::argmin(x, std::nullopt, k) : ferry::argmin(x, d[0], k);
       },
       0},
      {OpId::all, true, [](const Tensor& x, const auto& d, bool k) { return ferry::all(x, d, k); },
       0},
      {OpId::any, true, [](const Tensor& x, const auto& d, bool k) { return ferry::any(x, d, k); },
       0},
      {OpId::count_nonzero, true,
       [](const Tensor& x, const auto& d, bool) { return ferry::count_nonzero(x, d); }, 0, false},
      {OpId::std, true,
       [](const Tensor& x, const auto& d, bool k) { return ferry::std(x, d, 1, k); }, 1e-10},
      {OpId::var_mean, true,
       [](const Tensor& x, const auto& d, bool k) { return joined(ferry::var_mean(x, d, 0, k)); },
       1e-10},
      {OpId::std_mean, true,
       [](const Tensor& x, const auto& d, bool k) { return joined(ferry::std_mean(x, d, 1, k)); },
       1e-10},
      {OpId::norm, true,
       [](const Tensor& x, const auto& d, bool k) { return ferry::norm(x, 2, d, k); }, 1e-10},
  };
}

}  // namespace

void add_reduction_cases(std::vector<Case>& out) {
  const std::size_t first = out.size();
  for (const ReduceOp& op : reduce_ops())
    for (DType dt : op.dtypes())
      for (const ReduceShape& rs : reduce_shapes()) {
        if (rs.cls == "empty" && !op.empty_ok) continue;
        // One large case per kernel (and mean) and float width: the other
        // composites are made of them.
        const bool large_ok = op.op == OpId::sum || op.op == OpId::mean || op.op == OpId::max ||
                              op.op == OpId::min || op.op == OpId::argmax;
        if (rs.cls == "large" && ((dt != DType::f32 && dt != DType::f64) || !large_ok)) continue;
        if ((op.op == OpId::argmax || op.op == OpId::argmin) && rs.dims.size() > 1) continue;
        for (bool keepdim : {false, true}) {
          if ((rs.cls == "large" || !op.keepdim_ok) && keepdim) continue;
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
  // The norms of every p over rows with zeros, NaN and infinities; all and
  // any over rows of zeros and NaN.
  for (DType dt : kFloat) {
    auto rows = [dt] {
      const float inf = INFINITY;
      std::vector<float> v = {0,   0, 0, 0, 3,   -4, 0, 1, 1e-20f, -2e-20f, 0, 0,
                              NAN, 1, 0, 2, inf, -1, 0, 0, 0.5f,   -0.25f,  8, -8};
      return Inputs{tensor(v, {6, 4}).to(dt)};
    };
    for (double p : {2.0, 1.0, 3.0, 0.5, -1.0, 0.0, double(INFINITY), -double(INFINITY)})
      out.push_back({"norm",
                     dt,
                     fmt::format("[6, 4] dims=[1] p={} zeros/NaN/inf rows", p),
                     "special",
                     threshold(dt, 1e-10),
                     rows,
                     {},
                     [p](const Inputs& in) { return ferry::norm(in[0], p, {1}); }});
    out.push_back({"norm",
                   dt,
                   "[6, 4] p=fro",
                   "special",
                   threshold(dt, 1e-10),
                   rows,
                   {},
                   [](const Inputs& in) { return ferry::norm(in[0], "fro"); }});
    for (const char* name : {"all", "any", "argmin"})
      out.push_back({name,
                     dt,
                     "[6, 4] dims=[1] zeros/NaN rows",
                     "special",
                     threshold(dt, 0),
                     rows,
                     {},
                     [name = std::string(name)](const Inputs& in) {
                       if (name == "argmin") return ferry::argmin(in[0], 1);
                       return name == "all" ? ferry::all(in[0], {1}) : ferry::any(in[0], {1});
                     }});
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
  // Rows a block computes, from its shared-memory row cache and beyond it
  // (Note [Row cache] in cuda/cuda_kernels_nn.cu: the cache holds fewer f64
  // elements than f32 ones).
  for (const char* name : {"softmax", "log_softmax"})
    for (DType dt : kFloat)
      for (std::int64_t n : {4099, 12000, 12288}) {
        out.push_back({name,
                       dt,
                       fmt::format("[2, {}] dim=-1", n),
                       "long rows",
                       threshold(dt, 1e-10),
                       inputs_of({{{2, n}}, -5, 5}, dt),
                       {},
                       [name = std::string(name)](const Inputs& in) {
                         return name == "softmax" ? ferry::softmax(in[0], -1)
                                                  : ferry::log_softmax(in[0], -1);
                       }});
      }
  // logsumexp's fused CPU kernel among them.
  for (std::size_t i = first; i < out.size(); ++i) hold_to_composition(out[i]);
}

}  // namespace ferry::conformance
