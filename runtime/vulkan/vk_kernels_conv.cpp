// runtime/vulkan/vk_kernels_conv.cpp — conv1d/2d/3d, conv_backward_input and
// conv_backward_weight through shaders/conv.comp (docs/kernel-contract.md; the attributes are
// the CPU kernel's).
//
// Note [Vulkan convolution]
// Convolutions run as implicit GEMMs on the tiles matmul uses (shaders/gemm_tile.glsl,
// vk_gemm_tiles.hpp): the im2col columns are computed by the loaders as they stage each slice
// in shared memory, never written to memory, so a 3x3 layer reads its input from the cache
// nine times instead of writing and reading a nine-times-larger column matrix. The batch is
// folded into the GEMM's columns. Which kernel runs is chosen per shape:
// - a product with fewer than kMinGemmRows rows per group (the forward and weight gradient of a
//   depthwise convolution: one output channel per group; the input gradient of one with few
//   input channels per group, a first layer's three colours included): a direct kernel, since
//   the GEMM would leave its tiles nearly empty, and, for the input gradient of a strided
//   convolution, multiply mostly zeros (the taps that land on no output);
// - everything else: the implicit GEMM, its tile chosen as matmul's is (from the products'
//   count and the device's limits). The input gradient of a strided convolution runs one GEMM
//   per stride phase over the taps that land on its positions only (conv.comp). The weight
//   gradient's sum runs over the whole batch and every position (32 x 56 x 56 terms at ResNet-18's
//   first stage) into few outputs, so it is cut into pieces that fill the GPU, each writing a
//   partial result, added up in order by a second pass (deterministic: no atomics).
// With the cooperative-matrix path on, f16 (and bf16, where it takes them) convolutions of one
// group run on it, forward and backward (Note [Convolutions on cooperative matrices]).
// Tensors larger than one storage-buffer binding are cut along the batch (vk_split.hpp); the
// sums over the batch then add one part per cut. A single sample larger than a binding raises
// UnsupportedError.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <memory>

#include "abi/conv.h"
#include "ferry/error.hpp"
#include "ferry/kit/conv_ops.hpp"
#include "ferry/profiler.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_gemm_tiles.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

constexpr std::uint32_t kMinGemmRows = 8;              // fewer rows per group: a direct kernel
constexpr std::uint64_t kTargetGroups = 256;           // workgroups that keep a large GPU busy
constexpr std::uint64_t kMinPieceTerms = 1024;         // the shortest piece of a split sum
constexpr std::uint64_t kMaxPartsBytes = 64ull << 20;  // the partial sums' scratch
// The reductions' and direct kernels' shared slices (their workgroup sums use sA): at least
// kSmallGroup FVEC4s.
constexpr Tile kSmallTile{32, 32, 8, 4, 4};
constexpr std::uint32_t kSmallGroup = 128;

// One call's geometry and how it runs.
struct Conv {
  VulkanDevice& dev;
  OpId op;
  DType dt;
  abi::ConvParams p{};  // N is the whole batch's; each dispatch's is its chunk's
  std::uint32_t Cg = 0, OCg = 0, K = 0, L = 0, area = 0;
  // Whether each pass runs a direct kernel (Note [Vulkan convolution]): where the GEMM's rows
  // would be too few, and one invocation of the direct kernel stays within the device's loop
  // budget (Note [Loop budget] in vk_kernels.hpp), every loop counted: a trip per tap (forward,
  // input gradient: the channels it sums, and its index arithmetic's loops over 3 dims) or per
  // sample (weight gradient: its share of the positions). The GEMM cuts its sums otherwise.
  bool direct_forward() const { return OCg < kMinGemmRows && direct_fits(K, 1 + 6 + Cg, 16); }
  bool direct_backward_input() const {
    const std::uint64_t strides = std::uint64_t(p.stride[0]) + p.stride[1] + p.stride[2];
    return Cg < kMinGemmRows && direct_fits(K, 1 + 6 + OCg, 16 + 3 * (2 + strides));
  }
  // (its rows are the output channels, its columns the input channels' taps: either too few)
  // (the batch then comes in chunks of direct_weight_samples())
  bool direct_backward_weight() const {
    return (OCg < kMinGemmRows || Cg * K < kMinGemmRows) && direct_weight_samples() > 0;
  }
  std::uint64_t direct_weight_samples() const {
    const std::uint64_t share = ceil_div(L, workgroup_size(dev.limits(), kSmallGroup));
    return loop_trips_per_invocation(dev.limits(), p.N, 1 + share * (1 + 6), 32);
  }
  bool direct_fits(std::uint64_t trips, std::uint64_t per_trip, std::uint64_t fixed) const {
    return loop_trips_per_invocation(dev.limits(), trips, per_trip, fixed) == trips;
  }
  bool f64() const { return dt == DType::f64; }
  // Bytes of the compute type: the GEMM's shared slices and the partial sums hold it.
  std::uint32_t compute_bytes() const { return f64() ? 8 : 4; }
};

// x is input-shaped (x or gx), w weight-shaped (w or gw), y output-shaped (y or gy).
Conv geometry(VulkanDevice& dev, const OpCall& c, const TensorArg& x, const TensorArg& w,
              const TensorArg& y) {
  for (const auto* list : {&c.inputs, &c.outputs})
    for (const TensorArg& t : *list)
      if (!t.is_contiguous())
        throw Error(fmt::format("{}: the vulkan kernel takes contiguous tensors", c.name()));
  if (x.dtype != w.dtype || y.dtype != w.dtype)
    throw DTypeError(fmt::format("{}: the vulkan kernel takes one dtype", c.name()));
  const auto& stride = c.attrs.ints("stride");
  const auto& lo = c.attrs.ints("padding_lo");
  const auto& dil = c.attrs.ints("dilation");
  const int n = x.ndim() - 2;
  if (n < 1 || n > 3 || w.ndim() != n + 2 || y.ndim() != n + 2)
    throw ShapeError(fmt::format("{}: the vulkan kernel takes 1 to 3 spatial dims", c.name()));
  Conv cv{dev, c.op, x.dtype};
  abi::ConvParams& p = cv.p;
  p.N = std::uint32_t(x.sizes[0]);
  p.C = std::uint32_t(x.sizes[1]);
  p.OC = std::uint32_t(w.sizes[0]);
  p.G = std::uint32_t(c.attrs.i("groups"));
  for (int i = 0; i < 3; ++i) {
    const int j = i - (3 - n);  // the tensors' spatial dim, or < 0 for a leading 1
    const bool real = j >= 0;
    p.isz[i] = real ? std::uint32_t(x.sizes[std::size_t(j + 2)]) : 1;
    p.osz[i] = real ? std::uint32_t(y.sizes[std::size_t(j + 2)]) : 1;
    p.ksz[i] = real ? std::uint32_t(w.sizes[std::size_t(j + 2)]) : 1;
    p.stride[i] = real ? std::uint32_t(stride[std::size_t(j)]) : 1;
    p.pad[i] = real ? std::uint32_t(lo[std::size_t(j)]) : 0;
    p.dil[i] = real ? std::uint32_t(dil[std::size_t(j)]) : 1;
  }
  cv.Cg = p.C / p.G;
  cv.OCg = p.OC / p.G;
  cv.K = p.ksz[0] * p.ksz[1] * p.ksz[2];
  cv.L = p.osz[0] * p.osz[1] * p.osz[2];
  cv.area = p.isz[0] * p.isz[1] * p.isz[2];
  return cv;
}

// The switches of a dispatch (conv.h's spec constants).
struct Flags {
  bool has_bias = false;    // forward: binding 3 is the bias
  bool accumulate = false;  // a batch sum adds to what binding 0 holds (binding 3 reads it)
  bool b_kfast = false;     // the GEMM's B is walked along K
};

void dispatch(const Conv& cv, std::uint32_t mode, const Tile& t, std::uint32_t wg,
              std::array<Binding, 4> b, const abi::ConvParams& p,
              std::array<std::uint32_t, 3> groups, Flags f) {
  const std::vector<std::uint32_t> spec = abi::ConvSpec{.WG = wg,
                                                        .DT = dtype_code(cv.dt),
                                                        .BM = t.bm,
                                                        .BN = t.bn,
                                                        .BK = t.bk,
                                                        .TM = t.tm,
                                                        .TN = t.tn,
                                                        .A_MFAST = false,
                                                        .B_KFAST = f.b_kfast,
                                                        .MODE = mode,
                                                        .HAS_BIAS = f.has_bias,
                                                        .ACCUMULATE = f.accumulate}
                                              .values();
  cv.dev.dispatch({"conv",
                   spec,
                   {b[0], b[1], b[2], b[3]},
                   &p,
                   sizeof p,
                   groups,
                   std::uint32_t(cv.op),
                   cv.f64()});
}

// The 2-D grid of workgroups for `count` independent groups (the direct kernels' threads over
// kSmallGroup, or one workgroup per element).
std::array<std::uint32_t, 3> spread(const KernelLimits& lim, std::uint64_t count) {
  const std::uint64_t x =
      std::min<std::uint64_t>(std::max<std::uint64_t>(count, 1), lim.max_groups_x);
  const std::uint64_t y = ceil_div(count, x);
  if (y > lim.max_groups_x)
    throw UnsupportedError("conv: the vulkan kernel's grid exceeds the device's group limits");
  return {std::uint32_t(x), std::uint32_t(y), 1};
}

// A direct kernel's dispatch: one thread per element, or one workgroup (per_group).
void direct(const Conv& cv, std::uint32_t mode, std::array<Binding, 4> b, const abi::ConvParams& p,
            std::uint64_t count, bool per_group, Flags f = {}) {
  const std::uint32_t wg = workgroup_size(cv.dev.limits(), kSmallGroup);
  dispatch(cv, mode, kSmallTile, wg, b, p,
           spread(cv.dev.limits(), per_group ? count : ceil_div(count, wg)), f);
}

// An implicit GEMM's dispatches: M x N per group and piece (z = piece * G + group), the grid
// cut where it exceeds the device's limits.
void gemm(const Conv& cv, std::uint32_t mode, const Tile& t, std::array<Binding, 4> b,
          abi::ConvParams p, std::uint64_t M, std::uint64_t N, std::uint64_t z, Flags f = {}) {
  const std::uint32_t max = cv.dev.limits().max_groups_x;
  if (z > max)
    throw UnsupportedError(fmt::format("{}: {} groups exceed the device's {} workgroups along z",
                                       op_name(cv.op), z, max));
  const std::uint64_t gx = ceil_div(N, t.bn), gy = ceil_div(M, t.bm);
  for (std::uint64_t y = 0; y < gy; y += max)
    for (std::uint64_t x = 0; x < gx; x += max) {
      p.m_tile0 = std::uint32_t(y);
      p.n_tile0 = std::uint32_t(x);
      dispatch(cv, mode, t, t.threads(), b, p,
               {std::uint32_t(std::min<std::uint64_t>(max, gx - x)),
                std::uint32_t(std::min<std::uint64_t>(max, gy - y)), std::uint32_t(z)},
               f);
    }
}

// Calls f(first, count) for chunks of the batch whose tensors (batch-major, `batched`) each fit
// one binding.
void for_each_chunk(const Conv& cv, std::initializer_list<TensorArg> batched,
                    const std::function<void(std::int64_t, std::int64_t)>& f,
                    std::int64_t max_samples = std::numeric_limits<std::int64_t>::max()) {
  const KernelLimits& lim = cv.dev.limits();
  if (cv.p.N == 0)  // docs/kernel-contract.md: the composition handles empty batches
    throw Error(fmt::format("{}: the vulkan kernel was given an empty batch", op_name(cv.op)));
  std::int64_t chunk = std::min(std::int64_t(cv.p.N), max_samples);
  for (const TensorArg& t : batched) chunk = std::min(chunk, max_chunk(lim, t, 0));
  if (chunk <= 0)
    throw UnsupportedError(fmt::format(
        "{}: one sample spans more than the device's storage-buffer range ({} bytes); the "
        "Vulkan kernel cuts convolutions between samples, not within one",
        op_name(cv.op), lim.max_storage_range));
  for (std::int64_t n0 = 0; n0 < std::int64_t(cv.p.N); n0 += chunk)
    f(n0, std::min<std::int64_t>(chunk, std::int64_t(cv.p.N) - n0));
}

// Note [Convolutions on cooperative matrices]
// With the cooperative-matrix path on (Note [Cooperative-matrix GEMM] in vk_kernels_coopmat.cpp),
// an f16 convolution's forward pass of one group runs on it (bf16 too, on the BF16 modules,
// where the device takes bf16 products: VulkanDevice::coopmat_takes), in one of two ways:
// - pointwise (1x1 kernel, stride 1, no padding, no bias; a ResNet bottleneck's two of three):
//   the product y[n] = w [OC, C] x x[n] [C, L] for each sample, which matmul's kernel runs as a
//   batch with the weight's batch stride 0;
// - any other (conv_on_coopmat): the kernel's CONV modules, an implicit GEMM
//   y [OC, batch x L] = w [OC, C x taps] x im2col(x) [C x taps, batch x L], the batch folded
//   into the columns so that small late layers (7 x 7 positions) still fill the blocks; each
//   invocation gathers the input's halves for its 8 columns as it stages them (never writing
//   the im2col matrix), and the results go out element by element, with the bias.
// The input gradient runs the same way (CONV=2 modules): it is the forward pass of the
// transposed convolution, gx = w' x im2col(gy) with the kernel flipped (w' gathered half by
// half) and padded by (kernel - 1) x dilation - padding. With a stride s, a tap reaches gy only
// where s divides its coordinate, so the GEMM multiplies zeros for the others: s^dims times
// the work of stride 1 (a ResNet's stride-2 layers: 4 times), where the GLSL kernel runs one
// GEMM per stride phase over the taps that land. Which is faster on the matrix units is
// unmeasured (no GPU has run this path).
// The weight gradient gw [OC, C x taps] = gy [OC, batch x L] x im2col(x)^T sums over the whole
// batch into few outputs (ResNet-18's first stage: 64 x 576 outputs, 32 x 56 x 56 terms each),
// so, as the GLSL GEMM does, it is cut into pieces that fill the GPU (CONV=3 modules, piece z in
// workgroup z), each writing f32 partial sums that batch_sum's CONV_SUM_PARTS adds up in order
// and rounds once to the tensors' dtype; gy's rows and x's taps are gathered half by half as they
// are staged.
bool pointwise_on_coopmat(VulkanDevice& dev, const Conv& cv, const TensorArg& x, const TensorArg& w,
                          const TensorArg& y) {
  if (!dev.coopmat_takes(cv.dt) || cv.p.G != 1 || cv.K != 1 || cv.L != cv.area) return false;
  for (int e = 0; e < 3; ++e)
    if (cv.p.stride[e] != 1 || cv.p.pad[e] != 0) return false;
  const std::int64_t N = cv.p.N, C = cv.p.C, OC = cv.p.OC, L = cv.L;
  TensorArg a = w, b = x, c = y;
  a.sizes = {N, OC, C}, a.strides = {0, C, 1};
  b.sizes = {N, C, L}, b.strides = {C * L, L, 1};
  c.sizes = {N, OC, L}, c.strides = {OC * L, L, 1};
  return try_coopmat(dev, a, b, c);
}

// Push constants of shaders/gemm_coopmat.slang's CONV Params (Note [Convolutions on cooperative
// matrices]), in elements; dims as the ConvParams' (a leading 1 for fewer than 3).
struct CoopmatConvParams {
  std::uint32_t M, N, K, lda, a_off, b_off, c_off, bias_off, flags, L, osz1, osz2, isz0, isz1, isz2,
      ksz1, ksz2, taps, s0, s1, s2, p0, p1, p2, d0, d1, d2, jlen, g0, g1, g2;
};
static_assert(sizeof(CoopmatConvParams) <= 128, "the push constants every device takes");
constexpr std::uint32_t kConvAVectors = 1, kConvBias = 2;  // its flags

// The geometry of the gather: the sizes of the tensor B gathers from and of the positions the
// GEMM's columns produce (their last two dims), the kernel, and per dim the step between
// produced positions, the padding and the stride a tap's coordinate must be a multiple of to
// land (g0..g2). The GEMM's sizes, offsets and flags are the caller's.
CoopmatConvParams coopmat_conv_geometry(const Conv& cv, const std::uint32_t* gathered,
                                        const std::uint32_t* produced, const std::uint32_t* step,
                                        const std::uint32_t* pad, const std::uint32_t* lands) {
  const abi::ConvParams& p = cv.p;
  CoopmatConvParams q{};
  q.osz1 = produced[1], q.osz2 = produced[2];
  q.isz0 = gathered[0], q.isz1 = gathered[1], q.isz2 = gathered[2];
  q.ksz1 = p.ksz[1], q.ksz2 = p.ksz[2], q.taps = cv.K;
  q.s0 = step[0], q.s1 = step[1], q.s2 = step[2];
  q.p0 = pad[0], q.p1 = pad[1], q.p2 = pad[2];
  q.d0 = p.dil[0], q.d1 = p.dil[1], q.d2 = p.dil[2];
  q.g0 = lands[0], q.g1 = lands[1], q.g2 = lands[2];
  return q;
}

// y from x (`forward`), or gx from gy, on the CONV modules: `in` is x or gy, `out` y or gx.
bool conv_on_coopmat(VulkanDevice& dev, const Conv& cv, const TensorArg& in, const TensorArg& w,
                     const TensorArg& out, const TensorArg* bias, bool forward) {
  if (!dev.coopmat_takes(cv.dt) || cv.p.G != 1) return false;
  const abi::ConvParams& p = cv.p;
  // The GEMM: rows (y's channels, or gx's), columns (the batch's positions of y, or of gx), and
  // the sum (x's channels' taps, or gy's).
  const std::uint32_t rows = forward ? p.OC : p.C, positions = forward ? cv.L : cv.area;
  const std::uint64_t columns = std::uint64_t(p.N) * positions,
                      K = std::uint64_t(forward ? p.C : p.OC) * cv.K;
  if (columns == 0 || columns > 0xffffffffull || K > 0xffffffffull) return false;
  const KernelLimits& lim = dev.limits();
  for (const TensorArg* t : {&in, &w, &out, bias})
    if (t && !fits(lim, *t)) return false;
  const Binding ib = dev.bind(in, Access::read), wb = dev.bind(w, Access::read),
                ob = dev.bind(out, Access::write);
  const Binding bb = bias ? dev.bind(*bias, Access::read) : wb;
  const bool a_vectors = forward && K % 8 == 0 && wb.element_offset % 8 == 0;
  // The gathered tensor's sizes and the positions' (x and y forward; gy and gx backward, where
  // the flipped kernel pads by (kernel - 1) x dilation - padding, which may be negative).
  const std::uint32_t* gathered = forward ? p.isz : p.osz;
  const std::uint32_t* produced = forward ? p.osz : p.isz;
  // Backward, the produced positions step by 1 and the stride decides where taps land
  // (shaders/gemm_coopmat.slang's g0..g2).
  std::uint32_t pad[3], step[3], lands[3];
  for (int e = 0; e < 3; ++e) {
    pad[e] = forward ? p.pad[e] : std::uint32_t((p.ksz[e] - 1) * p.dil[e]) - p.pad[e];
    step[e] = forward ? p.stride[e] : 1;
    lands[e] = forward ? 1 : p.stride[e];
  }
  CoopmatConvParams push = coopmat_conv_geometry(cv, gathered, produced, step, pad, lands);
  push.M = rows, push.N = std::uint32_t(columns), push.K = std::uint32_t(K), push.lda = push.K;
  push.a_off = wb.element_offset, push.b_off = ib.element_offset, push.c_off = ob.element_offset;
  push.bias_off = bb.element_offset, push.L = positions;
  push.flags = (a_vectors ? kConvAVectors : 0) | (bias ? kConvBias : 0);
  return run_coopmat(
      dev, forward ? CoopmatOperandB::conv_input : CoopmatOperandB::conv_output_grad, cv.dt, 1,
      rows, columns, K,
      [&](const char* shader, std::uint32_t gx, std::uint32_t gy, std::uint32_t subgroup_size) {
        dev.dispatch({.shader = shader,
                      .spec = {},
                      .bindings = {wb, ib, ob, bb},
                      .push = &push,
                      .push_size = sizeof push,
                      .groups = {gx, gy, 1},
                      .subgroup_size = subgroup_size});
      });
}

// Whether the weight's gradient runs on the CONV=3 modules (every chunk of the batch then writes
// f32 parts, even a single one; the GLSL GEMM writes the same parts where no tile fits).
bool weight_grad_on_coopmat(VulkanDevice& dev, const Conv& cv) {
  return dev.coopmat_takes(cv.dt) && cv.p.G == 1 && !cv.direct_backward_weight();
}

// The partial sums of gw from a chunk of n samples (x and gy bound to it), `pieces` of them,
// into the f32 scratch `parts` [pieces, OC, C x taps]; false, having done nothing, where the
// sizes or the device's limits do not allow it.
bool weight_grad_parts_on_coopmat(VulkanDevice& dev, const Conv& cv, const Binding& xb,
                                  const Binding& gyb, const Binding& parts, std::int64_t n,
                                  std::uint64_t pieces) {
  const abi::ConvParams& p = cv.p;
  const std::uint64_t M = p.OC, N = std::uint64_t(p.C) * cv.K, K = std::uint64_t(n) * cv.L;
  if (K > 0xffffffffull || pieces * M * N > 0xffffffffull) return false;
  // Pieces start on multiples of 8 terms, so gy's rows load 16 bytes at a time where its
  // positions come in eights.
  const std::uint64_t jlen = ceil_div(ceil_div(K, pieces), 8) * 8;
  const bool a_vectors = cv.L % 8 == 0 && gyb.element_offset % 8 == 0;
  constexpr std::uint32_t kEveryTap[3] = {1, 1, 1};
  CoopmatConvParams push = coopmat_conv_geometry(cv, p.isz, p.osz, p.stride, p.pad, kEveryTap);
  push.M = std::uint32_t(M), push.N = std::uint32_t(N), push.K = std::uint32_t(K);
  push.a_off = gyb.element_offset, push.b_off = xb.element_offset;
  push.c_off = parts.element_offset, push.L = cv.L, push.jlen = std::uint32_t(jlen);
  push.flags = a_vectors ? kConvAVectors : 0;
  return run_coopmat(
      dev, CoopmatOperandB::conv_weight_grad, cv.dt, pieces, M, N, K,
      [&](const char* shader, std::uint32_t gx, std::uint32_t gy, std::uint32_t subgroup_size) {
        dev.dispatch({.shader = shader,
                      .spec = {},
                      .bindings = {gyb, xb, parts, gyb},
                      .push = &push,
                      .push_size = sizeof push,
                      .groups = {gx, gy, std::uint32_t(pieces)},
                      .subgroup_size = subgroup_size});
      });
}

// The loop iterations one invocation of conv.comp's GEMM counts per slice of the sums' terms:
// matmul's (Tile::loop_iterations_per_slice), and its loaders' gathers (each run of 4 columns
// walks its positions' 3 dims).
std::uint64_t slice_iterations(const Tile& t) {
  return t.loop_iterations_per_slice() + 8 * 4 * t.loads_per_slice();
}

// gemm() of the forward pass or the input gradient over its `terms` (a column's sum) in ranges
// one invocation walks within the device's loop budget (Note [Loop budget] in vk_kernels.hpp),
// `fixed` iterations besides: the ranges after the first add to what `out` (binding 0's
// tensor) holds, read through binding 3, where the first range read the bias.
void gemm_in_ranges(const Conv& cv, std::uint32_t mode, const Tile& t, std::array<Binding, 4> b,
                    const TensorArg& out, abi::ConvParams p, std::uint64_t M, std::uint64_t N,
                    std::uint64_t z, Flags f, std::uint64_t terms, std::uint64_t fixed) {
  const std::uint64_t slices = ceil_div(terms, t.bk);
  const std::uint64_t fit =
      loop_trips_per_invocation(cv.dev.limits(), slices, slice_iterations(t), fixed);
  if (fit == slices) return gemm(cv, mode, t, b, p, M, N, z, f);
  if (fit == 0)
    throw_past_loop_budget(
        cv.dev, op_name(cv.op),
        fmt::format("one slice of the GEMM runs {}", fixed + slice_iterations(t)));
  p.jlen = std::uint32_t(fit * t.bk);
  if (profiler::enabled())
    profiler::note_kernel(fmt::format("gemm in {} ranges of {} terms (loop budget)",
                                      ceil_div(terms, p.jlen), p.jlen));
  for (std::uint64_t k0 = 0; k0 < terms; k0 += p.jlen) {
    p.k_begin = std::uint32_t(k0);
    if (k0 > 0) {
      f.has_bias = false;
      f.accumulate = true;
      b[3] = cv.dev.bind(out, Access::read);
      p.off3 = b[3].element_offset;
    }
    gemm(cv, mode, t, b, p, M, N, z, f);
  }
}

// The forward pass (y from x) or the input's gradient (gx from gy): `out` from `in` and the
// weight, sample by sample, in chunks of the batch.
void per_sample(VulkanDevice& dev, const OpCall& c, bool forward) {
  const TensorArg &in = c.inputs.at(0), &w = c.inputs.at(1), &out = c.outputs.at(0);
  const Conv cv = forward ? geometry(dev, c, in, w, out) : geometry(dev, c, out, w, in);
  const Flags f{.has_bias = forward && c.attrs.b("has_bias")};
  const Binding wb = dev.bind(w, Access::read);
  const Binding bb = f.has_bias ? dev.bind(c.inputs.at(2), Access::read) : wb;
  // The GEMM's rows per group, and its columns per sample (out's positions).
  const std::uint64_t rows = forward ? cv.OCg : cv.Cg, positions = forward ? cv.L : cv.area;
  const bool direct_kernel = forward ? cv.direct_forward() : cv.direct_backward_input();
  if ((forward && !f.has_bias && pointwise_on_coopmat(dev, cv, in, w, out)) ||
      conv_on_coopmat(dev, cv, in, w, out, f.has_bias ? &c.inputs.at(2) : nullptr, forward))
    return;
  for_each_chunk(cv, {in, out}, [&](std::int64_t n0, std::int64_t n) {
    const Binding ob = dev.bind(narrow(out, 0, n0, n), Access::write);
    const Binding ib = dev.bind(narrow(in, 0, n0, n), Access::read);
    abi::ConvParams p = cv.p;
    p.N = std::uint32_t(n);
    p.off0 = ob.element_offset, p.off1 = ib.element_offset, p.off2 = wb.element_offset;
    p.off3 = bb.element_offset;
    const std::uint64_t columns = std::uint64_t(n) * positions;
    if (direct_kernel)
      return direct(cv, forward ? abi::CONV_DIRECT_FORWARD : abi::CONV_DIRECT_BACKWARD_INPUT,
                    {ob, ib, wb, bb}, p, columns * std::uint64_t(out.sizes[1]), false, f);
    if (forward) {
      const Tile t =
          choose_tile(op_name(c.op), dev.limits(), p.G, rows, columns, cv.compute_bytes());
      return gemm_in_ranges(cv, abi::CONV_FORWARD, t, {ob, ib, wb, bb}, narrow(out, 0, n0, n), p,
                            rows, columns, p.G, f, std::uint64_t(cv.Cg) * cv.K, 64);
    }
    // The input gradient, one GEMM per stride phase (conv.comp): as many as the stride's
    // product, each over at most ceil(in / stride) positions per dim.
    std::uint64_t phases = 1, phase_columns = std::uint64_t(n);
    for (int e = 0; e < 3; ++e) {
      phases *= p.stride[e];
      phase_columns *= ceil_div(p.isz[e], p.stride[e]);
    }
    const Tile t = choose_tile(op_name(c.op), dev.limits(), p.G * phases, rows, phase_columns,
                               cv.compute_bytes());
    // (Each phase sums at most OCg x K terms; the ranges past a phase's own add nothing.)
    const std::uint64_t strides = std::uint64_t(p.stride[0]) + p.stride[1] + p.stride[2];
    gemm_in_ranges(cv, abi::CONV_BACKWARD_INPUT, t, {ob, ib, wb, bb}, narrow(out, 0, n0, n), p,
                   rows, phase_columns, p.G * phases, f, std::uint64_t(cv.OCg) * cv.K,
                   64 + 3 * (2 + strides));
  });
}

// A sum over the batch into `out` (count elements): per chunk of the batch (for_each_chunk),
// `run(part0, out, n0, n, pieces, flags)` writes it in `pieces(n)` parts, straight into `out`
// when that is one (unless `always_parts`), else into scratch parts that CONV_SUM_PARTS adds up
// into `out`; the chunks after the first add to what the earlier ones left there.
using SumRun = std::function<void(std::uint32_t, std::array<Binding, 2>, std::int64_t, std::int64_t,
                                  std::uint64_t, Flags)>;
void batch_sum(const Conv& cv, const TensorArg& out, std::uint64_t count,
               std::initializer_list<TensorArg> batched,
               const std::function<std::uint64_t(std::int64_t)>& pieces, const SumRun& run,
               bool always_parts = false,
               std::int64_t max_samples = std::numeric_limits<std::int64_t>::max()) {
  bool first = true;
  for_each_chunk(
      cv, batched,
      [&](std::int64_t n0, std::int64_t n) {
        const Flags f{.accumulate = !first};
        first = false;
        // out, and out bound for reading (binding 3) when the chunk adds to it.
        const std::array<Binding, 2> ob{cv.dev.bind(out, Access::write),
                                        f.accumulate ? cv.dev.bind(out, Access::read) : Binding{}};
        const std::uint64_t k = pieces(n);
        if (k == 1 && !always_parts) return run(abi::CONV_NO_PARTS, ob, n0, n, 1, f);
        std::unique_ptr<Buffer> scratch = cv.dev.allocate(k * count * cv.compute_bytes());
        const TensorArg all{
            scratch.get(), 0, {std::int64_t(k * count)}, {1}, cv.f64() ? DType::f64 : DType::f32};
        const Binding sw = cv.dev.bind(all, Access::write);
        run(0, {sw, sw}, n0, n, k, {});
        const Binding sr = cv.dev.bind(all, Access::read);
        abi::ConvParams p = cv.p;
        p.jlen = std::uint32_t(count);
        p.part0 = std::uint32_t(k);
        p.off0 = ob[0].element_offset, p.off1 = sr.element_offset;
        p.off3 = f.accumulate ? ob[1].element_offset : sr.element_offset;
        direct(cv, abi::CONV_SUM_PARTS, {ob[0], sr, sr, f.accumulate ? ob[1] : sr}, p, count, false,
               f);
        // `scratch` may go now: the device keeps its memory until the GPU is done with it.
      },
      max_samples);
}

void backward_weight(VulkanDevice& dev, const OpCall& c) {
  const TensorArg &x = c.inputs.at(0), &gy = c.inputs.at(1), &gw = c.outputs.at(0);
  Conv cv = geometry(dev, c, x, gw, gy);
  const KernelLimits& lim = dev.limits();
  const std::uint64_t count = std::uint64_t(gw.numel());
  const std::uint64_t M = cv.OCg, N = std::uint64_t(cv.Cg) * cv.K;
  // The tile for the products as the pieces will multiply them: at most 64 per group.
  const std::uint64_t J = std::uint64_t(cv.p.N) * cv.L;
  const Tile t =
      choose_tile(op_name(c.op), lim, cv.p.G * std::clamp<std::uint64_t>(J / kMinPieceTerms, 1, 64),
                  M, N, cv.compute_bytes());
  const std::uint64_t budget = std::max<std::uint64_t>(
      1, std::min<std::uint64_t>(kMaxPartsBytes, usable_range(lim)) / (count * cv.compute_bytes()));
  const bool coopmat = weight_grad_on_coopmat(dev, cv);
  auto pieces_for = [&](std::int64_t n) -> std::uint64_t {
    if (cv.direct_backward_weight()) return 1;
    // Enough workgroups to fill the GPU, each piece at least kMinPieceTerms long (so none is
    // empty), the parts within the scratch budget and the grid. The cooperative-matrix
    // modules' blocks are counted as their largest (128 x 128).
    const std::uint64_t bm = coopmat ? 128 : t.bm, bn = coopmat ? 128 : t.bn;
    const std::uint64_t tiles = cv.p.G * ceil_div(M, bm) * ceil_div(N, bn);
    const std::uint64_t pieces =
        std::min({ceil_div(kTargetGroups, tiles),
                  std::max<std::uint64_t>(1, std::uint64_t(n) * cv.L / kMinPieceTerms), budget});
    // No piece longer than an invocation walks within the device's loop budget (Note [Loop
    // budget] in vk_kernels.hpp): a slice's count as matmul's, and its gathers' loops.
    const std::uint64_t slices = loop_trips_per_invocation(lim, ~0ull, slice_iterations(t), 64);
    const std::uint64_t sums =
        ceil_div(std::uint64_t(n) * cv.L, std::max<std::uint64_t>(slices, 1) * t.bk);
    return std::min(std::max(pieces, sums), std::max<std::uint64_t>(1, lim.max_groups_x / cv.p.G));
  };
  batch_sum(
      cv, gw, count, {x, gy}, pieces_for,
      [&](std::uint32_t part0, std::array<Binding, 2> ob, std::int64_t n0, std::int64_t n,
          std::uint64_t k, Flags f) {
        const Binding xb = dev.bind(narrow(x, 0, n0, n), Access::read);
        const Binding gyb = dev.bind(narrow(gy, 0, n0, n), Access::read);
        const Binding old = f.accumulate ? ob[1] : gyb;
        abi::ConvParams p = cv.p;
        p.N = std::uint32_t(n);
        p.part0 = part0;
        p.off0 = ob[0].element_offset, p.off1 = xb.element_offset;
        p.off2 = gyb.element_offset, p.off3 = old.element_offset;
        if (cv.direct_backward_weight())
          return direct(cv, abi::CONV_DIRECT_BACKWARD_WEIGHT, {ob[0], xb, gyb, old}, p, count, true,
                        f);
        if (coopmat && weight_grad_parts_on_coopmat(dev, cv, xb, gyb, ob[0], n, k)) return;
        p.jlen = std::uint32_t(ceil_div(std::uint64_t(n) * cv.L, k));
        // gy's rows walk the sum (k fast), and so do x's columns (B_KFAST).
        f.b_kfast = true;
        gemm(cv, abi::CONV_BACKWARD_WEIGHT, t, {ob[0], xb, gyb, old}, p, M, N, k * cv.p.G, f);
      },
      coopmat,
      cv.direct_backward_weight() ? std::int64_t(cv.direct_weight_samples())
                                  : std::numeric_limits<std::int64_t>::max());
  if (!c.attrs.b("has_bias")) return;
  const TensorArg& gb = c.outputs.at(1);
  // A workgroup per channel, each thread walking its share of every sample's positions: no
  // more samples a chunk than one invocation walks within the device's loop budget (Note
  // [Loop budget] in vk_kernels.hpp), every loop counted (the workgroup's tree too).
  const std::uint64_t share = ceil_div(cv.L, workgroup_size(lim, kSmallGroup));
  const std::uint64_t samples = loop_trips_per_invocation(lim, cv.p.N, 1 + share, 32);
  if (samples == 0)
    throw_past_loop_budget(
        dev, op_name(c.op),
        fmt::format("the bias gradient's threads would walk {} positions of one sample each",
                    share));
  batch_sum(
      cv, gb, cv.p.OC, {gy}, [](std::int64_t) { return 1; },
      [&](std::uint32_t part0, std::array<Binding, 2> ob, std::int64_t n0, std::int64_t n,
          std::uint64_t, Flags f) {
        const Binding gyb = dev.bind(narrow(gy, 0, n0, n), Access::read);
        const Binding old = f.accumulate ? ob[1] : gyb;
        abi::ConvParams p = cv.p;
        p.N = std::uint32_t(n);
        p.part0 = part0;
        p.off0 = ob[0].element_offset, p.off1 = p.off2 = gyb.element_offset;
        p.off3 = old.element_offset;
        direct(cv, abi::CONV_BIAS_GRAD, {ob[0], gyb, gyb, old}, p, p.OC, true, f);
      },
      false, std::int64_t(samples));
}

void conv_kernel(DeviceImpl& d, const OpCall& call) {
  VulkanDevice& dev = vulkan_device(d);
  const DType dt = call.inputs.at(0).dtype;
  if (!is_floating(dt))
    throw UnsupportedError(fmt::format("{}: the vulkan kernel computes float dtypes, not {}",
                                       call.name(), dtype_name(dt)));
  dev.require_op(call.op, dt);
  for (const TensorArg& t : call.outputs)
    if (t.numel() == 0) return;
  switch (call.op) {
    case OpId::conv_backward_input:
      return per_sample(dev, call, false);
    case OpId::conv_backward_weight:
      return backward_weight(dev, call);
    default:
      return per_sample(dev, call, true);
  }
}

}  // namespace

void add_conv_kernels(KernelTable& table) {
  for (OpId op : kConvKernelOps) table.emplace_back(op, conv_kernel);
}

}  // namespace ferry::vulkan
