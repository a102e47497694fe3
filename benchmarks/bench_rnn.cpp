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
  if (!ferry::is_available(device)) return s.SkipWithError((device + " is not available").c_str());
  try {
    const ferry::Device dev(device);
    const Sizes z = sizes(quick());
    ferry::manual_seed(0);
    ferry::nn::LSTM lstm(z.input, z.hidden, {.num_layers = z.layers}, {.device = dev});
    ferry::optim::SGD opt(lstm.parameters(), {.lr = 1e-3});
    const ferry::Tensor x = ferry::randn({z.steps, z.batch, z.input}).to(dev);
    const ferry::Tensor w = ferry::randn({z.steps, z.batch, z.hidden}).to(dev);
    auto step = [&] {
      opt.zero_grad();
      auto [out, state] = lstm.forward(x);
      ferry::Tensor loss = ferry::sum(out * w);
      loss.backward();
      opt.step();
      benchmark::DoNotOptimize(loss.item<float>());
    };
    if (!quick()) step();  // untimed: a GPU backend compiles its pipelines on the first step
    for (auto _ : s) step();
  } catch (const ferry::Error& e) {
    s.SkipWithError(e.what());
  }
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
