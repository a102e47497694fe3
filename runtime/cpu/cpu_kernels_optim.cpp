// runtime/cpu/cpu_kernels_optim.cpp — adam_step and sgd_step: one parameter
// group's update, in place, fused over every tensor of every parameter
// (docs/kernel-contract.md, "Ops for training"). The per-element math is in
// include/ferry/kit/math/grad_ops.hpp.
//
// Note [One loop over every parameter]
// A group's parameters are laid end to end as one range of elements and that
// range is split across threads (parallel_range), so one huge embedding table
// is shared by every thread rather than serialising behind the thread that got
// it, and a thousand small biases cost one parallel region, not a thousand.
// Each thread walks the parameters its sub-range overlaps and dispatches on
// each one's dtype. Everything is checked before any element is touched, so a
// bad call leaves every parameter as it was.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <type_traits>
#include <utility>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_clones.hpp"  // FERRY_CPU_CLONES on Adam's f32 loop
#include "cpu/cpu_loops.hpp"
#include "ferry/error.hpp"
#include "ferry/kit/math/grad_ops.hpp"
#include "ferry/kit/optim_args.hpp"

namespace ferry::cpu {
namespace {

using optim_args::check_group;
using optim_args::per_param_floats;

// Runs body(i, begin, end) over the element sub-ranges of tensors[0..n), all their elements
// split across threads as one range (Note [One loop over every parameter]).
template <typename Body> void for_each_element_range(const std::vector<TensorArg>& tensors,
                                                     std::size_t n, const Body& body) {
  std::vector<std::int64_t> start(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) start[i + 1] = start[i] + tensors[i].numel();
  parallel_range(start[n], kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    // The last parameter starting at or before b (skipping empty ones).
    std::size_t i =
        std::size_t(std::upper_bound(start.begin(), start.end(), b) - start.begin()) - 1;
    for (; i < n && start[i] < e; ++i) {
      const std::int64_t lo = std::max(b, start[i]) - start[i];
      const std::int64_t hi = std::min(e, start[i + 1]) - start[i];
      if (lo < hi) body(i, lo, hi);
    }
  });
}

// A group's scalars in both compute types, read from the attrs once, before any work.
template <template <typename> class S> struct BothComputeTypes {
  S<float> f;
  S<double> d;
  template <typename C> S<C> get() const {
    if constexpr (std::is_same_v<C, float>)
      return f;
    else
      return d;
  }
};

template <typename T> void adam_range(const math::AdamScalars<compute_t<T>>& s, const T* grad, T* p,
                                      T* m, T* v, T* vmax, std::int64_t lo, std::int64_t hi) {
  using C = compute_t<T>;
  for (std::int64_t k = lo; k < hi; ++k) {
    C pc = C(p[k]), mc = C(m[k]), vc = C(v[k]), vmaxc = vmax ? C(vmax[k]) : C(0);
    math::adam_update<C>(s, C(grad[k]), pc, mc, vc, vmaxc);
    p[k] = T(pc);
    m[k] = T(mc);
    v[k] = T(vc);
    if (vmax) vmax[k] = T(vmaxc);
  }
}

// Adam over f32 elements, the common case: the flags that hold for a whole call are template
// arguments set into the scalars before the loop, so each variant's loop has no branch left
// and vectorizes, compiled for AVX-512 and AVX2 too (FERRY_CPU_CLONES). Each element takes
// adam_update's operations in the same order, none contracted into an FMA (this file is
// compiled with -ffp-contract=off: runtime/CMakeLists.txt), so the results are the same bits
// as one element at a time; only the loop is faster (it took 0.84 ms of a 2.9 ms MLP step
// over 670k parameters one element at a time).
template <bool kAmsgrad, bool kMaximize, bool kDecoupled, bool kWeightDecay>
FERRY_CPU_CLONES void adam_f32(math::AdamScalars<float> s, const float* __restrict grad,
                               float* __restrict p, float* __restrict m, float* __restrict v,
                               float* __restrict vmax, std::int64_t lo, std::int64_t hi) {
  s.amsgrad = kAmsgrad, s.maximize = kMaximize, s.decoupled = kDecoupled;
  s.has_weight_decay = kWeightDecay;
  for (std::int64_t k = lo; k < hi; ++k) {
    float pc = p[k], mc = m[k], vc = v[k], vmaxc = kAmsgrad ? vmax[k] : 0.0f;
    math::adam_update<float>(s, grad[k], pc, mc, vc, vmaxc);
    p[k] = pc;
    m[k] = mc;
    v[k] = vc;
    if constexpr (kAmsgrad) vmax[k] = vmaxc;
  }
}
using AdamF32 = void (*)(math::AdamScalars<float>, const float*, float*, float*, float*, float*,
                         std::int64_t, std::int64_t);
template <std::size_t... I>
constexpr std::array<AdamF32, 16> adam_f32_variants(std::index_sequence<I...>) {
  return {&adam_f32<bool(I & 1), bool(I & 2), bool(I & 4), bool(I & 8)>...};
}
const std::array<AdamF32, 16> kAdamF32 = adam_f32_variants(std::make_index_sequence<16>());
AdamF32 adam_f32_for(const math::AdamScalars<float>& s) {
  return kAdamF32[std::size_t(s.amsgrad) | std::size_t(s.maximize) << 1 |
                  std::size_t(s.decoupled) << 2 | std::size_t(s.has_weight_decay) << 3];
}

void adam_step_kernel(DeviceImpl&, const OpCall& c) {
  const bool amsgrad = c.attrs.b("amsgrad");
  const std::size_t per = amsgrad ? 4 : 3;
  const std::size_t n = check_group(c, per, "adam_step");
  const auto& step_size = per_param_floats(c, "step_size", n, "adam_step");
  const auto& bc2 = per_param_floats(c, "bias_correction2_sqrt", n, "adam_step");
  const BothComputeTypes<math::AdamScalars> group{optim_args::adam_scalars<float>(c.attrs),
                                                  optim_args::adam_scalars<double>(c.attrs)};
  for_each_element_range(c.inputs, n, [&](std::size_t i, std::int64_t lo, std::int64_t hi) {
    const TensorArg* t = &c.outputs[i * per];
    if (c.inputs[i].dtype == DType::f32) {
      math::AdamScalars<float> s = group.f;
      s.step_size = float(step_size[i]);
      s.bias_correction2_sqrt = float(bc2[i]);
      adam_f32_for(s)(s, c.inputs[i].data<float>(), t[0].data<float>(), t[1].data<float>(),
                      t[2].data<float>(), amsgrad ? t[3].data<float>() : nullptr, lo, hi);
      return;
    }
    FERRY_DISPATCH_FLOATING(c.inputs[i].dtype, "adam_step", {
      using C = compute_t<scalar_t>;
      auto s = group.get<C>();
      s.step_size = C(step_size[i]);
      s.bias_correction2_sqrt = C(bc2[i]);
      adam_range<scalar_t>(s, c.inputs[i].data<scalar_t>(), t[0].data<scalar_t>(),
                           t[1].data<scalar_t>(), t[2].data<scalar_t>(),
                           amsgrad ? t[3].data<scalar_t>() : nullptr, lo, hi);
    });
  });
}

template <typename T> void sgd_range(const math::SgdScalars<compute_t<T>>& s, const T* grad, T* p,
                                     T* buf, std::int64_t lo, std::int64_t hi) {
  using C = compute_t<T>;
  for (std::int64_t k = lo; k < hi; ++k) {
    C pc = C(p[k]), bc = buf ? C(buf[k]) : C(0);
    math::sgd_update<C>(s, C(grad[k]), pc, bc);
    p[k] = T(pc);
    if (buf) buf[k] = T(bc);
  }
}

void sgd_step_kernel(DeviceImpl&, const OpCall& c) {
  const bool momentum = c.attrs.f("momentum") != 0;
  const std::size_t per = momentum ? 2 : 1;
  const std::size_t n = check_group(c, per, "sgd_step");
  const std::vector<std::int64_t> init = optim_args::sgd_init_buffer(c, n);
  const BothComputeTypes<math::SgdScalars> group{optim_args::sgd_scalars<float>(c.attrs),
                                                 optim_args::sgd_scalars<double>(c.attrs)};
  for_each_element_range(c.inputs, n, [&](std::size_t i, std::int64_t lo, std::int64_t hi) {
    const TensorArg* t = &c.outputs[i * per];
    FERRY_DISPATCH_FLOATING(c.inputs[i].dtype, "sgd_step", {
      auto s = group.get<compute_t<scalar_t>>();
      s.init_buffer = init[i] != 0;
      sgd_range<scalar_t>(s, c.inputs[i].data<scalar_t>(), t[0].data<scalar_t>(),
                          momentum ? t[1].data<scalar_t>() : nullptr, lo, hi);
    });
  });
}

// GradScaler's unscale (ferry/grad_scaler.hpp): outputs = the gradients, then found_inf
// (f32, one element). Every gradient is checked for inf and NaN before it is multiplied by
// inv_scale, in one pass over all of them; found_inf becomes 1 when one is found (it is never
// cleared here: several calls accumulate into it).
void amp_unscale_kernel(DeviceImpl&, const OpCall& c) {
  if (c.outputs.empty() || c.outputs.back().dtype != DType::f32 || c.outputs.back().numel() != 1)
    throw Error("amp_unscale: the last output must be found_inf, an f32 tensor of one element");
  const std::size_t n = c.outputs.size() - 1;
  for (std::size_t i = 0; i < n; ++i)
    if (!c.outputs[i].is_contiguous())
      throw Error(fmt::format("amp_unscale: gradient {} is not contiguous", i));
  const double inv_scale = c.attrs.f("inv_scale");
  std::atomic<bool> found{false};
  for_each_element_range(c.outputs, n, [&](std::size_t i, std::int64_t lo, std::int64_t hi) {
    FERRY_DISPATCH_FLOATING(c.outputs[i].dtype, "amp_unscale", {
      using C = compute_t<scalar_t>;
      scalar_t* g = c.outputs[i].data<scalar_t>();
      const C s = C(inv_scale);
      bool bad = false;
      for (std::int64_t k = lo; k < hi; ++k) {
        const C v = C(g[k]);
        bad |= !std::isfinite(v);
        g[k] = scalar_t(v * s);
      }
      if (bad) found.store(true, std::memory_order_relaxed);
    });
  });
  if (found.load()) *c.outputs.back().data<float>() = 1.0f;
}

}  // namespace

void add_optim_kernels(KernelTable& t) {
  t.emplace_back(OpId::adam_step, adam_step_kernel);
  t.emplace_back(OpId::sgd_step, sgd_step_kernel);
  t.emplace_back(OpId::amp_unscale, amp_unscale_kernel);
}

}  // namespace ferry::cpu
