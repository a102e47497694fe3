// benchmarks/bench_grid_sample.cpp — grid_sample forward and backward (bench_grid_sample.hpp)
// in each mode: ferry on the CPU (its fused kernels, Note [Sampling at a grid on the CPU])
// beside PyTorch (libtorch) in this process and beside ferry's own composition
// (debug::CompositesOnly: what every other device runs), and on vulkan:0 beside ferry's CPU.
#include "bench_grid_sample.hpp"

#include <fmt/format.h>

#include <functional>
#include <optional>

#include "bench_common.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

using namespace grid_sample;

// One step on `device`: the output of grid_sample in `mode`, backward into image and grid.
std::function<void()> grid_sample_step(const ferry::Device& device, const std::string& mode) {
  ferry::manual_seed(0);
  const Sizes z = sizes(quick());
  const ferry::TensorOptions on{.device = device};
  const ferry::Tensor x =
      ferry::randn({z.batch, z.channels, z.height, z.width}, on).requires_grad_();
  const ferry::Tensor grid =
      ferry::uniform({z.batch, z.height, z.width, 2}, -1.1, 1.1, on).requires_grad_();
  const ferry::Tensor g = ferry::randn({z.batch, z.channels, z.height, z.width}, on);
  return [=] {
    ferry::grid_sample(x, grid, mode).backward(g);
    x.set_grad({}), grid.set_grad({});
    if (!device.is_cpu()) ferry::synchronize(device);
  };
}

}  // namespace

void register_grid_sample() {
#ifdef FERRY_BENCH_HAVE_TORCH
  grid_sample::torch_setup(quick());
#endif
  const Sizes z = sizes(quick());
  for (const std::string mode : kModes) {
    const std::string base = "grid_sample " + mode;
    const std::string title = fmt::format("grid_sample {} fwd+bwd [{}, {}, {}, {}]", mode, z.batch,
                                          z.channels, z.height, z.width);
    auto run = [mode](benchmark::State& s, const std::string& device) {
      time_steps(s, device, [mode](const ferry::Device& d) { return grid_sample_step(d, mode); });
    };
    std::function<void()> torch_step;
#ifdef FERRY_BENCH_HAVE_TORCH
    torch_step = [mode] { grid_sample::torch_step(mode); };
#endif
    register_step_rows(base, title, quick() ? 3 : 20, run, torch_step);
    register_composition_row(base, title, quick() ? 3 : 20, run, "grid_sample kernels");
  }
}

}  // namespace bench
