// samples/resnet.hpp — a torchvision-style ResNet on ferry's public API: BasicBlock and
// ResNet with torchvision's module names (conv1, bn1, layer1.0.conv1, layer2.0.downsample.0,
// fc, ...), so a state_dict saved from torchvision.models.resnet18() loads by name, and
// torchvision's initialisation (kaiming_normal_(fan_out) convolutions, BatchNorm ones and
// zeros). ResNet-18 is ResNet({2, 2, 2, 2}); a "small" stem (3x3 stride 1, no max pool)
// suits tiny images such as the 8x8 digits. Used by ferry-train-cnn, ferry-bench and the
// tests. Plain C++: copy it into your own program if it helps.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "ferry/ferry.hpp"

namespace sample {

namespace nn = ferry::nn;

inline void kaiming_normal_fan_out_(ferry::Tensor& w) {
  // torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu"): std = sqrt(2 / fan_out)
  std::int64_t fan_out = w.size(0);
  for (std::int64_t d = 2; d < w.dim(); ++d) fan_out *= w.size(d);
  ferry::NoGradGuard no_grad;
  w.copy_(ferry::randn(w.sizes(), {.dtype = w.dtype(), .device = w.device()}) *
          std::sqrt(2.0 / double(fan_out)));
}

class BasicBlock : public nn::Module {
 public:
  BasicBlock(std::int64_t in, std::int64_t out, std::int64_t stride,
             const ferry::TensorOptions& o = {}) {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(
                                         in, out, ferry::ConvSizes{3}, ferry::ConvSizes{stride}, 1,
                                         ferry::ConvSizes{1}, 1, false, "zeros", o));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(out, 1e-5, 0.1, true, true, o));
    conv2 = register_module(
        "conv2", std::make_shared<nn::Conv2d>(out, out, ferry::ConvSizes{3}, ferry::ConvSizes{1}, 1,
                                              ferry::ConvSizes{1}, 1, false, "zeros", o));
    bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(out, 1e-5, 0.1, true, true, o));
    if (stride != 1 || in != out)
      downsample = register_module(
          "downsample",
          std::make_shared<nn::Sequential>(
              std::make_shared<nn::Conv2d>(in, out, ferry::ConvSizes{1}, ferry::ConvSizes{stride},
                                           0, ferry::ConvSizes{1}, 1, false, "zeros", o),
              std::make_shared<nn::BatchNorm2d>(out, 1e-5, 0.1, true, true, o)));
  }
  ferry::Tensor forward(const ferry::Tensor& x) override {
    ferry::Tensor y = ferry::relu(bn1->forward(conv1->forward(x)));
    y = bn2->forward(conv2->forward(y));
    return ferry::relu(y + (downsample ? downsample->forward(x) : x));
  }

  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::Sequential> downsample;
};

struct ResNetOptions {
  std::vector<int> blocks{2, 2, 2, 2};  // per stage; ResNet-18
  std::vector<std::int64_t> widths{64, 128, 256, 512};
  std::int64_t in_channels = 3, num_classes = 1000;
  bool small_stem = false;  // 3x3 stride-1 conv1 and no max pool (tiny images)
};

class ResNet : public nn::Module {
 public:
  explicit ResNet(const ResNetOptions& r, const ferry::TensorOptions& o = {})
      : small_(r.small_stem) {
    const std::int64_t w0 = r.widths[0];
    conv1 = register_module(
        "conv1", small_ ? std::make_shared<nn::Conv2d>(r.in_channels, w0, ferry::ConvSizes{3},
                                                       ferry::ConvSizes{1}, 1, ferry::ConvSizes{1},
                                                       1, false, "zeros", o)
                        : std::make_shared<nn::Conv2d>(r.in_channels, w0, ferry::ConvSizes{7},
                                                       ferry::ConvSizes{2}, 3, ferry::ConvSizes{1},
                                                       1, false, "zeros", o));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(w0, 1e-5, 0.1, true, true, o));
    maxpool = std::make_shared<nn::MaxPool2d>(ferry::ConvSizes{3}, ferry::ConvSizes{2},
                                              ferry::ConvSizes{1});
    std::int64_t in = w0;
    for (std::size_t s = 0; s < r.blocks.size(); ++s) {
      auto stage = std::make_shared<nn::Sequential>();
      for (int b = 0; b < r.blocks[s]; ++b) {
        const std::int64_t stride = b == 0 && s > 0 ? 2 : 1;
        stage->push_back(std::make_shared<BasicBlock>(in, r.widths[s], stride, o));
        in = r.widths[s];
      }
      layers.push_back(register_module("layer" + std::to_string(s + 1), stage));
    }
    fc = register_module("fc", std::make_shared<nn::Linear>(in, r.num_classes, true, o));
    for (auto& [name, m] : named_modules())
      if (auto* c = dynamic_cast<nn::Conv2d*>(m.get())) kaiming_normal_fan_out_(c->weight);
  }
  ferry::Tensor forward(const ferry::Tensor& x) override {
    ferry::Tensor y = ferry::relu(bn1->forward(conv1->forward(x)));
    if (!small_) y = maxpool->forward(y);
    for (const auto& stage : layers) y = stage->forward(y);
    return fc->forward(ferry::adaptive_avg_pool2d(y, {1}).flatten(1));
  }

  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::MaxPool2d> maxpool;
  std::vector<std::shared_ptr<nn::Sequential>> layers;
  std::shared_ptr<nn::Linear> fc;

 private:
  bool small_;
};

}  // namespace sample
