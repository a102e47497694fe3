// benchmarks/bench_gpt.cpp — issue 23's GPT figure: one training step of ferry-gpt's model
// (samples/gpt.hpp: 4 pre-norm blocks, width 128, causal scaled_dot_product_attention, tied
// embeddings) at batch 16 and sequence 256 (batch 4, sequence 64 with --quick): zero_grad,
// forward, cross_entropy, backward, clip_grad_norm_, AdamW step. ferry's CPU beside PyTorch's
// (libtorch, this process), and vulkan:0 beside ferry's CPU.
#include "bench_gpt.hpp"

#include <fmt/format.h>

#include <optional>

#include "bench_common.hpp"
#include "ferry/ferry.hpp"
#include "gpt.hpp"

namespace bench {
namespace {

using namespace gpt;

// `amp`: each forward and loss under autocast to bf16 (no loss scaling: bf16 has f32's range).
void run_step(benchmark::State& s, const std::string& device, bool amp = false) {
  time_steps(s, device, [amp](const ferry::Device& dev) -> std::function<void()> {
    const Sizes z = sizes(quick());
    ferry::manual_seed(0);
    auto model = std::make_shared<sample::Gpt>(sample::GptConfig{.vocab_size = z.vocab,
                                                                 .block_size = z.seq,
                                                                 .n_layer = z.layers,
                                                                 .n_head = z.heads,
                                                                 .n_embd = z.embd},
                                               ferry::TensorOptions{.device = dev});
    auto opt = std::make_shared<ferry::optim::AdamW>(
        model->parameters(), ferry::optim::AdamWOptions{.lr = 3e-4, .beta2 = 0.95});
    const ferry::Tensor x = ferry::randint(0, z.vocab, {z.batch, z.seq}).to(dev);
    const ferry::Tensor y = ferry::randint(0, z.vocab, {z.batch, z.seq}).to(dev);
    return [model, opt, x, y, amp, dev] {
      opt->zero_grad();
      std::optional<ferry::Autocast> autocast;
      if (amp) autocast.emplace(dev.type(), ferry::DType::bf16);
      ferry::Tensor loss = sample::gpt_loss(model->forward(x), y);
      autocast.reset();
      loss.backward();
      ferry::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      opt->step();
      benchmark::DoNotOptimize(loss.item<float>());
    };
  });
}

}  // namespace

void register_gpt() {
#ifdef FERRY_BENCH_HAVE_TORCH
  gpt::torch_setup(quick());
#endif
  const Sizes z = sizes(quick());
  const std::string base = "gpt step";
  const std::string title =
      fmt::format("GPT training step ({} layers, width {}), batch {}, sequence {}", z.layers,
                  z.embd, z.batch, z.seq);
  // Seconds per step: a fixed count (lavapipe's step takes tens of seconds: one); --quick, as
  // CI's smoke run, one each.
  const int steps = quick() ? 1 : 5;
#ifdef FERRY_BENCH_HAVE_TORCH
  const std::function<void()> torch_step = gpt::torch_step;
#else
  const std::function<void()> torch_step;
#endif
  register_step_rows(
      base, title, steps,
      [](benchmark::State& s, const std::string& device) { run_step(s, device); }, torch_step);
  // cuda:0 in f32 and with autocast (PyTorch's side of these: docs/gpu-results.md); registered
  // where it runs, as a benchmark skipped for want of a device fails the run.
  if (ferry::is_available("cuda:0"))
    for (const bool amp : {false, true})
      benchmark::RegisterBenchmark((base + "/ferry cuda:0" + (amp ? " autocast bf16" : "")).c_str(),
                                   [amp](benchmark::State& s) { run_step(s, "cuda:0", amp); })
          ->Unit(benchmark::kMillisecond)
          ->Iterations(quick() ? 1 : 20)
          ->UseRealTime();
}

}  // namespace bench
