// cuda/cuda_kernels_random.cu — random_uniform, random_normal and random_int on
// CUDA: element i of the output (row-major, whatever its strides) uses Philox
// counter offset + i under key seed (include/ferry/kit/math/philox.hpp), as
// runtime/cpu/cpu_kernels_random.cpp does, so a thread layout never changes a
// number. Uniform and integer draws are bit-identical to the CPU's (integer
// math, and add_mul_unfused keeps nvcc from fusing the scaling into an FMA);
// normal draws go through the device's log and cos, within an ulp or two of the
// host's. f32, f16 and bf16 draw in float; f64 draws 53-bit values in double
// (Note [f64 draws] in include/ferry/kit/math/philox.hpp), as the CPU does:
// its uniforms bit-identical too, its normals scaled with two roundings.
#include <cstdint>
#include <type_traits>

#include "cuda_elementwise.cuh"
#include "ferry/kit/math/philox.hpp"

namespace ferry::cuda {
namespace {

struct Key {
  std::uint64_t seed, offset;
};

Key key_of(const OpCall& c, const char* op) {
  if (!c.inputs.empty() || c.outputs.size() != 1)
    throw ShapeError(std::string(op) + ": the cuda kernel takes no input and one output");
  return {std::uint64_t(c.attrs.i("seed")), std::uint64_t(c.attrs.i("offset"))};
}

// The draw's parameters in the compute type: float, or double for f64 (the
// attributes as they are, where the narrower floats round them once).
template <typename T> struct UniformFn {
  Key key;
  compute_t<T> low, high;
  __device__ T operator()(std::int64_t i) const {
    if constexpr (std::is_same_v<T, double>)
      return math::philox_uniform_f64(key.seed, key.offset + std::uint64_t(i), low, high);
    else
      return T(math::philox_uniform(key.seed, key.offset + std::uint64_t(i), low, high));
  }
};

template <typename T> struct NormalFn {
  Key key;
  compute_t<T> mean, stddev;
  __device__ T operator()(std::int64_t i) const {
    if constexpr (std::is_same_v<T, double>) {
      const double z = math::philox_normal_f64(key.seed, key.offset + std::uint64_t(i));
      return math::add_mul_unfused(mean, stddev, z);  // the CPU's mean + stddev * z
    } else {
      const float z = math::philox_normal(key.seed, key.offset + std::uint64_t(i));
      return T(math::add_mul_unfused(mean, stddev, z));
    }
  }
};

template <typename T> struct IntFn {
  Key key;
  std::int64_t low;
  std::uint64_t range;
  __device__ T operator()(std::int64_t i) const {
    return math::convert<T>(
        math::philox_randint(key.seed, key.offset + std::uint64_t(i), low, range));
  }
};

void uniform_kernel(DeviceImpl& d, const OpCall& c) {
  const Key key = key_of(c, "random_uniform");
  const double low = c.attrs.f("low"), high = c.attrs.f("high");
  CudaDevice& dev = cuda_device(d);
  FERRY_CUDA_DISPATCH_FLOATING(c.outputs[0].dtype, "random_uniform", {
    using C = compute_t<scalar_t>;
    launch_generate<scalar_t>(dev, c.outputs[0], UniformFn<scalar_t>{key, C(low), C(high)},
                              "random_uniform");
  });
}

void normal_kernel(DeviceImpl& d, const OpCall& c) {
  const Key key = key_of(c, "random_normal");
  const double mean = c.attrs.f("mean"), stddev = c.attrs.f("std");
  CudaDevice& dev = cuda_device(d);
  FERRY_CUDA_DISPATCH_FLOATING(c.outputs[0].dtype, "random_normal", {
    using C = compute_t<scalar_t>;
    launch_generate<scalar_t>(dev, c.outputs[0], NormalFn<scalar_t>{key, C(mean), C(stddev)},
                              "random_normal");
  });
}

void int_kernel(DeviceImpl& d, const OpCall& c) {
  const Key key = key_of(c, "random_int");
  const std::int64_t low = c.attrs.i("low");
  const auto range = std::uint64_t(c.attrs.i("range"));
  // randint refuses low >= high; a zero range would divide by zero on the device.
  if (range == 0) throw Error("random_int: the range is empty");
  CudaDevice& dev = cuda_device(d);
  FERRY_CUDA_DISPATCH_NUMERIC(
      c.outputs[0].dtype, "random_int",
      launch_generate<scalar_t>(dev, c.outputs[0], IntFn<scalar_t>{key, low, range}, "random_int"));
}

}  // namespace

void add_random_kernels(KernelTable& t) {
  t.emplace_back(OpId::random_uniform, uniform_kernel);
  t.emplace_back(OpId::random_normal, normal_kernel);
  t.emplace_back(OpId::random_int, int_kernel);
}

}  // namespace ferry::cuda
