// Module::state_dict and load_state_dict (Note [Loading a state dict] in
// runtime/nn/module_state.cpp): what state_dict holds, strict and non-strict loads, the
// errors that list every offending key, all-or-nothing loads, tied keys, and loads that
// convert dtype and device while every tensor keeps its identity.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"
#include "op_test_util.hpp"

namespace {

namespace nn = ferry::nn;
using ferry::DType;
using ferry::Tensor;
using ferry_test::as_double;
using ferry_test::expect_close;

struct Small : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::BatchNorm1d> bn;
  Small() {
    fc = register_module("fc", std::make_shared<nn::Linear>(3, 2));
    bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(2));
  }
};

// Every tensor of the state dict as host values, to see that a failed load changed nothing.
std::vector<std::vector<double>> snapshot(const nn::Module& m) {
  std::vector<std::vector<double>> out;
  for (const auto& [name, t] : m.state_dict()) out.push_back(as_double(t));
  return out;
}

ferry::StateDict filled(const nn::Module& m, float value) {
  ferry::StateDict sd;
  for (const auto& [name, t] : m.state_dict())
    sd.insert(name, ferry::full(t.sizes(), value, {.dtype = t.dtype()}));
  return sd;
}

TEST(NnStateDict, HoldsDetachedHandlesSharingMemory) {
  Small m;
  ferry::StateDict sd = m.state_dict();
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"fc.weight", "fc.bias", "bn.weight", "bn.bias",
                                                 "bn.running_mean", "bn.running_var",
                                                 "bn.num_batches_tracked"}));
  const Tensor& w = sd.at("fc.weight");
  EXPECT_EQ(w.storage(), m.fc->weight.storage());
  EXPECT_FALSE(w.requires_grad());
  EXPECT_EQ(sd.at("bn.num_batches_tracked").dtype(), DType::i64);
  EXPECT_EQ(sd.at("bn.num_batches_tracked").dim(), 0);
}

TEST(NnStateDict, RoundTripKeepsIdentity) {
  ferry::manual_seed(1);
  Small a;
  ferry::manual_seed(2);
  Small b;
  const std::vector<Tensor> held = b.parameters();  // what an optimizer would hold
  const Tensor grad_holder = b.fc->weight;
  EXPECT_TRUE(b.load_state_dict(a.state_dict()).empty());
  EXPECT_EQ(snapshot(b), snapshot(a));
  const std::vector<Tensor> after = b.parameters();
  ASSERT_EQ(after.size(), held.size());
  for (std::size_t i = 0; i < held.size(); ++i) EXPECT_TRUE(after[i].is_same(held[i]));
  expect_close(as_double(held[0]), as_double(a.fc->weight), 0, 0);
  EXPECT_TRUE(b.fc->weight.requires_grad());
  // Loading a model's own state dict into itself is harmless.
  EXPECT_TRUE(b.load_state_dict(b.state_dict()).empty());
  EXPECT_EQ(snapshot(b), snapshot(a));
}

TEST(NnStateDict, LoadsFromAnotherModelsLiveParameters) {
  // Tensors that require grad (not detached) load too: the copy is made without history.
  ferry::manual_seed(3);
  nn::Linear a(3, 2);
  nn::Linear b(3, 2);
  ferry::StateDict live;
  for (const auto& [name, t] : a.named_parameters()) live.insert(name, t);
  EXPECT_TRUE(b.load_state_dict(live).empty());
  expect_close(as_double(b.weight), as_double(a.weight), 0, 0);
  EXPECT_TRUE(b.weight.is_leaf());
  EXPECT_FALSE(b.weight.storage() == a.weight.storage());
}

TEST(NnStateDict, StrictListsEveryMissingAndUnexpectedKeyAndChangesNothing) {
  Small m;
  const auto before = snapshot(m);
  ferry::StateDict sd = filled(m, 7);
  sd.erase("fc.bias");
  sd.erase("bn.running_var");
  sd.insert("fc.extra", ferry::zeros({1}));
  sd.insert("head.weight", ferry::zeros({1}));
  EXPECT_FERRY_ERROR(m.load_state_dict(sd), ferry::Error, "missing keys", "'fc.bias'",
                     "'bn.running_var'", "unexpected keys", "'fc.extra'", "'head.weight'",
                     "strict=false", "nothing was loaded");
  EXPECT_EQ(snapshot(m), before);

  nn::IncompatibleKeys r = m.load_state_dict(sd, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"fc.bias", "bn.running_var"}));
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"fc.extra", "head.weight"}));
  expect_close(as_double(m.fc->weight), std::vector<double>(6, 7.0), 0, 0);
  EXPECT_EQ(m.bn->num_batches_tracked.item<std::int64_t>(), 7);
  EXPECT_EQ(as_double(m.fc->bias), before[1]);  // missing: left as it was
}

TEST(NnStateDict, MisShapedEntriesAreRefusedStrictOrNot) {
  Small m;
  const auto before = snapshot(m);
  ferry::StateDict sd = filled(m, 3);
  sd.insert_or_assign("fc.weight", ferry::zeros({3, 2}));
  sd.insert_or_assign("bn.running_mean", ferry::zeros({5}));
  for (bool strict : {true, false}) {
    EXPECT_FERRY_ERROR(m.load_state_dict(sd, strict), ferry::ShapeError, "'fc.weight'", "[2, 3]",
                       "[3, 2]", "'bn.running_mean'", "[2]", "[5]", "nothing was loaded");
    EXPECT_EQ(snapshot(m), before) << "strict=" << strict;
  }
  // A 0-d entry must stay 0-d.
  ferry::StateDict nbt = filled(m, 1);
  nbt.insert_or_assign("bn.num_batches_tracked", ferry::zeros({1}, {.dtype = DType::i64}));
  EXPECT_FERRY_ERROR(m.load_state_dict(nbt), ferry::ShapeError, "'bn.num_batches_tracked'", "[]");
  ferry::StateDict undefined = filled(m, 1);
  undefined.insert_or_assign("fc.bias", Tensor());
  EXPECT_FERRY_ERROR(m.load_state_dict(undefined), ferry::Error, "'fc.bias'", "undefined");
  EXPECT_EQ(snapshot(m), before);
}

TEST(NnStateDict, TiedKeysLoadFromEitherNameOrBoth) {
  struct Lm : nn::Module {
    std::shared_ptr<nn::Embedding> embed;
    std::shared_ptr<nn::Linear> head;
    Lm() {
      embed = register_module("embed", std::make_shared<nn::Embedding>(4, 2));
      head = register_module("head", std::make_shared<nn::Linear>(2, 4, /*bias=*/false));
      head->weight = head->replace_parameter("weight", embed->weight);
    }
  };
  Lm m;
  EXPECT_EQ(m.state_dict().keys(), (std::vector<std::string>{"embed.weight", "head.weight"}));
  EXPECT_EQ(m.parameters().size(), 1u);
  for (const char* key : {"embed.weight", "head.weight"}) {
    ferry::StateDict sd;
    sd.insert(key, ferry::full({4, 2}, 2.5f));
    EXPECT_TRUE(m.load_state_dict(sd).empty()) << key;
    expect_close(as_double(m.head->weight), std::vector<double>(8, 2.5), 0, 0, key);
    EXPECT_TRUE(m.head->weight.is_same(m.embed->weight));
  }
  ferry::StateDict both;
  both.insert("embed.weight", ferry::full({4, 2}, 1.0f));
  both.insert("head.weight", ferry::full({4, 2}, 1.0f));
  EXPECT_TRUE(m.load_state_dict(both).empty());
  expect_close(as_double(m.embed->weight), std::vector<double>(8, 1.0), 0, 0);
  // Neither name: the tie is missing under both.
  EXPECT_EQ(m.load_state_dict(ferry::StateDict(), false).missing_keys,
            (std::vector<std::string>{"embed.weight", "head.weight"}));
  // A mis-shaped alias is refused even when the other name is right.
  ferry::StateDict bad;
  bad.insert("embed.weight", ferry::full({4, 2}, 9.0f));
  bad.insert("head.weight", ferry::full({2, 4}, 9.0f));
  EXPECT_FERRY_ERROR(m.load_state_dict(bad), ferry::ShapeError, "'head.weight'");
  expect_close(as_double(m.embed->weight), std::vector<double>(8, 1.0), 0, 0);
}

TEST(NnStateDict, ConvertsDTypesAndKeepsTheModules) {
  Small m;
  const Tensor w = m.fc->weight;
  ferry::StateDict sd;
  for (const auto& [name, t] : m.state_dict()) {
    if (t.dtype() == DType::i64) {  // num_batches_tracked, from an i32
      sd.insert(name, ferry::scalar_tensor(12, {.dtype = DType::i32}));
      continue;
    }
    sd.insert(name, ferry::full(t.sizes(), 0.5,
                                {.dtype = name == "bn.weight" ? DType::f16 : DType::f64}));
  }
  EXPECT_TRUE(m.load_state_dict(sd).empty());
  EXPECT_TRUE(m.fc->weight.is_same(w));
  for (const auto& [name, t] : m.state_dict())
    EXPECT_EQ(t.dtype(), name == "bn.num_batches_tracked" ? DType::i64 : DType::f32) << name;
  expect_close(as_double(m.fc->weight), std::vector<double>(6, 0.5), 0, 0);
  expect_close(as_double(m.bn->weight), {0.5, 0.5}, 0, 0);
  EXPECT_EQ(m.bn->num_batches_tracked.item<std::int64_t>(), 12);
}

TEST(NnStateDict, LoadsAcrossDevices) {
  if (!ferry::is_available("vulkan:0")) GTEST_SKIP() << "no Vulkan device";
  const ferry::Device gpu("vulkan:0");
  ferry::manual_seed(5);
  Small cpu_model;
  // CPU state into a module on the GPU: the tensors stay on the GPU.
  auto gpu_fc = std::make_shared<nn::Linear>(3, 2, true, ferry::TensorOptions{.device = gpu});
  const Tensor gw = gpu_fc->weight;
  EXPECT_TRUE(gpu_fc->load_state_dict(cpu_model.fc->state_dict()).empty());
  EXPECT_TRUE(gpu_fc->weight.is_same(gw));
  EXPECT_EQ(gpu_fc->weight.device(), gpu);
  expect_close(as_double(gpu_fc->weight), as_double(cpu_model.fc->weight), 0, 0);
  // And back: a GPU state dict into the CPU module.
  ferry::manual_seed(6);
  nn::Linear fresh(3, 2);
  EXPECT_TRUE(fresh.load_state_dict(gpu_fc->state_dict()).empty());
  EXPECT_TRUE(fresh.weight.device().is_cpu());
  expect_close(as_double(fresh.bias), as_double(cpu_model.fc->bias), 0, 0);
  // An f64 checkpoint (a CPU-only dtype) loads into f32 tensors on the GPU.
  ferry::StateDict f64;
  f64.insert("weight", ferry::full({2, 3}, 0.25, {.dtype = DType::f64}));
  f64.insert("bias", ferry::full({2}, -0.5, {.dtype = DType::f64}));
  EXPECT_TRUE(gpu_fc->load_state_dict(f64).empty());
  EXPECT_EQ(gpu_fc->weight.dtype(), DType::f32);
  EXPECT_EQ(gpu_fc->weight.device(), gpu);
  expect_close(as_double(gpu_fc->weight), std::vector<double>(6, 0.25), 0, 0);
  // The GPU module trains after the load (its parameters are still leaves).
  ferry::sum(gpu_fc->forward(ferry::ones({2, 3}, {.device = gpu}))).backward();
  EXPECT_EQ(gpu_fc->weight.grad().device(), gpu);
  expect_close(as_double(gpu_fc->bias.grad()), {2, 2}, 0, 0);
}

TEST(NnStateDict, SafetensorsRoundTrip) {
  ferry::manual_seed(11);
  Small a;
  const std::string path =
      (std::filesystem::temp_directory_path() / "ferry_nn_state_dict_test.safetensors").string();
  ferry::save_safetensors(path, a.state_dict());
  ferry::manual_seed(12);
  Small b;
  EXPECT_TRUE(b.load_state_dict(ferry::load_safetensors(path)).empty());
  std::remove(path.c_str());
  EXPECT_EQ(snapshot(b), snapshot(a));
}

}  // namespace
