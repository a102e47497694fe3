// runtime/vulkan/vk_kernels_index.cpp — index_select and gather through shaders/index.comp
// (docs/kernel-contract.md).
//
// Both become the CPU's one loop (runtime/cpu/cpu_kernels_index.cpp): out[i] = x[src(i) +
// index[i] * stride(dim)], with src = x seen with the output's shape and stride 0 along `dim`,
// and index seen with the output's shape (index_select's varies along `dim` only). The host
// coalesces the three views, loops over dims beyond the shader's 4, and binds x with its
// whole extent along `dim`. The shader moves elements by size and reads the i64 indices as
// 32-bit words, so only x's dtype needs the device's full shader variant.
// Tensors larger than one storage-buffer binding are cut along the output's outer dims
// (vk_split.hpp), x along with them where it varies along those dims (its dims other than
// `dim`); x's extent along `dim` alone exceeding a binding raises UnsupportedError.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "ferry/error.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_policy.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

constexpr int kMaxDims = 4;  // dims the shader indexes
constexpr std::uint32_t kWorkgroup = 256;

// The push constants of shaders/index.comp.
struct Params {
  std::uint32_t size[4];
  std::uint32_t stride[3][4];  // output, x (0 along dim), index
  std::uint32_t off[4];        // output, x, index
  std::uint32_t n;
  std::uint32_t dim_stride;
  std::uint32_t dim_size;
};
static_assert(sizeof(Params) <= kMaxPushBytes);

// One dispatch: out and idx have the same sizes of at most 4 dims, x those and then the
// gathered dim, which the shader indexes (its stride along the others is 0 where they stand
// for `dim`).
void dispatch_part(VulkanDevice& dev, const TensorArg& out, const TensorArg& x,
                   const TensorArg& idx) {
  const std::int64_t dim_size = x.sizes.back(), dim_stride = x.strides.back();
  Binding bo = dev.bind(out, Access::write), bx = dev.bind(x, Access::read),
          bi = dev.bind(idx, Access::read);
  Params p{};
  const int nd = out.ndim();
  std::uint64_t n = 1;
  const TensorArg* views[3] = {&out, &x, &idx};
  for (int d = 0; d < kMaxDims; ++d) {
    p.size[d] = d < nd ? std::uint32_t(out.sizes[d]) : 1;
    n *= p.size[d];
    for (int t = 0; t < 3; ++t) p.stride[t][d] = d < nd ? std::uint32_t(views[t]->strides[d]) : 0;
  }
  if (n > 0xffffffffull)
    throw UnsupportedError("index_select/gather: the vulkan kernel takes < 2^32 output elements");
  p.off[0] = bo.element_offset;
  p.off[1] = bx.element_offset;
  p.off[2] = bi.element_offset;
  p.n = std::uint32_t(n);
  p.dim_stride = std::uint32_t(dim_stride);
  p.dim_size = std::uint32_t(dim_size);
  const std::uint32_t wg = std::min(kWorkgroup, dev.limits().max_workgroup_invocations);
  const std::uint32_t groups =
      std::uint32_t(std::min<std::uint64_t>((n + wg - 1) / wg, dev.limits().max_groups_x));
  dev.dispatch({"index",
                {wg, std::uint32_t(dtype_size(out.dtype)), std::uint32_t(std::max(nd, 1))},
                {bo, bx, bi},
                &p,
                sizeof p,
                {groups, 1, 1}});
}

// out[i] = x[i with coordinate `dim` replaced by index[i]]; `index` has the output's shape.
void gather_along(DeviceImpl& d, std::string_view op, const TensorArg& x, const TensorArg& index,
                  const TensorArg& out, int dim) {
  VulkanDevice& dev = vulkan_device(d);
  if (index.dtype != DType::i64 || x.dtype != out.dtype)
    throw DTypeError(
        fmt::format("{}: the vulkan kernel expects an i64 index and an output of x's dtype", op));
  dev.require(x.dtype, op);
  if (out.numel() == 0) return;
  const std::int64_t dim_size = x.sizes[std::size_t(dim)];
  const std::int64_t dim_stride = x.strides[std::size_t(dim)];
  if (dim_size > 0xffffffffll)
    throw UnsupportedError(fmt::format("{}: the vulkan kernel takes dims of < 2^32", op));
  std::vector<std::int64_t> src_strides = x.strides;
  src_strides[std::size_t(dim)] = 0;
  Coalesced c = coalesce(out.sizes, {out.strides, src_strides, index.strides});

  const int nd = int(c.sizes.size());
  const int outer = std::max(0, nd - kMaxDims);
  const TensorArg* base[3] = {&out, &x, &index};
  std::vector<std::int64_t> at(std::size_t(outer), 0);  // position in the outer dims
  for (;;) {
    TensorArg part[3];
    for (int t = 0; t < 3; ++t) {
      part[t] = *base[t];
      part[t].sizes.assign(c.sizes.begin() + outer, c.sizes.end());
      part[t].strides.assign(c.strides[std::size_t(t)].begin() + outer,
                             c.strides[std::size_t(t)].end());
      for (int k = 0; k < outer; ++k)
        part[t].offset += at[std::size_t(k)] * c.strides[std::size_t(t)][std::size_t(k)];
    }
    part[1].sizes.push_back(dim_size);  // x as the shader reaches it
    part[1].strides.push_back(dim_stride);
    for_each_part(
        dev.limits(), {part[0], part[1], part[2]}, 0, nd - outer, [&](const auto& p, const auto&) {
          if (!fits(dev.limits(), p[1]))
            throw UnsupportedError(
                fmt::format("{}: x along dim {} ({} elements, stride {}) spans more than the "
                            "device's storage-buffer range ({} bytes); the Vulkan kernel cuts x "
                            "only along its other dims",
                            op, dim, dim_size, dim_stride, dev.limits().max_storage_range));
          dispatch_part(dev, p[0], p[1], p[2]);
        });
    int k = outer - 1;
    while (k >= 0 && ++at[std::size_t(k)] == c.sizes[std::size_t(k)]) at[std::size_t(k--)] = 0;
    if (k < 0) break;
  }
}

void index_select_kernel(DeviceImpl& d, const OpCall& call) {
  const TensorArg &x = call.inputs.at(0), &index = call.inputs.at(1), &out = call.outputs.at(0);
  const int dim = int(call.attrs.i("dim"));
  if (index.ndim() != 1 || dim < 0 || dim >= x.ndim() || out.ndim() != x.ndim() ||
      out.sizes[std::size_t(dim)] != index.sizes[0])
    throw ShapeError(
        "index_select: the vulkan kernel got shapes that do not fit (see "
        "docs/kernel-contract.md)");
  // The index seen with the output's shape: it varies along `dim` only.
  TensorArg idx = index;
  idx.sizes = out.sizes;
  idx.strides.assign(out.sizes.size(), 0);
  idx.strides[std::size_t(dim)] = index.strides[0];
  gather_along(d, "index_select", x, idx, out, dim);
}

void gather_kernel(DeviceImpl& d, const OpCall& call) {
  const TensorArg &x = call.inputs.at(0), &index = call.inputs.at(1), &out = call.outputs.at(0);
  const int dim = int(call.attrs.i("dim"));
  bool fits = index.ndim() == x.ndim() && out.sizes == index.sizes && dim >= 0 && dim < x.ndim();
  for (int k = 0; fits && k < x.ndim(); ++k)
    fits = k == dim || index.sizes[std::size_t(k)] <= x.sizes[std::size_t(k)];
  if (!fits)
    throw ShapeError(
        "gather: the vulkan kernel got shapes that do not fit (see docs/kernel-contract.md)");
  gather_along(d, "gather", x, index, out, dim);
}

}  // namespace

void add_index_kernels(KernelTable& table) {
  table.emplace_back("index_select", index_select_kernel);
  table.emplace_back("gather", gather_kernel);
}

}  // namespace ferry::vulkan
