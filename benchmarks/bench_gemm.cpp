// benchmarks/bench_gemm.cpp — CPU GEMM, f32: ferry::matmul against
// cblas_sgemm (OpenBLAS) called directly on the same numbers.
//
// ferry::matmul allocates its result on every call, as an application sees
// it; the baseline writes into one preallocated C. Before timing, the ferry
// result is checked against the baseline's, so a fast wrong kernel fails the run.
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <tuple>

#include "bench_common.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

struct GemmData {
  ferry::Tensor a, b;             // [M, K] and [K, N] on the CPU
  std::vector<float> ha, hb, hc;  // the same numbers for the baseline; hc its output
  std::vector<float> reference;   // cblas_sgemm's result
};

using Shape3 = std::tuple<std::int64_t, std::int64_t, std::int64_t>;  // M, N, K

void sgemm(const float* a, const float* b, float* c, std::int64_t M, std::int64_t N,
           std::int64_t K) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(N), int(K), 1.0f, a, int(K), b,
              int(N), 0.0f, c, int(N));
}

// Built once per shape and shared by the two variants; the previous shape's
// data is dropped to keep memory flat.
GemmData& data_for(std::int64_t M, std::int64_t N, std::int64_t K) {
  static std::map<Shape3, std::unique_ptr<GemmData>> cache;
  Shape3 key{M, N, K};
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  cache.clear();
  auto d = std::make_unique<GemmData>();
  ferry::manual_seed(1234);
  d->a = ferry::randn({M, K});
  d->b = ferry::randn({K, N});
  d->ha = d->a.to_vector<float>();
  d->hb = d->b.to_vector<float>();
  d->hc.assign(std::size_t(M * N), 0.0f);
  d->reference.assign(std::size_t(M * N), 0.0f);
  sgemm(d->ha.data(), d->hb.data(), d->reference.data(), M, N, K);
  return *cache.emplace(key, std::move(d)).first->second;
}

double flops(std::int64_t M, std::int64_t N, std::int64_t K) {
  return 2.0 * double(M) * double(N) * double(K);
}

void bm_ferry_matmul(benchmark::State& state, std::int64_t M, std::int64_t N, std::int64_t K) {
  GemmData& d = data_for(M, N, K);
  {
    std::vector<float> got = ferry::matmul(d.a, d.b).to_vector<float>();
    double max_err = 0, max_ref = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      max_err = std::max(max_err, double(std::fabs(got[i] - d.reference[i])));
      max_ref = std::max(max_ref, double(std::fabs(d.reference[i])));
    }
    if (got.size() != d.reference.size() || !(max_err <= 1e-4 * std::max(1.0, max_ref))) {
      state.SkipWithError(
          fmt::format("ferry::matmul differs from cblas_sgemm: max abs error {}", max_err).c_str());
      return;
    }
  }
  for (auto _ : state) {
    ferry::Tensor c = ferry::matmul(d.a, d.b);
    benchmark::DoNotOptimize(c.storage().get());
  }
  state.counters["GFLOP"] = rate(flops(M, N, K) / 1e9);
}

void bm_cblas_sgemm(benchmark::State& state, std::int64_t M, std::int64_t N, std::int64_t K) {
  GemmData& d = data_for(M, N, K);
  for (auto _ : state) {
    sgemm(d.ha.data(), d.hb.data(), d.hc.data(), M, N, K);
    benchmark::DoNotOptimize(d.hc.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP"] = rate(flops(M, N, K) / 1e9);
}

}  // namespace

void register_gemm() {
  struct Case {
    std::int64_t M, N, K;
  };
  std::vector<Case> cases;
  if (quick()) {
    cases = {{128, 128, 128}, {256, 256, 256}, {512, 64, 512}, {64, 512, 512}};
  } else {
    // Square, then skinny: tall-thin A, short-wide A, and a Linear-layer-like product.
    cases = {{1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096},
             {4096, 64, 4096},   {64, 4096, 4096},   {256, 4096, 1024}};
  }
  for (const Case& c : cases) {
    std::string shape = fmt::format("{}x{}x{}", c.M, c.N, c.K);  // M x N x K
    std::string ferry_name = "gemm_f32/" + shape + "/ferry";
    std::string blas_name = "gemm_f32/" + shape + "/openblas";
    auto* f = benchmark::RegisterBenchmark(ferry_name.c_str(), bm_ferry_matmul, c.M, c.N, c.K);
    auto* b = benchmark::RegisterBenchmark(blas_name.c_str(), bm_cblas_sgemm, c.M, c.N, c.K);
    for (auto* bm : {f, b}) {
      bm->UseRealTime()->Unit(benchmark::kMillisecond);
      if (!quick()) {
        double work = flops(c.M, c.N, c.K);
        if (work > 1e11)
          bm->Iterations(2);  // 4096^3: about a second per call on 2 cores
        else if (work > 1e10)
          bm->MinTime(0.5);
        else
          bm->MinTime(0.3);
      }
    }
    add_comparison({.title = "gemm f32 " + shape + " (MxNxK)",
                    .ferry = ferry_name,
                    .ferry_label = "ferry",
                    .baseline = blas_name,
                    .baseline_label = "OpenBLAS",
                    .metric = Metric::gflops,
                    .ferry_work = flops(c.M, c.N, c.K),
                    .baseline_work = flops(c.M, c.N, c.K)});
  }
}

}  // namespace bench
