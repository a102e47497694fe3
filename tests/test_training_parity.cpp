// Training parity with PyTorch: tests/data/training/*.safetensors hold short
// PyTorch training runs (tools/gen_training_reference.py: initial weights, the
// data, the loss of every step and the final weights, written by PyTorch's
// safetensors package). ferry loads the same initial weights, trains the same
// model with the same optimizer on each available device, and must give every
// step's loss within 1e-5 relative on the CPU (1e-4 on other devices) and final
// weights within the same bound, relative to each tensor's largest value.
//
// Also: a checkpoint of model and optimizer saved on one device and loaded on
// another resumes training exactly where it stopped.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "ferry/ferry.hpp"
#include "test_devices.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding training/"
#endif

namespace {

using ferry::Device;
using ferry::StateDict;
using ferry::Tensor;
namespace nn = ferry::nn;

std::string data_file(const std::string& run) {
  return std::string(FERRY_TEST_DATA_DIR) + "/training/" + run + ".safetensors";
}

std::vector<Device> devices() {
  std::vector<Device> out;
  for (const std::string& d : ferry_test::available_device_names()) out.emplace_back(d);
  return out;
}

double tolerance(const Device& d) { return d.is_cpu() ? 1e-5 : 1e-4; }

// Linear(20, 32) - GELU - Linear(32, 5): PyTorch's nn.Sequential names.
std::shared_ptr<nn::Sequential> make_mlp(const Device& dev) {
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(20, 32, true, ferry::TensorOptions{.device = dev}),
      std::make_shared<nn::GELU>(),
      std::make_shared<nn::Linear>(32, 5, true, ferry::TensorOptions{.device = dev}));
}

// Embedding - LayerNorm - a bias-free Linear whose weight is the embedding's.
struct Tied : nn::Module {
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> head;
  explicit Tied(const Device& dev) {
    const ferry::TensorOptions on{.device = dev};
    emb = register_module("emb", std::make_shared<nn::Embedding>(50, 16, on));
    norm = register_module("norm",
                           std::make_shared<nn::LayerNorm>(ferry::Shape{16}, 1e-5, true, true, on));
    head = register_module("head", std::make_shared<nn::Linear>(16, 50, false, on));
    head->weight = head->replace_parameter("weight", emb->weight);
  }
  Tensor forward(const Tensor& tokens) override {
    return head->forward(norm->forward(emb->forward(tokens)));
  }
};

// A model, its optimizer and the loss of one step on batch k.
struct TrainRun {
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<ferry::optim::Optimizer> opt;
  std::function<Tensor(std::int64_t step)> loss;
  std::int64_t steps = 0;

  float step(std::int64_t k) {
    opt->zero_grad();
    Tensor l = loss(k);
    l.backward();
    opt->step();
    return l.item<float>();
  }
};

TrainRun make_run(const std::string& name, const StateDict& file, const Device& dev) {
  TrainRun r;
  r.steps = std::stoll(file.metadata.at("steps"));
  if (name == "tied_adamw") {
    auto m = std::make_shared<Tied>(dev);
    r.model = m;
    r.opt = std::make_unique<ferry::optim::AdamW>(
        m->parameters(), ferry::optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.01});
    Tensor tokens = file.at("data.tokens").to(dev);
    r.loss = [m, tokens](std::int64_t k) {
      Tensor t = tokens.select(0, k % tokens.size(0));
      Tensor logits = m->forward(t.narrow(1, 0, t.size(1) - 1));
      return nn::functional::cross_entropy(logits.reshape({-1, 50}),
                                           t.narrow(1, 1, t.size(1) - 1).reshape({-1}));
    };
  } else {
    auto m = make_mlp(dev);
    r.model = m;
    if (name == "mlp_adam")
      r.opt = std::make_unique<ferry::optim::Adam>(m->parameters(),
                                                   ferry::optim::AdamOptions{.lr = 1e-2});
    else
      r.opt = std::make_unique<ferry::optim::SGD>(
          m->parameters(), ferry::optim::SGDOptions{
                               .lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true});
    Tensor x = file.at("data.x").to(dev), y = file.at("data.y").to(dev);
    r.loss = [m, x, y](std::int64_t k) {
      return nn::functional::cross_entropy(m->forward(x.select(0, k % x.size(0))),
                                           y.select(0, k % y.size(0)));
    };
  }
  // The file's initial weights; a tied parameter is there once, under its first name.
  ferry::nn::IncompatibleKeys keys =
      r.model->load_state_dict(file.strip_prefix("init."), /*strict=*/true);
  EXPECT_TRUE(keys.empty());
  return r;
}

// max |a - b| / max |b|: the error relative to the tensor's scale.
double relative_error(const Tensor& got, const Tensor& want) {
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    err = std::max(err, std::fabs(g[i] - w[i]));
    scale = std::max(scale, std::fabs(w[i]));
  }
  return err / scale;
}

void check_parity(const std::string& name) {
  for (const Device& dev : devices()) {
    SCOPED_TRACE(name + " on " + dev.str());
    const StateDict file = ferry::load_safetensors(data_file(name), dev);
    TrainRun r = make_run(name, file, dev);
    const std::vector<float> want = file.at("loss").to_vector<float>();
    ASSERT_EQ(std::int64_t(want.size()), r.steps);
    const double tol = tolerance(dev);
    double worst_loss = 0, worst_weight = 0;
    for (std::int64_t k = 0; k < r.steps; ++k) {
      const float got = r.step(k);
      worst_loss = std::max(worst_loss, double(std::fabs(got - want[std::size_t(k)]) /
                                               std::fabs(want[std::size_t(k)])));
      EXPECT_LE(std::fabs(got - want[std::size_t(k)]), tol * std::fabs(want[std::size_t(k)]))
          << "step " << k << ": ferry " << got << ", PyTorch " << want[std::size_t(k)];
    }
    for (const auto& [pname, p] : r.model->named_parameters()) {
      ASSERT_EQ(p.device(), dev);
      const double e = relative_error(p, file.at("final." + pname));
      worst_weight = std::max(worst_weight, e);
      EXPECT_LE(e, tol) << "final " << pname;
    }
    std::printf(
        "%s on %s: %lld steps, worst loss error %.2g, worst final-weight error %.2g (bound %.0e)\n",
        name.c_str(), dev.str().c_str(), static_cast<long long>(r.steps), worst_loss, worst_weight,
        tol);
  }
}

TEST(TrainingParity, MlpAdamMatchesPyTorch) { check_parity("mlp_adam"); }
TEST(TrainingParity, MlpSgdNesterovWeightDecayMatchesPyTorch) { check_parity("mlp_sgd"); }
TEST(TrainingParity, TiedEmbeddingAdamWMatchesPyTorch) { check_parity("tied_adamw"); }

TEST(TrainingParity, TiedWeightIsOneParameterWithOneState) {
  const StateDict file = ferry::load_safetensors(data_file("tied_adamw"));
  TrainRun r = make_run("tied_adamw", file, Device::cpu());
  auto* m = static_cast<Tied*>(r.model.get());
  EXPECT_TRUE(m->head->weight.is_same(m->emb->weight));
  EXPECT_EQ(r.model->parameters().size(), 3u);  // emb.weight, norm.weight, norm.bias
  EXPECT_TRUE(r.model->state_dict().contains("head.weight"));
  r.step(0);
  std::size_t exp_avgs = 0;
  for (const auto& [n, t] : r.opt->named_state())
    if (n.find("exp_avg") != std::string::npos && n.find("exp_avg_sq") == std::string::npos)
      ++exp_avgs;
  EXPECT_EQ(exp_avgs, 3u);
}

// Checkpoint after `split` steps on `from`, resume on `to`: the rest of the run
// equals the run that never stopped, bit for bit on one device and within the
// device tolerance across devices.
TEST(TrainingParity, CheckpointResumesOnAnotherDevice) {
  const std::string tmp = std::filesystem::temp_directory_path() / "ferry_resume_ckpt.safetensors";
  const std::int64_t split = 10;
  for (const std::string name : {"mlp_adam", "mlp_sgd", "tied_adamw"})
    for (const Device& from : devices())
      for (const Device& to : devices()) {
        SCOPED_TRACE(name + ": " + from.str() + " -> " + to.str());
        TrainRun a = make_run(name, ferry::load_safetensors(data_file(name), from), from);
        for (std::int64_t k = 0; k < split; ++k) a.step(k);
        StateDict ckpt = a.model->state_dict().add_prefix("model.");
        ckpt.merge(a.opt->state_dict().add_prefix("optimizer."));
        ferry::save_safetensors(tmp, ckpt);
        std::vector<float> cont;
        for (std::int64_t k = split; k < a.steps; ++k) cont.push_back(a.step(k));

        const StateDict file = ferry::load_safetensors(data_file(name), to);
        TrainRun b = make_run(name, file, to);  // fresh model, fresh optimizer
        const StateDict loaded = ferry::load_safetensors(tmp, to);
        b.model->load_state_dict(loaded.strip_prefix("model."));
        b.opt->load_state_dict(loaded.strip_prefix("optimizer."));
        for (std::int64_t k = split; k < b.steps; ++k) {
          const float got = b.step(k), want = cont[std::size_t(k - split)];
          if (from == to)
            EXPECT_EQ(got, want) << "step " << k;
          else
            EXPECT_LE(std::fabs(got - want), tolerance(from.is_cpu() ? to : from) * std::fabs(want))
                << "step " << k;
        }
      }
  std::remove(tmp.c_str());
}

}  // namespace
