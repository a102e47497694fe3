// ferry-checkpoint — saves a training run on one device and resumes it on
// another: model and Adam state go to one safetensors file, are loaded with
// map_location straight onto the other device, and training goes on there.
// The resumed losses are checked against a run that was never interrupted.
#include <cmath>
#include <cstdio>
#include <memory>

#include "sample_common.hpp"

namespace {

namespace nn = ferry::nn;
using ferry::Device;
using ferry::Tensor;

std::shared_ptr<nn::Sequential> make_model(const Device& dev) {
  const ferry::TensorOptions on{.device = dev};
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(16, 64, true, on),
                                          std::make_shared<nn::Tanh>(),
                                          std::make_shared<nn::Linear>(64, 4, true, on));
}

struct Run {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<ferry::optim::Adam> opt;
  Tensor x, y;
  Device dev;

  Run(const Device& d, const Tensor& x_cpu, const Tensor& y_cpu)
      : model(make_model(d)), x(x_cpu.to(d)), y(y_cpu.to(d)), dev(d) {
    opt = std::make_unique<ferry::optim::Adam>(model->parameters(),
                                               ferry::optim::AdamOptions{.lr = 5e-3});
  }
  // Step k trains on rows [32k, 32k + 32) of the data, wrapping around.
  double step(std::int64_t k) {
    const std::int64_t n = x.shape()[0], at = (k * 32) % n;
    opt->zero_grad();
    Tensor loss = nn::functional::cross_entropy(model->forward(x.slice(0, at, at + 32)),
                                                y.slice(0, at, at + 32));
    loss.backward();
    opt->step();
    return loss.item<double>();
  }
};

}  // namespace

int main(int argc, char** argv) {
  sample::Args args(argc, argv,
                    "usage: ferry-checkpoint [--from DEV] [--to DEV] [--steps N] [--path FILE]\n\n"
                    "Trains on --from, saves model and optimizer, loads them onto --to with\n"
                    "map_location and resumes; the resumed losses must match a run that never\n"
                    "stopped (to rounding, when the two devices differ).",
                    {{"from", "where training starts (default: the CPU)"},
                     {"to", "where it resumes (default: the first GPU device, else the CPU)"},
                     {"steps", "steps before and after the checkpoint (default 20)"},
                     {"path", "the checkpoint file (default checkpoint.safetensors)"},
                     {"small!", "5 steps each side"}});
  try {
    const Device from = args.has("from") ? args.device("from") : Device::cpu();
    // By default, onto the first accelerator there is: the interesting case.
    Device to = Device::cpu();
    for (const Device& d : sample::available_devices())
      if (!d.is_cpu()) {
        to = d;
        break;
      }
    if (args.has("to")) to = args.device("to");
    const std::int64_t steps = args.number("steps", args.has("small") ? 5 : 20);
    const std::string path = args.get("path", "checkpoint.safetensors");
    auto [x, y] = sample::blobs(512, 16, 4, /*seed=*/3);

    ferry::manual_seed(1);
    Run first(from, x, y);
    ferry::manual_seed(1);
    Run straight(from, x, y);  // the same start, never interrupted
    for (std::int64_t k = 0; k < steps; ++k) {
      first.step(k);
      straight.step(k);
    }
    ferry::StateDict ckpt = first.model->state_dict().add_prefix("model.");
    ckpt.merge(first.opt->state_dict().add_prefix("optimizer."));
    ferry::save_safetensors(path, ckpt);
    std::printf("trained %lld steps on %s, saved %zu tensors to %s\n", (long long)steps,
                from.str().c_str(), ckpt.size(), path.c_str());

    // A fresh model and optimizer on `to`, filled from the file.
    Run resumed(to, x, y);
    const ferry::StateDict loaded = ferry::load_safetensors(path, /*map_location=*/to);
    resumed.model->load_state_dict(loaded.strip_prefix("model."));
    resumed.opt->load_state_dict(loaded.strip_prefix("optimizer."));
    std::printf("loaded onto %s; resuming:\n", to.str().c_str());
    // Bit for bit on the same device; to rounding across devices' math libraries.
    const double tol = from == to ? 0.0 : 1e-4;
    bool ok = true;
    for (std::int64_t k = steps; k < 2 * steps; ++k) {
      const double got = resumed.step(k), want = straight.step(k);
      const bool match = std::fabs(got - want) <= tol * std::fabs(want);
      ok = ok && match;
      std::printf("  step %3lld on %s: loss %.6f, uninterrupted on %s: %.6f%s\n", (long long)k,
                  to.str().c_str(), got, from.str().c_str(), want, match ? "" : "  MISMATCH");
    }
    std::printf("%s\n", ok ? "the resumed run matches the uninterrupted one"
                           : "MISMATCH between the resumed and the uninterrupted run");
    return ok ? 0 : 1;
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-checkpoint: %s\n", e.what());
    return 1;
  }
}
