// tests/conformance/cases_grad.cpp — the gradient mode: every differentiable
// op's backward on the device under test, held to the CPU's.
//
// A case runs the op on leaves made from its floating inputs, backpropagates a
// fixed upstream gradient (the same numbers on every device), and returns all
// the leaves' gradients flattened into one tensor, which the runner compares
// with the CPU's like any op result. So the backward kernels (activation
// gradients, index_add, scatter_add) and every composite formula run on the
// device, under the output guards, through the public API only.
#include "catalog.hpp"

namespace ferry::conformance {
namespace {

using Fn = std::function<Tensor(const Inputs&)>;

// The gradients of fn at `in` for a fixed upstream gradient r in [-1, 1).
Tensor gradients(const Fn& fn, const Inputs& in) {
  Inputs leaves;
  for (const Tensor& t : in)
    leaves.push_back(t.defined() && is_floating(t.dtype()) ? t.detach().requires_grad_() : t);
  Tensor y = fn(leaves);
  // Fixed values in [-1, 1) made on the host, not with the process's one
  // generator: --threads runs this on several threads at once.
  std::vector<float> r(static_cast<std::size_t>(y.numel()));
  std::uint32_t state = 97;
  for (float& x : r) {
    state = state * 1664525u + 1013904223u;
    x = float(state >> 8) / float(1 << 23) - 1.0f;
  }
  y.backward(tensor(r).reshape(y.sizes()).to(y.dtype()).to(y.device()));
  std::vector<Tensor> parts;
  for (const Tensor& l : leaves) {
    if (!l.defined() || !l.requires_grad()) continue;
    parts.push_back(l.grad().defined()
                        ? l.grad().reshape({-1})
                        : zeros({l.numel()}, {.dtype = l.dtype(), .device = l.device()}));
  }
  return cat(parts);
}

struct GradShape {
  std::vector<Shape> shapes;
  std::string cls;
  std::function<Inputs(const Inputs&)> view;
  std::string view_label;
};

// Adds one case per floating dtype. lo/hi bound the floating inputs (integer
// inputs such as indices come from `extra`, appended after them).
void add(std::vector<Case>& out, const std::string& op, const GradShape& s, double nmse, Fn fn,
         double lo = -3, double hi = 3, std::function<Inputs()> extra = {}) {
  for (DType dt : kFloat) {
    auto make = [shapes = s.shapes, dt, lo, hi, extra] {
      Inputs in = inputs_of({shapes, lo, hi}, dt)();
      if (extra)
        for (Tensor& t : extra()) in.push_back(t);
      return in;
    };
    out.push_back({op + ".grad", dt, shapes_label(s.shapes) + s.view_label, s.cls,
                   threshold(dt, nmse), make, s.view,
                   [fn](const Inputs& in) { return gradients(fn, in); }});
  }
}

Inputs t_first(const Inputs& in) {
  Inputs v = in;
  v[0] = v[0].t();
  return v;
}

void add_elementwise(std::vector<Case>& out) {
  const std::vector<GradShape> unary = {
      {{{7, 13}}, "odd", {}, ""},
      {{{1023}}, "odd", {}, ""},
      {{{13, 7}}, "non-contiguous", t_first, ".t()"},
  };
  // Every differentiable unary and binary row of the op table, on its row's
  // input range; where the op's domain starts at 0 (log, sqrt, div, pow),
  // the gradient cases stay a quarter away from it.
  auto grad_range = [](const OpInfo& op) {
    return std::pair{op.test_lo >= 0 ? std::max(op.test_lo, 0.25) : op.test_lo, op.test_hi};
  };
  for (const OpInfo& op : op_table()) {
    if (op.kind != OpKind::unary || (op.grad != OpGrad::formula && op.grad != OpGrad::parts))
      continue;
    const auto [lo, hi] = grad_range(op);
    for (const GradShape& s : unary)
      add(
          out, std::string(op.name), s, 1e-10,
          [id = op.id](const Inputs& in) { return unary_op(id, in[0]); }, lo, hi);
  }

  const std::vector<GradShape> binary = {
      {{{7, 13}, {7, 13}}, "odd", {}, ""},
      {{{7, 1}, {1, 13}}, "broadcast", {}, ""},
      {{{2, 3, 5}, {5}}, "broadcast", {}, ""},
      {{{}, {7, 13}}, "scalar", {}, ""},
      {{{13, 7}, {7, 13}}, "non-contiguous", t_first, " (first .t())"},
  };
  for (const OpInfo& op : op_table()) {
    if (op.kind != OpKind::binary || op.grad != OpGrad::formula) continue;
    const auto [lo, hi] = grad_range(op);
    for (const GradShape& s : binary)
      add(
          out, std::string(op.name), s, 1e-10,
          [id = op.id](const Inputs& in) { return binary_op(id, in[0], in[1]); }, lo, hi);
  }
  add(out, "clamp", {{{7, 13}}, "odd", {}, " min=-1 max=1.5"}, 1e-10,
      [](const Inputs& in) { return ferry::clamp(in[0], -1, 1.5); });
  add(out, "clamp", {{{7, 13}, {13}, {7, 1}}, "broadcast", {}, " tensor bounds"}, 1e-10,
      [](const Inputs& in) { return ferry::clamp(in[0], in[1] - 1.0, in[2] + 1.0); });
  // The ternary composites, broadcasting all three.
  const GradShape ternary = {{{7, 13}, {13}, {7, 1}}, "broadcast", {}, ""};
  add(out, "lerp", ternary, 1e-10,
      [](const Inputs& in) { return ferry::lerp(in[0], in[1], in[2] * 0.5 + 0.5); });
  add(out, "lerp", {{{7, 13}, {7, 13}}, "odd", {}, " weight=0.75"}, 1e-10,
      [](const Inputs& in) { return ferry::lerp(in[0], in[1], 0.75); });
  add(out, "addcmul", ternary, 1e-10,
      [](const Inputs& in) { return ferry::addcmul(in[0], in[1], in[2], 0.5); });
  add(
      out, "addcdiv", ternary, 1e-10,
      [](const Inputs& in) { return ferry::addcdiv(in[0], in[1], in[2], -2); }, 0.5, 3);
  add(out, "where", {{{7, 13}, {13}}, "broadcast", {}, ""}, 1e-10,
      [](const Inputs& in) { return ferry::where(gt(in[0], 0), in[0], in[1]); });
  add(out, "scalar ops", {{{7, 13}}, "odd", {}, ""}, 1e-10, [](const Inputs& in) {
    return pow(in[0], 2.0) * 3.0 - 1.5 / (in[0] * in[0] + 1.0) + maximum(in[0], 0.5);
  });
  add(out, "cast", {{{7, 13}}, "odd", {}, ""}, 1e-10,
      [](const Inputs& in) { return in[0].to(DType::f32) * in[0].to(DType::f32); });
}

void add_reductions(std::vector<Case>& out) {
  struct Reduce {
    GradShape shape;
    std::vector<std::int64_t> dims;
  };
  const std::vector<Reduce> shapes = {
      {GradShape{{{7, 13}}, "odd", {}, ""}, {}},
      {GradShape{{{7, 13}}, "odd", {}, ""}, {1}},
      {GradShape{{{3, 5, 7}}, "odd", {}, ""}, {0, 2}},
      {GradShape{{{13, 7}}, "non-contiguous", t_first, ".t()"}, {0}},
  };
  for (const Reduce& r : shapes) {
    const std::vector<std::int64_t> dims = r.dims;
    GradShape s = r.shape;
    s.view_label += " dims=" + shape_str(dims);
    add(out, "sum", s, 1e-12, [dims](const Inputs& in) { return ferry::sum(in[0], dims); });
    add(out, "mean", s, 1e-12, [dims](const Inputs& in) { return ferry::mean(in[0], dims, true); });
    add(out, "max", s, 1e-12, [dims](const Inputs& in) { return ferry::max(in[0], dims); });
    add(out, "min", s, 1e-12, [dims](const Inputs& in) { return ferry::min(in[0], dims, true); });
    add(out, "var", s, 1e-9, [dims](const Inputs& in) { return ferry::var(in[0], dims); });
    add(out, "logsumexp", s, 1e-10,
        [dims](const Inputs& in) { return ferry::logsumexp(in[0], dims); });
    add(out, "std", s, 1e-9, [dims](const Inputs& in) { return ferry::std(in[0], dims); });
    add(out, "var_mean", s, 1e-9, [dims](const Inputs& in) {
      auto [v, m] = ferry::var_mean(in[0], dims);
      return v * 2.0 + m;
    });
    add(out, "std_mean", s, 1e-9, [dims](const Inputs& in) {
      auto [sd, m] = ferry::std_mean(in[0], dims, 0, true);
      return sd - m;
    });
    for (double p : {2.0, 1.0, 3.0, double(INFINITY)})
      add(out, "norm", s, 1e-9,
          [dims, p](const Inputs& in) { return ferry::norm(in[0], p, dims); });
  }
  for (std::int64_t dim : {0, -1}) {
    GradShape s{{{7, 13}}, "odd", {}, fmt::format(" dim={}", dim)};
    add(out, "softmax", s, 1e-9, [dim](const Inputs& in) { return ferry::softmax(in[0], dim); });
    add(out, "log_softmax", s, 1e-9,
        [dim](const Inputs& in) { return ferry::log_softmax(in[0], dim); });
  }
}

void add_nn(std::vector<Case>& out) {
  const std::vector<GradShape> mm = {
      {{{7, 13}, {13, 5}}, "odd", {}, ""},
      {{{13}, {13, 5}}, "odd", {}, ""},
      {{{2, 1, 7, 13}, {3, 13, 5}}, "broadcast", {}, ""},
      {{{3, 7, 13}, {5, 13}},
       "batched",
       [](const Inputs& in) {
         return Inputs{in[0], in[1].t()};
       },
       " (x · w.t())"},
  };
  for (const GradShape& s : mm)
    add(
        out, "matmul", s, 1e-10, [](const Inputs& in) { return ferry::matmul(in[0], in[1]); }, -2,
        2);
  // The CPU's layer_norm_backward kernel is held to the composition (Note [layer_norm's
  // backward on the CPU]): the reference runs under debug::CompositesOnly.
  const std::vector<std::pair<GradShape, Fn>> layer_norms = {
      {{{{7, 13}, {13}, {13}}, "odd", {}, " affine"},
       [](const Inputs& in) { return ferry::layer_norm(in[0], {13}, in[1], in[2]); }},
      {{{{3, 5, 7}}, "odd", {}, " normalized [5, 7]"},
       [](const Inputs& in) {
         return ferry::layer_norm(in[0], {5, 7});
       }},
      {{{{64, 1031}, {1031}}, "odd", {}, " weight only"},
       [](const Inputs& in) { return ferry::layer_norm(in[0], {1031}, in[1]); }},
  };
  for (const auto& [shape, fn] : layer_norms) {
    const std::size_t first = out.size();
    add(out, "layer_norm", shape, 1e-9, fn);
    for (std::size_t i = first; i < out.size(); ++i)
      out[i].reference = [fn](const Inputs& in) {
        debug::CompositesOnly composition;
        return gradients(fn, in);
      };
  }

  // Indices repeat, so the accumulation order matters (docs/kernel-contract.md).
  auto index = [](const Shape& s, std::int64_t n) {
    return [s, n] {
      manual_seed(11);
      return Inputs{randint(0, n, s)};
    };
  };
  add(
      out, "embedding", {{{50, 16}}, "odd", {}, " indices i64[4, 9]"}, 1e-12,
      [](const Inputs& in) { return ferry::embedding(in[0], in[1]); }, -3, 3, index({4, 9}, 50));
  add(
      out, "index_select", {{{7, 13}}, "odd", {}, " dim=1 index[20]"}, 1e-12,
      [](const Inputs& in) { return ferry::index_select(in[0], 1, in[1]); }, -3, 3,
      index({20}, 13));
  add(
      out, "gather", {{{7, 13}}, "odd", {}, " dim=1 index[7, 20]"}, 1e-12,
      [](const Inputs& in) { return ferry::gather(in[0], 1, in[1]); }, -3, 3, index({7, 20}, 13));
  add(
      out, "gather", {{{7, 13}}, "odd", {}, " dim=0 index[9, 13]"}, 1e-12,
      [](const Inputs& in) { return ferry::gather(in[0], 0, in[1]); }, -3, 3, index({9, 13}, 7));
}

void add_shape_ops(std::vector<Case>& out) {
  add(out, "cat", {{{2, 3}, {5, 3}}, "odd", {}, " dim=0"}, 0, [](const Inputs& in) {
    return ferry::cat({in[0], in[1]}, 0) * 2.0;
  });
  add(out, "stack", {{{3, 4}, {3, 4}}, "odd", {}, " dim=1"}, 0, [](const Inputs& in) {
    return ferry::stack({in[0], in[1]}, 1) * 2.0;
  });
  add(out, "views", {{{4, 6}}, "non-contiguous", {}, " permute/slice/select/expand"}, 1e-12,
      [](const Inputs& in) {
        Tensor x = in[0];
        return x.view({2, 2, 6}).permute({2, 0, 1}).slice(0, 1, 6, 2).reshape({3, 4}) *
                   x.select(0, 1).narrow(0, 0, 4).unsqueeze(0).expand({3, 4}) +
               x.t().contiguous().flatten().narrow(0, 0, 12).view({3, 4});
      });
}

}  // namespace

Tensor gradients_of(const std::function<Tensor(const Inputs&)>& fn, const Inputs& in) {
  return gradients(fn, in);
}

void add_grad_cases(std::vector<Case>& out) {
  add_elementwise(out);
  add_reductions(out);
  add_nn(out);
  add_shape_ops(out);
  add_shape_grad_cases(out);
  add_sort_grad_cases(out);
  add_conv_grad_cases(out);
  add_attention_grad_cases(out);
  add_loss_grad_cases(out);
  add_math_grad_cases(out);
  add_stats_grad_cases(out);
  // Backward kernels of other names than <op>_backward (Case::kernels).
  for (Case& c : out) {
    if (c.op == "embedding.grad" || c.op == "index_select.grad") c.kernels = {OpId::index_add};
    if (c.op == "gather.grad") c.kernels = {OpId::scatter_add};
  }
}

}  // namespace ferry::conformance
