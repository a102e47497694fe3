// runtime/vulkan/vk_kernels_matvec.cpp — matmul's matrix-vector path on Vulkan
// (shaders/matvec.comp): a few vectors against a weight read once, as it is stored (Note
// [Matrix-vector products] in ferry/kit/matvec_shape.hpp). matmul_kernel
// (vk_kernels_linalg.cpp) tries it first; the GEMM tiles would spend 32 of 32 rows' work on one.
//
// The host picks the rows per workgroup (more rows share each vector chunk, fewer keep the
// ROWS x S sums in registers), tells the shader whether the weight's rows and the vectors
// start at multiples of 8 elements (then it reads 16-byte words), and cuts the work into
// batches, and within a batch into blocks of rows, that each fit a storage-buffer binding. A
// weight whose K rows run along g (w_along_g) takes the shader's ALONG_G mode: a thread per 8
// columns, 8 WG columns a workgroup, K cut into pieces a binding holds where the batch does not
// fit whole.
#include <algorithm>
#include <optional>

#include "abi/matvec.h"
#include "ferry/kit/matvec_shape.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_gemm_tiles.hpp"  // ceil_div
#include "vulkan/vk_kernels.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

// The weight as [batches, G, K], the vectors as [batches, S, K] and the output as
// [batches, G, S]: the dims the kernel indexes, whatever matmul's operands were.
struct MatvecViews {
  TensorArg w, x, c;
};

MatvecViews views(const MatvecShape& m, const TensorArg& A, const TensorArg& B,
                  const TensorArg& C) {
  auto view = [](const TensorArg& t, std::vector<std::int64_t> sizes,
                 std::vector<std::int64_t> strides) {
    TensorArg v = t;
    v.sizes = std::move(sizes);
    v.strides = std::move(strides);
    return v;
  };
  const TensorArg &W = m.weight_is_b ? B : A, &X = m.weight_is_b ? A : B;
  return {view(W, {m.batches, m.G, m.K}, {m.w_batch, m.w_row, m.w_k}),
          view(X, {m.batches, m.S, m.K}, {m.x_batch, m.x_s, m.x_k}),
          view(C, {m.batches, m.G, m.S}, {m.c_batch, m.c_g, m.c_s})};
}

bool multiple_of_8(std::int64_t v) { return v % 8 == 0; }

// Eight rows share each vector chunk (ROWS x S <= abi::MATVEC_SLOTS sums per thread), and a
// workgroup is one subgroup where it can be (8 to 64 threads): on lavapipe, whose workgroup
// runs on one CPU thread and switches between its subgroups at every barrier, one subgroup
// of 8 took half the time of 64 threads (docs/vulkan.md, "Matrix-vector products").
std::uint32_t matvec_rows(std::uint32_t S) { return std::min(8u, abi::MATVEC_SLOTS / S); }
std::uint32_t matvec_workgroup(const KernelLimits& lim) {
  return workgroup_size(
      lim, std::clamp<std::uint32_t>(pow2_at_least(lim.subgroup_size, abi::MATVEC_WG), 8,
                                     abi::MATVEC_WG));
}

// The longest piece of K (a multiple of 8) one invocation of matvec.comp walks within the
// device's loop budget (Note [Loop budget] in vk_kernels.hpp), every loop counted, the
// vectors' loads as the element-wise ones: a trip per chunk of 8 of its share of K and one for
// the rest, each loading S vectors' elements and adding ROWS x S products, then the tree over
// the workgroup. K itself where it fits; 0 where not even one trip does.
std::uint64_t max_piece(const KernelLimits& lim, std::uint64_t K, std::uint32_t S, bool along_g) {
  if (along_g) {  // a trip per k: 8 of the weight's elements (4 + 4 loads where not a word),
    // then S vectors' elements, each added into 8 sums; the zeroing and the 8 x S stores
    const std::uint64_t per_trip = 1 + 4 + S;
    return std::min<std::uint64_t>(K, loop_trips_per_invocation(lim, K, per_trip, S + 4 * S + 2));
  }
  const std::uint64_t rows = matvec_rows(S), wg = matvec_workgroup(lim);
  const std::uint64_t per_trip = 1 + S * (1 + 8) + rows * (1 + S);
  std::uint64_t tree = 0;
  for (std::uint64_t h = wg / 2; h > 0; h /= 2) tree += 1 + rows * S;
  const std::uint64_t fixed = per_trip + 3 * rows * S + rows + tree;
  const std::uint64_t trips = ceil_div(K, wg * 8);
  const std::uint64_t fit = loop_trips_per_invocation(lim, trips, per_trip, fixed);
  return fit == trips ? K : fit * wg * 8;
}

// One dispatch per grid part: w [nb, G, K], x [nb, S, K], c [nb, G, S], each in one binding.
// `accumulate`: c += the products; `along_g`: w's K rows are contiguous in g (ALONG_G).
void dispatch_grid(VulkanDevice& dev, const TensorArg& w, const TensorArg& x, const TensorArg& c,
                   bool accumulate, bool along_g) {
  const std::uint32_t nb = std::uint32_t(w.sizes[0]), G = std::uint32_t(w.sizes[1]),
                      K = std::uint32_t(w.sizes[2]), S = std::uint32_t(x.sizes[1]);
  const Binding cb = dev.bind(c, Access::write), wb = dev.bind(w, Access::read),
                xb = dev.bind(x, Access::read);
  const Binding old = accumulate ? dev.bind(c, Access::read) : xb;  // binding 3, or unused
  abi::MatvecParams p{};
  p.G = G;
  p.K = K;
  p.c_off = cb.element_offset;
  p.w_off = wb.element_offset;
  p.x_off = xb.element_offset;
  p.w_batch = std::uint32_t(w.strides[0]);
  p.w_row = std::uint32_t(w.strides[1]);
  p.w_k = std::uint32_t(w.strides[2]);
  p.x_batch = std::uint32_t(x.strides[0]);
  p.x_s = std::uint32_t(x.strides[1]);
  p.x_k = std::uint32_t(x.strides[2]);
  p.c_batch = std::uint32_t(c.strides[0]);
  p.c_g = std::uint32_t(c.strides[1]);
  p.c_s = std::uint32_t(c.strides[2]);
  // A batch stride never read (one batch) does not spoil the alignment.
  auto aligned = [&](std::uint32_t off, std::int64_t batch, std::int64_t row) {
    return multiple_of_8(off) && (nb == 1 || multiple_of_8(batch)) &&
           (G == 1 || multiple_of_8(row));
  };
  // Where the 8-element words start: along k (a row's chunks) or, along_g, along g (its K rows).
  const bool w_vec = along_g ? multiple_of_8(p.w_off) && (nb == 1 || multiple_of_8(p.w_batch)) &&
                                   (K == 1 || multiple_of_8(p.w_k))
                             : aligned(p.w_off, p.w_batch, p.w_row);
  const bool x_vec = x.strides[2] == 1 && aligned(p.x_off, p.x_batch, p.x_s);
  const std::uint32_t rows = matvec_rows(S), wg = matvec_workgroup(dev.limits());
  const std::vector<std::uint32_t> spec = abi::MatvecSpec{.WG = wg,
                                                          .DT = dtype_code(w.dtype),
                                                          .S = S,
                                                          .ROWS = rows,
                                                          .W_VEC = w_vec,
                                                          .X_VEC = x_vec,
                                                          .ACCUMULATE = accumulate,
                                                          .ALONG_G = along_g}
                                              .values();
  const std::uint32_t max_groups = dev.limits().max_groups_x;
  const std::uint32_t gx = std::uint32_t(along_g ? ceil_div(G, 8 * wg) : ceil_div(G, rows));
  for (std::uint32_t y = 0; y < nb; y += max_groups)
    for (std::uint32_t x0 = 0; x0 < gx; x0 += max_groups) {
      p.group0 = x0;
      p.batch0 = y;
      dev.dispatch({"matvec",
                    spec,
                    {cb, wb, xb, old},
                    &p,
                    sizeof p,
                    {std::min(max_groups, gx - x0), std::min(max_groups, nb - y), 1}});
    }
}

// dispatch_grid over K in pieces of at most `piece` (max_piece), the pieces after the first
// adding to c.
void dispatch_part(VulkanDevice& dev, const TensorArg& w, const TensorArg& x, const TensorArg& c,
                   std::int64_t piece, bool along_g) {
  const std::int64_t K = w.sizes[2];
  if (piece >= K) return dispatch_grid(dev, w, x, c, false, along_g);
  for (std::int64_t k0 = 0; k0 < K; k0 += piece) {
    const std::int64_t n = std::min(piece, K - k0);
    dispatch_grid(dev, narrow(w, 2, k0, n), narrow(x, 2, k0, n), c, k0 > 0, along_g);
  }
}

}  // namespace

bool try_matvec(VulkanDevice& dev, const TensorArg& A, const TensorArg& B, const TensorArg& C) {
  const DType dt = C.dtype;
  if (dt != DType::f32 && dt != DType::f16 && dt != DType::bf16) return false;
  const std::optional<MatvecShape> shape = matvec_shape(A, B, C);
  if (!shape) return false;
  const bool along_g = shape->w_along_g;
  const KernelLimits& lim = dev.limits();
  const std::int64_t piece =
      std::int64_t(max_piece(lim, std::uint64_t(shape->K), std::uint32_t(shape->S), along_g));
  if (piece == 0) return false;
  const MatvecViews v = views(*shape, A, B, C);
  const std::int64_t batches =
      std::min({max_chunk(lim, v.w, 0), max_chunk(lim, v.x, 0), max_chunk(lim, v.c, 0)});
  if (batches >= 1) {
    for (std::int64_t b0 = 0; b0 < shape->batches; b0 += batches) {
      const std::int64_t n = std::min(batches, shape->batches - b0);
      dispatch_part(dev, narrow(v.w, 0, b0, n), narrow(v.x, 0, b0, n), narrow(v.c, 0, b0, n), piece,
                    along_g);
    }
    return true;
  }
  // One batch is too big for a binding. A weight along g spans all its rows in every block of
  // columns, so it is cut along K instead: pieces of whole rows (and the vectors' elements they
  // meet), each after the first adding to c, which must fit whole.
  if (along_g) {
    const TensorArg w1 = narrow(v.w, 0, 0, 1), x1 = narrow(v.x, 0, 0, 1);
    const std::int64_t rows = std::min(max_chunk(lim, w1, 2), max_chunk(lim, x1, 2));
    if (rows == 0 || !fits(lim, narrow(v.c, 0, 0, 1))) return false;
    for (std::int64_t b = 0; b < shape->batches; ++b)
      dispatch_part(dev, narrow(v.w, 0, b, 1), narrow(v.x, 0, b, 1), narrow(v.c, 0, b, 1),
                    std::min(piece, rows), true);
    return true;
  }
  // Otherwise blocks of weight rows (and their outputs), the batch's vectors whole. Vectors, or a
  // single weight row, too long for one binding take the GEMM path, which cuts along K.
  if (!fits(lim, narrow(v.x, 0, 0, 1)) || !fits(lim, narrow(narrow(v.w, 0, 0, 1), 1, 0, 1)))
    return false;
  for (std::int64_t b = 0; b < shape->batches; ++b) {
    const TensorArg x1 = narrow(v.x, 0, b, 1);
    for_each_part(lim, {narrow(v.w, 0, b, 1), narrow(v.c, 0, b, 1)}, 1, 2,
                  [&](const auto& parts, const auto&) {
                    dispatch_part(dev, parts[0], x1, parts[1], piece, along_g);
                  });
  }
  return true;
}

}  // namespace ferry::vulkan
