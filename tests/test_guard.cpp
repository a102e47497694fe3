// Output guards (Note [Output guards]): a kernel that writes past its output is
// caught on any backend, and correct kernels are unaffected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ferry/backend.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
#include "host_test_device.hpp"

namespace {

class SloppyDevice final : public ferry_test::HostTestDevice {
 public:
  SloppyDevice() : HostTestDevice("sloppy", 0) {
    register_kernel("fill", [](ferry::DeviceImpl&, const ferry::OpCall& c) {
      float* p = c.outputs[0].data<float>();
      for (std::int64_t i = 0; i <= c.outputs[0].numel(); ++i) p[i] = float(c.attrs.f("value"));
    });
    register_kernel("neg", [](ferry::DeviceImpl&, const ferry::OpCall& c) {
      float* o = c.outputs[0].data<float>();
      const float* x = c.inputs[0].data<float>();
      for (std::int64_t i = 0; i < c.outputs[0].numel(); ++i) o[i] = -x[i];
      o[-1] = 42.0f;
    });
  }
};

class SloppyBackend final : public ferry::Backend {
 public:
  std::string name() const override { return "sloppy"; }
  std::vector<ferry::DeviceImpl*> devices() override { return {&device_}; }

 private:
  SloppyDevice device_;
};

struct GuardsOn {
  GuardsOn() { ferry::debug::set_output_guards(true); }
  ~GuardsOn() { ferry::debug::set_output_guards(false); }
};

ferry::Device sloppy() {
  static bool registered = [] {
    ferry::register_backend(std::make_unique<SloppyBackend>());
    return true;
  }();
  (void)registered;
  return ferry::Device("sloppy:0");
}

}  // namespace

TEST(OutputGuards, CatchWritesPastTheEnd) {
  ferry::Device dev = sloppy();
  GuardsOn on;
  try {
    ferry::full({7}, 1.0, {.device = dev});
    FAIL() << "the write past the end went unnoticed";
  } catch (const ferry::BackendError& e) {
    EXPECT_EQ(e.code(), "out-of-bounds-write");
    std::string msg = e.what();
    EXPECT_NE(msg.find("'fill'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sloppy:0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32[7]"), std::string::npos) << msg;
  }
}

TEST(OutputGuards, CatchWritesBeforeTheStart) {
  ferry::Device dev = sloppy();
  ferry::Tensor x = ferry::tensor(std::vector<float>{1, 2, 3}).to(dev);
  GuardsOn on;
  EXPECT_THROW(ferry::neg(x), ferry::BackendError);
}

TEST(OutputGuards, CorrectKernelsPassAndStridedOutputsKeepTheirHoles) {
  GuardsOn on;
  ferry::Tensor t = ferry::arange(12).view({3, 4});
  ferry::Tensor cols = t.slice(1, 0, 4, 2);  // writes every other element
  cols.fill_(-1);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{-1, 1, -1, 3, -1, 5, -1, 7, -1, 9, -1, 11}));
  ferry::Tensor y = ferry::exp(t.t());
  EXPECT_FLOAT_EQ(y.to_vector<float>()[1], std::exp(-1.0f));
  EXPECT_EQ(ferry::empty({0}).fill_(1).numel(), 0);
}
