// benchmarks/bench_ops_torch.cpp — PyTorch's side of the op benchmark
// (bench_ops.cpp): the same ops through libtorch in ferry-bench's process, on
// the CPU, with libtorch's own threads.
#include <torch/torch.h>

#include "bench_ops.hpp"

namespace bench::ops {
namespace {

struct Data {
  torch::Tensor x, y, mask, index;
  torch::Tensor xg, w, b, g;  // layer_norm's: x and the parameters requiring grad, an upstream g
};

Data& data() {
  static Data d;
  return d;
}

void keep(const torch::Tensor& t) { asm volatile("" : : "r"(t.unsafeGetTensorImpl()) : "memory"); }

}  // namespace

void torch_setup(bool quick) {
  torch::manual_seed(0);
  data().x = torch::randn({rows(quick), kCols});
  data().y = torch::rand({rows(quick), kCols}) + 0.5;
  data().mask = torch::rand({rows(quick), kCols}) > 0.5;
  data().index = torch::randint(0, kBuckets, {rows(quick), kCols});
  data().xg = data().x.detach().requires_grad_(true);
  data().w = torch::rand({kCols}).requires_grad_(true);
  data().b = torch::randn({kCols}).requires_grad_(true);
  data().g = torch::randn({rows(quick), kCols});
}

void torch_run(const std::string& name) {
  const Data& d = data();
  if (name == "clamp") keep(torch::clamp(d.x, -0.5, 0.5));
  if (name == "masked_fill") keep(d.x.masked_fill(d.mask, 0.0));
  if (name == "logsumexp dim=-1") keep(torch::logsumexp(d.x, {-1}));
  if (name == "erf") keep(torch::erf(d.x));
  if (name == "atan2") keep(torch::atan2(d.x, d.y));
  if (name == "remainder") keep(torch::remainder(d.x, d.y));
  if (name == "cumsum dim=-1") keep(torch::cumsum(d.x, -1));
  if (name == "cumsum flat") keep(torch::cumsum(d.x.reshape({-1}), 0));
  if (name == "sort dim=-1") keep(std::get<0>(torch::sort(d.x, -1)));
  if (name == "topk k=64 dim=-1") keep(std::get<0>(torch::topk(d.x, 64, -1)));
  if (name == "scatter_reduce amax")
    keep(torch::zeros({d.x.size(0), kBuckets}).scatter_reduce(1, d.index, d.x, "amax"));
  if (name == kGelu) {
    torch::gelu(d.xg).backward(d.g);
    keep(d.xg.grad());
    d.xg.mutable_grad().reset();
  }
  if (name == kLayerNorm) {
    torch::layer_norm(d.xg, {kCols}, d.w, d.b).backward(d.g);
    keep(d.xg.grad());
    for (const torch::Tensor* t : {&d.xg, &d.w, &d.b}) t->mutable_grad().reset();
  }
}

}  // namespace bench::ops
