// benchmarks/bench_mlp.cpp — a Linear-ReLU-Linear forward pass, batch 256,
// 784-512-10 (an MNIST MLP), f32 on the CPU:
//   ferry:    y = matmul(relu(matmul(x, W1^T) + b1), W2^T) + b2, weights stored
//             [out, in] like nn::Linear, so matmul sees transposed views.
//   baseline: cblas_sgemm (NoTrans, Trans) into preallocated buffers, a fused
//             bias+ReLU loop and a bias loop, written by hand.
// ferry allocates its four intermediate tensors on every call; the baseline
// allocates nothing. The outputs are compared before timing.
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "bench_common.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

constexpr std::int64_t kBatch = 256, kIn = 784, kHidden = 512, kOut = 10;

struct MlpData {
  ferry::Tensor x, w1, b1, w2, b2;
  std::vector<float> hx, hw1, hb1, hw2, hb2, hh, hy;
};

MlpData& mlp_data() {
  static std::unique_ptr<MlpData> d;
  if (!d) {
    d = std::make_unique<MlpData>();
    ferry::manual_seed(99);
    d->x = ferry::randn({kBatch, kIn});
    d->w1 = ferry::randn({kHidden, kIn}) * 0.05;
    d->b1 = ferry::randn({kHidden}) * 0.1;
    d->w2 = ferry::randn({kOut, kHidden}) * 0.05;
    d->b2 = ferry::randn({kOut}) * 0.1;
    d->hx = d->x.to_vector<float>();
    d->hw1 = d->w1.to_vector<float>();
    d->hb1 = d->b1.to_vector<float>();
    d->hw2 = d->w2.to_vector<float>();
    d->hb2 = d->b2.to_vector<float>();
    d->hh.assign(std::size_t(kBatch * kHidden), 0.0f);
    d->hy.assign(std::size_t(kBatch * kOut), 0.0f);
  }
  return *d;
}

ferry::Tensor ferry_forward(const MlpData& d) {
  ferry::Tensor h = ferry::relu(ferry::matmul(d.x, d.w1.t()) + d.b1);
  return ferry::matmul(h, d.w2.t()) + d.b2;
}

void baseline_forward(MlpData& d) {
  float* h = d.hh.data();
  float* y = d.hy.data();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(kBatch), int(kHidden), int(kIn), 1.0f,
              d.hx.data(), int(kIn), d.hw1.data(), int(kIn), 0.0f, h, int(kHidden));
  const float* b1 = d.hb1.data();
  for (std::int64_t i = 0; i < kBatch; ++i) {
    float* row = h + i * kHidden;
    for (std::int64_t j = 0; j < kHidden; ++j) row[j] = std::max(row[j] + b1[j], 0.0f);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(kBatch), int(kOut), int(kHidden), 1.0f,
              h, int(kHidden), d.hw2.data(), int(kHidden), 0.0f, y, int(kOut));
  const float* b2 = d.hb2.data();
  for (std::int64_t i = 0; i < kBatch; ++i)
    for (std::int64_t j = 0; j < kOut; ++j) y[i * kOut + j] += b2[j];
}

void bm_ferry_mlp(benchmark::State& state) {
  MlpData& d = mlp_data();
  baseline_forward(d);
  std::vector<float> got = ferry_forward(d).to_vector<float>();
  double max_err = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    max_err = std::max(max_err, double(std::fabs(got[i] - d.hy[i])));
  if (got.size() != d.hy.size() || !(max_err <= 1e-3)) {
    state.SkipWithError(
        fmt::format("ferry's forward differs from the baseline's: max abs error {}", max_err)
            .c_str());
    return;
  }
  for (auto _ : state) {
    ferry::Tensor y = ferry_forward(d);
    benchmark::DoNotOptimize(y.storage().get());
  }
  state.counters["fwd"] = rate(1.0);
}

void bm_baseline_mlp(benchmark::State& state) {
  MlpData& d = mlp_data();
  for (auto _ : state) {
    baseline_forward(d);
    benchmark::DoNotOptimize(d.hy.data());
    benchmark::ClobberMemory();
  }
  state.counters["fwd"] = rate(1.0);
}

}  // namespace

void register_mlp() {
  const std::string p = fmt::format("mlp_fwd/{}-{}-{}/batch{}/", kIn, kHidden, kOut, kBatch);
  auto* f = benchmark::RegisterBenchmark((p + "ferry").c_str(), bm_ferry_mlp);
  auto* b = benchmark::RegisterBenchmark((p + "openblas_hand").c_str(), bm_baseline_mlp);
  for (auto* bm : {f, b}) {
    bm->UseRealTime()->Unit(benchmark::kMicrosecond);
    if (!quick()) bm->MinTime(1.0);
  }
  add_comparison({.title = fmt::format("mlp forward {}-{}-{} batch {} (Linear-ReLU-Linear)", kIn,
                                       kHidden, kOut, kBatch),
                  .ferry = p + "ferry",
                  .ferry_label = "ferry",
                  .baseline = p + "openblas_hand",
                  .baseline_label = "cblas_sgemm + hand loops",
                  .metric = Metric::usec});
}

}  // namespace bench
