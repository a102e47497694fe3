// cuda/cuda_kernels_optim.cu — adam_step and sgd_step on CUDA: one parameter
// group's update, in place, fused over every tensor of every parameter
// (docs/kernel-contract.md, "Ops for training"). The per-element math is
// include/ferry/kit/math/grad_ops.hpp's adam_update and sgd_update, the CPU's own
// (runtime/cpu/cpu_kernels_optim.cpp), in float for f32, f16 and bf16, the
// 16-bit values rounded once on store, and in double for f64, with the group's
// scalars rounded once to that compute type as the CPU's are.
//
// Note [Multi-tensor launches]
// A model has hundreds of parameters, most of them small (biases, norms); one
// launch each would cost more in launch overhead than the arithmetic. As in
// PyTorch's multi_tensor_apply, the pointers and sizes of up to kMaxTensors
// parameters of one dtype travel by value in the kernel's parameter struct
// (under the 4 KB kernel-parameter limit), each parameter is cut into chunks
// of kChunk elements, and the blocks grid-stride over the (parameter, chunk)
// pairs of the launch, so a group costs a few launches and a huge embedding
// table is shared by every block. Parameters touch disjoint memory, so the
// order of the chunks does not matter.
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda_loops.cuh"
#include "ferry/kit/math/grad_ops.hpp"
#include "ferry/kit/optim_args.hpp"

namespace ferry::cuda {
namespace {

constexpr int kMaxTensors = 48;
constexpr std::int64_t kChunk = std::int64_t(kThreads) * 16;

// The chunks of a launch: parameter t owns chunks [first_chunk[t], first_chunk[t + 1]).
struct ChunkMap {
  std::int64_t numel[kMaxTensors];
  std::int64_t first_chunk[kMaxTensors + 1];
  int count;

  // Adds a parameter of n > 0 elements; returns its slot. Starts value-initialized.
  int add(std::int64_t n) {
    numel[count] = n;
    first_chunk[count + 1] = first_chunk[count] + (n + kChunk - 1) / kChunk;
    return count++;
  }
  __host__ __device__ std::int64_t chunks() const { return first_chunk[count]; }

  // The parameter and element range of chunk c (first_chunk strictly increases:
  // empty parameters are never added).
  __device__ int locate(std::int64_t c, std::int64_t& lo, std::int64_t& hi) const {
    int t = 0;
    while (first_chunk[t + 1] <= c) ++t;
    lo = (c - first_chunk[t]) * kChunk;
    hi = lo + kChunk < numel[t] ? lo + kChunk : numel[t];
    return t;
  }
};

template <typename T> struct AdamPack {
  ChunkMap map;
  const T* grad[kMaxTensors];
  T* param[kMaxTensors];
  T* exp_avg[kMaxTensors];
  T* exp_avg_sq[kMaxTensors];
  T* max_exp_avg_sq[kMaxTensors];  // nullptr without amsgrad
  compute_t<T> step_size[kMaxTensors];
  compute_t<T> bias_correction2_sqrt[kMaxTensors];
};

template <typename T> struct SgdPack {
  ChunkMap map;
  const T* grad[kMaxTensors];
  T* param[kMaxTensors];
  T* buf[kMaxTensors];  // nullptr without momentum
  bool init_buffer[kMaxTensors];
};

// The largest packs, f64's (the per-parameter scalars in double), fit too.
static_assert(sizeof(AdamPack<double>) + sizeof(math::AdamScalars<double>) <= 4000 &&
                  sizeof(SgdPack<double>) + sizeof(math::SgdScalars<double>) <= 4000,
              "kernel parameters are limited to 4 KB");

// C: the compute type, float for f32, f16 and bf16, double for f64.
template <typename T, typename C = compute_t<T>> __global__ void __launch_bounds__(kThreads)
    adam_kernel(const AdamPack<T> pack, const math::AdamScalars<C> group) {
  for (std::int64_t c = blockIdx.x; c < pack.map.chunks(); c += gridDim.x) {
    std::int64_t lo, hi;
    const int t = pack.map.locate(c, lo, hi);
    math::AdamScalars<C> s = group;
    s.step_size = pack.step_size[t];
    s.bias_correction2_sqrt = pack.bias_correction2_sqrt[t];
    const T* g = pack.grad[t];
    T *p = pack.param[t], *m = pack.exp_avg[t], *v = pack.exp_avg_sq[t],
      *vmax = pack.max_exp_avg_sq[t];
    for (std::int64_t k = lo + threadIdx.x; k < hi; k += blockDim.x) {
      C pc = C(p[k]), mc = C(m[k]), vc = C(v[k]);
      C vmaxc = vmax ? C(vmax[k]) : C(0);
      math::adam_update<C>(s, C(g[k]), pc, mc, vc, vmaxc);
      p[k] = T(pc);
      m[k] = T(mc);
      v[k] = T(vc);
      if (vmax) vmax[k] = T(vmaxc);
    }
  }
}

template <typename T, typename C = compute_t<T>> __global__ void __launch_bounds__(kThreads)
    sgd_kernel(const SgdPack<T> pack, const math::SgdScalars<C> group) {
  for (std::int64_t c = blockIdx.x; c < pack.map.chunks(); c += gridDim.x) {
    std::int64_t lo, hi;
    const int t = pack.map.locate(c, lo, hi);
    math::SgdScalars<C> s = group;
    s.init_buffer = pack.init_buffer[t];
    const T* g = pack.grad[t];
    T *p = pack.param[t], *buf = pack.buf[t];
    for (std::int64_t k = lo + threadIdx.x; k < hi; k += blockDim.x) {
      C pc = C(p[k]), bc = buf ? C(buf[k]) : C(0);
      math::sgd_update<C>(s, C(g[k]), pc, bc);
      p[k] = T(pc);
      if (buf) buf[k] = T(bc);
    }
  }
}

// ---- validation, before any launch: a bad call changes nothing ----

// Every floating dtype has a kernel, f64 included: optim_args::check_group is all.
using optim_args::check_group;
using optim_args::per_param_floats;

// Calls launch(params) for each run of at most kMaxTensors non-empty parameters
// of dtype `dt`, in order (Note [Multi-tensor launches]).
template <typename Launch>
void for_each_pack(const OpCall& c, std::size_t n, DType dt, const Launch& launch) {
  std::vector<std::size_t> params;
  for (std::size_t i = 0; i < n; ++i) {
    if (c.inputs[i].dtype != dt || c.inputs[i].numel() == 0) continue;
    params.push_back(i);
    if (params.size() == std::size_t(kMaxTensors)) {
      launch(params);
      params.clear();
    }
  }
  if (!params.empty()) launch(params);
}

template <typename T> T* ptr(const TensorArg& t) { return static_cast<T*>(data_ptr(t)); }

// A group's scalars in compute type C, of the float and double ones.
template <typename C, typename F, typename D> const auto& pick(const F& f, const D& d) {
  if constexpr (std::is_same_v<C, float>)
    return f;
  else
    return d;
}

void adam_step_kernel(DeviceImpl& d, const OpCall& c) {
  const bool amsgrad = c.attrs.b("amsgrad");
  const std::size_t per = amsgrad ? 4 : 3;
  const std::size_t n = check_group(c, per, "adam_step");
  const auto& step_size = per_param_floats(c, "step_size", n, "adam_step");
  const auto& bc2 = per_param_floats(c, "bias_correction2_sqrt", n, "adam_step");
  // Read (and checked) before any launch, in both compute types.
  const auto group_f = optim_args::adam_scalars<float>(c.attrs);
  const auto group_d = optim_args::adam_scalars<double>(c.attrs);
  CudaDevice& dev = cuda_device(d);
  auto run = [&]<typename T>(DType dt, T*) {
    using C = compute_t<T>;
    const math::AdamScalars<C>& group = pick<C>(group_f, group_d);
    for_each_pack(c, n, dt, [&](const std::vector<std::size_t>& params) {
      AdamPack<T> pack{};
      for (std::size_t i : params) {
        const TensorArg* t = &c.outputs[i * per];
        const int k = pack.map.add(c.inputs[i].numel());
        pack.grad[k] = ptr<const T>(c.inputs[i]);
        pack.param[k] = ptr<T>(t[0]);
        pack.exp_avg[k] = ptr<T>(t[1]);
        pack.exp_avg_sq[k] = ptr<T>(t[2]);
        pack.max_exp_avg_sq[k] = amsgrad ? ptr<T>(t[3]) : nullptr;
        pack.step_size[k] = C(step_size[i]);
        pack.bias_correction2_sqrt[k] = C(bc2[i]);
      }
      dev.make_current();
      adam_kernel<T>
          <<<grid_for(dev, pack.map.chunks(), 1), kThreads, 0, dev.stream()>>>(pack, group);
      check_launch(dev, "adam_step");
    });
  };
  run(DType::f32, static_cast<float*>(nullptr));
  run(DType::f16, static_cast<Half*>(nullptr));
  run(DType::bf16, static_cast<BFloat16*>(nullptr));
  run(DType::f64, static_cast<double*>(nullptr));
}

void sgd_step_kernel(DeviceImpl& d, const OpCall& c) {
  const bool momentum = c.attrs.f("momentum") != 0;
  const std::size_t per = momentum ? 2 : 1;
  const std::size_t n = check_group(c, per, "sgd_step");
  const std::vector<std::int64_t> init = optim_args::sgd_init_buffer(c, n);
  // Read (and checked) before any launch, in both compute types.
  const auto group_f = optim_args::sgd_scalars<float>(c.attrs);
  const auto group_d = optim_args::sgd_scalars<double>(c.attrs);
  CudaDevice& dev = cuda_device(d);
  auto run = [&]<typename T>(DType dt, T*) {
    const math::SgdScalars<compute_t<T>>& group = pick<compute_t<T>>(group_f, group_d);
    for_each_pack(c, n, dt, [&](const std::vector<std::size_t>& params) {
      SgdPack<T> pack{};
      for (std::size_t i : params) {
        const TensorArg* t = &c.outputs[i * per];
        const int k = pack.map.add(c.inputs[i].numel());
        pack.grad[k] = ptr<const T>(c.inputs[i]);
        pack.param[k] = ptr<T>(t[0]);
        pack.buf[k] = momentum ? ptr<T>(t[1]) : nullptr;
        pack.init_buffer[k] = init[i] != 0;
      }
      dev.make_current();
      sgd_kernel<T>
          <<<grid_for(dev, pack.map.chunks(), 1), kThreads, 0, dev.stream()>>>(pack, group);
      check_launch(dev, "sgd_step");
    });
  };
  run(DType::f32, static_cast<float*>(nullptr));
  run(DType::f16, static_cast<Half*>(nullptr));
  run(DType::bf16, static_cast<BFloat16*>(nullptr));
  run(DType::f64, static_cast<double*>(nullptr));
}

}  // namespace

void add_optim_kernels(KernelTable& t) {
  t.emplace_back(OpId::adam_step, adam_step_kernel);
  t.emplace_back(OpId::sgd_step, sgd_step_kernel);
}

}  // namespace ferry::cuda
