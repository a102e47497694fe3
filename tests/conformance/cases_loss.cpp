// tests/conformance/cases_loss.cpp — linear, the losses of torch.nn.functional, the products
// beyond matmul and the recurrent cells: the composite ops the op table names for their
// autocast policy (Note [Autocast] in ferry/autocast.hpp): each in every float dtype, its
// reductions and its optional weights, against the CPU.
#include "catalog.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/nn/rnn.hpp"

namespace ferry::conformance {
namespace {

namespace F = nn::functional;
using nn::Reduction;

std::vector<FloatOpCase> loss_ops() {
  return {
      {"linear",
       "[3, 5] w [4, 5] b [4]",
       {{3, 5}, {4, 5}, {4}},
       [](const Inputs& in) { return F::linear(in[0], in[1], in[2]); }},
      {"linear",
       "[2, 3, 5] w [4, 5], no bias",
       {{2, 3, 5}, {4, 5}},
       [](const Inputs& in) { return F::linear(in[0], in[1]); }},
      {"nll_loss",
       "[4, 3] log-probabilities, class weights, mean",
       {{4, 3}, {3}},
       [](const Inputs& in) {
         return F::nll_loss(log_softmax(in[0], 1), ints({0, 2, 1, 2}, in[0]),
                            {.weight = in[1] * in[1] + 0.5});
       }},
      {"nll_loss",
       "[2, 3, 4] per element, ignore_index 1",
       {{2, 3, 4}},
       [](const Inputs& in) {
         return F::nll_loss(in[0], ints({0, 1, 2, 1, 2, 0, 0, 1}, in[0]).reshape({2, 4}),
                            {.ignore_index = 1, .reduction = Reduction::none});
       }},
      {"mse_loss",
       "[3, 4] mean",
       {{3, 4}, {3, 4}},
       [](const Inputs& in) { return F::mse_loss(in[0], in[1]); }},
      {"l1_loss",
       "[3, 4] sum",
       {{3, 4}, {3, 4}},
       [](const Inputs& in) { return F::l1_loss(in[0], in[1], Reduction::sum); }},
      {"smooth_l1_loss",
       "[5, 2] none, beta 0.5",
       {{5, 2}, {5, 2}},
       [](const Inputs& in) { return F::smooth_l1_loss(in[0], in[1], Reduction::none, 0.5); }},
      {"huber_loss",
       "[5, 2] mean, delta 0.7",
       {{5, 2}, {5, 2}},
       [](const Inputs& in) { return F::huber_loss(in[0], in[1], Reduction::mean, 0.7); }},
      {"kl_div",
       "[3, 4] batchmean",
       {{3, 4}, {3, 4}},
       [](const Inputs& in) {
         return F::kl_div(log_softmax(in[0], 1), softmax(in[1], 1), "batchmean");
       }},
      {"binary_cross_entropy",
       "[3, 4] probabilities, weight [4]",
       {{3, 4}, {3, 4}, {4}},
       [](const Inputs& in) {
         return F::binary_cross_entropy(sigmoid(in[0]), sigmoid(in[1]), in[2] * in[2]);
       }},
      {"binary_cross_entropy_with_logits",
       "[3, 4] pos_weight [4]",
       {{3, 4}, {3, 4}, {4}},
       [](const Inputs& in) {
         return F::binary_cross_entropy_with_logits(in[0], sigmoid(in[1]), {}, in[2] * in[2]);
       }},
      {"margin_ranking_loss",
       "[6] margin 0.2",
       {{6}, {6}},
       [](const Inputs& in) {
         const Tensor sign = ints({1, -1, 1, 1, -1, -1}, in[0]).to(in[0].dtype());
         return F::margin_ranking_loss(in[0], in[1], sign, 0.2);
       }},
      {"cosine_embedding_loss",
       "[3, 5] margin 0.1",
       {{3, 5}, {3, 5}},
       [](const Inputs& in) {
         const Tensor sign = ints({1, -1, 1}, in[0]).to(in[0].dtype());
         return F::cosine_embedding_loss(in[0], in[1], sign, 0.1);
       }},
      {"cosine_similarity",
       "[4, 6] x [1, 6] over dim 1",
       {{4, 6}, {1, 6}},
       [](const Inputs& in) { return F::cosine_similarity(in[0], in[1], 1); }},
      {"soft_margin_loss",
       "[3, 4] labels ±1, sum",
       {{3, 4}, {3, 4}},
       [](const Inputs& in) { return F::soft_margin_loss(in[0], sign(in[1]), Reduction::sum); }},
      {"hinge_embedding_loss",
       "[3, 4] labels ±1, margin 0.5, none",
       {{3, 4}, {3, 4}},
       [](const Inputs& in) {
         return F::hinge_embedding_loss(in[0], sign(in[1]), 0.5, Reduction::none);
       }},
      {"triplet_margin_loss",
       "[4, 5] p 2, swap",
       {{4, 5}, {4, 5}, {4, 5}},
       [](const Inputs& in) {
         return F::triplet_margin_loss(in[0], in[1], in[2], 1.0, 2, 1e-6, true);
       }},
      {"poisson_nll_loss",
       "[3, 4] log input, full",
       {{3, 4}, {3, 4}},
       [](const Inputs& in) {
         return F::poisson_nll_loss(in[0], abs(in[1]) * 3, true, true, 1e-8, Reduction::sum);
       }},
      {"multi_margin_loss",
       "[4, 3] p 2, margin 0.5, class weights",
       {{4, 3}, {3}},
       [](const Inputs& in) {
         return F::multi_margin_loss(in[0], ints({0, 2, 1, 2}, in[0]), 2, 0.5, in[1] * in[1] + 0.5);
       }},
      {"cdist",
       "[2, 4, 3] x [5, 3] p=2 (differences) and [30, 3] x [6, 3] (matrix product)",
       {{2, 4, 3}, {5, 3}, {30, 3}, {6, 3}},
       [](const Inputs& in) {
         return cat({cdist(in[0], in[1]).reshape({-1}), cdist(in[2], in[3]).reshape({-1})});
       }},
      {"cdist",
       "[4, 3] x [2, 5, 3] p=1, broadcast batch",
       {{4, 3}, {2, 5, 3}},
       [](const Inputs& in) { return cdist(in[0], in[1], 1.0); }},
      {"bilinear",
       "[3, 4] x [3, 2] w [5, 4, 2] b [5]",
       {{3, 4}, {3, 2}, {5, 4, 2}, {5}},
       [](const Inputs& in) { return F::bilinear(in[0], in[1], in[2], in[3]); }},
      // The products composed as matmul (Note [Products as matmul]).
      {"einsum",
       "bhqd,bhkd->bhqk [2, 3, 4, 5] x [2, 3, 6, 5]",
       {{2, 3, 4, 5}, {2, 3, 6, 5}},
       [](const Inputs& in) {
         return einsum("bhqd,bhkd->bhqk", {in[0], in[1]});
       }},
      {"einsum",
       "...ij,jk,kk->...ik broadcast, summed early, diagonal",
       {{2, 3, 4}, {4, 5}, {5, 5}},
       [](const Inputs& in) {
         return einsum("...ij,jk,kk->...ik", {in[0], in[1], in[2]});
       }},
      {"tensordot",
       "[3, 4, 5] x [5, 2, 3] over (0, 2) and (2, 0)",
       {{3, 4, 5}, {5, 2, 3}},
       [](const Inputs& in) {
         return tensordot(in[0], in[1], {0, 2}, {2, 0});
       }},
      {"outer", "[3] x [5]", {{3}, {5}}, [](const Inputs& in) { return outer(in[0], in[1]); }},
      {"dot", "[7] . [7]", {{7}, {7}}, [](const Inputs& in) { return dot(in[0], in[1]); }},
      {"addmm",
       "[5] + [3, 4] x [4, 5], beta 0.5, alpha 2",
       {{5}, {3, 4}, {4, 5}},
       [](const Inputs& in) { return addmm(in[0], in[1], in[2], 0.5, 2.0); }},
      {"addmv",
       "[3] + [3, 4] x [4]",
       {{3}, {3, 4}, {4}},
       [](const Inputs& in) { return addmv(in[0], in[1], in[2]); }},
      {"baddbmm",
       "[2, 3, 5] + [2, 3, 4] x [2, 4, 5], beta 0.25",
       {{2, 3, 5}, {2, 3, 4}, {2, 4, 5}},
       [](const Inputs& in) { return baddbmm(in[0], in[1], in[2], 0.25); }},
      {"addbmm",
       "[3, 5] + sum of [2, 3, 4] x [2, 4, 5]",
       {{3, 5}, {2, 3, 4}, {2, 4, 5}},
       [](const Inputs& in) { return addbmm(in[0], in[1], in[2]); }},
      {"addr",
       "[3, 4] + [3] outer [4], beta 0.5, alpha 2",
       {{3, 4}, {3}, {4}},
       [](const Inputs& in) { return addr(in[0], in[1], in[2], 0.5, 2.0); }},
      {"cross",
       "[2, 1, 3] x [1, 4, 3] broadcast, dim -1",
       {{2, 1, 3}, {1, 4, 3}},
       [](const Inputs& in) { return linalg_cross(in[0], in[1]); }},
      {"vdot", "[7] . [7]", {{7}, {7}}, [](const Inputs& in) { return vdot(in[0], in[1]); }},
      {"vecdot",
       "[2, 3, 4] . [4] over the last dim",
       {{2, 3, 4}, {4}},
       [](const Inputs& in) { return vecdot(in[0], in[1]); }},
      {"multi_dot",
       "[3] x [3, 6] x [6, 2] x [2, 5]",
       {{3}, {3, 6}, {6, 2}, {2, 5}},
       [](const Inputs& in) {
         return multi_dot({in[0], in[1], in[2], in[3]});
       }},
      // The recurrent cells: input [3, 4], state [3, 5], weights [G * 5, 4] and [G * 5, 5].
      {"rnn_tanh_cell",
       "[3, 4] h [3, 5] with biases",
       {{3, 4}, {3, 5}, {5, 4}, {5, 5}, {5}, {5}},
       [](const Inputs& in) { return F::rnn_tanh_cell(in[0], in[1], in[2], in[3], in[4], in[5]); }},
      {"rnn_relu_cell",
       "unbatched [4] h [5] without biases",
       {{4}, {5}, {5, 4}, {5, 5}},
       [](const Inputs& in) { return F::rnn_relu_cell(in[0], in[1], in[2], in[3]); }},
      {"lstm_cell",
       "[3, 4] (h, c) [3, 5] with biases: h' and c'",
       {{3, 4}, {3, 5}, {3, 5}, {20, 4}, {20, 5}, {20}, {20}},
       [](const Inputs& in) {
         const auto [h, c] = F::lstm_cell(in[0], {in[1], in[2]}, in[3], in[4], in[5], in[6]);
         return cat({h.reshape({-1}), c.reshape({-1})});
       }},
      {"gru_cell",
       "[3, 4] h [3, 5] with biases",
       {{3, 4}, {3, 5}, {15, 4}, {15, 5}, {15}, {15}},
       [](const Inputs& in) { return F::gru_cell(in[0], in[1], in[2], in[3], in[4], in[5]); }},
  };
}

}  // namespace

void add_loss_cases(std::vector<Case>& out) { add_float_cases(out, loss_ops(), "loss"); }
void add_loss_grad_cases(std::vector<Case>& out) { add_float_grad_cases(out, loss_ops(), "loss"); }

}  // namespace ferry::conformance
