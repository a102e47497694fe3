// runtime/dtype.cpp — dtype names, sizes and PyTorch's promotion rules.
#include "ferry/dtype.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ferry/error.hpp"

namespace ferry {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f16:
    case DType::bf16:
    case DType::i16:
      return 2;
    case DType::i64:
    case DType::f64:
      return 8;
    case DType::u8:
    case DType::i8:
    case DType::boolean:
      return 1;
  }
  throw DTypeError(fmt::format("dtype_size: invalid dtype value {}", int(t)));
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::u8:
      return "u8";
    case DType::boolean:
      return "bool";
    case DType::f64:
      return "f64";
    case DType::i8:
      return "i8";
    case DType::i16:
      return "i16";
  }
  return "invalid";
}

DType dtype_from_name(std::string_view name) {
  for (DType t : kAllDTypes)
    if (dtype_name(t) == name) return t;
  throw DTypeError(fmt::format(
      "unknown dtype '{}'; expected one of f32, f16, bf16, f64, i8, i16, i32, i64, u8, bool",
      name));
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64;
}
bool is_reduced_float(DType t) { return t == DType::f16 || t == DType::bf16; }
DType compute_dtype(DType t) { return is_reduced_float(t) ? DType::f32 : t; }
bool is_integral(DType t) {
  return t == DType::i8 || t == DType::i16 || t == DType::i32 || t == DType::i64 || t == DType::u8;
}

namespace {
// A signed integer dtype's width in bytes, and back.
int signed_width(DType t) { return t == DType::u8 ? 0 : int(dtype_size(t)); }
DType signed_of_width(int bytes) {
  return bytes <= 1 ? DType::i8 : bytes == 2 ? DType::i16 : bytes == 4 ? DType::i32 : DType::i64;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::boolean) return b;
  if (b == DType::boolean) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa && fb) {
    if (a == DType::f64 || b == DType::f64) return DType::f64;
    return DType::f32;  // two different narrower float types: f16+bf16, f16+f32, ...
  }
  if (fa) return a;
  if (fb) return b;
  // Two different integer types: the narrowest signed type that holds both (u8 needs 2 bytes).
  int width = std::max(signed_width(a), signed_width(b));
  if (a == DType::u8 || b == DType::u8) width = std::max(width, 2);
  return signed_of_width(width);
}

double Scalar::to_double() const {
  if (auto* d = std::get_if<double>(&v_)) return *d;
  if (auto* i = std::get_if<std::int64_t>(&v_)) return double(*i);
  return std::get<bool>(v_) ? 1.0 : 0.0;
}

std::int64_t Scalar::to_int64() const {
  if (auto* i = std::get_if<std::int64_t>(&v_)) return *i;
  if (auto* b = std::get_if<bool>(&v_)) return *b ? 1 : 0;
  double d = std::get<double>(v_);
  if (d != d) return 0;
  if (d >= 9.2233720368547758e18) return INT64_MAX;
  if (d <= -9.2233720368547758e18) return INT64_MIN;
  return std::int64_t(d);
}

DType Scalar::natural_dtype() const {
  if (is_floating()) return DType::f32;
  if (is_integral()) return DType::i64;
  return DType::boolean;
}

std::string Scalar::str() const {
  if (auto* d = std::get_if<double>(&v_)) return fmt::format("{}", *d);
  if (auto* i = std::get_if<std::int64_t>(&v_)) return fmt::format("{}", *i);
  return std::get<bool>(v_) ? "true" : "false";
}

}  // namespace ferry
