// benchmarks/bench_overhead.hpp — the per-op host overhead benchmark's two
// sides: ferry's in bench_overhead.cpp, PyTorch's (libtorch, in this process)
// in bench_overhead_torch.cpp.
#pragma once

#include <string>

namespace bench::overhead {

// Tiny ops, so that what is measured is the framework's work per op (dispatch,
// dtype and shape checks, output allocation, autograd recording), not math.
inline constexpr int kAdds = 20000;    // adds of 64 floats per iteration
inline constexpr int kMatmuls = 5000;  // relu(matmul) of [8, 64] x [64, 64] per iteration
inline constexpr int kAddN = 64, kM = 8, kK = 64, kN = 64;

// PyTorch's side (bench_overhead_torch.cpp, when libtorch was found): one
// iteration each, with autograd recording (`grad`) or under NoGradGuard.
void torch_adds(bool grad);
void torch_matmul_relu(bool grad);

}  // namespace bench::overhead
