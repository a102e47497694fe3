// lgamma, digamma, polygamma and mvlgamma (ferry/ops_special.hpp): against PyTorch's in f32
// and bf16, with gradients (tests/data/pytorch_special_reference.json, written by
// tools/gen_special_reference.py), on every device; in f64 against mpmath's values (40 digits)
// and glibc's lgamma on every device; gradients against finite differences in f64; closed
// forms; the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "torch_reference.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry_test::as_double;
using nlohmann::json;

// A tensor's elements as doubles, all their digits (as_double goes through float).
std::vector<double> values(const Tensor& t) { return t.to(DType::f64).to_vector<double>(); }

Tensor run_case(const std::string& op, const json& a, const std::vector<Tensor>& in) {
  if (op == "lgamma") return ferry::lgamma(in[0]);
  if (op == "digamma") return ferry::digamma(in[0]);
  if (op == "polygamma") return ferry::polygamma(a["n"].get<std::int64_t>(), in[0]);
  if (op == "mvlgamma") return ferry::mvlgamma(in[0], a["p"].get<std::int64_t>());
  ADD_FAILURE() << "unknown op " << op;
  return {};
}

void run_reference(const ferry::Device& dev) {
  ferry_test::run_output_reference_file("pytorch_special_reference.json", dev, 36, run_case);
}
FERRY_TEST_ON_EACH_DEVICE(SpecialFunctions, PyTorchReference, run_reference)

// mpmath's digamma, trigamma and psi_3 (40 digits, rounded to 20) through the reflection,
// the recurrence (and its two ends, 15.9 and 16.1), the zero of digamma and the series alone.
struct Psi {
  double x, psi0, psi1, psi3;
};
const Psi kMpmath[] = {
    {-7.25, 5.1899772149562878875, 19.610354539293269016, 1558.5411952034044973},
    {-3.6, 0.39267528447471196651, 10.66884885621737793, 283.57410304858164526},
    {-2.5, 1.1031566406452431872, 9.5392466449891237539, 194.74787621918762242},
    {-1.1, 10.154163959143848573, 102.74898624046876157, 60013.837094825753993},
    {-0.3, 2.1133097796353988734, 13.945160267805722489, 766.61989041916858035},
    {1e-06, -1000000.5772140200139, 1000000000001.6450222, 6.000000000000001086e+24},
    {0.1, -10.423754940411076232, 101.4332991507927477, 60004.512876790253384},
    {0.5, -1.9635100260214234794, 4.9348022005446793094, 97.409091034002437236},
    {1.0, -0.57721566490153286061, 1.6449340668482264365, 6.4939394022668291491},
    {1.4616321449683622, -9.2412655217294275168e-17, 0.967672245447621255, 1.5509985657339064395},
    {1.5, 0.036489973978576520559, 0.93480220054467930942, 1.4090910340024372364},
    {2.0, 0.42278433509846713939, 0.64493406684822643647, 0.4939394022668291491},
    {2.75, 0.81890102497543259228, 0.43757125764893076144, 0.16061612748946936705},
    {7.5, 1.9467574842460867881, 0.14261589669670379977, 0.0057724366565786937067},
    {15.9, 2.7345430701757738806, 0.064912281599060113516, 0.00054645526676376583807},
    {16.1, 2.7474420055146230693, 0.064080645042418556761, 0.00052573415212834515027},
    {33.3, 3.4904672385202427773, 0.03048544409533888779, 0.000056650890622924352939},
    {1000.5, 6.9077553206487964271, 0.00099999991666669583331, 1.9999990000008749987e-9},
    {100000000.0, 18.420680738952365464, 1.0000000050000000167e-8, 2.0000000300000002e-24},
};

// In f64 the compositions are good to a few parts in 1e15 relative (absolute near digamma's
// zero, where it is 1e-16), and lgamma agrees with glibc's over six decades, both signs, to
// 3e-14 (absolute below 1: lgamma(1) is lgamma(17) - log(16!), two numbers near 30.7).
void f64_is_accurate(const ferry::Device& dev) {
  std::vector<double> xs;
  for (const Psi& p : kMpmath) xs.push_back(p.x);
  const Tensor x = ferry::tensor(xs).to(dev);
  ASSERT_EQ(x.dtype(), DType::f64);
  const std::vector<double> psi0 = values(ferry::digamma(x)), psi1 = values(ferry::polygamma(1, x)),
                            psi3 = values(ferry::polygamma(3, x));
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const Psi& p = kMpmath[i];
    EXPECT_NEAR(psi0[i], p.psi0, 8e-15 * std::max(1.0, std::fabs(p.psi0))) << "digamma " << p.x;
    // Through the reflection the tangent's argument, pi (x - round(x)), is rounded: a few
    // ulp of pi x, amplified by the cot's derivatives for psi_3 at -1.1 (cot^(3) ~ 1e3).
    EXPECT_NEAR(psi1[i], p.psi1, 2e-14 * std::fabs(p.psi1)) << "trigamma " << p.x;
    EXPECT_NEAR(psi3[i], p.psi3, 1e-13 * std::fabs(p.psi3)) << "psi_3 " << p.x;
  }
  std::vector<double> ys;
  for (double v = 1e-3; v < 2e3; v *= 1.37) {
    ys.push_back(v);
    ys.push_back(-v - 0.03125);  // away from the poles
  }
  const std::vector<double> got = values(ferry::lgamma(ferry::tensor(ys).to(dev)));
  for (std::size_t i = 0; i < ys.size(); ++i) {
    int sign = 0;
    const double want = ::lgamma_r(ys[i], &sign);
    EXPECT_NEAR(got[i], want, 3e-14 * std::max(1.0, std::fabs(want))) << ys[i];
  }
}
FERRY_TEST_ON_EACH_DEVICE(SpecialFunctions, F64IsAccurate, f64_is_accurate)

// Closed forms: lgamma(n) = log((n - 1)!), digamma(n + 1) = H_n - gamma, psi_n(1) =
// (-1)^(n+1) n! zeta(n + 1), lgamma(1/2) = log(sqrt(pi)), mvlgamma of p = 1 is lgamma.
TEST(SpecialFunctions, ClosedForms) {
  const double euler_gamma = 0.57721566490153286061;
  std::vector<double> n(20);
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = double(i + 1);
  const std::vector<double> lg = values(ferry::lgamma(ferry::tensor(n)));
  const std::vector<double> dg = values(ferry::digamma(ferry::tensor(n)));
  double log_factorial = 0, harmonic = 0;
  for (std::size_t i = 0; i < n.size(); ++i) {
    EXPECT_NEAR(lg[i], log_factorial, 3e-14 * std::max(1.0, log_factorial)) << n[i];
    EXPECT_NEAR(dg[i], harmonic - euler_gamma, 1e-15 * 4) << n[i];
    log_factorial += std::log(n[i]);
    harmonic += 1 / n[i];
  }
  const Tensor one = ferry::tensor(std::vector<double>{1.0});
  const double zeta2 = std::numbers::pi * std::numbers::pi / 6, zeta3 = 1.2020569031595942854,
               zeta5 = 1.0369277551433699263;
  EXPECT_NEAR(ferry::polygamma(1, one).item<double>(), zeta2, 1e-15);
  EXPECT_NEAR(ferry::polygamma(2, one).item<double>(), -2 * zeta3, 4e-15);
  EXPECT_NEAR(ferry::polygamma(4, one).item<double>(), -24 * zeta5, 1e-13);
  EXPECT_NEAR(ferry::lgamma(ferry::tensor(std::vector<double>{0.5})).item<double>(),
              0.5 * std::log(std::numbers::pi), 1e-15);
  const Tensor x = ferry::tensor(std::vector<double>{0.3, 2.2, 9.5});
  EXPECT_TRUE(ferry::allclose(ferry::mvlgamma(x, 1), ferry::lgamma(x), 0, 1e-15));
  // Integer and bool inputs give f32; 16-bit floats keep their dtype.
  EXPECT_EQ(ferry::lgamma(ferry::tensor(std::vector<std::int64_t>{3})).dtype(), DType::f32);
  EXPECT_EQ(ferry::digamma(ferry::tensor(std::vector<float>{3}).to(DType::f16)).dtype(),
            DType::f16);
  // f16 holds 1e4 but not its lgamma's recurrence product: computed in f32, it is finite.
  EXPECT_NEAR(ferry::lgamma(ferry::tensor(std::vector<float>{9.0f}).to(DType::f16))
                  .to(DType::f32)
                  .item<float>(),
              std::log(40320.0), 0.01);
}

// Gradients against central differences in f64: lgamma's is digamma, digamma's trigamma,
// through the recurrence, the series and the reflection.
TEST(SpecialFunctions, GradientsMatchFiniteDifferences) {
  const std::vector<double> at = {-2.7, -0.4, 0.2, 1.3, 5.5, 15.5, 40.0};
  for (std::int64_t n : {-1, 0, 1, 2}) {
    auto f = [n](const Tensor& t) { return n < 0 ? ferry::lgamma(t) : ferry::polygamma(n, t); };
    const Tensor x = ferry::tensor(at).requires_grad_();
    ferry::sum(f(x)).backward();
    const std::vector<double> g = values(x.grad());
    for (std::size_t i = 0; i < at.size(); ++i) {
      const double h = 1e-6;
      const double up = f(ferry::tensor(std::vector<double>{at[i] + h})).item<double>();
      const double down = f(ferry::tensor(std::vector<double>{at[i] - h})).item<double>();
      const double fd = (up - down) / (2 * h);
      EXPECT_NEAR(g[i], fd, 1e-6 * std::max(1.0, std::fabs(fd))) << "n " << n << " at " << at[i];
    }
  }
  // And lgamma's gradient is digamma.
  const Tensor x = ferry::tensor(at).requires_grad_();
  ferry::sum(ferry::lgamma(x)).backward();
  EXPECT_TRUE(ferry::allclose(x.grad(), ferry::digamma(ferry::tensor(at)), 1e-12, 1e-12));
}

TEST(SpecialFunctions, Errors) {
  const Tensor x = ferry::tensor(std::vector<float>{1, 2});
  EXPECT_FERRY_ERROR(ferry::polygamma(-1, x), ferry::ValueError, "negative n");
  EXPECT_FERRY_ERROR(ferry::mvlgamma(x, 0), ferry::ValueError, "p has to be");
  EXPECT_FERRY_ERROR(
      ferry::mvlgamma(ferry::tensor(std::vector<std::uint8_t>{1}).to(DType::boolean), 2),
      ferry::DTypeError, "mvlgamma");
  EXPECT_FERRY_ERROR(ferry::lgamma(Tensor()), ferry::Error, "lgamma");
}

}  // namespace
