// benchmarks/bench_transfer.cpp — the transfer planner (ferry/transfer.hpp)
// moving tensors between the CPU and the first Vulkan device, each figure
// beside a baseline run in the same process:
//   10,000 small tensors   1–64 KiB each (a model of many small layers), CPU
//                          -> vulkan:0 -> CPU: one planned migration each way
//                          against a loop of per-tensor Tensor::to(device).
//   GPT-2-small shapes     148 tensors, 124.4 M f32 parameters (498 MB), CPU ->
//                          vulkan:0: the planned migration against memcpy of
//                          the same bytes into a fresh allocation (a move makes
//                          new memory, and so pays its first-touch page
//                          faults) and into warm, already-touched memory.
//   1 GiB single tensor    the same comparison for one large tensor.
//   upload under matmul   one matmul on vulkan:0 and one upload of pageable host
//                          memory enqueued together, then a wait, against the same
//                          with a wait between them: the time saved is the overlap.
//                          With a transfer queue (FERRY_VULKAN_TRANSFER_QUEUE, Note
//                          [Transfer queue] in runtime/vulkan/vk_recorder.hpp) the
//                          copy engines move the bytes while the matmul runs; without,
//                          only the host's memcpy into staging overlaps it.
// Each benchmark runs once untimed first (first-touch page faults cost this
// VM about 1 s per GB, which would swamp the first iteration), and the move
// back to the CPU between iterations of the one-way benchmarks is not timed.
// Run it with FERRY_VULKAN_FORCE_STAGING=1 too: device memory the host cannot
// map, as on a discrete GPU, where each per-tensor copy back waits for the
// device. On a GPU, the baseline that matters is a pinned cudaMemcpy
// (docs/gpu-results.md); on lavapipe both sides are the CPU's memory.
#include <fmt/format.h>

#include <cstring>
#include <memory>

#include "bench_common.hpp"
#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

using Named = std::vector<std::pair<std::string, ferry::Tensor>>;

const ferry::Device& vk() {
  static ferry::Device d("vulkan:0");
  return d;
}

std::size_t total_bytes(const Named& ts) {
  std::size_t b = 0;
  for (const auto& [n, t] : ts) b += std::size_t(t.numel()) * t.element_size();
  return b;
}

// 1 KiB to 64 KiB, spread evenly (deterministic).
Named& small_tensors() {
  static Named ts;
  if (ts.empty()) {
    const int n = quick() ? 1000 : 10000;
    for (int i = 0; i < n; ++i) {
      const std::int64_t kib = 1 + (std::int64_t(i) * 7919) % 64;
      ts.emplace_back(fmt::format("layer{}", i), ferry::full({kib * 256}, float(i % 97)));
    }
  }
  return ts;
}

// GPT-2 small's parameter shapes: 12 layers of 12 tensors, embeddings, final norm.
Named& gpt2_tensors() {
  static Named ts;
  if (ts.empty()) {
    const std::int64_t d = 768, vocab = quick() ? 5000 : 50257, ctx = 1024;
    ts.emplace_back("wte", ferry::full({vocab, d}, 0.5f));
    ts.emplace_back("wpe", ferry::full({ctx, d}, 0.25f));
    for (int l = 0; l < 12; ++l) {
      const std::string p = fmt::format("h.{}.", l);
      for (auto [name, shape] :
           std::vector<std::pair<const char*, ferry::Shape>>{{"ln_1.weight", {d}},
                                                             {"ln_1.bias", {d}},
                                                             {"attn.c_attn.weight", {d, 3 * d}},
                                                             {"attn.c_attn.bias", {3 * d}},
                                                             {"attn.c_proj.weight", {d, d}},
                                                             {"attn.c_proj.bias", {d}},
                                                             {"ln_2.weight", {d}},
                                                             {"ln_2.bias", {d}},
                                                             {"mlp.c_fc.weight", {d, 4 * d}},
                                                             {"mlp.c_fc.bias", {4 * d}},
                                                             {"mlp.c_proj.weight", {4 * d, d}},
                                                             {"mlp.c_proj.bias", {d}}})
        ts.emplace_back(p + name, ferry::full(shape, float(l)));
    }
    ts.emplace_back("ln_f.weight", ferry::full({d}, 1.0f));
    ts.emplace_back("ln_f.bias", ferry::full({d}, 0.0f));
  }
  return ts;
}

Named& one_big_tensor() {
  static Named ts;
  if (ts.empty())
    ts.emplace_back(
        "big", ferry::full({quick() ? (std::int64_t(16) << 20) : (std::int64_t(256) << 20)}, 1.5f));
  return ts;
}

bool on(const Named& ts, const ferry::Device& d) {
  for (const auto& [n, t] : ts)
    if (t.device() != d) return false;
  return true;
}

void bm_planned_round_trip(benchmark::State& state) {
  Named& ts = small_tensors();
  ferry::plan_migration(ts, vk()).execute();  // warm-up: first-touch page faults
  ferry::plan_migration(ts, ferry::Device::cpu()).execute();
  for (auto _ : state) {
    ferry::plan_migration(ts, vk()).execute();
    ferry::plan_migration(ts, ferry::Device::cpu()).execute();
  }
  if (!on(ts, ferry::Device::cpu()) ||
      ts.back().second.to_vector<float>()[0] != float((ts.size() - 1) % 97))
    state.SkipWithError("the tensors did not come back intact");
  state.counters["GB"] = rate(2.0 * double(total_bytes(ts)) / 1e9);
}

void bm_per_tensor_round_trip(benchmark::State& state) {
  Named& ts = small_tensors();
  std::vector<ferry::Tensor> moved(ts.size()), back(ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) moved[i] = ts[i].second.to(vk());  // warm-up
  for (std::size_t i = 0; i < ts.size(); ++i) back[i] = moved[i].to(ferry::Device::cpu());
  for (auto _ : state) {
    for (std::size_t i = 0; i < ts.size(); ++i) moved[i] = ts[i].second.to(vk());
    for (std::size_t i = 0; i < ts.size(); ++i) back[i] = moved[i].to(ferry::Device::cpu());
  }
  if (back.back().to_vector<float>()[0] != float((ts.size() - 1) % 97))
    state.SkipWithError("per-tensor copies came back wrong");
  state.counters["GB"] = rate(2.0 * double(total_bytes(ts)) / 1e9);
}

void bm_planned_one_way(benchmark::State& state, Named* (*which)()) {
  Named& ts = *which();
  ferry::plan_migration(ts, vk()).execute();  // warm-up: first-touch page faults
  ferry::plan_migration(ts, ferry::Device::cpu()).execute();
  for (auto _ : state) {
    ferry::plan_migration(ts, vk()).execute();
    state.PauseTiming();
    ferry::plan_migration(ts, ferry::Device::cpu()).execute();
    state.ResumeTiming();
  }
  if (!on(ts, ferry::Device::cpu())) state.SkipWithError("the tensors did not come back");
  state.counters["GB"] = rate(double(total_bytes(ts)) / 1e9);
}

// memcpy of every tensor's bytes, one after another, into one destination.
void bm_memcpy_one_way(benchmark::State& state, Named* (*which)(), bool fresh) {
  Named& ts = *which();
  const std::size_t bytes = total_bytes(ts);
  std::unique_ptr<char[]> warm;
  if (!fresh) {
    warm.reset(new char[bytes]);
    std::memset(warm.get(), 1, bytes);
  }
  for (auto _ : state) {
    std::unique_ptr<char[]> dst(fresh ? new char[bytes] : nullptr);
    char* p = fresh ? dst.get() : warm.get();
    for (const auto& [n, t] : ts) {
      const std::size_t b = std::size_t(t.numel()) * t.element_size();
      std::memcpy(p, t.storage()->buffer().host_ptr(), b);
      p += b;
    }
    benchmark::DoNotOptimize(p);
    benchmark::ClobberMemory();
    if (fresh) {
      state.PauseTiming();
      dst.reset();
      state.ResumeTiming();
    }
  }
  state.counters["GB"] = rate(double(bytes) / 1e9);
}

// Sizes that take comparable times: a CPU-type device (lavapipe) is slow at matmul.
std::pair<std::int64_t, std::int64_t> overlap_sizes() {  // (upload floats, matmul n)
  bool cpu_type = true;
  for (const ferry::DeviceInfo& d : ferry::devices())
    if (d.device == "vulkan:0") cpu_type = d.kind == ferry::DeviceKind::cpu_gpu;
  if (quick()) return {std::int64_t(1) << 20, 256};
  return cpu_type ? std::pair<std::int64_t, std::int64_t>{std::int64_t(4) << 20, 512}
                  : std::pair<std::int64_t, std::int64_t>{std::int64_t(64) << 20, 4096};
}

void bm_upload_under_matmul(benchmark::State& state, bool wait_between) {
  const auto [floats, n] = overlap_sizes();
  ferry::manual_seed(5);
  ferry::Tensor host = ferry::rand({floats});  // pageable
  ferry::Tensor a = ferry::rand({n, n}).to(vk()), b = ferry::rand({n, n}).to(vk());
  ferry::Tensor c = ferry::matmul(a, b), up = host.to(vk());  // untimed: pipelines, staging
  ferry::synchronize(vk());
  for (auto _ : state) {
    c = ferry::matmul(a, b);
    if (wait_between) ferry::synchronize(vk());
    up = host.to(vk());
    ferry::synchronize(vk());
  }
  state.counters["GB"] = rate(double(floats) * 4 / 1e9);
}

Named* gpt2() { return &gpt2_tensors(); }
Named* big() { return &one_big_tensor(); }

}  // namespace

void register_transfer() {
  if (!ferry::is_available("vulkan:0")) {
    std::printf("transfer benchmarks skipped: no Vulkan device\n");
    return;
  }
  auto finish = [](benchmark::internal::Benchmark* bm) {
    bm->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(quick() ? 2 : 5);
  };
  const std::string s =
      fmt::format("transfer/{}_small_tensors_round_trip/", small_tensors().size());
  finish(benchmark::RegisterBenchmark((s + "planned").c_str(), bm_planned_round_trip));
  finish(benchmark::RegisterBenchmark((s + "per_tensor_to").c_str(), bm_per_tensor_round_trip));
  const double small_work = 2.0 * double(total_bytes(small_tensors()));
  add_comparison({.title = fmt::format("{} tensors of 1-64 KiB cpu -> vulkan:0 -> cpu",
                                       small_tensors().size()),
                  .ferry = s + "planned",
                  .ferry_label = "planned migration",
                  .baseline = s + "per_tensor_to",
                  .baseline_label = "per-tensor .to()",
                  .metric = Metric::gbps,
                  .ferry_work = small_work,
                  .baseline_work = small_work});
  const auto [floats, n] = overlap_sizes();
  const std::string u = fmt::format("transfer/upload_{}MB_under_matmul_{}/", (floats * 4) >> 20, n);
  finish(benchmark::RegisterBenchmark((u + "together").c_str(), bm_upload_under_matmul, false));
  finish(benchmark::RegisterBenchmark((u + "wait_between").c_str(), bm_upload_under_matmul, true));
  add_comparison({.title = fmt::format("upload {} MiB while a {}^3 matmul runs on vulkan:0",
                                       (floats * 4) >> 20, n),
                  .ferry = u + "together",
                  .ferry_label = "enqueued together",
                  .baseline = u + "wait_between",
                  .baseline_label = "a wait between",
                  .metric = Metric::usec});
  for (auto [label, which] : {std::pair<const char*, Named* (*)()>{"gpt2_small_params", gpt2},
                              std::pair<const char*, Named* (*)()>{"single_tensor", big}}) {
    const std::string p = fmt::format("transfer/{}_{}MB/", label, total_bytes(*which()) >> 20);
    finish(benchmark::RegisterBenchmark((p + "planned").c_str(), bm_planned_one_way, which));
    finish(
        benchmark::RegisterBenchmark((p + "memcpy_fresh").c_str(), bm_memcpy_one_way, which, true));
    finish(
        benchmark::RegisterBenchmark((p + "memcpy_warm").c_str(), bm_memcpy_one_way, which, false));
    const double w = double(total_bytes(*which()));
    for (auto [b, bl] :
         {std::pair<const char*, const char*>{"memcpy_fresh", "memcpy into fresh memory"},
          std::pair<const char*, const char*>{"memcpy_warm", "memcpy into warm memory"}})
      add_comparison(
          {.title = fmt::format("{} ({} MiB) cpu -> vulkan:0", label, total_bytes(*which()) >> 20),
           .ferry = p + "planned",
           .ferry_label = "planned migration",
           .baseline = p + b,
           .baseline_label = bl,
           .metric = Metric::gbps,
           .ferry_work = w,
           .baseline_work = w});
  }
}

}  // namespace bench
