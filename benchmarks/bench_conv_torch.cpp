// benchmarks/bench_conv_torch.cpp — PyTorch's side of the convolution benchmark
// (bench_conv.cpp): the same convolutions and a ResNet-18 training step through libtorch
// in ferry-bench's process, on the CPU, with libtorch's own threads (its oneDNN path).
#include <torch/torch.h>

#include <map>

#include "bench_conv.hpp"

namespace bench::conv {
namespace {

struct Data {
  torch::Tensor x, w;
};

std::map<std::string, Data>& data() {
  static std::map<std::string, Data> d;
  return d;
}

struct Block : torch::nn::Module {
  Block(int64_t in, int64_t out, int64_t stride) {
    using torch::nn::Conv2dOptions;
    conv1 = register_module(
        "conv1",
        torch::nn::Conv2d(Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(out));
    conv2 = register_module("conv2",
                            torch::nn::Conv2d(Conv2dOptions(out, out, 3).padding(1).bias(false)));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      down = register_module(
          "down", torch::nn::Conv2d(Conv2dOptions(in, out, 1).stride(stride).bias(false)));
      down_bn = register_module("down_bn", torch::nn::BatchNorm2d(out));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = torch::relu(bn1(conv1(x)));
    y = bn2(conv2(y));
    return torch::relu(y + (down ? down_bn(down(x)) : x));
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, down{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, down_bn{nullptr};
};

struct ResNet18 : torch::nn::Module {
  ResNet18() {
    using torch::nn::Conv2dOptions;
    conv1 = register_module(
        "conv1", torch::nn::Conv2d(Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(64));
    const int64_t widths[] = {64, 128, 256, 512};
    int64_t in = 64;
    for (int s = 0; s < 4; ++s)
      for (int b = 0; b < 2; ++b) {
        blocks.push_back(
            register_module("block" + std::to_string(s * 2 + b),
                            std::make_shared<Block>(in, widths[s], b == 0 && s > 0 ? 2 : 1)));
        in = widths[s];
      }
    fc = register_module("fc", torch::nn::Linear(512, 1000));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(bn1(conv1(x))), 3, 2, 1);
    for (auto& b : blocks) x = b->forward(x);
    return fc(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
  }
  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  std::vector<std::shared_ptr<Block>> blocks;
  torch::nn::Linear fc{nullptr};
};

struct Step {
  std::shared_ptr<ResNet18> model;
  std::unique_ptr<torch::optim::SGD> opt;
  torch::Tensor x, y;
};

// torch_setup's --quick, for the layers made on their first call.
bool& quick_run() {
  static bool quick = false;
  return quick;
}

Step& step(bool channels_last) {
  static Step s[2];
  return s[channels_last];
}

}  // namespace

void torch_setup(bool quick) {
  quick_run() = quick;
  torch::manual_seed(0);
  for (const ConvCase& c : cases()) {
    const int64_t h = size(c, quick);
    data()[c.name] = {torch::randn({batch(quick), c.c, h, h}, torch::requires_grad()),
                      torch::randn({c.oc, c.c, c.k, c.k}, torch::requires_grad()) * 0.05};
    data()[c.name].w = data()[c.name].w.detach().requires_grad_();
    const auto cl = [](const torch::Tensor& t) {
      return t.detach().contiguous(torch::MemoryFormat::ChannelsLast).requires_grad_();
    };
    data()[std::string(c.name) + " cl"] = {cl(data()[c.name].x), cl(data()[c.name].w)};
  }
  for (const bool channels_last : {false, true}) {
    Step& s = step(channels_last);
    s.model = std::make_shared<ResNet18>();
    s.x = torch::randn({batch(quick), 3, resnet_image(quick), resnet_image(quick)});
    if (channels_last) {  // model.to(memory_format=torch.channels_last) in Python
      for (auto& p : s.model->parameters())
        if (p.dim() == 4) p.set_data(p.data().contiguous(torch::MemoryFormat::ChannelsLast));
      s.x = s.x.contiguous(torch::MemoryFormat::ChannelsLast);
    }
    s.opt = std::make_unique<torch::optim::SGD>(s.model->parameters(),
                                                torch::optim::SGDOptions(0.01).momentum(0.9));
    s.y = torch::randint(0, 1000, {batch(quick)});
  }
}

void torch_conv(const std::string& name, bool backward, bool channels_last) {
  const Data& d = data().at(channels_last ? name + " cl" : name);
  for (const ConvCase& c : cases())
    if (name == c.name) {
      if (!backward) {
        torch::NoGradGuard no_grad;
        auto y = torch::conv2d(d.x, d.w, {}, c.stride, c.pad);
        asm volatile("" : : "r"(y.unsafeGetTensorImpl()) : "memory");
        return;
      }
      auto y = torch::conv2d(d.x, d.w, {}, c.stride, c.pad);
      auto g = torch::autograd::grad({y}, {d.x, d.w}, {torch::ones_like(y)});
      asm volatile("" : : "r"(g[0].unsafeGetTensorImpl()) : "memory");
    }
}

void torch_layer(const std::string& layer, bool channels_last) {
  struct Layer {
    torch::Tensor x, w, b, g;
  };
  static std::map<std::string, Layer> by_key;
  const std::string key = layer + (channels_last ? " cl" : "");
  auto it = by_key.find(key);
  const bool bn = layer == "batch_norm";
  const auto run = [&](const Layer& l) {
    if (bn) return torch::batch_norm(l.x, l.w, l.b, {}, {}, true, 0.1, 1e-5, false);
    if (layer == "interpolate bilinear x2")
      return torch::nn::functional::interpolate(l.x,
                                                torch::nn::functional::InterpolateFuncOptions()
                                                    .scale_factor(std::vector<double>{2.0, 2.0})
                                                    .mode(torch::kBilinear)
                                                    .align_corners(false));
    if (layer == "adaptive_avg_pool2d 1x1") return torch::adaptive_avg_pool2d(l.x, {1, 1});
    if (layer == "adaptive_avg_pool2d 6x6") return torch::adaptive_avg_pool2d(l.x, {6, 6});
    if (layer == "adaptive_max_pool2d 6x6")
      return std::get<0>(torch::adaptive_max_pool2d(l.x, {6, 6}));
    return layer == "avg_pool2d 3x3/2" ? torch::avg_pool2d(l.x, 3, 2, 1)
                                       : torch::max_pool2d(l.x, 3, 2, 1);
  };
  if (it == by_key.end()) {
    torch::manual_seed(0);
    const auto format =
        channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
    const int64_t h = layer_size(quick_run());
    Layer l{torch::randn({batch(quick_run()), 64, h, h}).contiguous(format).requires_grad_(),
            torch::ones({64}).requires_grad_(),
            torch::zeros({64}).requires_grad_(),
            {}};
    l.g = torch::randn_like(run(l)).contiguous(format);
    it = by_key.emplace(key, std::move(l)).first;
  }
  const Layer& l = it->second;
  auto gx = torch::autograd::grad({run(l)}, {l.x}, {l.g});
  asm volatile("" : : "r"(gx[0].unsafeGetTensorImpl()) : "memory");
}

void torch_resnet_step(bool channels_last) {
  Step& s = step(channels_last);
  s.opt->zero_grad();
  auto loss = torch::nn::functional::cross_entropy(s.model->forward(s.x), s.y);
  loss.backward();
  s.opt->step();
}

}  // namespace bench::conv
