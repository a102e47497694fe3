// The Vulkan f64 transcendentals (shaders/transcendentals_f64.glsl) against the CPU's, which
// are the C library's: on a grid from the smallest denormal to the largest double, the
// special values, and the points where the algorithms switch, each op within a few ulp
// (fmod exactly), NaN where the CPU gives NaN, infinities and signed zeros as the CPU's.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"

using ferry::DType;
using ferry::Tensor;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// Distance in ulps: the doubles' bit patterns mapped to a monotonic integer line.
std::uint64_t ulps_between(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : UINT64_MAX;
  auto ordered = [](double v) {
    const auto i = std::bit_cast<std::int64_t>(v);
    return i < 0 ? std::numeric_limits<std::int64_t>::min() - i : i;
  };
  const std::int64_t d = ordered(a) - ordered(b);
  return d < 0 ? std::uint64_t(-d) : std::uint64_t(d);
}

// Values over the whole range and where the algorithms change course.
std::vector<double> grid() {
  std::vector<double> v = {0.0,
                           -0.0,
                           kInf,
                           -kInf,
                           kNan,
                           std::numeric_limits<double>::denorm_min(),
                           -std::numeric_limits<double>::denorm_min(),
                           std::numeric_limits<double>::min(),
                           std::numeric_limits<double>::max(),
                           -std::numeric_limits<double>::max(),
                           1.0,
                           -1.0,
                           0.5,
                           -0.5,
                           2.0,
                           1e22,  // sin and cos need all of the reduction here
                           -1e22,
                           1e300,
                           0.7853981633974483,
                           1.5707963267948966,
                           3.141592653589793,
                           6.283185307179586,
                           709.78,
                           -745.0,
                           710.4,
                           -708.5,
                           27.2,
                           -27.2,
                           0.34657359027997264,
                           0.999,
                           0.9999999999,
                           -0.9999999999999999};
  for (int e = -1074; e <= 1023; e += 7)  // every binade, a few values in each
    for (double m : {1.0, 1.37, 1.999})
      for (double s : {1.0, -1.0}) v.push_back(s * std::ldexp(m, e));
  for (int i = 0; i < 1200; ++i) {  // dense where the functions bend
    const double f = std::fmod(i * 0.6180339887498949 + 0.1, 1.0);
    v.push_back(-40 + 80 * f);
    v.push_back(-1 + 2 * f);
    v.push_back(-6 + 12 * f);
  }
  for (int k = 1; k < 2000; k += 37) v.push_back(k * 1.5707963267948966);  // near multiples of pi/2
  return v;
}

struct OpCase {
  std::string name;
  std::function<Tensor(const Tensor&)> fn;
  std::uint64_t max_ulps;
};

Tensor f64(const std::vector<double>& v) { return ferry::tensor(v, {std::int64_t(v.size())}); }

void expect_within_ulps(const std::string& name, const Tensor& got, const Tensor& want,
                        const std::vector<double>& in, std::uint64_t max_ulps,
                        const std::vector<double>* second = nullptr) {
  const std::vector<double> g = got.to(ferry::Device::cpu()).to_vector<double>();
  const std::vector<double> w = want.to_vector<double>();
  ASSERT_EQ(g.size(), w.size());
  std::uint64_t worst = 0;
  std::size_t worst_i = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const std::uint64_t d = ulps_between(g[i], w[i]);
    if (d > worst) worst = d, worst_i = i;
  }
  EXPECT_LE(worst, max_ulps) << name << " at input " << in[worst_i]
                             << (second ? ", " + std::to_string((*second)[worst_i]) : "")
                             << ": vulkan " << g[worst_i] << ", cpu " << w[worst_i];
  if (std::getenv("FERRY_PRINT_ULPS"))
    std::printf("%-14s max %llu ulp\n", name.c_str(), (unsigned long long)worst);
}

}  // namespace

TEST(F64VulkanMath, TranscendentalsAreWithinAFewUlpOfTheCLibrary) {
  if (!ferry::is_available("vulkan:0")) GTEST_SKIP() << "no Vulkan device";
  const ferry::Device vk("vulkan:0");
  if (!ferry::device_impl(vk).supports(ferry::OpId::exp, DType::f64))
    GTEST_SKIP() << "vulkan:0 lacks shaderFloat64";
  const std::vector<double> in = grid();
  const Tensor x = f64(in), xv = x.to(vk);
  const std::vector<OpCase> unary = {
      {"exp", [](const Tensor& t) { return ferry::exp(t); }, 2},
      {"expm1", [](const Tensor& t) { return ferry::expm1(t); }, 2},
      {"exp2", [](const Tensor& t) { return ferry::exp2(t); }, 2},
      {"log", [](const Tensor& t) { return ferry::log(t); }, 2},
      {"log1p", [](const Tensor& t) { return ferry::log1p(t); }, 2},
      {"log2", [](const Tensor& t) { return ferry::log2(t); }, 2},
      {"log10", [](const Tensor& t) { return ferry::log10(t); }, 2},
      {"sin", [](const Tensor& t) { return ferry::sin(t); }, 2},
      {"cos", [](const Tensor& t) { return ferry::cos(t); }, 2},
      {"tan", [](const Tensor& t) { return ferry::tan(t); }, 3},
      {"asin", [](const Tensor& t) { return ferry::asin(t); }, 3},
      {"acos", [](const Tensor& t) { return ferry::acos(t); }, 3},
      {"atan", [](const Tensor& t) { return ferry::atan(t); }, 2},
      {"sinh", [](const Tensor& t) { return ferry::sinh(t); }, 3},
      {"cosh", [](const Tensor& t) { return ferry::cosh(t); }, 3},
      {"tanh", [](const Tensor& t) { return ferry::tanh(t); }, 3},
      {"asinh", [](const Tensor& t) { return ferry::asinh(t); }, 3},
      {"acosh", [](const Tensor& t) { return ferry::acosh(t); }, 3},
      {"atanh", [](const Tensor& t) { return ferry::atanh(t); }, 3},
      {"erf", [](const Tensor& t) { return ferry::erf(t); }, 2},
      {"erfc", [](const Tensor& t) { return ferry::erfc(t); }, 4},
      {"erfinv", [](const Tensor& t) { return ferry::erfinv(t); }, 4},
      {"sigmoid", [](const Tensor& t) { return ferry::sigmoid(t); }, 3},
      {"gelu", [](const Tensor& t) { return ferry::gelu(t); }, 4},
      {"gelu tanh", [](const Tensor& t) { return ferry::gelu(t, "tanh"); }, 4},
      {"silu", [](const Tensor& t) { return ferry::silu(t); }, 4},
      {"mish", [](const Tensor& t) { return ferry::mish(t); }, 4},
      {"logsigmoid", [](const Tensor& t) { return ferry::logsigmoid(t); }, 4},
      {"selu", [](const Tensor& t) { return ferry::selu(t); }, 4},
      {"xlogy", [](const Tensor& t) { return ferry::xlogy(t, ferry::abs(t)); }, 2},
      {"floor_divide", [](const Tensor& t) { return ferry::floor_divide(t, 0.7); }, 0},
  };
  for (const OpCase& c : unary) {
    SCOPED_TRACE(c.name);
    expect_within_ulps(c.name, c.fn(xv), c.fn(x), in, c.max_ulps);
  }
  // Binary ops on every pair of a smaller grid (the first operand varying fastest).
  std::vector<double> small;
  for (std::size_t i = 0; i < in.size(); i += 23) small.push_back(in[i]);
  std::vector<double> a, b;
  for (double yv : small)
    for (double xv2 : small) a.push_back(xv2), b.push_back(yv);
  const Tensor ta = f64(a), tb = f64(b), va = ta.to(vk), vb = tb.to(vk);
  using Bin = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, std::pair<Bin, std::uint64_t>>> ops = {
      {"pow", {[](auto& p, auto& q) { return ferry::pow(p, q); }, 4}},
      {"atan2", {[](auto& p, auto& q) { return ferry::atan2(p, q); }, 3}},
      {"hypot", {[](auto& p, auto& q) { return ferry::hypot(p, q); }, 2}},
      {"fmod", {[](auto& p, auto& q) { return ferry::fmod(p, q); }, 0}},
      {"remainder", {[](auto& p, auto& q) { return ferry::remainder(p, q); }, 0}},
  };
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    expect_within_ulps(name, op.first(va, vb), op.first(ta, tb), a, op.second, &b);
  }
}

// erfinv on the CPU (the reference above) against mpmath's (40 digits), into the tail where
// Giles' start is far off and Newton's method has to run until it settles.
TEST(F64Math, ErfinvIsCorrectToTheLastUlpsIntoTheTail) {
  const std::vector<std::pair<double, double>> cases = {{0.9999999999999999, 5.8635847487551676},
                                                        {0.9999999999, 4.572824958544925},
                                                        {0.999, 2.3267537655135246},
                                                        {0.5, 0.4769362762044699},
                                                        {-1e-300, -8.86226925452758e-301},
                                                        {1e-05, 8.862269254759594e-06}};
  std::vector<double> y;
  for (const auto& c : cases) y.push_back(c.first);
  const std::vector<double> got = ferry::erfinv(f64(y)).to_vector<double>();
  for (std::size_t i = 0; i < cases.size(); ++i)
    EXPECT_LE(ulps_between(got[i], cases[i].second), 2u)
        << "erfinv(" << y[i] << ") = " << got[i] << ", mpmath " << cases[i].second;
}

// f64 draws and arange on Vulkan are the CPU's (Note [f64 draws] in ferry/kit/math/philox.hpp):
// the uniform and arange bit for bit, the normal within the ulps of log and cos.
TEST(F64VulkanMath, DrawsAndArangeAreTheCpus) {
  if (!ferry::is_available("vulkan:0")) GTEST_SKIP() << "no Vulkan device";
  const ferry::Device vk("vulkan:0");
  if (!ferry::device_impl(vk).supports(ferry::OpId::random_normal, DType::f64))
    GTEST_SKIP() << "vulkan:0 lacks shaderFloat64";
  const ferry::TensorOptions on_cpu = {.dtype = DType::f64},
                             on_vk = {.dtype = DType::f64, .device = vk};
  const std::vector<double> in(1000, 0.0);
  ferry::manual_seed(7);
  const Tensor u_cpu = ferry::rand({1000}, on_cpu) * 3.0 - 1.0,
               n_cpu = ferry::randn({1000}, on_cpu);
  ferry::manual_seed(7);
  const Tensor u_vk = ferry::rand({1000}, on_vk) * 3.0 - 1.0, n_vk = ferry::randn({1000}, on_vk);
  expect_within_ulps("uniform", u_vk, u_cpu, in, 0);
  expect_within_ulps("normal", n_vk, n_cpu, in, 2);
  const Tensor a_cpu = ferry::arange(-2.5, 1e5, 0.37, on_cpu),
               a_vk = ferry::arange(-2.5, 1e5, 0.37, on_vk);
  expect_within_ulps("arange", a_vk, a_cpu, std::vector<double>(std::size_t(a_cpu.numel())), 0);
}
