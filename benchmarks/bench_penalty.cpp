// benchmarks/bench_penalty.cpp — a WGAN-GP critic step (bench_penalty.hpp): ferry's CPU beside
// PyTorch's (libtorch, this process), and vulkan:0 beside ferry's CPU. The step's second
// derivatives run through autograd::grad's create_graph (Note [Higher-order gradients] in
// runtime/autograd/graph.hpp).
#include "bench_penalty.hpp"

#include <fmt/format.h>

#include <memory>

#include "bench_common.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

using namespace penalty;

struct Critic {
  std::vector<std::shared_ptr<ferry::nn::Linear>> layers;
  ferry::Tensor operator()(const ferry::Tensor& x) const {
    ferry::Tensor h = x;
    for (std::size_t i = 0; i + 1 < layers.size(); ++i) h = ferry::gelu(layers[i]->forward(h));
    return layers.back()->forward(h);
  }
  std::vector<ferry::Tensor> parameters() const {
    std::vector<ferry::Tensor> p;
    for (const auto& l : layers)
      for (const ferry::Tensor& t : l->parameters()) p.push_back(t);
    return p;
  }
};

void run_step(benchmark::State& s, const std::string& device) {
  time_steps(s, device, [](const ferry::Device& dev) -> std::function<void()> {
    const Sizes z = sizes(quick());
    ferry::manual_seed(0);
    auto critic = std::make_shared<Critic>();
    std::int64_t in = z.input;
    for (std::int64_t l = 0; l < z.layers; ++l, in = z.hidden)
      critic->layers.push_back(std::make_shared<ferry::nn::Linear>(
          in, z.hidden, true, ferry::TensorOptions{.device = dev}));
    critic->layers.push_back(
        std::make_shared<ferry::nn::Linear>(in, 1, true, ferry::TensorOptions{.device = dev}));
    auto opt = std::make_shared<ferry::optim::Adam>(critic->parameters(),
                                                    ferry::optim::AdamOptions{.lr = 1e-4});
    const ferry::Tensor real = ferry::randn({z.batch, z.input}).to(dev);
    const ferry::Tensor fake = ferry::randn({z.batch, z.input}).to(dev);
    const ferry::Tensor alpha = ferry::rand({z.batch, 1}).to(dev);
    return [critic, opt, real, fake, alpha] {
      opt->zero_grad();
      ferry::Tensor mixed = (real * alpha + fake * (1.0 - alpha)).detach().requires_grad_();
      const ferry::Tensor d = (*critic)(mixed);
      const ferry::Tensor g =
          ferry::autograd::grad({ferry::sum(d)}, {mixed}, {}, false, false, true)[0];
      const ferry::Tensor gp = ferry::mean(ferry::pow(ferry::norm(g, 2.0, {1}) - 1.0, 2.0));
      ferry::Tensor loss =
          ferry::mean((*critic)(fake)) - ferry::mean((*critic)(real)) + gp * kLambda;
      loss.backward();
      opt->step();
      benchmark::DoNotOptimize(loss.item<float>());
    };
  });
}

}  // namespace

void register_penalty() {
#ifdef FERRY_BENCH_HAVE_TORCH
  penalty::torch_setup(quick());
#endif
  const Sizes z = sizes(quick());
  const std::string title = fmt::format(
      "WGAN-GP critic step (MLP {} x {} GELU on {} features, batch {}, gradient penalty)", z.layers,
      z.hidden, z.input, z.batch);
#ifdef FERRY_BENCH_HAVE_TORCH
  const std::function<void()> torch_step = penalty::torch_step;
#else
  const std::function<void()> torch_step;
#endif
  register_step_rows("gradient penalty step", title, quick() ? 1 : 10, run_step, torch_step);
}

}  // namespace bench
