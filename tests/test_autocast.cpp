// Autocast (ferry/autocast.hpp, Note [Autocast]): the op table's autocast column against
// PyTorch's policy (tests/data/pytorch_autocast_policy.json, tools/gen_autocast_policy.py);
// the dtypes ops give in a scope, per policy; scopes by device type, nesting and disabling;
// gradients reaching f32 parameters; the parameter-cast cache; backward() and checkpoint.
// (ConformanceSelfTest.EveryAutocastRowCastsItsInputs runs every policy row's cases.)
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "ferry/ferry.hpp"
#include "test_devices.hpp"

namespace {

using ferry::DType;
using ferry::OpAutocast;
using ferry::Tensor;
namespace F = ferry::nn::functional;

Tensor randn(const ferry::Shape& s, DType dt = DType::f32, const std::string& dev = "cpu") {
  return ferry::randn(s, {.dtype = dt, .device = ferry::Device(dev)});
}

const char* policy_word(OpAutocast p) {
  switch (p) {
    case OpAutocast::lower:
      return "lower";
    case OpAutocast::f32:
      return "f32";
    case OpAutocast::promote:
      return "promote";
    case OpAutocast::banned:
      return "banned";
    case OpAutocast::none:
      break;
  }
  return "none";
}

// PyTorch's names for what ferry has as one op.
const std::map<std::string, std::string> kAliases = {
    {"grid_sampler", "grid_sample"},
    {"upsample_nearest1d", "interpolate"},
    {"upsample_nearest2d", "interpolate"},
    {"upsample_nearest3d", "interpolate"},
    {"upsample_linear1d", "interpolate"},
    {"upsample_bilinear2d", "interpolate"},
    {"upsample_trilinear3d", "interpolate"},
    {"upsample_bicubic2d", "interpolate"},
    {"linalg_vector_norm", "norm"},
    {"frobenius_norm", "norm"},
    {"native_layer_norm", "layer_norm"},
    {"_convolution", "conv2d"},
    {"convolution", "conv2d"},
    {"_scaled_dot_product_flash_attention", "scaled_dot_product_attention"},
    {"mm", "matmul"},
    {"bmm", "matmul"},
    {"mv", "matmul"},
    {"linalg_vecdot", "vecdot"},
    {"linalg_multi_dot", "multi_dot"},
    {"chain_matmul", "multi_dot"}};

// The column says what PyTorch's CUDA policy says, for every op both have; and no ferry op
// has a policy PyTorch does not give it. (scatter_add is a backward kernel in ferry, which no
// application calls, so its row has none.)
TEST(Autocast, PolicyColumnIsPyTorchs) {
  std::ifstream f(std::string(FERRY_TEST_DATA_DIR) + "/pytorch_autocast_policy.json");
  ASSERT_TRUE(f) << "missing tests/data/pytorch_autocast_policy.json";
  const auto doc = nlohmann::json::parse(f);
  std::map<std::string, std::string> want;  // ferry op -> PyTorch's policy
  int matched = 0;
  for (const auto& [name, policy] : doc["policy"].items()) {
    const auto alias = kAliases.find(name);
    const std::string op = alias != kAliases.end() ? alias->second : name;
    const auto id = ferry::op_from_name(op);
    if (!id || ferry::op_info(*id).kind == ferry::OpKind::index_backward) continue;
    ++matched;
    want[op] = policy.get<std::string>();
    EXPECT_EQ(policy_word(ferry::op_info(*id).autocast), policy.get<std::string>())
        << op << " (PyTorch's " << name << ")";
  }
  EXPECT_GE(matched, 50);
  for (const ferry::OpInfo& info : ferry::op_table())
    if (info.autocast != OpAutocast::none)
      EXPECT_TRUE(want.count(std::string(info.name)))
          << info.name << " has a policy PyTorch does not list";
}

TEST(Autocast, LowOpsRunInTheScopesDtype) {
  const Tensor x = randn({4, 8}), w = randn({6, 8}), b = randn({6});
  const Tensor img = randn({1, 2, 5, 5}), k = randn({3, 2, 3, 3});
  const Tensor q = randn({1, 2, 5, 8});
  for (DType low : {DType::f16, DType::bf16}) {
    ferry::Autocast amp("cpu", low);
    EXPECT_EQ(ferry::matmul(x, w.t()).dtype(), low);
    // linear's bias add runs inside the op, in the low dtype, not promoted back by the bias.
    EXPECT_EQ(F::linear(x, w, b).dtype(), low);
    EXPECT_EQ(ferry::conv2d(img, k).dtype(), low);
    EXPECT_EQ(F::scaled_dot_product_attention(q, q, q, {}, 0.0, true).dtype(), low);
    // What follows a low op stays low: no policy, no cast.
    EXPECT_EQ(ferry::relu(F::linear(x, w, b)).dtype(), low);
    EXPECT_EQ((F::linear(x, w) + F::linear(x, w)).dtype(), low);
  }
}

TEST(Autocast, F32OpsWidenSixteenBitInputs) {
  const Tensor h = randn({3, 4}, DType::f16);
  const Tensor t = ferry::tensor(std::vector<std::int64_t>{0, 3, 1});
  ferry::Autocast amp("cpu", DType::f16);
  EXPECT_EQ(ferry::softmax(h, 1).dtype(), DType::f32);
  EXPECT_EQ(ferry::log_softmax(h, 1).dtype(), DType::f32);
  EXPECT_EQ(ferry::layer_norm(h, {4}).dtype(), DType::f32);
  EXPECT_EQ(F::group_norm(h.reshape({3, 4, 1}), 2).dtype(), DType::f32);
  EXPECT_EQ(ferry::sum(h).dtype(), DType::f32);
  EXPECT_EQ(ferry::cumsum(h, 0).dtype(), DType::f32);
  EXPECT_EQ(ferry::exp(h).dtype(), DType::f32);
  EXPECT_EQ(ferry::pow(h, 2).dtype(), DType::f32);
  EXPECT_EQ(F::mse_loss(h, h).dtype(), DType::f32);
  EXPECT_EQ(F::cross_entropy(h, t).dtype(), DType::f32);
  EXPECT_EQ(F::binary_cross_entropy_with_logits(h, ferry::sigmoid(h)).dtype(), DType::f32);
  // Ops without a policy keep their inputs' dtype.
  EXPECT_EQ(ferry::relu(h).dtype(), DType::f16);
  EXPECT_EQ(ferry::tanh(h).dtype(), DType::f16);
  EXPECT_EQ((h * h).dtype(), DType::f16);
  EXPECT_EQ(ferry::mean(h).dtype(), DType::f16);  // PyTorch's lists leave mean and var alone
  EXPECT_EQ(ferry::var(h).dtype(), DType::f16);
  EXPECT_EQ(ferry::max(h).dtype(), DType::f16);
  EXPECT_EQ(F::gelu(h).dtype(), DType::f16);
  EXPECT_EQ(F::dropout(h, 0.5).dtype(), DType::f16);
}

TEST(Autocast, PromoteOpsMeetAtTheWidestDtype) {
  const Tensor h = randn({5}, DType::f16), f = randn({5}), b = randn({5}, DType::bf16);
  ferry::Autocast amp("cpu", DType::f16);
  EXPECT_EQ(ferry::addcmul(h, h, f).dtype(), DType::f32);
  EXPECT_EQ(ferry::addcdiv(h, h, ferry::exp(f)).dtype(), DType::f32);
  EXPECT_EQ(ferry::atan2(h, b).dtype(), DType::f32);  // f16 and bf16 meet at f32
  EXPECT_EQ(ferry::addcmul(h, h, h).dtype(), DType::f16);
}

TEST(Autocast, BinaryCrossEntropyIsRefusedAndNamesTheSafeOne) {
  const Tensor p = ferry::sigmoid(randn({4})), y = ferry::rand({4});
  ferry::Autocast amp("cpu");
  try {
    F::binary_cross_entropy(p, y);
    FAIL() << "binary_cross_entropy ran under autocast";
  } catch (const ferry::Error& e) {
    EXPECT_NE(std::string(e.what()).find("binary_cross_entropy_with_logits"), std::string::npos)
        << e.what();
  }
  ferry::Autocast off("cpu", std::nullopt, false);
  EXPECT_EQ(F::binary_cross_entropy(p, y).dtype(), DType::f32);
}

TEST(Autocast, F64IntegersAndOtherDeviceTypesAreLeftAlone) {
  const Tensor d = randn({3, 3}, DType::f64), x = randn({3, 3});
  const Tensor i = ferry::tensor(std::vector<std::int64_t>{1, 2, 3, 4}).reshape({2, 2});
  {
    ferry::Autocast amp("cpu", DType::f16);
    EXPECT_EQ(ferry::matmul(d, d).dtype(), DType::f64);
    EXPECT_EQ(ferry::matmul(i, i).dtype(), DType::i64);
    EXPECT_EQ(ferry::sum(i).dtype(), DType::i64);
  }
  {
    ferry::Autocast amp("cuda", DType::f16);  // cpu tensors are not cast
    EXPECT_TRUE(ferry::is_autocast_enabled("cuda"));
    EXPECT_FALSE(ferry::is_autocast_enabled("cpu"));
    EXPECT_EQ(ferry::matmul(x, x).dtype(), DType::f32);
  }
  EXPECT_FALSE(ferry::is_autocast_enabled("cuda"));
}

TEST(Autocast, ScopesNestDisableAndRestore) {
  const Tensor x = randn({2, 2});
  EXPECT_EQ(ferry::autocast_dtype("cpu"), DType::bf16);  // PyTorch's defaults
  EXPECT_EQ(ferry::autocast_dtype("cuda"), DType::f16);
  {
    ferry::Autocast outer("cpu", DType::f16);
    EXPECT_EQ(ferry::matmul(x, x).dtype(), DType::f16);
    {
      ferry::Autocast inner("cpu", DType::bf16);
      EXPECT_EQ(ferry::matmul(x, x).dtype(), DType::bf16);
      {
        ferry::Autocast off("cpu", std::nullopt, false);
        EXPECT_EQ(ferry::matmul(x, x).dtype(), DType::f32);
      }
      EXPECT_EQ(ferry::autocast_dtype("cpu"), DType::bf16);
    }
    EXPECT_EQ(ferry::matmul(x, x).dtype(), DType::f16);
  }
  EXPECT_EQ(ferry::matmul(x, x).dtype(), DType::f32);
  EXPECT_EQ(ferry::autocast_target(ferry::OpId::matmul, "cpu", DType::f32), std::nullopt);
  ferry::Autocast amp("cpu", DType::f16);
  EXPECT_EQ(ferry::autocast_target(ferry::OpId::matmul, "cpu", DType::f32), DType::f16);
  EXPECT_EQ(ferry::autocast_target(ferry::OpId::softmax, "cpu", DType::f16), DType::f32);
  EXPECT_EQ(ferry::autocast_target(ferry::OpId::relu, "cpu", DType::f16), std::nullopt);
  EXPECT_EQ(ferry::autocast_target(ferry::OpId::matmul, "cpu", DType::f64), std::nullopt);
}

TEST(Autocast, BadArgumentsAreErrors) {
  EXPECT_THROW(ferry::Autocast("cpu", DType::f32), ferry::DTypeError);
  EXPECT_THROW(ferry::Autocast("cpu", DType::i32), ferry::DTypeError);
  EXPECT_THROW(ferry::Autocast(""), ferry::ValueError);
  EXPECT_FALSE(ferry::is_autocast_enabled("cpu"));  // a refused scope leaves nothing behind
}

// A two-layer MLP's loss in an autocast scope: gradients reach the f32 parameters as f32,
// close to the f32 run's (the forward rounds to bf16: 3 decimal digits).
TEST(Autocast, GradientsReachF32ParametersAsF32) {
  ferry::manual_seed(3);
  ferry::nn::Linear l1(16, 32), l2(32, 4);
  const Tensor x = randn({8, 16});
  const Tensor y = ferry::tensor(std::vector<std::int64_t>{0, 1, 2, 3, 0, 1, 2, 3});
  auto loss_fn = [&] { return F::cross_entropy(l2.forward(ferry::gelu(l1.forward(x))), y); };
  const std::vector<Tensor> params = {l1.weight, l1.bias, l2.weight, l2.bias};
  loss_fn().backward();
  std::vector<Tensor> want;
  for (const Tensor& p : params) want.push_back(p.grad().clone());
  for (const Tensor& p : params) p.set_grad(Tensor());
  Tensor loss;
  {
    ferry::Autocast amp("cpu", DType::bf16);
    loss = loss_fn();
  }
  EXPECT_EQ(loss.dtype(), DType::f32);
  loss.backward();
  for (std::size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined());
    EXPECT_EQ(params[i].grad().dtype(), DType::f32);
    EXPECT_TRUE(ferry::allclose(params[i].grad(), want[i], 0.05, 2e-3)) << "param " << i;
  }
}

// A weight used twice in one scope is cast once and its gradient sums both uses; the cache
// ends with the outermost scope, a weight written since its cast is cast again, and a cast
// made without gradients is never handed to an op that records them.
TEST(Autocast, ParameterCastsAreCachedPerScope) {
  Tensor w = randn({4, 4}).requires_grad_();
  const Tensor x = randn({2, 4});
  {
    ferry::Autocast amp("cpu", DType::f16);
    {
      ferry::NoGradGuard no_grad;
      EXPECT_FALSE(ferry::matmul(x, w).requires_grad());
    }
    const Tensor y = ferry::matmul(x, w) + ferry::matmul(x, w);
    EXPECT_TRUE(y.requires_grad());
    ferry::sum(y).backward();
  }
  const Tensor want = ferry::matmul(x.t(), ferry::ones({2, 4})) * 2;
  EXPECT_TRUE(ferry::allclose(w.grad(), want, 1e-2, 1e-2));
  Tensor before;
  {
    ferry::Autocast amp("cpu", DType::f16);
    before = ferry::matmul(x, w).detach();
  }
  {
    ferry::NoGradGuard no_grad;
    w.mul_(2.0);
  }
  ferry::Autocast amp("cpu", DType::f16);
  const Tensor after = ferry::matmul(x, w).detach();
  EXPECT_TRUE(ferry::allclose(after.to(DType::f32), before.to(DType::f32) * 2, 1e-2, 1e-2));
  // A write inside the scope (an optimizer step) is seen too: the cast is made again.
  {
    ferry::NoGradGuard no_grad;
    w.mul_(0.5);
  }
  const Tensor again = ferry::matmul(x, w).detach();
  EXPECT_TRUE(ferry::allclose(again.to(DType::f32), before.to(DType::f32), 1e-2, 1e-2));
}

// backward() inside the scope computes each gradient in its forward's dtypes, as outside it.
TEST(Autocast, BackwardInsideTheScopeMatchesOutside) {
  const Tensor x = randn({3, 5}).requires_grad_(), w = randn({5, 5}).requires_grad_();
  Tensor g_in, g_out;
  {
    ferry::Autocast amp("cpu", DType::bf16);
    ferry::sum(ferry::pow(ferry::softmax(ferry::matmul(x, w), 1), 2)).backward();
    g_in = w.grad().clone();
  }
  w.set_grad(Tensor());
  Tensor loss;
  {
    ferry::Autocast amp("cpu", DType::bf16);
    loss = ferry::sum(ferry::pow(ferry::softmax(ferry::matmul(x, w), 1), 2));
  }
  loss.backward();
  g_out = w.grad();
  EXPECT_EQ(g_in.dtype(), DType::f32);
  EXPECT_TRUE(ferry::equal(g_in, g_out));
}

// checkpoint recomputes under the autocast state of its first forward, so its gradients are
// those of the same forward without checkpointing, bit for bit.
TEST(Autocast, CheckpointRecomputesUnderTheForwardsScope) {
  ferry::manual_seed(5);
  ferry::nn::Linear lin(8, 8);
  const Tensor x = randn({4, 8}).requires_grad_();
  auto block = [&](const std::vector<Tensor>& in) {
    return ferry::softmax(lin.forward(ferry::gelu(lin.forward(in[0]))), 1);
  };
  Tensor plain, ckpt;
  {
    ferry::Autocast amp("cpu", DType::bf16);
    plain = block({x});
  }
  ferry::sum(ferry::pow(plain, 2)).backward();
  const Tensor gx = x.grad().clone(), gw = lin.weight.grad().clone();
  x.set_grad(Tensor());
  lin.weight.set_grad(Tensor());
  {
    ferry::Autocast amp("cpu", DType::bf16);
    ckpt = ferry::checkpoint(block, {x});
  }
  EXPECT_EQ(ckpt.dtype(), plain.dtype());
  ferry::sum(ferry::pow(ckpt, 2)).backward();
  EXPECT_TRUE(ferry::equal(x.grad(), gx));
  EXPECT_TRUE(ferry::equal(lin.weight.grad(), gw));
}

// The same policy on every device type: vulkan:0 and cuda:0 where they exist.
class AutocastOnDevice : public ::testing::TestWithParam<std::string> {};

TEST_P(AutocastOnDevice, TransformerBlockDtypes) {
  const std::string dev = GetParam();
  FERRY_SKIP_UNLESS_DEVICE(dev);
  const std::string type = ferry_test::backend_of(dev);
  const Tensor x = randn({2, 6, 8}, DType::f32, dev), w = randn({8, 8}, DType::f32, dev);
  ferry::Autocast amp(type, DType::f16);
  const Tensor h = F::linear(x, w);
  EXPECT_EQ(h.dtype(), DType::f16);
  const Tensor a = F::scaled_dot_product_attention(h.unsqueeze(1), h.unsqueeze(1), h.unsqueeze(1));
  EXPECT_EQ(a.dtype(), DType::f16);
  const Tensor n = ferry::layer_norm(a, {8});
  EXPECT_EQ(n.dtype(), DType::f32);
  EXPECT_EQ(ferry::softmax(a, -1).dtype(), DType::f32);
  EXPECT_EQ(ferry::sum(a).dtype(), DType::f32);
  const Tensor cpu_h = [&] {
    ferry::Autocast cpu_amp("cpu", DType::f16);
    return F::linear(x.cpu(), w.cpu());
  }();
  EXPECT_TRUE(ferry::allclose(h.cpu().to(DType::f32), cpu_h.to(DType::f32), 1e-2, 1e-2));
}

INSTANTIATE_TEST_SUITE_P(Devices, AutocastOnDevice,
                         ::testing::ValuesIn(ferry_test::accelerator_names()),
                         [](const auto& info) { return ferry_test::backend_of(info.param); });

}  // namespace
