// samples/gpt.hpp, ferry-gpt's model: nanoGPT's parameter names with the head tied to the
// token embedding; decoding with the KV cache gives the logits of the full forward; a training
// run moved to another device and back continues the loss curve of the run that stayed.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ferry/ferry.hpp"
#include "gpt.hpp"
#include "test_devices.hpp"

namespace {

using ferry::Tensor;

sample::GptConfig tiny() {
  return {.vocab_size = 11, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 8};
}

TEST(GptSample, NanoGptNamesAndTiedHead) {
  ferry::manual_seed(1);
  sample::Gpt model(tiny());
  std::set<std::string> names;
  for (const auto& [name, t] : model.state_dict()) names.insert(name);
  for (const char* n :
       {"transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.ln_1.weight",
        "transformer.h.1.attn.c_attn.weight", "transformer.h.1.attn.c_proj.bias",
        "transformer.h.0.mlp.c_fc.weight", "transformer.ln_f.bias", "lm_head.weight"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_TRUE(model.lm_head->weight.is_same(model.transformer->wte->weight));
  // One tensor: listed once for the optimizer, and its gradient sums both uses.
  std::int64_t listed = 0;
  for (const Tensor& p : model.parameters()) listed += p.is_same(model.lm_head->weight);
  EXPECT_EQ(listed, 1);
}

TEST(GptSample, KvCacheDecodingMatchesTheFullForward) {
  ferry::manual_seed(2);
  sample::Gpt model(tiny());
  model.eval();
  ferry::NoGradGuard no_grad;
  const Tensor tokens = ferry::randint(0, 11, {2, 9});
  const Tensor full = model.forward(tokens);
  // A prompt of 4 tokens at once, then one token per call.
  sample::KvCache cache;
  std::vector<Tensor> parts = {model.forward(tokens.slice(1, 0, 4), &cache)};
  EXPECT_EQ(cache.length(), 4);
  for (std::int64_t t = 4; t < 9; ++t)
    parts.push_back(model.forward(tokens.slice(1, t, t + 1), &cache));
  EXPECT_EQ(cache.length(), 9);
  const Tensor stepped = ferry::cat(parts, 1);
  EXPECT_TRUE(ferry::allclose(stepped, full, 1e-5, 1e-5));
  // Two tokens at once after a prompt: causal among themselves.
  sample::KvCache c2;
  model.forward(tokens.slice(1, 0, 5), &c2);
  const Tensor two = model.forward(tokens.slice(1, 5, 7), &c2);
  EXPECT_TRUE(ferry::allclose(two, full.slice(1, 5, 7), 1e-5, 1e-5));
  EXPECT_THROW(model.forward(ferry::randint(0, 11, {1, 17})), ferry::ValueError);
}

// Steps of AdamW on fixed batches; `moved` runs steps [3, 6) on `other`.
std::vector<double> losses(const std::string& other, bool moved) {
  ferry::manual_seed(3);
  sample::Gpt model(tiny());
  ferry::optim::AdamW opt(model.parameters(), {.lr = 1e-2});
  std::vector<double> out;
  ferry::Device at = ferry::Device::cpu();
  for (int step = 0; step < 9; ++step) {
    const ferry::Device dev =
        moved && step >= 3 && step < 6 ? ferry::Device(other) : ferry::Device::cpu();
    if (dev != at) ferry::migrate(model, opt, dev), at = dev;
    ferry::manual_seed(100 + step);
    const Tensor x = ferry::randint(0, 11, {3, 12}).to(dev),
                 y = ferry::randint(0, 11, {3, 12}).to(dev);
    opt.zero_grad();
    const Tensor loss = sample::gpt_loss(model.forward(x), y);
    loss.backward();
    ferry::nn::utils::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    out.push_back(loss.item<double>());
  }
  return out;
}

class GptSampleOnDevice : public ::testing::TestWithParam<std::string> {};

TEST_P(GptSampleOnDevice, MigratingMidTrainingContinuesTheLossCurve) {
  FERRY_SKIP_UNLESS_DEVICE(GetParam());
  const std::vector<double> stay = losses(GetParam(), false), move = losses(GetParam(), true);
  for (std::size_t i = 0; i < stay.size(); ++i)
    EXPECT_NEAR(move[i], stay[i], 1e-4 * std::max(1.0, stay[i])) << "step " << i;
}

INSTANTIATE_TEST_SUITE_P(Devices, GptSampleOnDevice,
                         ::testing::ValuesIn(ferry_test::accelerator_names()),
                         [](const auto& info) { return ferry_test::backend_of(info.param); });

}  // namespace
