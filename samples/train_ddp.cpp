// ferry-train-ddp — data-parallel training: run as `mpirun -np N ferry-train-ddp`, each rank
// trains a replica of ferry-train-mlp's classifier (or, with --model cnn, ferry-train-cnn's
// ResNet on the hand-written digits) on its shard of every epoch (DistributedSampler) on its
// own device, with nn::DistributedDataParallel averaging the gradients during the backward
// pass (and keeping BatchNorm's statistics rank 0's); it prints each rank's throughput and the
// loss averaged over the ranks, and checks that the replicas end equal (docs/distributed.md).
#include <chrono>
#include <cstdio>
#include <memory>
#include <tuple>

#include "ferry/distributed.hpp"
#include "ferry/nn/parallel.hpp"
#include "resnet.hpp"
#include "sample_common.hpp"

#ifndef FERRY_DIGITS_PATH
#define FERRY_DIGITS_PATH "data/digits/digits.safetensors"
#endif

namespace {

namespace nn = ferry::nn;
namespace dist = ferry::distributed;
using ferry::Device;
using ferry::Tensor;

}  // namespace

int main(int argc, char** argv) {
  sample::Args args(
      argc, argv,
      "usage: ferry-train-ddp [--model mlp|cnn] [--backend mpi|nccl] [--device DEV]\n"
      "                       [--epochs N] [--samples N] [--hidden N] [--width N] [--batch N]\n"
      "                       [--data PATH] [--small]\n"
      "run as: mpirun -np N ferry-train-ddp ... (alone, it is one rank)\n\n"
      "Trains ferry-train-mlp's classifier (or ferry-train-cnn's ResNet on the digits)\n"
      "data-parallel: one rank per process, each on its shard of the data, gradients averaged\n"
      "by DistributedDataParallel over Open MPI, or over NCCL between CUDA GPUs (--backend\n"
      "nccl, with FERRY_RENDEZVOUS set: docs/distributed.md). DEV may contain {rank},\n"
      "replaced by the rank (vulkan:{rank} on a machine with a GPU per rank).",
      {{"model", "mlp (default): the blobs classifier; cnn: a small ResNet on the digits"},
       {"backend", "the process group's backend: mpi (default) or nccl"},
       {"device",
        "where each rank trains (default: the nccl group's GPU, else "
        "ferry::default_device())"},
       {"epochs", "passes over the training split (default 4; cnn 8)"},
       {"samples", "mlp: dataset size; 20% is held out (default 16384)"},
       {"hidden", "mlp: hidden width (default 128)"},
       {"width", "cnn: channels of the first stage (default 16)"},
       {"batch", "samples per rank per step (default 64; cnn 32)"},
       {"data", "cnn: the digits file (default: the repository's data/digits)"},
       {"small!", "a quick run: mlp 2 epochs of 2048 samples, width 32; cnn 4 epochs, width 8"}});
  try {
    auto group = dist::init({.backend = args.get("backend", "mpi")});
    const int rank = group->rank(), ranks = group->size();
    std::string device = args.get(
        "device", group->device() ? group->device()->str() : ferry::default_device().str());
    if (auto at = device.find("{rank}"); at != std::string::npos)
      device.replace(at, 6, std::to_string(rank));
    const Device dev(device);
    const bool small = args.has("small");
    const bool cnn = args.get("model", "mlp") == "cnn";
    if (!cnn && args.get("model", "mlp") != "mlp") args.fail("--model is mlp or cnn");
    const std::int64_t epochs = args.number("epochs", cnn ? (small ? 4 : 8) : (small ? 2 : 4));
    const std::size_t batch = std::size_t(args.number("batch", cnn ? 32 : 64));

    // The data: every rank builds the same, and the sampler gives each its shard.
    Tensor x, y;
    if (cnn) {
      const ferry::StateDict digits = ferry::load_safetensors(args.get("data", FERRY_DIGITS_PATH));
      const Tensor images = digits.at("images").to(ferry::DType::f32).unsqueeze(1) / 8.0 - 1.0;
      ferry::manual_seed(5);
      const Tensor order = ferry::randperm(images.size(0));
      x = ferry::index_select(images, 0, order);
      y = ferry::index_select(digits.at("labels").to(ferry::DType::i64), 0, order);
    } else {
      const std::int64_t n = args.number("samples", small ? 2048 : 16384);
      std::tie(x, y) = sample::blobs(n, 16, 4, /*seed=*/99, /*noise=*/1.5);
    }
    const std::int64_t n = x.size(0), held = n / 5;
    auto train = std::make_shared<ferry::data::TensorDataset>(
        std::vector<Tensor>{x.slice(0, held, n), y.slice(0, held, n)});
    ferry::data::DataLoader loader(
        train, {.batch_size = batch,
                .shuffle = true,
                .seed = 1,
                .num_workers = 1,
                .device = dev,
                .sampler = ferry::data::DistributedSampler{.num_replicas = ranks, .rank = rank}});

    ferry::manual_seed(std::uint64_t(rank));  // the wrapper makes every replica rank 0's
    std::shared_ptr<nn::Module> model;
    if (cnn) {
      const std::int64_t width = args.number("width", small ? 8 : 16);
      model = std::make_shared<sample::ResNet>(sample::ResNetOptions{.blocks = {1, 1},
                                                                     .widths = {width, 2 * width},
                                                                     .in_channels = 1,
                                                                     .num_classes = 10,
                                                                     .small_stem = true},
                                               ferry::TensorOptions{.device = dev});
    } else {
      model = sample::make_mlp(16, args.number("hidden", small ? 32 : 128), 4, dev);
    }
    auto ddp = std::make_shared<nn::DistributedDataParallel>(model);
    ferry::optim::Adam opt(ddp->parameters(), {.lr = cnn ? 3e-3 : 2e-3});
    if (rank == 0)
      std::printf("%s, %d ranks over %s; %zu steps of %zu samples per rank per epoch\n",
                  cnn ? "ResNet on the digits" : "MLP on blobs", ranks, group->backend().c_str(),
                  loader.size(), batch);
    std::printf("rank %d trains on %s\n", rank, dev.str().c_str());
    std::fflush(stdout);

    for (std::int64_t epoch = 0; epoch < epochs; ++epoch) {
      loader.set_epoch(std::uint64_t(epoch));
      const auto start = std::chrono::steady_clock::now();
      Tensor total = ferry::zeros({}, {.device = dev});
      for (const ferry::data::Batch& b : loader) {
        opt.zero_grad();
        Tensor loss = nn::functional::cross_entropy(ddp->forward(b[0]), b[1]);
        loss.backward();
        opt.step();
        total = total + loss.detach();
      }
      Tensor mean = (total / double(loader.size())).to(Device::cpu());
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double rate = double(loader.size() * batch) / seconds;
      group->allreduce(mean, dist::ReduceOp::avg);
      std::printf("rank %d epoch %lld: %.0f samples/s\n", rank, (long long)epoch + 1, rate);
      std::fflush(stdout);
      group->barrier();
      if (rank == 0) {
        std::printf("epoch %lld: loss %.4f (averaged over %d ranks)\n", (long long)epoch + 1,
                    mean.item<double>(), ranks);
        std::fflush(stdout);
      }
    }

    // The replicas must be equal: every rank compares its parameters with rank 0's.
    double worst = 0;
    for (const Tensor& p : ddp->parameters()) {
      Tensor mine = p.detach().to(Device::cpu(), ferry::DType::f32).contiguous();
      Tensor first = mine.clone();
      group->broadcast(first, 0);
      worst = std::max(worst, ferry::max(ferry::abs(mine - first)).item<double>());
    }
    ferry::NoGradGuard no_grad;
    ddp->eval();  // BatchNorm's running statistics, rank 0's on every rank
    Tensor predicted = ferry::argmax(ddp->forward(x.slice(0, 0, held).to(dev)), 1);
    const double acc =
        ferry::mean(ferry::eq(predicted, y.slice(0, 0, held).to(dev)).to(ferry::DType::f32))
            .item<double>();
    std::printf(
        "rank %d: held-out accuracy %.1f%%, largest difference from rank 0's "
        "parameters %.3g\n",
        rank, 100 * acc, worst);
    dist::shutdown();
    // Every rank applied the same averaged gradients; MPI may round a sum differently on
    // different ranks, hence a tolerance rather than equality.
    return acc > 0.5 && worst < 1e-5 ? 0 : 1;
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-train-ddp: %s\n", e.what());
    return 1;
  }
}
