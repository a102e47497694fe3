// benchmarks/bench_train_torch.cpp — the PyTorch (libtorch) side of the
// training-step benchmark: the same MLP, loss and optimizer through PyTorch's
// C++ API, in ferry-bench's process, on the CPU and, where libtorch was built
// with CUDA and a GPU is there, on cuda:0. Built only when CMake finds
// libtorch (Debian: libtorch-dev, CPU only); on the CPU the BLAS both
// frameworks call is then the same library (one libopenblas.so.0 per
// process), so the comparison measures the frameworks, not two GEMMs.
#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "bench_train.hpp"

namespace bench::train {
namespace {

struct TorchModel {
  torch::nn::Sequential net{nullptr};
  std::unique_ptr<torch::optim::Adam> opt;
  torch::Tensor x, y;
};

TorchModel& model(bool cuda) {
  static TorchModel on_cpu, on_cuda;
  return cuda ? on_cuda : on_cpu;
}

torch::Tensor from(const std::vector<float>& v, std::vector<std::int64_t> shape) {
  return torch::from_blob(const_cast<float*>(v.data()), shape, torch::kFloat32).clone();
}

void setup(TorchModel& m, const InitialState& s, torch::Device device) {
  m.net = torch::nn::Sequential(torch::nn::Linear(kIn, kHidden), torch::nn::ReLU(),
                                torch::nn::Linear(kHidden, kHidden), torch::nn::ReLU(),
                                torch::nn::Linear(kHidden, kOut));
  const std::vector<std::pair<const std::vector<float>*, std::vector<std::int64_t>>> init = {
      {&s.w1, {kHidden, kIn}}, {&s.b1, {kHidden}},       {&s.w2, {kHidden, kHidden}},
      {&s.b2, {kHidden}},      {&s.w3, {kOut, kHidden}}, {&s.b3, {kOut}}};
  {
    torch::NoGradGuard no_grad;
    auto params = m.net->parameters();
    for (std::size_t i = 0; i < params.size(); ++i)
      params[i].copy_(from(*init[i].first, init[i].second));
  }
  m.net->to(device);
  m.opt = std::make_unique<torch::optim::Adam>(m.net->parameters(), torch::optim::AdamOptions(kLr));
  m.x = from(s.x, {kBatch, kIn}).to(device);
  m.y = torch::from_blob(const_cast<std::int64_t*>(s.y.data()), {kBatch}, torch::kInt64)
            .clone()
            .to(device);
}

float step(TorchModel& m) {
  m.opt->zero_grad();
  torch::Tensor loss = torch::nn::functional::cross_entropy(m.net->forward(m.x), m.y);
  loss.backward();
  m.opt->step();
  return loss.item<float>();  // synchronizes, as ferry's step does
}

}  // namespace

void torch_setup(const InitialState& s, int threads) {
  torch::set_num_threads(threads);
  setup(model(false), s, torch::kCPU);
}

float torch_step() { return step(model(false)); }

bool torch_cuda_setup(const InitialState& s) {
  if (!torch::cuda::is_available()) return false;
  // PyTorch's default since 1.12, stated so the comparison is plain f32 on both sides
  // (ferry leaves TF32 off too: Note [TF32] in ferry/ops.hpp).
  at::globalContext().setAllowTF32CuBLAS(false);
  setup(model(true), s, torch::Device(torch::kCUDA, 0));
  return true;
}

float torch_cuda_step() { return step(model(true)); }

const char* torch_version() { return TORCH_VERSION; }

}  // namespace bench::train
