// tests/test_transfer.cpp — the transfer planner (ferry/transfer.hpp): unique
// storages, ties and views, arenas, dtype conversion, the capacity check,
// all-or-nothing under an injected failure at every allocation and copy
// (Note [Failure injection] in ferry/backend.hpp: CPU, Vulkan, testdev), and
// training that goes on after a migration, compared step by step with a twin
// that never moved.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "optim_test_util.hpp"
#include "transfer/arena_packing.hpp"

namespace {

using ferry::Device;
using ferry::DType;
using ferry::Tensor;
namespace nn = ferry::nn;

// Linear -> BatchNorm1d -> ReLU -> Linear whose weight is tied to a third
// module's, so the model has a tie, f32 parameters and buffers and an i64 buffer.
struct Model : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, twin;
  std::shared_ptr<nn::BatchNorm1d> bn;
  explicit Model(const Device& d) {
    fc1 = register_module(
        "fc1", std::make_shared<nn::Linear>(6, 8, true, ferry::TensorOptions{.device = d}));
    bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(
                                   8, 1e-5, 0.1, true, true, ferry::TensorOptions{.device = d}));
    fc2 = register_module(
        "fc2", std::make_shared<nn::Linear>(8, 8, true, ferry::TensorOptions{.device = d}));
    twin = register_module(
        "twin", std::make_shared<nn::Linear>(8, 8, false, ferry::TensorOptions{.device = d}));
    twin->weight = twin->replace_parameter("weight", fc2->weight);  // tied
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = ferry::relu(bn->forward(fc1->forward(x)));
    return twin->forward(fc2->forward(h));
  }
};

// Every distinct tensor a migration of (model, optimizer) moves, by name.
std::vector<std::pair<std::string, Tensor>> all_tensors(nn::Module& m, ferry::optim::Optimizer& o) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [n, p] : m.named_parameters()) {
    out.emplace_back(n, p);
    if (p.grad().defined()) out.emplace_back(n + ".grad", p.grad());
  }
  for (auto& [n, b] : m.named_buffers()) out.emplace_back(n, b);
  for (auto& [n, t] : o.named_state()) out.emplace_back(n, t);
  return out;
}

// The bytes of a tensor, read on the host.
std::vector<std::uint8_t> bytes_of(const Tensor& t) {
  Tensor c = t.cpu().contiguous();
  std::vector<std::uint8_t> b(std::size_t(c.numel()) * c.element_size());
  if (!b.empty()) {
    Tensor flat = c.flatten();
    // Read through to_vector: independent of the planner.
    switch (c.dtype()) {
      case DType::f32: {
        auto v = flat.to_vector<float>();
        std::memcpy(b.data(), v.data(), b.size());
        break;
      }
      case DType::i64: {
        auto v = flat.to_vector<std::int64_t>();
        std::memcpy(b.data(), v.data(), b.size());
        break;
      }
      default:
        ADD_FAILURE() << "bytes_of: unexpected dtype " << ferry::dtype_name(c.dtype());
    }
  }
  return b;
}

struct Snapshot {
  std::map<std::string, std::vector<std::uint8_t>> bytes;
  std::map<std::string, std::string> devices;
  std::map<std::string, const ferry::Storage*> storages;
};

Snapshot snapshot(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  Snapshot s;
  for (const auto& [n, t] : tensors) {
    s.bytes[n] = bytes_of(t);
    s.devices[n] = t.device().str();
    s.storages[n] = t.storage().get();
  }
  return s;
}

void expect_same(const Snapshot& a, const Snapshot& b, bool same_device) {
  for (const auto& [n, v] : a.bytes) {
    EXPECT_EQ(v, b.bytes.at(n)) << n << " changed";
    EXPECT_EQ(a.storages.at(n), b.storages.at(n)) << n << " has another storage";
    if (same_device) EXPECT_EQ(a.devices.at(n), b.devices.at(n)) << n << " moved";
  }
}

// A model trained two steps, so that it has gradients and Adam state.
struct Trained {
  std::shared_ptr<Model> model;
  std::unique_ptr<ferry::optim::Adam> opt;
  Tensor x, y;
};

Trained trained(const Device& d, int steps = 2) {
  ferry::manual_seed(7);
  Trained t;
  t.model = std::make_shared<Model>(d);
  t.opt = std::make_unique<ferry::optim::Adam>(t.model->parameters(),
                                               ferry::optim::AdamOptions{.lr = 1e-2});
  t.x = ferry::randn({16, 6}, {.device = d});
  t.y = ferry::randint(0, 8, {16}, {.device = d});
  for (int i = 0; i < steps; ++i) {
    t.opt->zero_grad();
    nn::functional::cross_entropy(t.model->forward(t.x), t.y).backward();
    t.opt->step();
  }
  return t;
}

float train_step(Trained& t) {
  t.opt->zero_grad();
  Tensor loss = nn::functional::cross_entropy(t.model->forward(t.x), t.y);
  loss.backward();
  t.opt->step();
  return loss.item<float>();
}

// ---------------------------------------------------------------- planning

// Note [Arena packing], which lays out the planner's arenas and DDP's buckets, by hand.
TEST(Transfer, ArenaPackingFollowsTheNote) {
  ferry::detail::ArenaPacker packer(1000, 256);
  auto at = [&](std::uint64_t bytes, bool fresh = false) {
    const auto slot = packer.place(bytes, fresh);
    return std::pair{slot.arena, slot.offset};
  };
  EXPECT_EQ(at(100), (std::pair<std::size_t, std::uint64_t>{0, 0}));
  EXPECT_EQ(at(100), (std::pair<std::size_t, std::uint64_t>{0, 256}));  // rounded up
  EXPECT_EQ(at(700), (std::pair<std::size_t, std::uint64_t>{1, 0}));    // 512 + 700 > 1000
  EXPECT_EQ(at(5000), (std::pair<std::size_t, std::uint64_t>{2, 0}));   // past the cap: alone
  EXPECT_EQ(at(1), (std::pair<std::size_t, std::uint64_t>{3, 0}));
  EXPECT_EQ(at(1, true), (std::pair<std::size_t, std::uint64_t>{4, 0}));  // may not share
  EXPECT_EQ(packer.arena_bytes(), (std::vector<std::uint64_t>{512, 768, 5120, 256, 256}));
  ferry::detail::ArenaPacker unlimited(0, 1);  // cap 0: no limit
  for (int i = 0; i < 3; ++i) unlimited.place(std::uint64_t(1) << 40);
  EXPECT_EQ(unlimited.arena_bytes(), (std::vector<std::uint64_t>{std::uint64_t(3) << 40}));
}

TEST(Transfer, FindsTiesViewsAndUniqueStorages) {
  Tensor a = ferry::randn({4, 4});
  Tensor v = a.narrow(0, 1, 2);  // a view of a
  Tensor b = ferry::randn({3});
  auto plan = ferry::plan_migration({{"a", a}, {"a_again", a}, {"v", v}, {"b", b}}, Device::cpu(),
                                    {.dtype = DType::f16});
  EXPECT_EQ(plan.num_tensors(), 3u);
  EXPECT_EQ(plan.num_storages(), 2u);
  std::string e = plan.explain();
  EXPECT_NE(e.find("a_again is a (tied)"), std::string::npos) << e;
  EXPECT_NE(e.find("v shares the storage of a (view)"), std::string::npos) << e;
  EXPECT_NE(e.find("cpu -> cpu: 2 storages (2 converted)"), std::string::npos) << e;
}

TEST(Transfer, BadInputIsRefusedBeforeAnything) {
  Tensor a = ferry::randn({4});
  EXPECT_THROW(ferry::plan_migration({{"a", a}}, Device::cpu(), {.dtype = DType::i32}),
               ferry::DTypeError);
  EXPECT_THROW(ferry::plan_migration({{"u", Tensor()}}, Device::cpu()), ferry::Error);
  EXPECT_THROW(ferry::plan_migration({{"a", a}}, Device::cpu(), {.staging_bytes = 1024}),
               ferry::Error);
  EXPECT_THROW(ferry::plan_migration({{"a", a}}, Device("vulkan:99")), ferry::DeviceError);
}

TEST(Transfer, DTypeConversionKeepsIntegersAndTies) {
  Trained t = trained(Device::cpu());
  Tensor w = t.model->fc2->weight;
  std::vector<float> before = w.to_vector<float>();
  Tensor nbt = t.model->bn->buffer("num_batches_tracked");
  t.model->to(DType::f16);
  EXPECT_EQ(w.dtype(), DType::f16) << "the handle taken before sees the conversion";
  EXPECT_TRUE(t.model->twin->weight.is_same(t.model->fc2->weight));
  EXPECT_EQ(t.model->twin->parameter("weight").dtype(), DType::f16);
  EXPECT_EQ(nbt.dtype(), DType::i64);
  EXPECT_EQ(nbt.item<std::int64_t>(), 2);
  std::vector<float> after = w.to_vector<float>();
  std::vector<float> expect = ferry::tensor(before).to(DType::f16).to_vector<float>();
  EXPECT_EQ(after, expect);
  EXPECT_EQ(t.model->fc1->weight.grad().dtype(), DType::f16);
}

// ---------------------------------------------------------------- execution

const std::string kTestdevModule =
    std::string(FERRY_TEST_PLUGIN_DIR) + "/libferry_backend_testdev.so";

bool load_testdev() {
  if (!std::filesystem::exists(kTestdevModule)) return false;
  ferry::load_backend_module(kTestdevModule);  // a no-op when loaded already
  return ferry::is_available("testdev:1");
}

struct ScopedEnv {
  std::string name;
  ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) {
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

// Destinations: vulkan:0 and cuda:0 (an arena per move) and testdev:0 (no
// sub-buffers, no host access: separate allocations through host staging).
class TransferTo : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam().rfind("testdev", 0) == 0) {
      ASSERT_TRUE(load_testdev()) << kTestdevModule;
    } else {
      FERRY_SKIP_UNLESS_DEVICE(GetParam());
    }
  }
};

TEST_P(TransferTo, ModelAndOptimizerMoveBitForBitAndBack) {
  const Device dev(GetParam());
  Trained t = trained(Device::cpu());
  auto tensors = all_tensors(*t.model, *t.opt);
  Snapshot before = snapshot(tensors);
  Tensor view = t.model->fc1->weight.narrow(0, 0, 2);  // not listed: follows its storage

  auto plan = ferry::plan_migration(*t.model, *t.opt, dev, {.staging_bytes = 64 << 10});
  ferry::MigrationReport r = plan.execute();
  EXPECT_EQ(r.bytes, plan.bytes());
  ASSERT_EQ(r.pairs.size(), 1u) << r.str();
  for (const auto& [n, x] : tensors) EXPECT_EQ(x.device(), dev) << n;
  EXPECT_EQ(view.device(), dev);
  EXPECT_TRUE(t.model->twin->weight.is_same(t.model->fc2->weight));
  expect_same(before, snapshot(tensors), false);
  EXPECT_THROW(plan.execute(), ferry::Error) << "a plan runs once";

  ferry::migrate(*t.model, *t.opt, Device::cpu());
  for (const auto& [n, x] : tensors) EXPECT_EQ(x.device(), Device::cpu()) << n;
  expect_same(before, snapshot(tensors), true);
  EXPECT_EQ(view.device(), Device::cpu());
}

// Tensors larger than a staging chunk, and many small ones, with and
// without an arena, both ways.
TEST_P(TransferTo, LargeAndSmallTensorsThroughSmallStaging) {
  const Device dev(GetParam());
  std::vector<std::pair<std::string, Tensor>> tensors;
  ferry::manual_seed(3);
  for (int i = 0; i < 40; ++i)
    tensors.emplace_back("t" + std::to_string(i), ferry::randn({1 + (i * 977) % 3000}));
  tensors.emplace_back("big", ferry::randn({70000}));  // 280 KB: four 32 KiB chunks and more
  Snapshot before = snapshot(tensors);
  for (bool separate : {false, true}) {
    ferry::TransferOptions o{.separate_allocations = separate, .staging_bytes = 64 << 10};
    ferry::plan_migration(tensors, dev, o).execute();
    for (const auto& [n, x] : tensors) ASSERT_EQ(x.device(), dev) << n;
    expect_same(before, snapshot(tensors), false);
    ferry::plan_migration(tensors, Device::cpu(), o).execute();
    expect_same(before, snapshot(tensors), true);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, TransferTo, ::testing::Values("vulkan:0", "cuda:0", "testdev:0"),
                         [](const auto& info) {
                           return info.param.substr(0, info.param.find(':'));
                         });

// ---------------------------------------------------------------- all or nothing

// Runs plan.execute() with the k-th failure point armed (Note [Failure
// injection] in ferry/backend.hpp). Returns -1 when the injected failure
// fired, else how many failure points the migration passed.
long execute_failing_at(ferry::TransferPlan& plan, long k) {
  ferry::testing::fail_at(k);
  try {
    plan.execute();
  } catch (const ferry::BackendError& e) {
    ferry::testing::fail_at(-1);
    EXPECT_EQ(e.code(), ferry::kInjectedFailureCode) << e.what();
    return -1;
  } catch (...) {
    ferry::testing::fail_at(-1);
    throw;
  }
  return ferry::testing::fail_at(-1);
}

// Fails the k-th allocation or copy of a migration, for k = 0, 1, ... until
// the migration has no k-th step, and checks after each failure that every
// tensor is where it was, bit for bit, with its storage, and readable; then
// that the migration that did not fail took exactly k steps (so each one was
// failed once) and moved everything. `min_steps`: the allocations and copies
// the migration makes at least.
void fail_every_step(std::vector<std::pair<std::string, Tensor>>& tensors, const Device& to,
                     const ferry::TransferOptions& options, long min_steps) {
  const Snapshot before = snapshot(tensors);
  for (long k = 0;; ++k) {
    ASSERT_LT(k, 10000) << "the migration never completed";
    auto plan = ferry::plan_migration(tensors, to, options);
    const long steps = execute_failing_at(plan, k);
    if (steps >= 0) {
      EXPECT_EQ(steps, k) << "a migration of " << steps << " steps completed with step " << k
                          << " armed to fail";
      EXPECT_GE(steps, min_steps);
      for (const auto& [n, x] : tensors) EXPECT_EQ(x.device(), to) << n;
      return;
    }
    expect_same(before, snapshot(tensors), true);  // nothing moved, nothing changed
    if (::testing::Test::HasFailure()) return;
  }
}

// Three storages (one with a view of it) that need more than one 32 KiB chunk.
std::vector<std::pair<std::string, Tensor>> failure_tensors() {
  ferry::manual_seed(11);
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"w", ferry::randn({64, 300})},  // larger than one 32 KiB chunk
      {"b", ferry::randn({64})},
      {"steps", ferry::tensor(std::vector<std::int64_t>{1, 2, 3})}};
  tensors.emplace_back("w_view", tensors[0].second.narrow(0, 3, 5));
  return tensors;
}

const ferry::TransferOptions kSmallStaging{.staging_bytes = 64 << 10};

TEST(TransferAllOrNothing, AFailureAtAnyStepLeavesEveryTensorInPlace) {
  ASSERT_TRUE(load_testdev()) << kTestdevModule;
  auto tensors = failure_tensors();
  {
    SCOPED_TRACE("cpu -> testdev:0");  // 3 allocations, 3 copies at least
    fail_every_step(tensors, Device("testdev:0"), kSmallStaging, 6);
  }
  {
    SCOPED_TRACE("testdev:0 -> testdev:1 (through the host)");
    fail_every_step(tensors, Device("testdev:1"), kSmallStaging, 9);
  }
  {
    SCOPED_TRACE("testdev:1 -> cpu");  // an arena, and a copy per storage
    fail_every_step(tensors, Device::cpu(), kSmallStaging, 4);
  }
  {
    SCOPED_TRACE("cpu -> testdev:0 as f16");
    ferry::TransferOptions half = kSmallStaging;
    half.dtype = DType::f16;
    fail_every_step(tensors, Device("testdev:0"), half, 6);
  }
  EXPECT_EQ(tensors[0].second.dtype(), DType::f16);
  EXPECT_EQ(tensors[3].second.dtype(), DType::f16) << "the listed view follows";
  EXPECT_EQ(tensors[2].second.dtype(), DType::i64);
}

// The same on the Vulkan backend: arenas and mapped memory here, the staging
// pipeline (staging buffers, events, two chunks in flight) under ctest's
// transfer_vulkan_staging (FERRY_VULKAN_FORCE_STAGING=1); and between Vulkan
// and another backend, through host chunks.
TEST(TransferAllOrNothing, VulkanAFailureAtAnyStepLeavesEveryTensorInPlace) {
  FERRY_SKIP_UNLESS_DEVICE("vulkan:0");
  ASSERT_TRUE(load_testdev()) << kTestdevModule;
  const Device vk("vulkan:0");
  auto tensors = failure_tensors();
  for (bool separate : {false, true}) {
    ferry::TransferOptions o = kSmallStaging;
    o.separate_allocations = separate;
    SCOPED_TRACE(separate ? "separate allocations" : "arenas");
    {
      SCOPED_TRACE("cpu -> vulkan:0");
      fail_every_step(tensors, vk, o, 4);
    }
    {
      SCOPED_TRACE("vulkan:0 -> testdev:0");
      fail_every_step(tensors, Device("testdev:0"), o, 6);
    }
    {
      SCOPED_TRACE("testdev:0 -> vulkan:0");
      fail_every_step(tensors, vk, o, 4);
    }
    {
      SCOPED_TRACE("vulkan:0 -> cpu");
      fail_every_step(tensors, Device::cpu(), o, 4);
    }
  }
  SCOPED_TRACE("cpu -> vulkan:0 as f16");
  ferry::TransferOptions half = kSmallStaging;
  half.dtype = DType::f16;
  fail_every_step(tensors, vk, half, 3);
  EXPECT_EQ(tensors[0].second.dtype(), DType::f16);
  EXPECT_EQ(tensors[2].second.dtype(), DType::i64);
}

TEST(TransferAllOrNothing, CapacityIsCheckedBeforeAnyAllocation) {
  ASSERT_TRUE(load_testdev()) << kTestdevModule;
  Tensor w = ferry::randn({1000});
  auto plan = ferry::plan_migration({{"w", w}}, Device("testdev:0"));
  ScopedEnv low("FERRY_TESTDEV_MEMORY_FREE", "1000");
  ferry::testing::fail_at(1000);  // counts the allocations and copies made
  try {
    plan.execute();
    ADD_FAILURE() << "expected OutOfMemoryError";
  } catch (const ferry::OutOfMemoryError& e) {
    EXPECT_EQ(e.requested(), 4000u);
    EXPECT_EQ(e.available(), 1000u);
    EXPECT_EQ(e.device(), "testdev:0");
  }
  EXPECT_EQ(ferry::testing::fail_at(-1), 0) << "nothing was allocated or copied";
  EXPECT_EQ(w.device(), Device::cpu());
}

TEST(TransferAllOrNothing, APlanMadeBeforeAnotherMoveIsRefused) {
  ASSERT_TRUE(load_testdev()) << kTestdevModule;
  Tensor w = ferry::randn({10});
  auto stale = ferry::plan_migration({{"w", w}}, Device("testdev:0"));
  ferry::plan_migration({{"w", w}}, Device("testdev:1")).execute();
  EXPECT_THROW(stale.execute(), ferry::Error);
  EXPECT_EQ(w.device(), Device("testdev:1"));
}

// ---------------------------------------------------------------- training

// The moved model trains on the device within rounding of a twin that never
// moved; after coming back it trains bit for bit like the twin when both
// start from the same state (the optimizer kept its step counts and state).
TEST(TransferTraining, OptimizerKeepsUpdatingMovedParameters) {
  FERRY_SKIP_UNLESS_DEVICE("vulkan:0");
  const Device dev("vulkan:0");
  Trained moved = trained(Device::cpu());
  Trained twin = trained(Device::cpu());
  ferry::migrate(*moved.model, *moved.opt, dev);
  moved.x = moved.x.to(dev), moved.y = moved.y.to(dev);
  std::vector<std::vector<float>> at_move;
  for (const Tensor& p : moved.model->parameters()) at_move.push_back(p.to_vector<float>());
  for (int step = 0; step < 5; ++step) {
    float a = train_step(moved), b = train_step(twin);
    EXPECT_NEAR(a, b, 1e-4f * std::max(1.f, std::abs(b))) << "step " << step;
  }
  // Adam moves a weight by at most about lr per step; where a gradient is
  // nearly zero (fc1.bias before BatchNorm) rounding can flip its sign, so
  // the parameters are held to 5 steps * lr, and must all have moved.
  auto pm = moved.model->named_parameters(), pt = twin.model->named_parameters();
  ASSERT_EQ(pm.size(), pt.size());
  for (std::size_t i = 0; i < pm.size(); ++i) {
    EXPECT_EQ(pm[i].second.device(), dev) << pm[i].first;
    EXPECT_EQ(moved.opt->step_count(i), twin.opt->step_count(i)) << pm[i].first;
    auto got = pm[i].second.to_vector<float>(), want = pt[i].second.to_vector<float>();
    EXPECT_NE(got, at_move[i]) << pm[i].first << " was not updated on " << dev.str();
    for (std::size_t j = 0; j < got.size(); ++j)
      ASSERT_NEAR(got[j], want[j], 5e-2) << pm[i].first << "[" << j << "]";
  }
  // Round trips between steps: every step on the CPU, equal bit for bit.
  Trained a = trained(Device::cpu()), b = trained(Device::cpu());
  for (int step = 0; step < 4; ++step) {
    ferry::migrate(*a.model, *a.opt, dev);
    ferry::migrate(*a.model, *a.opt, Device::cpu());
    EXPECT_EQ(train_step(a), train_step(b)) << "step " << step;
  }
  auto pa = a.model->named_parameters(), pb = b.model->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i].second.to_vector<float>(), pb[i].second.to_vector<float>()) << pa[i].first;
}

TEST(TransferTraining, ModuleToMovesEveryTensorAndForwardRunsThere) {
  FERRY_SKIP_UNLESS_DEVICE("vulkan:0");
  const Device dev("vulkan:0");
  Trained t = trained(Device::cpu());
  t.model->eval();
  const std::vector<float> ref = t.model->forward(t.x).to_vector<float>();
  t.model->to(dev);
  for (auto& [n, p] : t.model->named_parameters()) {
    EXPECT_EQ(p.device(), dev) << n;
    EXPECT_EQ(p.grad().device(), dev) << n << ".grad";
  }
  for (auto& [n, b] : t.model->named_buffers()) EXPECT_EQ(b.device(), dev) << n;
  const std::vector<float> got = t.model->forward(t.x.to(dev)).to_vector<float>();
  ASSERT_EQ(got.size(), ref.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-4) << i;
  t.model->to(Device::cpu(), DType::f16);
  EXPECT_EQ(t.model->fc1->weight.device(), Device::cpu());
  EXPECT_EQ(t.model->fc1->weight.dtype(), DType::f16);
  EXPECT_EQ(t.model->bn->buffer("num_batches_tracked").dtype(), DType::i64);
}

TEST(TransferArena, OneAllocationFreedWithItsLastTensor) {
  FERRY_SKIP_UNLESS_DEVICE("vulkan:0");
  const Device dev("vulkan:0");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (int i = 0; i < 300; ++i)
    tensors.emplace_back("t" + std::to_string(i), ferry::full({7 + i % 50}, float(i)));
  ferry::synchronize(dev);
  const ferry::MemoryStats s0 = ferry::memory_stats(dev);
  auto plan = ferry::plan_migration(tensors, dev);
  EXPECT_NE(plan.explain().find("1 arena allocation(s)"), std::string::npos) << plan.explain();
  plan.execute();
  const ferry::MemoryStats s1 = ferry::memory_stats(dev);
  EXPECT_EQ(s1.allocations - s0.allocations, 1u) << "one arena for 300 tensors";
  for (int i = 0; i < 300; ++i)
    ASSERT_EQ(tensors[std::size_t(i)].second.to_vector<float>()[0], float(i));
  Tensor last = tensors.back().second;
  tensors.clear();
  ferry::synchronize(dev);
  EXPECT_GT(ferry::memory_stats(dev).allocated, s0.allocated) << "the last tensor holds the arena";
  last = Tensor();
  ferry::synchronize(dev);
  EXPECT_EQ(ferry::memory_stats(dev).allocated, s0.allocated);
}

}  // namespace
