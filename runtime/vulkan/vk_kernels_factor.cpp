// runtime/vulkan/vk_kernels_factor.cpp — the factorizations Vulkan fuses (docs/kernel-contract.md):
// lu_factor_ex through shaders/lu_factor.comp and cholesky through shaders/cholesky.comp. Both
// factor each matrix in place, a workgroup a matrix (a thread, for small n), step by step; both
// plan their steps alike (plan_steps): whole steps in one dispatch while the loop budget allows,
// a step too long for one in ranges of its rows, the batch in chunks that one binding reaches
// and grids the device allows.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <string>

#include "abi/cholesky.h"
#include "abi/lu_factor.h"
#include "ferry/error.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

// The loop trips (Note [Loop budget] in vk_kernels.hpp) of one invocation of a factorization's
// dispatch, each loop counted one trip over its iterations (its last test) and each barrier one.
struct StepCosts {
  std::function<std::uint64_t(std::int64_t j, std::int64_t rb)> fixed;  // step j from row rb on
  std::function<std::uint64_t(std::uint64_t rows)> rows;  // a step's updates of `rows` rows
};

// dispatch(j0, j1, r0, r1, first): the steps [j0, j1) of an m-row factorization, step j0's
// updates from row r0 and step j1 - 1's to row r1 (shaders/abi/lu_factor.h), as many as the loop
// budget allows a dispatch: whole steps while they fit, and a step that alone does not in ranges
// of its rows, each dispatch going on from what the last left.
void plan_steps(VulkanDevice& dev, const char* op, const std::function<std::string()>& what,
                std::int64_t steps, std::int64_t m, const StepCosts& cost,
                const std::function<void(std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                         bool)>& dispatch) {
  const auto fits = [&](std::uint64_t trips) {
    return loop_trips_per_invocation(dev.limits(), 1, trips) == 1;
  };
  const auto step_cost = [&](std::int64_t j, std::int64_t rb) {
    return cost.fixed(j, rb) + cost.rows(std::uint64_t(m - rb));
  };
  std::int64_t j = 0, rb = 1;
  bool first = true;
  while (j < steps) {
    const std::int64_t j0 = j, r0 = rb;
    std::uint64_t used = 1;  // the steps loop's exit
    while (j < steps && fits(used + step_cost(j, rb))) {
      used += step_cost(j, rb);
      rb = ++j + 1;
    }
    if (j > j0) {
      dispatch(j0, j, r0, m, first);
      first = false;
      continue;
    }
    // Step j alone runs past the budget: as many of its rows as fit (rows() grows with rows:
    // the largest that does), the next dispatch going on from the row after them.
    const std::uint64_t fixed = 1 + cost.fixed(j, rb);
    std::uint64_t lo = 0, hi = std::uint64_t(m - rb);
    while (lo < hi) {
      const std::uint64_t mid = (lo + hi + 1) / 2;
      if (fits(fixed + cost.rows(mid)))
        lo = mid;
      else
        hi = mid - 1;
    }
    if (lo == 0) throw_past_loop_budget(dev, op, fmt::format("a step of {}", what()));
    const std::int64_t re = rb + std::int64_t(lo);
    dispatch(j, j + 1, rb, re, first);
    first = false;
    rb = re;
    if (rb == m) rb = ++j + 1;
  }
}

// How a factorization lays a batch of n-column matrices on the device: a thread a matrix up to
// kThreadMatrixColumns columns (the shaders say why), else a workgroup of about n threads, column
// c kept by thread c % lanes.
constexpr std::int64_t kThreadMatrixColumns = 16;
struct FactorLayout {
  bool per_thread;
  std::uint32_t wg;
  std::uint64_t lanes;               // the threads that share a matrix
  std::uint64_t cols;                // the most columns one thread keeps
  std::uint64_t matrices_per_group;  // a workgroup's matrices
};
FactorLayout factor_layout(const KernelLimits& lim, std::int64_t n) {
  FactorLayout f{};
  f.per_thread = n <= kThreadMatrixColumns;
  f.wg = f.per_thread ? 64 : 32;
  while (!f.per_thread && f.wg < 128 && f.wg < n) f.wg *= 2;
  f.wg = std::min(f.wg, workgroup_size(lim, 128));
  f.lanes = f.per_thread ? 1 : f.wg;
  f.cols = (std::uint64_t(n) + f.lanes - 1) / f.lanes;
  f.matrices_per_group = f.per_thread ? f.wg : 1;
  return f;
}

// The batch of `matrices` in chunks of at most `per_binding` (what one binding of each tensor
// reaches; `first` is the first output's [matrices, elements] view, which bind() names where one
// matrix alone passes a limit), each chunk's matrices in a grid the device allows:
// each(b0, count, groups).
void for_each_chunk(VulkanDevice& dev, const TensorArg& first, std::int64_t per_binding,
                    std::int64_t matrices, const FactorLayout& f,
                    const std::function<void(std::int64_t, std::int64_t, std::uint32_t)>& each) {
  if (per_binding < 1) (void)dev.bind(narrow(first, 0, 0, 1), Access::write);  // throws
  const std::int64_t per_grid = std::int64_t(f.matrices_per_group * dev.limits().max_groups_x);
  const std::int64_t per_dispatch = std::max<std::int64_t>(1, std::min(per_binding, per_grid));
  for (std::int64_t b0 = 0; b0 < matrices; b0 += per_dispatch) {
    const std::int64_t count = std::min(per_dispatch, matrices - b0);
    each(b0, count,
         std::uint32_t((std::uint64_t(count) + f.matrices_per_group - 1) / f.matrices_per_group));
  }
}

// The checks both factorizations' inputs share: the device computes `op` in A's dtype, f32 or
// f64, and A's elements are indexed in 32 bits.
void check_factor_input(VulkanDevice& dev, OpId op, const char* name, const TensorArg& A) {
  dev.require_op(op, A.dtype);
  if (A.dtype != DType::f32 && A.dtype != DType::f64)
    throw DTypeError(fmt::format("{}: the vulkan kernel takes f32 and f64", name));
  if (A.numel() > 0x7fffffffll)
    throw UnsupportedError(fmt::format("{}: the vulkan kernel takes < 2^31 elements", name));
}

// A copied into `out` (of A's shape and dtype, both contiguous), which the shader then factors
// in place; ordered with the dispatches (copy_within).
void copy_into(VulkanDevice& dev, const TensorArg& out, const TensorArg& A) {
  const std::size_t esize = dtype_size(A.dtype);
  dev.copy_within(*out.buffer, std::size_t(out.offset) * esize, *A.buffer,
                  std::size_t(A.offset) * esize, std::size_t(A.numel()) * esize);
}

// [matrices, elements a matrix] views of t, for the batch's chunks.
TensorArg flat(TensorArg t, std::int64_t matrices, std::int64_t each) {
  t.sizes = {matrices, each};
  t.strides = {each, 1};
  return t;
}

// Cut counts of one chunk of rows: its trip, the owner's loop over its rows (exit), a barrier,
// the loop over the owned columns (exit), per column its rows' loop (exit) and u, and two
// barriers; per row its multiplier and its update in each owned column. Counted without the
// extra trips, a step of 40,000 rows in ranges was wrong on lavapipe by a few hundred trips
// (LinalgLU.TallMatricesInRangesOfRows).
std::uint64_t chunked_rows_cost(std::uint64_t rows, std::uint64_t chunk, std::uint64_t cols) {
  const std::uint64_t chunks = (rows + chunk - 1) / chunk;
  return chunks * (1 + 1 + 1 + 2 * cols + 2) + rows * (1 + cols);
}

// lu_factor_ex through shaders/lu_factor.comp (docs/kernel-contract.md): A [..., m, n] -> LU
// [..., m, n], pivots [..., k] (i32, 1-based) and info [...] (i32), contiguous, f32 or f64. A is
// copied into LU, which the shader factors in place: a workgroup a matrix (a thread, for small
// n), the steps in dispatches that fit the loop budget and a step too long for one in ranges
// of its rows, the batch in chunks that one binding reaches and grids the device allows.
void lu_factor_kernel(DeviceImpl& d, const OpCall& call) {
  VulkanDevice& dev = vulkan_device(d);
  const TensorArg& A = call.inputs.at(0);
  const TensorArg &LU = call.outputs.at(0), &pivots = call.outputs.at(1),
                  &info = call.outputs.at(2);
  if (A.ndim() < 2 || !A.is_contiguous() || !LU.is_contiguous() || !pivots.is_contiguous() ||
      !info.is_contiguous() || LU.sizes != A.sizes || LU.dtype != A.dtype ||
      pivots.dtype != DType::i32 || info.dtype != DType::i32)
    throw ShapeError(
        "lu_factor_ex: the vulkan kernel takes a contiguous A [..., m, n], LU of its shape and "
        "dtype, and i32 pivots and info");
  check_factor_input(dev, OpId::lu_factor_ex, "lu_factor_ex", A);
  const std::int64_t m = A.sizes[std::size_t(A.ndim() - 2)], n = A.sizes.back();
  const std::int64_t k = std::min(m, n);
  if (k == 0) throw ShapeError("lu_factor_ex: the vulkan kernel takes matrices of m, n >= 1");
  const std::int64_t matrices = A.numel() / (m * n);
  if (pivots.numel() != matrices * k || info.numel() != matrices)
    throw ShapeError("lu_factor_ex: the vulkan kernel takes pivots [..., k] and info [...]");
  copy_into(dev, LU, A);

  const KernelLimits& lim = dev.limits();
  const FactorLayout f = factor_layout(lim, n);
  const abi::LuFactorSpec spec{.WG = f.wg, .PER_THREAD = f.per_thread};
  // Per step: its own trip and the chunk loop's exit; where the step begins, the pivot search
  // down the column, the swap of the owned columns and a barrier; then its chunks of rows.
  const StepCosts cost{.fixed =
                           [&](std::int64_t j, std::int64_t rb) {
                             return 2 +
                                    (rb == j + 1 ? std::uint64_t(m - j) + 1 + f.cols + 1 + 1 : 0);
                           },
                       .rows =
                           [&](std::uint64_t rows) {
                             return chunked_rows_cost(rows, FERRY_LU_FACTOR_CHUNK, f.cols);
                           }};

  // The batch in chunks that one binding of each tensor reaches, each chunk's matrices in grids
  // the device allows.
  const TensorArg lu2 = flat(LU, matrices, m * n), piv2 = flat(pivots, matrices, k),
                  info2 = flat(info, matrices, 1);
  const std::int64_t per_binding =
      std::min({max_chunk(lim, lu2, 0), max_chunk(lim, piv2, 0), max_chunk(lim, info2, 0)});
  const auto run_chunk = [&](std::int64_t b0, std::int64_t count, std::uint32_t groups) {
    Binding bl = dev.bind(narrow(lu2, 0, b0, count), Access::write),
            bp = dev.bind(narrow(piv2, 0, b0, count), Access::write),
            bi = dev.bind(narrow(info2, 0, b0, count), Access::write);
    Binding bl_read = bl, bi_read = bi;
    bl_read.access = bi_read.access = Access::read;
    abi::LuFactorParams p{};
    p.m = std::uint32_t(m);
    p.n = std::uint32_t(n);
    p.matrices = std::uint32_t(count);
    p.off_lu = bl.element_offset;
    p.off_pivots = bp.element_offset;
    p.off_info = bi.element_offset;
    const auto dispatch = [&](std::int64_t j0, std::int64_t j1, std::int64_t r0, std::int64_t r1,
                              bool first) {
      p.j0 = std::uint32_t(j0);
      p.j1 = std::uint32_t(j1);
      p.r0 = std::uint32_t(r0);
      p.r1 = std::uint32_t(r1);
      p.first = first ? 1u : 0u;
      dev.dispatch({"lu_factor",
                    spec.values(),
                    {bl, bp, bi, bl_read, bi_read},
                    &p,
                    sizeof p,
                    {groups, 1, 1},
                    std::uint32_t(OpId::lu_factor_ex),
                    A.dtype == DType::f64});
    };
    const auto what = [&] { return fmt::format("an LU factorization of {} x {}", m, n); };
    plan_steps(dev, "lu_factor_ex", what, k, m, cost, dispatch);
  };
  for_each_chunk(dev, lu2, per_binding, matrices, f, run_chunk);
}

// cholesky through shaders/cholesky.comp: A [..., n, n] -> L, contiguous, f32 or f64, L lower
// triangular with A = L L^T from A's lower triangle and a NaN on the diagonal where a leading
// minor is not positive-definite (the core's check names it). A is copied into L, which the
// shader factors in place.
void cholesky_kernel(DeviceImpl& d, const OpCall& call) {
  VulkanDevice& dev = vulkan_device(d);
  const TensorArg& A = call.inputs.at(0);
  const TensorArg& L = call.outputs.at(0);
  if (A.ndim() < 2 || !A.is_contiguous() || !L.is_contiguous() || L.sizes != A.sizes ||
      L.dtype != A.dtype || A.sizes.back() != A.sizes[std::size_t(A.ndim() - 2)])
    throw ShapeError(
        "cholesky: the vulkan kernel takes a contiguous A [..., n, n] and L of its shape and "
        "dtype");
  check_factor_input(dev, OpId::cholesky, "cholesky", A);
  const std::int64_t n = A.sizes.back();
  if (n == 0) throw ShapeError("cholesky: the vulkan kernel takes matrices of n >= 1");
  const std::int64_t matrices = A.numel() / (n * n);

  const KernelLimits& lim = dev.limits();
  const FactorLayout f = factor_layout(lim, n);
  const abi::CholeskySpec spec{.WG = f.wg, .PER_THREAD = f.per_thread};
  // Per step: its own trip, the chunk loop's exit, two barriers (the root's, the step's end) and
  // the loop that zeroes row j of the owned columns; then its chunks of rows.
  const StepCosts cost{.fixed = [&](std::int64_t, std::int64_t) { return 4 + f.cols + 1; },
                       .rows =
                           [&](std::uint64_t rows) {
                             return chunked_rows_cost(rows, FERRY_CHOLESKY_CHUNK, f.cols);
                           }};
  copy_into(dev, L, A);

  const TensorArg l2 = flat(L, matrices, n * n);
  const auto run_chunk = [&](std::int64_t b0, std::int64_t count, std::uint32_t groups) {
    const Binding bl = dev.bind(narrow(l2, 0, b0, count), Access::write);
    Binding bl_read = bl;
    bl_read.access = Access::read;
    abi::CholeskyParams p{};
    p.n = std::uint32_t(n);
    p.matrices = std::uint32_t(count);
    p.off_l = bl.element_offset;
    const auto dispatch = [&](std::int64_t j0, std::int64_t j1, std::int64_t r0, std::int64_t r1,
                              bool) {
      p.j0 = std::uint32_t(j0);
      p.j1 = std::uint32_t(j1);
      p.r0 = std::uint32_t(r0);
      p.r1 = std::uint32_t(r1);
      dev.dispatch({"cholesky",
                    spec.values(),
                    {bl, bl_read},
                    &p,
                    sizeof p,
                    {groups, 1, 1},
                    std::uint32_t(OpId::cholesky),
                    A.dtype == DType::f64});
    };
    const auto what = [&] { return fmt::format("a Cholesky factorization of order {}", n); };
    plan_steps(dev, "cholesky", what, n, n, cost, dispatch);
  };
  for_each_chunk(dev, l2, max_chunk(lim, l2, 0), matrices, f, run_chunk);
}

}  // namespace

void add_factor_kernels(KernelTable& table) {
  table.emplace_back(OpId::lu_factor_ex, lu_factor_kernel);
  table.emplace_back(OpId::cholesky, cholesky_kernel);
}

}  // namespace ferry::vulkan
