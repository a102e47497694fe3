// runtime/vulkan/vk_kernels_linalg.cpp — "matmul" through shaders/matmul.comp: A [B, M, K] x
// B [B, K, N] -> C [B, M, N], the inputs strided views (docs/kernel-contract.md).
//
// The host picks the shader's tiles per call from the device's limits and the problem's size
// (big tiles keep the arithmetic fed on large products, small ones keep enough workgroups
// busy on small ones), tells the shader along which dim each operand is contiguous (so its
// loader threads read coalesced runs), splits grids beyond the device's group-count limit,
// and splits the operands into batch (or row) chunks when a view spans more than one
// storage-buffer binding can reach.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>

#include "ferry/error.hpp"
#include "vulkan/vk_device.hpp"

namespace ferry::vulkan {
namespace {

// The push constants of shaders/matmul.comp.
struct Params {
  std::uint32_t M, N, K;
  std::uint32_t c_off, a_off, b_off;
  std::uint32_t sc_b, sc_m;
  std::uint32_t sa_b, sa_m, sa_k;
  std::uint32_t sb_b, sb_k, sb_n;
  std::uint32_t m_tile0, n_tile0, batch0;
};
static_assert(sizeof(Params) <= kMaxPushBytes);

// A workgroup's BM x BN tile of C, BK-deep shared slices, TM x TN accumulators per thread.
struct Tile {
  std::uint32_t bm, bn, bk, tm, tn;
  std::uint32_t threads() const { return (bm / tm) * (bn / tn); }
  // Two buffers of BK rows of A and of B, each row padded by 4 floats (the shader's sA, sB).
  std::uint32_t shared_bytes() const { return 2 * bk * (bm + 4 + bn + 4) * 4; }
};

// Largest first. 128 x 128 with 8 x 8 per thread is the classic shape for f32 on GPUs: 64 FMAs
// per 16 shared-memory floats read, 256 threads. Each is used when the product gives at least
// `min_tiles` workgroups (so that a big GPU has work for all its cores) and the device
// allows its workgroup size and shared memory; the last that fits is the fallback.
struct TileChoice {
  Tile tile;
  std::uint64_t min_tiles;
};
constexpr std::array<TileChoice, 4> kTiles = {{
    {{128, 128, 8, 8, 8}, 192},
    {{64, 64, 8, 4, 4}, 48},
    {{32, 32, 8, 4, 4}, 0},
    {{16, 16, 8, 4, 4}, 0},  // for devices with tiny workgroups
}};

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

Tile choose_tile(const KernelLimits& lim, std::uint64_t nb, std::uint64_t M, std::uint64_t N) {
  const Tile* fallback = nullptr;
  for (const TileChoice& c : kTiles) {
    const Tile& t = c.tile;
    if (t.threads() > lim.max_workgroup_invocations || t.shared_bytes() > lim.shared_memory)
      continue;
    if (nb * ceil_div(M, t.bm) * ceil_div(N, t.bn) >= c.min_tiles) return t;
    fallback = &t;
  }
  if (!fallback)
    throw UnsupportedError(fmt::format(
        "matmul: the device allows workgroups of {} invocations and {} bytes of shared memory, "
        "fewer than the smallest matmul tile needs",
        lim.max_workgroup_invocations, lim.shared_memory));
  return *fallback;
}

// One dispatch group per tile; grids beyond the device's limit go in several dispatches.
void dispatch_part(VulkanDevice& dev, const TensorArg& A, const TensorArg& B, const TensorArg& C,
                   const Tile& t) {
  const std::uint32_t nb = std::uint32_t(C.sizes[0]), M = std::uint32_t(C.sizes[1]),
                      N = std::uint32_t(C.sizes[2]), K = std::uint32_t(A.sizes[2]);
  Binding c = dev.bind(C, Access::write);
  // With K = 0 the shader reads no operand and writes zeros; the (empty) operands are not
  // bound, since an empty view may sit in an empty buffer.
  Binding a = K == 0 ? c : dev.bind(A, Access::read);
  Binding b = K == 0 ? c : dev.bind(B, Access::read);
  if (K == 0) a.access = b.access = Access::read;
  Params p{};
  p.M = M;
  p.N = N;
  p.K = K;
  p.c_off = c.element_offset;
  p.a_off = a.element_offset;
  p.b_off = b.element_offset;
  p.sc_b = std::uint32_t(C.strides[0]);
  p.sc_m = std::uint32_t(C.strides[1]);
  p.sa_b = std::uint32_t(A.strides[0]);
  p.sa_m = std::uint32_t(A.strides[1]);
  p.sa_k = std::uint32_t(A.strides[2]);
  p.sb_b = std::uint32_t(B.strides[0]);
  p.sb_k = std::uint32_t(B.strides[1]);
  p.sb_n = std::uint32_t(B.strides[2]);
  // Coalesced loads: walk M when A is column-major, K when B is (the defaults walk A's K and
  // B's N, right for row-major operands).
  const std::uint32_t a_mfast = p.sa_m == 1 && p.sa_k != 1 ? 1 : 0;
  const std::uint32_t b_kfast = p.sb_k == 1 && p.sb_n != 1 ? 1 : 0;
  const std::vector<std::uint32_t> spec = {
      t.threads(), dtype_code(C.dtype), t.bm, t.bn, t.bk, t.tm, t.tn, a_mfast, b_kfast};

  const std::uint32_t max_groups = dev.limits().max_groups_x;
  const std::uint32_t gx = std::uint32_t(ceil_div(N, t.bn)), gy = std::uint32_t(ceil_div(M, t.bm));
  for (std::uint32_t z = 0; z < nb; z += max_groups)
    for (std::uint32_t y = 0; y < gy; y += max_groups)
      for (std::uint32_t x = 0; x < gx; x += max_groups) {
        p.batch0 = z;
        p.m_tile0 = y;
        p.n_tile0 = x;
        dev.dispatch({"matmul",
                      spec,
                      {c, a, b},
                      &p,
                      sizeof p,
                      {std::min(max_groups, gx - x), std::min(max_groups, gy - y),
                       std::min(max_groups, nb - z)}});
      }
}

// How many indices along `dim` of `t` one binding can hold: the view's span over its other
// dims plus that many steps must stay within `range` bytes and 2^32 elements. 0 when even
// one does not fit; "unlimited" for a broadcast (stride 0) dim.
std::int64_t max_chunk(const TensorArg& t, int dim, std::uint64_t range) {
  const std::uint64_t esize = dtype_size(t.dtype);
  const std::uint64_t cap = std::min<std::uint64_t>(range / esize, 0xffffffffull);
  std::uint64_t inner = 1;
  for (int d = 0; d < t.ndim(); ++d)
    if (d != dim && t.sizes[d] > 0)
      inner += std::uint64_t(t.sizes[d] - 1) * std::uint64_t(t.strides[d]);
  if (inner > cap) return 0;
  if (t.strides[dim] == 0) return std::numeric_limits<std::int64_t>::max();
  return std::int64_t((cap - inner) / std::uint64_t(t.strides[dim]) + 1);
}

TensorArg narrow(TensorArg t, int dim, std::int64_t start, std::int64_t length) {
  t.offset += start * t.strides[dim];
  t.sizes[dim] = length;
  return t;
}

void matmul_kernel(DeviceImpl& d, const OpCall& call) {
  VulkanDevice& dev = vulkan_device(d);
  const TensorArg &A = call.inputs.at(0), &B = call.inputs.at(1), &C = call.outputs.at(0);
  if (A.ndim() != 3 || B.ndim() != 3 || C.ndim() != 3 || A.dtype != B.dtype || A.dtype != C.dtype)
    throw ShapeError(
        "matmul: the vulkan kernel expects [B, M, K] and [B, K, N] inputs and a [B, M, N] "
        "output of one dtype");
  const DType dt = C.dtype;
  if (dt == DType::boolean) throw UnsupportedError("matmul: the vulkan kernel does not take bool");
  dev.require(dt, "matmul");
  const std::int64_t nb = C.sizes[0], M = C.sizes[1], N = C.sizes[2];
  if (nb == 0 || M == 0 || N == 0) return;
  if (C.strides[2] != 1 && N > 1)
    throw ShapeError("matmul: the vulkan kernel expects an output with unit column stride");
  if (M > 0xffffffffll / 2 || N > 0xffffffffll / 2 || A.sizes[2] > 0xffffffffll / 2)
    throw UnsupportedError("matmul: the vulkan kernel takes at most 2^31 rows and columns");

  const Tile t = is_floating(dt) ? choose_tile(dev.limits(), std::uint64_t(nb), std::uint64_t(M),
                                               std::uint64_t(N))
                                 : Tile{32, 32, 8, 4, 4};  // integers: a plain loop per thread
  // bind() aligns a view's start down by up to 256 bytes and its end up by 16.
  const std::uint64_t limit = dev.limits().max_storage_range;
  const std::uint64_t range = limit > 1024 ? limit - 512 : limit / 2;
  const std::int64_t batches =
      std::min({max_chunk(A, 0, range), max_chunk(B, 0, range), max_chunk(C, 0, range)});
  if (batches >= 1) {
    for (std::int64_t b0 = 0; b0 < nb; b0 += batches) {
      const std::int64_t n = std::min(batches, nb - b0);
      dispatch_part(dev, narrow(A, 0, b0, n), narrow(B, 0, b0, n), narrow(C, 0, b0, n), t);
    }
    return;
  }
  // One batch is already too big: row chunks of A and C against the whole of B (bind()
  // reports a B that does not fit).
  for (std::int64_t b0 = 0; b0 < nb; ++b0) {
    const TensorArg a1 = narrow(A, 0, b0, 1), b1 = narrow(B, 0, b0, 1), c1 = narrow(C, 0, b0, 1);
    const std::int64_t rows =
        std::max<std::int64_t>(1, std::min(max_chunk(a1, 1, range), max_chunk(c1, 1, range)));
    for (std::int64_t m0 = 0; m0 < M; m0 += rows) {
      const std::int64_t n = std::min(rows, M - m0);
      dispatch_part(dev, narrow(a1, 1, m0, n), b1, narrow(c1, 1, m0, n), t);
    }
  }
}

}  // namespace

void add_linalg_kernels(KernelTable& table) { table.emplace_back("matmul", matmul_kernel); }

}  // namespace ferry::vulkan
