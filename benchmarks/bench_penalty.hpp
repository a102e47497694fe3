// benchmarks/bench_penalty.hpp — a WGAN-GP critic step (Gulrajani et al. 2017), the training
// step that needs second derivatives: the critic on real and generated samples, the gradient of
// its output at points between them (create_graph), the penalty on that gradient's norm, one
// backward through all of it (second order through the penalty), Adam. ferry's side in
// bench_penalty.cpp, PyTorch's (libtorch, in this process) in bench_penalty_torch.cpp: the same
// sizes and the same work.
#pragma once

#include <cstdint>

namespace bench::penalty {

// An MLP critic of `layers` hidden layers (GELU) of width `hidden` on samples of `input`
// features, a batch of `batch`; --quick: smaller.
struct Sizes {
  std::int64_t input, hidden, layers, batch;
};
inline Sizes sizes(bool quick) { return quick ? Sizes{16, 32, 2, 8} : Sizes{256, 512, 3, 64}; }

constexpr double kLambda = 10.0;  // the penalty's weight, the paper's

#ifdef FERRY_BENCH_HAVE_TORCH
// PyTorch's side on the CPU; one critic step per call.
void torch_setup(bool quick);
void torch_step();
#endif

}  // namespace bench::penalty
