// benchmarks/distributed/bench_ddp.cpp — ferry-bench-ddp, run under mpirun: a training step of
// an MLP (SGD, mse loss) on each rank's own batch, timed three ways in the same processes:
//   local     the step alone, no communication: what one rank does at this per-rank batch
//   after     the step, then each bucket's gradients averaged by an allreduce once backward
//             has finished (the baseline the overlap is measured against)
//   ddp       nn::DistributedDataParallel: each bucket's allreduce starts as soon as backward
//             has produced its gradients, overlapping the rest of the backward pass
// It prints the overlap's gain (after / ddp) and the scaling efficiency of R ranks against one
// (local / ddp: 1.0 when the communication is hidden entirely and costs the step nothing).
//   mpirun -np 2 ferry-bench-ddp [--device DEV] [--width N] [--layers N] [--batch N]
//                                [--bucket-mb X] [--steps N] [--rounds N] [--quick]
// Each figure is the median over `rounds` rounds of `steps` steps, the three interleaved.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ferry/distributed.hpp"
#include "ferry/ferry.hpp"
#include "ferry/nn.hpp"
#include "ferry/nn/parallel.hpp"
#include "ferry/optim.hpp"

namespace dist = ferry::distributed;
namespace nn = ferry::nn;

namespace {

std::shared_ptr<nn::Sequential> make_model(std::int64_t width, int layers,
                                           const ferry::Device& dev) {
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < layers; ++i) {
    m->push_back(
        std::make_shared<nn::Linear>(width, width, true, ferry::TensorOptions{.device = dev}));
    if (i + 1 < layers) m->push_back(std::make_shared<nn::ReLU>());
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cpu";
  std::int64_t width = 1024, batch = 64;
  int layers = 6, steps = 10, rounds = 5;
  double bucket_mb = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--device")
      device = next();
    else if (a == "--width")
      width = std::atoll(next().c_str());
    else if (a == "--layers")
      layers = std::atoi(next().c_str());
    else if (a == "--batch")
      batch = std::atoll(next().c_str());
    else if (a == "--bucket-mb")
      bucket_mb = std::atof(next().c_str());
    else if (a == "--steps")
      steps = std::atoi(next().c_str());
    else if (a == "--quick")
      width = 256, layers = 4, steps = 3;
    else {
      fmt::print(stderr, "ferry-bench-ddp: unknown argument {}\n", a);
      return 2;
    }
  }
  try {
    auto group = dist::init();
    const int R = group->size(), me = group->rank();
    const ferry::Device dev(device);
    ferry::manual_seed(7);
    auto plain = make_model(width, layers, dev);
    auto wrapped = make_model(width, layers, dev);
    auto ddp = std::make_shared<nn::DistributedDataParallel>(
        wrapped, nn::DistributedDataParallelOptions{.bucket_cap_mb = bucket_mb});
    ferry::optim::SGD opt_plain(plain->parameters(), {.lr = 1e-4});
    ferry::optim::SGD opt_ddp(ddp->parameters(), {.lr = 1e-4});
    ferry::manual_seed(std::uint64_t(100 + me));  // each rank its own batch
    const ferry::Tensor x = ferry::randn({batch, width}, {.device = dev});
    const ferry::Tensor y = ferry::randn({batch, width}, {.device = dev});

    // The baseline's buckets are DDP's own, in the order DDP launches them.
    const std::vector<ferry::Tensor> params = plain->parameters();
    std::vector<std::vector<std::size_t>> buckets = ddp->buckets();
    const auto allreduce_after_backward = [&] {
      for (const auto& bucket : buckets) {
        std::vector<ferry::Tensor> grads;
        for (std::size_t i : bucket)
          grads.push_back(params[params.size() - 1 - i].grad().flatten());
        ferry::Tensor flat = ferry::cat(grads);
        group->allreduce(flat, dist::ReduceOp::avg);
        std::int64_t at = 0;
        for (std::size_t i : bucket) {
          ferry::Tensor g = params[params.size() - 1 - i].grad();
          g.copy_(flat.narrow(0, at, g.numel()).view(g.sizes()));
          at += g.numel();
        }
      }
    };
    const auto step = [&](nn::Module& model, ferry::optim::Optimizer& opt, bool after) {
      opt.zero_grad();
      nn::functional::mse_loss(model.forward(x), y).backward();
      if (after) allreduce_after_backward();
      opt.step();
    };
    const auto time = [&](auto&& one_step) {
      one_step();  // warm-up: caches, buckets
      one_step();
      ferry::synchronize(dev);
      group->barrier();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < steps; ++i) one_step();
      ferry::synchronize(dev);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ferry::Tensor worst = ferry::full({1}, s);  // a step is as slow as its slowest rank
      group->allreduce(worst, dist::ReduceOp::max);
      return worst.item<double>() / steps * 1e3;
    };
    // Rounds of the three, interleaved, and each one's median: a shared machine's load drifts
    // over a run, and would otherwise favour whichever ran in a quiet moment.
    std::vector<double> local, after, overlapped;
    for (int round = 0; round < rounds; ++round) {
      local.push_back(time([&] { step(*plain, opt_plain, false); }));
      after.push_back(time([&] { step(*plain, opt_plain, true); }));
      overlapped.push_back(time([&] { step(*ddp, opt_ddp, false); }));
    }
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double local_ms = median(local), after_ms = median(after), ddp_ms = median(overlapped);
    std::int64_t numel = 0;
    for (const auto& p : params) numel += p.numel();
    if (me == 0) {
      fmt::print(
          "DDP step: {} ranks on {}, MLP {} x [{} x {}], batch {} per rank, {:.1f} MiB of "
          "f32 gradients in {} buckets of <= {} MiB, median of {} rounds of {} steps\n",
          R, dev.str(), layers, width, width, batch, double(numel) * 4 / (1 << 20), buckets.size(),
          bucket_mb, rounds, steps);
      fmt::print("{:>12} {:>12} {:>12} {:>14} {:>12}\n", "local ms", "after ms", "ddp ms",
                 "overlap gain", "scaling");
      fmt::print("{:>12.2f} {:>12.2f} {:>12.2f} {:>14.2f} {:>12.2f}\n", local_ms, after_ms, ddp_ms,
                 after_ms / ddp_ms, local_ms / ddp_ms);
    }
    dist::shutdown();
    return 0;
  } catch (const ferry::Error& e) {
    fmt::print(stderr, "ferry-bench-ddp: {}\n", e.what());
    return 1;
  }
}
