// ferry/dtype.hpp — element types, their host representations, promotion.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "ferry/config.hpp"

namespace ferry {

// New dtypes are appended (f64, then i8 and i16) so that the values of the others, which
// backend modules and files may have stored, stay what they were; kAllDTypes lists them in
// the order tables print them. f64 computes on the cpu and cuda only (Note [Where f64
// computes] in docs/kernel-contract.md).
enum class DType : std::uint8_t { f32, f16, bf16, i32, i64, u8, boolean, f64, i8, i16 };
inline constexpr DType kAllDTypes[] = {DType::f32,     DType::f16, DType::bf16, DType::i32,
                                       DType::i64,     DType::u8,  DType::i8,   DType::i16,
                                       DType::boolean, DType::f64};

std::size_t dtype_size(DType t);
// "f32", "f16", "bf16", "i32", "i64", "u8", "i8", "i16", "bool", "f64"
std::string_view dtype_name(DType t);
DType dtype_from_name(std::string_view name);  // throws DTypeError
bool is_floating(DType t);                     // f32, f16, bf16, f64
bool is_integral(DType t);                     // i8, i16, i32, i64, u8 (not bool)
bool is_reduced_float(DType t);                // f16, bf16: the 16-bit floats
// The dtype a computation on `t` runs in (PyTorch's opmath type): f32 for the 16-bit floats,
// whose sums overflow (f16's largest value is 65504) and would round at every step; `t`
// itself otherwise.
DType compute_dtype(DType t);

// PyTorch's promotion lattice: bool < integers < floating; within a category
// the wider type wins; u8 with a signed type gives the narrowest signed type
// that holds both (i16 beside i8); f64 with any other type gives f64; f16 with
// bf16 gives f32.
DType promote_types(DType a, DType b);

// IEEE binary16 stored as bits. Conversions round to nearest even and keep
// NaN and infinities.
struct Half {
  std::uint16_t bits = 0;
  Half() = default;
  FERRY_HD Half(float f) : bits(from_float(f)) {}
  FERRY_HD operator float() const { return to_float(bits); }

  FERRY_HD static float to_float(std::uint16_t h) {
    std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1fu;
    std::uint32_t man = h & 0x3ffu;
    std::uint32_t bits;
    if (exp == 0x1f) {
      bits = sign | 0x7f800000u | (man << 13);  // inf or NaN
    } else if (exp != 0) {
      bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      bits = sign | (std::uint32_t(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  FERRY_HD static std::uint16_t from_float(float f) {
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    std::uint16_t sign = std::uint16_t((x >> 16) & 0x8000u);
    std::uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)  // inf or NaN (keep a quiet NaN payload bit)
      return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u);
    if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
    if (ax < 0x38800000u) {                        // below the smallest normal half
      if (ax < 0x33000000u) return sign;           // rounds to zero
      std::uint32_t e = ax >> 23;
      std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
      std::uint32_t shift = 126 - e;  // 14 + (113 - e) - 1 ... keeps 10+1 bits
      std::uint32_t half = m >> shift;
      std::uint32_t rem = m & ((1u << shift) - 1);
      std::uint32_t mid = 1u << (shift - 1);
      if (rem > mid || (rem == mid && (half & 1u))) ++half;
      return sign | std::uint16_t(half);
    }
    std::uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1u);  // round to nearest even
    return sign | std::uint16_t((rounded - 0x38000000u) >> 13);
  }
};

// bfloat16: the top half of an f32. Conversion rounds to nearest even.
struct BFloat16 {
  std::uint16_t bits = 0;
  BFloat16() = default;
  FERRY_HD BFloat16(float f) : bits(from_float(f)) {}
  FERRY_HD operator float() const { return to_float(bits); }

  FERRY_HD static float to_float(std::uint16_t b) {
    std::uint32_t x = std::uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
  FERRY_HD static std::uint16_t from_float(float f) {
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((x >> 16) | 0x40u);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return std::uint16_t(x >> 16);
  }
};

// The C++ type that holds one element of a dtype on the host.
template <DType T> struct dtype_cpp;
template <> struct dtype_cpp<DType::f32> { using type = float; };
template <> struct dtype_cpp<DType::f16> { using type = Half; };
template <> struct dtype_cpp<DType::bf16> { using type = BFloat16; };
template <> struct dtype_cpp<DType::i32> { using type = std::int32_t; };
template <> struct dtype_cpp<DType::i64> { using type = std::int64_t; };
template <> struct dtype_cpp<DType::u8> { using type = std::uint8_t; };
template <> struct dtype_cpp<DType::boolean> { using type = bool; };
template <> struct dtype_cpp<DType::f64> { using type = double; };
template <> struct dtype_cpp<DType::i8> { using type = std::int8_t; };
template <> struct dtype_cpp<DType::i16> { using type = std::int16_t; };
template <DType T> using dtype_cpp_t = typename dtype_cpp<T>::type;

// The dtype of a C++ element type (for tensor(std::vector<T>), to_vector<T>, item<T>).
template <typename T> constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return DType::f32;
  else if constexpr (std::is_same_v<T, Half>)
    return DType::f16;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return DType::bf16;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return DType::i32;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return DType::i64;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return DType::u8;
  else if constexpr (std::is_same_v<T, bool>)
    return DType::boolean;
  else if constexpr (std::is_same_v<T, double>)
    return DType::f64;
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return DType::i8;
  else if constexpr (std::is_same_v<T, std::int16_t>)
    return DType::i16;
  else
    static_assert(sizeof(T) == 0, "no ferry dtype for this C++ type");
}

// A number given by the caller (fill values, scalar operands). Keeps integers
// exact (an i64 beyond 2^53 survives) and remembers its category, which
// promotion needs: a float scalar makes an integer tensor floating, an
// integer scalar leaves a float16 tensor float16. A float scalar is a Python
// float: alone it makes f32 (PyTorch's default dtype), even though it is held
// as a double, and beside an f64 tensor it keeps all of its precision.
class Scalar {
 public:
  Scalar(double v) : v_(v) {}
  Scalar(float v) : v_(double(v)) {}
  Scalar(int v) : v_(std::int64_t(v)) {}
  Scalar(long v) : v_(std::int64_t(v)) {}
  Scalar(long long v) : v_(std::int64_t(v)) {}
  Scalar(unsigned v) : v_(std::int64_t(v)) {}
  Scalar(bool v) : v_(v) {}
  bool is_floating() const { return std::holds_alternative<double>(v_); }
  bool is_integral() const { return std::holds_alternative<std::int64_t>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  double to_double() const;
  std::int64_t to_int64() const;
  // The dtype a tensor made of this value alone would have: f32, i64 or bool.
  DType natural_dtype() const;
  std::string str() const;

 private:
  std::variant<double, std::int64_t, bool> v_;
};

}  // namespace ferry
