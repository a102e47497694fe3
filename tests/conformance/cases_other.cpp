// tests/conformance/cases_other.cpp — matmul, layer_norm, embedding,
// index_select, gather, cat, stack, arange and the random draws.
#include "catalog.hpp"

namespace ferry::conformance {
namespace {

// 2·M·N·K per (broadcast) batch.
double matmul_flops(const Shape& a, const Shape& b) {
  double k = double(a.back()), m = a.size() > 1 ? double(a[a.size() - 2]) : 1;
  double n = b.size() > 1 ? double(b.back()) : 1;
  Shape ab(a.begin(), a.end() - std::min<std::ptrdiff_t>(2, std::ptrdiff_t(a.size())));
  Shape bb(b.begin(), b.end() - std::min<std::ptrdiff_t>(2, std::ptrdiff_t(b.size())));
  double batch = 1;
  for (auto d : broadcast_shapes(ab, bb)) batch *= double(d);
  return 2 * m * n * k * batch;
}

void add_matmul(std::vector<Case>& out) {
  struct MM {
    Shape a, b;
    std::string cls;
    std::function<Inputs(const Inputs&)> view;
    std::string label;
  };
  std::vector<MM> shapes = {
      {{7, 13}, {13, 5}, "odd", {}, ""},
      {{1, 1}, {1, 1}, "size-1", {}, ""},
      {{13}, {13}, "odd", {}, " (vector·vector)"},
      {{13}, {13, 5}, "odd", {}, " (vector·matrix)"},
      {{7, 13}, {13}, "odd", {}, " (matrix·vector)"},
      {{3, 7, 13}, {13, 5}, "batched", {}, ""},
      {{2, 1, 7, 13}, {3, 13, 5}, "broadcast", {}, ""},
      {{13, 7},
       {5, 13},
       "non-contiguous",
       [](const Inputs& in) {
         return Inputs{in[0].t(), in[1].t()};
       },
       " .t() .t()"},
      {{7, 0}, {0, 5}, "empty", {}, " (K = 0)"},
      // The cases above are tiny products on Vulkan (Note [Tiny products] in
      // runtime/vulkan/vk_kernels_linalg.cpp); these two take its GEMM tiles, integers too.
      {{20, 30}, {30, 17}, "odd", {}, " (tiles)"},
      {{6, 70}, {70, 5}, "odd", {}, " (K past the tiny products')"},
      {{127, 1023}, {1023, 13}, "odd", {}, ""},
      {{256, 256}, {256, 256}, "square", {}, ""},
      // A few vectors against a weight whose rows are contiguous in K (Note [Matrix-vector
      // products] in ferry/kit/matvec_shape.hpp): a linear layer's x · Wᵀ, and W · x batched.
      {{3, 1031},
       {40, 1031},
       "matvec",
       [](const Inputs& in) {
         return Inputs{in[0], in[1].t()};
       },
       " (x · Wᵀ)"},
      {{2, 40, 1032}, {2, 1032, 5}, "matvec", {}, " (W · x)"},
      // Multiples of the cooperative-matrix tiles (Note [Cooperative-matrix GEMM] in
      // runtime/vulkan/vk_kernels_coopmat.cpp), B as it is and transposed as a Linear's weight.
      {{2, 64, 96}, {96, 128}, "tiles", {}, ""},
      {{128, 64},
       {64, 64},
       "tiles",
       [](const Inputs& in) {
         return Inputs{in[0], in[1].t()};
       },
       " (x · Wᵀ)"},
  };
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64})
    for (const MM& s : shapes) {
      double nmse = dt == DType::f32 || dt == DType::f64 ? 1e-10 : 0;
      if (!is_floating(dt) && s.a.back() > 100) continue;  // integer GEMMs stay small
      out.push_back({"matmul", dt, shapes_label({s.a, s.b}) + s.label, s.cls, threshold(dt, nmse),
                     inputs_of({{s.a, s.b}, -2, 2}, dt), s.view,
                     [](const Inputs& in) { return ferry::matmul(in[0], in[1]); },
                     matmul_flops(s.a, s.b)});
    }
}

void add_layer_norm(std::vector<Case>& out) {
  for (DType dt : kFloat)
    for (bool affine : {false, true})
      for (const Shape& s : {Shape{7, 13}, Shape{3, 1023}, Shape{2, 3, 5}, Shape{2, 4099},
                             Shape{2, 12000}, Shape{2, 12288}}) {
        Shape norm = s.size() == 3 ? Shape{3, 5} : Shape{s.back()};
        out.push_back({"layer_norm",
                       dt,
                       fmt::format("{} normalized {}{}", shape_str(s), shape_str(norm),
                                   affine ? " affine" : ""),
                       "odd",
                       threshold(dt, 1e-10),
                       [s, norm, dt, affine] {
                         Inputs in{make_input(s, dt, 1)};
                         if (affine) {
                           in.push_back(make_input(norm, dt, 2));
                           in.push_back(make_input(norm, dt, 3));
                         }
                         return in;
                       },
                       {},
                       [norm, affine](const Inputs& in) {
                         return affine ? ferry::layer_norm(in[0], norm, in[1], in[2])
                                       : ferry::layer_norm(in[0], norm);
                       }});
      }
}

void add_indexing(std::vector<Case>& out) {
  for (DType dt : kAll) {
    for (DType it : {DType::i64, DType::i32}) {
      std::string ix = std::string(dtype_name(it));
      auto idx = [it](const Shape& s, std::int64_t n, std::uint64_t seed) {
        manual_seed(seed);
        return randint(0, n, s, {.dtype = it});
      };
      out.push_back({"index_select",
                     dt,
                     fmt::format("[7, 13] dim=1 index {}[9]", ix),
                     "odd",
                     0,
                     [dt, idx] {
                       return Inputs{make_input({7, 13}, dt, 1), idx({9}, 13, 2)};
                     },
                     {},
                     [](const Inputs& in) { return ferry::index_select(in[0], 1, in[1]); }});
      out.push_back({"index_select", dt, fmt::format("[13, 7].t() dim=0 index {}[4]", ix),
                     "non-contiguous", 0,
                     [dt, idx] {
                       return Inputs{make_input({13, 7}, dt, 1), idx({4}, 7, 2)};
                     },
                     [](const Inputs& in) {
                       return Inputs{in[0].t(), in[1]};
                     },
                     [](const Inputs& in) { return ferry::index_select(in[0], 0, in[1]); }});
      out.push_back({"gather",
                     dt,
                     fmt::format("[7, 13] dim=1 index {}[7, 5]", ix),
                     "odd",
                     0,
                     [dt, idx] {
                       return Inputs{make_input({7, 13}, dt, 1), idx({7, 5}, 13, 2)};
                     },
                     {},
                     [](const Inputs& in) { return ferry::gather(in[0], 1, in[1]); }});
      out.push_back({"gather",
                     dt,
                     fmt::format("[3, 5, 7] dim=0 index {}[2, 5, 7]", ix),
                     "odd",
                     0,
                     [dt, idx] {
                       return Inputs{make_input({3, 5, 7}, dt, 1), idx({2, 5, 7}, 3, 2)};
                     },
                     {},
                     [](const Inputs& in) { return ferry::gather(in[0], 0, in[1]); }});
      if (is_floating(dt))
        out.push_back({"embedding",
                       dt,
                       fmt::format("weight [50, 16] indices {}[4, 9]", ix),
                       "odd",
                       0,
                       [dt, idx] {
                         return Inputs{make_input({50, 16}, dt, 1), idx({4, 9}, 50, 2)};
                       },
                       {},
                       [](const Inputs& in) { return ferry::embedding(in[0], in[1]); }});
    }
    out.push_back({"cat",
                   dt,
                   "[2, 3] x [5, 3] x [0, 3] dim=0",
                   "odd",
                   0,
                   inputs_of({{{2, 3}, {5, 3}, {0, 3}}}, dt),
                   {},
                   [](const Inputs& in) { return ferry::cat(in, 0); }});
    out.push_back({"cat", dt, "[4, 7].t() x [7, 2] dim=1", "non-contiguous", 0,
                   inputs_of({{{4, 7}, {7, 2}}}, dt),
                   [](const Inputs& in) {
                     return Inputs{in[0].t(), in[1]};
                   },
                   [](const Inputs& in) { return ferry::cat(in, 1); }});
    out.push_back({"stack",
                   dt,
                   "[3, 4] x [3, 4] x [3, 4] dim=1",
                   "odd",
                   0,
                   inputs_of({{{3, 4}, {3, 4}, {3, 4}}}, dt),
                   {},
                   [](const Inputs& in) { return ferry::stack(in, 1); }});
  }
}

void add_factories(std::vector<Case>& out) {
  // The input only says which device to make the tensor on.
  auto on = [](const Inputs& in) { return in[0].device(); };
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64})
    out.push_back({"arange",
                   dt,
                   "arange(-7, 1016, 1)",
                   "odd",
                   0,
                   inputs_of({{{1}}}, DType::f32),
                   {},
                   [dt, on](const Inputs& in) {
                     return ferry::arange(-7, 1016, 1, {.dtype = dt, .device = on(in)});
                   }});
  for (DType dt : kFloat) {
    out.push_back({"randn",
                   dt,
                   "[4099] seed 5",
                   "odd",
                   threshold(dt, 1e-12),
                   inputs_of({{{1}}}, DType::f32),
                   {},
                   [dt, on](const Inputs& in) {
                     manual_seed(5);
                     return ferry::randn({4099}, {.dtype = dt, .device = on(in)});
                   }});
    out.back().global_rng = true;
    out.push_back({"rand",
                   dt,
                   "[4099] seed 6",
                   "odd",
                   threshold(dt, 1e-12),
                   inputs_of({{{1}}}, DType::f32),
                   {},
                   [dt, on](const Inputs& in) {
                     manual_seed(6);
                     return ferry::rand({4099}, {.dtype = dt, .device = on(in)});
                   }});
    out.back().global_rng = true;
  }
  for (DType dt : {DType::i32, DType::i64, DType::u8, DType::i8, DType::i16}) {
    out.push_back({"randint",
                   dt,
                   "[4099] in [0, 100) seed 7",
                   "odd",
                   0,
                   inputs_of({{{1}}}, DType::f32),
                   {},
                   [dt, on](const Inputs& in) {
                     manual_seed(7);
                     return ferry::randint(0, 100, {4099}, {.dtype = dt, .device = on(in)});
                   }});
    out.back().global_rng = true;
  }
}

}  // namespace

// The composite factories and draws: made of the kernels above, so they give
// the CPU's numbers on every device.
void add_composite_factories(std::vector<Case>& out) {
  auto on = [](const Inputs& in) { return in[0].device(); };
  auto any_input = inputs_of({{{1}}}, DType::f32);
  for (DType dt : {DType::f32, DType::f16, DType::f64, DType::i32, DType::boolean})
    out.push_back({"eye", dt, "eye(5, 7)", "odd", 0, any_input, {}, [dt, on](const Inputs& in) {
                     return ferry::eye(5, 7, {.dtype = dt, .device = on(in)});
                   }});
  for (DType dt : {DType::f32, DType::bf16, DType::f64, DType::i64})
    out.push_back({"linspace",
                   dt,
                   "linspace(-3, 7.5, 1001)",
                   "odd",
                   threshold(dt, 0),
                   any_input,
                   {},
                   [dt, on](const Inputs& in) {
                     return ferry::linspace(-3, 7.5, 1001, {.dtype = dt, .device = on(in)});
                   }});
  for (DType dt : {DType::f32, DType::f64})
    out.push_back({"logspace",
                   dt,
                   "logspace(-2, 3, 77, base 2)",
                   "odd",
                   threshold(dt, 1e-12),
                   any_input,
                   {},
                   [dt, on](const Inputs& in) {
                     return ferry::logspace(-2, 3, 77, 2, {.dtype = dt, .device = on(in)});
                   }});
  out.push_back({"randperm",
                 DType::i64,
                 "randperm(1000) seed 8",
                 "odd",
                 0,
                 any_input,
                 {},
                 [on](const Inputs& in) {
                   manual_seed(8);
                   return ferry::randperm(1000, {.device = on(in)});
                 }});
  out.back().global_rng = true;
  for (DType dt : kFloat) {
    out.push_back({"bernoulli",
                   dt,
                   "[4099] p in [0, 1] seed 9",
                   "odd",
                   0,
                   inputs_of({{{4099}}, 0, 1}, dt),
                   {},
                   [](const Inputs& in) {
                     manual_seed(9);
                     return ferry::bernoulli(in[0]);
                   }});
    out.back().global_rng = true;
  }
  for (DType dt : {DType::f32, DType::f64})
    for (bool replacement : {true, false}) {
      out.push_back({"multinomial",
                     dt,
                     fmt::format("[4, 50] weights in [0.1, 1] 30 samples{} seed 10",
                                 replacement ? " with replacement" : ""),
                     "odd",
                     0,
                     inputs_of({{{4, 50}}, 0.1, 1}, dt),
                     {},
                     [replacement](const Inputs& in) {
                       manual_seed(10);
                       return ferry::multinomial(in[0], 30, replacement);
                     }});
      out.back().global_rng = true;
    }
}

void add_other_cases(std::vector<Case>& out) {
  add_composite_factories(out);
  add_matmul(out);
  add_layer_norm(out);
  add_indexing(out);
  add_factories(out);
  // The cases whose API name is not their kernel's (Case::kernels).
  for (Case& c : out) {
    if (c.op == "rand") c.kernels = {OpId::random_uniform};
    if (c.op == "randn") c.kernels = {OpId::random_normal};
    if (c.op == "randint") c.kernels = {OpId::random_int};
  }
}

}  // namespace ferry::conformance
