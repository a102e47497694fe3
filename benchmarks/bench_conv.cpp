// benchmarks/bench_conv.cpp — issue 22's convolution figures: conv2d forward, and forward
// with the input's and weight's gradients, at ResNet-18's layer shapes (batch 32, 224 x 224
// images; batch 2 at a quarter of the size with --quick), and one ResNet-18 training step
// (samples/resnet.hpp, cross_entropy, SGD with momentum): ferry's CPU beside PyTorch's
// (libtorch, this process, its oneDNN convolutions) and vulkan:0 beside ferry's CPU (on
// lavapipe both are the CPU), and beside its own composition (gathered windows and matmul,
// the path before its convolution kernels); with the CUDA toolkit, cuda:0 (its cuDNN
// kernels) beside cuDNN called directly (bench_cudnn.cpp) and beside its composition, and
// vulkan:0 beside cuda:0. The `channels-last` rows convert the input and weight (the model and
// its input, for the step) to MemoryFormat::channels_last, on ferry's CPU and in libtorch,
// each also beside ferry's NCHW figure; the layers after ResNet-18's first convolution
// (batch_norm, max_pool2d, and an avg_pool2d of the same size), forward and backward,
// contiguous and channels-last, beside libtorch and beside ferry's composition of the layer.
// Inputs are made once; each iteration is one call.
#include "bench_conv.hpp"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "bench_common.hpp"
#ifdef FERRY_BENCH_HAVE_CUDA
#include "cuda_cudnn.hpp"
#endif
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
#include "resnet.hpp"

namespace bench {
namespace {

using namespace conv;

struct Data {
  ferry::Tensor x, w;
};

const Data& data(const ConvCase& c, const std::string& device, ferry::DType dtype,
                 ferry::MemoryFormat format) {
  static std::map<std::string, Data> by_key;
  const std::string key = fmt::format("{}@{}@{}@{}", c.name, device, ferry::dtype_name(dtype),
                                      ferry::memory_format_name(format));
  auto it = by_key.find(key);
  if (it == by_key.end()) {
    ferry::manual_seed(0);
    const ferry::Device dev(device);
    const std::int64_t h = size(c, quick());
    const auto leaf = [&](const ferry::Tensor& t) {
      return t.to(dtype).contiguous(format).detach().requires_grad_();
    };
    Data d{leaf(ferry::randn({batch(quick()), c.c, h, h}, {.device = dev})),
           leaf(ferry::randn({c.oc, c.c, c.k, c.k}, {.device = dev}) * 0.05)};
    it = by_key.emplace(key, std::move(d)).first;
  }
  return it->second;
}

// `composed`: through the composition (gathered windows and matmul) instead of the device's
// convolution kernels (ferry::debug::CompositesOnly), the baseline the kernels replace.
// `format`: the input's and the weight's layout.
void run_conv(benchmark::State& s, const ConvCase& c, const std::string& device, bool backward,
              bool composed = false, ferry::DType dtype = ferry::DType::f32,
              ferry::MemoryFormat format = ferry::MemoryFormat::contiguous) {
  if (!ferry::is_available(device)) return s.SkipWithError((device + " is not available").c_str());
  try {
    const Data& d = data(c, device, dtype, format);
    std::optional<ferry::debug::CompositesOnly> compositions_only;
    if (composed) compositions_only.emplace();
    auto call = [&] {
      if (!backward) {
        ferry::NoGradGuard no_grad;
        ferry::Tensor y = ferry::conv2d(d.x, d.w, {}, {c.stride}, c.pad);
        ferry::synchronize(y.device());
        benchmark::DoNotOptimize(y);
        return;
      }
      ferry::Tensor y = ferry::conv2d(d.x, d.w, {}, {c.stride}, c.pad);
      auto g = ferry::autograd::grad({y}, {d.x, d.w}, {ferry::ones_like(y).contiguous(format)});
      ferry::synchronize(y.device());
      benchmark::DoNotOptimize(g);
    };
    if (!quick()) call();  // untimed: a GPU backend compiles its pipelines on the first call
    for (auto _ : s) call();
  } catch (const ferry::Error& e) {
    s.SkipWithError(e.what());
  }
}

// One ResNet-18 training step per iteration on `device`; `channels_last`: the model and its
// input converted (Module::to(MemoryFormat)).
void run_resnet(benchmark::State& s, const std::string& device, bool composed = false,
                bool channels_last = false) {
  if (!ferry::is_available(device)) return s.SkipWithError((device + " is not available").c_str());
  try {
    std::optional<ferry::debug::CompositesOnly> compositions_only;
    if (composed) compositions_only.emplace();
    const ferry::Device dev(device);
    ferry::manual_seed(0);
    sample::ResNet model(sample::ResNetOptions{}, {.device = dev});
    ferry::optim::SGD opt(model.parameters(), {.lr = 0.01, .momentum = 0.9});
    const std::int64_t n = batch(quick()), hw = resnet_image(quick());
    ferry::Tensor x = ferry::randn({n, 3, hw, hw}, {.device = dev});
    if (channels_last) {
      model.to(ferry::MemoryFormat::channels_last);
      x = x.contiguous(ferry::MemoryFormat::channels_last);
    }
    const ferry::Tensor y = ferry::randint(0, 1000, {n}).to(dev);
    auto step = [&] {
      opt.zero_grad();
      ferry::Tensor loss = ferry::nn::functional::cross_entropy(model.forward(x), y);
      loss.backward();
      opt.step();
      benchmark::DoNotOptimize(loss.item<float>());
    };
    if (!quick()) step();  // untimed, as run_conv's first call
    for (auto _ : s) step();
  } catch (const ferry::Error& e) {
    s.SkipWithError(e.what());
  }
}

// One of layers() (bench_conv.hpp) per iteration on `device`, forward and the input's
// gradient, the input and the gradient flowing in laid out in `format`, made once per layer,
// layout and device; `composed` as run_conv's.
void run_layer(benchmark::State& s, const std::string& layer, ferry::MemoryFormat format,
               const std::string& device = "cpu", bool composed = false) {
  if (!ferry::is_available(device)) return s.SkipWithError((device + " is not available").c_str());
  struct Layer {
    ferry::Tensor x, w, b, g;
  };
  static std::map<std::string, Layer> by_key;
  const std::string key =
      layer + "@" + std::string(ferry::memory_format_name(format)) + "@" + device;
  auto it = by_key.find(key);
  const auto run = [&](const Layer& l) {
    if (layer == "batch_norm")
      return ferry::nn::functional::batch_norm(l.x, {}, {}, l.w, l.b, true);
    if (layer == "interpolate bilinear x2")
      return ferry::interpolate(l.x, {.scale_factor = {2.0}, .mode = "bilinear"});
    if (layer == "adaptive_avg_pool2d 1x1") return ferry::adaptive_avg_pool2d(l.x, {1});
    if (layer == "adaptive_avg_pool2d 6x6") return ferry::adaptive_avg_pool2d(l.x, {6});
    if (layer == "adaptive_max_pool2d 6x6") return ferry::adaptive_max_pool2d(l.x, {6});
    return layer == "avg_pool2d 3x3/2" ? ferry::avg_pool2d(l.x, {3}, {2}, {1})
                                       : ferry::max_pool2d(l.x, {3}, {2}, {1});
  };
  std::optional<ferry::debug::CompositesOnly> compositions_only;
  if (composed) compositions_only.emplace();
  if (it == by_key.end()) {
    ferry::manual_seed(0);
    const std::int64_t h = layer_size(quick());
    const ferry::TensorOptions on{.device = ferry::Device(device)};
    Layer l{ferry::randn({batch(quick()), 64, h, h}, on).contiguous(format).requires_grad_(),
            ferry::ones({64}, on).requires_grad_(),
            ferry::zeros({64}, on).requires_grad_(),
            {}};
    l.g = ferry::randn(run(l).sizes(), on).contiguous(format);
    it = by_key.emplace(key, std::move(l)).first;
  }
  const Layer& l = it->second;
  auto call = [&] {
    std::vector<ferry::Tensor> g = ferry::autograd::grad({run(l)}, {l.x}, {l.g});
    ferry::synchronize(l.x.device());
    benchmark::DoNotOptimize(g);
  };
  if (!quick()) call();  // untimed, as run_conv's first call
  for (auto _ : s) call();
}

}  // namespace

#ifdef FERRY_BENCH_HAVE_TORCH
namespace {
// A libtorch row: one untimed call first, as run_conv's and run_layer's (it makes the layers'
// inputs and warms libtorch's allocator, which a row of few iterations would otherwise time).
template <typename F> void torch_row(benchmark::State& s, const F& call) {
  if (!quick()) call();
  for (auto _ : s) call();
}
}  // namespace
#endif

void register_conv() {
#ifdef FERRY_BENCH_HAVE_TORCH
  conv::torch_setup(quick());
#endif
  auto run = [](const std::string& name, std::function<void(benchmark::State&)> fn) {
    benchmark::RegisterBenchmark(name.c_str(), std::move(fn))
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  };
  auto compare = [](const std::string& title, const std::string& ferry,
                    const std::string& ferry_label, const std::string& baseline,
                    const std::string& baseline_label, Metric m, double work) {
    add_comparison({.title = title,
                    .ferry = ferry,
                    .ferry_label = ferry_label,
                    .baseline = baseline,
                    .baseline_label = baseline_label,
                    .metric = m,
                    .ferry_work = work,
                    .baseline_work = work});
  };
  const std::int64_t n = batch(quick());
  for (const ConvCase& c : cases()) {
    for (const bool backward : {false, true}) {
      const std::string pass = backward ? "forward+backward" : "forward";
      const std::string base = fmt::format("conv/{}/{}", c.name, pass);
      const double work = flops(c, quick()) * (backward ? 3.0 : 1.0);
      const std::string title = fmt::format("conv2d {} {} [{}, {}, {}, {}] -> {} ch", pass, c.name,
                                            n, c.c, size(c, quick()), size(c, quick()), c.oc);
      for (const std::string device : {"cpu", "vulkan:0"})
        run(base + "/ferry " + device,
            [&c, device, backward](benchmark::State& s) { run_conv(s, c, device, backward); });
      run(base + "/ferry vulkan:0 composed",
          [&c, backward](benchmark::State& s) { run_conv(s, c, "vulkan:0", backward, true); });
#ifdef FERRY_BENCH_HAVE_CUDA
      // (a benchmark skipped for want of a device fails the run: registered where it runs)
      if (ferry::is_available("cuda:0")) {
        run(base + "/ferry cuda:0",
            [&c, backward](benchmark::State& s) { run_conv(s, c, "cuda:0", backward); });
        run(base + "/ferry cuda:0 composed",
            [&c, backward](benchmark::State& s) { run_conv(s, c, "cuda:0", backward, true); });
        if (ferry::cuda::cudnn::api().ok) {
          run(base + "/cudnn", [&c, backward](benchmark::State& s) {
            try {
              conv::cudnn_conv(c, quick(), backward);  // untimed: buffers, descriptors
              for (auto _ : s) conv::cudnn_conv(c, quick(), backward);
            } catch (const std::exception& e) {
              s.SkipWithError(e.what());
            }
          });
          compare(title + " (cuda:0 vs cuDNN direct)", base + "/ferry cuda:0", "ferry cuda:0",
                  base + "/cudnn", "cuDNN called directly", Metric::gflops, work);
        }
        compare(title + " (cuda:0 kernels vs composition)", base + "/ferry cuda:0",
                "ferry cuda:0 cuDNN", base + "/ferry cuda:0 composed",
                "ferry cuda:0 unfold + cuBLAS matmul", Metric::gflops, work);
        compare(title + " (vulkan:0 vs cuda:0)", base + "/ferry vulkan:0", "ferry vulkan:0",
                base + "/ferry cuda:0", "ferry cuda:0", Metric::gflops, work);
      }
#endif
#ifdef FERRY_BENCH_HAVE_TORCH
      run(base + "/pytorch", [name = std::string(c.name), backward](benchmark::State& s) {
        torch_row(s, [&] { conv::torch_conv(name, backward); });
      });
      compare(title + " (cpu)", base + "/ferry cpu", "ferry", base + "/pytorch",
              "PyTorch (libtorch)", Metric::gflops, work);
      // Channels-last input and weight, as after model.to(memory_format=channels_last).
      const std::string cl = fmt::format("conv/{}/{} channels-last", c.name, pass);
      run(cl + "/ferry cpu", [&c, backward](benchmark::State& s) {
        run_conv(s, c, "cpu", backward, false, ferry::DType::f32,
                 ferry::MemoryFormat::channels_last);
      });
      run(cl + "/pytorch", [name = std::string(c.name), backward](benchmark::State& s) {
        torch_row(s, [&] { conv::torch_conv(name, backward, true); });
      });
      compare(title + " channels-last (cpu)", cl + "/ferry cpu", "ferry", cl + "/pytorch",
              "PyTorch (libtorch)", Metric::gflops, work);
      compare(title + " (cpu, channels-last vs contiguous)", cl + "/ferry cpu",
              "ferry channels-last", base + "/ferry cpu", "ferry contiguous", Metric::gflops, work);
#endif
      compare(title + " (vulkan:0 vs cpu)", base + "/ferry vulkan:0", "ferry vulkan:0",
              base + "/ferry cpu", "ferry cpu", Metric::gflops, work);
      compare(title + " (vulkan:0 kernels vs composition)", base + "/ferry vulkan:0",
              "ferry vulkan:0 conv kernels", base + "/ferry vulkan:0 composed",
              "ferry vulkan:0 im2col + matmul", Metric::gflops, work);
    }
    // f16 passes: on vulkan:0 with FERRY_VULKAN_COOPMAT=1 the matrix units' path (Note
    // [Convolutions on cooperative matrices]; forward and backward), beside cuDNN's f16
    // through cuda:0 on the same GPU.
    for (const bool backward : {false, true}) {
      const std::string pass = backward ? "forward+backward" : "forward";
      const std::string base = fmt::format("conv/{}/{} f16", c.name, pass);
      const std::string title =
          fmt::format("conv2d {} f16 {} [{}, {}, {}, {}] -> {} ch", pass, c.name, n, c.c,
                      size(c, quick()), size(c, quick()), c.oc);
      const double work = flops(c, quick()) * (backward ? 3.0 : 1.0);
      run(base + "/ferry vulkan:0", [&c, backward](benchmark::State& s) {
        run_conv(s, c, "vulkan:0", backward, false, ferry::DType::f16);
      });
      compare(title + " (vulkan:0 f16 vs f32)", base + "/ferry vulkan:0", "ferry vulkan:0 f16",
              fmt::format("conv/{}/{}/ferry vulkan:0", c.name, pass), "ferry vulkan:0 f32",
              Metric::gflops, work);
#ifdef FERRY_BENCH_HAVE_CUDA
      if (ferry::is_available("cuda:0")) {
        run(base + "/ferry cuda:0", [&c, backward](benchmark::State& s) {
          run_conv(s, c, "cuda:0", backward, false, ferry::DType::f16);
        });
        compare(title + " (vulkan:0 vs cuda:0)", base + "/ferry vulkan:0", "ferry vulkan:0",
                base + "/ferry cuda:0", "ferry cuda:0 (cuDNN)", Metric::gflops, work);
      }
#endif
    }
  }
#ifdef FERRY_BENCH_HAVE_TORCH
  for (const std::string layer : layers())
    for (const bool cl : {false, true}) {
      const std::string base =
          fmt::format("layer/{}/forward+backward{}", layer, cl ? " channels-last" : "");
      const std::int64_t h = layer_size(quick());
      run(base + "/ferry cpu", [layer, cl](benchmark::State& s) {
        run_layer(s, layer,
                  cl ? ferry::MemoryFormat::channels_last : ferry::MemoryFormat::contiguous);
      });
      run(base + "/ferry cpu composed", [layer, cl](benchmark::State& s) {
        run_layer(s, layer,
                  cl ? ferry::MemoryFormat::channels_last : ferry::MemoryFormat::contiguous, "cpu",
                  true);
      });
      run(base + "/pytorch", [layer, cl](benchmark::State& s) {
        torch_row(s, [&] { conv::torch_layer(layer, cl); });
      });
      compare(fmt::format("{} forward+backward [{}, 64, {}, {}]{} (cpu kernels vs composition)",
                          layer, n, h, h, cl ? " channels-last" : ""),
              base + "/ferry cpu", "ferry", base + "/ferry cpu composed", "ferry composed",
              Metric::usec, 0);
      compare(fmt::format("{} forward+backward [{}, 64, {}, {}]{} (cpu)", layer, n, h, h,
                          cl ? " channels-last" : ""),
              base + "/ferry cpu", "ferry", base + "/pytorch", "PyTorch (libtorch)", Metric::usec,
              0);
    }
#endif
  // The layers on vulkan:0: its kernels (batch_norm's, Note [Vulkan batch_norm]) against the
  // composition on the same device, and against the CPU.
  for (const std::string layer : layers()) {
    const std::string base = fmt::format("layer/{}/forward+backward", layer);
    const std::string title = fmt::format("{} forward+backward [{}, 64, {}, {}]", layer, n,
                                          layer_size(quick()), layer_size(quick()));
    for (const bool composed : {false, true})
      run(base + "/ferry vulkan:0" + (composed ? " composed" : ""),
          [layer, composed](benchmark::State& s) {
            run_layer(s, layer, ferry::MemoryFormat::contiguous, "vulkan:0", composed);
          });
    compare(title + " (vulkan:0 kernels vs composition)", base + "/ferry vulkan:0",
            "ferry vulkan:0", base + "/ferry vulkan:0 composed", "ferry vulkan:0 composed",
            Metric::usec, 0);
#ifdef FERRY_BENCH_HAVE_TORCH  // the CPU's row is beside libtorch's
    compare(title + " (vulkan:0 vs cpu)", base + "/ferry vulkan:0", "ferry vulkan:0",
            base + "/ferry cpu", "ferry cpu", Metric::usec, 0);
#endif
  }
  const std::string base = "resnet18 step";
  const std::string title = fmt::format("ResNet-18 training step, batch {}, {}x{}", n,
                                        resnet_image(quick()), resnet_image(quick()));
  for (const std::string device : {"cpu", "vulkan:0"})
    run(base + "/ferry " + device, [device](benchmark::State& s) { run_resnet(s, device); });
  run(base + "/ferry vulkan:0 composed",
      [](benchmark::State& s) { run_resnet(s, "vulkan:0", true); });
#ifdef FERRY_BENCH_HAVE_CUDA
  if (ferry::is_available("cuda:0")) {
    run(base + "/ferry cuda:0", [](benchmark::State& s) { run_resnet(s, "cuda:0"); });
    run(base + "/ferry cuda:0 composed",
        [](benchmark::State& s) { run_resnet(s, "cuda:0", true); });
    compare(title + " (cuda:0 conv kernels vs composition)", base + "/ferry cuda:0",
            "ferry cuda:0 cuDNN", base + "/ferry cuda:0 composed",
            "ferry cuda:0 unfold + cuBLAS matmul", Metric::usec, 0);
    compare(title + " (vulkan:0 vs cuda:0)", base + "/ferry vulkan:0", "ferry vulkan:0",
            base + "/ferry cuda:0", "ferry cuda:0", Metric::usec, 0);
  }
#endif
#ifdef FERRY_BENCH_HAVE_TORCH
  run(base + "/pytorch",
      [](benchmark::State& s) { torch_row(s, [&] { conv::torch_resnet_step(); }); });
  compare(title + " (cpu)", base + "/ferry cpu", "ferry", base + "/pytorch", "PyTorch (libtorch)",
          Metric::usec, 0);
  run(base + " channels-last/ferry cpu",
      [](benchmark::State& s) { run_resnet(s, "cpu", false, true); });
  run(base + " channels-last/pytorch",
      [](benchmark::State& s) { torch_row(s, [&] { conv::torch_resnet_step(true); }); });
  compare(title + ", channels-last (cpu)", base + " channels-last/ferry cpu", "ferry",
          base + " channels-last/pytorch", "PyTorch (libtorch)", Metric::usec, 0);
  compare(title + " (cpu, channels-last vs contiguous)", base + " channels-last/ferry cpu",
          "ferry channels-last", base + "/ferry cpu", "ferry contiguous", Metric::usec, 0);
#endif
  compare(title + " (vulkan:0 vs cpu)", base + "/ferry vulkan:0", "ferry vulkan:0",
          base + "/ferry cpu", "ferry cpu", Metric::usec, 0);
  compare(title + " (vulkan:0 conv kernels vs composition)", base + "/ferry vulkan:0",
          "ferry vulkan:0 conv kernels", base + "/ferry vulkan:0 composed",
          "ferry vulkan:0 im2col + matmul", Metric::usec, 0);
}

}  // namespace bench
