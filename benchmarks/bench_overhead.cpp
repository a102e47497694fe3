// benchmarks/bench_overhead.cpp — per-op host overhead on the CPU, beside
// PyTorch (libtorch) in the same process: 20,000 adds of 64 floats and 5,000
// relu(matmul) of [8, 64] x [64, 64], without and with autograd recording.
// The ops are tiny, so the time is the framework's own work per op (op table
// lookup, dtype rule, shape checks, output allocation, the autograd node), the
// cost a model of many small layers pays on every step. Without libtorch
// (Debian: libtorch-dev) the ferry figures are printed alone.
#include "bench_overhead.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <optional>

#include "bench_common.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

using namespace overhead;

struct Data {
  ferry::Tensor a, b, x, w;
  explicit Data(bool grad) {
    ferry::manual_seed(0);
    a = ferry::randn({kAddN}).requires_grad_(grad);
    b = ferry::randn({kAddN});
    x = ferry::randn({kM, kK});
    w = ferry::randn({kK, kN}).requires_grad_(grad);
  }
};

Data& data(bool grad) {
  static Data with_grad(true), without(false);
  return grad ? with_grad : without;
}

void ferry_adds(bool grad) {
  Data& d = data(grad);
  std::optional<ferry::NoGradGuard> no_grad;
  if (!grad) no_grad.emplace();
  for (int i = 0; i < kAdds; ++i) benchmark::DoNotOptimize(d.a + d.b);
}

void ferry_matmul_relu(bool grad) {
  Data& d = data(grad);
  std::optional<ferry::NoGradGuard> no_grad;
  if (!grad) no_grad.emplace();
  for (int i = 0; i < kMatmuls; ++i) benchmark::DoNotOptimize(ferry::relu(ferry::matmul(d.x, d.w)));
}

}  // namespace

void register_overhead() {
  struct Row {
    const char* what;
    int ops;
    void (*ferry)(bool);
    void (*torch)(bool);
  };
#ifdef FERRY_BENCH_HAVE_TORCH
  const Row rows[] = {{"add 64 f32", kAdds, ferry_adds, torch_adds},
                      {"relu(matmul 8x64x64) f32", kMatmuls, ferry_matmul_relu, torch_matmul_relu}};
#else
  const Row rows[] = {{"add 64 f32", kAdds, ferry_adds, nullptr},
                      {"relu(matmul 8x64x64) f32", kMatmuls, ferry_matmul_relu, nullptr}};
#endif
  for (const Row& r : rows)
    for (bool grad : {false, true}) {
      const std::string name = fmt::format("overhead/{}/{}", r.what, grad ? "grad" : "nograd");
      auto run = [f = r.ferry, grad](benchmark::State& s) {
        for (auto _ : s) f(grad);
      };
      benchmark::RegisterBenchmark((name + "/ferry").c_str(), run)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      const std::string title = fmt::format("per-op overhead: {} x{}, {} (cpu)", r.what, r.ops,
                                            grad ? "with grad" : "no grad");
      if (r.torch) {
        auto trun = [f = r.torch, grad](benchmark::State& s) {
          for (auto _ : s) f(grad);
        };
        benchmark::RegisterBenchmark((name + "/pytorch").c_str(), trun)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        add_comparison({.title = title,
                        .ferry = name + "/ferry",
                        .ferry_label = "ferry",
                        .baseline = name + "/pytorch",
                        .baseline_label = "PyTorch (libtorch)",
                        .metric = Metric::usec,
                        .ferry_work = double(r.ops),
                        .baseline_work = double(r.ops)});
      }
    }
}

}  // namespace bench
