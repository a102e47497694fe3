// benchmarks/bench_cuda.cpp — the CUDA backend on cuda:0, each figure beside a
// baseline that calls the CUDA runtime or cuBLAS directly in the same process
// (issue 7's goals, docs/gpu-results.md):
//   element-wise   add, relu, exp on f32 against a device-to-device
//                  cudaMemcpyAsync of the same buffers (bytes moved / s);
//   reductions     sum over all elements, and softmax over rows, against the
//                  same copy;
//   gemm           ferry::matmul f32 and f16 against cublasSgemm /
//                  cublasGemmEx called on raw cudaMalloc memory;
//   launch         10,000 adds of 64 floats, time per op, against 10,000
//                  cudaMemsetAsync calls (the cheapest enqueue there is) and
//                  against PyTorch eager's adds;
//   migration      a GPT-2-sized set of tensors cpu -> cuda:0 through the
//                  transfer planner against cudaMemcpyAsync from pinned
//                  memory, and against PyTorch's per-tensor .to("cuda").
// The PyTorch baselines run through libtorch in this process
// (bench_cuda_torch.cpp) when CMake found a libtorch built with CUDA.
// Built only with the CUDA toolkit; skipped, saying why, without a GPU.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "bench_common.hpp"
#ifdef FERRY_BENCH_HAVE_TORCH_CUDA
#include "bench_cuda_torch.hpp"
#endif
#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "ferry/transfer.hpp"

namespace bench {
namespace {

const ferry::Device& gpu() {
  static ferry::Device d("cuda:0");
  return d;
}

std::int64_t big() { return quick() ? (std::int64_t(1) << 22) : (std::int64_t(64) << 20); }

// Raw device memory for the baselines, freed at exit.
struct Raw {
  void* p = nullptr;
  explicit Raw(std::size_t bytes) {
    if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
  }
  ~Raw() { cudaFree(p); }
};

void bm_copy(benchmark::State& state) {
  const std::size_t bytes = std::size_t(big()) * 4;
  Raw a(bytes), b(bytes);
  if (!a.p || !b.p) return state.SkipWithError("cudaMalloc failed");
  for (auto _ : state) {
    cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, nullptr);
    cudaDeviceSynchronize();
  }
}

// The same op on vulkan:0 when it is a GPU (the same card through NVIDIA's
// Vulkan driver), kRepeats ops per synchronize so that the host's wait is no
// part of the figure.
constexpr int kRepeats = 8;
template <typename Op> void bm_vulkan(benchmark::State& state, Op op) {
  const ferry::Device vk("vulkan:0");
  ferry::manual_seed(5);
  ferry::Tensor a = ferry::randn({big()}).to(vk), b = ferry::randn({big()}).to(vk);
  ferry::synchronize(vk);
  for (auto _ : state) {
    for (int r = 0; r < kRepeats; ++r) ferry::Tensor c = op(a, b);
    ferry::synchronize(vk);
  }
}
bool vulkan_is_gpu() {
  if (!ferry::is_available("vulkan:0")) return false;
  const ferry::DeviceKind k = ferry::device_impl(ferry::Device("vulkan:0")).info().kind;
  return k == ferry::DeviceKind::discrete_gpu || k == ferry::DeviceKind::integrated_gpu;
}

template <typename Op> void bm_ferry(benchmark::State& state, Op op) {
  ferry::manual_seed(5);
  ferry::Tensor a = ferry::randn({big()}).to(gpu()), b = ferry::randn({big()}).to(gpu());
  ferry::synchronize(gpu());
  for (auto _ : state) {
    ferry::Tensor c = op(a, b);
    ferry::synchronize(gpu());
  }
}

std::int64_t rows() { return quick() ? 1024 : 16384; }
void bm_softmax(benchmark::State& state) {
  ferry::Tensor x = ferry::randn({rows(), 4096}).to(gpu());
  for (auto _ : state) {
    ferry::Tensor y = ferry::softmax(x, -1);
    ferry::synchronize(gpu());
  }
}

std::int64_t mm() { return quick() ? 512 : 4096; }

void bm_matmul(benchmark::State& state, ferry::DType dt) {
  ferry::Tensor a = ferry::randn({mm(), mm()}).to(gpu()).to(dt);
  ferry::Tensor b = ferry::randn({mm(), mm()}).to(gpu()).to(dt);
  for (auto _ : state) {
    ferry::Tensor c = ferry::matmul(a, b);
    ferry::synchronize(gpu());
  }
}

// f32, f16 or bf16 operands and result, f32 accumulation.
void bm_cublas(benchmark::State& state, ferry::DType dt) {
  const int n = int(mm());
  const std::size_t el = dt == ferry::DType::f32 ? 4 : 2;
  Raw a(std::size_t(n) * n * el), b(std::size_t(n) * n * el), c(std::size_t(n) * n * el);
  cublasHandle_t h = nullptr;
  if (!a.p || !b.p || !c.p || cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
    return state.SkipWithError("cudaMalloc or cublasCreate failed");
  // Random operands, as ferry's side gets: a product of zeros runs faster than real data.
  for (void* p : {a.p, b.p}) {
    std::mt19937 gen(7);
    std::normal_distribution<float> normal;
    std::vector<float> f(std::size_t(n) * n);
    for (float& v : f) v = normal(gen);
    if (dt == ferry::DType::f16) {
      std::vector<ferry::Half> h(f.begin(), f.end());
      cudaMemcpy(p, h.data(), h.size() * el, cudaMemcpyHostToDevice);
    } else if (dt == ferry::DType::bf16) {
      std::vector<ferry::BFloat16> h(f.begin(), f.end());
      cudaMemcpy(p, h.data(), h.size() * el, cudaMemcpyHostToDevice);
    } else {
      cudaMemcpy(p, f.data(), f.size() * el, cudaMemcpyHostToDevice);
    }
  }
  const float one = 1, zero = 0;
  const cudaDataType t = dt == ferry::DType::f16    ? CUDA_R_16F
                         : dt == ferry::DType::bf16 ? CUDA_R_16BF
                                                    : CUDA_R_32F;
  for (auto _ : state) {
    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b.p, t, n, a.p, t, n, &zero, c.p, t, n,
                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cudaDeviceSynchronize();
  }
  cublasDestroy(h);
}

constexpr int kSmallOps = 10000;
void bm_launch_ferry(benchmark::State& state) {
  ferry::Tensor x = ferry::zeros({64}, {.device = gpu()}),
                one = ferry::ones({64}, {.device = gpu()});
  for (auto _ : state) {
    for (int i = 0; i < kSmallOps; ++i) x = x + one;
    ferry::synchronize(gpu());
  }
}
void bm_launch_memset(benchmark::State& state) {
  Raw a(256);
  for (auto _ : state) {
    for (int i = 0; i < kSmallOps; ++i) cudaMemsetAsync(a.p, 0, 256, nullptr);
    cudaDeviceSynchronize();
  }
}

// GPT-2 small's parameter shapes, as in bench_transfer.cpp: 124M floats.
std::vector<std::pair<std::string, ferry::Tensor>> gpt2_like() {
  std::vector<std::pair<std::string, ferry::Tensor>> ts;
  const std::int64_t d = quick() ? 192 : 768, layers = quick() ? 2 : 12;
  ts.emplace_back("wte", ferry::zeros({50257, d}));
  for (int l = 0; l < layers; ++l) {
    const std::string p = fmt::format("h{}.", l);
    ts.emplace_back(p + "attn", ferry::zeros({d, 3 * d}));
    ts.emplace_back(p + "proj", ferry::zeros({d, d}));
    ts.emplace_back(p + "fc", ferry::zeros({d, 4 * d}));
    ts.emplace_back(p + "fc_proj", ferry::zeros({4 * d, d}));
  }
  return ts;
}
double gpt2_bytes() {
  double b = 0;
  for (auto& [n, t] : gpt2_like()) b += double(t.numel()) * 4;
  return b;
}

#ifdef FERRY_BENCH_HAVE_TORCH_CUDA
void bm_launch_torch(benchmark::State& state) {
  for (auto _ : state) torch_cuda::tiny_adds(kSmallOps);
}

void bm_migrate_torch(benchmark::State& state) {
  std::vector<std::vector<std::int64_t>> shapes;
  for (auto& [n, t] : gpt2_like()) shapes.emplace_back(t.shape().begin(), t.shape().end());
  for (auto _ : state) {
    state.PauseTiming();
    torch_cuda::make_host_tensors(shapes);
    state.ResumeTiming();
    torch_cuda::move_host_tensors_to_cuda();
  }
}
#endif

void bm_migrate(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    auto ts = gpt2_like();
    state.ResumeTiming();
    ferry::plan_migration(ts, gpu()).execute();
    ferry::synchronize(gpu());
  }
}
// From pinned memory (Tensor::pin_memory): the planner's DMA route, no staging.
void bm_migrate_pinned(benchmark::State& state, const ferry::Device& to) {
  if (!ferry::device_impl(to).capabilities().host_registration)
    return state.SkipWithError((to.str() + " cannot pin host memory").c_str());
  auto ts = gpt2_like();
  for (auto _ : state) {
    state.PauseTiming();
    for (auto& [n, t] : ts) t = ferry::full(t.shape(), 1.5).pin_memory(to);  // from the cache
    state.ResumeTiming();
    ferry::plan_migration(ts, to).execute();
    ferry::synchronize(to);
  }
  // What arrived is what was sent (the DMA route has no other test on a GPU here).
  for (auto& [n, t] : ts)
    if (t.device() != to || ferry::max(ferry::abs(t - 1.5)).item<float>() != 0)
      return state.SkipWithError((n + " did not arrive intact on " + to.str()).c_str());
}
void bm_pinned_copy(benchmark::State& state) {
  const std::size_t bytes = std::size_t(gpt2_bytes());
  void* host = nullptr;
  Raw dev(bytes);
  if (cudaHostAlloc(&host, bytes, 0) != cudaSuccess || !dev.p)
    return state.SkipWithError("cudaHostAlloc or cudaMalloc failed");
  std::memset(host, 0, bytes);
  for (auto _ : state) {
    cudaMemcpyAsync(dev.p, host, bytes, cudaMemcpyHostToDevice, nullptr);
    cudaDeviceSynchronize();
  }
  cudaFreeHost(host);
}

}  // namespace

void register_cuda() {
  if (!ferry::is_available("cuda:0")) {
    std::string why = "no CUDA device";
    for (const auto& d : ferry::devices())
      if (d.backend == "cuda" && !d.available) why = d.unavailable_reason;
    std::printf("cuda benchmarks skipped: %s\n", why.c_str());
    return;
  }
  auto reg = [](const std::string& name, auto fn) {
    auto* bm = benchmark::RegisterBenchmark(name.c_str(), fn);
    bm->UseRealTime()->Unit(benchmark::kMillisecond);
    if (!quick()) bm->MinTime(1.0);
    return bm;
  };
  const double n4 = double(big()) * 4;
  const std::string sz = fmt::format("{}Mi", big() >> 20);
  reg("cuda/copy_d2d/" + sz, bm_copy);
  auto versus_copy = [&](const std::string& op, auto fn, double bytes) {
    reg("cuda/" + op + "/" + sz, fn);
    add_comparison({.title = fmt::format("cuda:0 {} f32 {}", op, sz),
                    .ferry = "cuda/" + op + "/" + sz,
                    .ferry_label = "ferry",
                    .baseline = "cuda/copy_d2d/" + sz,
                    .baseline_label = "cudaMemcpy D2D",
                    .metric = Metric::gbps,
                    .ferry_work = bytes,
                    .baseline_work = 2 * n4});
  };
  versus_copy(
      "add", [](benchmark::State& s) { bm_ferry(s, [](auto& a, auto& b) { return a + b; }); },
      3 * n4);
  versus_copy(
      "relu",
      [](benchmark::State& s) { bm_ferry(s, [](auto& a, auto&) { return ferry::relu(a); }); },
      2 * n4);
  versus_copy(
      "exp", [](benchmark::State& s) { bm_ferry(s, [](auto& a, auto&) { return ferry::exp(a); }); },
      2 * n4);
  versus_copy(
      "sum", [](benchmark::State& s) { bm_ferry(s, [](auto& a, auto&) { return ferry::sum(a); }); },
      n4);
  const std::string sm = fmt::format("cuda/softmax/{}x4096", rows());
  reg(sm, bm_softmax);
  add_comparison({.title = fmt::format("cuda:0 softmax f32 {}x4096", rows()),
                  .ferry = sm,
                  .ferry_label = "ferry",
                  .baseline = "cuda/copy_d2d/" + sz,
                  .baseline_label = "cudaMemcpy D2D",
                  .metric = Metric::gbps,
                  .ferry_work = 2.0 * double(rows()) * 4096 * 4,
                  .baseline_work = 2 * n4});
  const std::string m = fmt::format("{0}x{0}x{0}", mm());
  const double flops = 2.0 * double(mm()) * double(mm()) * double(mm());
  for (const ferry::DType dt : {ferry::DType::f32, ferry::DType::f16, ferry::DType::bf16}) {
    const std::string t(ferry::dtype_name(dt));
    reg("cuda/matmul_" + t + "/" + m, [dt](benchmark::State& s) { bm_matmul(s, dt); });
    reg("cuda/cublas_" + t + "/" + m, [dt](benchmark::State& s) { bm_cublas(s, dt); });
    add_comparison({.title = "cuda:0 matmul " + t + " " + m,
                    .ferry = "cuda/matmul_" + t + "/" + m,
                    .ferry_label = "ferry",
                    .baseline = "cuda/cublas_" + t + "/" + m,
                    .baseline_label = "cuBLAS direct",
                    .metric = Metric::gflops,
                    .ferry_work = flops,
                    .baseline_work = flops});
  }
  reg("cuda/launch/ferry_add_x10000", bm_launch_ferry);
  reg("cuda/launch/cudaMemsetAsync_x10000", bm_launch_memset);
  add_comparison({.title = "cuda:0 10,000 tiny ops (time per 10,000)",
                  .ferry = "cuda/launch/ferry_add_x10000",
                  .ferry_label = "ferry add",
                  .baseline = "cuda/launch/cudaMemsetAsync_x10000",
                  .baseline_label = "cudaMemsetAsync",
                  .metric = Metric::usec});
#ifdef FERRY_BENCH_HAVE_TORCH_CUDA
  const bool torch = torch_cuda::available();
  const std::string torch_label = "PyTorch " + torch_cuda::version() + " eager";
  if (torch) {
    reg("cuda/launch/pytorch_add_x10000", bm_launch_torch);
    add_comparison({.title = "cuda:0 10,000 tiny ops (time per 10,000)",
                    .ferry = "cuda/launch/ferry_add_x10000",
                    .ferry_label = "ferry add",
                    .baseline = "cuda/launch/pytorch_add_x10000",
                    .baseline_label = torch_label + " add",
                    .metric = Metric::usec});
  }
#endif
  reg("cuda/migrate_gpt2_shapes", bm_migrate);
  reg("cuda/pinned_memcpy_gpt2_bytes", bm_pinned_copy);
  reg("cuda/migrate_gpt2_shapes_pinned",
      [](benchmark::State& s) { bm_migrate_pinned(s, ferry::Device("cuda:0")); });
  add_comparison({.title = "cpu (pinned) -> cuda:0 GPT-2 shapes, planner",
                  .ferry = "cuda/migrate_gpt2_shapes_pinned",
                  .ferry_label = "planner, pinned",
                  .baseline = "cuda/pinned_memcpy_gpt2_bytes",
                  .baseline_label = "pinned cudaMemcpy",
                  .metric = Metric::gbps,
                  .ferry_work = gpt2_bytes(),
                  .baseline_work = gpt2_bytes()});
  if (vulkan_is_gpu()) {
    // vulkan:0 on this GPU against the CUDA baselines of the same card (issue 26's goals).
    auto versus = [&](const std::string& name, const std::string& title, auto fn,
                      const std::string& baseline, const std::string& baseline_label, Metric metric,
                      double work, double baseline_work) {
      reg(name, fn);
      add_comparison({.title = title,
                      .ferry = name,
                      .ferry_label = "vulkan:0",
                      .baseline = baseline,
                      .baseline_label = baseline_label,
                      .metric = metric,
                      .ferry_work = work,
                      .baseline_work = baseline_work});
    };
    const double reps = kRepeats;
    versus(
        "vulkan/add/" + sz, "vulkan:0 add f32 " + sz,
        [](benchmark::State& st) { bm_vulkan(st, [](auto& a, auto& b) { return a + b; }); },
        "cuda/copy_d2d/" + sz, "cudaMemcpy D2D", Metric::gbps, reps * 3 * n4, 2 * n4);
    versus(
        "vulkan/relu/" + sz, "vulkan:0 relu f32 " + sz,
        [](benchmark::State& st) { bm_vulkan(st, [](auto& a, auto&) { return ferry::relu(a); }); },
        "cuda/copy_d2d/" + sz, "cudaMemcpy D2D", Metric::gbps, reps * 2 * n4, 2 * n4);
    versus(
        "vulkan/exp/" + sz, "vulkan:0 exp f32 " + sz,
        [](benchmark::State& st) { bm_vulkan(st, [](auto& a, auto&) { return ferry::exp(a); }); },
        "cuda/copy_d2d/" + sz, "cudaMemcpy D2D", Metric::gbps, reps * 2 * n4, 2 * n4);
    for (const ferry::DType dt : {ferry::DType::f32, ferry::DType::f16, ferry::DType::bf16}) {
      const std::string t(ferry::dtype_name(dt));
      versus(
          "vulkan/matmul_" + t + "/" + m, "vulkan:0 matmul " + t + " " + m,
          [dt](benchmark::State& st) {
            const ferry::Device vk("vulkan:0");
            ferry::Tensor a = ferry::randn({mm(), mm()}).to(vk).to(dt);
            ferry::Tensor b = ferry::randn({mm(), mm()}).to(vk).to(dt);
            for (auto _ : st) {
              for (int r = 0; r < kRepeats; ++r) ferry::Tensor c = ferry::matmul(a, b);
              ferry::synchronize(vk);
            }
          },
          "cuda/cublas_" + t + "/" + m, "cuBLAS direct", Metric::gflops, reps * flops, flops);
    }
    versus(
        "vulkan/migrate_gpt2_shapes_pinned", "cpu (pinned) -> vulkan:0 GPT-2 shapes, planner",
        [](benchmark::State& st) { bm_migrate_pinned(st, ferry::Device("vulkan:0")); },
        "cuda/pinned_memcpy_gpt2_bytes", "pinned cudaMemcpy", Metric::gbps, gpt2_bytes(),
        gpt2_bytes());
  }
  add_comparison({.title = "cpu -> cuda:0 GPT-2 shapes, planner",
                  .ferry = "cuda/migrate_gpt2_shapes",
                  .ferry_label = "planner",
                  .baseline = "cuda/pinned_memcpy_gpt2_bytes",
                  .baseline_label = "pinned cudaMemcpy",
                  .metric = Metric::gbps,
                  .ferry_work = gpt2_bytes(),
                  .baseline_work = gpt2_bytes()});
#ifdef FERRY_BENCH_HAVE_TORCH_CUDA
  if (torch) {
    reg("cuda/pytorch_to_cuda_gpt2_shapes", bm_migrate_torch);
    add_comparison({.title = "cpu -> cuda:0 GPT-2 shapes, planner",
                    .ferry = "cuda/migrate_gpt2_shapes",
                    .ferry_label = "planner",
                    .baseline = "cuda/pytorch_to_cuda_gpt2_shapes",
                    .baseline_label = "PyTorch " + torch_cuda::version() + " .to(cuda) per tensor",
                    .metric = Metric::gbps,
                    .ferry_work = gpt2_bytes(),
                    .baseline_work = gpt2_bytes()});
  }
#endif
}

}  // namespace bench
