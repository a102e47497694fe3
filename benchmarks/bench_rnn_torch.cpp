// benchmarks/bench_rnn_torch.cpp — PyTorch's side of the LSTM training step (bench_rnn.cpp):
// torch::nn::LSTM through libtorch in ferry-bench's process, on the CPU, with libtorch's own
// threads.
#include <torch/torch.h>

#include <memory>

#include "bench_rnn.hpp"

namespace bench::rnn {
namespace {

struct State {
  torch::nn::LSTM lstm{nullptr};
  std::unique_ptr<torch::optim::SGD> opt;
  torch::Tensor x, w;
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
  st.lstm = torch::nn::LSTM(torch::nn::LSTMOptions(z.input, z.hidden).num_layers(z.layers));
  st.opt =
      std::make_unique<torch::optim::SGD>(st.lstm->parameters(), torch::optim::SGDOptions(1e-3));
  st.x = torch::randn({z.steps, z.batch, z.input});
  st.w = torch::randn({z.steps, z.batch, z.hidden});
}

void torch_step() {
  State& st = state();
  st.opt->zero_grad();
  auto out = std::get<0>(st.lstm->forward(st.x));
  auto loss = (out * st.w).sum();
  loss.backward();
  st.opt->step();
  (void)loss.item<float>();
}

}  // namespace bench::rnn
