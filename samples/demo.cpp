// ferry-demo — the README's first command: which devices this machine has;
// an MLP trained on the default device; the model and its Adam state moved
// to every other device in one planned hop each (and back), training going
// on wherever they are; and, beside it, a twin that never moved, whose losses
// the travelling model must match. docs/getting-started.md walks through the
// output.
#include <cmath>
#include <cstdio>
#include <memory>

#include "sample_common.hpp"

namespace {

namespace nn = ferry::nn;
using ferry::Device;
using ferry::Tensor;

struct Mlp : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, fc3;
  Mlp(std::int64_t in, std::int64_t hidden, std::int64_t out, const Device& dev) {
    const ferry::TensorOptions on{.device = dev};
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(in, hidden, true, on));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, hidden, true, on));
    fc3 = register_module("fc3", std::make_shared<nn::Linear>(hidden, out, true, on));
  }
  Tensor forward(const Tensor& x) override {
    return fc3->forward(ferry::gelu(fc2->forward(ferry::gelu(fc1->forward(x)))));
  }
};

void list_devices() {
  std::printf("ferry %s — devices on this machine\n", ferry::version());
  for (const ferry::DeviceInfo& d : ferry::devices()) {
    if (d.available)
      std::printf("  %-10s %-15s %s (%s), memory %s total, %s free\n", d.device.c_str(),
                  ferry::device_kind_name(d.kind), d.name.c_str(), d.vendor.c_str(),
                  sample::mib(d.memory_total).c_str(), sample::mib(d.memory_free).c_str());
    else
      std::printf("  %-10s unavailable: %s\n", d.device.c_str(), d.unavailable_reason.c_str());
  }
}

// One epoch over `data` on `dev` (the batches in the epoch's seeded order);
// returns the mean loss. Shows a progress bar when `label` is set.
double train_epoch(Mlp& model, ferry::optim::Adam& opt,
                   const std::shared_ptr<ferry::data::TensorDataset>& data, const Device& dev,
                   std::uint64_t epoch, const char* label) {
  ferry::data::DataLoader loader(
      data, {.batch_size = 64, .shuffle = true, .seed = 11, .prefetch = 4, .device = dev});
  loader.set_epoch(epoch);
  sample::Progress bar(label ? label : "", loader.size());
  Tensor total = ferry::zeros({}, {.device = dev});
  std::size_t k = 0;
  for (const ferry::data::Batch& b : loader) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(model.forward(b[0]), b[1]);
    loss.backward();
    opt.step();
    total = total + loss.detach();
    if (label && ++k % 8 == 0) bar.step(k, total.item<double>() / double(k));
  }
  const double mean = total.item<double>() / double(loader.size());
  if (label) bar.finish(mean);
  return mean;
}

}  // namespace

int main(int argc, char** argv) {
  sample::Args args(argc, argv,
                    "usage: ferry-demo [--small]\n\n"
                    "Lists the devices, trains an MLP on the default device (FERRY_DEVICE picks\n"
                    "another), moves the model and its optimizer to every other device and back,\n"
                    "training on each, and checks the losses against a model that never moved.",
                    {{"small!", "a small model and dataset (what the test command runs)"}});
  try {
    list_devices();
    const Device home = ferry::default_device();
    const bool small = args.has("small");
    const std::int64_t n = small ? 1024 : 8192, features = 16, classes = 4,
                       hidden = small ? 32 : 128;

    auto [x, y] = sample::blobs(n, features, classes, /*seed=*/2024, /*noise=*/2.5);
    auto data = std::make_shared<ferry::data::TensorDataset>(std::vector<Tensor>{x, y});
    ferry::manual_seed(7);
    Mlp model(features, hidden, classes, home), twin(features, hidden, classes, home);
    twin.load_state_dict(model.state_dict());  // the same start
    ferry::optim::Adam opt(model.parameters(), {.lr = 3e-3});
    ferry::optim::Adam twin_opt(twin.parameters(), {.lr = 3e-3});

    // Home, then every other device, then home again.
    std::vector<Device> route{home};
    for (const Device& d : sample::available_devices())
      if (d != home) route.push_back(d);
    if (route.size() > 1) route.push_back(home);
    std::printf(
        "\ntraining an MLP %lld-%lld-%lld-%lld on %lld samples; route: ", (long long)features,
        (long long)hidden, (long long)hidden, (long long)classes, (long long)n);
    for (std::size_t i = 0; i < route.size(); ++i)
      std::printf("%s%s", i ? " -> " : "", route[i].str().c_str());
    std::printf("\n");

    bool all_match = true;
    Device at = home;
    for (std::size_t epoch = 0; epoch < route.size(); ++epoch) {
      const Device& dev = route[epoch];
      if (dev != at) {
        ferry::TransferPlan plan = ferry::plan_migration(model, opt, dev);
        std::printf("\nmoving the model and its Adam state %s -> %s:\n%s", at.str().c_str(),
                    dev.str().c_str(), plan.explain().c_str());
        const ferry::MigrationReport r = plan.execute();
        for (const ferry::TransferPairReport& p : r.pairs)
          std::printf(
              "  moved %s -> %s: %zu storages, %llu bytes, %zu copies, %.3f ms, %.2f GB/s\n",
              p.source.str().c_str(), p.destination.str().c_str(), p.storages,
              (unsigned long long)p.bytes, p.copies, p.seconds * 1e3, p.gb_per_s());
        at = dev;
      }
      const std::string label = "epoch " + std::to_string(epoch + 1);
      std::printf("\n%s on %s\n", label.c_str(), dev.str().c_str());
      const double loss = train_epoch(model, opt, data, dev, epoch, dev.str().c_str());
      const double want = train_epoch(twin, twin_opt, data, home, epoch, nullptr);
      const double diff = std::fabs(loss - want);
      const bool match = diff <= 1e-4 * std::fabs(want) + 1e-6;
      all_match = all_match && match;
      std::printf("  mean loss %.6f; the twin that stayed on %s: %.6f; |difference| %.2g (%s)\n",
                  loss, home.str().c_str(), want, diff, match ? "match" : "MISMATCH");
    }
    std::printf("\n%s\n", all_match ? "every epoch matched the model that never moved"
                                    : "MISMATCH: a moved model's losses differ");
    return all_match ? 0 : 1;
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-demo: %s\n", e.what());
    return 1;
  }
}
