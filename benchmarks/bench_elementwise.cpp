// benchmarks/bench_elementwise.cpp — element-wise add of two large f32
// tensors against memory-bandwidth baselines in the same process.
//
// Bytes counted: add moves 3 buffers (read a, read b, write c), memcpy moves 2
// (read src, write dst). Neither figure counts the write-allocate read a
// normal store causes; glibc's memcpy uses non-temporal stores at this size,
// which avoid it, so memcpy is the ceiling, not a like-for-like loop. The
// hand-written OpenMP add loop is the like-for-like baseline.
//
// Variants:
//   ferry add, new output      ferry::add(a, b): what an application calls. The
//                              output is allocated (and its pages first touched)
//                              on every call.
//   ferry add kernel, prealloc the CPU device's "add" kernel run straight on a
//                              preallocated output (what an in-place or out=
//                              API would cost; the dispatcher is bypassed).
//   hand add loop (OpenMP)     c[i] = a[i] + b[i], parallel for, preallocated c.
//   memcpy, 1 thread           std::memcpy of one buffer.
//   memcpy, OpenMP             the same split over the OpenMP threads.
#include <fmt/format.h>
#include <omp.h>

#include <cstring>
#include <memory>

#include "bench_common.hpp"
#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

std::int64_t numel() {
  return quick() ? (std::int64_t(1) << 22) : (std::int64_t(64) << 20);
}  // 4 Mi / 64 Mi floats
double buffer_bytes() { return double(numel()) * sizeof(float); }

struct AddData {
  ferry::Tensor a, b, c;  // c preallocated for the kernel-only variant
  float* pa = nullptr;    // host pointers of the same CPU tensors
  float* pb = nullptr;
  float* pc = nullptr;
};

float* host(const ferry::Tensor& t) {
  return static_cast<float*>(t.storage()->buffer().host_ptr()) + t.storage_offset();
}

AddData& add_data() {
  static std::unique_ptr<AddData> d;
  if (!d) {
    d = std::make_unique<AddData>();
    ferry::manual_seed(7);
    d->a = ferry::rand({numel()});
    d->b = ferry::rand({numel()});
    d->c = ferry::zeros({numel()});  // zeros: its pages are touched now, not in the timed loop
    d->pa = host(d->a);
    d->pb = host(d->b);
    d->pc = host(d->c);
  }
  return *d;
}

bool check_sum(benchmark::State& state, const float* c, const AddData& d) {
  for (std::int64_t i = 0; i < numel(); i += 4097)
    if (c[i] != d.pa[i] + d.pb[i]) {
      state.SkipWithError(
          fmt::format("wrong sum at element {}: {} != {} + {}", i, c[i], d.pa[i], d.pb[i]).c_str());
      return false;
    }
  return true;
}

void bm_ferry_add(benchmark::State& state) {
  AddData& d = add_data();
  if (!check_sum(state, host(ferry::add(d.a, d.b)), d)) return;
  for (auto _ : state) {
    ferry::Tensor c = ferry::add(d.a, d.b);
    benchmark::DoNotOptimize(c.storage().get());
  }
  state.counters["GB"] = rate(3 * buffer_bytes() / 1e9);
}

void bm_ferry_add_kernel(benchmark::State& state) {
  AddData& d = add_data();
  ferry::DeviceImpl& cpu = ferry::device_impl(ferry::Device::cpu());
  const ferry::KernelFn* add = cpu.find_kernel(ferry::OpId::add);
  if (!add) {
    state.SkipWithError("the cpu device has no add kernel");
    return;
  }
  ferry::OpCall call;
  call.op = ferry::OpId::add;
  call.inputs = {ferry::tensor_arg(d.a), ferry::tensor_arg(d.b)};
  call.outputs = {ferry::tensor_arg(d.c)};
  for (auto _ : state) {
    (*add)(cpu, call);
    benchmark::ClobberMemory();
  }
  if (!check_sum(state, d.pc, d)) return;
  state.counters["GB"] = rate(3 * buffer_bytes() / 1e9);
}

void bm_hand_add(benchmark::State& state) {
  AddData& d = add_data();
  const std::int64_t n = numel();
  float* __restrict c = d.pc;
  const float* __restrict a = d.pa;
  const float* __restrict b = d.pb;
  for (auto _ : state) {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
    benchmark::ClobberMemory();
  }
  if (!check_sum(state, d.pc, d)) return;
  state.counters["GB"] = rate(3 * buffer_bytes() / 1e9);
}

void bm_memcpy(benchmark::State& state, bool parallel) {
  AddData& d = add_data();  // the same buffers: a -> c
  const std::size_t bytes = std::size_t(buffer_bytes());
  for (auto _ : state) {
    if (!parallel) {
      std::memcpy(d.pc, d.pa, bytes);
    } else {
#pragma omp parallel
      {
        std::size_t nt = std::size_t(omp_get_num_threads()), t = std::size_t(omp_get_thread_num());
        std::size_t chunk = (bytes / nt + 63) / 64 * 64;
        std::size_t begin = std::min(bytes, t * chunk), end = std::min(bytes, begin + chunk);
        std::memcpy(reinterpret_cast<char*>(d.pc) + begin,
                    reinterpret_cast<const char*>(d.pa) + begin, end - begin);
      }
    }
    benchmark::ClobberMemory();
  }
  if (std::memcmp(d.pc, d.pa, bytes) != 0) {
    state.SkipWithError("memcpy copied wrong bytes");
    return;
  }
  state.counters["GB"] = rate(2 * buffer_bytes() / 1e9);
}

}  // namespace

void register_elementwise() {
  std::string n = quick() ? "4Mi" : "64Mi";
  const std::string p = "add_f32/" + n + "/";
  auto* ferry_new = benchmark::RegisterBenchmark((p + "ferry_new_output").c_str(), bm_ferry_add);
  auto* ferry_kernel =
      benchmark::RegisterBenchmark((p + "ferry_kernel_prealloc").c_str(), bm_ferry_add_kernel);
  auto* hand = benchmark::RegisterBenchmark((p + "hand_omp_loop").c_str(), bm_hand_add);
  auto* mc1 = benchmark::RegisterBenchmark((p + "memcpy_1thread").c_str(), bm_memcpy, false);
  auto* mcp = benchmark::RegisterBenchmark((p + "memcpy_omp").c_str(), bm_memcpy, true);
  for (auto* bm : {ferry_new, ferry_kernel, hand, mc1, mcp}) {
    bm->UseRealTime()->Unit(benchmark::kMillisecond);
    if (!quick()) bm->MinTime(1.0);
  }
  const double add_bytes = 3 * buffer_bytes(), copy_bytes = 2 * buffer_bytes();
  const std::string t = "add f32 " + n + " elements";
  auto cmp = [&](std::string title, std::string f, std::string fl, double fw, std::string b,
                 std::string bl, double bw) {
    add_comparison({.title = std::move(title),
                    .ferry = p + f,
                    .ferry_label = std::move(fl),
                    .baseline = p + b,
                    .baseline_label = std::move(bl),
                    .metric = Metric::gbps,
                    .ferry_work = fw,
                    .baseline_work = bw});
  };
  const int nt = omp_get_max_threads();
  std::string threads = fmt::format("memcpy {} thread{} (OpenMP)", nt, nt == 1 ? "" : "s");
  cmp(t + ", new output", "ferry_new_output", "ferry add", add_bytes, "memcpy_1thread",
      "memcpy 1 thread", copy_bytes);
  cmp(t + ", new output", "ferry_new_output", "ferry add", add_bytes, "memcpy_omp", threads,
      copy_bytes);
  cmp(t + ", preallocated output", "ferry_kernel_prealloc", "ferry add kernel", add_bytes,
      "memcpy_omp", threads, copy_bytes);
  cmp(t + ", preallocated output", "ferry_kernel_prealloc", "ferry add kernel", add_bytes,
      "hand_omp_loop", "hand OpenMP add loop", add_bytes);
  cmp(t + ", new output vs hand loop", "ferry_new_output", "ferry add", add_bytes, "hand_omp_loop",
      "hand OpenMP add loop (preallocated)", add_bytes);
}

}  // namespace bench
