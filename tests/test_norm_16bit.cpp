// tests/test_norm_16bit.cpp — f16 and bf16 inputs through the normalization compositions
// (runtime/nn/normalization.cpp) keep their statistics in f32 and round the result once, as
// PyTorch's kernels do (Note [Normalization statistics in f32]). Held, on every device here,
// to the same formulas in f64 over the same 16-bit values: an input around 100, where f16's ulp
// is 1/16, gave group_norm and instance_norm errors of 2.5e-2 when the mean was rounded to f16
// before x - mean.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "ferry/ferry.hpp"
#include "test_devices.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
namespace F = ferry::nn::functional;

std::vector<double> values(const Tensor& t) { return t.cpu().to(DType::f64).to_vector<double>(); }

TEST(Norm16Bit, StatisticsInF32GiveTheRoundedResult) {
  ferry::manual_seed(21);
  const Tensor base = ferry::add(ferry::randn({2, 8, 12, 12}), 100.0);
  const Tensor w = ferry::add(ferry::rand({8}), 0.5), b = ferry::randn({8});
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> norms{
      {"group_norm",
       [&](const Tensor& x) {
         return F::group_norm(x, 4, w.to(x.device()).to(x.dtype()), b.to(x.device()).to(x.dtype()));
       }},
      {"instance_norm", [](const Tensor& x) { return F::instance_norm(x); }},
      {"rms_norm", [](const Tensor& x) { return F::rms_norm(x, {12}); }},
  };
  for (const std::string& dev : ferry_test::available_device_names()) {
    for (const DType dt : {DType::f16, DType::bf16}) {
      const Tensor x = base.to(dt);
      // About one rounding to the dtype (relative half ulps: 2^-11 and 2^-8).
      const double rel = dt == DType::f16 ? 1e-3 : 8e-3;
      for (const auto& [name, norm] : norms) {
        const Tensor got = norm(x.to(ferry::Device(dev)));
        ASSERT_EQ(got.dtype(), dt) << name;
        const std::vector<double> g = values(got), want = values(norm(x.to(DType::f64)));
        for (std::size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(g[i], want[i], rel * (1 + std::fabs(want[i])))
              << fmt::format("{} {} {} at {}", name, dev, ferry::dtype_name(dt), i);
      }
    }
  }
}

// The gradients come back in the input's dtype, through the widening cast.
TEST(Norm16Bit, GradientsKeepTheInputDtype) {
  ferry::manual_seed(22);
  for (const std::string& dev : ferry_test::available_device_names()) {
    const Tensor x = ferry::add(ferry::randn({2, 4, 6, 6}), 10.0)
                         .to(DType::f16)
                         .to(ferry::Device(dev))
                         .requires_grad_();
    ferry::sum(ferry::mul(F::group_norm(x, 2), F::instance_norm(x))).backward();
    ASSERT_TRUE(x.grad().defined()) << dev;
    EXPECT_EQ(x.grad().dtype(), DType::f16) << dev;
    for (double v : values(x.grad())) ASSERT_TRUE(std::isfinite(v)) << dev;
  }
}

}  // namespace
