// runtime/vulkan/vk_kernels_elementwise.cpp — unary, binary, comparison,
// activation backward, where, copy/cast, fill and arange through
// shaders/elementwise.comp. The host
// coalesces dims, loops over dims beyond the shader's 4, and splits tensors
// whose span exceeds the storage-buffer range (or 2^31 elements) into chunks
// along their outer dims (vk_split.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "abi/elementwise.h"
#include "ferry/error.hpp"
#include "ferry/kit/math/elementwise_ops.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_policy.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

// The shader's OP specialization constant is the op's OpId (ferry_ops.glsl is
// generated from the same table, Note [The op table]).
constexpr std::uint32_t code(OpId op) { return std::uint32_t(op); }

constexpr int kMaxDims = 4;     // dims the shader indexes
constexpr int kMaxTensors = 4;  // output + up to 3 inputs

struct Launch {
  std::uint32_t op, in_dt, out_dt;
  std::uint32_t s[5] = {0, 0, 0, 0, 0};  // abi::ElementwiseParams::s
};

// One dispatch over tensors of at most 4 dims, each within one binding.
void dispatch_chunk(VulkanDevice& dev, const Launch& l, const std::vector<TensorArg>& t) {
  abi::ElementwiseParams p{};
  const int nd = t[0].ndim();
  std::uint64_t n = 1;
  for (int d = 0; d < kMaxDims; ++d) {
    p.size[d] = d < nd ? std::uint32_t(t[0].sizes[d]) : 1;
    n *= p.size[d];
  }
  std::vector<Binding> bindings;
  for (std::size_t i = 0; i < t.size(); ++i) {
    bindings.push_back(dev.bind(t[i], i == 0 ? Access::write : Access::read));
    p.off[i] = bindings.back().element_offset;
    for (int d = 0; d < nd; ++d) p.stride[i][d] = std::uint32_t(t[i].strides[d]);
  }
  while (bindings.size() < kMaxTensors) bindings.push_back(bindings[0]);  // unused by this op
  p.n = std::uint32_t(n);
  std::memcpy(p.s, l.s, sizeof p.s);
  const std::uint32_t wg = workgroup_size(dev.limits());
  const std::uint32_t groups =
      std::uint32_t(std::min<std::uint64_t>((n + wg - 1) / wg, dev.limits().max_groups_x));
  bool contiguous = nd == 1;
  for (const TensorArg& a : t) contiguous = contiguous && a.strides[0] == 1;
  const abi::ElementwiseSpec spec{.WG = wg,
                                  .OP = l.op,
                                  .IN_DT = l.in_dt,
                                  .OUT_DT = l.out_dt,
                                  .NDIM = std::uint32_t(std::max(nd, 1)),
                                  .CONTIGUOUS = contiguous};
  const bool f64 = l.in_dt == abi::DT_F64 || l.out_dt == abi::DT_F64;
  dev.dispatch({"elementwise",
                spec.values(),
                std::move(bindings),
                &p,
                sizeof p,
                {groups, 1, 1},
                spec.OP,
                f64});
}

// Cuts the tensors along their outer dims so that each fits a binding (vk_split.hpp), in
// parts of at most 2^31 elements (the shader counts them in 32 bits).
void dispatch_split(VulkanDevice& dev, const Launch& l, const std::vector<TensorArg>& t) {
  const std::int64_t rows = t[0].sizes[0];
  std::uint64_t row_numel = 1;
  for (int d = 1; d < t[0].ndim(); ++d) row_numel *= std::uint64_t(t[0].sizes[d]);
  const auto step = std::max<std::int64_t>(1, std::int64_t((std::uint64_t(1) << 31) / row_numel));
  for (std::int64_t r0 = 0; r0 < rows; r0 += step) {
    std::vector<TensorArg> part = t;
    for (TensorArg& a : part) a = narrow(std::move(a), 0, r0, std::min(step, rows - r0));
    for_each_part(dev.limits(), part, 0, t[0].ndim(),
                  [&](const auto& p, const auto&) { dispatch_chunk(dev, l, p); });
  }
}

// Coalesces dims; loops on the host over the dims beyond the shader's 4.
void run(DeviceImpl& d, const Launch& l, const TensorArg& out, std::vector<TensorArg> inputs) {
  VulkanDevice& dev = vulkan_device(d);
  if (out.numel() == 0) return;
  std::vector<TensorArg> t{out};
  for (auto& in : inputs) t.push_back(std::move(in));
  std::vector<std::vector<std::int64_t>> strides;
  for (const TensorArg& a : t) strides.push_back(a.strides);
  Coalesced c = coalesce(out.sizes, strides);
  const int nd = int(c.sizes.size());
  const int outer = std::max(0, nd - kMaxDims);
  std::vector<std::int64_t> idx(std::size_t(outer), 0);
  for (;;) {
    std::vector<TensorArg> part = t;
    for (std::size_t i = 0; i < t.size(); ++i) {
      part[i].sizes.assign(c.sizes.begin() + outer, c.sizes.end());
      part[i].strides.assign(c.strides[i].begin() + outer, c.strides[i].end());
      for (int k = 0; k < outer; ++k)
        part[i].offset += idx[std::size_t(k)] * c.strides[i][std::size_t(k)];
    }
    dispatch_split(dev, l, part);
    int k = outer - 1;
    while (k >= 0 && ++idx[std::size_t(k)] == c.sizes[std::size_t(k)]) idx[std::size_t(k--)] = 0;
    if (k < 0) break;
  }
}

std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The functor kinds: the op's row says which dtypes its kernel takes
// (DeviceImpl::supports is the same question, asked before a call).
void require_op(VulkanDevice& dev, OpId op, DType dt) {
  if (!op_info(op).kernel_dtypes().has(dt))
    throw UnsupportedError(fmt::format("{} does not take {}", op_name(op), dtype_name(dt)));
  dev.require_op(op, dt);
}

KernelFn unary(OpId op) {
  return [op](DeviceImpl& d, const OpCall& c) {
    const DType dt = c.outputs[0].dtype;
    require_op(vulkan_device(d), op, dt);
    run(d, {code(op), dtype_code(dt), dtype_code(dt)}, c.outputs[0], {c.inputs[0]});
  };
}

// binary and compare: inputs of the compute dtype, output of the result's.
KernelFn binary(OpId op) {
  return [op](DeviceImpl& d, const OpCall& c) {
    const DType in = c.inputs[0].dtype, out = c.outputs[0].dtype;
    require_op(vulkan_device(d), op, in);
    vulkan_device(d).require_op(op, out);
    run(d, {code(op), dtype_code(in), dtype_code(out)}, c.outputs[0], {c.inputs[0], c.inputs[1]});
  };
}

// (grad, z) -> out, every one of the output's floating dtype (docs/kernel-contract.md).
KernelFn activation_backward(OpId op) {
  return [op](DeviceImpl& d, const OpCall& c) {
    const DType dt = c.outputs[0].dtype;
    require_op(vulkan_device(d), op, dt);
    if (c.inputs.size() != 2 || c.inputs[0].dtype != dt || c.inputs[1].dtype != dt)
      throw DTypeError(
          fmt::format("{}: the vulkan kernel takes grad and z of the output's dtype {}",
                      op_name(op), dtype_name(dt)));
    run(d, {code(op), dtype_code(dt), dtype_code(dt)}, c.outputs[0], {c.inputs[0], c.inputs[1]});
  };
}

void where_kernel(DeviceImpl& d, const OpCall& c) {
  DType dt = c.outputs[0].dtype;
  vulkan_device(d).require(DType::boolean, "where");
  vulkan_device(d).require_op(OpId::where, dt);
  run(d, {code(OpId::where), dtype_code(dt), dtype_code(dt)}, c.outputs[0],
      {c.inputs[0], c.inputs[1], c.inputs[2]});
}

void copy_kernel(DeviceImpl& d, const OpCall& c) {
  DType in = c.inputs[0].dtype, out = c.outputs[0].dtype;
  vulkan_device(d).require_op(OpId::copy, in);
  vulkan_device(d).require_op(OpId::copy, out);
  run(d, {code(OpId::copy), dtype_code(in), dtype_code(out)}, c.outputs[0], {c.inputs[0]});
}

void fill_kernel(DeviceImpl& d, const OpCall& c) {
  DType dt = c.outputs[0].dtype;
  vulkan_device(d).require_op(OpId::fill, dt);
  Launch l{code(OpId::fill), dtype_code(dt), dtype_code(dt)};
  const double value = c.attrs.f("value");
  std::uint64_t bits = std::uint64_t(c.attrs.i("ivalue"));
  if (dt == DType::f64) std::memcpy(&bits, &value, 8);  // the double itself, for f64
  l.s[0] = float_bits(float(value));
  l.s[1] = std::uint32_t(bits);
  l.s[2] = std::uint32_t(bits >> 32);
  run(d, l, c.outputs[0], {});
}

void arange_kernel(DeviceImpl& d, const OpCall& c) {
  VulkanDevice& dev = vulkan_device(d);
  const TensorArg& out = c.outputs[0];
  const DType dt = out.dtype;
  dev.require_op(OpId::arange, dt);
  if (out.ndim() != 1) throw ShapeError("arange: the vulkan kernel expects a 1-D output");
  if (std::uint64_t(out.numel()) > 0xffffffffull)
    throw UnsupportedError("arange: the vulkan kernel counts elements in 32 bits");
  const double start = c.attrs.f("start"), step = c.attrs.f("step");
  Launch l{code(OpId::arange), dtype_code(dt), dtype_code(dt)};
  if (dt == DType::f64) {  // the doubles themselves: the f64 module computes as the CPU
    const auto a = std::bit_cast<std::uint64_t>(start), b = std::bit_cast<std::uint64_t>(step);
    l.s[0] = std::uint32_t(a);
    l.s[1] = std::uint32_t(a >> 32);
    l.s[2] = std::uint32_t(b);
    l.s[3] = std::uint32_t(b >> 32);
  } else {
    l.s[0] = float_bits(float(start));
    l.s[1] = float_bits(float(step));
    // Integer outputs of integral start and step are computed exactly in integers.
    auto small_int = [](double v) { return v == std::floor(v) && std::fabs(v) < 16777216.0; };
    l.s[2] = small_int(start) && small_int(step) ? 1 : 0;
  }
  // Parts that fit a binding, each told the index of its first element (s4).
  const std::int64_t n = out.numel();
  const std::int64_t part = std::max<std::int64_t>(1, max_chunk(dev.limits(), out, 0));
  for (std::int64_t k0 = 0; k0 < n; k0 += part) {
    l.s[4] = std::uint32_t(k0);
    run(d, l, narrow(out, 0, k0, std::min(part, n - k0)), {});
  }
}

// A clamp bound as the CPU's clamp_loop compares it: rounded to x's dtype (math::from_double),
// as a float's bits (f32, f16, bf16), a double's or an int64's.
std::uint64_t clamp_bound_bits(DType dt, double v, std::int64_t exact) {
  switch (dt) {
    case DType::f64:
      return std::bit_cast<std::uint64_t>(v);
    case DType::f32:
      return float_bits(float(v));
    case DType::f16:
      return float_bits(float(math::from_double<Half>(v, exact)));
    case DType::bf16:
      return float_bits(float(math::from_double<BFloat16>(v, exact)));
    case DType::i8:
      return std::uint64_t(std::int64_t(math::from_double<std::int8_t>(v, exact)));
    case DType::i16:
      return std::uint64_t(std::int64_t(math::from_double<std::int16_t>(v, exact)));
    case DType::i32:
      return std::uint64_t(std::int64_t(math::from_double<std::int32_t>(v, exact)));
    case DType::u8:
      return std::uint64_t(math::from_double<std::uint8_t>(v, exact));
    default:
      return std::uint64_t(exact);
  }
}

// The fused clamp with scalar bounds (ops_composite.cpp's clamp): one pass.
void clamp_kernel(DeviceImpl& d, const OpCall& c) {
  const DType dt = c.outputs[0].dtype;
  if (dt == DType::boolean || c.inputs.at(0).dtype != dt)
    throw UnsupportedError(
        fmt::format("clamp: the vulkan kernel takes x in the output's numeric dtype, not {}",
                    dtype_name(c.inputs.at(0).dtype)));
  vulkan_device(d).require_op(OpId::clamp, dt);
  Launch l{code(OpId::clamp), dtype_code(dt), dtype_code(dt)};
  for (int k = 0; k < 2; ++k) {
    const char* name = k == 0 ? "min" : "max";
    if (!c.attrs.has(name)) continue;
    const std::uint64_t bits =
        clamp_bound_bits(dt, c.attrs.f(name), c.attrs.i(k == 0 ? "min_i" : "max_i"));
    l.s[2 * k] = std::uint32_t(bits);
    l.s[2 * k + 1] = std::uint32_t(bits >> 32);
    l.s[4] |= 1u << k;
  }
  run(d, l, c.outputs[0], {c.inputs[0]});
}

}  // namespace

void record_elementwise(VulkanDevice& dev, OpId op, const TensorArg& out,
                        std::vector<TensorArg> inputs) {
  const DType in = inputs.at(0).dtype;
  dev.require_op(op, in);
  dev.require_op(op, out.dtype);
  run(dev, {code(op), dtype_code(in), dtype_code(out.dtype)}, out, std::move(inputs));
}

void add_elementwise_kernels(KernelTable& t) {
  for (const OpInfo& info : op_table()) {
    if (!(info.builtin_backends & kOpOn_vulkan)) continue;
    switch (info.kind) {
      case OpKind::unary:
        t.emplace_back(info.id, unary(info.id));
        break;
      case OpKind::binary:
      case OpKind::compare:
        t.emplace_back(info.id, binary(info.id));
        break;
      case OpKind::activation_backward:
        t.emplace_back(info.id, activation_backward(info.id));
        break;
      default:
        break;
    }
  }
  t.emplace_back(OpId::where, where_kernel);
  t.emplace_back(OpId::copy, copy_kernel);
  t.emplace_back(OpId::fill, fill_kernel);
  t.emplace_back(OpId::arange, arange_kernel);
  t.emplace_back(OpId::clamp, clamp_kernel);
}

}  // namespace ferry::vulkan
