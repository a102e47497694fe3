// tests/grad_reference_cases.hpp — the functions of tools/gen_grad_reference.py, written with
// ferry's ops: the cases of tests/data/pytorch_grad_reference.json (first-order gradients,
// tests/test_grad_reference.cpp) and of pytorch_double_backward_reference.json (second-order,
// tests/test_higher_order_grad.cpp, which takes a subset by name). The definitions here and in
// the script must stay in step.
#pragma once

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"

namespace ferry_test {

inline ferry::Tensor cross_entropy_by_ops(const ferry::Tensor& logits,
                                          const ferry::Tensor& target) {
  return -ferry::mean(ferry::gather(ferry::log_softmax(logits, 1), 1, target.unsqueeze(1)));
}

// The same functions as in tools/gen_grad_reference.py, by case name.
using GradReferenceFn = std::function<ferry::Tensor(const std::vector<ferry::Tensor>&)>;
inline const std::map<std::string, GradReferenceFn>& grad_reference_cases() {
  using ferry::Tensor;
  using In = std::vector<Tensor>;
  static const std::map<std::string, GradReferenceFn> m = {
      {"mlp_gelu_cross_entropy",
       [](const In& in) {
         Tensor h = ferry::gelu(ferry::matmul(in[0], in[1].t()) + in[2]);
         return cross_entropy_by_ops(ferry::matmul(h, in[3].t()) + in[4], in[5]);
       }},
      {"attention",
       [](const In& in) {
         Tensor s =
             ferry::softmax(ferry::matmul(in[0], in[1].transpose(-1, -2)) / std::sqrt(8.0), -1);
         return ferry::matmul(s, in[2]);
       }},
      {"layer_norm_residual",
       [](const In& in) { return in[0] + ferry::layer_norm(in[0] * 2.0, {6}, in[1], in[2]); }},
      {"embedding_pool",
       [](const In& in) {
         return ferry::tanh(ferry::matmul(ferry::sum(ferry::embedding(in[0], in[1]), {1}), in[2]));
       }},
      {"standardize",
       [](const In& in) {
         Tensor m = ferry::mean(in[0], {1}, true);
         return (in[0] - m) / ferry::sqrt(ferry::var(in[0], {1}, 1, true) + 1e-5);
       }},
      {"pow_where_max",
       [](const In& in) {
         const Tensor &a = in[0], &b = in[1];
         return ferry::where(ferry::gt(a, 0), ferry::pow(ferry::abs(a) + 1.0, b),
                             ferry::maximum(a, b)) +
                ferry::max(a * b, {1}, true);
       }},
      {"gather_cat_stack",
       [](const In& in) {
         Tensor g = ferry::gather(in[0], 1, in[1]);
         return ferry::stack({ferry::cat({g, in[0].slice(1, 1, 3)}, 1),
                              ferry::cat({in[0].slice(1, 0, 4, 2), g * 2.0}, 1)},
                             0);
       }},
      {"matmul_broadcast",
       [](const In& in) { return ferry::matmul(ferry::matmul(in[0], in[1]), in[2]); }},
      {"activations",
       [](const In& in) {
         const Tensor& x = in[0];
         return ferry::silu(x) * ferry::sigmoid(x) + ferry::relu(x - 0.5) + ferry::gelu(x, "tanh");
       }},
      {"transcendental",
       [](const In& in) {
         const Tensor& x = in[0];
         return ferry::log(ferry::exp(x) + 1.0) * ferry::rsqrt(x * x + 1.0) +
                ferry::sin(x) * ferry::cos(x) + ferry::sqrt(x * x + 2.0) - ferry::min(x);
       }},
      {"kinks_and_zeros",
       [](const In& in) {
         namespace F = ferry::nn::functional;
         const ferry::Device dev = in[0].device();
         const auto on = [&](std::vector<float> v) { return ferry::tensor(v).to(dev); };
         const auto none = ferry::nn::Reduction::none;
         return ferry::cat(
             {ferry::std(in[0], {1}), F::cosine_similarity(in[1], in[0], 1),
              ferry::xlogy(in[2], in[3]),
              F::binary_cross_entropy_with_logits(in[4], on({0.5f, 1, 0, 0.3f}), {}, {}, none),
              F::binary_cross_entropy(in[5], on({1, 0.6f, 0.5f, 0.2f}), {}, none)},
             0);
       }},
      {"logits_through_embedding",
       [](const In& in) {
         const Tensor& e = in[0];
         const std::int64_t d = e.size(1);
         Tensor h = ferry::layer_norm(ferry::embedding(e, in[1]), {d}, in[2], in[3]);
         return cross_entropy_by_ops(ferry::matmul(h.reshape({-1, d}), e.t()), in[1].reshape({-1}));
       }},
  };
  return m;
}

}  // namespace ferry_test
