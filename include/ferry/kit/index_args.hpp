// include/ferry/kit/index_args.hpp — the operands of the index kernels as every backend's
// kernel reads them (docs/kernel-contract.md): index_select and gather, and their adjoints
// index_add and scatter_add (Note [Deterministic accumulation] in
// runtime/cpu/cpu_kernels_grad.cpp), checked once here for the CPU, Vulkan and CUDA kernels
// alike.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/error.hpp"

namespace ferry {

// out[i] = x[i with index[i] along `dim`], `index` seen with out's shape.
struct GatherOperands {
  const TensorArg& x;
  TensorArg index;
  const TensorArg& out;
  int dim;
};

// out (shape of `src` but along `dim`) += src, element j of src's line along
// `dim` going to index[j]; `index` is seen with src's shape.
struct AccumulateOperands {
  const TensorArg& src;
  TensorArg index;
  const TensorArg& out;
  int dim;
};

namespace detail {
[[noreturn]] inline void index_shapes_do_not_fit(std::string_view op, std::string_view backend) {
  throw ShapeError(std::string(op) + ": the " + std::string(backend) +
                   " kernel got shapes that do not fit (see docs/kernel-contract.md)");
}

// A 1-D index seen with `sizes`: it varies along `dim` only.
inline TensorArg index_along(const TensorArg& index, const std::vector<std::int64_t>& sizes,
                             int dim) {
  TensorArg idx = index;
  idx.sizes = sizes;
  idx.strides.assign(sizes.size(), 0);
  idx.strides[std::size_t(dim)] = index.strides[0];
  return idx;
}
}  // namespace detail

// index_select: a 1-D index of out's length along `dim`, out of x's rank.
// ShapeError naming `backend` otherwise (the core never sends such a call).
inline GatherOperands index_select_args(const OpCall& call, std::string_view backend) {
  const TensorArg &x = call.inputs.at(0), &index = call.inputs.at(1), &out = call.outputs.at(0);
  const int dim = int(call.attrs.i("dim"));
  if (index.ndim() != 1 || dim < 0 || dim >= x.ndim() || out.ndim() != x.ndim() ||
      out.sizes[std::size_t(dim)] != index.sizes[0])
    detail::index_shapes_do_not_fit("index_select", backend);
  return {x, detail::index_along(index, out.sizes, dim), out, dim};
}

// gather: an index of out's shape, no larger than x but along `dim`.
inline GatherOperands gather_args(const OpCall& call, std::string_view backend) {
  const TensorArg &x = call.inputs.at(0), &index = call.inputs.at(1), &out = call.outputs.at(0);
  const int dim = int(call.attrs.i("dim"));
  bool fits = index.ndim() == x.ndim() && out.sizes == index.sizes && dim >= 0 && dim < x.ndim();
  for (int k = 0; fits && k < x.ndim(); ++k)
    fits = k == dim || index.sizes[std::size_t(k)] <= x.sizes[std::size_t(k)];
  if (!fits) detail::index_shapes_do_not_fit("gather", backend);
  return {x, index, out, dim};
}

// index_add: a 1-D index of src's length along `dim`, out like src elsewhere.
// ShapeError naming `backend` otherwise (the core never sends such a call).
inline AccumulateOperands index_add_args(const OpCall& call, std::string_view backend) {
  const TensorArg &src = call.inputs.at(0), &index = call.inputs.at(1), &out = call.outputs.at(0);
  const int dim = int(call.attrs.i("dim"));
  bool fits = index.ndim() == 1 && dim >= 0 && dim < src.ndim() && out.ndim() == src.ndim() &&
              index.sizes[0] == src.sizes[std::size_t(dim)];
  for (int k = 0; fits && k < src.ndim(); ++k)
    fits = k == dim || out.sizes[std::size_t(k)] == src.sizes[std::size_t(k)];
  if (!fits) detail::index_shapes_do_not_fit("index_add", backend);
  return {src, detail::index_along(index, src.sizes, dim), out, dim};
}

// scatter_add: an index of src's shape, out at least as large elsewhere.
inline AccumulateOperands scatter_add_args(const OpCall& call, std::string_view backend) {
  const TensorArg &src = call.inputs.at(0), &index = call.inputs.at(1), &out = call.outputs.at(0);
  const int dim = int(call.attrs.i("dim"));
  bool fits = index.sizes == src.sizes && out.ndim() == src.ndim() && dim >= 0 && dim < src.ndim();
  for (int k = 0; fits && k < src.ndim(); ++k)
    fits = k == dim || index.sizes[std::size_t(k)] <= out.sizes[std::size_t(k)];
  if (!fits) detail::index_shapes_do_not_fit("scatter_add", backend);
  return {src, index, out, dim};
}

}  // namespace ferry
