// benchmarks/bench_gpt_torch.cpp — PyTorch's side of the GPT training step (bench_gpt.cpp):
// nanoGPT's model through libtorch in ferry-bench's process, on the CPU, with libtorch's own
// threads.
#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <vector>

#include "bench_gpt.hpp"

namespace bench::gpt {
namespace {

struct Block : torch::nn::Module {
  Block(int64_t embd, int64_t heads) : heads_(heads) {
    ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({embd})));
    c_attn = register_module("c_attn", torch::nn::Linear(embd, 3 * embd));
    attn_proj = register_module("attn_proj", torch::nn::Linear(embd, embd));
    ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({embd})));
    c_fc = register_module("c_fc", torch::nn::Linear(embd, 4 * embd));
    mlp_proj = register_module("mlp_proj", torch::nn::Linear(4 * embd, embd));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2), hd = C / heads_;
    auto qkv = c_attn(ln_1(x)).split(C, 2);
    auto heads = [&](const torch::Tensor& t) { return t.view({B, T, heads_, hd}).transpose(1, 2); };
    auto y = std::get<0>(at::_scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]),
                                                           heads(qkv[2]), {}, 0.0, false, true));
    auto h = x + attn_proj(y.transpose(1, 2).reshape({B, T, C}));
    return h + mlp_proj(torch::gelu(c_fc(ln_2(h))));
  }
  int64_t heads_;
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  torch::nn::Linear c_attn{nullptr}, attn_proj{nullptr}, c_fc{nullptr}, mlp_proj{nullptr};
};

struct Gpt : torch::nn::Module {
  explicit Gpt(const Sizes& s) {
    wte = register_module("wte", torch::nn::Embedding(s.vocab, s.embd));
    wpe = register_module("wpe", torch::nn::Embedding(s.seq, s.embd));
    for (int64_t i = 0; i < s.layers; ++i)
      blocks.push_back(
          register_module("h" + std::to_string(i), std::make_shared<Block>(s.embd, s.heads)));
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.embd})));
  }
  torch::Tensor forward(const torch::Tensor& idx) {
    auto pos = torch::arange(idx.size(1), torch::kLong);
    auto x = wte(idx) + wpe(pos);
    for (auto& b : blocks) x = b->forward(x);
    return torch::matmul(ln_f(x), wte->weight.t());  // the head tied to the embedding
  }
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  std::vector<std::shared_ptr<Block>> blocks;
  torch::nn::LayerNorm ln_f{nullptr};
};

struct State {
  std::shared_ptr<Gpt> model;
  std::unique_ptr<torch::optim::AdamW> opt;
  torch::Tensor x, y;
};

State& state() {
  static State s;
  return s;
}

}  // namespace

void torch_setup(bool quick) {
  torch::manual_seed(0);
  const Sizes s = sizes(quick);
  State& st = state();
  st.model = std::make_shared<Gpt>(s);
  st.opt = std::make_unique<torch::optim::AdamW>(
      st.model->parameters(), torch::optim::AdamWOptions(3e-4).betas({0.9, 0.95}));
  st.x = torch::randint(0, s.vocab, {s.batch, s.seq});
  st.y = torch::randint(0, s.vocab, {s.batch, s.seq});
}

void torch_step() {
  State& st = state();
  st.opt->zero_grad();
  auto logits = st.model->forward(st.x);
  auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                   st.y.reshape({-1}));
  loss.backward();
  torch::nn::utils::clip_grad_norm_(st.model->parameters(), 1.0);
  st.opt->step();
}

}  // namespace bench::gpt
