// benchmarks/bench_train.hpp — what the training-step benchmark's parts share:
// the MLP's sizes and the initial weights and data, as plain host vectors so
// that the libtorch baseline (bench_train_torch.cpp, the only file that
// includes torch's headers) needs nothing of ferry's.
#pragma once

#include <cstdint>
#include <vector>

namespace bench::train {

// An MNIST-shaped MLP: 784-512-512-10, ReLU, batch 256, cross_entropy, Adam(lr=1e-3).
inline constexpr std::int64_t kBatch = 256, kIn = 784, kHidden = 512, kOut = 10;
inline constexpr double kLr = 1e-3;

struct InitialState {
  std::vector<float> x;         // [kBatch, kIn]
  std::vector<std::int64_t> y;  // [kBatch], classes in [0, kOut)
  // PyTorch's nn.Linear layout: weight [out, in], bias [out].
  std::vector<float> w1, b1, w2, b2, w3, b3;
};
const InitialState& initial_state();

#ifdef FERRY_BENCH_HAVE_TORCH
// libtorch, same process, same thread count (torch::set_num_threads).
void torch_setup(const InitialState& s, int threads);
float torch_step();  // one step; returns the loss
// The same on cuda:0; false (and nothing set up) where libtorch has no CUDA or no GPU.
bool torch_cuda_setup(const InitialState& s);
float torch_cuda_step();
const char* torch_version();
#endif

}  // namespace bench::train
