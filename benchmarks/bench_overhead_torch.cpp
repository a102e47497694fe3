// benchmarks/bench_overhead_torch.cpp — PyTorch's side of the per-op host
// overhead benchmark (bench_overhead.cpp): the same tiny ops through libtorch
// in ferry-bench's process, on the CPU, one thread (as ferry's tiny ops run).
#include <torch/torch.h>

#include <optional>

#include "bench_overhead.hpp"

namespace bench::overhead {
namespace {

struct Data {
  torch::Tensor a, b, x, w;
  Data(bool grad) {
    torch::manual_seed(0);
    a = torch::randn({kAddN}).set_requires_grad(grad);
    b = torch::randn({kAddN});
    x = torch::randn({kM, kK});
    w = torch::randn({kK, kN}).set_requires_grad(grad);
  }
};

Data& data(bool grad) {
  static Data with_grad(true), without(false);
  return grad ? with_grad : without;
}

}  // namespace

void torch_adds(bool grad) {
  Data& d = data(grad);
  std::optional<torch::NoGradGuard> no_grad;
  if (!grad) no_grad.emplace();
  for (int i = 0; i < kAdds; ++i) {
    torch::Tensor c = d.a + d.b;
    asm volatile("" : : "r"(c.unsafeGetTensorImpl()) : "memory");
  }
}

void torch_matmul_relu(bool grad) {
  Data& d = data(grad);
  std::optional<torch::NoGradGuard> no_grad;
  if (!grad) no_grad.emplace();
  for (int i = 0; i < kMatmuls; ++i) {
    torch::Tensor y = torch::relu(torch::matmul(d.x, d.w));
    asm volatile("" : : "r"(y.unsafeGetTensorImpl()) : "memory");
  }
}

}  // namespace bench::overhead
