// tests/conformance/cases_attention.cpp — scaled_dot_product_attention in every float dtype:
// odd lengths, a value dim other than the query's, causal (square, more keys than queries,
// across blocks), bool and additive masks broadcast over batch or heads (a row with every key
// masked among them), grouped-query attention, length 1, 2-D and 3-D inputs, head dims 64 and
// 128 and a long causal sequence, in forward and gradient modes. A device's fused kernel (the
// CPU's) is held to the composition (Note [Scaled dot-product attention] in
// runtime/nn/attention.cpp).
#include "catalog.hpp"
#include "ferry/nn/attention.hpp"

namespace ferry::conformance {
namespace {

using nn::functional::scaled_dot_product_attention;

struct AttentionCase {
  std::string label;
  std::vector<Shape> shapes;
  std::function<Tensor(const Inputs&)> run;
  bool grad = true;  // also in gradient mode
};

// A bool mask from a tensor of values in [-1, 1] (about three keys in four kept), with the
// rows listed in `masked_rows` left with no key.
Tensor bool_mask(const Tensor& values, std::vector<std::int64_t> masked_rows) {
  Tensor keep = gt(values.detach(), -0.5);
  if (masked_rows.empty()) return keep;
  std::vector<std::int64_t> rows(std::size_t(values.size(-2)), 1);
  for (std::int64_t r : masked_rows) rows[std::size_t(r)] = 0;
  const Tensor row_keep = ints(rows, values).to(DType::boolean).reshape({values.size(-2), 1});
  return logical_and(keep, row_keep);
}

std::vector<AttentionCase> attention_cases() {
  return {
      {"[2, 4, 19, 16] x [2, 4, 23, 16] x [2, 4, 23, 8]",
       {{2, 4, 19, 16}, {2, 4, 23, 16}, {2, 4, 23, 8}},
       [](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); }},
      {"[1, 2, 70, 8] causal (across blocks)",
       {{1, 2, 70, 8}, {1, 2, 70, 8}, {1, 2, 70, 8}},
       [](const Inputs& in) {
         return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true);
       }},
      {"[2, 1, 5, 8] x [2, 1, 9, 8] causal, more keys than queries, scale=0.7",
       {{2, 1, 5, 8}, {2, 1, 9, 8}, {2, 1, 9, 8}},
       [](const Inputs& in) {
         return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true, 0.7);
       }},
      {"[2, 3, 11, 8] x [2, 3, 13, 8] bool mask [11, 13], rows 2 and 7 fully masked",
       {{2, 3, 11, 8}, {2, 3, 13, 8}, {2, 3, 13, 8}, {11, 13}},
       [](const Inputs& in) {
         return scaled_dot_product_attention(in[0], in[1], in[2], bool_mask(in[3], {2, 7}));
       }},
      {"[2, 3, 9, 8] x [2, 3, 10, 4] additive mask [2, 1, 9, 10]",
       {{2, 3, 9, 8}, {2, 3, 10, 8}, {2, 3, 10, 4}, {2, 1, 9, 10}},
       [](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2], in[3]); }},
      {"[2, 3, 9, 8] x [2, 3, 10, 4] additive mask [2, 1, 9, 10] (no gradient to the mask)",
       {{2, 3, 9, 8}, {2, 3, 10, 8}, {2, 3, 10, 4}, {2, 1, 9, 10}},
       [](const Inputs& in) {
         return scaled_dot_product_attention(in[0], in[1], in[2], in[3].detach());
       }},
      {"[2, 6, 9, 8] x [2, 2, 11, 8] grouped-query, bool mask [6, 9, 11]",
       {{2, 6, 9, 8}, {2, 2, 11, 8}, {2, 2, 11, 8}, {6, 9, 11}},
       [](const Inputs& in) {
         return scaled_dot_product_attention(in[0], in[1], in[2], bool_mask(in[3], {}), 0.0, false,
                                             std::nullopt, true);
       }},
      {"[1, 4, 37, 8] x [1, 1, 37, 8] grouped-query (one key head), causal",
       {{1, 4, 37, 8}, {1, 1, 37, 8}, {1, 1, 37, 8}},
       [](const Inputs& in) {
         return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true, std::nullopt,
                                             true);
       }},
      {"[1, 3, 1, 16] length 1",
       {{1, 3, 1, 16}, {1, 3, 1, 16}, {1, 3, 1, 16}},
       [](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); }},
      {"[3, 10, 8] x [3, 12, 8] 3-D, scale=0.3",
       {{3, 10, 8}, {3, 12, 8}, {3, 12, 8}},
       [](const Inputs& in) {
         return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, false, 0.3);
       }},
      {"[7, 4] x [5, 4] x [5, 6] 2-D",
       {{7, 4}, {5, 4}, {5, 6}},
       [](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); }},
      {"[2, 8, 5, 8] x [1, 8, 5, 8] key and value broadcast over the batch",
       {{2, 8, 5, 8}, {1, 8, 5, 8}, {1, 8, 5, 8}},
       [](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); }},
      // Head dims 64 and 128: the ones the cooperative-matrix modules are built for (Note
      // [Attention on cooperative matrices] in runtime/vulkan/vk_kernels_attention.cpp).
      {"[1, 4, 45, 64] x [1, 2, 70, 64] grouped-query, causal, head dim 64",
       {{1, 4, 45, 64}, {1, 2, 70, 64}, {1, 2, 70, 64}},
       [](const Inputs& in) {
         return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true, std::nullopt,
                                             true);
       }},
      {"[1, 2, 20, 128] x [1, 2, 33, 128] additive mask [1, 1, 20, 33], head dim 128",
       {{1, 2, 20, 128}, {1, 2, 33, 128}, {1, 2, 33, 128}, {1, 1, 20, 33}},
       [](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2], in[3]); }},
      {"[1, 2, 300, 16] causal, long",
       {{1, 2, 300, 16}, {1, 2, 300, 16}, {1, 2, 300, 16}},
       [](const Inputs& in) {
         return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true);
       },
       false},
  };
}

const std::vector<OpId> kKernels = {OpId::scaled_dot_product_attention,
                                    OpId::scaled_dot_product_attention_backward};

}  // namespace

void add_attention_cases(std::vector<Case>& out) {
  for (const AttentionCase& c : attention_cases())
    for (DType dt : kFloat) {
      out.push_back({"scaled_dot_product_attention",
                     dt,
                     c.label,
                     "attention",
                     threshold(dt, 1e-10),
                     inputs_of({c.shapes, -1, 1}, dt),
                     {},
                     c.run});
      hold_to_composition(out.back());
    }
}

void add_attention_grad_cases(std::vector<Case>& out) {
  for (const AttentionCase& c : attention_cases()) {
    if (!c.grad) continue;
    for (DType dt : kFloat) {
      out.push_back({"scaled_dot_product_attention.grad",
                     dt,
                     c.label,
                     "attention",
                     threshold(dt, 1e-10),
                     inputs_of({c.shapes, -1, 1}, dt),
                     {},
                     [run = c.run](const Inputs& in) { return gradients_of(run, in); }});
      out.back().kernels = kKernels;
      out.back().reference = [run = c.run](const Inputs& in) {
        debug::CompositesOnly composition;
        return gradients_of(run, in);
      };
    }
  }
}

}  // namespace ferry::conformance
