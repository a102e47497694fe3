// Element types: sizes, names, promotion, and the f16/bf16 conversions checked
// against the compiler's own _Float16 (an independent implementation).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ferry/ferry.hpp"

using ferry::BFloat16;
using ferry::DType;
using ferry::Half;

TEST(DType, SizesAndNamesRoundTrip) {
  for (DType t : ferry::kAllDTypes) EXPECT_EQ(ferry::dtype_from_name(ferry::dtype_name(t)), t);
  EXPECT_EQ(ferry::dtype_size(DType::f32), 4u);
  EXPECT_EQ(ferry::dtype_size(DType::bf16), 2u);
  EXPECT_EQ(ferry::dtype_size(DType::i64), 8u);
  EXPECT_EQ(ferry::dtype_size(DType::boolean), 1u);
  EXPECT_EQ(ferry::dtype_size(DType::i8), 1u);
  EXPECT_EQ(ferry::dtype_size(DType::i16), 2u);
  EXPECT_EQ(ferry::dtype_name(DType::i16), "i16");
  EXPECT_THROW(ferry::dtype_from_name("float99"), ferry::DTypeError);
}

TEST(DType, PromotionFollowsPyTorch) {
  using ferry::promote_types;
  EXPECT_EQ(promote_types(DType::i32, DType::f16), DType::f16);
  EXPECT_EQ(promote_types(DType::f16, DType::bf16), DType::f32);
  EXPECT_EQ(promote_types(DType::f16, DType::f32), DType::f32);
  EXPECT_EQ(promote_types(DType::u8, DType::i32), DType::i32);
  EXPECT_EQ(promote_types(DType::i32, DType::i64), DType::i64);
  EXPECT_EQ(promote_types(DType::boolean, DType::u8), DType::u8);
  EXPECT_EQ(promote_types(DType::boolean, DType::boolean), DType::boolean);
  // The narrowest signed type that holds both (torch.promote_types).
  EXPECT_EQ(promote_types(DType::u8, DType::i8), DType::i16);
  EXPECT_EQ(promote_types(DType::u8, DType::i16), DType::i16);
  EXPECT_EQ(promote_types(DType::i8, DType::i16), DType::i16);
  EXPECT_EQ(promote_types(DType::i8, DType::i32), DType::i32);
  EXPECT_EQ(promote_types(DType::i16, DType::i64), DType::i64);
  EXPECT_EQ(promote_types(DType::i8, DType::f16), DType::f16);
  EXPECT_EQ(promote_types(DType::boolean, DType::i8), DType::i8);
  for (DType a : ferry::kAllDTypes)
    for (DType b : ferry::kAllDTypes) EXPECT_EQ(promote_types(a, b), promote_types(b, a));
}

#if defined(__FLT16_MAX__)
TEST(DType, HalfMatchesFloat16ForEveryBitPattern) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    _Float16 ref;
    std::uint16_t b16 = std::uint16_t(bits);
    std::memcpy(&ref, &b16, 2);
    float f = Half::to_float(b16);
    if (std::isnan(float(ref))) {
      EXPECT_TRUE(std::isnan(f));
      continue;
    }
    ASSERT_EQ(f, float(ref)) << "bits " << bits;
    ASSERT_EQ(Half::from_float(f), b16) << "round trip of bits " << bits;
  }
}

TEST(DType, HalfRoundsLikeFloat16) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 2000000; ++i) {
    std::uint32_t x = any(rng);
    float f;
    std::memcpy(&f, &x, 4);
    if (std::isnan(f)) continue;
    _Float16 ref = _Float16(f);
    std::uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    ASSERT_EQ(Half::from_float(f), rb) << "float bits " << std::hex << x;
  }
}
#endif

TEST(DType, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(BFloat16::from_float(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(BFloat16::from_float(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(BFloat16::from_float(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(float(BFloat16(NAN))));
  EXPECT_EQ(float(BFloat16(INFINITY)), INFINITY);
  EXPECT_EQ(float(BFloat16(-0.0f)), 0.0f);
  EXPECT_TRUE(std::signbit(float(BFloat16(-0.0f))));
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    float f = BFloat16::to_float(std::uint16_t(bits));
    if (!std::isnan(f)) ASSERT_EQ(BFloat16::from_float(f), bits);
  }
}

TEST(DType, ScalarKeepsItsCategory) {
  EXPECT_EQ(ferry::Scalar(2).natural_dtype(), DType::i64);
  EXPECT_EQ(ferry::Scalar(2.5).natural_dtype(), DType::f32);
  EXPECT_EQ(ferry::Scalar(true).natural_dtype(), DType::boolean);
  EXPECT_EQ(ferry::Scalar(std::int64_t(1) << 60).to_int64(), std::int64_t(1) << 60);
  EXPECT_EQ(ferry::Scalar(-2.7).to_int64(), -2);
  EXPECT_EQ(ferry::Scalar(NAN).to_int64(), 0);
}

TEST(DType, ReducedFloatsComputeInF32) {
  using ferry::DType;
  for (DType t : ferry::kAllDTypes) {
    const bool reduced = t == DType::f16 || t == DType::bf16;
    EXPECT_EQ(ferry::is_reduced_float(t), reduced) << ferry::dtype_name(t);
    EXPECT_EQ(ferry::compute_dtype(t), reduced ? DType::f32 : t) << ferry::dtype_name(t);
  }
}
