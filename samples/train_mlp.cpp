// ferry-train-mlp — trains an MLP classifier on --device with the data loader
// (shuffled batches prepared by worker threads and sent to the device ahead of
// use), prints the loss curve, reports the accuracy on a held-out split, and
// saves a checkpoint (model and optimizer) that ferry-checkpoint can resume.
#include <cstdio>
#include <memory>

#include "sample_common.hpp"

namespace {

namespace nn = ferry::nn;
using ferry::Device;
using ferry::Tensor;

// Fraction of rows of `x` the model classifies as `y` says.
double accuracy(nn::Module& model, const Tensor& x, const Tensor& y, const Device& dev) {
  ferry::NoGradGuard no_grad;
  Tensor predicted = ferry::argmax(model.forward(x.to(dev)), 1);
  return ferry::mean(ferry::eq(predicted, y.to(dev)).to(ferry::DType::f32)).item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  sample::Args args(
      argc, argv,
      "usage: ferry-train-mlp [--device DEV] [--epochs N] [--samples N] [--hidden N]\n"
      "                       [--workers N] [--checkpoint PATH] [--small] [--profile PATH]\n\n"
      "Trains an MLP classifier on Gaussian blobs (16 features, 4 classes) with Adam\n"
      "and the data loader, prints the loss per epoch and the held-out accuracy, and\n"
      "saves model and optimizer to a safetensors checkpoint.",
      {{"device", "where to train (default: ferry::default_device())"},
       {"epochs", "passes over the training split (default 8)"},
       {"samples", "dataset size; 20% is held out (default 16384)"},
       {"hidden", "hidden width (default 128)"},
       {"workers", "data loader threads (default 2)"},
       {"checkpoint", "where to save (default mlp.safetensors)"},
       {"small!", "a quick run: 2 epochs of 2048 samples, width 32"},
       {sample::Profiling::kOption, sample::Profiling::kHelp}});
  try {
    sample::Profiling profiling(args);
    const bool small = args.has("small");
    const Device dev = args.device();
    const std::int64_t epochs = args.number("epochs", small ? 2 : 8);
    const std::int64_t n = args.number("samples", small ? 2048 : 16384);
    const std::int64_t hidden = args.number("hidden", small ? 32 : 128);
    const std::int64_t features = 16, classes = 4;
    const std::string path = args.get("checkpoint", "mlp.safetensors");

    auto [x, y] = sample::blobs(n, features, classes, /*seed=*/99, /*noise=*/1.5);
    const std::int64_t held = n / 5;
    Tensor x_train = x.slice(0, held, n), y_train = y.slice(0, held, n);
    Tensor x_test = x.slice(0, 0, held), y_test = y.slice(0, 0, held);
    auto train =
        std::make_shared<ferry::data::TensorDataset>(std::vector<Tensor>{x_train, y_train});
    ferry::data::DataLoader loader(train, {.batch_size = 128,
                                           .shuffle = true,
                                           .seed = 1,
                                           .num_workers = std::size_t(args.number("workers", 2)),
                                           .device = dev});

    ferry::manual_seed(0);
    auto model = sample::make_mlp(features, hidden, classes, dev);
    ferry::optim::Adam opt(model->parameters(), {.lr = 2e-3});
    std::printf("training on %s: %lld samples (%lld held out), %zu batches of 128 per epoch\n",
                dev.str().c_str(), (long long)(n - held), (long long)held, loader.size());
    std::printf("held-out accuracy before training: %.1f%%\n",
                100 * accuracy(*model, x_test, y_test, dev));
    for (std::int64_t epoch = 0; epoch < epochs; ++epoch) {
      sample::Progress bar("epoch " + std::to_string(epoch + 1), loader.size());
      Tensor total = ferry::zeros({}, {.device = dev});
      std::size_t k = 0;
      for (const ferry::data::Batch& b : loader) {
        opt.zero_grad();
        Tensor loss;
        {
          auto r = ferry::profiler::range("forward");  // names the step's phases in a trace
          loss = nn::functional::cross_entropy(model->forward(b[0]), b[1]);
        }
        {
          auto r = ferry::profiler::range("backward");
          loss.backward();
        }
        {
          auto r = ferry::profiler::range("optimizer step");
          opt.step();
        }
        total = total + loss.detach();
        if (++k % 16 == 0) bar.step(k, total.item<double>() / double(k));
      }
      bar.finish(total.item<double>() / double(loader.size()));
    }
    const double acc = accuracy(*model, x_test, y_test, dev);
    std::printf("held-out accuracy after %lld epochs: %.1f%%\n", (long long)epochs, 100 * acc);

    ferry::StateDict ckpt = model->state_dict().add_prefix("model.");
    ckpt.merge(opt.state_dict().add_prefix("optimizer."));
    ferry::save_safetensors(path, ckpt);
    std::printf("saved model and optimizer to %s (%zu tensors)\n", path.c_str(), ckpt.size());
    profiling.finish();
    // Blobs this far apart are separable well above chance (25%).
    return acc > 0.5 ? 0 : 1;
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-train-mlp: %s\n", e.what());
    return 1;
  }
}
