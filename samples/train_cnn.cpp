// ferry-train-cnn — trains a small ResNet (samples/resnet.hpp: torchvision's BasicBlock and
// names, a 3x3 stem for 8x8 images) on the UCI hand-written digits (data/digits: 1,797 8x8
// images, 20% held out), moving the model and its optimizer state to every available device
// in turn with migrate() — home, one epoch on each other device from the middle epoch on,
// home again — and reports the held-out accuracy after every epoch. With --channels-last the
// model and its inputs are channels-last (NHWC), PyTorch's recipe:
// model.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "resnet.hpp"
#include "sample_common.hpp"

#ifndef FERRY_DIGITS_PATH
#define FERRY_DIGITS_PATH "data/digits/digits.safetensors"
#endif

namespace {

namespace nn = ferry::nn;
using ferry::Device;
using ferry::Tensor;

// The images as the model takes them: on `dev`, channels-last when the model is.
Tensor input(const Tensor& x, const Device& dev, bool channels_last) {
  const Tensor on = x.to(dev);
  return channels_last ? on.contiguous(ferry::MemoryFormat::channels_last) : on;
}

// Fraction of `x` the model (in eval mode: BatchNorm's running statistics) labels as `y`.
double accuracy(nn::Module& model, const Tensor& x, const Tensor& y, const Device& dev,
                bool channels_last) {
  ferry::NoGradGuard no_grad;
  model.eval();
  const Tensor predicted = ferry::argmax(model.forward(input(x, dev, channels_last)), 1);
  model.train();
  return ferry::mean(ferry::eq(predicted, y.to(dev)).to(ferry::DType::f32)).item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  sample::Args args(
      argc, argv,
      "usage: ferry-train-cnn [--device DEV] [--epochs N] [--width N] [--data PATH] [--small]\n"
      "                       [--channels-last] [--profile PATH]\n\n"
      "Trains a small ResNet on the UCI hand-written digits (8x8 images, 10 classes) with\n"
      "Adam, moving the model and its optimizer state between every available device\n"
      "mid-training, and prints the held-out accuracy after each epoch. Exits 0 when the\n"
      "final accuracy reaches 97% (90% with --small).",
      {{"device", "where training starts and ends (default: ferry::default_device())"},
       {"epochs", "passes over the training split (default 12)"},
       {"width", "channels of the first stage; the second has twice as many (default 16)"},
       {"data", "the digits file (default: the repository's data/digits/digits.safetensors)"},
       {"small!", "a quick run: 6 epochs, width 8"},
       {"channels-last!",
        "train in the channels-last (NHWC) layout: the model's 4-D tensors "
        "and every batch"},
       {sample::Profiling::kOption, sample::Profiling::kHelp}});
  try {
    sample::Profiling profiling(args);
    const bool small = args.has("small");
    const Device home = args.device();
    const std::int64_t epochs = args.number("epochs", small ? 6 : 12);
    const std::int64_t width = args.number("width", small ? 8 : 16);
    const std::string path = args.get("data", FERRY_DIGITS_PATH);
    const bool channels_last = args.has("channels-last");

    // Pixels 0..16 -> [-1, 1]; a fixed permutation splits 80 / 20.
    const ferry::StateDict digits = ferry::load_safetensors(path);
    const Tensor images = digits.at("images").to(ferry::DType::f32).unsqueeze(1) / 8.0 - 1.0;
    const Tensor labels = digits.at("labels").to(ferry::DType::i64);
    const std::int64_t n = images.size(0), held = n / 5;
    ferry::manual_seed(5);
    const Tensor order = ferry::randperm(n);
    const Tensor x = ferry::index_select(images, 0, order);
    const Tensor y = ferry::index_select(labels, 0, order);
    const Tensor x_test = x.slice(0, 0, held), y_test = y.slice(0, 0, held);
    auto train = std::make_shared<ferry::data::TensorDataset>(
        std::vector<Tensor>{x.slice(0, held, n), y.slice(0, held, n)});
    ferry::data::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 1});

    ferry::manual_seed(0);
    sample::ResNet model({.blocks = {1, 1},
                          .widths = {width, 2 * width},
                          .in_channels = 1,
                          .num_classes = 10,
                          .small_stem = true},
                         {.device = home});
    if (channels_last) model.to(ferry::MemoryFormat::channels_last);
    ferry::optim::Adam opt(model.parameters(), {.lr = 3e-3});

    // The devices the epochs run on: home first and last, each other device in between.
    std::vector<Device> others;
    for (const Device& d : sample::available_devices())
      if (d != home) others.push_back(d);
    std::printf("training a ResNet (widths %lld, %lld%s) on %lld digits (%lld held out) from %s",
                (long long)width, (long long)(2 * width), channels_last ? ", channels-last" : "",
                (long long)(n - held), (long long)held, home.str().c_str());
    for (const Device& d : others) std::printf(" -> %s", d.str().c_str());
    std::printf("%s\n", others.empty() ? "" : (" -> " + home.str()).c_str());

    Device at = home;
    double acc = 0;
    for (std::int64_t epoch = 0; epoch < epochs; ++epoch) {
      // From the middle epoch on, one epoch on each other device, then home again.
      const std::int64_t away = epoch - epochs / 2;
      const Device dev = away >= 0 && away < std::int64_t(others.size())
                             ? others[std::size_t(away)]
                             : home;
      if (dev != at) {
        const ferry::MigrationReport r = ferry::migrate(model, opt, dev);
        std::printf("moved the model and its Adam state %s -> %s (%llu bytes)\n", at.str().c_str(),
                    dev.str().c_str(), (unsigned long long)r.bytes);
        at = dev;
      }
      sample::Progress bar("epoch " + std::to_string(epoch + 1) + " on " + dev.str(),
                           loader.size());
      Tensor total = ferry::zeros({}, {.device = dev});
      std::size_t k = 0;
      for (const ferry::data::Batch& b : loader) {
        opt.zero_grad();
        Tensor loss;
        {
          auto r = ferry::profiler::range("forward");  // names the step's phases in a trace
          loss = nn::functional::cross_entropy(model.forward(input(b[0], dev, channels_last)),
                                               b[1].to(dev));
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
        if (++k % 4 == 0) bar.step(k, total.item<double>() / double(k));
      }
      bar.finish(total.item<double>() / double(loader.size()));
      acc = accuracy(model, x_test, y_test, dev, channels_last);
      std::printf("  held-out accuracy %.1f%%\n", 100 * acc);
    }
    profiling.finish();
    const double goal = small ? 0.90 : 0.97;
    std::printf("final held-out accuracy on %s: %.1f%% (goal %.0f%%)\n", at.str().c_str(),
                100 * acc, 100 * goal);
    return acc >= goal ? 0 : 1;
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-train-cnn: %s\n", e.what());
    return 1;
  }
}
