// Activation checkpointing (ferry/checkpoint.hpp): the same gradients as without it, for the
// inputs and for the parameters fn reads, dropout included (the generator's state replayed);
// fewer bytes held between forward and backward; the generator's state round trip.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "ferry/ferry.hpp"

namespace {

using ferry::Tensor;
namespace nn = ferry::nn;

// A residual MLP block with dropout, as a transformer's feed-forward block.
struct Block {
  std::shared_ptr<nn::Linear> up, down;
  std::shared_ptr<nn::Dropout> drop;
  Block(std::int64_t d) {
    up = std::make_shared<nn::Linear>(d, 4 * d);
    down = std::make_shared<nn::Linear>(4 * d, d);
    drop = std::make_shared<nn::Dropout>(0.3);
  }
  Tensor operator()(const Tensor& x) const {
    return x + down->forward(drop->forward(ferry::gelu(up->forward(x))));
  }
  std::vector<Tensor> parameters() const {
    return {up->weight, up->bias, down->weight, down->bias};
  }
};

struct Outcome {
  std::vector<float> out, dx;
  std::vector<std::vector<float>> dparams;
  std::uint64_t held = 0;  // bytes allocated after the forward, before the backward
};

Outcome run(bool checkpointed, std::int64_t depth = 4) {
  ferry::manual_seed(21);
  std::vector<Block> blocks;
  for (std::int64_t i = 0; i < depth; ++i) blocks.emplace_back(64);
  Tensor x = ferry::randn({32, 64}).requires_grad_();
  const ferry::Device cpu = ferry::Device::cpu();
  const std::uint64_t before = ferry::memory_stats(cpu).allocated;
  Tensor h = x;
  for (const Block& b : blocks) {
    if (checkpointed)
      h = ferry::checkpoint([&b](const std::vector<Tensor>& in) { return b(in[0]); }, {h});
    else
      h = b(h);
  }
  Outcome r;
  r.held = ferry::memory_stats(cpu).allocated - before;
  r.out = h.to_vector<float>();
  ferry::sum(h * h).backward();
  r.dx = x.grad().to_vector<float>();
  for (const Block& b : blocks)
    for (const Tensor& p : b.parameters()) r.dparams.push_back(p.grad().to_vector<float>());
  return r;
}

TEST(Checkpoint, SameGradientsWithDropoutAndLessMemoryHeld) {
  const Outcome plain = run(false), ckpt = run(true);
  EXPECT_EQ(ckpt.out, plain.out);
  EXPECT_EQ(ckpt.dx, plain.dx);
  ASSERT_EQ(ckpt.dparams.size(), plain.dparams.size());
  for (std::size_t i = 0; i < plain.dparams.size(); ++i)
    EXPECT_EQ(ckpt.dparams[i], plain.dparams[i]) << "parameter " << i;
  // Each plain block keeps its [32, 256] activations (and the dropout mask) for the backward;
  // a checkpointed one keeps its input only.
  EXPECT_LT(ckpt.held * 3, plain.held) << ckpt.held << " vs " << plain.held << " bytes";
}

TEST(Checkpoint, InputsWithoutGradAndTheGeneratorState) {
  const Tensor x = ferry::ones({3});
  const Tensor y =
      ferry::checkpoint([](const std::vector<Tensor>& in) { return in[0] * 2.0; }, {x});
  EXPECT_FALSE(y.requires_grad());
  // An input handed back is still a result of its own.
  Tensor a = ferry::ones({2}).requires_grad_();
  Tensor same = ferry::checkpoint([](const std::vector<Tensor>& in) { return in[0]; }, {a});
  ferry::sum(same * 3.0).backward();
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{3, 3}));
  ferry::manual_seed(5);
  const ferry::RngState s = ferry::get_rng_state();
  const auto first = ferry::rand({4}).to_vector<float>();
  ferry::set_rng_state(s);
  EXPECT_EQ(ferry::rand({4}).to_vector<float>(), first);
  EXPECT_THROW(ferry::checkpoint({}, {a}), ferry::Error);
}

}  // namespace
