// benchmarks/bench_profiler.cpp — what ferry::profiler costs: the MLP
// training step of bench_train.cpp's sizes (784-512-512-10, batch 256,
// cross_entropy, backward, Adam) with the profiler recording, against the
// same step with it off, on the CPU and on vulkan:0 (Note [Profiler]), in
// alternating blocks (Note [Profiler overhead, paired]); the counter
// ratio_off/on is off time / on time: 1.00 is free, 0.91 costs 10%.
//
// Off against a build with no profiler hooks at all: configure with
// -DFERRY_PROFILER_HOOKS=OFF and compare this file's "off" figures across
// the two builds (docs/profiling.md has the numbers measured).
#include <fmt/format.h>

#include <chrono>
#include <map>
#include <memory>

#include "bench_common.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

constexpr std::int64_t kBatch = 256, kIn = 784, kHidden = 512, kOut = 10;

struct Step {
  std::shared_ptr<ferry::nn::Sequential> net;
  std::unique_ptr<ferry::optim::Adam> opt;
  ferry::Tensor x, y;

  explicit Step(const ferry::Device& dev) {
    ferry::manual_seed(7);
    const ferry::TensorOptions on{.device = dev};
    net = std::make_shared<ferry::nn::Sequential>(
        std::make_shared<ferry::nn::Linear>(kIn, kHidden, true, on),
        std::make_shared<ferry::nn::ReLU>(),
        std::make_shared<ferry::nn::Linear>(kHidden, kHidden, true, on),
        std::make_shared<ferry::nn::ReLU>(),
        std::make_shared<ferry::nn::Linear>(kHidden, kOut, true, on));
    opt = std::make_unique<ferry::optim::Adam>(net->parameters(),
                                               ferry::optim::AdamOptions{.lr = 1e-3});
    x = ferry::randn({kBatch, kIn}).to(dev);
    y = ferry::randint(0, kOut, {kBatch}).to(dev);
  }
  float run() {
    opt->zero_grad();
    ferry::Tensor loss = ferry::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt->step();
    return loss.item<float>();  // waits for the device, as a training loop that logs does
  }
};

// Note [Profiler overhead, paired]
// This machine's speed drifts by more than the profiler costs (steps of the
// same model took 6.0 to 8.9 ms over a minute, on or off), so two benchmarks
// run one after the other measured the drift, not the profiler. Each
// iteration here is a pair of blocks: kBlock steps with the profiler off,
// then kBlock steps recorded from start() to stop() (its whole cost:
// recording, waiting for the device's timestamps, building the Profile). The
// benchmark's time is the recorded steps'; the counters give the steps' time
// off (the baseline, measured in the same pairs) and the ratio off / on.
constexpr int kBlock = 4;

void bm_paired(benchmark::State& state, const std::string& device) {
  if (!ferry::is_available(device)) {
    state.SkipWithError((device + " is not available").c_str());
    return;
  }
  static std::map<std::string, std::unique_ptr<Step>> steps;  // one model per device, warmed
  auto& s = steps[device];
  if (!s) {
    s = std::make_unique<Step>(ferry::Device(device));
    for (int i = 0; i < 3; ++i) s->run();
  }
  using Clock = std::chrono::steady_clock;
  double off = 0, on = 0, events = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (int i = 0; i < kBlock; ++i) benchmark::DoNotOptimize(s->run());
    const auto t1 = Clock::now();
    try {
      ferry::profiler::start();
    } catch (const ferry::Error& e) {  // a build without the hooks
      state.SkipWithError(e.what());
      return;
    }
    for (int i = 0; i < kBlock; ++i) benchmark::DoNotOptimize(s->run());
    events += double(ferry::profiler::stop().events().size()) / kBlock;
    const auto t2 = Clock::now();
    off += std::chrono::duration<double>(t1 - t0).count() / kBlock;
    on += std::chrono::duration<double>(t2 - t1).count() / kBlock;
    state.SetIterationTime(std::chrono::duration<double>(t2 - t1).count() / kBlock);
  }
  const double n = double(state.iterations());
  state.counters["off_ms"] = off / n * 1e3;
  state.counters["ratio_off/on"] = off / on;
  state.counters["events/step"] = events / n;
}

// The step with the profiler off only: run it in a build configured with
// -DFERRY_PROFILER_HOOKS=OFF and in a default build to compare the hooks' cost.
void bm_off(benchmark::State& state, const std::string& device) {
  if (!ferry::is_available(device)) {
    state.SkipWithError((device + " is not available").c_str());
    return;
  }
  Step s{ferry::Device(device)};
  for (int i = 0; i < 3; ++i) s.run();
  for (auto _ : state) benchmark::DoNotOptimize(s.run());
}

}  // namespace

void register_profiler() {
  const std::string p = fmt::format("profiler/train_step_mlp{}-{}-{}-{}/batch{}/", kIn, kHidden,
                                    kHidden, kOut, kBatch);
  for (const std::string device : {"cpu", "vulkan:0"}) {
    const std::string name = device == "cpu" ? "cpu" : "vulkan0";
    auto* paired =
        benchmark::RegisterBenchmark((p + name + "/recording_vs_off").c_str(),
                                     [device](benchmark::State& st) { bm_paired(st, device); });
    paired->UseManualTime()->Unit(benchmark::kMillisecond);  // Note [Profiler overhead, paired]
    auto* off = benchmark::RegisterBenchmark(
        (p + name + "/off").c_str(), [device](benchmark::State& st) { bm_off(st, device); });
    off->UseRealTime()->Unit(benchmark::kMillisecond);
    if (!quick()) paired->MinTime(4.0), off->MinTime(2.0);
  }
}

}  // namespace bench
