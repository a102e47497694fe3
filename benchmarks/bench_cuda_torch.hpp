// benchmarks/bench_cuda_torch.hpp — PyTorch's side of the CUDA benchmarks
// (bench_cuda.cpp), through libtorch in ferry-bench's process. Plain types
// only, so that bench_cuda_torch.cpp is the one file that includes torch's
// headers. Built when CMake finds a libtorch with CUDA beside the toolkit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bench::torch_cuda {

// Whether libtorch sees a CUDA GPU (and can run the functions below).
bool available();
std::string version();

// `n` in-place-free adds of two 64-float tensors on cuda:0 (x = x + one), as
// eager PyTorch runs them, then a synchronize.
void tiny_adds(int n);

// Makes (untimed) CPU tensors of these shapes, then moves them all to cuda:0
// one .to() each, as nn.Module.to("cuda") does, and synchronizes.
void make_host_tensors(const std::vector<std::vector<std::int64_t>>& shapes);
void move_host_tensors_to_cuda();

}  // namespace bench::torch_cuda
