// tests/conformance/catalog.hpp — helpers the case files share.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <string>
#include <vector>

#include "conformance.hpp"
#include "ferry/debug.hpp"

namespace ferry::conformance {

// Every dtype a case list runs in; a device that does not compute one (Vulkan
// and f64: supports()) reports its cases skipped.
inline const std::vector<DType> kFloat = {DType::f32, DType::f16, DType::bf16, DType::f64};
inline const std::vector<DType> kNumeric = {DType::f32, DType::f16, DType::bf16,
                                            DType::i32, DType::i64, DType::u8,
                                            DType::i8,  DType::i16, DType::f64};
inline const std::vector<DType> kAll = {DType::f32,     DType::f16, DType::bf16, DType::i32,
                                        DType::i64,     DType::u8,  DType::i8,   DType::i16,
                                        DType::boolean, DType::f64};

// The NMSE a result of `dt` may differ by: f32 results differ only by the
// order of float operations, 16-bit results also by one rounding step. f64
// results are computed in double on both sides (Note [Where f64 computes] in
// docs/kernel-contract.md), so they are held 14 decades tighter: f64 has 29
// more bits than f32, 2^-58 (3.5e-18) in NMSE, and 1e-14 leaves a margin of
// a few thousand for the math libraries' last-ulp differences. Exact ops
// (threshold 0) stay exact.
inline double threshold(DType dt, double f32) {
  if (dt == DType::f16) return std::max(f32, 1e-6);
  if (dt == DType::bf16) return std::max(f32, 1e-4);
  if (dt == DType::f64) return f32 * 1e-14;
  return f32;
}

// A case of a composite op (Note [Composite ops] in ferry/op.hpp) gets its composition as
// the CPU's reference, run under debug::CompositesOnly, so that a device's fused kernel (the
// CPU's too) is held to it. Other cases, and those with a reference already, are left as
// they are.
inline void hold_to_composition(Case& c) {
  const auto id = op_from_name(c.op);
  if (!id || op_info(*id).impl != OpImpl::composite || c.reference) return;
  c.reference = [run = c.run](const Inputs& in) {
    debug::CompositesOnly composition;
    return run(in);
  };
}

// Inputs of the given shapes and dtype, values in [lo, hi].
struct InputSpec {
  std::vector<Shape> shapes;
  double lo = -3, hi = 3;
};

inline std::function<Inputs()> inputs_of(InputSpec spec, DType dt) {
  return [spec, dt] {
    Inputs in;
    std::uint64_t seed = 1;
    for (const Shape& s : spec.shapes) in.push_back(make_input(s, dt, seed++, spec.lo, spec.hi));
    return in;
  };
}

// A family of a float op's cases: the op, its geometry's label, the inputs' shapes (drawn
// in [-1, 1]) and the call. add_float_cases makes one case per dtype of kFloat of each,
// of class `shape_class`, held to threshold(dt, 1e-10).
struct FloatOpCase {
  std::string op;
  std::string label;
  std::vector<Shape> shapes;
  std::function<Tensor(const Inputs&)> run;
};

inline void add_float_cases(std::vector<Case>& out, const std::vector<FloatOpCase>& ops,
                            const char* shape_class) {
  for (const FloatOpCase& c : ops)
    for (DType dt : kFloat)
      out.push_back({c.op,
                     dt,
                     c.label,
                     shape_class,
                     threshold(dt, 1e-10),
                     inputs_of({c.shapes, -1, 1}, dt),
                     {},
                     c.run});
}

// The gradient mode of such a family: "<op>.grad" cases whose result is every input's
// gradient (gradients_of), in the same dtypes and shapes.
Tensor gradients_of(const std::function<Tensor(const Inputs&)>& fn, const Inputs& in);
inline void add_float_grad_cases(std::vector<Case>& out, const std::vector<FloatOpCase>& ops,
                                 const char* shape_class) {
  for (const FloatOpCase& c : ops)
    for (DType dt : kFloat)
      out.push_back({c.op + ".grad",
                     dt,
                     c.label,
                     shape_class,
                     threshold(dt, 1e-10),
                     inputs_of({c.shapes, -1, 1}, dt),
                     {},
                     [run = c.run](const Inputs& in) { return gradients_of(run, in); }});
}

// Integer data (an index, a mask's pattern) on `like`'s device.
inline Tensor ints(std::vector<std::int64_t> v, const Tensor& like) {
  return tensor(v).to(like.device());
}

inline std::string shapes_label(const std::vector<Shape>& shapes) {
  std::vector<std::string> parts;
  for (const Shape& s : shapes) parts.push_back(shape_str(s));
  return fmt::format("{}", fmt::join(parts, " x "));
}

// A family of inputs for element-wise ops: its label, class, shapes and views.
struct ShapeCase {
  std::string label;
  std::string cls;
  std::vector<Shape> shapes;
  std::function<Inputs(const Inputs&)> view;  // may be empty
};

std::vector<ShapeCase> unary_shapes();
std::vector<ShapeCase> binary_shapes();

// gradients_of (above): the gradients of fn at `in`, flattened into one tensor (cases_grad.cpp).
// The indexing and shape ops (cases_shape.cpp), forward and gradient modes.
void add_shape_cases(std::vector<Case>& out);
void add_shape_grad_cases(std::vector<Case>& out);
// prod, the scans, the sort and the selections (cases_sort.cpp), forward and gradient modes.
void add_sort_cases(std::vector<Case>& out);
void add_sort_grad_cases(std::vector<Case>& out);
// conv1d/2d/3d, unfold and fold (cases_conv.cpp), forward and gradient modes.
void add_conv_cases(std::vector<Case>& out);
void add_conv_grad_cases(std::vector<Case>& out);
// scaled_dot_product_attention (cases_attention.cpp), forward and gradient modes.
void add_attention_cases(std::vector<Case>& out);
// The losses, the products and the recurrent cells (cases_loss.cpp), and the composite math
// of ferry/ops_math.hpp (cases_math.cpp): forward and gradient modes.
void add_loss_cases(std::vector<Case>& out);
void add_loss_grad_cases(std::vector<Case>& out);
void add_math_cases(std::vector<Case>& out);
void add_math_grad_cases(std::vector<Case>& out);
// aminmax, cov, quantile, logcumsumexp, trapezoid, fmax, take, diag_embed, ... (cases_stats.cpp).
void add_stats_cases(std::vector<Case>& out);
void add_stats_grad_cases(std::vector<Case>& out);
void add_attention_grad_cases(std::vector<Case>& out);

}  // namespace ferry::conformance
