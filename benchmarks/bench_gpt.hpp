// benchmarks/bench_gpt.hpp — issue 23's GPT training step's two sides: ferry's in
// bench_gpt.cpp (samples/gpt.hpp), PyTorch's (libtorch, in this process) in
// bench_gpt_torch.cpp, the same model with the same sizes.
#pragma once

#include <cstdint>

namespace bench::gpt {

// ferry-gpt's model (4 layers, 4 heads, width 128, a 65-character vocabulary) at batch 16 and
// sequence 256; batch 4 and sequence 64 with --quick.
struct Sizes {
  std::int64_t vocab = 65, layers = 4, heads = 4, embd = 128, batch, seq;
};
inline Sizes sizes(bool quick) {
  Sizes s;
  s.batch = quick ? 4 : 16;
  s.seq = quick ? 64 : 256;
  return s;
}

#ifdef FERRY_BENCH_HAVE_TORCH
// PyTorch's side: nanoGPT in libtorch (at::_scaled_dot_product_attention, libtorch 1.13's
// attention entry, causal), AdamW, one step per call: zero_grad, forward, cross_entropy,
// backward, clip_grad_norm_, step.
void torch_setup(bool quick);
void torch_step();
#endif

}  // namespace bench::gpt
