// benchmarks/bench_matvec.cpp — issue 23's matrix-vector figures, the cost of every generated
// token: x [S, 4096] times the transpose of a weight [14336, 4096] (S = 1 and 8; a 1024-row
// weight with --quick), as a linear layer computes it, in f32, f16 and bf16, on the CPU
// and on vulkan:0 and cuda:0 where they are available (Note [Matrix-vector products]); and
// rows "x·W": the same weight kept as [4096, 14336] and used as x · W, as GPT-2's checkpoints
// keep theirs (Note [Weights along the output on the CPU]).
// Baselines in this process on the same numbers: OpenBLAS's cblas_sgemv / cblas_sgemm (f32),
// std::memcpy of the weight's bytes (how fast this machine moves them: a matrix-vector product
// reads the weight once and cannot go faster than reading it; lavapipe's memory is this
// machine's), and on a GPU a device-to-device copy of the weight (ferry's clone, the
// backend's copy command). The figure is the weight's bytes per second; a GPU call is waited
// for every iteration, as a generated token waits for the last.
#include <cblas.h>
#include <fmt/format.h>

#include <cstring>
#include <map>
#include <memory>
#include <tuple>

#include "bench_common.hpp"
#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

constexpr std::int64_t kK = 4096;

std::int64_t rows() { return quick() ? 1024 : 14336; }

struct MatvecData {
  ferry::Tensor w_t, x;           // the weight as matmul's B ([K, rows]) and the activations
  std::vector<float> hw, hx, hy;  // f32 copies for OpenBLAS
  std::vector<char> copy;         // memcpy's destination
};

// along_output: the weight stored [K, rows] (x · W), else [rows, K] (x · Wᵀ, w_t a view).
MatvecData& data(ferry::DType dt, std::int64_t S, const std::string& device = "cpu",
                 bool along_output = false) {
  static std::map<std::tuple<int, std::int64_t, std::string, bool>, std::unique_ptr<MatvecData>>
      cache;
  auto& d = cache[{int(dt), S, device, along_output}];
  if (!d) {
    d = std::make_unique<MatvecData>();
    ferry::manual_seed(7);
    const ferry::Tensor w =
        (ferry::randn(along_output ? ferry::Shape{kK, rows()} : ferry::Shape{rows(), kK}) * 0.02)
            .to(dt)
            .to(ferry::Device(device));
    d->w_t = along_output ? w : w.transpose(0, 1);
    d->x = ferry::randn({S, kK}).to(dt).to(ferry::Device(device));
    if (dt == ferry::DType::f32) {
      d->hw = w.to_vector<float>();
      d->hx = d->x.to_vector<float>();
      d->hy.resize(std::size_t(S * rows()));
    }
  }
  return *d;
}

double weight_bytes(ferry::DType dt) { return double(rows() * kK * ferry::dtype_size(dt)); }

void run_ferry(benchmark::State& s, ferry::DType dt, std::int64_t S, const std::string& device,
               bool along_output) {
  try {
    MatvecData& d = data(dt, S, device, along_output);
    const ferry::Device dev(device);
    ferry::synchronize(ferry::matmul(d.x, d.w_t).device());  // untimed: pipelines compile
    for (auto _ : s) {
      ferry::Tensor y = ferry::matmul(d.x, d.w_t);
      ferry::synchronize(dev);
      benchmark::DoNotOptimize(y.storage().get());
    }
  } catch (const ferry::Error& e) {
    s.SkipWithError(e.what());
  }
}

// A copy of the weight on the device, by the backend's own copy.
void run_device_copy(benchmark::State& s, ferry::DType dt, const std::string& device) {
  MatvecData& d = data(dt, 1, device);
  const ferry::Tensor w = d.w_t.transpose(0, 1);
  const ferry::Device dev(device);
  ferry::synchronize(w.clone().device());
  for (auto _ : s) {
    ferry::Tensor c = w.clone();
    ferry::synchronize(dev);
    benchmark::DoNotOptimize(c.storage().get());
  }
}

void run_openblas(benchmark::State& s, std::int64_t S, bool along_output) {
  MatvecData& d = data(ferry::DType::f32, S, "cpu", along_output);
  const int n = int(rows()), k = int(kK);
  for (auto _ : s) {
    if (S == 1 && along_output)
      cblas_sgemv(CblasRowMajor, CblasTrans, k, n, 1.0f, d.hw.data(), n, d.hx.data(), 1, 0.0f,
                  d.hy.data(), 1);
    else if (S == 1)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, d.hw.data(), k, d.hx.data(), 1, 0.0f,
                  d.hy.data(), 1);
    else if (along_output)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(S), n, k, 1.0f, d.hx.data(), k,
                  d.hw.data(), n, 0.0f, d.hy.data(), n);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(S), n, k, 1.0f, d.hx.data(), k,
                  d.hw.data(), k, 0.0f, d.hy.data(), n);
    benchmark::DoNotOptimize(d.hy.data());
  }
}

void run_memcpy(benchmark::State& s, ferry::DType dt) {
  MatvecData& d = data(dt, 1);
  const ferry::Tensor w = d.w_t.transpose(0, 1);
  const auto* src = static_cast<const char*>(w.storage()->buffer().host_ptr());
  const std::size_t bytes = std::size_t(weight_bytes(dt));
  d.copy.resize(bytes);
  for (auto _ : s) {
    std::memcpy(d.copy.data(), src, bytes);
    benchmark::DoNotOptimize(d.copy.data());
  }
}

}  // namespace

void register_matvec() {
  auto reg = [](const std::string& name, std::function<void(benchmark::State&)> fn) {
    benchmark::RegisterBenchmark(name.c_str(), std::move(fn))
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  };
  // (a benchmark skipped for want of a device fails the run: registered where it runs)
  std::vector<std::string> devices{"cpu"};
  for (const char* gpu : {"vulkan:0", "cuda:0"})
    if (ferry::is_available(gpu)) devices.push_back(gpu);
  for (const ferry::DType dt : {ferry::DType::f32, ferry::DType::f16, ferry::DType::bf16}) {
    const std::string dn(ferry::dtype_name(dt));
    reg("matvec/" + dn + "/memcpy", [dt](benchmark::State& s) { run_memcpy(s, dt); });
    for (const std::string& device : devices) {
      const std::string copy = fmt::format("matvec/{}/copy {}", dn, device);
      if (device != "cpu")
        reg(copy, [dt, device](benchmark::State& s) { run_device_copy(s, dt, device); });
      for (const auto& [S, along] :
           {std::pair{std::int64_t(1), false}, std::pair{std::int64_t(8), false},
            std::pair{std::int64_t(1), true}, std::pair{std::int64_t(8), true}}) {
        const std::string base = fmt::format("matvec/{}/S{}{}", dn, S, along ? " x·W" : "");
        const std::string ferry = base + "/ferry " + device;
        const std::string title =
            along
                ? fmt::format("matmul [{}, {}] x [{}, {}] {} ({})", S, kK, kK, rows(), dn, device)
                : fmt::format("matmul [{}, {}] x [{}, {}]ᵀ {} ({})", S, kK, rows(), kK, dn, device);
        reg(ferry, [dt, S = S, along = along, device](benchmark::State& s) {
          run_ferry(s, dt, S, device, along);
        });
        auto compare = [&](const std::string& what, const std::string& baseline,
                           const std::string& label, Metric metric) {
          const double work = metric == Metric::gbps ? weight_bytes(dt) : 0;
          add_comparison({.title = title + " vs " + what,
                          .ferry = ferry,
                          .ferry_label = "ferry",
                          .baseline = baseline,
                          .baseline_label = label,
                          .metric = metric,
                          .ferry_work = work,
                          .baseline_work = work});
        };
        compare("memcpy of the weight", "matvec/" + dn + "/memcpy", "memcpy", Metric::gbps);
        if (device != "cpu")
          compare("a device copy of the weight", copy, "ferry clone on " + device, Metric::gbps);
        if (dt == ferry::DType::f32) {
          if (device == "cpu")
            reg(base + "/openblas",
                [S = S, along = along](benchmark::State& s) { run_openblas(s, S, along); });
          compare(S == 1 ? "sgemv" : "sgemm", base + "/openblas",
                  S == 1 ? "OpenBLAS sgemv" : "OpenBLAS sgemm", Metric::gbps);
        } else if (device == "cpu") {
          compare("f32 OpenBLAS on the same values",
                  fmt::format("matvec/f32/S{}{}/openblas", S, along ? " x·W" : ""), "OpenBLAS f32",
                  Metric::usec);
        }
      }
    }
  }
}

}  // namespace bench
