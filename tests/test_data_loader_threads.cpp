// The DataLoader's threads and devices (Note [DataLoader threading] in
// ferry/data.hpp): worker exceptions at their batch, early exits and
// destruction with busy workers, bounded prefetch, batches on vulkan:0 equal
// to the CPU's bit for bit, and a training loop whose loss decreases.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "data_test_util.hpp"
#include "ferry/ferry.hpp"
#include "optim_test_util.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry::data::Batch;
using ferry::data::DataLoader;
using ferry::data::Dataset;
using ferry::data::TensorDataset;
using ferry_data_test::epoch_ids_and_features;
using ferry_data_test::id_dataset;
using ferry_data_test::ids_of;

// Throws SampleError from get_batch for a batch holding sample `bad`.
struct SampleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
class FailingDataset : public Dataset {
 public:
  FailingDataset(std::int64_t n, std::size_t bad) : inner_(id_dataset(n)), bad_(bad) {}
  std::size_t size() const override { return inner_->size(); }
  std::vector<Tensor> get(std::size_t i) const override { return inner_->get(i); }
  Batch get_batch(const std::vector<std::size_t>& indices) const override {
    for (std::size_t i : indices)
      if (i == bad_) throw SampleError("sample " + std::to_string(i) + " is corrupt");
    return inner_->get_batch(indices);
  }

 private:
  std::shared_ptr<TensorDataset> inner_;
  std::size_t bad_;
};

TEST(DataLoader, WorkerExceptionArrivesAtItsBatch) {
  for (std::size_t workers : {0u, 1u, 3u}) {
    for (const std::string& device : ferry_optim_test::test_devices()) {
      DataLoader loader(std::make_shared<FailingDataset>(40, 17),
                        {.batch_size = 4, .num_workers = workers, .prefetch = 3, .device = device});
      std::size_t received = 0;
      try {
        for (const Batch& b : loader) {
          EXPECT_EQ(ids_of(b).front(), std::int64_t(received * 4));
          ++received;
        }
        FAIL() << "no exception with " << workers << " workers on " << device;
      } catch (const SampleError& e) {
        EXPECT_EQ(std::string(e.what()), "sample 17 is corrupt");
      }
      EXPECT_EQ(received, 4u) << workers << " workers on "
                              << device;  // batches 0..3, then 4 throws
      // The loader starts a new epoch afterwards, failing at the same batch.
      auto it = loader.begin();
      for (std::size_t k = 1; k < 4; ++k) ++it;
      EXPECT_EQ(it.batch_index(), 3u);
      EXPECT_THROW(++it, SampleError);
      EXPECT_TRUE(it == loader.end());
    }
  }
  // An error in batch 0 comes out of begin().
  DataLoader first(std::make_shared<FailingDataset>(8, 0), {.batch_size = 4, .num_workers = 2});
  EXPECT_THROW(first.begin(), SampleError);
}

// Sleeps in get_batch, and counts the calls started.
class SlowDataset : public Dataset {
 public:
  explicit SlowDataset(std::int64_t n, int sleep_ms = 2) : inner_(id_dataset(n)), ms_(sleep_ms) {}
  std::size_t size() const override { return inner_->size(); }
  std::vector<Tensor> get(std::size_t i) const override { return inner_->get(i); }
  Batch get_batch(const std::vector<std::size_t>& indices) const override {
    started.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    return inner_->get_batch(indices);
  }
  mutable std::atomic<std::size_t> started{0};

 private:
  std::shared_ptr<TensorDataset> inner_;
  int ms_;
};

TEST(DataLoader, EarlyExitAndDestructionWithBusyWorkers) {
  auto ds = std::make_shared<SlowDataset>(400, 5);
  {
    DataLoader loader(ds, {.batch_size = 2, .num_workers = 4, .prefetch = 4});
    for (const Batch& b : loader) {
      if (ids_of(b).front() == 2) break;  // leaves with workers mid-batch
    }
    // A new epoch right away, abandoned as well; then one ended by a newer begin().
    auto it = loader.begin();
    ++it;
    auto again = loader.begin();
    EXPECT_THROW(++it, ferry::Error);
    EXPECT_EQ(ids_of(*again).front(), 0);
  }
  // Destroying the loader while its workers are sleeping inside get_batch.
  auto outlived = std::make_unique<DataLoader::Iterator>();
  {
    DataLoader loader(ds, {.batch_size = 1, .num_workers = 3, .prefetch = 1});
    *outlived = loader.begin();
  }
  EXPECT_THROW(++*outlived, ferry::Error);
  outlived.reset();
  // The dataset was called only as far as the windows allowed, never for all 400 samples.
  EXPECT_LT(ds->started.load(), 200u);
}

TEST(DataLoader, PrefetchIsBounded) {
  for (std::size_t workers : {1u, 3u}) {
    for (std::size_t prefetch : {0u, 1u, 2u}) {
      auto ds = std::make_shared<SlowDataset>(60, 0);
      DataLoader loader(ds, {.batch_size = 2, .num_workers = workers, .prefetch = prefetch});
      const std::size_t window = workers * std::max<std::size_t>(prefetch, 1);
      std::size_t k = 0;
      for (auto it = loader.begin(); it != loader.end(); ++it, ++k) {
        EXPECT_EQ(it.batch_index(), k);
        std::this_thread::yield();  // give the workers a chance to run ahead
        EXPECT_LE(ds->started.load(), k + 1 + window) << workers << " workers, batch " << k;
      }
      EXPECT_EQ(k, 30u);
      EXPECT_EQ(ds->started.load(), 30u);
    }
  }
}

TEST(DataLoader, VulkanBatchesEqualCpuBatches) {
  FERRY_SKIP_UNLESS_DEVICE("vulkan:0");
  const ferry::Device gpu("vulkan:0");
  auto ds = id_dataset(37);
  DataLoader cpu(ds, {.batch_size = 5, .shuffle = true, .seed = 3});
  std::vector<std::vector<float>> cpu_features;
  const auto cpu_ids = epoch_ids_and_features(cpu, cpu_features);
  for (std::size_t workers : {0u, 2u}) {
    for (std::size_t prefetch : {0u, 2u}) {
      DataLoader loader(ds, {.batch_size = 5,
                             .shuffle = true,
                             .seed = 3,
                             .num_workers = workers,
                             .prefetch = prefetch,
                             .device = gpu});
      std::size_t k = 0;
      for (const Batch& b : loader) {
        ASSERT_EQ(b.size(), 2u);
        EXPECT_EQ(b[0].device(), gpu);
        EXPECT_EQ(b[1].device(), gpu);
        EXPECT_EQ(b[0].dtype(), DType::i64);
        ASSERT_LT(k, cpu_ids.size());
        EXPECT_EQ(ids_of(b), cpu_ids[k]);
        EXPECT_EQ(b[1].to_vector<float>(), cpu_features[k]);  // bit for bit
        ++k;
      }
      EXPECT_EQ(k, cpu_ids.size());
    }
  }
}

class DataTraining : public ::testing::TestWithParam<std::string> {};

TEST_P(DataTraining, LossDecreasesOverEpochs) {
  FERRY_SKIP_UNLESS_DEVICE(GetParam());
  const ferry::Device dev(GetParam());
  namespace nn = ferry::nn;
  ferry::manual_seed(0);
  Tensor x = ferry::randn({64, 4});
  Tensor w_true = ferry::tensor(std::vector<float>{1, -2, 0.5f, 3}, {4, 1});
  Tensor y = ferry::matmul(x, w_true) + 0.25f;
  DataLoader loader(
      std::make_shared<TensorDataset>(std::vector<Tensor>{x, y}),
      {.batch_size = 16, .shuffle = true, .seed = 1, .num_workers = 2, .device = dev});
  auto model = std::make_shared<nn::Linear>(4, 1, true, ferry::TensorOptions{.device = dev});
  ferry::optim::SGD opt(model->parameters(), {.lr = 0.1});
  std::vector<double> epoch_loss;
  for (int epoch = 0; epoch < 8; ++epoch) {
    double total = 0;
    for (const Batch& b : loader) {
      opt.zero_grad();
      Tensor loss = nn::functional::mse_loss(model->forward(b[0]), b[1]);
      loss.backward();
      opt.step();
      total += loss.item<float>();
    }
    epoch_loss.push_back(total / double(loader.size()));
  }
  EXPECT_LT(epoch_loss.back(), 0.05 * epoch_loss.front())
      << "first " << epoch_loss.front() << ", last " << epoch_loss.back();
  for (std::size_t e = 1; e < epoch_loss.size(); ++e)
    EXPECT_LT(epoch_loss[e], epoch_loss[e - 1]) << "epoch " << e;
}

INSTANTIATE_TEST_SUITE_P(Devices, DataTraining, ::testing::ValuesIn(ferry_test::all_device_names()),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), ':', '_');
                           return s;
                         });

}  // namespace
