// benchmarks/bench_vulkan.cpp — the Vulkan backend on its first device
// (lavapipe on a machine without a GPU), each figure beside a baseline run in
// the same process:
//   dispatch overhead   10,000 small adds recorded and submitted in batches,
//                       against the same adds with a synchronize after each
//                       (one submit-and-wait per op); reported as µs per
//                       10,000 ops and as ops/s.
//   add f32             ferry::add on vulkan:0 against ferry::add on the CPU.
//   matmul f32          ferry::matmul on vulkan:0 against the CPU (OpenBLAS).
//   row ops             sum over the last dim, softmax and layer_norm of f32 rows of 4096
//                       and of 32 elements on vulkan:0, and layer_norm with a weight and a
//                       bias forward and backward (the backward's column sums are the
//                       weight's and bias's gradients), against a copy of the same tensor
//                       on vulkan:0 (the least memory traffic each op can have, read once
//                       and written once, as bandwidth). Which way a row's threads meet
//                       (Note [Subgroup row reductions] in shaders/subgroup.glsl) is the
//                       device's: run with FERRY_VULKAN_SUBGROUPS=0 and =1 to compare.
// The add and matmul loops enqueue kRepeats ops per wait for the device, so
// that the host's submit-and-wait is no part of the figure.
// On a GPU, compare the element-wise figure with the device's copy bandwidth
// (docs/gpu-results.md); on lavapipe both sides run on the same CPU cores.
#include <fmt/format.h>

#include <tuple>

#include "bench_common.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

int small_ops() { return quick() ? 1000 : 10000; }
constexpr int kRepeats = 8;

const ferry::Device& vk() {
  static ferry::Device d("vulkan:0");
  return d;
}

void bm_dispatch(benchmark::State& state, bool sync_each) {
  ferry::Tensor x = ferry::zeros({64}, {.dtype = ferry::DType::f32, .device = vk()});
  ferry::Tensor one = ferry::ones({64}, {.dtype = ferry::DType::f32, .device = vk()});
  for (auto _ : state) {
    for (int i = 0; i < small_ops(); ++i) {
      x = x + one;
      if (sync_each) ferry::synchronize(vk());
    }
    ferry::synchronize(vk());
  }
  if (x.to(ferry::Device::cpu()).to_vector<float>()[0] != float(small_ops() * state.iterations()))
    state.SkipWithError("wrong result after the adds");
  state.counters["ops"] = rate(small_ops());
}

std::int64_t add_numel() { return quick() ? (std::int64_t(1) << 20) : (std::int64_t(16) << 20); }

void bm_add(benchmark::State& state, bool on_vulkan) {
  ferry::Device d = on_vulkan ? vk() : ferry::Device::cpu();
  ferry::manual_seed(3);
  ferry::Tensor a = ferry::rand({add_numel()}).to(d), b = ferry::rand({add_numel()}).to(d);
  ferry::synchronize(d);
  for (auto _ : state) {
    for (int r = 0; r < kRepeats; ++r) ferry::Tensor c = a + b;
    ferry::synchronize(d);
  }
  state.counters["GB"] = rate(kRepeats * 3.0 * double(add_numel()) * 4 / 1e9);
}

std::int64_t mm_n() { return quick() ? 256 : 1024; }

void bm_matmul(benchmark::State& state, bool on_vulkan) {
  ferry::Device d = on_vulkan ? vk() : ferry::Device::cpu();
  const std::int64_t n = mm_n();
  ferry::manual_seed(4);
  ferry::Tensor a = ferry::rand({n, n}), b = ferry::rand({n, n});
  ferry::Tensor want = ferry::matmul(a, b);
  ferry::Tensor ad = a.to(d), bd = b.to(d);
  ferry::Tensor got = ferry::matmul(ad, bd).to(ferry::Device::cpu());
  double err = ferry::max(ferry::abs(got - want)).item<float>();
  if (!(err < 1e-2)) {
    state.SkipWithError(fmt::format("matmul differs from the CPU by {}", err).c_str());
    return;
  }
  for (auto _ : state) {
    for (int r = 0; r < kRepeats; ++r) ferry::Tensor c = ferry::matmul(ad, bd);
    ferry::synchronize(d);
  }
  state.counters["GFLOP"] = rate(kRepeats * 2.0 * double(n * n * n) / 1e9);
}

std::int64_t row_elements() { return quick() ? (std::int64_t(1) << 20) : (std::int64_t(8) << 20); }

enum class RowOp { copy, sum, softmax, layer_norm, layer_norm_fwd_bwd };

void bm_rows(benchmark::State& state, RowOp op, std::int64_t n) {
  ferry::manual_seed(6);
  const ferry::Tensor x = ferry::randn({row_elements() / n, n}).to(vk());
  const ferry::Tensor xg = x.detach().requires_grad_(), g = ferry::randn(x.sizes()).to(vk());
  const ferry::Tensor w = ferry::rand({n}).to(vk()).requires_grad_(),
                      b = ferry::randn({n}).to(vk()).requires_grad_();
  auto run = [&] {
    switch (op) {
      case RowOp::copy:
        return x.clone();
      case RowOp::sum:
        return ferry::sum(x, {-1});
      case RowOp::softmax:
        return ferry::softmax(x, -1);
      case RowOp::layer_norm:
        return ferry::layer_norm(x, {n});
      case RowOp::layer_norm_fwd_bwd: {
        ferry::layer_norm(xg, {n}, w, b).backward(g);
        ferry::Tensor dx = xg.grad();
        for (const ferry::Tensor* t : {&xg, &w, &b}) t->set_grad({});
        return dx;
      }
    }
    return ferry::Tensor();
  };
  run();
  ferry::synchronize(vk());
  for (auto _ : state) {
    for (int r = 0; r < kRepeats; ++r) run();
    ferry::synchronize(vk());
  }
}

}  // namespace

void register_vulkan() {
  if (!ferry::is_available("vulkan:0")) {
    std::printf("vulkan benchmarks skipped: no Vulkan device\n");
    return;
  }
  auto reg = [](const std::string& name, auto fn, bool flag) {
    auto* bm = benchmark::RegisterBenchmark(name.c_str(), fn, flag);
    bm->UseRealTime()->Unit(benchmark::kMillisecond);
    if (!quick()) bm->MinTime(1.0);
    return bm;
  };
  const std::string d = fmt::format("vulkan/dispatch_{}_small_adds/", small_ops());
  reg(d + "batched", bm_dispatch, false);
  reg(d + "sync_each_op", bm_dispatch, true);
  add_comparison(
      {.title = fmt::format("vulkan:0 {} small adds (time per {} ops)", small_ops(), small_ops()),
       .ferry = d + "batched",
       .ferry_label = "batched",
       .baseline = d + "sync_each_op",
       .baseline_label = "submit+wait per op",
       .metric = Metric::usec});
  // The same benchmark on vulkan:0 and on the CPU, compared by `work` per iteration.
  auto versus_cpu = [&](const std::string& name, const std::string& title, auto fn,
                        const char* cpu_label, Metric metric, double work) {
    reg(name + "/vulkan0", fn, true);
    reg(name + "/cpu", fn, false);
    add_comparison({.title = title,
                    .ferry = name + "/vulkan0",
                    .ferry_label = "vulkan:0",
                    .baseline = name + "/cpu",
                    .baseline_label = cpu_label,
                    .metric = metric,
                    .ferry_work = work,
                    .baseline_work = work});
  };
  const std::string n = fmt::format("{}Mi", add_numel() >> 20);
  versus_cpu("vulkan/add_f32/" + n, "add f32 " + n + " elements", bm_add, "cpu", Metric::gbps,
             kRepeats * 3.0 * double(add_numel()) * 4);
  const std::string m = fmt::format("{0}x{0}x{0}", mm_n());
  versus_cpu("vulkan/matmul_f32/" + m, "matmul f32 " + m, bm_matmul, "cpu (OpenBLAS)",
             Metric::gflops, kRepeats * 2.0 * double(mm_n() * mm_n() * mm_n()));

  const double row_bytes = double(row_elements()) * 4;
  for (const std::int64_t n : {4096, 32}) {
    const std::string shape = fmt::format("{}x{}", row_elements() / n, n);
    const std::string copy = "vulkan/rows_" + shape + "/copy";
    auto row_bm = [&](const std::string& name, RowOp op) {
      reg(
          name, [op, n](benchmark::State& st, bool) { bm_rows(st, op, n); }, true);
    };
    row_bm(copy, RowOp::copy);
    for (const auto& [op_name, op, bytes] :
         {std::tuple{"sum", RowOp::sum, row_bytes},
          std::tuple{"softmax", RowOp::softmax, 2 * row_bytes},
          std::tuple{"layer_norm", RowOp::layer_norm, 2 * row_bytes},
          // x read and y written forward, g and x read and dx written backward
          std::tuple{"layer_norm fwd+bwd", RowOp::layer_norm_fwd_bwd, 5 * row_bytes}}) {
      const std::string name = "vulkan/rows_" + shape + "/" + op_name;
      row_bm(name, op);
      add_comparison({.title = fmt::format("vulkan:0 {} f32 {}", op_name, shape),
                      .ferry = name,
                      .ferry_label = "vulkan:0",
                      .baseline = copy,
                      .baseline_label = "copy on vulkan:0",
                      .metric = Metric::gbps,
                      .ferry_work = kRepeats * bytes,
                      .baseline_work = kRepeats * 2 * row_bytes});
    }
  }
}

}  // namespace bench
