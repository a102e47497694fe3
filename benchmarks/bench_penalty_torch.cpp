// benchmarks/bench_penalty_torch.cpp — PyTorch's side of the WGAN-GP critic step
// (bench_penalty.cpp): torch::nn::Linear layers through libtorch in ferry-bench's process, on
// the CPU, with libtorch's own threads.
#include <torch/torch.h>

#include <memory>

#include "bench_penalty.hpp"

namespace bench::penalty {
namespace {

struct State {
  torch::nn::Sequential critic{nullptr};
  std::unique_ptr<torch::optim::Adam> opt;
  torch::Tensor real, fake, alpha;
};

State& state() {
  static State s;
  return s;
}

}  // namespace

void torch_setup(bool quick) {
  torch::manual_seed(0);
  const Sizes z = sizes(quick);
  State& st = state();
  st.critic = torch::nn::Sequential();
  std::int64_t in = z.input;
  for (std::int64_t l = 0; l < z.layers; ++l, in = z.hidden) {
    st.critic->push_back(torch::nn::Linear(in, z.hidden));
    st.critic->push_back(torch::nn::GELU());
  }
  st.critic->push_back(torch::nn::Linear(in, 1));
  st.opt = std::make_unique<torch::optim::Adam>(st.critic->parameters(),
                                                torch::optim::AdamOptions(1e-4));
  st.real = torch::randn({z.batch, z.input});
  st.fake = torch::randn({z.batch, z.input});
  st.alpha = torch::rand({z.batch, 1});
}

void torch_step() {
  State& st = state();
  st.opt->zero_grad();
  auto mixed = (st.real * st.alpha + st.fake * (1.0 - st.alpha)).detach().requires_grad_();
  auto d = st.critic->forward(mixed);
  auto g = torch::autograd::grad({d.sum()}, {mixed}, {}, /*retain_graph=*/true,
                                 /*create_graph=*/true)[0];
  auto gp = (g.norm(2, {1}) - 1.0).pow(2).mean();
  auto loss =
      st.critic->forward(st.fake).mean() - st.critic->forward(st.real).mean() + gp * kLambda;
  loss.backward();
  st.opt->step();
  (void)loss.item<float>();
}

}  // namespace bench::penalty
