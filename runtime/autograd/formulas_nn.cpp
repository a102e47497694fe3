// runtime/autograd/formulas_nn.cpp — backward of matmul, softmax, log_softmax,
// layer_norm and the indexing ops (formulas.hpp).
#include <fmt/format.h>

#include <limits>

#include "autograd/formulas.hpp"
#include "autograd/graph.hpp"
#include "dispatch.hpp"
#include "ferry/ops.hpp"
#include "memory_format_internal.hpp"

namespace ferry::autograd {
namespace {

// Note [Matmul gradient layout]
// For a 2-D operand stored transposed (a Linear layer's weight.t(): stride 1
// along its rows) the gradient is computed transposed as well, (Gᵀ·A)ᵀ rather
// than Aᵀ·G: the same GEMM, but its result lands in the operand's own memory
// order, so the transpose's backward hands the weight a contiguous gradient
// and no copy is made (PyTorch's mm_mat2_backward does the same).
bool stored_transposed(const Tensor& m) {
  return m.dim() == 2 && m.stride(0) == 1 && m.stride(1) != 1;
}

}  // namespace

void record_matmul(const Tensor& a, const Tensor& b, const Tensor& out) {
  if (!should_record({&a, &b})) return;
  record("matmulBackward", {a, b}, out,
         [a = Saved(a), b = Saved(b)](const Tensor& g, const Needs& n) -> std::vector<Tensor> {
           const Tensor av = a.get(), bv = b.get();
           const DType dt = g.dtype();
           // As the forward saw them: A [..., M, K], B [..., K, N], G [..., M, N].
           const Tensor A = (av.dim() == 1 ? av.unsqueeze(0) : av).to(dt);
           const Tensor B = (bv.dim() == 1 ? bv.unsqueeze(1) : bv).to(dt);
           const std::int64_t M = A.size(-2), K = A.size(-1), N = B.size(-1);
           Shape batch = broadcast_shapes(Shape(A.sizes().begin(), A.sizes().end() - 2),
                                          Shape(B.sizes().begin(), B.sizes().end() - 2));
           Shape gshape = batch;
           gshape.push_back(M);
           gshape.push_back(N);
           const Tensor G = g.reshape(gshape);
           std::vector<Tensor> r(2);
           if (n[0]) {
             Tensor gA = B.dim() == 2 && stored_transposed(A)
                             ? matmul(B, G.transpose(-1, -2)).transpose(-1, -2)
                             : matmul(G, B.transpose(-1, -2));
             r[0] = sum_to(gA, A.sizes()).reshape(av.sizes()).to(av.dtype());
           }
           if (n[1]) {
             Tensor gB;
             if (B.dim() == 2) {
               // B has no batch dims, so A is exactly batch + [M, K]: every batch
               // folds into one [rows, K]ᵀ·[rows, N] product.
               const Tensor A2 = A.reshape({-1, K}), G2 = G.reshape({-1, N});
               gB = stored_transposed(B) ? matmul(G2.t(), A2).t() : matmul(A2.t(), G2);
             } else {
               gB = sum_to(matmul(A.transpose(-1, -2), G), B.sizes());
             }
             r[1] = gB.reshape(bv.sizes()).to(bv.dtype());
           }
           return r;
         });
}

// softmax: dx = y (g - Σ g y); log_softmax: dx = g - exp(y) Σ g, sums along dim.
void record_softmax(std::string_view op, const Tensor& x, std::int64_t dim, const Tensor& y) {
  if (!should_record({&x})) return;
  record(fmt::format("{}Backward", op), {x}, y,
         [log = op == "log_softmax", y = Saved(y), dim](const Tensor& g,
                                                        const Needs&) -> std::vector<Tensor> {
           Tensor yv = y.get();
           const std::vector<std::int64_t> d = {yv.dim() == 0 ? 0 : dim};
           if (log) return {g - exp(yv) * sum(g, d, /*keepdim=*/true)};
           return {yv * (g - sum(g * yv, d, /*keepdim=*/true))};
         });
}

// With x̂ = (x - mean) · rstd over each row of N = prod(normalized_shape):
//   dweight = Σ_rows g x̂,  dbias = Σ_rows g,
//   dx = rstd · (ĝ - mean(ĝ) - x̂ · mean(ĝ x̂)),  ĝ = g · weight.
// 16-bit inputs are differentiated in f32 and rounded once at the end. A backward that builds a
// graph (Note [Higher-order gradients] in graph.hpp) takes the composition, with the statistics
// computed again from x, so that their dependence on x is in the graph.
void record_layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                       const Tensor& bias, const Tensor& mean_t, const Tensor& rstd_t, double eps,
                       const Tensor& y, bool fused_backward) {
  if (!should_record({&x, &weight, &bias})) return;
  record("layer_normBackward", {x, weight, bias}, y,
         [x = Saved(x), w = Saved(weight), mu = Saved(mean_t), rs = Saved(rstd_t), normalized_shape,
          eps, fused_backward](const Tensor& g, const Needs& n) -> std::vector<Tensor> {
           const bool graph = ApplyingNode::current() != nullptr;
           const Tensor xv = x.get(), wv = w.get();
           const std::int64_t cols = detail::shape_numel(normalized_shape);
           // The leading dims' product (not numel / cols, which an empty row would divide by 0).
           const std::int64_t rows = detail::shape_numel(Shape(
               xv.sizes().begin(), xv.sizes().end() - std::ptrdiff_t(normalized_shape.size())));
           std::vector<Tensor> r(3);
           if (fused_backward && !graph) {  // Note [layer_norm's backward on the CPU]
             const Tensor x2 = xv.contiguous().view({rows, cols});
             const Tensor g2 = g.to(xv.dtype()).contiguous().view({rows, cols});
             const Tensor mean_s = mu.get(), rstd_s = rs.get();
             const Tensor dx = detail::new_tensor({rows, cols}, xv.dtype(), detail::impl_of(xv));
             // No elements: nothing to run, and the parameters' gradients are sums of nothing.
             const bool empty = rows == 0 || cols == 0;
             const auto stat = [&] {
               return empty ? zeros({cols}, {.dtype = mean_s.dtype(), .device = xv.device()})
                            : detail::new_tensor({cols}, mean_s.dtype(), detail::impl_of(xv));
             };
             const Tensor dw = stat(), db = stat();
             const Attrs attrs{{"has_weight", wv.defined()}};
             std::vector<Tensor> in{g2, x2, mean_s, rstd_s};
             if (wv.defined()) in.push_back(wv.to(xv.dtype()).contiguous().view({cols}));
             if (!empty) detail::run_kernel(OpId::layer_norm_backward, in, {dx, dw, db}, attrs);
             if (n[0]) r[0] = dx.view(xv.sizes());
             if (n[1]) r[1] = dw.reshape(normalized_shape).to(wv.dtype());
             if (n[2]) r[2] = db.reshape(normalized_shape).to(g.dtype());
             return r;
           }
           const DType dt = compute_dtype(xv.dtype());
           const Tensor x2 = xv.reshape({rows, cols}).to(dt);
           const Tensor g2 = g.reshape({rows, cols}).to(dt);
           Tensor mean_r = mu.get().reshape({rows, 1}).to(dt),
                  rstd = rs.get().reshape({rows, 1}).to(dt);
           if (graph) {
             mean_r = mean(x2, {1}, /*keepdim=*/true);
             rstd = rsqrt(mean(pow(x2 - mean_r, 2.0), {1}, /*keepdim=*/true) + eps);
           }
           const Tensor xhat = (x2 - mean_r) * rstd;
           if (n[1]) r[1] = sum(g2 * xhat, {0}).reshape(normalized_shape).to(wv.dtype());
           if (n[2]) r[2] = sum(g2, {0}).reshape(normalized_shape).to(g.dtype());
           if (n[0]) {
             const Tensor gh = wv.defined() ? g2 * wv.reshape({cols}).to(dt) : g2;
             const Tensor c1 = mean(gh, {1}, /*keepdim=*/true);
             const Tensor c2 = mean(gh * xhat, {1}, /*keepdim=*/true);
             r[0] = ((gh - c1 - xhat * c2) * rstd).reshape(xv.sizes()).to(xv.dtype());
           }
           return r;
         });
}

// The input's gradient is the convolution's adjoint of g, the weight's the correlation of
// the input with g (and the bias's g summed), each one kernel of the device that ran the
// forward, through detail::ConvKernels, which also gives them their own derivatives (Note
// [Higher-order gradients] in graph.hpp).
void record_conv(OpId forward, const Tensor& x, const Tensor& w, const Tensor& b,
                 const Attrs& attrs, const Tensor& y) {
  if (!should_record({&x, &w, &b})) return;
  record("convolutionBackward", {x, w, b}, y,
         [x = Saved(x), w = Saved(w),
          kernels = detail::ConvKernels{forward, attrs, x.sizes(), w.sizes(), y.sizes()}](
             const Tensor& g, const Needs& n) -> std::vector<Tensor> {
           // x is in the kernel's layout (attribute channels_last), and so are g and the
           // input's gradient.
           std::vector<Tensor> r(3);
           if (n[0]) r[0] = kernels.input_grad(g, w.get());
           if (n[1] || n[2]) {
             auto [dw, db] = kernels.weight_grad(x.get(), g, n[2]);
             if (n[1]) r[1] = dw;
             if (n[2]) r[2] = db;
           }
           return r;
         });
}

namespace {

// batch_norm_backward's contract (docs/kernel-contract.md) as ops, for a backward that builds a
// graph (Note [Higher-order gradients] in graph.hpp): in training the batch's statistics
// computed again from x, so that their dependence on x is in the graph; in eval the running
// ones, constants.
std::vector<Tensor> batch_norm_backward_composed(const Tensor& g, const Tensor& x, const Tensor& w,
                                                 const Tensor& mean_c, const Tensor& var_c,
                                                 const Attrs& attrs, DType bias_dtype) {
  const DType dt = mean_c.dtype();
  std::vector<std::int64_t> dims{0};
  Shape per_channel(std::size_t(x.dim()), 1);
  per_channel[1] = x.size(1);
  for (std::int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  const Tensor xf = x.to(dt), gf = g.to(dt);
  Tensor mu = mean_c.reshape(per_channel), var = var_c.reshape(per_channel);
  const bool training = attrs.b("training");
  if (training) {
    mu = ferry::mean(xf, dims, /*keepdim=*/true);
    var = ferry::mean(pow(xf - mu, 2.0), dims, /*keepdim=*/true);
  }
  const Tensor rstd = rsqrt(var + attrs.f("eps"));
  const Tensor xhat = (xf - mu) * rstd;
  const Tensor gh = w.defined() ? gf * w.to(dt).reshape(per_channel) : gf;
  const Tensor dx =
      training
          ? (gh - ferry::mean(gh, dims, true) - xhat * ferry::mean(gh * xhat, dims, true)) * rstd
          : gh * rstd;
  return {dx.to(x.dtype()), w.defined() ? sum(gf * xhat, dims).to(w.dtype()) : Tensor(),
          sum(gf, dims).to(bias_dtype)};
}

}  // namespace

// The gradients of x (contiguous, as the forward's kernel read it), the weight and the bias
// from one pass of the batch_norm_backward kernel, which reads the forward's attributes; the
// parameters' gradients come in the statistics' dtype and take the parameters' own.
void record_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const Tensor& mean, const Tensor& var, const Attrs& attrs, const Tensor& y) {
  if (!should_record({&x, &weight, &bias})) return;
  record("batch_normBackward", {x, weight, bias}, y,
         [x = Saved(x), w = Saved(weight), b_dtype = bias.defined() ? bias.dtype() : x.dtype(),
          mean, var, attrs](const Tensor& g, const Needs& n) -> std::vector<Tensor> {
           // x is in the kernel's layout (attribute channels_last), and so are g and dx.
           const Tensor xv = x.get(), wv = w.get();
           if (ApplyingNode::current())
             return batch_norm_backward_composed(g, xv, wv, mean, var, attrs, b_dtype);
           const MemoryFormat format = activation_format(attrs, xv.dim());
           std::vector<Tensor> in{g.contiguous(format), xv, mean, var};
           if (wv.defined()) in.push_back(wv.to(xv.dtype()).contiguous());
           const Tensor dx =
               detail::new_tensor_in(xv.sizes(), xv.dtype(), detail::impl_of(xv), format);
           const Shape c{mean.size(0)};
           const Tensor dw = detail::new_tensor(c, mean.dtype(), detail::impl_of(xv));
           const Tensor db = detail::new_tensor(c, mean.dtype(), detail::impl_of(xv));
           detail::run_kernel(OpId::batch_norm_backward, in, {dx, dw, db}, attrs);
           std::vector<Tensor> r(3);
           if (n[0]) r[0] = dx;
           if (n[1]) r[1] = dw.to(wv.dtype());
           if (n[2]) r[2] = db.to(b_dtype);
           return r;
         });
}

namespace {

// A pool's or a resampling's backward kernel and its derivatives (Note [Higher-order
// gradients] in graph.hpp): the backward is linear in g; its adjoint is the forward kernel run
// on the second gradient for the average pools and interpolate (linear in x too, the same
// windows or tables), and for max pooling the second gradient read at the maxima's indices.
struct WindowKernels {
  OpId forward, backward;
  Attrs attrs;
  Shape x_sizes, y_sizes;
  std::vector<Saved> fixed;  // the max pool's indices, or interpolate's tables

  MemoryFormat format() const { return activation_format(attrs, std::int64_t(x_sizes.size())); }
  std::vector<Tensor> operands(const Tensor& t) const {
    std::vector<Tensor> in{t.contiguous(format())};
    for (const Saved& f : fixed) in.push_back(f.get());
    return in;
  }
  Tensor dx(const Tensor& g) const {
    return detail::linear_kernel(backward, operands(g), x_sizes, format(), attrs,
                                 [self = *this](const Tensor& gg) { return self.y(gg); });
  }
  Tensor y(const Tensor& gx) const {
    if (backward == OpId::max_pool_backward) {  // each output's element of its window
      const Tensor idx = fixed.at(0).get();
      const Shape planes{x_sizes[0], x_sizes[1], -1};
      return gather(gx.reshape(planes), 2, idx.reshape(planes)).reshape(y_sizes);
    }
    return detail::linear_kernel(forward, operands(gx), y_sizes, format(), attrs,
                                 [self = *this](const Tensor& gy) { return self.dx(gy); });
  }
};

}  // namespace

void record_pool(OpId forward, const Tensor& x, const Tensor& indices, const Attrs& attrs,
                 const Tensor& y) {
  if (!should_record({&x})) return;
  const bool max = indices.defined();
  WindowKernels kernels{forward,   max ? OpId::max_pool_backward : OpId::avg_pool_backward,
                        attrs,     x.sizes(),
                        y.sizes(), {}};
  if (max) kernels.fixed.push_back(indices);
  record(max ? "max_poolBackward" : "avg_poolBackward", {x}, y,
         [kernels](const Tensor& g, const Needs&) -> std::vector<Tensor> {
           // In the forward's layout (attribute channels_last): the indices are, and g and dx
           // are made so.
           return {kernels.dx(g)};
         });
}

void record_resample(const Tensor& x, const std::vector<Tensor>& tables, const Attrs& attrs,
                     const Tensor& y) {
  if (!should_record({&x})) return;
  record("interpolateBackward", {x}, y,
         [kernels = WindowKernels{OpId::interpolate,
                                  OpId::interpolate_backward,
                                  attrs,
                                  x.sizes(),
                                  y.sizes(),
                                  {tables.begin(), tables.end()}}](
             const Tensor& g, const Needs&) -> std::vector<Tensor> {
           return {kernels.dx(g)};  // in the forward's layout (attribute channels_last)
         });
}

void record_grid_sample(const Tensor& x, const Tensor& grid, const Attrs& attrs, const Tensor& y) {
  if (!should_record({&x, &grid})) return;
  record("grid_sampleBackward", {x, grid}, y,
         [xs = Saved(x), gs = Saved(grid), attrs](const Tensor& g,
                                                  const Needs& needs) -> std::vector<Tensor> {
           const Tensor xv = xs.get(), gv = gs.get();
           Attrs a = attrs;
           a.set("input_grad", needs[0]).set("grid_grad", needs[1]);
           DeviceImpl& impl = detail::impl_of(xv);
           // A gradient not wanted gets an empty output: no memory for it.
           const auto output = [&](const Tensor& like, bool wanted) {
             return detail::new_tensor(wanted ? like.sizes() : Shape{0}, like.dtype(), impl);
           };
           std::vector<Tensor> r{output(xv, needs[0]), output(gv, needs[1])};
           detail::run_kernel(OpId::grid_sample_backward, {g.contiguous(), xv, gv}, r, a);
           return {needs[0] ? r[0] : Tensor(), needs[1] ? r[1] : Tensor()};
         });
}

namespace {

// The attention kernel's backward as ops (the kernel's form of the call: Note [Scaled
// dot-product attention] in runtime/nn/attention.cpp), for a backward that builds a graph
// (Note [Higher-order gradients] in graph.hpp): the probabilities computed again from q and k,
// then dv = pᵀ g, ds = p (g vᵀ - Σ_row p g vᵀ), dq = ds k · scale, dk = dsᵀ q · scale, the key
// and value heads' gradients summed over the query heads that share them.
std::vector<Tensor> attention_backward_composed(const Tensor& g, const Tensor& q, const Tensor& k,
                                                const Tensor& v, const Tensor& mask,
                                                const Attrs& attrs) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double scale = attrs.f("scale");
  const std::int64_t B = q.size(0), Hq = q.size(1), Hk = k.size(1), group = Hq / Hk;
  const Tensor kk = group > 1 ? repeat_interleave(k, group, 1) : k;
  const Tensor vv = group > 1 ? repeat_interleave(v, group, 1) : v;
  Tensor s = matmul(q, kk.transpose(-2, -1)) * scale;
  if (attrs.b("is_causal"))
    s = where(tril(full({q.size(2), k.size(2)}, true, {DType::boolean, q.device()})), s, -kInf);
  Tensor all_masked;
  if (mask.defined()) {
    s = s + mask;
    all_masked = eq(amax(s, {-1}, true), -kInf);
    s = where(all_masked, 0.0, s);
  }
  Tensor p = softmax(s, -1);
  if (all_masked.defined()) p = where(all_masked, 0.0, p);
  const Tensor dp = matmul(g, vv.transpose(-2, -1));
  const Tensor ds = p * (dp - sum(dp * p, {-1}, /*keepdim=*/true));
  const auto per_key_head = [&](const Tensor& t) {
    if (group == 1) return t;
    Shape grouped{B, Hk, group};
    grouped.insert(grouped.end(), t.sizes().begin() + 2, t.sizes().end());
    return sum(t.reshape(grouped), {2});
  };
  return {matmul(ds, kk) * scale, per_key_head(matmul(ds.transpose(-2, -1), q) * scale),
          per_key_head(matmul(p.transpose(-2, -1), g))};
}

}  // namespace

void record_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                      const Attrs& attrs, const Tensor& out, const Tensor& lse) {
  if (!should_record({&q, &k, &v})) return;
  record("scaled_dot_product_attentionBackward", {q, k, v}, out,
         [q = Saved(q), k = Saved(k), v = Saved(v), o = Saved(out), mask, lse, attrs](
             const Tensor& g, const Needs&) -> std::vector<Tensor> {
           const Tensor qv = q.get(), kv = k.get(), vv = v.get();
           if (ApplyingNode::current())
             return attention_backward_composed(g, qv, kv, vv, mask, attrs);
           std::vector<Tensor> in{g.contiguous(), qv, kv, vv, o.get(), lse};
           if (mask.defined()) in.push_back(mask);
           DeviceImpl& impl = detail::impl_of(qv);
           std::vector<Tensor> r{detail::new_tensor(qv.sizes(), qv.dtype(), impl),
                                 detail::new_tensor(kv.sizes(), kv.dtype(), impl),
                                 detail::new_tensor(vv.sizes(), vv.dtype(), impl)};
           detail::run_kernel(OpId::scaled_dot_product_attention_backward, in, r, attrs);
           return r;
         });
}

void record_embedding(const Tensor& weight, const Tensor& indices, const Tensor& out,
                      std::optional<std::int64_t> padding_idx, bool scale_grad_by_freq) {
  if (!should_record({&weight})) return;
  record("embeddingBackward", {weight}, out,
         [shape = weight.sizes(), idx = Saved(indices), padding_idx, scale_grad_by_freq](
             const Tensor& g, const Needs&) -> std::vector<Tensor> {
           Tensor flat = idx.get().reshape({-1}).to(DType::i64).contiguous();
           Tensor rows = g.reshape({-1, shape[1]});
           // The padding row's lookups add nothing (PyTorch's embedding_backward skips them).
           if (padding_idx)
             rows = where(eq(flat, Scalar(*padding_idx)).unsqueeze(1), Scalar(0), rows);
           if (scale_grad_by_freq && flat.numel() > 0) {
             // Each lookup's share is 1 / (its index's count in the batch): a histogram by
             // index_add, read back per lookup.
             const Tensor count = detail::index_add(
                 {shape[0]}, 0, flat,
                 ones({flat.numel()}, {.dtype = g.dtype(), .device = g.device()}));
             rows = rows / index_select(count, 0, flat).unsqueeze(1);
           }
           return {detail::index_add(shape, 0, flat, rows)};
         });
}

void record_index_select(const Tensor& x, std::int64_t dim, const Tensor& index,
                         const Tensor& out) {
  if (!should_record({&x})) return;
  record("index_selectBackward", {x}, out,
         [shape = x.sizes(), dim, idx = Saved(index)](const Tensor& g,
                                                      const Needs&) -> std::vector<Tensor> {
           // A 0-d input was indexed as [1] (ops_index.cpp).
           const Shape as = shape.empty() ? Shape{1} : shape;
           Tensor flat = idx.get().reshape({-1}).to(DType::i64).contiguous();
           const std::int64_t d = detail::wrap_dim(dim, std::int64_t(as.size()), "index_select");
           return {detail::index_add(as, d, flat, g).reshape(shape)};
         });
}

void record_gather(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& out) {
  if (!should_record({&x})) return;
  record("gatherBackward", {x}, out,
         [shape = x.sizes(), dim, idx = Saved(index)](const Tensor& g,
                                                      const Needs&) -> std::vector<Tensor> {
           // A 0-d input and index were gathered as [1] (ops_index.cpp).
           const Shape as = shape.empty() ? Shape{1} : shape;
           Tensor ix = idx.get().to(DType::i64);
           if (shape.empty()) ix = ix.reshape({1});
           const std::int64_t d = detail::wrap_dim(dim, std::int64_t(as.size()), "gather");
           return {detail::scatter_add(as, d, ix, g.reshape(ix.sizes())).reshape(shape)};
         });
}

void record_cat(const std::vector<Tensor>& tensors, std::int64_t dim, const Tensor& out) {
  if (!should_record(tensors)) return;
  // Where each input lies along dim in the output. cat skips 1-D empty inputs
  // whatever the other shapes; their gradient is empty too.
  struct Part {
    std::int64_t offset, length;
    Shape shape;
    DType dtype;
  };
  std::vector<Part> parts;
  const bool skipped_all = out.dim() == 1 && out.size(0) == 0;
  const std::int64_t d = skipped_all ? 0 : detail::wrap_dim(dim, out.dim(), "cat");
  std::int64_t offset = 0;
  for (const Tensor& t : tensors) {
    const bool skipped = t.dim() == 1 && t.size(0) == 0;
    const std::int64_t len = skipped ? 0 : t.size(d);
    parts.push_back({skipped ? -1 : offset, len, t.sizes(), t.dtype()});
    offset += len;
  }
  record("catBackward", tensors, out,
         [parts, d](const Tensor& g, const Needs& n) -> std::vector<Tensor> {
           std::vector<Tensor> r(parts.size());
           for (std::size_t i = 0; i < parts.size(); ++i) {
             const Part& p = parts[i];
             if (!n[i]) continue;
             r[i] = p.offset < 0 ? zeros(p.shape, {.dtype = p.dtype, .device = g.device()})
                                 : g.narrow(d, p.offset, p.length).to(p.dtype);
           }
           return r;
         });
}

void record_stack(const std::vector<Tensor>& tensors, std::int64_t dim, const Tensor& out) {
  if (!should_record(tensors)) return;
  std::vector<DType> dtypes;
  for (const Tensor& t : tensors) dtypes.push_back(t.dtype());
  const std::int64_t d = detail::wrap_dim(dim, out.dim(), "stack");
  record("stackBackward", tensors, out,
         [dtypes, d](const Tensor& g, const Needs& n) -> std::vector<Tensor> {
           std::vector<Tensor> r(dtypes.size());
           for (std::size_t i = 0; i < dtypes.size(); ++i)
             if (n[i]) r[i] = g.select(d, std::int64_t(i)).to(dtypes[i]);
           return r;
         });
}

// PyTorch's binary_cross_entropy_backward, not the composition's chain rule: through
// log(1 - x) clamped at -100 that gives 0 x (-1 / (1 - x)) = NaN where x is 1 (and likewise
// at 0), where PyTorch's (x - t) / max(x (1 - x), 1e-12) is finite: 0 where the target agrees,
// about 1e12 where it does not. 16-bit inputs compute in f32 and round once, as PyTorch's CUDA
// kernel does (1e-12 is zero in f16). The target's gradient is PyTorch's -logit(x), unclamped
// (infinite where x is 0 or 1); the weight's the unweighted loss.
void record_binary_cross_entropy(const Tensor& x, const Tensor& target, const Tensor& weight,
                                 const Tensor& loss) {
  if (!should_record({&x, &target, &weight})) return;
  record("binary_cross_entropyBackward", {x, target, weight}, loss,
         [xs = Saved(x), ts = Saved(target), ws = Saved(weight)](
             const Tensor& g, const Needs& needs) -> std::vector<Tensor> {
           const Tensor x = xs.get(), t = ts.get(), w = ws.get();
           const DType dt = x.dtype();
           const bool narrow = dt == DType::f16 || dt == DType::bf16;
           const Tensor xw = narrow ? x.to(DType::f32) : x, tw = narrow ? t.to(DType::f32) : t;
           const Tensor gw = w.defined() ? g * w : g;
           std::vector<Tensor> r(3);
           if (needs[0]) {
             // PyTorch's EPSILON is the float 1e-12 (9.9999999600e-13), in f64 too.
             const Tensor d = (xw - tw) / clamp_min(xw * (1 - xw), double(1e-12f));
             r[0] = sum_to(gw * d.to(dt), x.sizes());
           }
           if (needs[1]) r[1] = sum_to(gw * neg(log(xw / (1 - xw))).to(dt), t.sizes());
           if (needs[2]) {
             const Tensor unweighted =
                 neg(tw * clamp_min(log(xw), -100) + (1 - tw) * clamp_min(log1p(neg(xw)), -100));
             r[2] = sum_to(g * unweighted.to(dt), w.sizes());
           }
           return r;
         });
}

}  // namespace ferry::autograd
