// runtime/random.cpp — the global generator: a seed and a counter offset
// (Note [Counter-based RNG] in ferry/random.hpp).
#include "ferry/random.hpp"

#include <fmt/format.h>

#include <mutex>

#include "dispatch.hpp"
#include "ferry/backend.hpp"
#include "ferry/error.hpp"

namespace ferry {
namespace {

struct Generator {
  std::mutex mutex;
  std::uint64_t seed = 0x5eed5eedull;
  std::uint64_t offset = 0;
};

Generator& generator() {
  static Generator g;
  return g;
}

// Reserves `count` counters and returns (seed, first counter).
std::pair<std::uint64_t, std::uint64_t> reserve(std::int64_t count) {
  Generator& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  std::uint64_t first = g.offset;
  g.offset += std::uint64_t(count);
  return {g.seed, first};
}

Tensor draw(OpId op, const Shape& shape, DType dtype, const Device& device, Attrs attrs) {
  Tensor t = detail::new_tensor(shape, dtype, device);
  auto [seed, offset] = reserve(t.numel());
  attrs.set("seed", std::int64_t(seed)).set("offset", std::int64_t(offset));
  detail::run_kernel(op, {}, {t}, attrs);
  return t;
}

DType floating_dtype(std::string_view op, const TensorOptions& o) {
  DType dt = o.dtype_or(DType::f32);
  if (!is_floating(dt))
    throw DTypeError(fmt::format(
        "{}: expects a floating dtype (f32, f16, bf16, f64), got {}; use randint for integers", op,
        dtype_name(dt)));
  return dt;
}

}  // namespace

void manual_seed(std::uint64_t seed) {
  Generator& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.seed = seed;
  g.offset = 0;
}

RngState get_rng_state() {
  Generator& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  return {g.seed, g.offset};
}

void set_rng_state(const RngState& state) {
  Generator& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.seed = state.seed;
  g.offset = state.offset;
}

Tensor uniform(const Shape& shape, double low, double high, const TensorOptions& o) {
  if (!(low <= high))
    throw Error(fmt::format("uniform: low ({}) must not exceed high ({})", low, high));
  return draw(OpId::random_uniform, shape, floating_dtype("uniform", o), o.device,
              Attrs{{"low", low}, {"high", high}});
}

Tensor rand(const Shape& shape, const TensorOptions& o) { return uniform(shape, 0.0, 1.0, o); }

Tensor normal(const Shape& shape, double mean, double stddev, const TensorOptions& o) {
  if (!(stddev >= 0)) throw Error(fmt::format("normal: stddev must be >= 0, got {}", stddev));
  return draw(OpId::random_normal, shape, floating_dtype("normal", o), o.device,
              Attrs{{"mean", mean}, {"std", stddev}});
}

Tensor randn(const Shape& shape, const TensorOptions& o) { return normal(shape, 0.0, 1.0, o); }

Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, const TensorOptions& o) {
  if (low >= high) throw Error(fmt::format("randint: low ({}) must be below high ({})", low, high));
  DType dt = o.dtype_or(DType::i64);
  if (dt == DType::boolean)
    throw DTypeError(
        "randint: bool is not an integer dtype; use rand(shape) < p for random booleans");
  return draw(
      OpId::random_int, shape, dt, o.device,
      Attrs{{"low", low}, {"range", std::int64_t(std::uint64_t(high) - std::uint64_t(low))}});
}

}  // namespace ferry
