// tests/conformance/cases_shape.cpp — the composite indexing and shape ops
// (ferry/ops_shape.hpp): each on every dtype it takes, over odd,
// non-contiguous and edge-case shapes, in forward and gradient modes.
#include "catalog.hpp"

namespace ferry::conformance {
namespace {

using Fn = std::function<Tensor(const Inputs&)>;

struct ShapeOp {
  const char* op;
  std::string label;
  Shape shape;
  Fn run;
  bool differentiable = true;
};

std::vector<ShapeOp> shape_ops() {
  return {
      {"flip",
       "[5, 7, 3] dims=[0, 2]",
       {5, 7, 3},
       [](const Inputs& in) {
         return flip(in[0], {0, 2});
       }},
      {"flip", "[13] dims=[-1]", {13}, [](const Inputs& in) { return flip(in[0], {-1}); }},
      {"roll",
       "[5, 7] shifts=[2, -9] dims=[0, 1]",
       {5, 7},
       [](const Inputs& in) {
         return roll(in[0], {2, -9}, {0, 1});
       }},
      {"roll", "[3, 4] shifts=[5] flat", {3, 4}, [](const Inputs& in) { return roll(in[0], {5}); }},
      {"repeat",
       "[3, 2] sizes=[2, 1, 3]",
       {3, 2},
       [](const Inputs& in) {
         return repeat(in[0], {2, 1, 3});
       }},
      {"tile", "[3, 2] reps=[2]", {3, 2}, [](const Inputs& in) { return tile(in[0], {2}); }},
      {"repeat_interleave",
       "[3, 4] repeats=3 dim=1",
       {3, 4},
       [](const Inputs& in) { return repeat_interleave(in[0], 3, 1); }},
      {"repeat_interleave",
       "[2, 3] repeats=2 flat",
       {2, 3},
       [](const Inputs& in) { return repeat_interleave(in[0], 2); }},
      {"triu", "[2, 5, 7] diagonal=1", {2, 5, 7}, [](const Inputs& in) { return triu(in[0], 1); }},
      {"triu",
       "[7, 5].t() diagonal=-2",
       {7, 5},
       [](const Inputs& in) { return triu(in[0].t(), -2); }},
      {"tril", "[5, 7] diagonal=0", {5, 7}, [](const Inputs& in) { return tril(in[0]); }},
      {"tril",
       "[3, 4, 4] diagonal=-1",
       {3, 4, 4},
       [](const Inputs& in) { return tril(in[0], -1); }},
      {"diagonal", "[5, 7] offset=2", {5, 7}, [](const Inputs& in) { return diagonal(in[0], 2); }},
      {"diagonal",
       "[3, 5, 4] offset=-1 dims=(2, 0)",
       {3, 5, 4},
       [](const Inputs& in) { return diagonal(in[0], -1, 2, 0); }},
      {"diag", "[5] diagonal=-2", {5}, [](const Inputs& in) { return diag(in[0], -2); }},
      {"diag", "[4, 6] diagonal=1", {4, 6}, [](const Inputs& in) { return diag(in[0], 1); }},
      {"trace", "[5, 7]", {5, 7}, [](const Inputs& in) { return trace(in[0]); }},
      {"pad",
       "[2, 3, 5] constant (1, 2, 0, 3) value=1.5",
       {2, 3, 5},
       [](const Inputs& in) {
         return pad(in[0], {1, 2, 0, 3}, "constant", 1.5);
       }},
      {"pad",
       "[2, 3, 5] reflect (2, 4)",
       {2, 3, 5},
       [](const Inputs& in) {
         return pad(in[0], {2, 4}, "reflect");
       }},
      {"pad",
       "[2, 3, 5] replicate (3, 1, 1, 2)",
       {2, 3, 5},
       [](const Inputs& in) {
         return pad(in[0], {3, 1, 1, 2}, "replicate");
       }},
      {"pad",
       "[2, 3, 5] circular (5, 2) and crop (-1, -1)",
       {2, 3, 5},
       [](const Inputs& in) {
         return pad(in[0], {5, 2, -1, -1}, "circular");
       }},
      {"masked_fill",
       "[5, 7] mask [7] value=-2",
       {5, 7},
       [](const Inputs& in) {
         Tensor mask = gt(ints({0, 1, 1, 0, 1, 0, 1}, in[0]), 0);
         return masked_fill(in[0], mask, -2);
       }},
      {"index_fill",
       "[5, 7] dim=1 index=[0, -1, 3] value=4",
       {5, 7},
       [](const Inputs& in) {
         return index_fill(in[0], 1, ints({0, -1, 3}, in[0]), 4);
       }},
      {"take_along_dim",
       "[4, 5] indices [1, 3] dim=1",
       {4, 5},
       [](const Inputs& in) {
         return take_along_dim(in[0], ints({4, 0, 2}, in[0]).reshape({1, 3}), 1);
       }},
      {"one_hot",
       "[7] classes=5",
       {7},
       [](const Inputs& in) {
         return one_hot(ints({0, 4, 2, 2, 1, 3, 0}, in[0]).reshape({7}), 5);
       },
       false},
  };
}

}  // namespace

void add_shape_cases(std::vector<Case>& out) {
  for (const ShapeOp& s : shape_ops()) {
    const std::vector<DType> dts =
        s.op == std::string("trace") ? kNumeric : std::vector<DType>(kAll.begin(), kAll.end());
    for (DType dt : dts) {
      if (s.op == std::string("one_hot") && dt != DType::f32) continue;  // the indices are made
      out.push_back(
          {s.op, dt, s.label, "shape", threshold(dt, 0), inputs_of({{s.shape}}, dt), {}, s.run});
    }
  }
}

void add_shape_grad_cases(std::vector<Case>& out) {
  for (const ShapeOp& s : shape_ops()) {
    if (!s.differentiable) continue;
    for (DType dt : kFloat)
      out.push_back({std::string(s.op) + ".grad",
                     dt,
                     s.label,
                     "shape",
                     threshold(dt, 1e-12),
                     inputs_of({{s.shape}}, dt),
                     {},
                     [run = s.run](const Inputs& in) { return gradients_of(run, in); }});
  }
}

}  // namespace ferry::conformance
