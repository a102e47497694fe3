// tests/gradcheck.hpp — checks autograd's gradients against central finite
// differences, in double precision on the CPU (PyTorch's gradcheck, reduced
// to one random direction per output).
//
// For a function f of some f64 inputs, the scalar L = Σ f(x) ∘ R (R fixed and
// random) has the gradient autograd computes for each input through one
// backward(); the check compares every element of it with
// (L(x + εe_j) - L(x - εe_j)) / 2ε. A wrong formula (a missing factor, a
// transposed operand, a gradient routed to the wrong element) changes L's
// gradient in some element by far more than the difference quotient's
// O(ε²) + O(u/ε) error, so |analytic - numeric| <= atol + rtol·|numeric|
// with ε = 1e-6 in double catches it.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"

namespace ferry_test {

using GradFn = std::function<ferry::Tensor(const std::vector<ferry::Tensor>&)>;

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-7;
  double rtol = 1e-6;
  std::uint64_t seed = 1234;  // of the direction R
};

// f64 inputs on the CPU with values in [lo, hi], spread and distinct.
inline ferry::Tensor grad_input(const ferry::Shape& shape, double lo = -2, double hi = 2,
                                std::uint64_t seed = 1) {
  ferry::manual_seed(seed);
  return ferry::uniform(shape, lo, hi, {.dtype = ferry::DType::f64});
}

// Checks the gradient of every floating input of `fn` (integer inputs, such
// as indices, are passed through). Inputs are f64 CPU tensors.
inline ::testing::AssertionResult gradcheck(const GradFn& fn,
                                            const std::vector<ferry::Tensor>& inputs,
                                            const GradcheckOptions& o = {}) {
  using ferry::Tensor;
  std::vector<Tensor> base;
  for (const Tensor& t : inputs) base.push_back(t.detach().contiguous());
  Tensor r;
  {
    ferry::NoGradGuard no_grad;
    Tensor y0 = fn(base);
    ferry::manual_seed(o.seed);
    r = ferry::uniform(y0.sizes(), -1, 1, {.dtype = y0.dtype()});
  }
  auto loss_at = [&](const std::vector<Tensor>& x) {
    ferry::NoGradGuard no_grad;
    return ferry::sum(fn(x) * r).item<double>();
  };

  // Analytic: one backward through fresh leaves.
  std::vector<Tensor> leaves = base;
  std::vector<Tensor> checked;
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < leaves.size(); ++i)
    if (ferry::is_floating(leaves[i].dtype())) {
      leaves[i] = leaves[i].detach().requires_grad_();
      checked.push_back(leaves[i]);
      which.push_back(i);
    }
  Tensor loss = ferry::sum(fn(leaves) * r);
  std::vector<Tensor> grads =
      ferry::autograd::grad({loss}, checked, {}, false, /*allow_unused=*/true);

  for (std::size_t k = 0; k < checked.size(); ++k) {
    const std::size_t i = which[k];
    std::vector<double> x = base[i].to_vector<double>();
    std::vector<double> analytic =
        grads[k].defined() ? grads[k].to_vector<double>() : std::vector<double>(x.size(), 0.0);
    if (grads[k].defined() && grads[k].sizes() != base[i].sizes())
      return ::testing::AssertionFailure()
             << "input " << i << ": gradient shape " << ferry::shape_str(grads[k].sizes())
             << " differs from the input's " << ferry::shape_str(base[i].sizes());
    for (std::size_t j = 0; j < x.size(); ++j) {
      std::vector<Tensor> plus = base, minus = base;
      std::vector<double> xp = x, xm = x;
      xp[j] += o.eps;
      xm[j] -= o.eps;
      plus[i] = ferry::tensor(xp, base[i].sizes());
      minus[i] = ferry::tensor(xm, base[i].sizes());
      const double numeric = (loss_at(plus) - loss_at(minus)) / (2 * o.eps);
      const double err = std::fabs(analytic[j] - numeric);
      if (!(err <= o.atol + o.rtol * std::fabs(numeric)))
        return ::testing::AssertionFailure() << fmt::format(
                   "input {} element {}: autograd gives {:.12g}, finite differences "
                   "{:.12g} (difference {:.3g})",
                   i, j, analytic[j], numeric, err);
    }
  }
  return ::testing::AssertionSuccess();
}

// Checks second-order gradients (PyTorch's gradgradcheck): fn's first-order gradients, as
// autograd computes them with create_graph (the gradient of L = Σ fn(x) ∘ R for each floating
// input, flattened and joined), are themselves gradchecked: their gradients through the graph
// create_graph built against central finite differences of the first-order gradients.
inline ::testing::AssertionResult gradgradcheck(const GradFn& fn,
                                                const std::vector<ferry::Tensor>& inputs,
                                                GradcheckOptions o = {}) {
  using ferry::Tensor;
  Tensor r;
  {
    ferry::NoGradGuard no_grad;
    std::vector<Tensor> base;
    for (const Tensor& t : inputs) base.push_back(t.detach());
    ferry::manual_seed(o.seed + 1);
    r = ferry::uniform(fn(base).sizes(), -1, 1, {.dtype = ferry::DType::f64});
  }
  const GradFn first = [&fn, r](const std::vector<Tensor>& xs) {
    ferry::EnableGradGuard grad_mode;
    std::vector<Tensor> leaves = xs, floating;
    for (Tensor& x : leaves) {
      if (!ferry::is_floating(x.dtype())) continue;
      if (!x.requires_grad()) x = x.detach().requires_grad_();  // finite differences' points
      floating.push_back(x);
    }
    const Tensor loss = ferry::sum(fn(leaves) * r);
    const std::vector<Tensor> grads =
        ferry::autograd::grad({loss}, floating, {}, false, true, /*create_graph=*/true);
    // A term of value 0 that depends on every input: a first gradient that does not depend on
    // the inputs (a linear op's) is then checked to be constant, its second derivative 0.
    Tensor zero = ferry::zeros({1}, {.dtype = ferry::DType::f64});
    for (const Tensor& x : floating) zero = zero + ferry::sum(x) * 0.0;
    std::vector<Tensor> flat{zero};
    for (std::size_t k = 0; k < grads.size(); ++k)
      flat.push_back(grads[k].defined()
                         ? grads[k].reshape({-1})
                         : ferry::zeros({floating[k].numel()}, {.dtype = ferry::DType::f64}));
    return ferry::cat(flat, 0);
  };
  return gradcheck(first, inputs, o);
}

}  // namespace ferry_test
