// tests/conformance/cases_elementwise.cpp — unary, binary, comparison, where,
// cast and fill × every dtype they take × the shape classes.
#include <cmath>

#include "catalog.hpp"
#include "ferry/debug.hpp"

namespace ferry::conformance {

std::vector<ShapeCase> unary_shapes() {
  std::vector<ShapeCase> s = {
      {"[]", "scalar", {{}}, {}},
      {"[0]", "empty", {{0}}, {}},
      {"[3, 0]", "empty", {{3, 0}}, {}},
      {"[1, 1, 1]", "size-1", {{1, 1, 1}}, {}},
      {"[13, 7].t()",
       "non-contiguous",
       {{13, 7}},
       [](const Inputs& in) { return Inputs{in[0].t()}; }},
      {"[64][1::3]",
       "non-contiguous",
       {{64}},
       [](const Inputs& in) { return Inputs{in[0].slice(0, 1, 64, 3)}; }},
      {"[7, 1].expand(7, 13)",
       "non-contiguous",
       {{7, 1}},
       [](const Inputs& in) {
         return Inputs{in[0].expand({7, 13})};
       }},
  };
  for (std::int64_t n : {1, 7, 13, 127, 1023}) s.push_back({shape_str({n}), "odd", {{n}}, {}});
  s.push_back({"[7, 13]", "odd", {{7, 13}}, {}});
  return s;
}

std::vector<ShapeCase> binary_shapes() {
  std::vector<ShapeCase> s = {
      {"[] x []", "scalar", {{}, {}}, {}},
      {"[0] x [0]", "empty", {{0}, {0}}, {}},
      {"[0, 3] x [3]", "empty", {{0, 3}, {3}}, {}},
      {"[1, 1] x [1, 1]", "size-1", {{1, 1}, {1, 1}}, {}},
      {"[7, 13] x [13]", "broadcast", {{7, 13}, {13}}, {}},
      {"[13] x [7, 13]", "broadcast", {{13}, {7, 13}}, {}},
      {"[7, 1] x [1, 13]", "broadcast", {{7, 1}, {1, 13}}, {}},
      {"[] x [7, 13]", "broadcast", {{}, {7, 13}}, {}},
      {"[2, 1, 5] x [3, 1]", "broadcast", {{2, 1, 5}, {3, 1}}, {}},
      {"[13, 7].t() x [7, 13]",
       "non-contiguous",
       {{13, 7}, {7, 13}},
       [](const Inputs& in) {
         return Inputs{in[0].t(), in[1]};
       }},
      {"[7, 13] x [7, 39][:, ::3]",
       "non-contiguous",
       {{7, 13}, {7, 39}},
       [](const Inputs& in) {
         return Inputs{in[0], in[1].slice(1, 0, 39, 3)};
       }},
      {"[7, 1].expand(7, 13) x [13, 7].t()",
       "non-contiguous",
       {{7, 1}, {13, 7}},
       [](const Inputs& in) {
         return Inputs{in[0].expand({7, 13}), in[1].t()};
       }},
  };
  for (std::int64_t n : {1, 7, 13, 127, 1023})
    s.push_back({shape_str({n}) + " x " + shape_str({n}), "odd", {{n}, {n}}, {}});
  return s;
}

namespace {

// The element-wise ops are the op table's unary, binary and compare rows,
// each called through unary_op/binary_op, on the dtypes its row takes (of
// those a device is tested in), drawing inputs from its row's range.
// How far a transcendental may be from the CPU's libm, in ulps (Note
// [Transcendentals in GLSL] in shaders/common.glsl).
constexpr double kMaxUlp = 4;

std::vector<const OpInfo*> rows_of(std::initializer_list<OpKind> kinds) {
  std::vector<const OpInfo*> rows;
  for (const OpInfo& info : op_table())
    for (OpKind k : kinds)
      if (info.kind == k) rows.push_back(&info);
  return rows;
}

// f32 values where transcendental functions go wrong: ±0, ±inf, NaN,
// denormals, the ends of the normal range, the inputs whose results overflow
// or underflow (exp's ±88.7 and -87.3 to -104), tiny values, and a sweep of
// magnitudes from 1e-30 to 1e30 of both signs.
std::vector<float> special_grid() {
  std::vector<float> v = {
      0.0f,    -0.0f,    INFINITY, -INFINITY,      NAN,        1e-45f,  -1e-45f,
      1e-40f,  -1e-40f,  5.9e-39f, 1.1754942e-38f, 1.2e-38f,   3.4e38f, -3.4e38f,
      88.72f,  88.7228f, 89.0f,    -87.33f,        -87.34f,    -100.0f, -103.9f,
      -104.0f, -110.0f,  1e-7f,    -1e-7f,         1e-20f,     0.5f,    -0.5f,
      1.0f,    -1.0f,    2.0f,     -2.0f,          0.6931472f, 9.1f,    -9.1f};
  for (int e = -30; e <= 30; e += 3)
    for (float m : {1.0f, 2.7f, 7.3f}) {
      v.push_back(m * std::pow(10.0f, float(e)));
      v.push_back(-m * std::pow(10.0f, float(e)));
    }
  for (int i = 0; i <= 80; ++i) v.push_back(-10.0f + 0.25f * float(i) + 0.0137f);
  return v;
}

// Inputs holding NaN, ±inf and ±0 next to ordinary numbers.
Inputs special_values(DType dt, int count) {
  std::vector<float> v = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, -2.5f, 1e30f};
  Inputs in;
  for (int i = 0; i < count; ++i) {
    std::rotate(v.begin(), v.begin() + 3, v.end());
    in.push_back(tensor(v).to(dt));
  }
  return in;
}

Case large_case(const char* op, std::int64_t n, const char* cls,
                std::function<Tensor(const Inputs&)> run, int arity) {
  std::vector<Shape> shapes(std::size_t(arity), Shape{n});
  return Case{op, DType::f32,    shapes_label(shapes), cls, 1e-10, inputs_of({shapes}, DType::f32),
              {}, std::move(run)};
}

// clamp, a composite op: scalar bounds (both, either, crossed), bounds that
// promote the input, tensor bounds that broadcast, NaN and infinities.
void add_clamp_cases(std::vector<Case>& out) {
  auto clamp_case = [&](DType dt, const std::string& label, const std::string& cls,
                        std::function<Inputs()> make, std::function<Inputs(const Inputs&)> view,
                        std::function<Tensor(const Inputs&)> run) {
    out.push_back({"clamp", dt, label, cls, threshold(dt, 0), std::move(make), std::move(view),
                   std::move(run)});
  };
  for (DType dt : kNumeric) {
    const double lo = dt == DType::u8 ? 0 : -3;
    for (const ShapeCase& s : unary_shapes())
      clamp_case(dt, s.label + " min=-1 max=2", s.cls, inputs_of({s.shapes, lo, 3}, dt), s.view,
                 [](const Inputs& in) { return clamp(in[0], -1, 2); });
    const Shape odd = {7, 13};
    clamp_case(dt, "[7, 13] min=0.5", "odd", inputs_of({{odd}, lo, 3}, dt), {},
               [](const Inputs& in) { return clamp_min(in[0], 0.5); });
    clamp_case(dt, "[7, 13] max=1", "odd", inputs_of({{odd}, lo, 3}, dt), {},
               [](const Inputs& in) { return clamp(in[0], std::nullopt, 1); });
    clamp_case(dt, "[7, 13] min=2 max=-1 (crossed)", "odd", inputs_of({{odd}, lo, 3}, dt), {},
               [](const Inputs& in) { return clamp(in[0], 2, -1); });
    clamp_case(dt, "[7, 13] min=[13] max=[7, 1]", "broadcast",
               inputs_of({{odd, {13}, {7, 1}}, lo, 3}, dt), {},
               [](const Inputs& in) { return clamp(in[0], in[1], in[2]); });
    clamp_case(
        dt, "[13, 7].t() max=[7, 13]", "non-contiguous", inputs_of({{{13, 7}, odd}, lo, 3}, dt),
        [](const Inputs& in) {
          return Inputs{in[0].t(), in[1]};
        },
        [](const Inputs& in) { return clamp(in[0], Tensor(), in[1]); });
  }
  for (DType dt : kFloat)
    clamp_case(
        dt, "[8] NaN/inf/±0 min=-1 max=1", "special", [dt] { return special_values(dt, 1); }, {},
        [](const Inputs& in) { return clamp(in[0], -1, 1); });
}

// The ternary composites (lerp, addcmul, addcdiv) over broadcasting and
// non-contiguous operands, and the closeness tests (isclose, allclose, equal)
// on pairs that are equal, near, far, NaN and infinite.
void add_ternary_cases(std::vector<Case>& out) {
  struct Ternary {
    const char* op;
    std::vector<DType> dtypes;
    std::function<Tensor(const Inputs&)> run;
  };
  const std::vector<Ternary> ops = {
      {"lerp", kFloat, [](const Inputs& in) { return lerp(in[0], in[1], in[2]); }},
      {"addcmul",
       {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64},
       [](const Inputs& in) { return addcmul(in[0], in[1], in[2], 2); }},
      {"addcdiv", kFloat, [](const Inputs& in) { return addcdiv(in[0], in[1], in[2], -0.5); }},
  };
  const std::vector<ShapeCase> shapes = {
      {"[7, 13] x [13] x [7, 1]", "broadcast", {{7, 13}, {13}, {7, 1}}, {}},
      {"[1023] x3", "odd", {{1023}, {1023}, {1023}}, {}},
      {"[13, 7].t() x [7, 13] x [7, 13]",
       "non-contiguous",
       {{13, 7}, {7, 13}, {7, 13}},
       [](const Inputs& in) {
         return Inputs{in[0].t(), in[1], in[2]};
       }},
  };
  for (const Ternary& t : ops)
    for (DType dt : t.dtypes)
      for (const ShapeCase& s : shapes)
        out.push_back({t.op, dt, s.label, s.cls, threshold(dt, 1e-10),
                       inputs_of({s.shapes, 0.5, 3}, dt), s.view, t.run});
  // The divisions with rounding on every sign of both operands (the table's
  // range keeps them positive, away from integer zero divisors).
  for (const char* op : {"remainder", "fmod", "floor_divide"})
    for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64})
      out.push_back(
          {op,
           dt,
           "[9, 8] x [8] signs",
           "special",
           threshold(dt, 0),
           [dt] {
             std::vector<float> a, b = {-4, -3, -2, -1, 1, 2, 3, 4};
             for (int i = -36; i < 36; ++i) a.push_back(float(i) + (is_floating(dt) ? 0.5f : 0));
             return Inputs{tensor(a).reshape({9, 8}).to(dt), tensor(b).to(dt)};
           },
           {},
           [id = *op_from_name(op)](const Inputs& in) { return binary_op(id, in[0], in[1]); }});
  // A weight of 0, 1/2 and 1 exactly: PyTorch's two branches meet there.
  out.push_back({"lerp",
                 DType::f32,
                 "[6] scalar weights",
                 "special",
                 threshold(DType::f32, 0),
                 [] {
                   return Inputs{tensor(std::vector<float>{1, -2, 3e30f, NAN, INFINITY, 0}),
                                 tensor(std::vector<float>{5, 7, -1e30f, 1, 2, -0.0f})};
                 },
                 {},
                 [](const Inputs& in) {
                   return cat({lerp(in[0], in[1], 0), lerp(in[0], in[1], 0.5),
                               lerp(in[0], in[1], 1), lerp(in[0], in[1], 0.25)});
                 }});
  auto pairs = [](DType dt) {
    return [dt] {
      std::vector<float> a = {1, 1, 1, 0, NAN, NAN, INFINITY, INFINITY, -INFINITY, 100, 1e-9f, 3};
      std::vector<float> b = {1,        1 + 1e-6f, 1.1f,      1e-9f,    NAN, 1,
                              INFINITY, -INFINITY, -INFINITY, 100.001f, 0,   -3};
      return Inputs{tensor(a).to(dt), tensor(b).to(dt)};
    };
  };
  for (DType dt : kFloat) {
    out.push_back({"isclose",
                   dt,
                   "[12] near, far, NaN, inf",
                   "special",
                   threshold(dt, 0),
                   pairs(dt),
                   {},
                   [](const Inputs& in) {
                     return cat({isclose(in[0], in[1]), isclose(in[0], in[1], 1e-3, 0, true),
                                 isclose(in[0], in[1], 0, 0)});
                   }});
    out.push_back({"allclose",
                   dt,
                   "[12] and its prefixes",
                   "special",
                   threshold(dt, 0),
                   pairs(dt),
                   {},
                   [](const Inputs& in) {
                     std::vector<std::uint8_t> r;
                     for (std::int64_t n : {1, 2, 3, 5, 12})
                       r.push_back(allclose(in[0].slice(0, 0, n, 1), in[1].slice(0, 0, n, 1)));
                     return tensor(r).to(in[0].device());  // results stay on the device
                   }});
    out.push_back({"equal",
                   dt,
                   "[12] and its prefixes",
                   "special",
                   threshold(dt, 0),
                   pairs(dt),
                   {},
                   [](const Inputs& in) {
                     std::vector<std::uint8_t> r;
                     for (std::int64_t n : {1, 2, 12}) {
                       Tensor a = in[0].slice(0, 0, n, 1);
                       r.push_back(equal(a, in[1].slice(0, 0, n, 1)));
                       r.push_back(equal(a, a.clone()));
                     }
                     r.push_back(equal(in[0], in[0].slice(0, 0, 11, 1)));  // shapes differ
                     return tensor(r).to(in[0].device());
                   }});
  }
  out.push_back({"isclose",
                 DType::i32,
                 "[7, 13] x [13]",
                 "broadcast",
                 threshold(DType::i32, 0),
                 inputs_of({{{7, 13}, {13}}, -3, 3}, DType::i32),
                 {},
                 [](const Inputs& in) { return isclose(in[0], in[1], 0.4, 1); }});
}

}  // namespace

void add_elementwise_cases(std::vector<Case>& out) {
  for (const OpInfo* op : rows_of({OpKind::unary})) {
    // Floats, and the integers that show the rule: i32 (which floating ops
    // promote) and i64 where the op keeps the dtype.
    std::vector<DType> dts;
    for (DType dt : kFloat)
      if (op->dtypes.has(dt)) dts.push_back(dt);
    if (op->dtypes.has(DType::i32)) dts.push_back(DType::i32);
    if (op->dtypes.has(DType::i64) && op->compute == OpCompute::same) dts.push_back(DType::i64);
    auto run = [id = op->id](const Inputs& in) { return unary_op(id, in[0]); };
    const std::string name(op->name);
    for (DType dt : dts)
      for (const ShapeCase& s : unary_shapes()) {
        double lo =
            is_floating(dt) ? op->test_lo : std::max(op->test_lo, dt == DType::u8 ? 0.0 : -9.0);
        out.push_back({name, dt, s.label, s.cls, threshold(dt, 1e-10),
                       inputs_of({s.shapes, lo, op->test_hi}, dt), s.view, run});
      }
    for (DType dt : kFloat)
      if (op->dtypes.has(dt))
        out.push_back({name,
                       dt,
                       "[8] NaN/inf/±0",
                       "special",
                       threshold(dt, 1e-10),
                       [dt] { return special_values(dt, 1); },
                       {},
                       run});
    if (op->compute == OpCompute::float_) {  // the transcendentals: a few ulp of libm
      out.push_back({name,
                     DType::f32,
                     "special-value grid",
                     "ulp",
                     threshold(DType::f32, 1e-10),
                     [] { return Inputs{ferry::tensor(special_grid())}; },
                     {},
                     run});
      out.back().max_ulp = kMaxUlp;
    }
  }
  // A composite op's fused kernels are held to its composition (Case::reference).
  for (Case& c : out) hold_to_composition(c);
  for (const OpInfo* op : rows_of({OpKind::binary, OpKind::compare})) {
    auto run = [id = op->id](const Inputs& in) { return binary_op(id, in[0], in[1]); };
    const std::string name(op->name);
    for (DType dt : kAll) {
      if (!op->dtypes.has(dt)) continue;
      for (const ShapeCase& s : binary_shapes()) {
        InputSpec spec{s.shapes, op->test_lo, op->test_hi};
        out.push_back(
            {name, dt, s.label, s.cls, threshold(dt, 1e-10), inputs_of(spec, dt), s.view, run});
      }
    }
    for (DType dt : kFloat)
      if (op->dtypes.has(dt))
        out.push_back({name,
                       dt,
                       "[8] x [8] NaN/inf/±0",
                       "special",
                       threshold(dt, 1e-10),
                       [dt] { return special_values(dt, 2); },
                       {},
                       run});
    if (op->id == OpId::pow) {  // every pair of the grid: C99's special cases and accuracy
      out.push_back({name,
                     DType::f32,
                     "special-value grid squared",
                     "ulp",
                     threshold(DType::f32, 1e-10),
                     [] {
                       std::vector<float> g = special_grid(), a, b;
                       for (float x : g)
                         for (float y : g) a.push_back(x), b.push_back(y);
                       return Inputs{ferry::tensor(a), ferry::tensor(b)};
                     },
                     {},
                     run});
      out.back().max_ulp = kMaxUlp;
    }
  }
  add_clamp_cases(out);
  add_ternary_cases(out);
  for (DType dt : kAll)
    for (const ShapeCase& s : binary_shapes()) {
      // where(cond, a, b): the condition takes the first shape, a and b the second.
      std::vector<Shape> shapes = {s.shapes[0], s.shapes[1], s.shapes[1]};
      out.push_back({"where", dt, s.label, s.cls, threshold(dt, 0),
                     [shapes, dt] {
                       return Inputs{make_input(shapes[0], DType::boolean, 3),
                                     make_input(shapes[1], dt, 4), make_input(shapes[2], dt, 5)};
                     },
                     s.view ? std::function<Inputs(const Inputs&)>([v = s.view](const Inputs& in) {
                       Inputs a = v({in[0], in[1]}), b = v({in[0], in[2]});
                       return Inputs{a[0], a[1], b[1]};
                     })
                            : std::function<Inputs(const Inputs&)>(),
                     [](const Inputs& in) { return ferry::where(in[0], in[1], in[2]); }});
    }
  for (DType from : kAll)
    for (DType to : kAll)
      for (const ShapeCase& s : unary_shapes()) {
        if (s.cls != "odd" && s.cls != "non-contiguous" && s.cls != "empty") continue;
        out.push_back({"cast", from, s.label + " -> " + std::string(dtype_name(to)), s.cls,
                       threshold(to, 0), inputs_of({s.shapes, -100, 100}, from), s.view,
                       [to](const Inputs& in) { return ferry::cast(in[0], to); }});
      }
  // NaN, ±inf, ±0 and 1e30 into every dtype: NaN is true as a bool and 0 as an
  // integer, the infinities and 1e30 saturate an integer, overflow a 16-bit float.
  for (DType from : kFloat)
    for (DType to : kAll)
      out.push_back({"cast",
                     from,
                     "[8] NaN/inf/±0 -> " + std::string(dtype_name(to)),
                     "special",
                     threshold(to, 0),
                     [from] { return special_values(from, 1); },
                     {},
                     [to](const Inputs& in) { return ferry::cast(in[0], to); }});
  for (DType dt : kAll) {
    // The input only says which device to fill on.
    out.push_back(
        {"full", dt, "[1023]", "odd", 0, inputs_of({{{1}}}, dt), {}, [dt](const Inputs& in) {
           return ferry::full({1023}, 3, {.dtype = dt, .device = in[0].device()});
         }});
    out.push_back({"fill_",
                   dt,
                   "[9, 14][::2, 1::3]",
                   "non-contiguous",
                   0,
                   inputs_of({{{9, 14}}}, dt),
                   {},
                   [](const Inputs& in) {
                     Tensor t = in[0].clone();
                     t.slice(0, 0, 9, 2).slice(1, 1, 14, 3).fill_(1);
                     return t;
                   }});
  }
  // Large tensors: > 2^24 elements, and one over 128 MiB for element-wise ops.
  const std::int64_t big = (std::int64_t(1) << 24) + 1, huge = (std::int64_t(1) << 25) + 7;
  out.push_back(large_case(
      "add", big, "large", [](const Inputs& in) { return in[0] + in[1]; }, 2));
  out.push_back(large_case(
      "mul", big, "large", [](const Inputs& in) { return in[0] * in[1]; }, 2));
  out.push_back(large_case(
      "exp", big, "large", [](const Inputs& in) { return ferry::exp(in[0]); }, 1));
  out.push_back(large_case(
      "cast", big, "large", [](const Inputs& in) { return in[0].to(DType::f16); }, 1));
  out.back().dtype = DType::f32;
  out.back().max_nmse = 1e-6;
  out.push_back(large_case(
      "add", huge, "large > 128 MiB", [](const Inputs& in) { return in[0] + in[1]; }, 2));
  // The cases whose API name is not their kernel's (Case::kernels).
  for (Case& c : out) {
    if (c.op == "cast") c.kernels = {OpId::copy};
    if (c.op == "full" || c.op == "fill_") c.kernels = {OpId::fill};
  }
}

}  // namespace ferry::conformance
