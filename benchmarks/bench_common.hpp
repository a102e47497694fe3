// benchmarks/bench_common.hpp — what the benchmark files share: the quick
// switch, and the table of ferry-vs-baseline comparisons that bench_main.cpp
// prints after Google Benchmark has run everything.
//
// Note [Benchmark ratios]
// Every ferry benchmark is registered beside a baseline that computes the same
// thing in the same process on the same data (OpenBLAS's cblas_sgemm called
// directly, std::memcpy, hand-written loops). A Comparison names the two
// benchmarks and the work one iteration does; the summary divides that work by
// the measured wall time per iteration (UseRealTime: ferry and OpenBLAS run on
// several threads) and prints ratio = ferry speed / baseline speed, so 1.00 is
// parity and 0.50 means ferry takes twice as long.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <string>
#include <vector>

#include "ferry/device.hpp"

namespace bench {

// FERRY_BENCH_QUICK=1 or --quick: small sizes, for a smoke run of a few seconds.
bool quick();
void set_quick(bool on);

enum class Metric { gflops, gbps, usec };

struct Comparison {
  std::string title;           // "gemm f32 1024x1024x1024"
  std::string ferry;           // benchmark name of the ferry variant
  std::string ferry_label;     // "ferry"
  std::string baseline;        // benchmark name of the baseline
  std::string baseline_label;  // "OpenBLAS"
  Metric metric;
  double ferry_work =
      0;  // per iteration: flops (gflops), bytes (gbps), ops (usec; 0: per iteration)
  double baseline_work = 0;
};

void add_comparison(Comparison c);
const std::vector<Comparison>& comparisons();

// Times a training step on `device`: setup(device) builds the model and returns one step;
// the first step runs untimed outside --quick (a GPU backend compiles its pipelines then); an
// unavailable device or a ferry::Error skips the benchmark with the reason.
void time_steps(benchmark::State& s, const std::string& device,
                const std::function<std::function<void()>(const ferry::Device&)>& setup);

// A training step's rows: "<base>/ferry cpu" (cpu_steps timed calls) and "<base>/ferry
// vulkan:0" (one: lavapipe's steps take seconds), each run(state, device); and, where libtorch
// was found (torch_step set), "<base>/pytorch" beside ferry's cpu. vulkan:0 is compared with
// ferry's cpu. Titles are `title` and " (cpu)" or " (vulkan:0 vs cpu)".
void register_step_rows(const std::string& base, const std::string& title, int cpu_steps,
                        const std::function<void(benchmark::State&, const std::string&)>& run,
                        const std::function<void()>& torch_step);

// "<base>/ferry <device> composition": run(state, device) under debug::CompositesOnly (what
// every device without the op's fused kernel runs), `steps` timed calls, compared with
// "<base>/ferry <device>" (register_step_rows' row, its fused kernels named by `kernels`) as
// "<title> (<device>, <kernels> vs composition)".
void register_composition_row(const std::string& base, const std::string& title, int steps,
                              const std::function<void(benchmark::State&, const std::string&)>& run,
                              const std::string& kernels, const std::string& device = "cpu");

// Each file registers its benchmarks (sizes depend on quick()).
void register_gemm();
void register_elementwise();
void register_mlp();
void register_train();     // a training step; beside PyTorch when libtorch was found
void register_conv();      // conv2d at ResNet-18's shapes and a ResNet-18 step
void register_attention();  // scaled_dot_product_attention, fused beside the composition
void register_gpt();        // a GPT training step (samples/gpt.hpp); beside PyTorch
void register_rnn();        // an LSTM training step; beside PyTorch
void register_penalty();    // a WGAN-GP critic step (second derivatives); beside PyTorch
void register_grid_sample();  // grid_sample forward and backward; beside PyTorch
void register_linalg();       // ferry/ops_linalg.hpp's factorizations; beside PyTorch (LAPACK)
void register_matvec();     // matrix-vector products (one token times a weight), each device
void register_vulkan();    // skipped when no Vulkan device is available
void register_transfer();  // the transfer planner; skipped without a Vulkan device
void register_cuda();      // built with the CUDA toolkit; skipped without a CUDA device
void register_overhead();  // per-op host overhead; beside PyTorch when libtorch was found
void register_profiler();  // the profiler's cost on the MLP step: recording against off
void register_ops();  // issue 21's ops on 16 Mi elements; beside PyTorch when libtorch was found

// A rate counter in the console output, per second of wall time: counters
// are named for the unit of work ("GFLOP", "GB"), and the console shows "/s".
inline benchmark::Counter rate(double per_iteration) {
  return benchmark::Counter(per_iteration, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace bench
