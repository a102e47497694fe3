// tests/test_composite_ops.cpp — composite ops (Note [Composite ops] in
// ferry/op.hpp): a device's fused kernel runs where it supports the op and no
// gradient is recorded, the composition everywhere else; autograd records the
// parts; an op of kind composite takes no kernel. The values themselves are
// held to PyTorch (test_pytorch_reference.cpp) and, on every device, to the
// composition (the conformance suite).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

#include "ferry/autograd.hpp"
#include "ferry/backend.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
#include "host_test_device.hpp"

namespace {

std::atomic<int> g_square_calls{0}, g_mul_calls{0};

// supports() is exact (Note [Capabilities]): f32 only, like the kernels.
void require_f32(const ferry::OpCall& c) {
  if (c.inputs[0].dtype != ferry::DType::f32)
    throw ferry::UnsupportedError(fmt::format("composer: {} is f32 only", c.name()));
}

// f32 contiguous kernels that count their calls: mul always, square (the
// fused kernel of the composite op) when `fused`; `extra` names one more op
// to register (to see it refused).
class CountingDevice final : public ferry_test::HostTestDevice {
 public:
  CountingDevice(int index, bool fused, const char* extra = nullptr)
      : HostTestDevice("composer", index) {
    register_kernel(ferry::OpId::mul, [](ferry::DeviceImpl&, const ferry::OpCall& c) {
      require_f32(c);
      ++g_mul_calls;
      const float *a = c.inputs[0].data<float>(), *b = c.inputs[1].data<float>();
      float* o = c.outputs[0].data<float>();
      for (std::int64_t i = 0; i < c.outputs[0].numel(); ++i) o[i] = a[i] * b[i];
    });
    if (fused)
      register_kernel(ferry::OpId::square, [](ferry::DeviceImpl&, const ferry::OpCall& c) {
        require_f32(c);
        ++g_square_calls;
        const float* x = c.inputs[0].data<float>();
        float* o = c.outputs[0].data<float>();
        for (std::int64_t i = 0; i < c.outputs[0].numel(); ++i) o[i] = x[i] * x[i];
      });
    if (extra) register_kernel(extra, [](ferry::DeviceImpl&, const ferry::OpCall&) {});
  }
  bool supports(ferry::OpId op, ferry::DType dt) const override {
    return dt == ferry::DType::f32 && DeviceImpl::supports(op, dt);
  }
};

// composer:0 has the fused square kernel, composer:1 does not.
class ComposerBackend final : public ferry::Backend {
 public:
  std::string name() const override { return "composer"; }
  std::vector<ferry::DeviceImpl*> devices() override { return {&fused_, &plain_}; }

 private:
  CountingDevice fused_{0, true}, plain_{1, false};
};

ferry::Device composer(int index) {
  static bool registered = [] {
    ferry::register_backend(std::make_unique<ComposerBackend>());
    return true;
  }();
  (void)registered;
  return ferry::Device("composer:" + std::to_string(index));
}

struct Calls {
  int square, mul;
};
template <typename F> Calls count_calls(F f) {
  g_square_calls = 0;
  g_mul_calls = 0;
  f();
  return {g_square_calls.load(), g_mul_calls.load()};
}

const std::vector<float> kValues = {-2, -0.5, 0, 1.5, 3};

TEST(CompositeOps, TheFusedKernelRunsWhereTheDeviceHasOne) {
  const ferry::Tensor x = ferry::tensor(kValues).to(composer(0));
  ferry::Tensor y;
  Calls c = count_calls([&] { y = ferry::square(x); });
  EXPECT_EQ(c.square, 1);
  EXPECT_EQ(c.mul, 0);
  EXPECT_EQ(y.to(ferry::Device::cpu()).to_vector<float>(),
            (std::vector<float>{4, 0.25f, 0, 2.25f, 9}));
  // unary_op by the row's id takes the same way.
  c = count_calls([&] { (void)ferry::unary_op(ferry::OpId::square, x); });
  EXPECT_EQ(c.square, 1);
}

TEST(CompositeOps, TheCompositionRunsWhereTheDeviceHasNoFusedKernel) {
  const ferry::Tensor x = ferry::tensor(kValues).to(composer(1));
  EXPECT_FALSE(ferry::device_impl(composer(1)).supports(ferry::OpId::square, ferry::DType::f32));
  ferry::Tensor y;
  const Calls c = count_calls([&] { y = ferry::square(x); });
  EXPECT_EQ(c.square, 0);
  EXPECT_EQ(c.mul, 1);
  EXPECT_EQ(y.to(ferry::Device::cpu()).to_vector<float>(),
            (std::vector<float>{4, 0.25f, 0, 2.25f, 9}));
}

TEST(CompositeOps, CompositesOnlyTurnsFusedKernelsOffOnItsThreadAndNests) {
  const ferry::Tensor x = ferry::tensor(kValues).to(composer(0));
  EXPECT_FALSE(ferry::debug::composites_only());
  Calls c = count_calls([&] {
    ferry::debug::CompositesOnly outer;
    {
      ferry::debug::CompositesOnly inner;
      (void)ferry::square(x);
    }
    EXPECT_TRUE(ferry::debug::composites_only());
    (void)ferry::square(x);
  });
  EXPECT_EQ(c.square, 0);
  EXPECT_EQ(c.mul, 2);
  EXPECT_FALSE(ferry::debug::composites_only());
  c = count_calls([&] { (void)ferry::square(x); });
  EXPECT_EQ(c.square, 1);
}

// Recording a gradient takes the composition, whose parts autograd records.
TEST(CompositeOps, AutogradRecordsTheParts) {
  ferry::Tensor x = ferry::tensor(kValues).requires_grad_(true);
  ferry::Tensor y = ferry::square(x);
  EXPECT_EQ(y.grad_fn_name(), "mulBackward");
  ferry::sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{-4, -1, 0, 3, 6}));
  {
    ferry::NoGradGuard no_grad;
    EXPECT_EQ(ferry::square(x).grad_fn_name(), "");
  }
  // clamp: the whole gradient to x inside [min, max], bounds included.
  ferry::Tensor z = ferry::tensor(std::vector<float>{-2, -1, 0, 1, 2}).requires_grad_(true);
  ferry::sum(ferry::clamp(z, -1, 1)).backward();
  EXPECT_EQ(z.grad().to_vector<float>(), (std::vector<float>{0, 1, 1, 1, 0}));
  // logsumexp: softmax over the dims.
  ferry::Tensor w = ferry::tensor(std::vector<float>{1, 2, 3, 1000}, {2, 2}).requires_grad_(true);
  ferry::sum(ferry::logsumexp(w, {1})).backward();
  const std::vector<float> g = w.grad().to_vector<float>();
  EXPECT_NEAR(g[0], 1 / (1 + std::exp(1.0f)), 1e-6);
  EXPECT_NEAR(g[1], 1 / (1 + std::exp(-1.0f)), 1e-6);
  EXPECT_EQ(g[2], 0.0f);
  EXPECT_EQ(g[3], 1.0f);
}

TEST(CompositeOps, AnOpOfKindCompositeTakesNoKernel) {
  for (const char* op : {"lerp", "masked_fill"}) {
    EXPECT_EQ(ferry::op_info(*ferry::op_from_name(op)).kind, ferry::OpKind::composite);
    try {
      CountingDevice d(7, false, op);
      ADD_FAILURE() << op << " was registered";
    } catch (const ferry::Error& e) {
      EXPECT_NE(std::string(e.what()).find("no kernel interface"), std::string::npos) << e.what();
    }
  }
}

TEST(CompositeOps, RowsSayWhatIsComposite) {
  for (const ferry::OpInfo& info : ferry::op_table()) {
    if (info.grad == ferry::OpGrad::parts)
      EXPECT_EQ(info.impl, ferry::OpImpl::composite) << info.name;
    if (info.kind == ferry::OpKind::composite) EXPECT_EQ(info.builtin_backends, 0) << info.name;
    if (info.impl == ferry::OpImpl::kernel) EXPECT_NE(info.builtin_backends, 0) << info.name;
  }
  EXPECT_EQ(ferry::op_info(ferry::OpId::square).impl, ferry::OpImpl::composite);
  EXPECT_EQ(ferry::op_kind_name(ferry::OpKind::index_backward), "index_backward");
}

TEST(CompositeOps, BadInput) {
  const ferry::Tensor x = ferry::tensor(kValues);
  EXPECT_THROW(ferry::clamp(x, std::nullopt, std::nullopt), ferry::Error);
  EXPECT_THROW(ferry::clamp(ferry::ones({2}, {.dtype = ferry::DType::boolean}), false, true),
               ferry::DTypeError);
  EXPECT_THROW(ferry::clamp(x, ferry::zeros({3})), ferry::ShapeError);
  EXPECT_THROW(ferry::clamp(x, ferry::tensor(kValues).to(composer(1)), ferry::Tensor()),
               ferry::DeviceMismatchError);
}

}  // namespace
