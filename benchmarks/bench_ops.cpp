// benchmarks/bench_ops.cpp — issue 21's ops on 16 Mi f32 elements ([4096,
// 4096]; 1 Mi with --quick): clamp, masked_fill, logsumexp over rows, erf,
// atan2, remainder, cumsum (rows, and one 16 Mi line), sort and topk over
// rows, scatter_reduce amax into 64 columns, layer_norm's forward and backward over rows
// (on the CPU also beside its composition), and GELU's forward and backward, each beside
// PyTorch (libtorch) on the CPU in this process, on vulkan:0 beside ferry's CPU (on lavapipe both
// are the CPU), and, where a GPU is, on cuda:0 beside a device-to-device cudaMemcpyAsync of the
// same bytes (the bandwidth ceiling of a memory-bound op on that GPU).
// Without libtorch (Debian: libtorch-dev) the CPU figures are compared with
// a 2-thread memcpy of the same bytes, the bandwidth ceiling. Inputs are
// made once; each iteration is one call, its output allocated by the op.
#include "bench_ops.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "bench_common.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
#ifdef FERRY_BENCH_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace bench {
namespace {

using namespace ops;

struct Data {
  ferry::Tensor x, y, mask, index;
  ferry::Tensor xg, w, b, g;  // layer_norm's: x and the parameters requiring grad, an upstream g
};

Data& data(const std::string& device) {
  static std::map<std::string, Data> by_device;
  auto it = by_device.find(device);
  if (it == by_device.end()) {
    ferry::manual_seed(0);
    Data d;
    d.x = ferry::randn({rows(quick()), kCols});
    d.y = ferry::rand({rows(quick()), kCols}) + 0.5;
    d.mask = ferry::gt(ferry::rand({rows(quick()), kCols}), 0.5);
    d.index = ferry::randint(0, kBuckets, {rows(quick()), kCols});
    d.w = ferry::rand({kCols});
    d.b = ferry::randn({kCols});
    d.g = ferry::randn({rows(quick()), kCols});
    if (device != "cpu") {
      const ferry::Device dev(device);
      d.x = d.x.to(dev), d.y = d.y.to(dev), d.mask = d.mask.to(dev), d.index = d.index.to(dev);
      d.w = d.w.to(dev), d.b = d.b.to(dev), d.g = d.g.to(dev);
    }
    d.xg = d.x.detach().requires_grad_();
    d.w.requires_grad_(), d.b.requires_grad_();
    it = by_device.emplace(device, std::move(d)).first;
  }
  return it->second;
}

ferry::Tensor run_op(const std::string& name, const Data& d) {
  if (name == kLayerNorm) {
    ferry::layer_norm(d.xg, {kCols}, d.w, d.b).backward(d.g);
    ferry::Tensor dx = d.xg.grad();
    for (const ferry::Tensor* t : {&d.xg, &d.w, &d.b}) t->set_grad({});
    return dx;
  }
  if (name == kGelu) {
    ferry::gelu(d.xg).backward(d.g);
    ferry::Tensor dx = d.xg.grad();
    d.xg.set_grad({});
    return dx;
  }
  if (name == "clamp") return ferry::clamp(d.x, -0.5, 0.5);
  if (name == "masked_fill") return ferry::masked_fill(d.x, d.mask, 0.0);
  if (name == "logsumexp dim=-1") return ferry::logsumexp(d.x, {-1});
  if (name == "erf") return ferry::erf(d.x);
  if (name == "atan2") return ferry::atan2(d.x, d.y);
  if (name == "cumsum dim=-1") return ferry::cumsum(d.x, -1);
  if (name == "cumsum flat") return ferry::cumsum(d.x.reshape({-1}), 0);
  if (name == "sort dim=-1") return ferry::sort(d.x, -1).values;
  if (name == "topk k=64 dim=-1") return ferry::topk(d.x, 64, -1).values;
  if (name == "scatter_reduce amax")
    return ferry::scatter_reduce(ferry::zeros({d.x.size(0), kBuckets}, {.device = d.x.device()}), 1,
                                 d.index, d.x, "amax");
  return ferry::remainder(d.x, d.y);
}

void run_on(benchmark::State& s, const std::string& name, const std::string& device,
            bool composed = false) {
  if (!ferry::is_available(device)) {
    s.SkipWithError((device + " is not available").c_str());
    return;
  }
  const Data& d = data(device);
  std::optional<ferry::debug::CompositesOnly> composition;
  if (composed) composition.emplace();
  try {
    for (auto _ : s) {
      ferry::Tensor out = run_op(name, d);
      if (device != "cpu") ferry::synchronize(out.device());
      benchmark::DoNotOptimize(out);
    }
  } catch (const ferry::Error& e) {  // a case the device refuses is reported, not fatal
    s.SkipWithError(e.what());
  }
}

// A 2-thread memcpy of `bytes`: the bandwidth a memory-bound op can reach.
void memcpy_2t(benchmark::State& s, double bytes) {
  const std::size_t n = std::size_t(bytes / 2);  // read and write
  static std::unique_ptr<char[]> src, dst;
  static std::size_t size = 0;
  if (size != n) {
    src.reset(new char[n]), dst.reset(new char[n]), size = n;
    std::memset(src.get(), 1, n), std::memset(dst.get(), 0, n);
  }
  for (auto _ : s) {
#pragma omp parallel num_threads(2)
    {
      const std::size_t half = n / 2, at = std::size_t(omp_get_thread_num()) * half;
      std::memcpy(dst.get() + at, src.get() + at, omp_get_thread_num() == 1 ? n - half : half);
    }
    benchmark::ClobberMemory();
  }
}

#ifdef FERRY_BENCH_HAVE_CUDA
// A device-to-device copy of `bytes` (half read, half written) on cuda:0.
void cuda_copy(benchmark::State& s, double bytes) {
  const std::size_t n = std::size_t(bytes / 2);
  void *src = nullptr, *dst = nullptr;
  if (cudaMalloc(&src, n) != cudaSuccess || cudaMalloc(&dst, n) != cudaSuccess) {
    cudaFree(src);
    return s.SkipWithError("cudaMalloc failed");
  }
  for (auto _ : s) {
    cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, nullptr);
    cudaDeviceSynchronize();
  }
  cudaFree(src), cudaFree(dst);
}
#endif

}  // namespace

void register_ops() {
  const double n = double(rows(quick()) * kCols);
#ifdef FERRY_BENCH_HAVE_TORCH
  ops::torch_setup(quick());
#endif
  for (const OpCase& c : cases()) {
    const std::string name = c.name, base = "ops/" + name;
    const double bytes = n * c.bytes_per_element;
    auto run = [&](const std::string& label, std::function<void(benchmark::State&)> fn) {
      benchmark::RegisterBenchmark((base + "/" + label).c_str(), std::move(fn))
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    };
    // ferry's figure on `ferry` (a label of base) beside `baseline`'s, same bytes.
    auto compare = [&](const std::string& where, const std::string& ferry,
                       const std::string& ferry_label, const std::string& baseline,
                       const std::string& baseline_label) {
      add_comparison(
          {.title = fmt::format("{} f32 [{}, {}] ({})", name, rows(quick()), kCols, where),
           .ferry = base + "/" + ferry,
           .ferry_label = ferry_label,
           .baseline = base + "/" + baseline,
           .baseline_label = baseline_label,
           .metric = Metric::gbps,
           .ferry_work = bytes,
           .baseline_work = bytes});
    };
    std::vector<std::string> devices = {"cpu", "vulkan:0"};
    if (ferry::is_available("cuda:0")) devices.push_back("cuda:0");
    for (const std::string& device : devices)
      run("ferry " + device, [name, device](benchmark::State& s) { run_on(s, name, device); });
#ifdef FERRY_BENCH_HAVE_TORCH
    run("pytorch", [name](benchmark::State& s) {
      for (auto _ : s) ops::torch_run(name);
    });
    compare("cpu", "ferry cpu", "ferry", "pytorch", "PyTorch (libtorch)");
#endif
    if (name == kLayerNorm) {
      run("ferry cpu composition",
          [name](benchmark::State& s) { run_on(s, name, "cpu", /*composed=*/true); });
      compare("cpu, fused backward vs composition", "ferry cpu", "ferry (layer_norm_backward)",
              "ferry cpu composition", "ferry's composition (debug::CompositesOnly)");
    }
    run("memcpy 2 threads", [bytes](benchmark::State& s) { memcpy_2t(s, bytes); });
    compare("cpu, bandwidth", "ferry cpu", "ferry", "memcpy 2 threads",
            "memcpy, 2 threads, same bytes");
    compare("vulkan:0 vs cpu", "ferry vulkan:0", "ferry vulkan:0", "ferry cpu", "ferry cpu");
#ifdef FERRY_BENCH_HAVE_CUDA
    if (devices.back() != "cuda:0") continue;
    run("cudaMemcpy D2D", [bytes](benchmark::State& s) { cuda_copy(s, bytes); });
    compare("cuda:0, bandwidth", "ferry cuda:0", "ferry cuda:0", "cudaMemcpy D2D",
            "cudaMemcpy D2D, same bytes");
#endif
  }
}

}  // namespace bench
