// ferry-move-model — a model with a tied weight (an embedding shared with the
// output layer), buffers (batch norm's running statistics) and Adam's state
// after a few steps, moved through every pair of devices and back with one
// planned migration per hop; after each round trip every tensor is compared
// bit for bit with a snapshot, and the tie is checked to still be one tensor.
#include <cstdio>
#include <cstring>
#include <memory>

#include "sample_common.hpp"

namespace {

namespace nn = ferry::nn;
using ferry::Device;
using ferry::Tensor;

// Embedding -> BatchNorm1d -> a bias-free Linear whose weight is the embedding's.
struct TiedModel : nn::Module {
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<nn::BatchNorm1d> norm;
  std::shared_ptr<nn::Linear> head;
  TiedModel(std::int64_t vocab, std::int64_t dim) {
    emb = register_module("emb", std::make_shared<nn::Embedding>(vocab, dim));
    norm = register_module("norm", std::make_shared<nn::BatchNorm1d>(dim));
    head = register_module("head", std::make_shared<nn::Linear>(dim, vocab, false));
    head->weight = head->replace_parameter("weight", emb->weight);
  }
  Tensor forward(const Tensor& tokens) override {
    return head->forward(norm->forward(emb->forward(tokens)));
  }
};

// Every tensor the migration moves, by name, as the bytes of its values
// widened to double (exact for every dtype here, so equal bytes are equal
// bits, the sign of a zero and a NaN's payload included).
using Snapshot = std::vector<std::pair<std::string, std::vector<std::byte>>>;
Snapshot snapshot(nn::Module& model, ferry::optim::Optimizer& opt) {
  Snapshot out;
  auto add = [&](const std::string& name, const Tensor& t) {
    const std::vector<double> v = t.to_vector<double>();
    std::vector<std::byte> bytes(v.size() * sizeof(double));
    if (!bytes.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
    out.emplace_back(name, std::move(bytes));
  };
  for (const auto& [n, t] : model.named_parameters()) add("param " + n, t);
  for (const auto& [n, t] : model.named_buffers()) add("buffer " + n, t);
  for (const auto& [n, t] : opt.named_state()) add("optimizer " + n, t);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  sample::Args args(
      argc, argv,
      "usage: ferry-move-model [--vocab N] [--dim N] [--small]\n\n"
      "Moves a model with a tied weight, buffers and Adam state from every device to\n"
      "every other and back (ferry::migrate), checking each round trip bit for bit.",
      {{"vocab", "embedding rows (default 4096)"},
       {"dim", "embedding width (default 256)"},
       {"small!", "a small model (vocab 64, width 16)"}});
  try {
    const bool small = args.has("small");
    const std::int64_t vocab = args.number("vocab", small ? 64 : 4096);
    const std::int64_t dim = args.number("dim", small ? 16 : 256);
    const std::vector<Device> devices = sample::available_devices();

    ferry::manual_seed(5);
    TiedModel model(vocab, dim);
    ferry::optim::Adam opt(model.parameters(), {.lr = 1e-2});
    for (int step = 0; step < 3; ++step) {  // gives Adam its state and the norm its statistics
      Tensor tokens = ferry::randint(0, vocab, {32});
      opt.zero_grad();
      nn::functional::cross_entropy(model.forward(tokens), tokens).backward();
      opt.step();
    }
    const auto before = snapshot(model, opt);
    std::printf(
        "a tied model (%lld x %lld embedding shared with the output layer), batch norm "
        "buffers and Adam state: %zu tensors\n",
        (long long)vocab, (long long)dim, before.size());

    int failures = 0;
    for (const Device& a : devices)
      for (const Device& b : devices) {
        if (a == b) continue;
        ferry::migrate(model, opt, a);  // start the round trip at a
        const ferry::MigrationReport there = ferry::migrate(model, opt, b);
        const bool tied_there = model.head->weight.is_same(model.emb->weight);
        const ferry::MigrationReport back = ferry::migrate(model, opt, a);
        const auto after = snapshot(model, opt);
        std::size_t differ = 0;
        for (std::size_t i = 0; i < before.size(); ++i)
          if (after[i] != before[i]) {
            ++differ;
            std::printf("    %s changed\n", before[i].first.c_str());
          }
        const bool tied = tied_there && model.head->weight.is_same(model.emb->weight);
        const bool ok = differ == 0 && tied && model.emb->weight.device() == a;
        failures += ok ? 0 : 1;
        std::printf("  %-9s -> %-9s -> %-9s %8.2f + %6.2f ms, %llu bytes each way: %s%s\n",
                    a.str().c_str(), b.str().c_str(), a.str().c_str(), there.seconds * 1e3,
                    back.seconds * 1e3, (unsigned long long)there.bytes,
                    ok ? "bit for bit" : "DIFFERENT", tied ? ", still tied" : ", TIE BROKEN");
      }
    if (devices.size() < 2) std::printf("  one device here: nothing to move between\n");
    std::printf("%s\n", failures ? "FAILED" : "every round trip left every tensor as it was");
    return failures ? 1 : 0;
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-move-model: %s\n", e.what());
    return 1;
  }
}
