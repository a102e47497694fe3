// benchmarks/bench_train.cpp — one training step (forward, cross_entropy,
// backward, Adam) of a 784-512-512-10 ReLU MLP at batch 256, f32 on the CPU:
//   ferry:    nn::Sequential of nn::Linear/ReLU, nn::functional::cross_entropy,
//             backward(), optim::Adam (its fused adam_step kernel);
//   pytorch:  the same through libtorch in this process, with as many threads
//             (bench_train_torch.cpp; built when CMake finds libtorch);
//   openblas: the same step written by hand: cblas_sgemm for the eight
//             products, fused loops for bias, ReLU, softmax, their gradients
//             and Adam, into preallocated buffers (a lower bound for any
//             framework on this BLAS).
// and on cuda:0, where the CUDA backend is built and a GPU is there: ferry
// against libtorch's CUDA build in the same process (when CMake found one).
// All three start from the same weights and data; the losses of their first
// three steps are compared before anything is timed. Every variant trains as it is timed
// (each iteration is a real step), and reads the loss back each step.
#include "bench_train.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "bench_common.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"

namespace bench::train {

const InitialState& initial_state() {
  static const InitialState s = [] {
    InitialState st;
    ferry::manual_seed(2024);
    st.x = ferry::randn({kBatch, kIn}).to_vector<float>();
    st.y = ferry::randint(0, kOut, {kBatch}).to_vector<std::int64_t>();
    auto uniform = [](std::int64_t out, std::int64_t in, bool weight) {
      const double bound = 1.0 / std::sqrt(double(in));  // nn.Linear's initialisation
      return ferry::uniform(weight ? ferry::Shape{out, in} : ferry::Shape{out}, -bound, bound)
          .to_vector<float>();
    };
    st.w1 = uniform(kHidden, kIn, true), st.b1 = uniform(kHidden, kIn, false);
    st.w2 = uniform(kHidden, kHidden, true), st.b2 = uniform(kHidden, kHidden, false);
    st.w3 = uniform(kOut, kHidden, true), st.b3 = uniform(kOut, kHidden, false);
    return st;
  }();
  return s;
}

namespace {

// ---- ferry ----

struct FerryModel {
  std::shared_ptr<ferry::nn::Sequential> net;
  std::unique_ptr<ferry::optim::Adam> opt;
  ferry::Tensor x, y;
};

FerryModel make_ferry_model(const ferry::Device& device) {
  const InitialState& s = initial_state();
  FerryModel f;
  f.net = std::make_shared<ferry::nn::Sequential>(
      std::make_shared<ferry::nn::Linear>(kIn, kHidden), std::make_shared<ferry::nn::ReLU>(),
      std::make_shared<ferry::nn::Linear>(kHidden, kHidden), std::make_shared<ferry::nn::ReLU>(),
      std::make_shared<ferry::nn::Linear>(kHidden, kOut));
  ferry::StateDict sd;
  sd.insert("0.weight", ferry::tensor(s.w1, {kHidden, kIn}));
  sd.insert("0.bias", ferry::tensor(s.b1));
  sd.insert("2.weight", ferry::tensor(s.w2, {kHidden, kHidden}));
  sd.insert("2.bias", ferry::tensor(s.b2));
  sd.insert("4.weight", ferry::tensor(s.w3, {kOut, kHidden}));
  sd.insert("4.bias", ferry::tensor(s.b3));
  f.net->load_state_dict(sd);
  f.net->to(device);
  f.opt = std::make_unique<ferry::optim::Adam>(f.net->parameters(),
                                               ferry::optim::AdamOptions{.lr = kLr});
  f.x = ferry::tensor(s.x, {kBatch, kIn}).to(device);
  f.y = ferry::tensor(s.y).to(device);
  return f;
}

float ferry_step_of(FerryModel& m) {
  m.opt->zero_grad();
  ferry::Tensor loss = ferry::nn::functional::cross_entropy(m.net->forward(m.x), m.y);
  loss.backward();
  m.opt->step();
  return loss.item<float>();
}

float ferry_step() {
  static FerryModel m = make_ferry_model(ferry::Device::cpu());
  return ferry_step_of(m);
}

float ferry_cuda_step() {
  static FerryModel m = make_ferry_model(ferry::Device("cuda:0"));
  return ferry_step_of(m);
}

// A CPU model of its own for checking the GPU runs, so that the timed CPU
// model's steps stay in step with the other CPU variants'.
float ferry_cpu_reference_step() {
  static FerryModel m = make_ferry_model(ferry::Device::cpu());
  return ferry_step_of(m);
}

// Note [Deferred checks, measured]
// A small model's step on an accelerator — an embedding of 32 tokens from a vocabulary of 100,
// width 64, a hidden ReLU layer, cross_entropy over the vocabulary, Adam — with the index checks
// of embedding and cross_entropy decided at the next read (the default: Note [Deferred checks]
// in runtime/deferred_checks.hpp), against the same step with them decided at the call
// (debug::set_sync_checks(true), FERRY_SYNC_CHECKS=1's behaviour: the host waits there for the
// device). The model is small so that the waits, not the kernels, are what a step's time is
// made of. The loss is read every kStepsPerRead steps, as a training loop that prints it now
// and then does. This machine's speed drifts by more than the difference (the two run one
// after the other gave ratios from 0.96 to 1.43), so, as Note [Profiler overhead, paired] does,
// each iteration is a pair of blocks of kStepsPerRead steps, one of each, each variant training
// a model of its own from the same seed. The benchmark's time is a deferred block's; the
// counters give the sync-checked block's (the baseline, measured in the same pairs) and the
// ratio of the two.
constexpr int kStepsPerRead = 10;
constexpr std::int64_t kVocab = 100, kWidth = 64, kTokens = 32;

FerryModel make_token_model(const ferry::Device& dev) {
  ferry::manual_seed(7);
  FerryModel m;
  m.net = std::make_shared<ferry::nn::Sequential>(
      std::make_shared<ferry::nn::Embedding>(kVocab, kWidth),
      std::make_shared<ferry::nn::Linear>(kWidth, kWidth), std::make_shared<ferry::nn::ReLU>(),
      std::make_shared<ferry::nn::Linear>(kWidth, kVocab));
  m.net->to(dev);
  m.opt = std::make_unique<ferry::optim::Adam>(m.net->parameters(),
                                               ferry::optim::AdamOptions{.lr = kLr});
  m.x = ferry::randint(0, kVocab, {kTokens}).to(dev);
  m.y = ferry::randint(0, kVocab, {kTokens}).to(dev);
  return m;
}

// kStepsPerRead steps of `m`, then the loss read back; the seconds they took.
double token_block(FerryModel& m, bool sync) {
  const bool before = ferry::debug::sync_checks();
  ferry::debug::set_sync_checks(sync);
  const auto t0 = std::chrono::steady_clock::now();
  ferry::Tensor loss;
  for (int i = 0; i < kStepsPerRead; ++i) {
    m.opt->zero_grad();
    loss = ferry::nn::functional::cross_entropy(m.net->forward(m.x), m.y);
    loss.backward();
    m.opt->step();
  }
  benchmark::DoNotOptimize(loss.item<float>());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ferry::debug::set_sync_checks(before);
  return s;
}

void bm_checks(benchmark::State& state, const std::string& device) {
  if (!ferry::is_available(device))
    return state.SkipWithError((device + " is not available").c_str());
  const ferry::Device dev(device);
  FerryModel deferred = make_token_model(dev), sync = make_token_model(dev);
  if (!quick()) token_block(deferred, false), token_block(sync, true);  // pipelines compiled
  double baseline = 0, timed = 0;
  for (auto _ : state) {
    const double d = token_block(deferred, false);
    baseline += token_block(sync, true);
    timed += d;
    state.SetIterationTime(d);
  }
  const double steps = double(state.iterations()) * kStepsPerRead;
  state.counters["step_ms"] = timed / steps * 1e3;
  state.counters["sync_checks_step_ms"] = baseline / steps * 1e3;
  state.counters["ratio"] = baseline / timed;  // deferred's speed over the baseline's
}

// ---- the same step by hand on OpenBLAS ----

struct Param {
  std::vector<float> w, g, m, v;
  explicit Param(const std::vector<float>& init)
      : w(init), g(init.size()), m(init.size()), v(init.size()) {}
};

struct HandModel {
  Param w1, b1, w2, b2, w3, b3;
  std::vector<float> z1, z2, z3, d1, d2, d3;  // pre-activations and their gradients
  std::int64_t step = 0;
  explicit HandModel(const InitialState& s)
      : w1(s.w1),
        b1(s.b1),
        w2(s.w2),
        b2(s.b2),
        w3(s.w3),
        b3(s.b3),
        z1(kBatch * kHidden),
        z2(kBatch * kHidden),
        z3(kBatch * kOut),
        d1(kBatch * kHidden),
        d2(kBatch * kHidden),
        d3(kBatch * kOut) {}
};

HandModel& hand_model() {
  static HandModel m(initial_state());
  return m;
}

// out[B, N] = in[B, K] · W[N, K]ᵀ + b, then ReLU when asked (kept as z for backward).
void linear(const float* in, const Param& w, const Param& b, float* out, int n, int k, bool relu) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(kBatch), n, k, 1.0f, in, k, w.w.data(),
              k, 0.0f, out, n);
#pragma omp parallel for
  for (std::int64_t i = 0; i < kBatch; ++i)
    for (int j = 0; j < n; ++j) {
      float z = out[i * n + j] + b.w[std::size_t(j)];
      out[i * n + j] = relu ? std::max(z, 0.0f) : z;
    }
}

// dW = dzᵀ · in, db = Σ dz; din = (dz · W) masked by in > 0 (in is a ReLU output).
void linear_backward(const float* in, const float* dz, Param& w, Param& b, float* din, int n,
                     int k) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, int(kBatch), 1.0f, dz, n, in, k, 0.0f,
              w.g.data(), k);
  for (int j = 0; j < n; ++j) {
    float s = 0;
    for (std::int64_t i = 0; i < kBatch; ++i) s += dz[i * n + j];
    b.g[std::size_t(j)] = s;
  }
  if (!din) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(kBatch), k, n, 1.0f, dz, n, w.w.data(),
              k, 0.0f, din, k);
#pragma omp parallel for
  for (std::int64_t i = 0; i < kBatch * k; ++i)
    if (in[i] <= 0) din[i] = 0;
}

void adam(Param& p, std::int64_t step) {
  const float b1 = 0.9f, b2 = 0.999f;
  const float step_size = float(kLr / (1 - std::pow(0.9, double(step))));
  const float bc2 = float(std::sqrt(1 - std::pow(0.999, double(step))));
  const std::int64_t n = std::int64_t(p.w.size());
#pragma omp parallel for if (n > 65536)
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = p.g[std::size_t(i)];
    float& m = p.m[std::size_t(i)];
    float& v = p.v[std::size_t(i)];
    m = m * b1 + (1 - b1) * g;
    v = v * b2 + (1 - b2) * g * g;
    p.w[std::size_t(i)] -= step_size * (m / (std::sqrt(v) / bc2 + 1e-8f));
  }
}

float hand_step() {
  HandModel& m = hand_model();
  const InitialState& s = initial_state();
  linear(s.x.data(), m.w1, m.b1, m.z1.data(), int(kHidden), int(kIn), true);
  linear(m.z1.data(), m.w2, m.b2, m.z2.data(), int(kHidden), int(kHidden), true);
  linear(m.z2.data(), m.w3, m.b3, m.z3.data(), int(kOut), int(kHidden), false);
  // Softmax cross-entropy and its gradient (p - onehot) / B, row by row.
  double loss = 0;
  for (std::int64_t i = 0; i < kBatch; ++i) {
    const float* z = &m.z3[std::size_t(i * kOut)];
    float* d = &m.d3[std::size_t(i * kOut)];
    float mx = z[0];
    for (std::int64_t j = 1; j < kOut; ++j) mx = std::max(mx, z[j]);
    double sum = 0;
    for (std::int64_t j = 0; j < kOut; ++j) sum += std::exp(double(z[j] - mx));
    const std::int64_t t = s.y[std::size_t(i)];
    loss += std::log(sum) - double(z[t] - mx);
    for (std::int64_t j = 0; j < kOut; ++j)
      d[j] = float((std::exp(double(z[j] - mx)) / sum - (j == t ? 1.0 : 0.0)) / double(kBatch));
  }
  linear_backward(m.z2.data(), m.d3.data(), m.w3, m.b3, m.d2.data(), int(kOut), int(kHidden));
  linear_backward(m.z1.data(), m.d2.data(), m.w2, m.b2, m.d1.data(), int(kHidden), int(kHidden));
  linear_backward(s.x.data(), m.d1.data(), m.w1, m.b1, nullptr, int(kHidden), int(kIn));
  ++m.step;
  for (Param* p : {&m.w1, &m.b1, &m.w2, &m.b2, &m.w3, &m.b3}) adam(*p, m.step);
  return float(loss / double(kBatch));
}

using Variants = std::vector<std::pair<std::string, float (*)()>>;

// Every variant starts from the same state; their losses over the first
// steps must agree (to `rtol`) before anything is timed.
std::string early_steps_mismatch(const Variants& variants, float rtol) {
  constexpr int kChecked = 3;
  std::vector<std::vector<float>> losses(variants.size());
  for (std::size_t v = 0; v < variants.size(); ++v)
    for (int k = 0; k < kChecked; ++k) losses[v].push_back(variants[v].second());
  for (std::size_t v = 1; v < variants.size(); ++v)
    for (int k = 0; k < kChecked; ++k) {
      const float f = losses[0][std::size_t(k)], b = losses[v][std::size_t(k)];
      if (!(std::fabs(f - b) <= rtol * std::fabs(b)))
        return fmt::format("step {} loss: {} {} but {} {}", k, variants[0].first, f,
                           variants[v].first, b);
    }
  return std::string();
}

const std::string& cpu_mismatch() {
  static const std::string result = [] {
    Variants variants = {{"ferry", ferry_step}, {"the hand-written step", hand_step}};
#ifdef FERRY_BENCH_HAVE_TORCH
    torch_setup(initial_state(), omp_get_max_threads());
    variants.emplace_back("PyTorch", torch_step);
#endif
    return early_steps_mismatch(variants, 1e-4f);
  }();
  return result;
}

#ifdef FERRY_BENCH_HAVE_TORCH
bool torch_on_cuda() {
  static const bool ok = torch_cuda_setup(initial_state());
  return ok;
}
#endif

// cuBLAS picks its own algorithms in each framework, so the GPU runs agree
// to a looser bound than the CPU's shared OpenBLAS.
const std::string& cuda_mismatch() {
  static const std::string result = [] {
    Variants variants = {{"ferry on cuda:0", ferry_cuda_step}};
#ifdef FERRY_BENCH_HAVE_TORCH
    if (torch_on_cuda()) variants.emplace_back("PyTorch on cuda:0", torch_cuda_step);
#endif
    variants.emplace_back("ferry on the CPU", ferry_cpu_reference_step);
    return early_steps_mismatch(variants, 1e-3f);
  }();
  return result;
}

template <float (*Step)(), const std::string& (*Mismatch)()> void bm_step(benchmark::State& state) {
  if (const std::string& e = Mismatch(); !e.empty()) {
    state.SkipWithError(e.c_str());
    return;
  }
  float loss = 0;
  for (auto _ : state) loss = Step();
  benchmark::DoNotOptimize(loss);
  state.counters["loss"] = loss;
  state.counters["step"] = rate(1.0);
}

}  // namespace
}  // namespace bench::train

namespace bench {

void register_train() {
  using namespace train;
  const std::string p =
      fmt::format("train_step/mlp{}-{}-{}-{}/batch{}/adam/", kIn, kHidden, kHidden, kOut, kBatch);
  std::vector<benchmark::internal::Benchmark*> bms = {
      benchmark::RegisterBenchmark((p + "ferry").c_str(), bm_step<ferry_step, cpu_mismatch>),
      benchmark::RegisterBenchmark((p + "openblas_hand").c_str(),
                                   bm_step<hand_step, cpu_mismatch>)};
#ifdef FERRY_BENCH_HAVE_TORCH
  bms.push_back(
      benchmark::RegisterBenchmark((p + "pytorch").c_str(), bm_step<torch_step, cpu_mismatch>));
#endif
  const bool cuda = ferry::is_available("cuda:0");
  if (cuda)
    bms.push_back(benchmark::RegisterBenchmark((p + "cuda/ferry").c_str(),
                                               bm_step<ferry_cuda_step, cuda_mismatch>));
#ifdef FERRY_BENCH_HAVE_TORCH
  if (cuda && torch_on_cuda())
    bms.push_back(benchmark::RegisterBenchmark((p + "cuda/pytorch").c_str(),
                                               bm_step<torch_cuda_step, cuda_mismatch>));
#endif
  for (auto* bm : bms) {
    bm->UseRealTime()->Unit(benchmark::kMillisecond);
    if (!quick()) bm->MinTime(2.0);
  }
  const std::string title = fmt::format("train step mlp {}-{}-{}-{} batch {} (fwd+bwd+Adam)", kIn,
                                        kHidden, kHidden, kOut, kBatch);
#ifdef FERRY_BENCH_HAVE_TORCH
  const std::string torch_label = fmt::format("PyTorch {} (libtorch)", torch_version());
  add_comparison({.title = title,
                  .ferry = p + "ferry",
                  .ferry_label = "ferry",
                  .baseline = p + "pytorch",
                  .baseline_label = torch_label,
                  .metric = Metric::usec});
  if (cuda && torch_on_cuda())
    add_comparison({.title = "cuda:0 " + title,
                    .ferry = p + "cuda/ferry",
                    .ferry_label = "ferry",
                    .baseline = p + "cuda/pytorch",
                    .baseline_label = torch_label,
                    .metric = Metric::usec});
#endif
  // Note [Deferred checks, measured]: the ratio is a counter of the one paired benchmark.
  for (const std::string device : {"vulkan:0", "cuda:0"})
    if (ferry::is_available(device))
      benchmark::RegisterBenchmark(
          fmt::format("train_step/embedding{}-{}-relu/tokens{}/adam/{}/checks deferred vs at "
                      "the call",
                      kVocab, kWidth, kTokens, device)
              .c_str(),
          [device](benchmark::State& st) { bm_checks(st, device); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(quick() ? 1 : 50);
  add_comparison({.title = title,
                  .ferry = p + "ferry",
                  .ferry_label = "ferry",
                  .baseline = p + "openblas_hand",
                  .baseline_label = "cblas_sgemm + hand loops",
                  .metric = Metric::usec});
}

}  // namespace bench
