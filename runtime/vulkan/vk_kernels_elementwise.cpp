// runtime/vulkan/vk_kernels_elementwise.cpp — unary, binary, comparison,
// activation backward, where, copy/cast, fill and arange through
// shaders/elementwise.comp. The host
// coalesces dims, loops over dims beyond the shader's 4, and splits tensors
// whose span exceeds the storage-buffer range (or 2^31 elements) into chunks
// along their outer dims (vk_split.hpp).
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "ferry/error.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_policy.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

// The op codes of shaders/elementwise.comp.
enum ElementwiseOp : std::uint32_t {
  kNeg = 1,
  kAbs,
  kRelu,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kSin,
  kCos,
  kTanh,
  kSigmoid,
  kGelu,
  kGeluTanh,
  kSilu,
  kAdd = 20,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMaximum,
  kMinimum,
  kEq = 30,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kWhere = 40,
  kCopy,
  kFill,
  kArange,
  kReluBackward = 50,
  kGeluBackward,
  kGeluTanhBackward,
  kSiluBackward,
  kSigmoidBackward,
  kTanhBackward,
};

constexpr int kMaxDims = 4;     // dims the shader indexes
constexpr int kMaxTensors = 4;  // output + up to 3 inputs

struct Params {
  std::uint32_t size[4];
  std::uint32_t stride[kMaxTensors][4];
  std::uint32_t off[4];
  std::uint32_t n;
  std::uint32_t s[3];
};
static_assert(sizeof(Params) <= kMaxPushBytes);

struct Launch {
  std::uint32_t op, in_dt, out_dt;
  std::uint32_t s[3] = {0, 0, 0};
};

// One dispatch over tensors of at most 4 dims, each within one binding.
void dispatch_chunk(VulkanDevice& dev, const Launch& l, const std::vector<TensorArg>& t) {
  Params p{};
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
  dev.dispatch({"elementwise",
                {wg, l.op, l.in_dt, l.out_dt, std::uint32_t(std::max(nd, 1)), contiguous},
                std::move(bindings),
                &p,
                sizeof p,
                {groups, 1, 1}});
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

KernelFn unary(std::uint32_t op, const char* name, bool integers) {
  return [op, name, integers](DeviceImpl& d, const OpCall& c) {
    DType dt = c.outputs[0].dtype;
    if (dt == DType::boolean || (!integers && !is_floating(dt)))
      throw UnsupportedError(fmt::format("{} does not take {}", name, dtype_name(dt)));
    vulkan_device(d).require(dt, name);
    run(d, {op, dtype_code(dt), dtype_code(dt)}, c.outputs[0], {c.inputs[0]});
  };
}

KernelFn binary(std::uint32_t op, const char* name) {
  return [op, name](DeviceImpl& d, const OpCall& c) {
    DType in = c.inputs[0].dtype, out = c.outputs[0].dtype;
    if (op == kDiv && !is_floating(out))
      throw UnsupportedError(fmt::format("{} does not take {}", name, dtype_name(out)));
    vulkan_device(d).require(in, name);
    vulkan_device(d).require(out, name);
    run(d, {op, dtype_code(in), dtype_code(out)}, c.outputs[0], {c.inputs[0], c.inputs[1]});
  };
}

// (grad, z) -> out, every one of the output's floating dtype (docs/kernel-contract.md).
KernelFn activation_backward(std::uint32_t op, const char* name) {
  return [op, name](DeviceImpl& d, const OpCall& c) {
    const DType dt = c.outputs[0].dtype;
    if (!is_floating(dt))
      throw UnsupportedError(fmt::format("{} does not take {}", name, dtype_name(dt)));
    if (c.inputs.size() != 2 || c.inputs[0].dtype != dt || c.inputs[1].dtype != dt)
      throw DTypeError(fmt::format(
          "{}: the vulkan kernel takes grad and z of the output's dtype {}", name, dtype_name(dt)));
    vulkan_device(d).require(dt, name);
    run(d, {op, dtype_code(dt), dtype_code(dt)}, c.outputs[0], {c.inputs[0], c.inputs[1]});
  };
}

void where_kernel(DeviceImpl& d, const OpCall& c) {
  DType dt = c.outputs[0].dtype;
  vulkan_device(d).require(DType::boolean, "where");
  vulkan_device(d).require(dt, "where");
  run(d, {kWhere, dtype_code(dt), dtype_code(dt)}, c.outputs[0],
      {c.inputs[0], c.inputs[1], c.inputs[2]});
}

void copy_kernel(DeviceImpl& d, const OpCall& c) {
  DType in = c.inputs[0].dtype, out = c.outputs[0].dtype;
  vulkan_device(d).require(in, "copy");
  vulkan_device(d).require(out, "copy");
  run(d, {kCopy, dtype_code(in), dtype_code(out)}, c.outputs[0], {c.inputs[0]});
}

void fill_kernel(DeviceImpl& d, const OpCall& c) {
  DType dt = c.outputs[0].dtype;
  vulkan_device(d).require(dt, "fill");
  Launch l{kFill, dtype_code(dt), dtype_code(dt)};
  const std::int64_t iv = c.attrs.i("ivalue");
  l.s[0] = float_bits(float(c.attrs.f("value")));
  l.s[1] = std::uint32_t(std::uint64_t(iv));
  l.s[2] = std::uint32_t(std::uint64_t(iv) >> 32);
  run(d, l, c.outputs[0], {});
}

void arange_kernel(DeviceImpl& d, const OpCall& c) {
  DType dt = c.outputs[0].dtype;
  vulkan_device(d).require(dt, "arange");
  const double start = c.attrs.f("start"), step = c.attrs.f("step");
  Launch l{kArange, dtype_code(dt), dtype_code(dt)};
  l.s[0] = float_bits(float(start));
  l.s[1] = float_bits(float(step));
  // Integer outputs of integral start and step are computed exactly in integers.
  auto small_int = [](double v) { return v == std::floor(v) && std::fabs(v) < 16777216.0; };
  l.s[2] = small_int(start) && small_int(step) ? 1 : 0;
  run(d, l, c.outputs[0], {});
}

}  // namespace

void add_elementwise_kernels(KernelTable& t) {
  struct U {
    const char* name;
    std::uint32_t op;
    bool integers;
  };
  for (const U& u :
       {U{"neg", kNeg, true}, U{"abs", kAbs, true}, U{"relu", kRelu, true}, U{"exp", kExp, false},
        U{"log", kLog, false}, U{"sqrt", kSqrt, false}, U{"rsqrt", kRsqrt, false},
        U{"sin", kSin, false}, U{"cos", kCos, false}, U{"tanh", kTanh, false},
        U{"sigmoid", kSigmoid, false}, U{"gelu", kGelu, false}, U{"gelu_tanh", kGeluTanh, false},
        U{"silu", kSilu, false}})
    t.emplace_back(u.name, unary(u.op, u.name, u.integers));
  struct B {
    const char* name;
    std::uint32_t op;
  };
  for (const B& b : {B{"add", kAdd}, B{"sub", kSub}, B{"mul", kMul}, B{"div", kDiv}, B{"pow", kPow},
                     B{"maximum", kMaximum}, B{"minimum", kMinimum}, B{"eq", kEq}, B{"ne", kNe},
                     B{"lt", kLt}, B{"le", kLe}, B{"gt", kGt}, B{"ge", kGe}})
    t.emplace_back(b.name, binary(b.op, b.name));
  for (const B& b : {B{"relu_backward", kReluBackward}, B{"gelu_backward", kGeluBackward},
                     B{"gelu_tanh_backward", kGeluTanhBackward}, B{"silu_backward", kSiluBackward},
                     B{"sigmoid_backward", kSigmoidBackward}, B{"tanh_backward", kTanhBackward}})
    t.emplace_back(b.name, activation_backward(b.op, b.name));
  t.emplace_back("where", where_kernel);
  t.emplace_back("copy", copy_kernel);
  t.emplace_back("fill", fill_kernel);
  t.emplace_back("arange", arange_kernel);
}

}  // namespace ferry::vulkan
