// benchmarks/bench_ops.hpp — issue 21's op benchmark's two sides: ferry's in
// bench_ops.cpp, PyTorch's (libtorch, in this process) in bench_ops_torch.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bench::ops {

// The names of the cases that train (their gradients reset after every call).
inline constexpr const char* kLayerNorm = "layer_norm fwd+bwd";
inline constexpr const char* kGelu = "gelu fwd+bwd";

// The ops measured, on f32 tensors of kRows x kCols elements (16 Mi; 1 Mi quick).
inline std::int64_t rows(bool quick) { return quick ? 256 : 4096; }
inline constexpr std::int64_t kCols = 4096;
inline constexpr std::int64_t kBuckets = 64;  // scatter_reduce's output columns

// Each op: a name, and the bytes one call must move at least (its inputs read
// and its output written once), for the bandwidth figure.
struct OpCase {
  const char* name;
  double bytes_per_element;
};
inline const std::vector<OpCase>& cases() {
  static const std::vector<OpCase> c = {
      {"clamp", 8},             // x -> y
      {"masked_fill", 9},       // x, a bool mask -> y
      {"logsumexp dim=-1", 4},  // x -> one value a row
      {"erf", 8},
      {"atan2", 12},
      {"remainder", 12},
      {"cumsum dim=-1", 8},
      {"cumsum flat", 8},           // one line of 16 Mi
      {"sort dim=-1", 16},          // x -> values and i64 positions
      {"topk k=64 dim=-1", 4},      // x read once
      {"scatter_reduce amax", 12},  // x and i64 targets -> [rows, 64]
      // Forward (x -> y) and backward (g, x -> dx) with a weight and a bias over the rows: the
      // CPU's one layer_norm_backward kernel, also beside its composition (CompositesOnly).
      {kLayerNorm, 20},
      // The exact GELU, forward (x -> y) and backward (g, x -> dx): a GPT MLP's activation.
      {kGelu, 20},
  };
  return c;
}

// PyTorch's side (bench_ops_torch.cpp, when libtorch was found): the same op
// on the same shapes (inputs made once per op), one call per iteration.
void torch_setup(bool quick);
void torch_run(const std::string& name);

}  // namespace bench::ops
