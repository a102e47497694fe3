// benchmarks/bench_rnn.hpp — an LSTM training step's two sides: ferry's nn::LSTM in
// bench_rnn.cpp, PyTorch's torch::nn::LSTM (libtorch, in this process) in bench_rnn_torch.cpp,
// the same sizes and the same work.
#pragma once

#include <cstdint>

namespace bench::rnn {

// A two-layer LSTM, input 128, hidden 256, over 64 steps of a batch of 32 (a language model's
// or a sequence tagger's size); --quick: 8 steps of a batch of 4, hidden 32.
struct Sizes {
  std::int64_t input, hidden, layers = 2, steps, batch;
};
inline Sizes sizes(bool quick) {
  return quick ? Sizes{16, 32, 2, 8, 4} : Sizes{128, 256, 2, 64, 32};
}

#ifdef FERRY_BENCH_HAVE_TORCH
// PyTorch's side: torch::nn::LSTM on the CPU; one step per call: zero_grad, forward, the sum of
// the output times a fixed tensor, backward, SGD step.
void torch_setup(bool quick);
void torch_step();
#endif

}  // namespace bench::rnn
