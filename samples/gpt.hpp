// samples/gpt.hpp — a GPT on ferry's public API, the model of ferry-gpt and of the GPT step in
// ferry-bench: nanoGPT's architecture and names (transformer.wte, transformer.wpe,
// transformer.h.0.ln_1, attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj, ln_f, lm_head) —
// pre-norm blocks, causal scaled_dot_product_attention, GELU, learned positions, and the
// output head tied to the token embedding (one tensor under both names). forward() takes an
// optional KV cache, so generating a token costs one position's work instead of the whole
// context's. Plain C++: copy it into your own program if it helps.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"

namespace sample {

namespace nn = ferry::nn;

struct GptConfig {
  std::int64_t vocab_size = 65;
  std::int64_t block_size = 128;  // the longest context (positions learned)
  std::int64_t n_layer = 4, n_head = 4, n_embd = 128;
  double dropout = 0.0;
};

// Each layer's keys and values so far, [B, n_head, T, head_dim]: filled by a forward over the
// prompt, extended by one position per generated token.
struct KvCache {
  std::vector<ferry::Tensor> k, v;
  std::int64_t length() const { return k.empty() || !k[0].defined() ? 0 : k[0].size(2); }
  void clear() { k.assign(k.size(), {}), v.assign(v.size(), {}); }
};

class CausalSelfAttention : public nn::Module {
 public:
  CausalSelfAttention(const GptConfig& c, const ferry::TensorOptions& o)
      : n_head_(c.n_head), dropout_(c.dropout) {
    c_attn =
        register_module("c_attn", std::make_shared<nn::Linear>(c.n_embd, 3 * c.n_embd, true, o));
    c_proj = register_module("c_proj", std::make_shared<nn::Linear>(c.n_embd, c.n_embd, true, o));
  }
  ferry::Tensor forward(const ferry::Tensor& x) override { return attend(x, nullptr, nullptr); }
  // With a cache: this call's keys and values are appended to `k`/`v`, and the queries attend
  // to every cached position (the new ones causally among themselves).
  ferry::Tensor attend(const ferry::Tensor& x, ferry::Tensor* k_cache, ferry::Tensor* v_cache) {
    const std::int64_t B = x.size(0), T = x.size(1), C = x.size(2), hd = C / n_head_;
    const std::vector<ferry::Tensor> qkv = ferry::split(c_attn->forward(x), C, 2);
    auto heads = [&](const ferry::Tensor& t) {
      return t.view({B, T, n_head_, hd}).transpose(1, 2);  // [B, H, T, hd]
    };
    ferry::Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
    bool causal = true;
    ferry::Tensor mask;
    if (k_cache && k_cache->defined()) {
      const std::int64_t past = k_cache->size(2);
      k = ferry::cat({*k_cache, k}, 2);
      v = ferry::cat({*v_cache, v}, 2);
      causal = false;
      if (T > 1)  // new queries see the past and, causally, each other
        mask = ferry::tril(
            ferry::ones({T, past + T}, {.dtype = ferry::DType::boolean, .device = x.device()}),
            past);
    }
    if (k_cache) *k_cache = k.detach(), *v_cache = v.detach();
    const ferry::Tensor y = nn::functional::scaled_dot_product_attention(
        q, k, v, mask, is_training() ? dropout_ : 0.0, causal);
    return c_proj->forward(y.transpose(1, 2).reshape({B, T, C}));
  }

  std::shared_ptr<nn::Linear> c_attn, c_proj;

 private:
  std::int64_t n_head_;
  double dropout_;
};

class Mlp : public nn::Module {
 public:
  Mlp(const GptConfig& c, const ferry::TensorOptions& o) {
    c_fc = register_module("c_fc", std::make_shared<nn::Linear>(c.n_embd, 4 * c.n_embd, true, o));
    c_proj =
        register_module("c_proj", std::make_shared<nn::Linear>(4 * c.n_embd, c.n_embd, true, o));
  }
  ferry::Tensor forward(const ferry::Tensor& x) override {
    return c_proj->forward(ferry::gelu(c_fc->forward(x)));
  }
  std::shared_ptr<nn::Linear> c_fc, c_proj;
};

class Block : public nn::Module {
 public:
  Block(const GptConfig& c, const ferry::TensorOptions& o) {
    ln_1 = register_module(
        "ln_1", std::make_shared<nn::LayerNorm>(ferry::Shape{c.n_embd}, 1e-5, true, true, o));
    attn = register_module("attn", std::make_shared<CausalSelfAttention>(c, o));
    ln_2 = register_module(
        "ln_2", std::make_shared<nn::LayerNorm>(ferry::Shape{c.n_embd}, 1e-5, true, true, o));
    mlp = register_module("mlp", std::make_shared<Mlp>(c, o));
  }
  ferry::Tensor forward(const ferry::Tensor& x) override { return step(x, nullptr, nullptr); }
  ferry::Tensor step(const ferry::Tensor& x, ferry::Tensor* k, ferry::Tensor* v) {
    const ferry::Tensor h = x + attn->attend(ln_1->forward(x), k, v);
    return h + mlp->forward(ln_2->forward(h));
  }
  std::shared_ptr<nn::LayerNorm> ln_1, ln_2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<Mlp> mlp;
};

// The token embedding, positions and blocks, under nanoGPT's "transformer." prefix.
class GptBody : public nn::Module {
 public:
  GptBody(const GptConfig& c, const ferry::TensorOptions& o) {
    wte = register_module("wte", std::make_shared<nn::Embedding>(c.vocab_size, c.n_embd, o));
    wpe = register_module("wpe", std::make_shared<nn::Embedding>(c.block_size, c.n_embd, o));
    h = register_module("h", std::make_shared<nn::ModuleList>());
    for (std::int64_t i = 0; i < c.n_layer; ++i) {
      blocks.push_back(std::make_shared<Block>(c, o));
      h->push_back(blocks.back());
    }
    ln_f = register_module(
        "ln_f", std::make_shared<nn::LayerNorm>(ferry::Shape{c.n_embd}, 1e-5, true, true, o));
  }
  ferry::Tensor forward(const ferry::Tensor&) override {
    throw ferry::Error("GptBody: call Gpt::forward");
  }
  std::shared_ptr<nn::Embedding> wte, wpe;
  std::shared_ptr<nn::ModuleList> h;
  std::vector<std::shared_ptr<Block>> blocks;
  std::shared_ptr<nn::LayerNorm> ln_f;
};

class Gpt : public nn::Module {
 public:
  explicit Gpt(const GptConfig& c, const ferry::TensorOptions& o = {}) : config(c) {
    transformer = register_module("transformer", std::make_shared<GptBody>(c, o));
    lm_head =
        register_module("lm_head", std::make_shared<nn::Linear>(c.n_embd, c.vocab_size, false, o));
    // Weight tying: the head is the embedding, one tensor under both names.
    lm_head->weight = lm_head->replace_parameter("weight", transformer->wte->weight);
    init_weights();
  }

  // Logits [B, T, vocab] of tokens [B, T] (i64). With a cache, the tokens continue the cached
  // context: their positions start at its length, and their keys and values are appended.
  ferry::Tensor forward(const ferry::Tensor& idx) override { return forward(idx, nullptr); }
  ferry::Tensor forward(const ferry::Tensor& idx, KvCache* cache) {
    const std::int64_t T = idx.size(1);
    const std::int64_t past = cache ? cache->length() : 0;
    if (past + T > config.block_size)
      throw ferry::ValueError("Gpt: " + std::to_string(past + T) + " positions exceed block_size " +
                              std::to_string(config.block_size));
    if (cache && cache->k.size() != transformer->blocks.size()) {
      cache->k.assign(transformer->blocks.size(), {});
      cache->v.assign(transformer->blocks.size(), {});
    }
    const ferry::Tensor pos = ferry::arange(double(past), double(past + T), 1,
                                            {.dtype = ferry::DType::i64, .device = idx.device()});
    ferry::Tensor x = transformer->wte->forward(idx) + transformer->wpe->forward(pos);
    for (std::size_t i = 0; i < transformer->blocks.size(); ++i)
      x = transformer->blocks[i]->step(x, cache ? &cache->k[i] : nullptr,
                                       cache ? &cache->v[i] : nullptr);
    return lm_head->forward(transformer->ln_f->forward(x));
  }

  // nanoGPT's initialisation: N(0, 0.02) weights and embeddings, zero biases, and the
  // residual projections scaled by 1/sqrt(2 n_layer).
  void init_weights() {
    ferry::NoGradGuard no_grad;
    for (auto& [name, p] : named_parameters()) {
      const bool residual = name.ends_with("c_proj.weight");
      if (name.ends_with(".bias")) {
        p.zero_();
      } else if (name.find("ln_") != std::string::npos) {
        continue;  // LayerNorm: ones and zeros
      } else {
        const double std = residual ? 0.02 / std::sqrt(2.0 * double(config.n_layer)) : 0.02;
        p.copy_(ferry::randn(p.sizes(), {.dtype = p.dtype(), .device = p.device()}) * std);
      }
    }
  }

  GptConfig config;
  std::shared_ptr<GptBody> transformer;
  std::shared_ptr<nn::Linear> lm_head;
};

// The next-token loss of logits [B, T, V] against targets [B, T].
inline ferry::Tensor gpt_loss(const ferry::Tensor& logits, const ferry::Tensor& targets) {
  return nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                       targets.reshape({-1}));
}

}  // namespace sample
