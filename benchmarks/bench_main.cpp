// benchmarks/bench_main.cpp — ferry-bench's main: registers every benchmark,
// runs them with Google Benchmark's usual flags, then prints one line per
// comparison (Note [Benchmark ratios] in bench_common.hpp), e.g.
//   gemm f32 1024x1024x1024: ferry 95.1 GFLOP/s, OpenBLAS 97.0 GFLOP/s, ratio 0.98
//
// Usage: ferry-bench [--quick] [--benchmark_filter=...] [other --benchmark_* flags]
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bench_common.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

bool g_quick = false;
std::vector<Comparison> g_comparisons;

// The console reporter, keeping every measured run by its registered name.
class RecordingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs)
      if (r.run_type == Run::RT_Iteration && !r.error_occurred && r.iterations > 0)
        runs_[r.run_name.function_name] = r;
      else if (r.error_occurred)
        errors_[r.run_name.function_name] = r.error_message;
    ConsoleReporter::ReportRuns(runs);
  }
  const Run* find(const std::string& name) const {
    auto it = runs_.find(name);
    return it == runs_.end() ? nullptr : &it->second;
  }
  std::string error(const std::string& name) const {
    auto it = errors_.find(name);
    return it == errors_.end() ? "not run" : it->second;
  }
  bool any_error() const { return !errors_.empty(); }

 private:
  std::map<std::string, Run> runs_;
  std::map<std::string, std::string> errors_;
};

double seconds_per_iteration(const benchmark::BenchmarkReporter::Run& r) {
  return r.real_accumulated_time / double(r.iterations);
}

std::string figure(Metric m, double work, double seconds) {
  char buf[64];
  switch (m) {
    case Metric::gflops:
      std::snprintf(buf, sizeof buf, "%.1f GFLOP/s", work / seconds / 1e9);
      break;
    case Metric::gbps:
      std::snprintf(buf, sizeof buf, "%.2f GB/s", work / seconds / 1e9);
      break;
    case Metric::usec:  // per iteration, or per op when the work counts ops
      if (work > 0)
        std::snprintf(buf, sizeof buf, "%.2f us per op", seconds * 1e6 / work);
      else
        std::snprintf(buf, sizeof buf, "%.0f us", seconds * 1e6);
      break;
  }
  return buf;
}

void print_summary(const RecordingReporter& rep) {
  std::printf(
      "\nferry vs baseline (ratio = ferry speed / baseline speed; 1.00 is parity; wall time; "
      "%d OpenMP threads)\n",
      omp_get_max_threads());
  for (const Comparison& c : g_comparisons) {
    const auto* f = rep.find(c.ferry);
    const auto* b = rep.find(c.baseline);
    if (!f || !b) {
      if (rep.find(c.ferry) || rep.find(c.baseline) || rep.error(c.ferry) != "not run" ||
          rep.error(c.baseline) != "not run")
        std::printf("%s: incomplete (%s: %s; %s: %s)\n", c.title.c_str(), c.ferry_label.c_str(),
                    f ? "ok" : rep.error(c.ferry).c_str(), c.baseline_label.c_str(),
                    b ? "ok" : rep.error(c.baseline).c_str());
      continue;  // filtered out
    }
    double fs = seconds_per_iteration(*f), bs = seconds_per_iteration(*b);
    double ratio =
        c.metric == Metric::usec ? bs / fs : (c.ferry_work / fs) / (c.baseline_work / bs);
    std::printf("%s: %s %s, %s %s, ratio %.2f\n", c.title.c_str(), c.ferry_label.c_str(),
                figure(c.metric, c.ferry_work, fs).c_str(), c.baseline_label.c_str(),
                figure(c.metric, c.baseline_work, bs).c_str(), ratio);
  }
}

}  // namespace

bool quick() { return g_quick; }
void set_quick(bool on) { g_quick = on; }
void add_comparison(Comparison c) { g_comparisons.push_back(std::move(c)); }
const std::vector<Comparison>& comparisons() { return g_comparisons; }

void time_steps(benchmark::State& s, const std::string& device,
                const std::function<std::function<void()>(const ferry::Device&)>& setup) {
  if (!ferry::is_available(device)) return s.SkipWithError((device + " is not available").c_str());
  try {
    const std::function<void()> step = setup(ferry::Device(device));
    if (!quick()) step();
    for (auto _ : s) step();
  } catch (const ferry::Error& e) {
    s.SkipWithError(e.what());
  }
}

void register_step_rows(const std::string& base, const std::string& title, int cpu_steps,
                        const std::function<void(benchmark::State&, const std::string&)>& run,
                        const std::function<void()>& torch_step) {
  for (const std::string device : {"cpu", "vulkan:0"})
    benchmark::RegisterBenchmark((base + "/ferry " + device).c_str(),
                                 [run, device](benchmark::State& s) { run(s, device); })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(device == "cpu" ? cpu_steps : 1)
        ->UseRealTime();
  if (torch_step) {
    benchmark::RegisterBenchmark((base + "/pytorch").c_str(),
                                 [torch_step](benchmark::State& s) {
                                   for (auto _ : s) torch_step();
                                 })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(cpu_steps)
        ->UseRealTime();
    add_comparison({.title = title + " (cpu)",
                    .ferry = base + "/ferry cpu",
                    .ferry_label = "ferry",
                    .baseline = base + "/pytorch",
                    .baseline_label = "PyTorch (libtorch)",
                    .metric = Metric::usec});
  }
  add_comparison({.title = title + " (vulkan:0 vs cpu)",
                  .ferry = base + "/ferry vulkan:0",
                  .ferry_label = "ferry vulkan:0",
                  .baseline = base + "/ferry cpu",
                  .baseline_label = "ferry cpu",
                  .metric = Metric::usec});
}

void register_composition_row(const std::string& base, const std::string& title, int steps,
                              const std::function<void(benchmark::State&, const std::string&)>& run,
                              const std::string& kernels, const std::string& device) {
  benchmark::RegisterBenchmark((base + "/ferry " + device + " composition").c_str(),
                               [run, device](benchmark::State& s) {
                                 ferry::debug::CompositesOnly composition;
                                 run(s, device);
                               })
      ->Unit(benchmark::kMillisecond)
      ->Iterations(steps)
      ->UseRealTime();
  add_comparison({.title = title + " (" + device + ", " + kernels + " vs composition)",
                  .ferry = base + "/ferry " + device,
                  .ferry_label = "ferry (" + kernels + ")",
                  .baseline = base + "/ferry " + device + " composition",
                  .baseline_label = "ferry's composition (debug::CompositesOnly)",
                  .metric = Metric::usec});
}

}  // namespace bench

int main(int argc, char** argv) {
  const char* env = std::getenv("FERRY_BENCH_QUICK");
  bool quick = env && *env && std::string_view(env) != "0";
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else
      args.push_back(argv[i]);
  }
  int n = int(args.size());
  const int threads = omp_get_max_threads();
  bench::set_quick(quick);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;

  std::string cpu;
  for (const ferry::DeviceInfo& d : ferry::devices())
    if (d.device == "cpu") cpu = d.name + ", " + d.driver;
  std::printf("ferry-bench%s on %s\n", quick ? " (quick sizes)" : "", cpu.c_str());

  bench::register_gemm();
  bench::register_elementwise();
  bench::register_mlp();
  bench::register_train();
  bench::register_overhead();
  bench::register_ops();
  bench::register_profiler();
  bench::register_conv();
  bench::register_attention();
  bench::register_gpt();
  bench::register_rnn();
  bench::register_penalty();
  bench::register_grid_sample();
  bench::register_linalg();
  bench::register_matvec();
  bench::register_vulkan();
  bench::register_transfer();
#ifdef FERRY_BENCH_HAVE_CUDA
  bench::register_cuda();
#endif
  // libtorch's first op (some registrations set up their baselines) sets the main thread's
  // OpenMP pool to libtorch's default, the physical cores: one on a 2-vCPU VM. ferry's kernels
  // and libtorch's both run on that pool, so the count the process started with is restored
  // for both.
  omp_set_num_threads(threads);

  bench::RecordingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  bench::print_summary(reporter);
  return reporter.any_error() ? 1 : 0;
}
