// nn::Module's mechanics (Note [Module graph] in ferry/nn/module.hpp): registration and its
// errors, the names and order of every listing, weight tying (listed once, one gradient
// that is the sum of both uses), modes, zero_grad, the default forward and printing.
// state_dict and load_state_dict are tested in test_nn_state_dict.cpp.
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"
#include "op_test_util.hpp"

namespace {

namespace nn = ferry::nn;
using ferry::Tensor;
using ferry_test::as_double;
using ferry_test::expect_close;

template <typename Named> std::vector<std::string> names(const Named& list) {
  std::vector<std::string> out;
  for (const auto& e : list) out.push_back(e.first);
  return out;
}

// The ARCHITECTURE.md example, as written there.
struct Mlp : ferry::nn::Module {
  std::shared_ptr<ferry::nn::Linear> fc1, fc2;
  Mlp() {
    fc1 = register_module("fc1", std::make_shared<ferry::nn::Linear>(16, 32));
    fc2 = register_module("fc2", std::make_shared<ferry::nn::Linear>(32, 4));
  }
  ferry::Tensor forward(const ferry::Tensor& x) {
    return fc2->forward(ferry::gelu(fc1->forward(x)));
  }
};

// A block with its own parameter and buffers between children, to pin down the order.
struct Block : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::LayerNorm> norm;
  Tensor scale;
  Block() {
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
    scale = register_parameter("scale", ferry::ones({4}));
    register_buffer("steps", ferry::zeros({}));
    register_buffer("cache", ferry::zeros({2}), /*persistent=*/false);
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(ferry::Shape{4}));
  }
};

struct Net : nn::Module {
  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::ModuleList> blocks;
  std::shared_ptr<nn::BatchNorm1d> bn;
  std::shared_ptr<nn::Linear> head;
  Net() {
    embed = register_module("embed", std::make_shared<nn::Embedding>(10, 4));
    blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
    blocks->push_back(std::make_shared<Block>());
    blocks->push_back(std::make_shared<Block>());
    bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(4));
    head = register_module("head", std::make_shared<nn::Linear>(4, 3, /*bias=*/false));
  }
};

TEST(NnModule, ArchitectureExampleWorks) {
  ferry::manual_seed(42);
  Mlp model;
  EXPECT_EQ(names(model.named_parameters()),
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(model.fc1->weight.sizes(), (ferry::Shape{32, 16}));
  EXPECT_TRUE(model.fc1->weight.requires_grad());
  Tensor y = model.forward(ferry::randn({8, 16}));
  EXPECT_EQ(y.sizes(), (ferry::Shape{8, 4}));
  EXPECT_EQ(model.str(),
            "Mlp(\n"
            "  (fc1): Linear(in_features=16, out_features=32, bias=true)\n"
            "  (fc2): Linear(in_features=32, out_features=4, bias=true)\n"
            ")");
  std::ostringstream os;
  os << model;
  EXPECT_EQ(os.str(), model.str());
}

TEST(NnModule, ListingsArePreOrderInRegistrationOrder) {
  Net net;
  EXPECT_EQ(names(net.named_parameters()),
            (std::vector<std::string>{
                "embed.weight", "blocks.0.scale", "blocks.0.fc.weight", "blocks.0.fc.bias",
                "blocks.0.norm.weight", "blocks.0.norm.bias", "blocks.1.scale",
                "blocks.1.fc.weight", "blocks.1.fc.bias", "blocks.1.norm.weight",
                "blocks.1.norm.bias", "bn.weight", "bn.bias", "head.weight"}));
  EXPECT_EQ(net.parameters().size(), 14u);
  EXPECT_TRUE(net.parameters()[0].is_same(net.embed->weight));
  EXPECT_EQ(names(net.named_buffers()),
            (std::vector<std::string>{"blocks.0.steps", "blocks.0.cache", "blocks.1.steps",
                                      "blocks.1.cache", "bn.running_mean", "bn.running_var",
                                      "bn.num_batches_tracked"}));
  EXPECT_EQ(net.buffers().size(), 7u);
  EXPECT_EQ(
      names(net.named_modules()),
      (std::vector<std::string>{"", "embed", "blocks", "blocks.0", "blocks.0.fc", "blocks.0.norm",
                                "blocks.1", "blocks.1.fc", "blocks.1.norm", "bn", "head"}));
  EXPECT_EQ(net.modules().size(), 11u);
  EXPECT_EQ(net.modules()[0].get(), &net);  // self first, even on the stack
  EXPECT_EQ(names(net.named_children()),
            (std::vector<std::string>{"embed", "blocks", "bn", "head"}));
  EXPECT_EQ(net.children()[3].get(), net.head.get());
  // Without recursion: this module's own.
  auto& block = dynamic_cast<Block&>(*(*net.blocks)[0]);
  EXPECT_EQ(names(block.named_parameters(/*recurse=*/false)), (std::vector<std::string>{"scale"}));
  EXPECT_EQ(names(block.named_buffers(false)), (std::vector<std::string>{"steps", "cache"}));
  // Persistent buffers only, each module's parameters, then buffers, then children.
  EXPECT_EQ(net.state_dict().keys(),
            (std::vector<std::string>{
                "embed.weight", "blocks.0.scale", "blocks.0.steps", "blocks.0.fc.weight",
                "blocks.0.fc.bias", "blocks.0.norm.weight", "blocks.0.norm.bias", "blocks.1.scale",
                "blocks.1.steps", "blocks.1.fc.weight", "blocks.1.fc.bias", "blocks.1.norm.weight",
                "blocks.1.norm.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                "bn.num_batches_tracked", "head.weight"}));
  // Lookup of one name.
  EXPECT_TRUE(block.parameter("scale").is_same(block.scale));
  EXPECT_EQ(block.child("fc").get(), block.fc.get());
  EXPECT_FERRY_ERROR(block.parameter("nope"), ferry::Error, "no parameter 'nope'", "scale");
  EXPECT_FERRY_ERROR(block.buffer("nope"), ferry::Error, "steps, cache");
  EXPECT_FERRY_ERROR(block.child("nope"), ferry::Error, "fc, norm");
}

TEST(NnModule, SharedPtrRootListsItselfOwned) {
  auto net = std::make_shared<Net>();
  auto mods = net->named_modules();
  EXPECT_EQ(mods[0].second, std::static_pointer_cast<nn::Module>(net));
  EXPECT_EQ(net.use_count(), 2);  // the listing shares ownership
}

TEST(NnModule, RegistrationErrors) {
  nn::Module m;
  m.register_parameter("w", ferry::zeros({2}));
  m.register_buffer("b", ferry::zeros({2}));
  m.register_module("c", std::make_shared<nn::ReLU>());
  EXPECT_FERRY_ERROR(m.register_parameter("", ferry::zeros({1})), ferry::Error, "empty");
  EXPECT_FERRY_ERROR(m.register_parameter("a.b", ferry::zeros({1})), ferry::Error, "'a.b'", "'.'");
  EXPECT_FERRY_ERROR(m.register_buffer("x.y", ferry::zeros({1})), ferry::Error, "'x.y'");
  EXPECT_FERRY_ERROR(m.register_module("", std::make_shared<nn::ReLU>()), ferry::Error, "empty");
  EXPECT_FERRY_ERROR(m.register_parameter("w", ferry::zeros({1})), ferry::Error,
                     "already has a parameter named 'w'");
  EXPECT_FERRY_ERROR(m.register_parameter("b", ferry::zeros({1})), ferry::Error,
                     "already has a buffer named 'b'");
  EXPECT_FERRY_ERROR(m.register_buffer("c", ferry::zeros({1})), ferry::Error,
                     "already has a child module named 'c'");
  EXPECT_FERRY_ERROR(m.register_module("w", std::make_shared<nn::ReLU>()), ferry::Error,
                     "already has a parameter named 'w'");
  EXPECT_FERRY_ERROR(m.register_module("n", std::shared_ptr<nn::ReLU>()), ferry::Error, "null");
  EXPECT_FERRY_ERROR(m.register_parameter("u", Tensor()), ferry::Error, "undefined");
  EXPECT_FERRY_ERROR(m.register_buffer("u", Tensor()), ferry::Error, "undefined");
  EXPECT_FERRY_ERROR(m.register_parameter("i", ferry::zeros({1}, {.dtype = ferry::DType::i64})),
                     ferry::DTypeError, "i64");
  Tensor leaf = ferry::ones({2}).requires_grad_();
  EXPECT_FERRY_ERROR(m.register_parameter("nl", leaf * 2.0f), ferry::Error, "not a leaf", "detach");
  auto self = std::make_shared<nn::Module>();
  EXPECT_FERRY_ERROR(self->register_module("me", self), ferry::Error, "itself");
  // A failed registration added nothing.
  EXPECT_EQ(names(m.named_parameters()), (std::vector<std::string>{"w"}));
  EXPECT_EQ(m.named_children().size(), 1u);
  // An integer buffer, or one that should not be trained, is fine.
  m.register_parameter("frozen", ferry::zeros({2}), /*requires_grad=*/false);
  EXPECT_FALSE(m.parameter("frozen").requires_grad());
}

// Two modules that use one tensor: y = x1·w (module a) and x2·w (module b).
struct Scale : nn::Module {
  Tensor w;
  explicit Scale(Tensor shared) { w = register_parameter("w", std::move(shared)); }
  Tensor forward(const Tensor& x) override { return x * w; }
};

struct Tied : nn::Module {
  std::shared_ptr<Scale> a, b;
  explicit Tied(Tensor w) {
    a = register_module("a", std::make_shared<Scale>(w));
    b = register_module("b", std::make_shared<Scale>(w));
  }
};

TEST(NnModule, TiedWeightIsListedOnceAndGetsTheSumOfBothGradients) {
  Tied m(ferry::tensor(std::vector<float>{1, 2, 3}));
  EXPECT_TRUE(m.a->w.is_same(m.b->w));
  EXPECT_EQ(names(m.named_parameters()), (std::vector<std::string>{"a.w"}));
  EXPECT_EQ(m.parameters().size(), 1u);
  EXPECT_EQ(m.state_dict().keys(), (std::vector<std::string>{"a.w", "b.w"}));
  const Tensor x1 = ferry::tensor(std::vector<float>{1, -1, 2});
  const Tensor x2 = ferry::tensor(std::vector<float>{10, 20, 30});
  ferry::sum(m.a->forward(x1) + m.b->forward(x2)).backward();
  // d/dw Σ(x1·w + x2·w) = x1 + x2, one gradient on the one tensor.
  expect_close(as_double(m.b->w.grad()), {11, 19, 32}, 0, 0);
  EXPECT_TRUE(m.parameters()[0].grad().is_same(m.a->w.grad()));
}

TEST(NnModule, TiedLinearLayersMatchTheSumOfTwoUntiedCopies) {
  // decoder(encoder(x)) with decoder.weight = encoder.weight, against two independent copies.
  ferry::manual_seed(3);
  auto enc = std::make_shared<nn::Linear>(3, 3);
  auto dec = std::make_shared<nn::Linear>(3, 3, /*bias=*/false);
  dec->weight = dec->replace_parameter("weight", enc->weight);
  nn::Sequential tied(enc, dec);
  EXPECT_EQ(names(tied.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
  EXPECT_EQ(tied.state_dict().keys(), (std::vector<std::string>{"0.weight", "0.bias", "1.weight"}));

  auto enc2 = std::make_shared<nn::Linear>(3, 3);
  auto dec2 = std::make_shared<nn::Linear>(3, 3, false);
  {
    ferry::NoGradGuard no_grad;
    enc2->weight.copy_(enc->weight);
    enc2->bias.copy_(enc->bias);
    dec2->weight.copy_(enc->weight);
  }
  const Tensor x = ferry_test::sample_tensor({4, 3}, -1, 1);
  const Tensor r = ferry_test::sample_tensor({4, 3}, -1, 1, 5);
  ferry::sum(tied.forward(x) * r).backward();
  ferry::sum(dec2->forward(enc2->forward(x)) * r).backward();
  expect_close(as_double(enc->weight.grad()), as_double(enc2->weight.grad() + dec2->weight.grad()),
               1e-5, 1e-6, "tied gradient");
  expect_close(as_double(enc->bias.grad()), as_double(enc2->bias.grad()), 1e-5, 1e-6);
  EXPECT_FERRY_ERROR(dec->replace_parameter("bias", enc->bias), ferry::Error, "no parameter 'bias'",
                     "register_parameter");
}

TEST(NnModule, ModuleUnderTwoParentsIsListedOnce) {
  struct Holder : nn::Module {
    explicit Holder(std::shared_ptr<nn::Module> m) { register_module("inner", std::move(m)); }
  };
  auto shared = std::make_shared<nn::Linear>(2, 2);
  nn::Module root;
  root.register_module("first", std::make_shared<Holder>(shared));
  root.register_module("second", std::make_shared<Holder>(shared));
  root.register_module("direct", shared);
  EXPECT_EQ(names(root.named_modules()),
            (std::vector<std::string>{"", "first", "first.inner", "second"}));
  EXPECT_EQ(names(root.named_parameters()),
            (std::vector<std::string>{"first.inner.weight", "first.inner.bias"}));
  EXPECT_EQ(
      root.state_dict().keys(),
      (std::vector<std::string>{"first.inner.weight", "first.inner.bias", "second.inner.weight",
                                "second.inner.bias", "direct.weight", "direct.bias"}));
  // Loading through any one of the three paths is complete.
  ferry::StateDict sd;
  sd.insert("second.inner.weight", ferry::full({2, 2}, 0.5f));
  sd.insert("direct.bias", ferry::full({2}, -1.0f));
  EXPECT_TRUE(root.load_state_dict(sd).empty());
  expect_close(as_double(shared->weight), {0.5, 0.5, 0.5, 0.5}, 0, 0);
  expect_close(as_double(shared->bias), {-1, -1}, 0, 0);
}

TEST(NnModule, TrainAndEvalPropagate) {
  Net net;
  for (const auto& m : net.modules()) EXPECT_TRUE(m->is_training());
  EXPECT_EQ(&net.eval(), &net);
  for (const auto& [name, m] : net.named_modules()) EXPECT_FALSE(m->is_training()) << name;
  net.blocks->train();
  EXPECT_FALSE(net.is_training());
  EXPECT_TRUE((*net.blocks)[1]->is_training());
  EXPECT_TRUE(dynamic_cast<Block&>(*(*net.blocks)[1]).fc->is_training());
  EXPECT_FALSE(net.bn->is_training());
  net.train(true);
  for (const auto& m : net.modules()) EXPECT_TRUE(m->is_training());
}

TEST(NnModule, ZeroGradClearsOrZeroes) {
  nn::Linear fc(3, 2);
  ferry::sum(fc.forward(ferry::ones({4, 3}))).backward();
  ASSERT_TRUE(fc.weight.grad().defined());
  const Tensor g = fc.weight.grad();
  fc.zero_grad(/*set_to_none=*/false);
  EXPECT_TRUE(fc.weight.grad().is_same(g));  // the same tensor, zeroed in place
  expect_close(as_double(g), std::vector<double>(6, 0.0), 0, 0);
  expect_close(as_double(fc.bias.grad()), {0, 0}, 0, 0);
  fc.zero_grad();
  EXPECT_FALSE(fc.weight.grad().defined());
  EXPECT_FALSE(fc.bias.grad().defined());
  fc.zero_grad();  // nothing to clear is fine
}

TEST(NnModule, DefaultForwardNamesTheModule) {
  nn::ModuleList list;
  EXPECT_FERRY_ERROR(list.forward(ferry::ones({1})), ferry::UnsupportedError, "ModuleList",
                     "forward");
  nn::Sequential seq(std::make_shared<nn::ReLU>(), std::make_shared<nn::ModuleList>());
  EXPECT_FERRY_ERROR(seq.forward(ferry::ones({1})), ferry::UnsupportedError, "ModuleList");
  nn::MSELoss loss;
  EXPECT_FERRY_ERROR(loss.forward(ferry::ones({1})), ferry::UnsupportedError, "MSELoss");
}

TEST(NnModule, SequentialChainsAndModuleListHolds) {
  ferry::manual_seed(1);
  auto l1 = std::make_shared<nn::Linear>(3, 5);
  auto l2 = std::make_shared<nn::Linear>(5, 2);
  nn::Sequential seq(l1, std::make_shared<nn::Dropout>(0.0), l2);
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(names(seq.named_children()), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(seq[2].get(), l2.get());
  EXPECT_FERRY_ERROR(seq[3], ferry::Error, "Sequential[3]", "3 module");
  const Tensor x = ferry_test::sample_tensor({2, 3});
  expect_close(as_double(seq.forward(x)), as_double(l2->forward(l1->forward(x))), 0, 0);
  nn::Sequential empty;
  EXPECT_TRUE(empty.forward(x).is_same(x));

  nn::ModuleList list({std::make_shared<nn::ReLU>(), std::make_shared<nn::Tanh>()});
  list.push_back(std::make_shared<nn::Sigmoid>());
  EXPECT_EQ(list.size(), 3u);
  std::vector<std::string> kinds;
  for (const auto& m : list) kinds.push_back(m->name());
  EXPECT_EQ(kinds, (std::vector<std::string>{"ReLU", "Tanh", "Sigmoid"}));
  EXPECT_EQ(names(list.named_children()), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_FERRY_ERROR(list[7], ferry::Error, "ModuleList[7]");
}

template <typename T> struct Wrapper : nn::Module {};

TEST(NnModule, PrintsLikePyTorch) {
  nn::Sequential seq(
      std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::GELU>("tanh"),
      std::make_shared<nn::Dropout>(0.25),
      std::make_shared<nn::Sequential>(std::make_shared<nn::LayerNorm>(ferry::Shape{8}),
                                       std::make_shared<nn::BatchNorm1d>(8)),
      std::make_shared<nn::Embedding>(10, 3), std::make_shared<nn::ReLU>());
  EXPECT_EQ(seq.str(),
            "Sequential(\n"
            "  (0): Linear(in_features=4, out_features=8, bias=true)\n"
            "  (1): GELU(approximate='tanh')\n"
            "  (2): Dropout(p=0.25, inplace=false)\n"
            "  (3): Sequential(\n"
            "    (0): LayerNorm((8,), eps=1e-05, elementwise_affine=true)\n"
            "    (1): BatchNorm1d(8, eps=1e-05, momentum=0.1, affine=true, "
            "track_running_stats=true)\n"
            "  )\n"
            "  (4): Embedding(10, 3)\n"
            "  (5): ReLU()\n"
            ")");
  EXPECT_EQ(nn::BatchNorm1d(2, 1e-3, std::nullopt).str(),
            "BatchNorm1d(2, eps=0.001, momentum=None, affine=true, track_running_stats=true)");
  EXPECT_EQ(nn::CrossEntropyLoss().str(), "CrossEntropyLoss()");
  EXPECT_EQ(nn::Module().str(), "Module()");
  EXPECT_EQ(Wrapper<nn::Linear>().name(), "Wrapper<ferry::nn::Linear>");
  EXPECT_EQ(Block().name(), "Block");
}

}  // namespace
