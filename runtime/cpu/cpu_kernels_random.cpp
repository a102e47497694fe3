// runtime/cpu/cpu_kernels_random.cpp — Philox draws (include/ferry/kit/math/philox.hpp).
// Element i of the output uses counter offset + i, so any thread split gives
// the numbers every other backend gives.
#include <type_traits>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_loops.hpp"
#include "ferry/kit/math/philox.hpp"
#include "ferry/kit/math/scalar_ops.hpp"

namespace ferry::cpu {
namespace {

// Calls gen(i) for each element of the (contiguous, fresh) output.
template <typename T, typename Gen> void generate(const TensorArg& out, const Gen& gen) {
  T* o = out.data<T>();
  parallel_range(out.numel(), 4096, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) o[i] = gen(std::uint64_t(i));
  });
}

// f32, f16 and bf16 draw in float; f64 draws 53-bit values in double (Note
// [f64 draws] in ferry/kit/math/philox.hpp).
void uniform_kernel(DeviceImpl&, const OpCall& c) {
  const auto seed = std::uint64_t(c.attrs.i("seed")), offset = std::uint64_t(c.attrs.i("offset"));
  const double low = c.attrs.f("low"), high = c.attrs.f("high");
  const auto low_f = float(low), high_f = float(high);
  FERRY_DISPATCH_FLOATING(
      c.outputs[0].dtype, "random_uniform", generate<scalar_t>(c.outputs[0], [&](std::uint64_t i) {
        if constexpr (std::is_same_v<scalar_t, double>)
          return math::philox_uniform_f64(seed, offset + i, low, high);
        else
          return scalar_t(math::philox_uniform(seed, offset + i, low_f, high_f));
      }));
}

void normal_kernel(DeviceImpl&, const OpCall& c) {
  const auto seed = std::uint64_t(c.attrs.i("seed")), offset = std::uint64_t(c.attrs.i("offset"));
  const double mean = c.attrs.f("mean"), stddev = c.attrs.f("std");
  const auto mean_f = float(mean), stddev_f = float(stddev);
  FERRY_DISPATCH_FLOATING(
      c.outputs[0].dtype, "random_normal", generate<scalar_t>(c.outputs[0], [&](std::uint64_t i) {
        if constexpr (std::is_same_v<scalar_t, double>)
          return mean + stddev * math::philox_normal_f64(seed, offset + i);
        else
          return scalar_t(
              math::add_mul_unfused(mean_f, stddev_f, math::philox_normal(seed, offset + i)));
      }));
}

void int_kernel(DeviceImpl&, const OpCall& c) {
  const auto seed = std::uint64_t(c.attrs.i("seed")), offset = std::uint64_t(c.attrs.i("offset"));
  const std::int64_t low = c.attrs.i("low");
  const auto range = std::uint64_t(c.attrs.i("range"));
  FERRY_DISPATCH_NUMERIC(
      c.outputs[0].dtype, "random_int", generate<scalar_t>(c.outputs[0], [&](std::uint64_t i) {
        return math::convert<scalar_t>(math::philox_randint(seed, offset + i, low, range));
      }));
}

}  // namespace

void add_random_kernels(KernelTable& t) {
  t.emplace_back(OpId::random_uniform, uniform_kernel);
  t.emplace_back(OpId::random_normal, normal_kernel);
  t.emplace_back(OpId::random_int, int_kernel);
}

}  // namespace ferry::cpu
