// runtime/ops_nn.cpp — front-ends of softmax, log_softmax, layer_norm and
// embedding. The kernels see the work laid out the same way on every device
// (docs/kernel-contract.md): softmax along the last dim of a (possibly
// transposed) view, layer_norm over the rows of a contiguous [rows, N].
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autocast_internal.hpp"
#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {

using detail::check_same_device;
using detail::impl_of;
using detail::new_tensor;
using detail::run_kernel;
using detail::wrap_dim;

namespace {

// The kernel works along the last dim. Rather than moving `dim` there with a
// copy, both the input and the (contiguous, original-shape) output are
// viewed transposed; the kernel handles strided rows.
Tensor softmax_like(OpId op, const Tensor& x, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim(), op_name(op));
  // Integer and bool inputs compute in f32, like PyTorch's softmax(x, dtype=float).
  Tensor in = is_floating(x.dtype()) ? x : x.to(DType::f32);
  Tensor out = new_tensor(x.sizes(), in.dtype(), impl_of(x));
  if (out.numel() == 0) return out;
  if (x.dim() == 0) {  // one element: a row of length 1
    run_kernel(op, {in.reshape({1})}, {out.view({1})});
    return out;
  }
  run_kernel(op, {in.transpose(d, -1)}, {out.transpose(d, -1)});
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t dim) {
  if (ferry::detail::autocast_applies(OpId::softmax)) {
    const ferry::detail::AutocastOp ac(OpId::softmax, {&x});
    return softmax(ac(x), dim);
  }
  Tensor y = autograd::untracked([&] { return softmax_like(OpId::softmax, x, dim); });
  autograd::record_softmax("softmax", x, dim, y);
  return y;
}

Tensor log_softmax(const Tensor& x, std::int64_t dim) {
  if (ferry::detail::autocast_applies(OpId::log_softmax)) {
    const ferry::detail::AutocastOp ac(OpId::log_softmax, {&x});
    return log_softmax(ac(x), dim);
  }
  Tensor y = autograd::untracked([&] { return softmax_like(OpId::log_softmax, x, dim); });
  autograd::record_softmax("log_softmax", x, dim, y);
  return y;
}

namespace detail {

LayerNormResult layer_norm_forward(const Tensor& x, const Shape& normalized_shape,
                                   const Tensor& weight, const Tensor& bias, double eps) {
  check_same_device("layer_norm", {{"input", &x}, {"weight", &weight}, {"bias", &bias}});
  if (!is_floating(x.dtype()))
    throw DTypeError(
        fmt::format("layer_norm: needs a floating input, got {} (shape {}); cast it first, e.g. "
                    "x.to(ferry::DType::f32)",
                    dtype_name(x.dtype()), shape_str(x.sizes())));
  const auto k = std::int64_t(normalized_shape.size());
  bool fits = k > 0 && k <= x.dim();
  for (std::int64_t i = 0; fits && i < k; ++i)
    fits = x.size(x.dim() - k + i) == normalized_shape[std::size_t(i)];
  if (!fits)
    throw ShapeError(
        fmt::format("layer_norm: normalized_shape {} must be non-empty and equal the last dims of "
                    "the input, whose shape is {}",
                    shape_str(normalized_shape), shape_str(x.sizes())));
  auto check_param = [&](const Tensor& p, std::string_view name) {
    if (p.defined() && p.sizes() != normalized_shape)
      throw ShapeError(
          fmt::format("layer_norm: {} has shape {} but normalized_shape is {}; they must be equal",
                      name, shape_str(p.sizes()), shape_str(normalized_shape)));
  };
  check_param(weight, "weight");
  check_param(bias, "bias");

  const std::int64_t n = shape_numel(normalized_shape);
  const Shape lead(x.sizes().begin(), x.sizes().end() - k);
  const std::int64_t rows = shape_numel(lead);
  const Tensor x2 = x.contiguous().view({rows, n});
  auto as_param = [&](const Tensor& p) {
    return p.defined() ? p.to(x.dtype()).contiguous().view({n}) : Tensor();
  };
  const Tensor w = as_param(weight), b = as_param(bias);

  LayerNormResult r;
  r.y = new_tensor({rows, n}, x.dtype(), impl_of(x));
  // The statistics are f32 (the 16-bit types compute in f32), f64 for f64.
  const DType stats = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  r.mean = new_tensor({rows}, stats, impl_of(x));
  r.rstd = new_tensor({rows}, stats, impl_of(x));
  if (rows > 0)
    run_kernel(OpId::layer_norm, {x2, w, b}, {r.y, r.mean, r.rstd},
               Attrs{{"eps", eps}, {"has_weight", weight.defined()}, {"has_bias", bias.defined()}});
  r.y = r.y.view(x.sizes());
  return r;
}

}  // namespace detail

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  if (ferry::detail::autocast_applies(OpId::layer_norm)) {
    const ferry::detail::AutocastOp ac(OpId::layer_norm, {&x, &weight, &bias});
    return layer_norm(ac(x), normalized_shape, ac(weight), ac(bias), eps);
  }
  detail::LayerNormResult r;
  {
    NoGradGuard no_grad;
    r = detail::layer_norm_forward(x, normalized_shape, weight, bias, eps);
  }
  autograd::record_layer_norm(x, normalized_shape, weight, bias, r.mean, r.rstd, eps, r.y,
                              detail::use_fused_kernel_with_backward(x, OpId::layer_norm));
  return r.y;
}

namespace detail {

std::int64_t padding_row(std::string_view who, std::int64_t rows, std::int64_t padding_idx) {
  if (padding_idx >= rows || padding_idx < -rows)
    throw ValueError(fmt::format("{}: padding_idx must be within num_embeddings ({}), got {}", who,
                                 rows, padding_idx));
  return padding_idx < 0 ? padding_idx + rows : padding_idx;
}

}  // namespace detail

Tensor embedding(const Tensor& weight, const Tensor& indices,
                 std::optional<std::int64_t> padding_idx, bool scale_grad_by_freq) {
  check_same_device("embedding", {{"weight", &weight}, {"indices", &indices}});
  if (weight.dim() != 2)
    throw ShapeError(
        fmt::format("embedding: weight must be 2-D [num_embeddings, embedding_dim], got shape {}",
                    shape_str(weight.sizes())));
  if (padding_idx) padding_idx = detail::padding_row("embedding", weight.size(0), *padding_idx);
  Tensor out = autograd::untracked([&] {
    Shape shape = indices.sizes();
    shape.push_back(weight.size(1));
    return detail::index_select("embedding", weight, 0, indices.reshape({-1})).view(shape);
  });
  autograd::record_embedding(weight, indices, out, padding_idx, scale_grad_by_freq);
  return out;
}

Tensor& embedding_renorm_(Tensor& weight, const Tensor& indices, double max_norm,
                          double norm_type) {
  check_same_device("embedding_renorm_", {{"weight", &weight}, {"indices", &indices}});
  if (weight.dim() != 2)
    throw ShapeError(fmt::format(
        "embedding_renorm_: weight must be 2-D [num_embeddings, embedding_dim], got shape {}",
        shape_str(weight.sizes())));
  if (!(max_norm >= 0))
    throw ValueError(fmt::format("embedding_renorm_: max_norm must be >= 0, got {}", max_norm));
  if (!(norm_type > 0))
    throw ValueError(fmt::format("embedding_renorm_: norm_type must be > 0, got {}", norm_type));
  NoGradGuard untracked;
  const Tensor flat = detail::as_index("embedding_renorm_", indices).reshape({-1});
  if (flat.numel() == 0) return weight;
  // Only the named rows are read and written back (a vocabulary can be large): torch.renorm's
  // rule on each. A repeated index scatters the same scaled row twice, so the order of the
  // writes does not matter.
  // Checked at the call, not deferred (Note [Deferred checks]): weight is written below.
  detail::check_bounds("embedding_renorm_", flat, 0, weight.size(0), weight.sizes());
  const Tensor rows =
      detail::index_select("embedding_renorm_", weight, 0, flat, /*check_range=*/false);
  const Tensor scaled = renorm(rows, norm_type, 0, max_norm).to(weight.dtype());
  scatter_(weight, 0, flat.unsqueeze(1).expand({flat.numel(), weight.size(1)}), scaled);
  return weight;
}

}  // namespace ferry
