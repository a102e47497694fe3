// tests/test_threads.cpp — many host threads on one device, and a host that
// runs ahead (Note [Device thread-safety] in ferry/backend.hpp, Note [Vulkan
// execution] in runtime/vulkan/vk_device.hpp). Every test compares what the
// threads computed with a serial run of the same work, bit for bit: one
// in-order stream per device runs the same kernels on the same inputs.
//
// FERRY_TEST_THREAD_ROUNDS (default 2) sets how many times the six-thread
// program runs; CTest runs it 100 times on vulkan:0 as its own entry.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/custom_op.hpp"
#include "ferry/ferry.hpp"
#include "test_devices.hpp"

namespace {

using ferry::Device;
using ferry::Tensor;

const std::string kTestdevModule =
    std::string(FERRY_TEST_PLUGIN_DIR) + "/libferry_backend_testdev.so";

// Every device these tests run on: cpu, the accelerators, and the third-party
// testdev plugin (which has copy, fill, add and mul only).
std::vector<std::string> thread_devices() {
  std::vector<std::string> d = ferry_test::all_device_names();
  d.push_back("testdev:0");
  return d;
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (c == ':') c = '_';
  return s;
}

// Skips unless `name` is usable; loads the testdev module by path first.
#define SKIP_UNLESS_THREAD_DEVICE(name)                                       \
  do {                                                                        \
    if (std::string(name).starts_with("testdev")) {                           \
      ASSERT_TRUE(std::filesystem::exists(kTestdevModule)) << kTestdevModule; \
      ferry::load_backend_module(kTestdevModule);                             \
    }                                                                         \
    FERRY_SKIP_UNLESS_DEVICE(name);                                           \
  } while (0)

int rounds() {
  const char* v = std::getenv("FERRY_TEST_THREAD_ROUNDS");
  return v && std::atoi(v) > 0 ? std::atoi(v) : 2;
}

// Deterministic values in [-1, 1) from a seed, made on the host (no generator).
std::vector<float> values(int seed, std::size_t n) {
  std::vector<float> v(n);
  std::uint32_t s = 2654435761u * std::uint32_t(seed + 1);
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = float(s >> 8) / float(1 << 23) - 1.0f;
  }
  return v;
}

// The program: a chain of `ops` ops on `dev`, each output dropped
// for the next, with a fresh zeros() tensor every step (the path that
// crashed). testdev lacks matmul and tanh, so its chain is mul and add.
std::vector<float> chain(const Device& dev, int seed, int ops) {
  const bool full = !dev.str().starts_with("testdev");
  Tensor x = ferry::tensor(values(seed, 16 * 16), {16, 16}).to(dev);
  Tensor w = ferry::tensor(values(seed + 100, 16 * 16), {16, 16}).to(dev);
  for (int i = 0; i < ops; ++i) {
    Tensor z = ferry::zeros({16, 16}, {.device = dev});
    switch (i % 3) {
      case 0:
        x = full ? ferry::matmul(x, w) * 0.25f : x * w;
        break;
      case 1:
        x = full ? ferry::tanh(x) : x * 0.5f;
        break;
      default:
        x = x + w + z;
    }
  }
  return x.to_vector<float>();
}

// Runs body(t) on `threads` threads that start together; returns each
// thread's result, or the message of what it threw in errors[t].
template <typename Body>
auto run_at_once(int threads, Body body, std::vector<std::string>& errors) {
  std::vector<decltype(body(0))> got(static_cast<std::size_t>(threads));
  errors.assign(static_cast<std::size_t>(threads), "");
  std::barrier start(threads);
  std::vector<std::jthread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        got[std::size_t(t)] = body(t);
      } catch (const std::exception& e) {
        errors[std::size_t(t)] = e.what();
      }
    });
  pool.clear();  // joins
  return got;
}

class DeviceThreads : public ::testing::TestWithParam<std::string> {};

// Six threads, each its own chain of 200 ops, at once; each result equals
// the serial run's, every round.
TEST_P(DeviceThreads, SixThreadChainsEqualSerialRuns) {
  SKIP_UNLESS_THREAD_DEVICE(GetParam());
  const Device dev(GetParam());
  constexpr int kThreads = 6, kOps = 200;
  std::vector<std::vector<float>> serial;
  for (int t = 0; t < kThreads; ++t) serial.push_back(chain(dev, t, kOps));
  for (int round = 0; round < rounds(); ++round) {
    std::vector<std::string> errors;
    auto got = run_at_once(
        kThreads, [&](int t) { return chain(dev, t, kOps); }, errors);
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_EQ(errors[t], "") << "round " << round << ", thread " << t;
      ASSERT_EQ(got[t], serial[t]) << "round " << round << ", thread " << t;
    }
  }
}

// Note [Pinned host memory]: six threads pin their own tensors for the device
// at once (the pinned cache's lists, the device's registrations), copy them
// there and back into pinned memory by DMA, and free them; every byte returns.
TEST_P(DeviceThreads, PinnedCopiesFromSixThreadsAtOnce) {
  SKIP_UNLESS_THREAD_DEVICE(GetParam());
  const Device dev(GetParam());
  if (dev.is_cpu() || !ferry::device_impl(dev).capabilities().host_registration)
    GTEST_SKIP() << dev.str() << " does not pin host memory";
  constexpr int kThreads = 6;
  for (int round = 0; round < rounds(); ++round) {
    std::vector<std::string> errors;
    auto ok = run_at_once(
        kThreads,
        [&](int t) {
          int same =
              1;  // not bool: run_at_once collects into a vector, and vector<bool> packs bits
          for (int k = 0; k < 4; ++k) {
            const std::vector<float> v(std::size_t(1000 + 300 * t + k), float(t * 10 + k));
            Tensor p = ferry::tensor(v).pin_memory(dev);
            Tensor back = ferry::zeros({std::int64_t(v.size())}).pin_memory(dev);
            back.copy_(p.to(dev));
            same = same && back.to_vector<float>() == v ? 1 : 0;
          }
          return same;
        },
        errors);
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_EQ(errors[t], "") << "round " << round << ", thread " << t;
      ASSERT_EQ(ok[t], 1) << "round " << round << ", thread " << t;
    }
  }
}

// Note [Vulkan execution]: a loop that never reads a result holds the memory
// of about one iteration however many it runs, since a dropped output is
// reusable at once by the next; and the host runs a bounded number of
// batches ahead of the device.
TEST_P(DeviceThreads, RunAheadLoopHoldsOneIterationOfMemory) {
  SKIP_UNLESS_THREAD_DEVICE(GetParam());
  const Device dev(GetParam());
  const bool full = !dev.str().starts_with("testdev");
  Tensor a = ferry::tensor(values(1, 64 * 64), {64, 64}).to(dev);
  Tensor b = ferry::tensor(values(2, 64 * 64), {64, 64}).to(dev);
  auto step = [&] { return full ? ferry::matmul(a, b) : a * b; };
  const std::uint64_t iteration_bytes = 64 * 64 * sizeof(float);
  ferry::synchronize(dev);
  const std::uint64_t base = ferry::memory_stats(dev).allocated;
  ferry::reset_peak_memory_stats(dev);
  (void)step();
  const std::uint64_t one = ferry::memory_stats(dev).peak_allocated - base;
  EXPECT_GE(one, iteration_bytes);
  ferry::reset_peak_memory_stats(dev);
  std::size_t max_batches = 0, worst_in_flight = 0;
  for (int i = 0; i < 10000; ++i) {
    (void)step();
    if (i % 50 == 0 && dev.str().starts_with("vulkan")) {
      ferry::DeviceInfo info;
      for (const ferry::DeviceInfo& d : ferry::devices())
        if (d.device == dev.str()) info = d;
      max_batches = std::stoul(info.properties.at("max_batches_in_flight"));
      worst_in_flight = std::max<std::size_t>(worst_in_flight,
                                              std::stoul(info.properties.at("batches_in_flight")));
    }
  }
  ferry::synchronize(dev);
  const std::uint64_t peak = ferry::memory_stats(dev).peak_allocated - base;
  EXPECT_LE(peak, 2 * one) << "10,000 iterations held " << peak << " bytes at their peak; one held "
                           << one;
  EXPECT_LE(worst_in_flight, max_batches);
}

// Separate models trained at once from several threads (forward, backward,
// fused optimizer step) end where the same training run serially ends.
std::vector<float> train(const Device& dev, int seed, int steps) {
  namespace nn = ferry::nn;
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(8, 16, true, ferry::TensorOptions{.device = dev}),
      std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(16, 4, true, ferry::TensorOptions{.device = dev}));
  std::vector<Tensor> params = model->parameters();
  {
    ferry::NoGradGuard no_grad;
    for (std::size_t i = 0; i < params.size(); ++i)
      params[i].copy_(ferry::tensor(values(seed * 10 + int(i), std::size_t(params[i].numel())),
                                    params[i].sizes())
                          .to(dev) *
                      0.5f);
  }
  ferry::optim::Adam opt(params, {.lr = 1e-2});
  Tensor x = ferry::tensor(values(seed + 50, 32 * 8), {32, 8}).to(dev);
  Tensor y = ferry::tensor(values(seed + 60, 32 * 4), {32, 4}).to(dev);
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Tensor loss = ferry::nn::functional::mse_loss(model->forward(x), y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<float>());
  }
  for (const Tensor& p : params)
    for (float v : p.to_vector<float>()) losses.push_back(v);
  return losses;
}

class TrainingThreads : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainingThreads, SeparateModelsTrainAtOnceAsTheyTrainAlone) {
  FERRY_SKIP_UNLESS_DEVICE(GetParam());
  const Device dev(GetParam());
  constexpr int kThreads = 4, kSteps = 6;
  std::vector<std::vector<float>> serial;
  for (int t = 0; t < kThreads; ++t) serial.push_back(train(dev, t, kSteps));
  std::vector<std::string> errors;
  auto got = run_at_once(
      kThreads, [&](int t) { return train(dev, t, kSteps); }, errors);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
    EXPECT_EQ(got[t], serial[t]) << "thread " << t;
  }
}

// Two threads allocate, compute and free on a device while a third moves a
// model and its optimizer there and back: every move is exact, and the
// other threads' results are untouched.
TEST_P(TrainingThreads, AllocationAndFreeWhileAnotherThreadMigrates) {
  FERRY_SKIP_UNLESS_DEVICE(GetParam());
  const Device dev(GetParam());
  if (dev.is_cpu()) GTEST_SKIP() << "a migration needs a second device";
  namespace nn = ferry::nn;
  auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(32, 64),
                                                std::make_shared<nn::Linear>(64, 8));
  ferry::optim::Adam opt(model->parameters(), {.lr = 1e-3});
  std::vector<std::vector<float>> before;
  for (const Tensor& p : model->parameters()) before.push_back(p.to_vector<float>());
  const std::vector<float> expected = chain(dev, 7, 60);

  std::atomic<bool> done{false};
  std::vector<std::string> errors(3);
  {
    std::vector<std::jthread> pool;
    for (int w = 0; w < 2; ++w)
      pool.emplace_back([&, w] {
        try {
          int n = 0;
          while (!done.load() || n < 3) {
            std::vector<Tensor> held;
            for (int k = 0; k < 8; ++k)
              held.push_back(ferry::full({std::int64_t(1000 + 97 * k)}, float(k), {.device = dev}));
            if (chain(dev, 7, 60) != expected) throw ferry::Error("a chain's result changed");
            for (int k = 0; k < 8; ++k)
              if (held[std::size_t(k)].to_vector<float>().back() != float(k))
                throw ferry::Error("a held tensor's bytes changed");
            ++n;
          }
        } catch (const std::exception& e) {
          errors[std::size_t(w)] = e.what();
        }
      });
    try {
      for (int round = 0; round < 6; ++round) {
        ferry::migrate(*model, opt, dev);
        ferry::migrate(*model, opt, Device::cpu());
        std::vector<Tensor> params = model->parameters();
        for (std::size_t i = 0; i < params.size(); ++i)
          if (params[i].to_vector<float>() != before[i])
            throw ferry::Error("a parameter changed on its round trip");
      }
    } catch (const std::exception& e) {
      errors[2] = e.what();
    }
    done = true;
  }
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

// The data loader's workers build batches and enqueue their copies to the
// device from their own threads while the main thread trains on earlier
// batches; the training equals one fed by the iterating thread alone.
TEST_P(TrainingThreads, LoaderWorkersPrefetchToTheDeviceWhileTheMainThreadTrains) {
  FERRY_SKIP_UNLESS_DEVICE(GetParam());
  const Device dev(GetParam());
  Tensor xs = ferry::tensor(values(3, 96 * 8), {96, 8});
  Tensor ys = ferry::tensor(values(4, 96 * 4), {96, 4});
  auto data = std::make_shared<ferry::data::TensorDataset>(std::vector<Tensor>{xs, ys});
  auto run = [&](std::size_t workers) {
    ferry::data::DataLoader loader(data, {.batch_size = 8,
                                          .shuffle = true,
                                          .seed = 5,
                                          .num_workers = workers,
                                          .prefetch = 2,
                                          .device = dev});
    ferry::nn::Linear layer(8, 4, true, {.device = dev});
    {
      ferry::NoGradGuard no_grad;
      layer.weight.copy_(ferry::tensor(values(9, 32), {4, 8}).to(dev));
      layer.bias.fill_(0.0f);
    }
    ferry::optim::SGD opt(layer.parameters(), {.lr = 0.1});
    std::vector<float> losses;
    for (const ferry::data::Batch& b : loader) {
      EXPECT_EQ(b[0].device(), dev);
      opt.zero_grad();
      Tensor loss = ferry::nn::functional::mse_loss(layer.forward(b[0]), b[1]);
      loss.backward();
      opt.step();
      losses.push_back(loss.item<float>());
    }
    return losses;
  };
  const std::vector<float> alone = run(0);
  ASSERT_EQ(alone.size(), 12u);
  EXPECT_EQ(run(3), alone);
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceThreads, ::testing::ValuesIn(thread_devices()), param_name);
INSTANTIATE_TEST_SUITE_P(Devices, TrainingThreads,
                         ::testing::ValuesIn(ferry_test::all_device_names()), param_name);

// Note [One backward at a time]: a second backward pass into a graph that
// another thread is differentiating is refused, and the first one finishes
// as if alone.
TEST(AutogradThreads, SecondBackwardIntoARunningGraphIsAnError) {
  static std::promise<void>* entered = nullptr;
  static std::shared_future<void>* release = nullptr;
  if (!ferry::has_op("test_threads.blocking_scale"))
    ferry::register_op({"test_threads.blocking_scale",
                        [](const std::vector<Tensor>& in) { return in[0] * 3.0f; },
                        [](const std::vector<Tensor>&, const Tensor&, const Tensor& grad) {
                          if (entered) {
                            entered->set_value();
                            entered = nullptr;
                            release->wait();
                          }
                          return std::vector<Tensor>{grad * 3.0f};
                        }});
  Tensor w = ferry::tensor(std::vector<float>{1, 2, 3}).requires_grad_();
  Tensor loss = ferry::sum(ferry::call_op("test_threads.blocking_scale", {w * w}));
  std::promise<void> entered_promise, release_promise;
  std::shared_future<void> release_future = release_promise.get_future().share();
  entered = &entered_promise;
  release = &release_future;
  std::future<void> in_backward = entered_promise.get_future();
  std::string first_error;
  std::jthread first([&] {
    try {
      loss.backward({}, /*retain_graph=*/true);
    } catch (const std::exception& e) {
      first_error = e.what();
    }
  });
  in_backward.wait();
  try {
    loss.backward({}, true);
    ADD_FAILURE() << "a second backward into a running graph was not refused";
  } catch (const ferry::Error& e) {
    EXPECT_NE(std::string(e.what()).find("already being differentiated"), std::string::npos)
        << e.what();
  }
  release_promise.set_value();
  first.join();
  EXPECT_EQ(first_error, "");
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{6, 12, 18}));
  loss.backward({}, true);  // the claims were given back: the graph takes a pass again
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{12, 24, 36}));
}

}  // namespace
