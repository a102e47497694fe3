// benchmarks/bench_rnn.cpp — an LSTM training step (bench_rnn.hpp): zero_grad, forward over
// the whole sequence, the sum of the output times a fixed tensor, backward through time, SGD
// step. ferry's CPU beside PyTorch's (libtorch, this process), and vulkan:0 beside ferry's CPU.
#include "bench_rnn.hpp"

#include <fmt/format.h>

#include "bench_common.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

using namespace rnn;

void run_step(benchmark::State& s, const std::string& device) {
  time_steps(s, device, [](const ferry::Device& dev) -> std::function<void()> {
    const Sizes z = sizes(quick());
    ferry::manual_seed(0);
    auto lstm = std::make_shared<ferry::nn::LSTM>(z.input, z.hidden,
                                                  ferry::nn::RNNOptions{.num_layers = z.layers},
                                                  ferry::TensorOptions{.device = dev});
    auto opt = std::make_shared<ferry::optim::SGD>(lstm->parameters(),
                                                   ferry::optim::SGDOptions{.lr = 1e-3});
    const ferry::Tensor x = ferry::randn({z.steps, z.batch, z.input}).to(dev);
    const ferry::Tensor w = ferry::randn({z.steps, z.batch, z.hidden}).to(dev);
    return [lstm, opt, x, w] {
      opt->zero_grad();
      auto [out, state] = lstm->forward(x);
      ferry::Tensor loss = ferry::sum(out * w);
      loss.backward();
      opt->step();
      benchmark::DoNotOptimize(loss.item<float>());
    };
  });
}

}  // namespace

void register_rnn() {
#ifdef FERRY_BENCH_HAVE_TORCH
  rnn::torch_setup(quick());
#endif
  const Sizes z = sizes(quick());
  const std::string base = "lstm step";
  const std::string title =
      fmt::format("LSTM training step ({} layers, input {}, hidden {}), {} steps of batch {}",
                  z.layers, z.input, z.hidden, z.steps, z.batch);
#ifdef FERRY_BENCH_HAVE_TORCH
  const std::function<void()> torch_step = rnn::torch_step;
#else
  const std::function<void()> torch_step;
#endif
  register_step_rows(base, title, quick() ? 1 : 10, run_step, torch_step);
}

}  // namespace bench
