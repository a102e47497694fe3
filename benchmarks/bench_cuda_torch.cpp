// benchmarks/bench_cuda_torch.cpp — PyTorch's side of the CUDA benchmarks
// (bench_cuda_torch.hpp): eager ops and Module.to's per-tensor copies on the
// same GPU, in the same process as ferry's.
#include "bench_cuda_torch.hpp"

#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

namespace bench::torch_cuda {
namespace {

const torch::Device& gpu() {
  static const torch::Device d(torch::kCUDA, 0);
  return d;
}

std::vector<torch::Tensor>& host_tensors() {
  static std::vector<torch::Tensor> ts;
  return ts;
}

}  // namespace

bool available() { return torch::cuda::is_available(); }

std::string version() { return TORCH_VERSION; }

void tiny_adds(int n) {
  static torch::Tensor x = torch::zeros({64}, torch::TensorOptions().device(gpu()));
  static const torch::Tensor one = torch::ones({64}, torch::TensorOptions().device(gpu()));
  for (int i = 0; i < n; ++i) x = x + one;
  torch::cuda::synchronize();
}

void make_host_tensors(const std::vector<std::vector<std::int64_t>>& shapes) {
  host_tensors().clear();
  for (const auto& s : shapes) host_tensors().push_back(torch::ones(s));
}

void move_host_tensors_to_cuda() {
  std::vector<torch::Tensor> moved;
  moved.reserve(host_tensors().size());
  for (const torch::Tensor& t : host_tensors()) moved.push_back(t.to(gpu()));
  torch::cuda::synchronize();
}

}  // namespace bench::torch_cuda
