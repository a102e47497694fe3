// runtime/nn/embedding.cpp — F.embedding, F.embedding_bag, nn.Embedding and nn.EmbeddingBag
// (ferry/nn/functional.hpp, ferry/nn/layers.hpp), composed of ops. A lookup is
// ferry::embedding (max_norm first renormalises the named rows with embedding_renorm_); a
// bag's entries find their bag from the offsets by searchsorted, and the bags are index_add
// (sum, mean) or scatter_reduce amax (max) over the rows, so autograd differentiates them on
// every device.
#include <fmt/format.h>

#include "ferry/error.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/nn/init.hpp"
#include "ferry/nn/layers.hpp"
#include "ferry/ops.hpp"
#include "nn_internal.hpp"
#include "ops_internal.hpp"

namespace ferry::nn {
namespace functional {
namespace {

// Each entry's bag, [T] i64, and the number of bags, from the offsets (PyTorch's checks).
std::pair<Tensor, std::int64_t> bags_of(const Tensor& input, const Tensor& offsets,
                                        bool include_last_offset) {
  const std::int64_t T = input.numel();
  const Device dev = input.device();
  if (input.dim() == 2) {
    if (offsets.defined())
      throw ValueError(fmt::format(
          "embedding_bag: with a 2-D input {} (fixed-size bags) offsets must be undefined",
          shape_str(input.sizes())));
    const std::int64_t N = input.size(1);
    const Tensor pos = arange(double(T), {.dtype = DType::i64, .device = dev});
    return {N > 0 ? floor_divide(pos, N) : pos, input.size(0)};
  }
  if (input.dim() != 1)
    throw ShapeError(
        fmt::format("embedding_bag: the input must be 1-D (with offsets) or 2-D, "
                    "got {}",
                    shape_str(input.sizes())));
  if (!offsets.defined() || offsets.dim() != 1)
    throw ShapeError("embedding_bag: a 1-D input needs 1-D offsets, the start of each bag");
  const Tensor off = ferry::detail::as_index("embedding_bag", offsets);
  const std::int64_t bags = offsets.numel() - (include_last_offset ? 1 : 0);
  if (bags < 0) throw ShapeError("embedding_bag: include_last_offset needs at least one offset");
  if (off.numel() > 0) {
    const std::int64_t n = off.numel();
    const Tensor steps = n > 1 ? off.narrow(0, 1, n - 1) - off.narrow(0, 0, n - 1)
                               : zeros({1}, {.dtype = DType::i64, .device = off.device()});
    // One read back: the first offset, the least step, the last offset.
    const auto ends = stack({off.select(0, 0), min(steps), max(off)}).to_vector<std::int64_t>();
    if (ends[0] != 0)
      throw ValueError(fmt::format(
          "embedding_bag: offsets[0] must be 0 (the first bag starts the input), got {}", ends[0]));
    if (ends[1] < 0) throw ValueError("embedding_bag: offsets must not decrease");
    if (ends[2] > T)
      throw ValueError(
          fmt::format("embedding_bag: offset {} is past the input's {} entries", ends[2], T));
  }
  // Entry j is in the last bag whose offset is <= j; past include_last_offset's end, none.
  const Tensor pos = arange(double(T), {.dtype = DType::i64, .device = dev});
  return {searchsorted(off, pos, /*right=*/true) - 1, bags};
}

}  // namespace

Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingOptions& options) {
  detail::check_defined("embedding", "input", input);
  detail::check_defined("embedding", "weight", weight);
  if (options.max_norm) {
    Tensor w = weight;  // the same storage: the renormalisation is in place, as PyTorch's
    embedding_renorm_(w, input, *options.max_norm, options.norm_type);
  }
  return ferry::embedding(weight, input, options.padding_idx, options.scale_grad_by_freq);
}

Tensor embedding_bag(const Tensor& input, const Tensor& weight, const Tensor& offsets,
                     const EmbeddingBagOptions& options, const Tensor& per_sample_weights) {
  detail::check_defined("embedding_bag", "input", input);
  detail::check_defined("embedding_bag", "weight", weight);
  ferry::detail::as_index("embedding_bag", input);  // DTypeError unless i64 or i32
  if (weight.dim() != 2)
    throw ShapeError(fmt::format("embedding_bag: weight must be 2-D [num_embeddings, dim], got {}",
                                 shape_str(weight.sizes())));
  const std::string& mode = options.mode;
  if (mode != "sum" && mode != "mean" && mode != "max")
    throw ValueError(
        fmt::format("embedding_bag: mode must be \"sum\", \"mean\" or \"max\", got \"{}\"", mode));
  if (mode == "max" && options.scale_grad_by_freq)
    throw ValueError("embedding_bag: mode \"max\" does not support scale_grad_by_freq");
  if (per_sample_weights.defined()) {
    if (mode != "sum")
      throw ValueError(fmt::format(
          "embedding_bag: per_sample_weights are only supported for mode \"sum\", got \"{}\"",
          mode));
    if (per_sample_weights.sizes() != input.sizes())
      throw ShapeError(
          fmt::format("embedding_bag: per_sample_weights must have the input's shape {}, got {}",
                      shape_str(input.sizes()), shape_str(per_sample_weights.sizes())));
  }
  const auto [bag, bags] = bags_of(input, offsets, options.include_last_offset);
  const std::int64_t dim = weight.size(1);
  const Tensor idx = input.reshape({-1});
  Tensor rows = embedding(idx, weight,
                          {.padding_idx = options.padding_idx,
                           .max_norm = options.max_norm,
                           .norm_type = options.norm_type,
                           .scale_grad_by_freq = options.scale_grad_by_freq});  // [T, dim]
  // Entries outside every bag (past include_last_offset's end) and padding entries count for
  // nothing: they go to one extra bag, dropped at the end, so they reach no value (a bag of
  // only padding is empty: zeros, in every mode, as PyTorch's), no mean's count and no gradient.
  Tensor counted = logical_and(ge(bag, 0), lt(bag, bags));
  if (options.padding_idx)
    counted = logical_and(
        counted,
        ne(idx, ferry::detail::padding_row("embedding_bag", weight.size(0), *options.padding_idx)));
  const Tensor target = where(counted, bag, Scalar(bags));
  const TensorOptions like{.dtype = weight.dtype(), .device = weight.device()};
  const auto real_bags = [&](const Tensor& t) { return t.narrow(0, 0, bags); };
  if (mode == "max")
    return real_bags(scatter_reduce(zeros({bags + 1, dim}, like), 0,
                                    target.unsqueeze(1).expand({idx.numel(), dim}), rows, "amax",
                                    /*include_self=*/false));
  if (per_sample_weights.defined())
    rows = rows * per_sample_weights.reshape({-1, 1}).to(weight.dtype());
  const Tensor sums = real_bags(index_add(zeros({bags + 1, dim}, like), 0, target, rows));
  if (mode == "sum") return sums;
  const Tensor counts =
      real_bags(index_add(zeros({bags + 1}, like), 0, target, ones({idx.numel()}, like)));
  return sums / clamp_min(counts, 1).unsqueeze(1);
}

}  // namespace functional

// ---------------------------------------------------------------- Embedding

namespace {

// The module's weight, N(0, 1) with the padding row (wrapped into range) zeroed.
Tensor init_table(Module& m, std::string_view who, std::int64_t num, std::int64_t dim,
                  std::optional<std::int64_t>& padding_idx, const TensorOptions& options) {
  detail::check_size(who, "num_embeddings", num);
  detail::check_size(who, "embedding_dim", dim);
  if (padding_idx) padding_idx = ferry::detail::padding_row(who, num, *padding_idx);
  Tensor weight =
      m.register_parameter("weight", empty({num, dim}, detail::param_options(who, options)));
  init::normal_(weight);
  if (padding_idx) {
    NoGradGuard no_grad;
    weight.select(0, *padding_idx).zero_();
  }
  return weight;
}

// The renormalisation and gradient options in extra_repr, where set, in PyTorch's order.
std::string options_repr(std::optional<double> max_norm, double norm_type,
                         bool scale_grad_by_freq) {
  std::string s;
  if (max_norm) s += fmt::format(", max_norm={}", *max_norm);
  if (norm_type != 2) s += fmt::format(", norm_type={}", norm_type);
  if (scale_grad_by_freq) s += ", scale_grad_by_freq=true";
  return s;
}

}  // namespace

Embedding::Embedding(std::int64_t num, std::int64_t dim, const TensorOptions& options,
                     std::optional<std::int64_t> padding)
    : Embedding(
          num, dim,
          [&] {
            functional::EmbeddingOptions o;
            o.padding_idx = padding;
            return o;
          }(),
          options) {}

Embedding::Embedding(std::int64_t num, std::int64_t dim, functional::EmbeddingOptions o,
                     const TensorOptions& tensor_options)
    : num_embeddings(num),
      embedding_dim(dim),
      padding_idx(o.padding_idx),
      max_norm(o.max_norm),
      norm_type(o.norm_type),
      scale_grad_by_freq(o.scale_grad_by_freq) {
  weight = init_table(*this, "Embedding", num, dim, padding_idx, tensor_options);
}

Tensor Embedding::forward(const Tensor& indices) {
  if (!indices.defined()) throw Error("Embedding.forward: the indices are undefined");
  if (indices.dtype() != DType::i64 && indices.dtype() != DType::i32)
    throw DTypeError(fmt::format(
        "Embedding({}, {}): the indices must be i64 or i32, got {} "
        "(shape {})",
        num_embeddings, embedding_dim, dtype_name(indices.dtype()), shape_str(indices.sizes())));
  return functional::embedding(indices, weight,
                               {.padding_idx = padding_idx,
                                .max_norm = max_norm,
                                .norm_type = norm_type,
                                .scale_grad_by_freq = scale_grad_by_freq});
}

std::string Embedding::extra_repr() const {
  std::string s = fmt::format("{}, {}", num_embeddings, embedding_dim);
  if (padding_idx) s += fmt::format(", padding_idx={}", *padding_idx);
  return s + options_repr(max_norm, norm_type, scale_grad_by_freq);
}

// ---------------------------------------------------------------- EmbeddingBag

EmbeddingBag::EmbeddingBag(std::int64_t num, std::int64_t dim, functional::EmbeddingBagOptions o,
                           const TensorOptions& tensor_options)
    : num_embeddings(num), embedding_dim(dim), options(std::move(o)) {
  weight = init_table(*this, "EmbeddingBag", num, dim, options.padding_idx, tensor_options);
}

Tensor EmbeddingBag::forward(const Tensor& input, const Tensor& offsets,
                             const Tensor& per_sample_weights) {
  return functional::embedding_bag(input, weight, offsets, options, per_sample_weights);
}

std::string EmbeddingBag::extra_repr() const {
  std::string s = fmt::format("{}, {}", num_embeddings, embedding_dim) +
                  options_repr(options.max_norm, options.norm_type, options.scale_grad_by_freq) +
                  fmt::format(", mode='{}'", options.mode);
  if (options.padding_idx) s += fmt::format(", padding_idx={}", *options.padding_idx);
  return s;
}

}  // namespace ferry::nn
