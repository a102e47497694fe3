// tests/test_training_kernels.cpp — the element-wise and index kernels backward passes use
// (docs/kernel-contract.md, "Ops for training"), called straight through each device's
// kernel table:
//  - the activation derivatives against closed forms computed here in double, and the
//    closed forms against central finite differences of the forward ops;
//  - index_add / scatter_add against a naive loop, bit for bit (the determinism rule);
//  - every Vulkan kernel against the CPU's, including tensors cut to fit a small
//    storage-buffer range (the CTest entry training_kernels_vulkan_split).
// The optimizer kernels are in tests/test_training_optim.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "training_test_util.hpp"

namespace {

using namespace training_test;

// ---- activation backward ----

struct Activation {
  const char* op;
  bool from_output;                          // z is the forward output y (else the input x)
  double (*forward)(double x);               // for the finite differences
  double (*derivative)(double g, double z);  // the closed form, in terms of z
};

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
constexpr double kK = 0.79788456080286536, kC = 0.044715;

const Activation kActivations[] = {
    {"relu_backward", true, [](double x) { return x > 0 ? x : 0.0; },
     [](double g, double y) { return y > 0 || std::isnan(y) ? g : 0.0; }},
    {"sigmoid_backward", true, sigmoid, [](double g, double y) { return g * y * (1 - y); }},
    {"tanh_backward", true, [](double x) { return std::tanh(x); },
     [](double g, double y) { return g * (1 - y * y); }},
    {"gelu_backward", false, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); },
     [](double g, double x) {
       const double cdf = 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
       const double pdf = std::exp(-x * x / 2) / std::sqrt(2 * M_PI);
       return g * (cdf + x * pdf);
     }},
    {"gelu_tanh_backward", false,
     [](double x) { return 0.5 * x * (1 + std::tanh(kK * (x + kC * x * x * x))); },
     [](double g, double x) {
       const double t = std::tanh(kK * (x + kC * x * x * x));
       return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kK * (1 + 3 * kC * x * x));
     }},
    {"silu_backward", false, [](double x) { return x * sigmoid(x); },
     [](double g, double x) {
       const double s = sigmoid(x);
       return g * s * (1 + x * (1 - s));
     }},
};

enum class Layout { contiguous, transposed, broadcast };
const Layout kLayouts[] = {Layout::contiguous, Layout::transposed, Layout::broadcast};
const char* name(Layout l) {
  return l == Layout::contiguous   ? "contiguous"
         : l == Layout::transposed ? "transposed"
                                   : "broadcast";
}

constexpr std::int64_t kRows = 8, kCols = 33;

// A [kRows, kCols] view of `base` values on `dev` in `dt`: dense, a transpose of a
// [kCols, kRows] tensor, or (broadcast) an expansion of a [1, kCols] row (`row`) or a
// [kRows, 1] column, with stride 0.
Tensor make_view(const std::vector<double>& base, Layout layout, bool row, DType dt,
                 const ferry::Device& dev) {
  switch (layout) {
    case Layout::contiguous:
      return ferry::tensor(base, {kRows, kCols}).to(dt).to(dev);
    case Layout::transposed:
      return ferry::tensor(base, {kCols, kRows}).to(dt).to(dev).t();
    case Layout::broadcast:
      break;
  }
  const Shape s = row ? Shape{1, kCols} : Shape{kRows, 1};
  std::vector<double> part(base.begin(), base.begin() + numel(s));
  return ferry::tensor(part, s).to(dt).to(dev).expand({kRows, kCols});
}

// The inputs of one activation case: x (f64), grad and z (in dt) as views of one layout.
struct ActivationInputs {
  Tensor x, grad, z;
};
ActivationInputs activation_inputs(const Activation& a, Layout layout, DType dt,
                                   const ferry::Device& dev) {
  std::vector<double> x = values(kRows * kCols, -4, 4, 1), g = values(kRows * kCols, -2, 2, 2);
  std::vector<double> z = x;
  if (a.from_output)
    for (double& v : z) v = a.forward(v);
  return {make_view(x, layout, true, DType::f64, cpu()), make_view(g, layout, false, dt, dev),
          make_view(z, layout, true, dt, dev)};
}

Tensor run_activation(const Activation& a, const Tensor& grad, const Tensor& z) {
  Tensor out = ferry::empty(grad.sizes(), {.dtype = grad.dtype(), .device = grad.device()});
  call(grad.device(), a.op, {grad, z}, {out});
  return out;
}

TEST(TrainingKernels, ActivationBackwardMatchesClosedFormsAndFiniteDifferences) {
  for (const Activation& a : kActivations)
    for (Layout layout : kLayouts)
      for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
        const std::string what =
            std::string(a.op) + " " + name(layout) + " " + std::string(ferry::dtype_name(dt));
        ActivationInputs in = activation_inputs(a, layout, dt, cpu());
        if (layout != Layout::contiguous) {
          ASSERT_FALSE(in.grad.is_contiguous());
        }
        const std::vector<double> got = run_activation(a, in.grad, in.z).to_vector<double>();
        const std::vector<double> g = in.grad.to_vector<double>(), z = in.z.to_vector<double>(),
                                  x = in.x.to_vector<double>();
        // The closed form at the kernel's (rounded) inputs; the kernel computes in float
        // (double for f64) and rounds once.
        std::vector<double> want(got.size());
        for (std::size_t i = 0; i < got.size(); ++i) want[i] = a.derivative(g[i], z[i]);
        // atol: the derivatives of gelu, gelu_tanh and silu cross zero, where the float
        // terms that cancel leave an absolute error of a few float ulps of 1.
        const double tol = dt == DType::f64 ? 1e-13 : dt == DType::f32 ? 2e-6 : 2 * eps_of(dt);
        expect_near(got, want, tol, dt == DType::f64 ? 1e-14 : 1e-6, what + " vs closed form");
        // The closed form against a central difference of the forward op, in double.
        for (std::size_t i = 0; i < x.size(); ++i) {
          if (a.from_output && std::fabs(x[i]) < 1e-3) continue;  // relu's kink
          const double h = 1e-6;
          const double fd = g[i] * (a.forward(x[i] + h) - a.forward(x[i] - h)) / (2 * h);
          const double exact = a.derivative(g[i], a.from_output ? a.forward(x[i]) : x[i]);
          ASSERT_NEAR(exact, fd, 1e-7 + 1e-7 * std::fabs(fd)) << what << " at x = " << x[i];
          // And the f32 kernel against the difference directly (its y input rounded).
          if (dt == DType::f32) {
            ASSERT_NEAR(got[i], fd, 2e-5 + 1e-4 * std::fabs(fd)) << what << " at x = " << x[i];
          }
        }
      }
}

// Special values, PyTorch's behaviour: relu_backward passes the gradient for a NaN y and
// zeroes it for y <= 0 (even a NaN gradient); NaN inputs otherwise propagate; the gelus'
// x * pdf is inf * 0 = NaN at infinite x, as in PyTorch.
struct Special {
  const char* op;
  double g, z, want;
};
const Special kSpecials[] = {
    {"relu_backward", 2.5, kNaN, 2.5},
    {"relu_backward", 2.5, kInf, 2.5},
    {"relu_backward", 2.5, -kInf, 0},
    {"relu_backward", kNaN, -1, 0},
    {"relu_backward", 2.5, 0, 0},
    {"relu_backward", kNaN, 1, kNaN},
    {"sigmoid_backward", kInf, 0.5, kInf},
    {"sigmoid_backward", 1, kNaN, kNaN},
    {"tanh_backward", 3, 1, 0},
    {"tanh_backward", 1, kNaN, kNaN},
    {"tanh_backward", -kInf, 0, -kInf},
    {"gelu_backward", 1, kNaN, kNaN},
    {"gelu_backward", 1, kInf, kNaN},
    {"gelu_backward", 1, 12, 1},
    {"gelu_backward", 1, -12, 0},
    {"gelu_tanh_backward", 1, kNaN, kNaN},
    {"gelu_tanh_backward", 1, 12, 1},
    {"gelu_tanh_backward", 1, -12, 0},
    {"silu_backward", 1, kNaN, kNaN},
    {"silu_backward", 1, -kInf, kNaN},
    {"silu_backward", 2, 40, 2},
    {"silu_backward", 2, -40, 0},
};

std::vector<double> run_specials(const ferry::Device& dev, DType dt) {
  std::vector<double> got;
  for (const Special& s : kSpecials) {
    Tensor g = ferry::tensor(std::vector<double>{s.g}).to(dt).to(dev);
    Tensor z = ferry::tensor(std::vector<double>{s.z}).to(dt).to(dev);
    for (const Activation& a : kActivations)
      if (std::string(a.op) == s.op) got.push_back(run_activation(a, g, z).to_vector<double>()[0]);
  }
  return got;
}

TEST(TrainingKernels, ActivationBackwardSpecialValues) {
  std::vector<double> want;
  for (const Special& s : kSpecials) want.push_back(s.want);
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64})
    expect_near(run_specials(cpu(), dt), want, 0, 1e-8, std::string(ferry::dtype_name(dt)));
}

// f32 runs of GELU and its derivative go a vector at a time through libmvec's erfc and exp (Note
// [CPU vector math]); a one-element tensor takes the functor. The two agree within a few ulp
// on a sweep (absolute ones of the derivative's terms, of size 1, where they cancel near x =
// -0.75) and on the special values, NaN for NaN and infinities where they fall.
TEST(TrainingKernels, CpuGeluVectorRunsAgreeWithTheFunctor) {
  std::vector<float> xs = {float(kNaN), float(kInf), -float(kInf), -0.0f,  0.0f,   12,
                           -12,         40,          -40,          1e-30f, -1e-30f};
  for (int i = 0; i <= 2000; ++i) xs.push_back(-10.0f + 0.01f * float(i));
  std::vector<float> gs;
  for (std::size_t i = 0; i < xs.size(); ++i) gs.push_back(i % 3 == 0 ? -1.5f : 0.75f);
  const Tensor x = ferry::tensor(xs), g = ferry::tensor(gs);
  const Tensor y = ferry::gelu(x);
  const Tensor dx = ferry::empty(x.sizes());
  call(cpu(), "gelu_backward", {g, x}, {dx});
  const std::vector<float> yv = y.to_vector<float>(), dv = dx.to_vector<float>();
  // Within `ulps` float ulps of `scale`: the value's own for gelu, at least |g|'s for the
  // derivative.
  auto near = [](float got, float want, float scale, float ulps) {
    if (std::isnan(want) || std::isinf(want))
      return std::isnan(got) == std::isnan(want) && (std::isnan(want) || got == want);
    return std::fabs(got - want) <= ulps * std::numeric_limits<float>::epsilon() * scale;
  };
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const Tensor xi = ferry::tensor(std::vector<float>{xs[i]});
    const Tensor gi = ferry::tensor(std::vector<float>{gs[i]});
    const float y1 = ferry::gelu(xi).item<float>();
    const Tensor d1 = ferry::empty({1});
    call(cpu(), "gelu_backward", {gi, xi}, {d1});
    EXPECT_TRUE(near(yv[i], y1, std::fabs(y1), 2))
        << "gelu at x = " << xs[i] << ": " << yv[i] << " vs " << y1;
    const float d = d1.item<float>();
    EXPECT_TRUE(near(dv[i], d, std::max(std::fabs(d), std::fabs(gs[i])), 4))
        << "gelu_backward at x = " << xs[i] << ": " << dv[i] << " vs " << d;
  }
}

TEST(TrainingKernels, VulkanActivationBackwardMatchesCpu) {
  SKIP_WITHOUT_VULKAN();
  for (DType dt : kGpuFloats) {
    if (!vulkan_takes(dt)) continue;
    const std::string d(ferry::dtype_name(dt));
    // GLSL's exp, erf and tanh are a few ulp from the CPU's libm; 16-bit results round the same
    // float at most one ulp apart.
    const double rtol = dt == DType::f32 ? 1e-5 : 4 * eps_of(dt), atol = 1e-6;
    for (const Activation& a : kActivations)
      for (Layout layout : kLayouts) {
        ActivationInputs c = activation_inputs(a, layout, dt, cpu());
        ActivationInputs v = activation_inputs(a, layout, dt, vulkan());
        if (layout != Layout::contiguous) {
          ASSERT_FALSE(v.z.is_contiguous());
        }
        expect_near(run_activation(a, v.grad, v.z).to_vector<double>(),
                    run_activation(a, c.grad, c.z).to_vector<double>(), rtol, atol,
                    std::string(a.op) + " " + name(layout) + " " + d);
      }
    expect_near(run_specials(vulkan(), dt), run_specials(cpu(), dt), rtol, 1e-6, "specials " + d);
  }
}

// ---- index_add, scatter_add ----

// The kernels' element add: floats in float (rounded on every store), integers wrapping.
template <typename T> T add_elem(T a, T b) {
  if constexpr (std::is_same_v<T, ferry::Half> || std::is_same_v<T, ferry::BFloat16>)
    return T(float(a) + float(b));
  else if constexpr (std::is_floating_point_v<T>)
    return a + b;
  else
    return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
}

// The naive loop: src's elements in row-major order (so every output element takes its
// contributions in increasing order along dim), out[c with c[dim] = index(c)] += src[c].
template <typename T>
std::vector<T> naive_accumulate(std::vector<T> out, const Shape& out_shape,
                                const std::vector<T>& src, const Shape& src_shape,
                                const std::vector<std::int64_t>& index, bool index_add, int dim) {
  const std::int64_t n = numel(src_shape);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t c[3], rem = i;
    for (int d = 2; d >= 0; --d) {
      c[d] = rem % src_shape[std::size_t(d)];
      rem /= src_shape[std::size_t(d)];
    }
    const std::int64_t v = index_add ? index[std::size_t(c[dim])] : index[std::size_t(i)];
    c[dim] = v;
    const std::int64_t o = (c[0] * out_shape[1] + c[1]) * out_shape[2] + c[2];
    out[std::size_t(o)] = add_elem(out[std::size_t(o)], src[std::size_t(i)]);
  }
  return out;
}

// Values whose sums depend on the order they are added in: magnitudes from 1e-3 to 1e3
// (f16 sums stay finite); integers spread over the whole range, so sums wrap.
template <typename T> std::vector<T> accumulate_values(std::int64_t n, int seed) {
  std::vector<T> v(static_cast<std::size_t>(n));
  const std::vector<double> u = values(n, 0, 1, seed);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double mag = std::pow(10.0, -3 + 6 * std::fmod(u[i] * 7.31, 1.0));
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      v[i] = T(U(std::numeric_limits<T>::max()) - U(i % 7) * U(std::numeric_limits<T>::max() / 3));
    } else
      v[i] = T(float(u[i] < 0.5 ? -mag : mag));
  }
  return v;
}

// One accumulation case: a 3-D output, dim, src of the given shape made strided by building
// it permuted, and an index with repeated entries (the contract's increasing-j order matters).
struct AccumulateCase {
  Shape out_shape, src_shape;
  int dim;
};

template <typename T> std::vector<T> bits_of(const Tensor& t) { return t.to_vector<T>(); }

// Runs the kernel on `dev` and returns the output; the index and src are built from the
// same values on every device.
template <typename T>
std::vector<T> run_accumulate(const ferry::Device& dev, bool index_add, const AccumulateCase& c,
                              const std::vector<T>& init, const std::vector<T>& src,
                              const std::vector<std::int64_t>& index) {
  const DType dt = ferry::dtype_of<T>();
  Tensor out = ferry::tensor(init, c.out_shape).to(dev);
  // src (and scatter_add's index) stored as [s2, s0, s1], viewed as [s0, s1, s2]: strided.
  auto strided = [&](auto data, const Shape& s) {
    const Shape stored{s[2], s[0], s[1]};
    decltype(data) perm(data.size());
    for (std::int64_t a = 0; a < s[0]; ++a)
      for (std::int64_t b = 0; b < s[1]; ++b)
        for (std::int64_t k = 0; k < s[2]; ++k)
          perm[std::size_t((k * s[0] + a) * s[1] + b)] =
              data[std::size_t((a * s[1] + b) * s[2] + k)];
    return ferry::tensor(perm, stored).to(dev).permute({1, 2, 0});
  };
  Tensor s = strided(src, c.src_shape);
  EXPECT_FALSE(s.is_contiguous());
  EXPECT_EQ(s.dtype(), dt);
  Tensor ix = index_add ? ferry::tensor(index).to(dev) : strided(index, c.src_shape);
  call(dev, index_add ? "index_add" : "scatter_add", {s, ix}, {out},
       ferry::Attrs{{"dim", std::int64_t(c.dim)}});
  return out.to_vector<T>();
}

template <typename T> void check_accumulate(bool index_add, const ferry::Device* vk) {
  const char* op = index_add ? "index_add" : "scatter_add";
  for (int dim = 0; dim < 3; ++dim) {
    AccumulateCase c{{5, 6, 7}, {5, 6, 7}, dim};
    if (index_add) {
      c.src_shape[std::size_t(dim)] = 11;  // more contributions than slots: repeats
    } else {
      c.src_shape = {4, 5, 6};  // index.size(d) <= out.size(d)
      c.src_shape[std::size_t(dim)] = 9;
    }
    const std::int64_t out_dim = c.out_shape[std::size_t(dim)];
    std::vector<std::int64_t> index(
        std::size_t(index_add ? c.src_shape[std::size_t(dim)] : numel(c.src_shape)));
    for (std::size_t i = 0; i < index.size(); ++i)
      index[i] = std::int64_t((i * 5 + i / 3) % std::size_t(out_dim));
    const auto init = accumulate_values<T>(numel(c.out_shape), 3);
    const auto src = accumulate_values<T>(numel(c.src_shape), 4);
    const auto want = naive_accumulate(init, c.out_shape, src, c.src_shape, index, index_add, dim);
    const std::string what = std::string(op) + " dim " + std::to_string(dim) + " " +
                             std::string(ferry::dtype_name(ferry::dtype_of<T>()));
    const auto got = run_accumulate<T>(cpu(), index_add, c, init, src, index);
    // Bit for bit: the same adds in the same order.
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(T)), 0) << what;
    if (vk && vulkan_takes(ferry::dtype_of<T>())) {
      const auto gv = run_accumulate<T>(*vk, index_add, c, init, src, index);
      if constexpr (std::is_same_v<T, ferry::Half> || std::is_same_v<T, ferry::BFloat16>) {
        std::vector<double> a(gv.begin(), gv.end()), b(got.begin(), got.end());
        expect_near(a, b, 4 * eps_of(ferry::dtype_of<T>()), 1e-3, what + " on vulkan");
      } else {
        ASSERT_EQ(std::memcmp(gv.data(), got.data(), got.size() * sizeof(T)), 0)
            << what << " on vulkan";
      }
    }
  }
}

TEST(TrainingKernels, IndexAddAndScatterAddMatchTheNaiveLoopBitForBit) {
  for (bool index_add : {true, false}) {
    check_accumulate<float>(index_add, nullptr);
    check_accumulate<double>(index_add, nullptr);
    check_accumulate<ferry::Half>(index_add, nullptr);
    check_accumulate<ferry::BFloat16>(index_add, nullptr);
    check_accumulate<std::int32_t>(index_add, nullptr);
    check_accumulate<std::int64_t>(index_add, nullptr);
    check_accumulate<std::uint8_t>(index_add, nullptr);
  }
}

TEST(TrainingKernels, VulkanIndexAddAndScatterAddMatchCpu) {
  SKIP_WITHOUT_VULKAN();
  const ferry::Device vk = vulkan();
  for (bool index_add : {true, false}) {
    check_accumulate<float>(index_add, &vk);
    check_accumulate<ferry::Half>(index_add, &vk);
    check_accumulate<ferry::BFloat16>(index_add, &vk);
    check_accumulate<std::int32_t>(index_add, &vk);
    check_accumulate<std::int64_t>(index_add, &vk);
    check_accumulate<std::uint8_t>(index_add, &vk);
  }
}

// An embedding's backward: many contributions per row, enough work for the CPU to use its
// threads; every run and both devices give the same f32 bits as the naive loop.
void check_embedding_backward(const ferry::Device* vk, std::int64_t tokens, std::int64_t dim) {
  const Shape out_shape{50, dim, 1}, src_shape{tokens, dim, 1};
  std::vector<std::int64_t> index(static_cast<std::size_t>(tokens));
  for (std::size_t i = 0; i < index.size(); ++i) index[i] = std::int64_t((i * i + 7 * i) % 50);
  const auto init = std::vector<float>(std::size_t(numel(out_shape)), 0.0f);
  const auto src = accumulate_values<float>(numel(src_shape), 5);
  const auto want = naive_accumulate(init, out_shape, src, src_shape, index, true, 0);
  auto run = [&](const ferry::Device& dev) {
    Tensor out = ferry::tensor(init, out_shape).to(dev);
    call(dev, "index_add", {ferry::tensor(src, src_shape).to(dev), ferry::tensor(index).to(dev)},
         {out}, ferry::Attrs{{"dim", std::int64_t(0)}});
    return out.to_vector<float>();
  };
  for (int rep = 0; rep < 2; ++rep) {
    const auto got = run(cpu());
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "cpu run " << rep;
    if (vk) {
      const auto gv = run(*vk);
      ASSERT_EQ(std::memcmp(gv.data(), want.data(), gv.size() * 4), 0) << "vulkan run " << rep;
    }
  }
}

TEST(TrainingKernels, EmbeddingBackwardIsDeterministic) {
  check_embedding_backward(nullptr, 20000, 64);
}

TEST(TrainingKernels, VulkanEmbeddingBackwardIsDeterministic) {
  SKIP_WITHOUT_VULKAN();
  const ferry::Device vk = vulkan();
  // Wide rows where the storage-buffer range allows, else rows whose out lines fit a binding.
  check_embedding_backward(&vk, 3000, vulkan_storage_range() >= 4096 ? 16 : 2);
}

// Out-of-range indices (the core refuses them first, Note [Index bounds]): the CPU raises
// ShapeError, Vulkan skips them; neither writes outside the output view.
TEST(TrainingKernels, IndexAddNeverWritesOutsideTheOutput) {
  for (bool on_vulkan : {false, true}) {
    if (on_vulkan && !ferry::is_available("vulkan")) continue;
    const ferry::Device dev = on_vulkan ? vulkan() : cpu();
    Tensor guarded = ferry::zeros({6, 4}, {.dtype = DType::f32, .device = dev});
    Tensor out = guarded.narrow(0, 1, 4);  // rows 0 and 5 are guards
    Tensor src = ferry::ones({3, 4}, {.dtype = DType::f32, .device = dev});
    Tensor index = ferry::tensor(std::vector<std::int64_t>{-1, 2, 4}).to(dev);
    auto run = [&] {
      call(dev, "index_add", {src, index}, {out}, ferry::Attrs{{"dim", std::int64_t(0)}});
    };
    if (on_vulkan) {
      run();
    } else {
      EXPECT_THROW(run(), ferry::ShapeError);
    }
    const std::vector<float> g = guarded.to_vector<float>();
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(g[std::size_t(k)], 0.0f) << dev.str();
      EXPECT_EQ(g[std::size_t(20 + k)], 0.0f) << dev.str();
    }
    if (on_vulkan) {
      EXPECT_EQ(g[std::size_t(3 * 4)], 1.0f);  // index 2 -> row 3 of guarded
    }
  }
}

// ---- tensors larger than one storage-buffer binding (FERRY_VULKAN_MAX_STORAGE_RANGE) ----

TEST(TrainingKernels, VulkanSplitAccumulation) {
  SKIP_UNLESS_SMALL_RANGE();
  const std::uint64_t range = vulkan_storage_range();
  // src several bindings long along dim and across it; each output line fits one binding
  // (it spans 8 * lines + 1 elements for dim 0).
  const std::int64_t lines =
      2 * std::min<std::int64_t>(12, ((std::int64_t(range) - 300) / 4 - 1) / 16);
  ASSERT_GE(lines, 2);
  for (int dim : {0, 1}) {
    const std::int64_t count = std::int64_t(3 * range / 4) / lines + 5;
    const Shape out_shape = dim == 0 ? Shape{9, lines / 2, 2} : Shape{lines / 2, 9, 2};
    const Shape src_shape = dim == 0 ? Shape{count, lines / 2, 2} : Shape{lines / 2, count, 2};
    for (bool index_add : {true, false}) {
      std::vector<std::int64_t> index(std::size_t(index_add ? count : numel(src_shape)));
      for (std::size_t i = 0; i < index.size(); ++i) index[i] = std::int64_t((i * 7 + i / 5) % 9);
      const auto init = accumulate_values<float>(numel(out_shape), 1);
      const auto src = accumulate_values<float>(numel(src_shape), 2);
      ASSERT_GT(std::uint64_t(numel(src_shape)) * 4, 2 * range);
      const auto want = naive_accumulate(init, out_shape, src, src_shape, index, index_add, dim);
      const AccumulateCase c{out_shape, src_shape, dim};
      const auto got = run_accumulate<float>(vulkan(), index_add, c, init, src, index);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
          << (index_add ? "index_add" : "scatter_add") << " dim " << dim;
    }
  }
  // Contiguous src: whole rows of contributions fit, cut into chunks along dim.
  const ferry::Device vk = vulkan();
  check_embedding_backward(&vk, 200, range >= 4096 ? 16 : 2);
  // An output larger than a binding along dim itself (an embedding table): cut into ranges
  // of rows, each dispatch adding the contributions that fall in its range.
  const std::int64_t rows = std::int64_t(range / 4);  // 4 bindings of [rows, 2, 2] f32
  for (bool index_add : {true, false}) {
    const Shape out_shape{rows, 2, 2}, src_shape{300, 2, 2};
    std::vector<std::int64_t> index(std::size_t(index_add ? 300 : numel(src_shape)));
    for (std::size_t i = 0; i < index.size(); ++i)
      index[i] = std::int64_t((i * i * 31 + i) % std::size_t(rows));
    const auto init = accumulate_values<float>(numel(out_shape), 3);
    const auto src = accumulate_values<float>(numel(src_shape), 4);
    const auto want = naive_accumulate(init, out_shape, src, src_shape, index, index_add, 0);
    const auto got =
        run_accumulate<float>(vulkan(), index_add, {out_shape, src_shape, 0}, init, src, index);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
        << (index_add ? "index_add" : "scatter_add") << " into rows larger than a binding";
  }
}

TEST(TrainingKernels, VulkanSplitActivation) {
  SKIP_UNLESS_SMALL_RANGE();
  const std::int64_t n = std::int64_t(vulkan_storage_range());  // 4 bindings of f32
  for (const Activation& a : kActivations) {
    Tensor g = ferry::tensor(values(n, -2, 2, 1)).to(DType::f32),
           x = ferry::tensor(values(n, -4, 4, 2)).to(DType::f32);
    expect_near(run_activation(a, g.to(vulkan()), x.to(vulkan())).to_vector<double>(),
                run_activation(a, g, x).to_vector<double>(), 1e-5, 1e-6, a.op);
  }
}

// Initialization cut into parts: arange and the draws of a tensor beyond one binding, each
// part told where it starts, give the CPU's numbers (arange in f64 and i64 and the uniform
// draws bit for bit; arange in f32 adds in float, a few ulp from the CPU's double).
TEST(TrainingKernels, VulkanSplitArangeAndDraws) {
  SKIP_UNLESS_SMALL_RANGE();
  const std::int64_t n = std::int64_t(vulkan_storage_range());  // 4 bindings of f32
  for (DType dt : {DType::f32, DType::f64, DType::i64}) {
    if (!vulkan_takes(dt)) continue;
    const std::string what = "arange " + std::string(ferry::dtype_name(dt));
    const double step = dt == DType::i64 ? 3 : 0.37;
    const Tensor want = ferry::arange(-2, double(n) * step - 2, step, {.dtype = dt});
    const Tensor got =
        ferry::arange(-2, double(n) * step - 2, step, {.dtype = dt, .device = vulkan()});
    ASSERT_EQ(got.numel(), want.numel()) << what;
    const double tol = dt == DType::f32 ? 1e-6 : 0;
    expect_near(got.to_vector<double>(), want.to_vector<double>(), tol, tol, what);
  }
  for (DType dt : {DType::f32, DType::f64}) {
    if (!vulkan_takes(dt)) continue;
    ferry::manual_seed(3);
    const Tensor want = ferry::rand({n}, {.dtype = dt});
    ferry::manual_seed(3);
    const Tensor got = ferry::rand({n}, {.dtype = dt, .device = vulkan()});
    expect_near(got.to_vector<double>(), want.to_vector<double>(), 0, 0,
                "uniform " + std::string(ferry::dtype_name(dt)));
  }
}

// ---- bad input ----

TEST(TrainingKernels, BadInputToBackwardKernelsRaisesTypedErrors) {
  std::vector<ferry::Device> devs{cpu()};
  if (ferry::is_available("vulkan")) devs.push_back(vulkan());
  for (const ferry::Device& dev : devs) {
    // Made on the CPU and moved: the base shader variant fills no bool.
    auto ones = [&](std::int64_t n, DType dt) { return ferry::ones({n}, {.dtype = dt}).to(dev); };
    auto zeros = [&](std::int64_t n, DType dt) { return ferry::zeros({n}, {.dtype = dt}).to(dev); };
    const DType i32 = DType::i32, f32 = DType::f32, b = DType::boolean;
    // Integer activations, mixed dtypes; bool accumulation; a non-i64 index.
    EXPECT_FERRY_ERROR(call(dev, "gelu_backward", {ones(3, i32), ones(3, i32)}, {ones(3, i32)}),
                       ferry::UnsupportedError, "gelu_backward");
    EXPECT_FERRY_ERROR(call(dev, "silu_backward", {ones(3, f32), ones(3, i32)}, {ones(3, f32)}),
                       ferry::DTypeError, "silu_backward");
    EXPECT_FERRY_ERROR(call(dev, "index_add", {ones(2, b), zeros(2, DType::i64)}, {zeros(2, b)},
                            ferry::Attrs{{"dim", std::int64_t(0)}}),
                       ferry::UnsupportedError, "index_add");
    EXPECT_FERRY_ERROR(call(dev, "scatter_add", {ones(2, f32), zeros(2, i32)}, {zeros(2, f32)},
                            ferry::Attrs{{"dim", std::int64_t(0)}}),
                       ferry::DTypeError, "scatter_add", "i64");
    EXPECT_FERRY_ERROR(call(dev, "index_add", {ones(2, f32), zeros(3, DType::i64)}, {zeros(2, f32)},
                            ferry::Attrs{{"dim", std::int64_t(0)}}),
                       ferry::ShapeError, "index_add");
  }
}

}  // namespace
