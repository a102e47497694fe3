// The TF32 switch (Note [TF32] in ferry/ops.hpp): off by default, the
// environment can turn it on, and set/get round-trip. The switch changes how
// a CUDA f32 matmul computes, never what any backend is asked to compute, so
// the CPU result must not move when it flips.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "ferry/ferry.hpp"

namespace {

// Restores the switch when a test ends, pass or fail.
struct Tf32Restore {
  bool saved = ferry::matmul_allow_tf32();
  ~Tf32Restore() { ferry::set_matmul_allow_tf32(saved); }
};

TEST(MatmulTf32, OffUnlessTheEnvironmentSaysOtherwise) {
  const char* env = std::getenv("FERRY_ALLOW_TF32");
  const bool from_env = env != nullptr && std::strcmp(env, "1") == 0;
  EXPECT_EQ(ferry::matmul_allow_tf32(), from_env);
}

TEST(MatmulTf32, SetAndGetRoundTrip) {
  Tf32Restore restore;
  ferry::set_matmul_allow_tf32(true);
  EXPECT_TRUE(ferry::matmul_allow_tf32());
  ferry::set_matmul_allow_tf32(false);
  EXPECT_FALSE(ferry::matmul_allow_tf32());
  ferry::set_matmul_allow_tf32(true);
  EXPECT_TRUE(ferry::matmul_allow_tf32());
}

TEST(MatmulTf32, CpuResultDoesNotDependOnTheSwitch) {
  Tf32Restore restore;
  // 1 + 2^-20 is not representable in TF32's 10 mantissa bits; an f32
  // product keeps it.
  const float x = 1.0f + 0x1p-20f;
  ferry::Tensor a = ferry::tensor(std::vector<float>{x, x}, {1, 2});
  ferry::Tensor b = ferry::tensor(std::vector<float>{1.0f, 1.0f}, {2, 1});
  ferry::set_matmul_allow_tf32(true);
  const float on = ferry::matmul(a, b).item<float>();
  ferry::set_matmul_allow_tf32(false);
  const float off = ferry::matmul(a, b).item<float>();
  EXPECT_EQ(on, off);
  EXPECT_EQ(off, 2.0f * x);
}

}  // namespace
