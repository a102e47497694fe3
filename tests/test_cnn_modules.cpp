// The CNN layers (ferry/nn/conv.hpp, normalization.hpp, pooling.hpp): PyTorch's parameter
// and buffer names, shapes, initial values and repr; forwards that are the functional ops';
// and a torchvision-style ResNet (samples/resnet.hpp) that loads a PyTorch checkpoint by
// name (tests/data/resnet_tiny.safetensors, tools/gen_resnet_reference.py) and gives
// PyTorch's outputs, gradients and running statistics, on every device.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "resnet.hpp"
#include "torch_reference.hpp"

namespace {

using ferry::Shape;
using ferry::Tensor;
namespace nn = ferry::nn;

std::vector<std::string> names(const std::vector<nn::NamedTensor>& v) {
  std::vector<std::string> r;
  for (const auto& [n, t] : v) r.push_back(n);
  return r;
}

TEST(CnnModules, NamesShapesInitAndRepr) {
  ferry::manual_seed(0);
  nn::ConvTranspose2d up(4, 6, {3, 2}, {2}, {1}, {1, 0}, 2);
  EXPECT_EQ(names(up.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(up.weight.sizes(), (Shape{4, 3, 3, 2}));  // [in, out / groups, *kernel]
  const double bound = 1.0 / std::sqrt(3.0 * 3 * 2);  // fan_in = weight.size(1) * kernel
  for (float v : up.weight.to_vector<float>()) EXPECT_LE(std::fabs(v), bound);
  EXPECT_EQ(up.str(),
            "ConvTranspose2d(4, 6, kernel_size=(3, 2), stride=(2, 2), padding=(1, 1), "
            "output_padding=(1, 0), groups=2)");
  const Tensor x = ferry::rand({2, 4, 3, 3});
  EXPECT_EQ(up.forward(x).to_vector<float>(),
            ferry::conv_transpose2d(x, up.weight, up.bias, {2}, {1}, {1, 0}, 2).to_vector<float>());

  nn::BatchNorm2d bn(3);
  EXPECT_EQ(names(bn.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(names(bn.named_buffers()),
            (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(bn.str(),
            "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)");
  EXPECT_FERRY_ERROR(bn.forward(ferry::ones({2, 3, 4})), ferry::ShapeError, "BatchNorm2d(3)", "4-D",
                     "[2, 3, 4]");
  nn::BatchNorm3d bn3(2);
  EXPECT_EQ(bn3.forward(ferry::rand({2, 2, 2, 2, 2})).sizes(), (Shape{2, 2, 2, 2, 2}));
  EXPECT_EQ(bn3.num_batches_tracked.item<std::int64_t>(), 1);

  nn::GroupNorm gn(2, 4);
  EXPECT_EQ(gn.str(), "GroupNorm(2, 4, eps=1e-05, affine=true)");
  EXPECT_EQ(gn.weight.to_vector<float>(), std::vector<float>(4, 1.0f));
  EXPECT_THROW(nn::GroupNorm(3, 4), ferry::ShapeError);

  nn::InstanceNorm2d in(3);
  EXPECT_TRUE(in.named_parameters().empty());
  EXPECT_TRUE(in.named_buffers().empty());
  EXPECT_EQ(in.str(),
            "InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=false, track_running_stats=false)");
  const Tensor img = ferry::rand({3, 4, 5});  // unbatched
  EXPECT_EQ(in.forward(img).sizes(), (Shape{3, 4, 5}));
  nn::InstanceNorm2d tracked(3, 1e-5, 0.1, true, true);
  EXPECT_EQ(names(tracked.named_buffers()),
            (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));

  EXPECT_EQ(nn::MaxPool2d({3}, {2}, {1}).str(),
            "MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=false)");
  EXPECT_EQ(nn::AvgPool2d({2}).str(), "AvgPool2d(kernel_size=2, stride=2, padding=0)");
  EXPECT_EQ(nn::AdaptiveAvgPool2d({1, 1}).str(), "AdaptiveAvgPool2d(output_size=(1, 1))");
  EXPECT_EQ(nn::Upsample({.scale_factor = {2}, .mode = "bilinear"}).str(),
            "Upsample(scale_factor=2.0, mode='bilinear')");
  EXPECT_EQ(nn::PixelShuffle(2).str(), "PixelShuffle(upscale_factor=2)");
  EXPECT_EQ(nn::Dropout2d(0.2).str(), "Dropout2d(p=0.2, inplace=false)");
  EXPECT_EQ(nn::LocalResponseNorm(2).str(), "LocalResponseNorm(2, alpha=0.0001, beta=0.75, k=1)");

  const Tensor f = ferry::rand({2, 3, 6, 6});
  nn::MaxPool2d mp({2});
  auto [v, i] = mp.forward_with_indices(f);
  EXPECT_EQ(v.to_vector<float>(), ferry::max_pool2d(f, {2}).to_vector<float>());
  EXPECT_EQ(i.sizes(), (Shape{2, 3, 3, 3}));
  nn::Upsample up2({.size = {9, 4}, .mode = "nearest"});
  EXPECT_EQ(up2.forward(f).sizes(), (Shape{2, 3, 9, 4}));
  nn::Dropout2d drop(0.5);
  drop.eval();
  EXPECT_EQ(drop.forward(f).to_vector<float>(), f.to_vector<float>());
}

// A PyTorch checkpoint of a torchvision-style ResNet loads by name, strictly, and the model
// gives PyTorch's outputs in eval and training mode, the same gradients, and moves the
// running statistics as PyTorch's did.
void check_resnet(const ferry::Device& dev) {
  std::ifstream f(std::string(FERRY_TEST_DATA_DIR) + "/resnet_tiny.json");
  ASSERT_TRUE(f) << "missing tests/data/resnet_tiny.json (tools/gen_resnet_reference.py)";
  const nlohmann::json ref = nlohmann::json::parse(f);
  const double rtol = ref["tol"]["rtol"], atol = ref["tol"]["atol"];
  sample::ResNet model({.blocks = {1, 1, 1, 1}, .widths = {4, 8, 8, 16}, .num_classes = 5},
                       {.device = dev});
  const auto keys = model.load_state_dict(
      ferry::load_safetensors(std::string(FERRY_TEST_DATA_DIR) + "/resnet_tiny.safetensors", dev));
  EXPECT_TRUE(keys.missing_keys.empty());
  EXPECT_TRUE(keys.unexpected_keys.empty());
  EXPECT_EQ(model.state_dict().size(), 74u);
  const Tensor x = ferry_test::from_json(ref["input"]).to(dev);
  model.eval();
  {
    ferry::NoGradGuard no_grad;
    ferry_test::expect_close(model.forward(x), ferry_test::from_json(ref["eval_output"]), rtol,
                             atol, "eval output");
  }
  model.train();
  const Tensor y = model.forward(x);
  ferry_test::expect_close(y, ferry_test::from_json(ref["train_output"]), rtol, atol,
                           "train output");
  ferry::sum(y).backward();
  ferry_test::expect_close(model.conv1->weight.grad(),
                           ferry_test::from_json(ref["conv1_weight_grad"]), 1e-3, 1e-4,
                           "conv1.weight.grad");
  ferry_test::expect_close(model.fc->weight.grad(), ferry_test::from_json(ref["fc_weight_grad"]),
                           rtol, atol, "fc.weight.grad");
  EXPECT_EQ(model.bn1->num_batches_tracked.item<std::int64_t>(), 4);
}

FERRY_TEST_ON_EACH_DEVICE(CnnModules, TorchvisionStyleResNetCheckpoint, check_resnet)

}  // namespace
