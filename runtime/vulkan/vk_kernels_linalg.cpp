// runtime/vulkan/vk_kernels_linalg.cpp — "matmul" through shaders/matmul.comp: A [B, M, K] x
// B [B, K, N] -> C [B, M, N], the inputs strided views (docs/kernel-contract.md).
//
// The host picks the shader's tiles per call from the device's limits and the problem's size
// (big tiles keep the arithmetic fed on large products, small ones keep enough workgroups
// busy on small ones), tells the shader along which dim each operand is contiguous (so its
// loader threads read coalesced runs), splits grids beyond the device's group-count limit,
// and splits the operands into batch chunks, or blocks of B (along K and N) and row chunks
// of A and C, when a view spans more than one storage-buffer binding can reach
// (vk_split.hpp); the products of a K cut into pieces add up in C. Products of a few vectors
// against a weight take the matrix-vector path first (vk_kernels_matvec.cpp), then f16 products
// the cooperative-matrix path where it is on (vk_kernels_coopmat.cpp), then tiny products a
// thread per element of C (Note [Tiny products]).
//
// Also lu_pivots_to_permutation, LU's pivots as a row permutation, through
// shaders/lu_permutation.comp, and solve_triangular through shaders/triangular_solve.comp (the
// factorizations are vk_kernels_factor.cpp's).
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "abi/lu_permutation.h"
#include "abi/matmul.h"
#include "abi/triangular_solve.h"
#include "ferry/error.hpp"
#include "ferry/profiler.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_gemm_tiles.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

// The bindings of C, A, B and of binding 3 (C's old values where `accumulate`, else unused),
// and the push constants' sizes, offsets and strides, for either of matmul.comp's modes.
struct MatmulCall {
  Binding c, a, b, c_old;
  abi::MatmulParams p{};
};
MatmulCall bind_matmul(VulkanDevice& dev, const TensorArg& A, const TensorArg& B,
                       const TensorArg& C, bool accumulate) {
  MatmulCall m;
  const std::uint32_t K = std::uint32_t(A.sizes[2]);
  m.c = dev.bind(C, Access::write);
  // With K = 0 the shader reads no operand and writes zeros; the (empty) operands are not
  // bound, since an empty view may sit in an empty buffer.
  m.a = K == 0 ? m.c : dev.bind(A, Access::read);
  m.b = K == 0 ? m.c : dev.bind(B, Access::read);
  if (K == 0) m.a.access = m.b.access = Access::read;
  m.c_old = accumulate ? m.c : m.a;
  m.c_old.access = Access::read;
  abi::MatmulParams& p = m.p;
  p.M = std::uint32_t(C.sizes[1]);
  p.N = std::uint32_t(C.sizes[2]);
  p.K = K;
  p.c_off = m.c.element_offset;
  p.a_off = m.a.element_offset;
  p.b_off = m.b.element_offset;
  p.sc_b = std::uint32_t(C.strides[0]);
  p.sc_m = std::uint32_t(C.strides[1]);
  p.sa_b = std::uint32_t(A.strides[0]);
  p.sa_m = std::uint32_t(A.strides[1]);
  p.sa_k = std::uint32_t(A.strides[2]);
  p.sb_b = std::uint32_t(B.strides[0]);
  p.sb_k = std::uint32_t(B.strides[1]);
  p.sb_n = std::uint32_t(B.strides[2]);
  return m;
}

// One dispatch group per tile; grids beyond the device's limit go in several dispatches.
// `accumulate`: C += A x B.
void dispatch_grid(VulkanDevice& dev, const TensorArg& A, const TensorArg& B, const TensorArg& C,
                   const Tile& t, bool accumulate) {
  const std::uint32_t nb = std::uint32_t(C.sizes[0]), M = std::uint32_t(C.sizes[1]),
                      N = std::uint32_t(C.sizes[2]);
  MatmulCall m = bind_matmul(dev, A, B, C, accumulate);
  abi::MatmulParams& p = m.p;
  // Coalesced loads: walk M when A is column-major, K when B is (the defaults walk A's K and
  // B's N, right for row-major operands).
  const std::uint32_t a_mfast = p.sa_m == 1 && p.sa_k != 1 ? 1 : 0;
  const std::uint32_t b_kfast = p.sb_k == 1 && p.sb_n != 1 ? 1 : 0;
  const std::vector<std::uint32_t> spec = abi::MatmulSpec{.WG = t.threads(),
                                                          .DT = dtype_code(C.dtype),
                                                          .BM = t.bm,
                                                          .BN = t.bn,
                                                          .BK = t.bk,
                                                          .TM = t.tm,
                                                          .TN = t.tn,
                                                          .A_MFAST = a_mfast,
                                                          .B_KFAST = b_kfast,
                                                          .ACCUMULATE = accumulate}
                                              .values();

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
                      {m.c, m.a, m.b, m.c_old},
                      &p,
                      sizeof p,
                      {std::min(max_groups, gx - x), std::min(max_groups, gy - y),
                       std::min(max_groups, nb - z)},
                      std::uint32_t(OpId::matmul),
                      C.dtype == DType::f64});
      }
}

// dispatch_grid over K in pieces that one invocation walks within the device's loop budget
// (Note [Loop budget] in vk_kernels.hpp), the pieces after the first adding to C. Floats walk
// K in slices of the tile's BK (gemm_tile.glsl), integers one k at a time, each k's loads and
// TM x TN products counted. The extra passes over C cost little: a piece is thousands of k.
void dispatch_part(VulkanDevice& dev, const TensorArg& A, const TensorArg& B, const TensorArg& C,
                   const Tile& t, bool accumulate = false) {
  const std::uint64_t K = std::uint64_t(A.sizes[2]);
  const bool floats = is_floating(C.dtype);
  const std::uint64_t step = floats ? t.bk : 1;
  const std::uint64_t per_trip =
      floats ? t.loop_iterations_per_slice() : 1 + t.tm + t.tn + t.tm * (1 + t.tn);
  const std::uint64_t stores = std::uint64_t(t.tm) * (1 + t.tn);  // the epilogue's loops
  const std::uint64_t trips =
      loop_trips_per_invocation(dev.limits(), ceil_div(K, step), per_trip, stores);
  if (K == 0 || trips * step >= K) return dispatch_grid(dev, A, B, C, t, accumulate);
  const std::int64_t piece = std::int64_t(std::max<std::uint64_t>(trips, 1) * step);
  for (std::int64_t k0 = 0; k0 < std::int64_t(K); k0 += piece) {
    const std::int64_t n = std::min<std::int64_t>(piece, std::int64_t(K) - k0);
    dispatch_grid(dev, narrow(A, 2, k0, n), narrow(B, 1, k0, n), C, t, accumulate || k0 > 0);
  }
}

// Note [Tiny products]
// A batch of products of a few elements each (LU's gradients over [4096, 4, 4], attention over a
// few tokens) took a GEMM tile per product: 4,096 workgroups of mostly padding, 40 ms on
// lavapipe for 4 x 4 x 4 products even in 16 x 16 tiles (1 s in the 128 x 128 tiles chosen
// before choose_tile passed over oversized ones). Where each C has at most kTinyElements
// elements and K is at most kTinyK, a thread per element of C sums its K products straight
// from global memory, in order (matmul.comp's SMALL): each operand is read a few times, from
// cache, the workgroups are full whatever the batch, and K is too short to meet the loop budget.
constexpr std::int64_t kTinyElements = 64, kTinyK = 64;

void dispatch_tiny(VulkanDevice& dev, const TensorArg& A, const TensorArg& B, const TensorArg& C) {
  const std::uint64_t nb = std::uint64_t(C.sizes[0]), M = std::uint64_t(C.sizes[1]),
                      N = std::uint64_t(C.sizes[2]);
  MatmulCall m = bind_matmul(dev, A, B, C, false);
  abi::MatmulParams& p = m.p;
  const std::uint64_t elements = nb * M * N;
  if (elements > 0xffffffffull)
    throw UnsupportedError("matmul: the vulkan kernel's tiny products take < 2^32 outputs a call");
  p.elements = std::uint32_t(elements);
  // The tile's constants only size the (unused) GEMM: 32 x 32 in 4 x 4 is 64 threads.
  constexpr std::uint32_t wg = 64;
  const std::vector<std::uint32_t> spec = abi::MatmulSpec{.WG = wg,
                                                          .DT = dtype_code(C.dtype),
                                                          .BM = 32,
                                                          .BN = 32,
                                                          .BK = 8,
                                                          .TM = 4,
                                                          .TN = 4,
                                                          .SMALL = true}
                                              .values();
  const std::uint64_t per_dispatch = std::uint64_t(dev.limits().max_groups_x) * wg;
  for (std::uint64_t e0 = 0; e0 < elements; e0 += per_dispatch) {
    p.batch0 = std::uint32_t(e0);
    const std::uint64_t here = std::min(per_dispatch, elements - e0);
    dev.dispatch({"matmul",
                  spec,
                  {m.c, m.a, m.b, m.c_old},
                  &p,
                  sizeof p,
                  {std::uint32_t((here + wg - 1) / wg), 1, 1},
                  std::uint32_t(OpId::matmul),
                  C.dtype == DType::f64});
  }
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
  dev.require_op(OpId::matmul, dt);
  const std::int64_t nb = C.sizes[0], M = C.sizes[1], N = C.sizes[2];
  if (nb == 0 || M == 0 || N == 0) return;
  if (C.strides[2] != 1 && N > 1)
    throw ShapeError("matmul: the vulkan kernel expects an output with unit column stride");
  if (M > 0xffffffffll / 2 || N > 0xffffffffll / 2 || A.sizes[2] > 0xffffffffll / 2)
    throw UnsupportedError("matmul: the vulkan kernel takes at most 2^31 rows and columns");
  if (is_floating(dt) && try_matvec(dev, A, B, C)) return;  // a few rows against a weight
  if (try_coopmat(dev, A, B, C)) return;  // f16, bf16 on tensor cores, where the device has them
  const KernelLimits& lim = dev.limits();
  const std::int64_t batches =
      std::min({max_chunk(lim, A, 0), max_chunk(lim, B, 0), max_chunk(lim, C, 0)});
  if (M * N <= kTinyElements && A.sizes[2] <= kTinyK && batches >= 1) {
    if (profiler::enabled()) profiler::note_kernel("tiny products, a thread per element");
    for (std::int64_t b0 = 0; b0 < nb; b0 += batches) {
      const std::int64_t n = std::min(batches, nb - b0);
      dispatch_tiny(dev, narrow(A, 0, b0, n), narrow(B, 0, b0, n), narrow(C, 0, b0, n));
    }
    return;
  }

  const Tile t = is_floating(dt)
                     ? choose_tile("matmul", dev.limits(), std::uint64_t(nb), std::uint64_t(M),
                                   std::uint64_t(N), dt == DType::f64 ? 8 : 4)
                     : Tile{32, 32, 8, 4, 4};  // integers: a plain loop per thread
  if (profiler::enabled())
    profiler::note_kernel(
        fmt::format("gemm tile {}x{}x{}, {}x{} per thread", t.bm, t.bn, t.bk, t.tm, t.tn));
  if (batches >= 1) {
    for (std::int64_t b0 = 0; b0 < nb; b0 += batches) {
      const std::int64_t n = std::min(batches, nb - b0);
      dispatch_part(dev, narrow(A, 0, b0, n), narrow(B, 0, b0, n), narrow(C, 0, b0, n), t);
    }
    return;
  }
  // One batch is already too big: B is cut into blocks that fit (vk_split.hpp), along its outer
  // dim in memory first (K for a row-major B, N for a transposed weight); each block multiplies
  // the matching columns of A into the matching columns of C, in chunks of rows of A and C, and
  // blocks after the first along K add to what the earlier ones left in C.
  const bool k_outer = B.strides[1] >= B.strides[2];
  auto swap_kn = [&](TensorArg v) {
    if (!k_outer) {
      std::swap(v.sizes[1], v.sizes[2]);
      std::swap(v.strides[1], v.strides[2]);
    }
    return v;
  };
  for (std::int64_t b0 = 0; b0 < nb; ++b0) {
    const TensorArg a1 = narrow(A, 0, b0, 1), c1 = narrow(C, 0, b0, 1);
    for_each_part(lim, {swap_kn(narrow(B, 0, b0, 1))}, 1, 3, [&](const auto& bp, const auto& at) {
      const TensorArg b2 = swap_kn(bp[0]);
      const std::int64_t k0 = at[k_outer ? 1 : 2], n0 = at[k_outer ? 2 : 1];
      const TensorArg a2 = narrow(a1, 2, k0, b2.sizes[1]), c2 = narrow(c1, 2, n0, b2.sizes[2]);
      for_each_part(lim, {a2, c2}, 1, 2, [&](const auto& ac, const auto&) {
        dispatch_part(dev, ac[0], b2, ac[1], t, k0 > 0);
      });
    });
  }
}

// lu_pivots_to_permutation through shaders/lu_permutation.comp: contiguous 0-based pivots
// [..., k] of any integer dtype -> contiguous permutation [..., rows] (i64), one invocation per
// matrix (the shader says why).
void lu_permutation_kernel(DeviceImpl& d, const OpCall& call) {
  VulkanDevice& dev = vulkan_device(d);
  const TensorArg& pivots = call.inputs.at(0);
  const TensorArg& perm = call.outputs.at(0);
  const std::int64_t m = call.attrs.i("rows");
  if (!pivots.is_contiguous() || !perm.is_contiguous() || pivots.ndim() < 1 ||
      perm.dtype != DType::i64 || perm.sizes.back() != m)
    throw ShapeError(
        "lu_pivots_to_permutation: the vulkan kernel takes contiguous pivots [..., k] and an i64 "
        "permutation [..., rows]");
  dev.require(pivots.dtype, "lu_pivots_to_permutation");
  if (perm.numel() == 0) return;
  if (perm.numel() > 0x7fffffffll || pivots.numel() > 0xffffffffll)
    throw UnsupportedError(
        "lu_pivots_to_permutation: the vulkan kernel takes < 2^31 permutation entries");
  const KernelLimits& lim = dev.limits();
  const std::int64_t k = pivots.sizes.back(), matrices = perm.numel() / m;
  const std::uint32_t wg = std::min<std::uint32_t>(64, lim.max_workgroup_invocations);
  const std::uint64_t groups =
      std::min<std::uint64_t>((std::uint64_t(matrices) + wg - 1) / wg, lim.max_groups_x);
  // Each invocation's grid-stride trips cost m + k + 1 loop iterations (Note [Loop budget]):
  // a batch beyond what one dispatch's trips cover goes in several.
  const std::uint64_t trips = (std::uint64_t(matrices) + wg * groups - 1) / (wg * groups);
  const std::uint64_t fit = loop_trips_per_invocation(lim, trips, std::uint64_t(m + k) + 1);
  if (fit == 0)
    throw_past_loop_budget(dev, "lu_pivots_to_permutation",
                           fmt::format("a permutation of {} rows by {} pivots", m, k));
  const std::int64_t per_dispatch = std::int64_t(fit * wg * groups);
  Binding bp = dev.bind(perm, Access::write), bv = dev.bind(pivots, Access::read);
  const abi::LuPermutationSpec spec{.WG = wg, .DT = dtype_code(pivots.dtype)};
  for (std::int64_t b0 = 0; b0 < matrices; b0 += per_dispatch) {
    abi::LuPermutationParams p{};
    p.off_perm = std::uint32_t(bp.element_offset + b0 * m);
    p.off_pivots = std::uint32_t(bv.element_offset + b0 * k);
    p.matrices = std::uint32_t(std::min(per_dispatch, matrices - b0));
    p.rows = std::uint32_t(m);
    p.steps = std::uint32_t(k);
    const std::uint32_t g =
        std::uint32_t(std::min<std::uint64_t>(groups, (p.matrices + wg - 1) / wg));
    dev.dispatch({"lu_permutation", spec.values(), {bp, bv}, &p, sizeof p, {g, 1, 1}});
  }
}

// solve_triangular through shaders/triangular_solve.comp (docs/kernel-contract.md): T [n, n] or
// [..., n, n] (B's batch), B and X [..., rows, cols], contiguous, f32 or f64. X T = B runs as
// T^T X^T = B^T, the strides swapped and the triangle flipped. A workgroup solves one column of
// one matrix (a thread, for small n); the steps go in ranges that fit the loop budget, the
// (matrix, column) pairs in grids the device allows.
void triangular_solve_kernel(DeviceImpl& d, const OpCall& call) {
  VulkanDevice& dev = vulkan_device(d);
  const TensorArg& T = call.inputs.at(0);
  const TensorArg& B = call.inputs.at(1);
  const TensorArg& X = call.outputs.at(0);
  const bool left = call.attrs.b("left");
  if (T.ndim() < 2 || B.ndim() < 2 || !T.is_contiguous() || !B.is_contiguous() ||
      !X.is_contiguous() || X.sizes != B.sizes || T.dtype != B.dtype || X.dtype != B.dtype)
    throw ShapeError(
        "solve_triangular: the vulkan kernel takes contiguous T [n, n] or [..., n, n], and B and "
        "X of one shape and T's dtype");
  dev.require_op(OpId::solve_triangular, T.dtype);
  if (T.dtype != DType::f32 && T.dtype != DType::f64)
    throw DTypeError("solve_triangular: the vulkan kernel takes f32 and f64");
  const std::int64_t n = T.sizes.back(), rows = B.sizes[B.ndim() - 2], cols = B.sizes.back();
  const std::int64_t matrices = rows * cols == 0 ? 0 : B.numel() / (rows * cols);
  const std::int64_t t_matrices = n == 0 ? 0 : T.numel() / (n * n);
  if (T.sizes[T.ndim() - 2] != n || (left ? rows : cols) != n ||
      (t_matrices != 1 && t_matrices != matrices))
    throw ShapeError(
        "solve_triangular: the vulkan kernel takes T [n, n] or [..., n, n] and B of "
        "T's batch");
  if (X.numel() == 0) return;
  if (B.numel() > 0x7fffffffll || T.numel() > 0x7fffffffll)
    throw UnsupportedError("solve_triangular: the vulkan kernel takes < 2^31 elements");
  abi::TriangularSolveParams p{};
  p.n = std::uint32_t(n);
  p.cols = std::uint32_t(left ? cols : rows);
  // Row r, column c of the left form's X (and B), and of T.
  p.x_row = std::uint32_t(left ? cols : 1);
  p.x_col = std::uint32_t(left ? 1 : cols);
  p.x_batch = std::uint32_t(rows * cols);
  p.t_row = std::uint32_t(left ? n : 1);
  p.t_col = std::uint32_t(left ? 1 : n);
  p.t_batch = std::uint32_t(t_matrices == 1 ? 0 : n * n);
  const bool upper = call.attrs.b("upper") == left;  // X T = B: T^T's triangle is the other
  const KernelLimits& lim = dev.limits();
  // A thread solves a column alone up to kThreadColumnOrder rows (the shader says why), and
  // wherever the columns fill a workgroup of threads (kThreadColumns): a gradient's solves
  // against n x n right-hand sides, where a workgroup a column paid two barriers a row for a few
  // products (on lavapipe a thread a column took 2.1 ms where a workgroup a column took 6.7 ms
  // at n = 64, 64 columns; 10 against 70 ms at 128, 595 ms against 2.0 s at 512; profiler
  // timings of a throwaway program). Else a workgroup of about n threads solves a column.
  constexpr std::int64_t kThreadColumnOrder = 16, kThreadColumns = 64;
  const bool per_thread =
      n <= kThreadColumnOrder || matrices * (left ? cols : rows) >= kThreadColumns;
  std::uint32_t wg = per_thread ? 64 : 4;
  while (!per_thread && wg < 128 && wg < n) wg *= 2;
  wg = std::min(wg, workgroup_size(lim, 128));
  const std::uint64_t lanes = per_thread ? 1 : wg;
  const abi::TriangularSolveSpec spec{
      .WG = wg, .UPPER = upper, .UNIT = call.attrs.b("unitriangular"), .PER_THREAD = per_thread};
  Binding bx = dev.bind(X, Access::write), bt = dev.bind(T, Access::read),
          bb = dev.bind(B, Access::read), bx_read = dev.bind(X, Access::read);
  p.off_x = bx.element_offset;
  p.off_t = bt.element_offset;
  p.off_b = bb.element_offset;
  const std::uint64_t pairs = std::uint64_t(matrices) * p.cols;
  p.pairs = std::uint32_t(pairs);
  // The steps in ranges within the loop budget (Note [Loop budget]), each loop counted one trip
  // over its iterations (its last test) and each barrier one: the steps loop's exit; B's copy
  // (ceil(n / lanes) trips and the exit, in the first); per step its trip, two barriers, one trip
  // per owned row still unsolved and the exit. Counted without the exits and barriers, a thread a
  // column fell short by about n: order 360 lost its last updates on lavapipe.
  const auto per_step = [&](std::int64_t s) {
    return 4 + (std::uint64_t(n - 1 - s) + lanes - 1) / lanes;
  };
  const std::uint64_t copy_trips = (std::uint64_t(n) + lanes - 1) / lanes + 1;
  const std::uint64_t pairs_per_group = per_thread ? wg : 1;
  const std::uint64_t pairs_per_dispatch = pairs_per_group * lim.max_groups_x;
  std::int64_t s0 = 0;
  while (s0 < n) {
    std::uint64_t used = 1 + (s0 == 0 ? copy_trips : 0);
    std::int64_t s1 = s0;
    while (s1 < n && loop_trips_per_invocation(lim, 1, used + per_step(s1)) == 1)
      used += per_step(s1++);
    if (s1 == s0)
      throw_past_loop_budget(dev, "solve_triangular",
                             fmt::format("a step of a triangular solve of order {}", n));
    p.s0 = std::uint32_t(s0);
    p.s1 = std::uint32_t(s1);
    p.copy = s0 == 0 ? 1u : 0u;
    for (std::uint64_t g0 = 0; g0 < pairs; g0 += pairs_per_dispatch) {
      p.g0 = std::uint32_t(g0);
      const std::uint64_t here = std::min(pairs - g0, pairs_per_dispatch);
      const std::uint32_t groups = std::uint32_t((here + pairs_per_group - 1) / pairs_per_group);
      dev.dispatch({"triangular_solve",
                    spec.values(),
                    {bx, bt, bb, bx_read},
                    &p,
                    sizeof p,
                    {groups, 1, 1},
                    std::uint32_t(OpId::solve_triangular),
                    T.dtype == DType::f64});
    }
    s0 = s1;
  }
}

}  // namespace

void add_linalg_kernels(KernelTable& table) {
  table.emplace_back(OpId::matmul, matmul_kernel);
  table.emplace_back(OpId::lu_pivots_to_permutation, lu_permutation_kernel);
  table.emplace_back(OpId::solve_triangular, triangular_solve_kernel);
}

}  // namespace ferry::vulkan
