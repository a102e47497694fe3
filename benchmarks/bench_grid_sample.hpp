// benchmarks/bench_grid_sample.hpp — grid_sample's forward and backward (a spatial
// transformer's warp: both the image and the grid take gradients), ferry's in
// bench_grid_sample.cpp, PyTorch's (libtorch, in this process) in bench_grid_sample_torch.cpp:
// the same sizes and the same work.
#pragma once

#include <cstdint>
#include <string>

namespace bench::grid_sample {

// An image batch [8, 64, 64, 64] read at a grid of [8, 64, 64] points (a feature map warped in
// place); --quick: [2, 8, 16, 16] at [2, 16, 16].
struct Sizes {
  std::int64_t batch, channels, height, width;
};
inline Sizes sizes(bool quick) { return quick ? Sizes{2, 8, 16, 16} : Sizes{8, 64, 64, 64}; }
inline constexpr const char* kModes[] = {"bilinear", "nearest", "bicubic"};

#ifdef FERRY_BENCH_HAVE_TORCH
// PyTorch's side: one call of F.grid_sample (zeros padding, align_corners false) in `mode`,
// then backward of the output times a fixed tensor into the image and the grid.
void torch_setup(bool quick);
void torch_step(const std::string& mode);
#endif

}  // namespace bench::grid_sample
