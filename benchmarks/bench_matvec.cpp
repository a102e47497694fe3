// benchmarks/bench_matvec.cpp — issue 23's matrix-vector figures, the cost of every generated
// token: x [S, 4096] times the transpose of a weight [14336, 4096] (S = 1 and 8; a 1024-row
// weight with --quick), as a linear layer computes it, in f32, f16 and bf16, on the CPU
// (Note [Matrix-vector products on the CPU]). Baselines in this process on the same numbers:
// OpenBLAS's cblas_sgemv / cblas_sgemm (f32), and std::memcpy of the weight's bytes (how fast
// this machine moves them: a matrix-vector product reads the weight once and cannot go faster
// than reading it). The figure is the weight's bytes per second.
#include <cblas.h>
#include <fmt/format.h>

#include <cstring>
#include <map>
#include <memory>

#include "bench_common.hpp"
#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

constexpr std::int64_t kK = 4096;

std::int64_t rows() { return quick() ? 1024 : 14336; }

struct MatvecData {
  ferry::Tensor w_t, x;           // the weight's transpose (a view) and the activations
  std::vector<float> hw, hx, hy;  // f32 copies for OpenBLAS
  std::vector<char> copy;         // memcpy's destination
};

MatvecData& data(ferry::DType dt, std::int64_t S) {
  static std::map<std::pair<int, std::int64_t>, std::unique_ptr<MatvecData>> cache;
  auto& d = cache[{int(dt), S}];
  if (!d) {
    d = std::make_unique<MatvecData>();
    ferry::manual_seed(7);
    const ferry::Tensor w = (ferry::randn({rows(), kK}) * 0.02).to(dt);
    d->w_t = w.transpose(0, 1);
    d->x = ferry::randn({S, kK}).to(dt);
    if (dt == ferry::DType::f32) {
      d->hw = w.to_vector<float>();
      d->hx = d->x.to_vector<float>();
      d->hy.resize(std::size_t(S * rows()));
    }
  }
  return *d;
}

double weight_bytes(ferry::DType dt) { return double(rows() * kK * ferry::dtype_size(dt)); }

void run_ferry(benchmark::State& s, ferry::DType dt, std::int64_t S) {
  MatvecData& d = data(dt, S);
  for (auto _ : s) {
    ferry::Tensor y = ferry::matmul(d.x, d.w_t);
    benchmark::DoNotOptimize(y.storage().get());
  }
}

void run_openblas(benchmark::State& s, std::int64_t S) {
  MatvecData& d = data(ferry::DType::f32, S);
  for (auto _ : s) {
    if (S == 1)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, int(rows()), int(kK), 1.0f, d.hw.data(), int(kK),
                  d.hx.data(), 1, 0.0f, d.hy.data(), 1);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(S), int(rows()), int(kK), 1.0f,
                  d.hx.data(), int(kK), d.hw.data(), int(kK), 0.0f, d.hy.data(), int(rows()));
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
  for (const ferry::DType dt : {ferry::DType::f32, ferry::DType::f16, ferry::DType::bf16}) {
    const std::string dn(ferry::dtype_name(dt));
    reg("matvec/" + dn + "/memcpy", [dt](benchmark::State& s) { run_memcpy(s, dt); });
    for (const std::int64_t S : {std::int64_t(1), std::int64_t(8)}) {
      const std::string base = fmt::format("matvec/{}/S{}", dn, S);
      const std::string title =
          fmt::format("matmul [{}, {}] x [{}, {}]ᵀ {} (cpu)", S, kK, rows(), kK, dn);
      reg(base + "/ferry cpu", [dt, S](benchmark::State& s) { run_ferry(s, dt, S); });
      add_comparison({.title = title + " vs memcpy of the weight",
                      .ferry = base + "/ferry cpu",
                      .ferry_label = "ferry",
                      .baseline = "matvec/" + dn + "/memcpy",
                      .baseline_label = "memcpy",
                      .metric = Metric::gbps,
                      .ferry_work = weight_bytes(dt),
                      .baseline_work = weight_bytes(dt)});
      if (dt == ferry::DType::f32) {
        reg(base + "/openblas", [S](benchmark::State& s) { run_openblas(s, S); });
        add_comparison({.title = title + (S == 1 ? " vs sgemv" : " vs sgemm"),
                        .ferry = base + "/ferry cpu",
                        .ferry_label = "ferry",
                        .baseline = base + "/openblas",
                        .baseline_label = S == 1 ? "OpenBLAS sgemv" : "OpenBLAS sgemm",
                        .metric = Metric::gbps,
                        .ferry_work = weight_bytes(dt),
                        .baseline_work = weight_bytes(dt)});
      } else {
        add_comparison({.title = title + " vs f32 OpenBLAS on the same values",
                        .ferry = base + "/ferry cpu",
                        .ferry_label = "ferry " + dn,
                        .baseline = fmt::format("matvec/f32/S{}/openblas", S),
                        .baseline_label = "OpenBLAS f32",
                        .metric = Metric::usec,
                        .ferry_work = 0,
                        .baseline_work = 0});
      }
    }
  }
}

}  // namespace bench
