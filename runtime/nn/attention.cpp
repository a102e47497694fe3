// runtime/nn/attention.cpp — scaled_dot_product_attention (ferry/nn/attention.hpp): its
// checks, the composition every device runs, and the way to a device's fused kernel.
#include "ferry/nn/attention.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "../dispatch.hpp"
#include "../ops_internal.hpp"
#include "autocast_internal.hpp"
#include "autograd/formulas.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/ops.hpp"
#include "nn_internal.hpp"

namespace ferry::nn::functional {

// Note [Scaled dot-product attention]
// One op row, scaled_dot_product_attention (kind nn, impl composite), with a backward row.
// The composition is PyTorch's math reference: scores = q kᵀ · scale, -inf where the mask or
// the causal triangle leaves a key out (or the float mask added), softmax, dropout, times v,
// the key/value heads repeated for grouped-query attention. It holds the [..., L, S] scores and
// probabilities, and autograd differentiates it. A row with every key masked would be NaN
// (softmax of -inf only); as PyTorch since 2.5 it gives 0, its scores replaced by 0 before
// the softmax so that no NaN reaches the gradient either.
// A device whose supports() lists both rows runs its fused kernel instead, forward and
// backward (the CPU's: Note [Fused attention on the CPU]; Vulkan's: Note [Fused attention on
// Vulkan] in shaders/attention.comp), on this form of the call:
// - q [B, Hq, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev] contiguous: B is the leading dims but
//   the heads' (dim -3) flattened, and Hk divides Hq (Hk = Hq without grouped-query attention);
// - the mask additive, in the query's dtype, [Bm, Hm, L, S] with Bm 1 or B and Hm 1 or Hq: a
//   mask broadcast over the batch or the heads is passed once;
// - attributes scale, is_causal and has_mask;
// - outputs the attention [B, Hq, L, Ev] and each row's logsumexp of its scaled, masked
//   scores [B, Hq, L] (f32; f64 for f64), +inf for a row with every key masked: the backward
//   recomputes the probabilities from it.
// The composition runs instead where the kernel cannot: dropout (the kernel draws no random
// numbers), leading dims that broadcast between q, k and v, a float mask that requires grad
// (the kernel gives the mask none), and empty tensors.
namespace {

using detail::check_defined;
constexpr std::string_view kOp = "scaled_dot_product_attention";
constexpr double kInf = std::numeric_limits<double>::infinity();

// Heads: dim -3, or 1 for 2-D tensors.
std::int64_t heads(const Tensor& t) { return t.dim() >= 3 ? t.size(-3) : 1; }

Shape leading(const Tensor& t, std::int64_t drop) {
  const Shape& s = t.sizes();
  return Shape(s.begin(), s.end() - drop);
}

void check_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                double dropout_p, bool is_causal, bool enable_gqa) {
  check_defined(kOp, "query", q);
  check_defined(kOp, "key", k);
  check_defined(kOp, "value", v);
  ferry::detail::check_dtype(OpId::scaled_dot_product_attention, q);
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw DTypeError(fmt::format("{}: query, key and value must have one dtype, got {}, {} and {}",
                                 kOp, dtype_name(q.dtype()), dtype_name(k.dtype()),
                                 dtype_name(v.dtype())));
  std::vector<Tensor> all{q, k, v};
  if (mask.defined()) all.push_back(mask);
  ferry::detail::check_same_device(kOp, all);
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2)
    throw ShapeError(fmt::format(
        "{}: query, key and value must be [..., L, E], [..., S, E] and [..., S, Ev], got {}, {} "
        "and {}",
        kOp, shape_str(q.sizes()), shape_str(k.sizes()), shape_str(v.sizes())));
  if (q.size(-1) != k.size(-1) || k.size(-2) != v.size(-2))
    throw ShapeError(fmt::format(
        "{}: the query's and key's last dims (E) and the key's and value's rows (S) must match, "
        "got query {}, key {}, value {}",
        kOp, shape_str(q.sizes()), shape_str(k.sizes()), shape_str(v.sizes())));
  if (enable_gqa) {
    if (q.dim() < 3 || k.dim() < 3 || v.dim() < 3 || heads(k) != heads(v) || heads(k) == 0 ||
        heads(q) % heads(k) != 0)
      throw ShapeError(fmt::format(
          "{}: grouped-query attention needs the key's and value's heads (dim -3) to be equal and "
          "to divide the query's, got query {}, key {}, value {}",
          kOp, shape_str(q.sizes()), shape_str(k.sizes()), shape_str(v.sizes())));
  }
  if (mask.defined()) {
    if (mask.dtype() != DType::boolean && mask.dtype() != q.dtype())
      throw DTypeError(fmt::format("{}: attn_mask must be bool or the query's dtype {}, got {}",
                                   kOp, dtype_name(q.dtype()), dtype_name(mask.dtype())));
    if (is_causal)
      throw Error(
          fmt::format("{}: give attn_mask or is_causal, not both (fold the causal "
                      "triangle into the mask)",
                      kOp));
  }
  if (!(dropout_p >= 0.0 && dropout_p <= 1.0))
    throw ValueError(fmt::format("{}: dropout_p must be in [0, 1], got {}", kOp, dropout_p));
}

Tensor composition(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                   double dropout_p, bool is_causal, double scale, bool enable_gqa) {
  Tensor key = k, value = v;
  if (enable_gqa && heads(q) != heads(k)) {
    key = repeat_interleave(k, heads(q) / heads(k), k.dim() - 3);
    value = repeat_interleave(v, heads(q) / heads(k), v.dim() - 3);
  }
  Tensor s = matmul(q, key.transpose(-2, -1)) * scale;
  if (is_causal) {
    const Tensor keep = tril(full({q.size(-2), k.size(-2)}, true, {DType::boolean, q.device()}));
    s = where(keep, s, -kInf);
  }
  Tensor all_masked;
  if (mask.defined()) {
    s = mask.dtype() == DType::boolean ? where(mask, s, -kInf) : s + mask;
    all_masked = eq(amax(s, {-1}, true), -kInf);
    s = where(all_masked, 0.0, s);
  }
  Tensor p = softmax(s, -1);
  if (all_masked.defined()) p = where(all_masked, 0.0, p);
  if (dropout_p > 0) p = dropout(p, dropout_p, true);
  return matmul(p, value);
}

// The scores' shape [..., L, S].
Shape scores_shape(const Tensor& q, const Tensor& k) {
  Shape target = q.sizes();
  target.back() = k.size(-2);
  return target;
}

// The mask's sizes with 1s in front to the scores' dims, or nothing when the mask does not
// broadcast to the scores without enlarging them (the composition broadcasts or raises).
std::optional<Shape> mask_sizes(const Tensor& mask, const Shape& target) {
  if (mask.dim() > std::int64_t(target.size())) return std::nullopt;
  Shape padded(target.size() - std::size_t(mask.dim()), 1);
  for (std::int64_t s : mask.sizes()) padded.push_back(s);
  for (std::size_t d = 0; d < padded.size(); ++d)
    if (padded[d] != 1 && padded[d] != target[d]) return std::nullopt;
  return padded;
}

// Whether the kernel's form of the call exists (the note).
bool kernel_form(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                 double dropout_p, bool enable_gqa) {
  if (dropout_p > 0 || q.numel() == 0 || k.numel() == 0 || v.numel() == 0) return false;
  if (mask.defined() &&
      ((mask.requires_grad() && is_grad_enabled()) || !mask_sizes(mask, scores_shape(q, k))))
    return false;
  if (k.dim() != q.dim() || v.dim() != q.dim()) return false;
  const std::int64_t keep = q.dim() >= 3 ? 3 : 2;
  if (leading(k, keep) != leading(q, keep) || leading(v, keep) != leading(q, keep)) return false;
  if (heads(k) != heads(q) && !enable_gqa) return false;  // broadcast heads
  return ferry::detail::use_fused_kernel_with_backward(q, OpId::scaled_dot_product_attention);
}

// The mask as the kernel takes it: additive, [Bm, Hm, L, S] (the note).
Tensor kernel_mask(const Tensor& mask, const Tensor& q, const Tensor& k, std::int64_t B) {
  const std::int64_t nd = q.dim(), L = q.size(-2), S = k.size(-2);
  Tensor m = mask;
  if (m.dtype() == DType::boolean) m = where(mask, zeros({}, {q.dtype(), q.device()}), -kInf);
  Shape target = scores_shape(q, k);
  const Shape padded = mask_sizes(mask, target).value();  // kernel_form checked
  m = m.reshape(padded);
  bool batch_broadcast = true;
  for (std::int64_t d = 0; d + 3 < nd; ++d) batch_broadcast = batch_broadcast && padded[d] == 1;
  const std::int64_t Hm = nd >= 3 ? padded[std::size_t(nd - 3)] : 1;
  if (batch_broadcast)
    for (std::int64_t d = 0; d + 3 < nd; ++d) target[std::size_t(d)] = 1;
  if (nd >= 3) target[std::size_t(nd - 3)] = Hm;
  return m.expand(target).contiguous().reshape({batch_broadcast ? 1 : B, Hm, L, S});
}

Tensor fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool is_causal,
             double scale) {
  const std::int64_t L = q.size(-2), E = q.size(-1), S = k.size(-2), Ev = v.size(-1);
  const std::int64_t Hq = heads(q), Hk = heads(k), B = q.numel() / (Hq * L * E);
  // Recorded: the gradients reach the caller's tensors through the reshapes.
  const Tensor q4 = q.reshape({B, Hq, L, E}).contiguous();
  const Tensor k4 = k.reshape({B, Hk, S, E}).contiguous();
  const Tensor v4 = v.reshape({B, Hk, S, Ev}).contiguous();
  Tensor m4;
  if (mask.defined()) {
    NoGradGuard no_grad;
    m4 = kernel_mask(mask, q, k, B);
  }
  const Attrs attrs{{"scale", scale}, {"is_causal", is_causal}, {"has_mask", mask.defined()}};
  Tensor out, lse;
  {
    NoGradGuard no_grad;
    DeviceImpl& impl = ferry::detail::impl_of(q);
    out = ferry::detail::new_tensor({B, Hq, L, Ev}, q.dtype(), impl);
    lse = ferry::detail::new_tensor({B, Hq, L}, q.dtype() == DType::f64 ? DType::f64 : DType::f32,
                                    impl);
    std::vector<Tensor> in{q4, k4, v4};
    if (m4.defined()) in.push_back(m4);
    ferry::detail::run_kernel(OpId::scaled_dot_product_attention, in, {out, lse}, attrs);
  }
  autograd::record_attention(q4, k4, v4, m4, attrs, out, lse);
  Shape shape = q.sizes();
  shape.back() = Ev;
  return out.reshape(shape);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa) {
  if (ferry::detail::autocast_applies(OpId::scaled_dot_product_attention)) {
    const ferry::detail::AutocastOp ac(OpId::scaled_dot_product_attention,
                                       {&query, &key, &value, &attn_mask});
    return scaled_dot_product_attention(ac(query), ac(key), ac(value), ac(attn_mask), dropout_p,
                                        is_causal, scale, enable_gqa);
  }
  check_args(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa);
  const double s = scale ? *scale : 1.0 / std::sqrt(double(query.size(-1)));
  if (kernel_form(query, key, value, attn_mask, dropout_p, enable_gqa))
    return fused(query, key, value, attn_mask, is_causal, s);
  return composition(query, key, value, attn_mask, dropout_p, is_causal, s, enable_gqa);
}

RotaryTables rotary_tables(std::int64_t D, std::int64_t positions, double base,
                           const TensorOptions& options) {
  if (D <= 0 || D % 2 != 0 || positions < 0)
    throw ShapeError(
        fmt::format("rotary_tables: head_dim must be even and positive and positions "
                    "not negative, got head_dim {} and positions {}",
                    D, positions));
  if (!(base > 0))
    throw ValueError(fmt::format("rotary_tables: base must be positive, got {}", base));
  std::vector<double> c(std::size_t(positions * D)), s(c.size());
  for (std::int64_t p = 0; p < positions; ++p)
    for (std::int64_t i = 0; i < D / 2; ++i) {
      const double angle = double(p) * std::pow(base, -2.0 * double(i) / double(D));
      for (std::int64_t half : {i, i + D / 2}) {
        c[std::size_t(p * D + half)] = std::cos(angle);
        s[std::size_t(p * D + half)] = std::sin(angle);
      }
    }
  const DType dt = options.dtype_or(DType::f32);
  auto table = [&](const std::vector<double>& v) {
    return tensor(v).reshape({positions, D}).to(dt).to(options.device);
  };
  return {table(c), table(s)};
}

Tensor apply_rotary(const Tensor& x, const RotaryTables& tables, std::int64_t offset) {
  check_defined("apply_rotary", "input", x);
  check_defined("apply_rotary", "tables.cos", tables.cos);
  check_defined("apply_rotary", "tables.sin", tables.sin);
  const std::int64_t positions = tables.cos.size(0);
  if (x.dim() < 2 || tables.cos.dim() != 2 || x.size(-1) != tables.cos.size(1) ||
      tables.sin.sizes() != tables.cos.sizes() || offset < 0 || offset + x.size(-2) > positions)
    throw ShapeError(fmt::format(
        "apply_rotary: x [..., L, D] = {} needs tables [P, D] with offset + L <= P, got tables "
        "{} and offset {}",
        shape_str(x.sizes()), shape_str(tables.cos.sizes()), offset));
  const std::int64_t L = x.size(-2);
  const Tensor c = tables.cos.narrow(0, offset, L).to(x.dtype());
  const Tensor s = tables.sin.narrow(0, offset, L).to(x.dtype());
  const std::vector<Tensor> halves = chunk(x, 2, -1);
  return x * c + cat({-halves[1], halves[0]}, -1) * s;
}

}  // namespace ferry::nn::functional
