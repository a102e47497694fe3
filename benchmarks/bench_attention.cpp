// benchmarks/bench_attention.cpp — issue 23's attention figures: scaled_dot_product_attention
// at sequence 512, 2048 and 8192 (8 heads of dim 64, batch 1; 128 and 256 with --quick),
// forward and forward+backward in f32, and in f16 on the GPUs, through the device's
// fused kernel beside the composition (matmul, softmax, matmul: ferry::debug::CompositesOnly)
// on the same device. Each run also
// reports its peak allocated memory past the inputs ("peak_MiB", memory_stats), the other
// half of what the fused kernel is for. cuda:0 (the composition, cuBLAS and ferry's softmax,
// until CUDA has a fused kernel) runs beside vulkan:0, the same GPU where vulkan:0 is one.
#include <fmt/format.h>

#include <functional>
#include <map>
#include <optional>

#include "bench_common.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

constexpr std::int64_t kHeads = 8, kHeadDim = 64;

struct Qkv {
  ferry::Tensor q, k, v;
};

// q of `Lq` rows (L where 0) against k and v of L rows, `heads` heads of 64.
const Qkv& data(std::int64_t L, const std::string& device, ferry::DType dtype, std::int64_t Lq = 0,
                std::int64_t heads = kHeads) {
  static std::map<std::string, Qkv> by_key;
  const std::string key =
      fmt::format("{}@{}@{}@{}@{}", L, Lq, heads, device, ferry::dtype_name(dtype));
  auto it = by_key.find(key);
  if (it == by_key.end()) {
    ferry::manual_seed(0);
    const ferry::Device dev(device);
    auto make = [&](std::int64_t rows) {
      return ferry::randn({1, heads, rows, kHeadDim}, {.device = dev}).to(dtype);
    };
    it = by_key.emplace(key, Qkv{make(Lq ? Lq : L), make(L), make(L)}).first;
  }
  return it->second;
}

void run_attention(benchmark::State& s, std::int64_t L, const std::string& device, bool backward,
                   bool composed, ferry::DType dtype, std::int64_t Lq = 0,
                   std::int64_t heads = kHeads) {
  if (!ferry::is_available(device)) return s.SkipWithError((device + " is not available").c_str());
  try {
    const Qkv& d = data(L, device, dtype, Lq, heads);
    const ferry::Device dev(device);
    std::optional<ferry::debug::CompositesOnly> compositions_only;
    if (composed) compositions_only.emplace();
    std::uint64_t peak = 0;
    bool warm = false;  // one untimed call first: a GPU backend compiles its pipelines then
    for (;;) {
      if (warm && !s.KeepRunning()) break;
      ferry::reset_peak_memory_stats(dev);
      const std::uint64_t base = ferry::memory_stats(dev).allocated;
      if (!backward) {
        ferry::NoGradGuard no_grad;
        ferry::Tensor y = ferry::nn::functional::scaled_dot_product_attention(d.q, d.k, d.v);
        ferry::synchronize(dev);
        benchmark::DoNotOptimize(y);
      } else {
        const ferry::Tensor q = d.q.detach().requires_grad_(), k = d.k.detach().requires_grad_(),
                            v = d.v.detach().requires_grad_();
        ferry::Tensor y = ferry::nn::functional::scaled_dot_product_attention(q, k, v);
        auto g = ferry::autograd::grad({y}, {q, k, v}, {ferry::ones_like(y)});
        ferry::synchronize(dev);
        benchmark::DoNotOptimize(g);
      }
      peak = std::max(peak, ferry::memory_stats(dev).peak_allocated - base);
      warm = true;
    }
    s.counters["peak_MiB"] = double(peak) / double(1 << 20);
  } catch (const ferry::Error& e) {
    s.SkipWithError(e.what());
  }
}

// A decoding step's pair of rows `base`/ferry <device>( composed)?: q [1, heads, 1, 64] against
// S keys in `dtype`, the fused kernel beside the composition, the figure the k and v bytes
// read per second.
// The fused kernel's row `base + "/ferry " + device` beside its composition's (the same name,
// " composed"), both doing `work` (bytes or FLOPs, as `metric` says).
void add_fused_vs_composed(std::string title, const std::string& base, const std::string& device,
                           Metric metric, double work) {
  add_comparison({.title = std::move(title),
                  .ferry = base + "/ferry " + device,
                  .ferry_label = "ferry fused",
                  .baseline = base + "/ferry " + device + " composed",
                  .baseline_label = "ferry matmul + softmax + matmul",
                  .metric = metric,
                  .ferry_work = work,
                  .baseline_work = work});
}

void register_decode(const std::string& base, std::int64_t S, std::int64_t heads,
                     const std::string& device, ferry::DType dtype) {
  for (const bool composed : {false, true}) {
    auto* b = benchmark::RegisterBenchmark(
        (base + "/ferry " + device + (composed ? " composed" : "")).c_str(),
        [S, heads, device, composed, dtype](benchmark::State& s) {
          run_attention(s, S, device, false, composed, dtype, 1, heads);
        });
    b->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  const double bytes = 2.0 * double(S) * kHeadDim * double(heads) * ferry::dtype_size(dtype);
  // "f16 keys" for a 16-bit cache; the f32 rows' titles name no dtype.
  const std::string kind = dtype == ferry::DType::f32
                               ? std::string("keys")
                               : fmt::format("{} keys", ferry::dtype_name(dtype));
  add_fused_vs_composed(fmt::format("scaled_dot_product_attention decoding step [1, {}, 1, {}] "
                                    "against {} {} ({})",
                                    heads, kHeadDim, S, kind, device),
                        base, device, Metric::gbps, bytes);
}

}  // namespace

void register_attention() {
  const std::vector<std::int64_t> lengths =
      quick() ? std::vector<std::int64_t>{128, 256} : std::vector<std::int64_t>{512, 2048, 8192};
  // f32 and f16, forward and forward+backward (f16 on vulkan:0 with FERRY_VULKAN_COOPMAT=1:
  // the cooperative-matrix kernels, Note [Attention on cooperative matrices] in
  // runtime/vulkan/vk_kernels_attention.cpp).
  struct Pass {
    bool backward;
    ferry::DType dtype;
    const char* name;
  };
  for (const std::int64_t L : lengths)
    for (const Pass& pass : {Pass{false, ferry::DType::f32, "forward"},
                             Pass{true, ferry::DType::f32, "forward+backward"},
                             Pass{false, ferry::DType::f16, "forward f16"},
                             Pass{true, ferry::DType::f16, "forward+backward f16"}}) {
      const bool backward = pass.backward;
      const ferry::DType dtype = pass.dtype;
      const std::string base = fmt::format("attention/L{}/{}", L, pass.name);
      // q kᵀ and p v: 4 L² E flops per head forward; the backward recomputes the scores and
      // takes four more products (the fused kernel's count; the composition does one less).
      const double fwd = 4.0 * double(L) * double(L) * kHeadDim * kHeads;
      const double work = backward ? fwd * 3.5 : fwd;
      // (f16 on the GPUs: the CPU's f16 attention measures its conversions)
      std::vector<std::string> devices{"vulkan:0"};
      if (dtype == ferry::DType::f32) devices.insert(devices.begin(), "cpu");
      // (a benchmark skipped for want of a device fails the run: registered where it runs)
      const bool cuda = ferry::is_available("cuda:0");
      if (cuda) devices.push_back("cuda:0");
      for (const std::string& device : devices) {
        // A backend with no fused kernel runs the composition either way: one row.
        const bool fused = ferry::op_info(ferry::OpId::scaled_dot_product_attention)
                               .builtin_kernel(device.substr(0, device.find(':')));
        for (const bool composed : {false, true}) {
          if (composed && !fused) continue;
          auto* b = benchmark::RegisterBenchmark(
              (base + "/ferry " + device + (composed ? " composed" : "")).c_str(),
              [L, device, backward, composed, dtype](benchmark::State& s) {
                run_attention(s, L, device, backward, composed, dtype);
              });
          b->Unit(benchmark::kMillisecond)->UseRealTime();
          // Seconds per call, gigabytes for the composition (lavapipe: seconds from 2048 on).
          if (L >= 8192 || (device == "vulkan:0" && L >= 2048)) b->Iterations(1);
        }
        if (!fused) continue;
        add_fused_vs_composed(fmt::format("scaled_dot_product_attention {} [1, {}, {}, {}] ({})",
                                          pass.name, kHeads, L, kHeadDim, device),
                              base, device, Metric::gflops, work);
      }
      // The same GPU through both backends, where vulkan:0 is one.
      if (cuda)
        add_comparison({.title = fmt::format("scaled_dot_product_attention {} [1, {}, {}, {}] "
                                             "(vulkan:0 vs cuda:0)",
                                             pass.name, kHeads, L, kHeadDim),
                        .ferry = base + "/ferry vulkan:0",
                        .ferry_label = "ferry vulkan:0",
                        .baseline = base + "/ferry cuda:0",
                        .baseline_label = "ferry cuda:0",
                        .metric = Metric::gflops,
                        .ferry_work = work,
                        .baseline_work = work});
    }
  // A decoding step: one query row against a cache of S keys (8 heads of 64), the cost of
  // every generated token; memory-bound, so its figure is the k and v bytes read per second.
  // On vulkan:0 the split-key kernels (Note [Split-key attention on Vulkan] in
  // shaders/attention.comp) beside the composition (a matrix-vector product, softmax, another).
  for (const std::int64_t S :
       quick() ? std::vector<std::int64_t>{1024} : std::vector<std::int64_t>{2048, 8192})
    for (const std::string device : {"cpu", "vulkan:0"})
      register_decode(fmt::format("attention/decode S{}/forward", S), S, kHeads, device,
                      ferry::DType::f32);
  if (quick()) return;
  // A cache of 16-bit keys and values, as generation mostly keeps it, on the CPU.
  register_decode("attention/decode S8192/forward f16", 8192, kHeads, "cpu", ferry::DType::f16);
  // One head against 65,536 keys (the bytes of 8 heads of 8,192): on the CPU, fewer heads
  // than threads, so the keys are cut into pieces over the idle threads (Note [Split keys on
  // the CPU] in runtime/cpu/cpu_kernels_attention.cpp).
  register_decode("attention/decode 1 head S65536/forward", 65536, 1, "cpu", ferry::DType::f32);
}

}  // namespace bench
