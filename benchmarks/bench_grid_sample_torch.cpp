// benchmarks/bench_grid_sample_torch.cpp — PyTorch's side of the grid_sample benchmark
// (bench_grid_sample.cpp): F.grid_sample through libtorch in ferry-bench's process, on the CPU,
// with libtorch's own threads.
#include <torch/torch.h>

#include "bench_grid_sample.hpp"

namespace bench::grid_sample {
namespace {

struct Inputs {
  torch::Tensor x, grid, g;
};

Inputs& inputs() {
  static Inputs in;
  return in;
}

}  // namespace

void torch_setup(bool quick) {
  torch::manual_seed(0);
  const Sizes z = sizes(quick);
  Inputs& in = inputs();
  in.x = torch::randn({z.batch, z.channels, z.height, z.width}).requires_grad_(true);
  in.grid = (torch::rand({z.batch, z.height, z.width, 2}) * 2.2 - 1.1).requires_grad_(true);
  in.g = torch::randn({z.batch, z.channels, z.height, z.width});
}

void torch_step(const std::string& mode) {
  Inputs& in = inputs();
  // F.grid_sample's own call (libtorch 1.13's C++ options lack bicubic): interpolation 0
  // bilinear, 1 nearest, 2 bicubic; padding 0 zeros; align_corners false.
  const std::int64_t m = mode == "nearest" ? 1 : mode == "bicubic" ? 2 : 0;
  torch::grid_sampler(in.x, in.grid, m, 0, false).backward(in.g);
  in.x.mutable_grad().reset();
  in.grid.mutable_grad().reset();
}

}  // namespace bench::grid_sample
