// Datasets and the DataLoader's epochs (ferry/data.hpp): TensorDataset and
// the default batching, option checks, every sample once per epoch, the seeded
// shuffle (deterministic, independent of workers and of manual_seed),
// drop_last, and the iterator. Threads, errors, devices and training are in
// test_data_loader_threads.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <random>
#include <ranges>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "data_test_util.hpp"
#include "ferry/ferry.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry::data::Batch;
using ferry::data::DataLoader;
using ferry::data::Dataset;
using ferry::data::TensorDataset;
using ferry_data_test::epoch_ids;
using ferry_data_test::epoch_ids_and_features;
using ferry_data_test::id_dataset;
using ferry_data_test::ids_of;

TEST(DataTensorDataset, GetAndGetBatch) {
  auto ds = id_dataset(5);
  ASSERT_EQ(ds->size(), 5u);
  std::vector<Tensor> s = ds->get(3);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].dim(), 0);
  EXPECT_EQ(s[0].item<std::int64_t>(), 3);
  EXPECT_EQ(s[1].to_vector<float>(), (std::vector<float>{3, 3.5f, -3}));
  Batch b = ds->get_batch({4, 0, 4});
  EXPECT_EQ(b[0].to_vector<std::int64_t>(), (std::vector<std::int64_t>{4, 0, 4}));
  EXPECT_EQ(b[1].shape(), (ferry::Shape{3, 3}));
  EXPECT_EQ(b[1].to_vector<float>(), (std::vector<float>{4, 4.5f, -4, 0, 0.5f, 0, 4, 4.5f, -4}));
  // The default batching (stacking get()) gives the same batch.
  Batch stacked = ds->Dataset::get_batch({4, 0, 4});
  EXPECT_EQ(stacked[0].to_vector<std::int64_t>(), b[0].to_vector<std::int64_t>());
  EXPECT_EQ(stacked[1].to_vector<float>(), b[1].to_vector<float>());
}

TEST(DataTensorDataset, Errors) {
  EXPECT_THROW(TensorDataset(std::vector<Tensor>{}), ferry::Error);
  EXPECT_THROW(TensorDataset({Tensor()}), ferry::Error);
  EXPECT_THROW(TensorDataset({ferry::scalar_tensor(1.0)}), ferry::ShapeError);
  try {
    TensorDataset({ferry::zeros({4, 2}), ferry::zeros({3})});
    FAIL() << "dim 0 sizes 4 and 3 were accepted";
  } catch (const ferry::ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find('4'), std::string::npos) << m;
    EXPECT_NE(m.find('3'), std::string::npos) << m;
  }
  auto ds = id_dataset(4);
  EXPECT_THROW(ds->get(4), ferry::ShapeError);
  EXPECT_THROW(ds->get_batch({0, 7}), ferry::ShapeError);
  EXPECT_THROW(ds->Dataset::get_batch({}), ferry::Error);
}

// Samples of a shape and dtype chosen per index, batched by the default get_batch.
class ShapedDataset : public Dataset {
 public:
  std::size_t size() const override { return 4; }
  std::vector<Tensor> get(std::size_t i) const override {
    if (i == 1) return {ferry::full({2}, 1.0f), ferry::full({2}, 1.0f)};  // two fields
    if (i == 2) return {ferry::full({3}, 2.0f)};                          // another shape
    if (i == 3) return {ferry::full({2}, 3, {.dtype = DType::i32})};      // another dtype
    return {ferry::full({2}, float(i))};
  }
};

TEST(DataDataset, DefaultGetBatchChecksSamples) {
  ShapedDataset ds;
  EXPECT_EQ(ds.get_batch({0, 0})[0].shape(), (ferry::Shape{2, 2}));
  EXPECT_THROW(ds.get_batch({0, 1}), ferry::ShapeError);
  EXPECT_THROW(ds.get_batch({0, 2}), ferry::ShapeError);
  EXPECT_THROW(ds.get_batch({0, 3}), ferry::DTypeError);
  // Through a loader, with and without workers, the error arrives at its batch.
  for (std::size_t workers : {0u, 2u}) {
    DataLoader loader(std::make_shared<ShapedDataset>(), {.batch_size = 2, .num_workers = workers});
    EXPECT_THROW(loader.begin(), ferry::ShapeError) << workers << " workers";
  }
}

TEST(DataLoaderOptionsCheck, BadOptionsThrow) {
  EXPECT_THROW(DataLoader(nullptr), ferry::Error);
  EXPECT_THROW(DataLoader(id_dataset(3), {.batch_size = 0}), ferry::Error);
  DataLoader ok(id_dataset(3), {.batch_size = 2});
  EXPECT_EQ(ok.size(), 2u);
}

// (batch size, shuffle, drop_last, workers) over 20 samples.
using Coverage = std::tuple<std::size_t, bool, bool, std::size_t>;
class DataLoaderCoverage : public ::testing::TestWithParam<Coverage> {};

TEST_P(DataLoaderCoverage, EverySampleOncePerEpoch) {
  const auto [batch_size, shuffle, drop_last, workers] = GetParam();
  const std::size_t n = 20;
  DataLoader loader(id_dataset(std::int64_t(n)), {.batch_size = batch_size,
                                                  .shuffle = shuffle,
                                                  .seed = 7,
                                                  .drop_last = drop_last,
                                                  .num_workers = workers});
  const std::size_t full = n / batch_size,
                    expected = drop_last ? full : (n + batch_size - 1) / batch_size;
  EXPECT_EQ(loader.size(), expected);
  for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
    const std::vector<std::size_t> order = loader.sample_order(epoch);
    auto batches = epoch_ids(loader);
    ASSERT_EQ(batches.size(), expected) << "epoch " << epoch;
    std::vector<std::int64_t> seen;
    for (std::size_t k = 0; k < batches.size(); ++k) {
      const std::size_t want = std::min(batch_size, n - k * batch_size);
      EXPECT_EQ(batches[k].size(), want) << "batch " << k;
      seen.insert(seen.end(), batches[k].begin(), batches[k].end());
    }
    // The batches follow sample_order(epoch), cut into batches.
    for (std::size_t i = 0; i < seen.size(); ++i)
      ASSERT_EQ(seen[i], std::int64_t(order[i])) << "position " << i << ", epoch " << epoch;
    // Each sample once; all of them unless drop_last dropped a short batch.
    std::set<std::int64_t> unique(seen.begin(), seen.end());
    EXPECT_EQ(unique.size(), seen.size());
    EXPECT_EQ(seen.size(), drop_last ? full * batch_size : n);
    if (!shuffle) {
      EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
    }
  }
  EXPECT_EQ(loader.epoch(), 2u);
}

INSTANTIATE_TEST_SUITE_P(AllCases, DataLoaderCoverage,
                         ::testing::Combine(::testing::Values<std::size_t>(1, 4, 5, 7, 20, 25),
                                            ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values<std::size_t>(0, 3)));

TEST(DataLoader, ShuffleIsSeededAndIndependentOfWorkersAndGlobalSeed) {
  auto ds = id_dataset(50);
  auto run = [&](std::uint64_t seed, std::size_t workers, std::uint64_t epoch) {
    DataLoader loader(ds, {.batch_size = 8, .shuffle = true, .seed = seed, .num_workers = workers});
    loader.set_epoch(epoch);
    ferry::manual_seed(1000 + workers);  // the global generator plays no part
    std::vector<std::vector<float>> features;
    auto ids = epoch_ids_and_features(loader, features);
    return std::make_pair(ids, features);
  };
  const auto reference = run(42, 0, 0);
  for (std::size_t workers : {1u, 3u}) {
    const auto other = run(42, workers, 0);
    EXPECT_EQ(other.first, reference.first) << workers << " workers";
    EXPECT_EQ(other.second, reference.second) << workers << " workers";  // bit for bit
  }
  EXPECT_NE(run(42, 0, 1).first, reference.first) << "epoch 1 repeats epoch 0's order";
  EXPECT_NE(run(43, 0, 0).first, reference.first) << "seed 43 repeats seed 42's order";
  EXPECT_EQ(run(42, 3, 1).first, run(42, 0, 1).first);

  // Consecutive epochs of one loader: epoch e equals a fresh loader's epoch e.
  DataLoader loader(ds, {.batch_size = 8, .shuffle = true, .seed = 42, .num_workers = 2});
  EXPECT_EQ(epoch_ids(loader), reference.first);
  EXPECT_EQ(epoch_ids(loader), run(42, 0, 1).first);
  // The algorithm is pinned (Note [DataLoader shuffle]): mt19937_64 seeded with
  // seed_seq{seed lo, seed hi, epoch lo, epoch hi}, then Fisher-Yates.
  std::vector<std::size_t> expected(10);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = i;
  std::seed_seq seq{42u, 0u, 3u, 0u};
  std::mt19937_64 gen(seq);
  for (std::size_t i = expected.size() - 1; i > 0; --i) {
    const std::uint64_t bound = i + 1, threshold = (0 - bound) % bound;
    std::uint64_t r = gen();
    while (r < threshold) r = gen();
    std::swap(expected[i], expected[std::size_t(r % bound)]);
  }
  DataLoader small(id_dataset(10), {.shuffle = true, .seed = 42});
  EXPECT_EQ(small.sample_order(3), expected);
}

TEST(DataLoader, DropLastCounts) {
  struct Case {
    std::int64_t n;
    std::size_t batch;
    bool drop_last;
    std::size_t batches;
  };
  for (const Case& c : {Case{10, 3, false, 4}, Case{10, 3, true, 3}, Case{9, 3, true, 3},
                        Case{2, 3, true, 0}, Case{2, 3, false, 1}, Case{1, 1, true, 1}}) {
    for (std::size_t workers : {0u, 2u}) {
      DataLoader loader(id_dataset(c.n),
                        {.batch_size = c.batch, .drop_last = c.drop_last, .num_workers = workers});
      EXPECT_EQ(loader.size(), c.batches) << c.n << "/" << c.batch;
      std::size_t count = 0;
      for (const Batch& b : loader) {
        EXPECT_EQ(b.size(), 2u);
        ++count;
      }
      EXPECT_EQ(count, c.batches) << c.n << "/" << c.batch << " drop_last " << c.drop_last;
    }
  }
}

static_assert(std::input_iterator<DataLoader::Iterator>);
static_assert(std::ranges::input_range<DataLoader&>);

TEST(DataLoader, IteratorBasics) {
  DataLoader loader(id_dataset(5), {.batch_size = 2});
  DataLoader::Iterator end = loader.end();
  EXPECT_THROW(*end, ferry::Error);
  EXPECT_THROW(++end, ferry::Error);
  auto it = loader.begin();
  auto copy = it;
  EXPECT_TRUE(it == copy);
  EXPECT_EQ(it->size(), 2u);
  ++it;
  EXPECT_EQ(copy.batch_index(), 1u);  // copies share the epoch
  ++it;
  EXPECT_EQ(ids_of(*it), (std::vector<std::int64_t>{4}));
  ++it;
  EXPECT_TRUE(it == loader.end());
  EXPECT_THROW(++it, ferry::Error);
  // An empty dataset has no batches.
  DataLoader empty(std::make_shared<TensorDataset>(std::vector<Tensor>{ferry::zeros({0, 2})}));
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_TRUE(empty.begin() == empty.end());
}

}  // namespace

namespace {

// One epoch's ids in visiting order, batches joined.
std::vector<std::int64_t> flat_ids(DataLoader& loader) {
  std::vector<std::int64_t> out;
  for (const auto& b : epoch_ids(loader)) out.insert(out.end(), b.begin(), b.end());
  return out;
}

// PyTorch's DistributedSampler on 10 samples and 3 ranks, without shuffling: the order padded
// with its first samples to 12 (or cut to 9 with drop_last), rank r taking every third from r.
TEST(DistributedSampler, ShardsAsPyTorchDoes) {
  auto ds = id_dataset(10);
  const std::vector<std::vector<std::int64_t>> padded = {{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
  const std::vector<std::vector<std::int64_t>> cut = {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}};
  for (int rank = 0; rank < 3; ++rank) {
    DataLoader pad(ds, {.batch_size = 3, .sampler = ferry::data::DistributedSampler{3, rank}});
    EXPECT_EQ(pad.size(), 2u);
    EXPECT_EQ(flat_ids(pad), padded[std::size_t(rank)]) << "rank " << rank;
    DataLoader drop(ds,
                    {.batch_size = 3, .sampler = ferry::data::DistributedSampler{3, rank, true}});
    EXPECT_EQ(flat_ids(drop), cut[std::size_t(rank)]) << "rank " << rank;
  }
}

// Shuffled, the ranks share one seeded order per epoch: together they visit every sample once
// (no padding: 12 samples on 3 ranks), and the next epoch is another order.
TEST(DistributedSampler, ShuffledShardsCoverTheEpochOnce) {
  auto ds = id_dataset(12);
  std::vector<std::vector<std::int64_t>> first(3);
  for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
    std::multiset<std::int64_t> seen;
    for (int rank = 0; rank < 3; ++rank) {
      DataLoader loader(ds, {.batch_size = 2,
                             .shuffle = true,
                             .seed = 5,
                             .num_workers = 1,
                             .sampler = ferry::data::DistributedSampler{3, rank}});
      loader.set_epoch(epoch);
      const auto ids = flat_ids(loader);
      EXPECT_EQ(ids.size(), 4u);
      seen.insert(ids.begin(), ids.end());
      if (epoch == 0)
        first[std::size_t(rank)] = ids;
      else
        EXPECT_NE(ids, first[std::size_t(rank)]) << "rank " << rank;
    }
    EXPECT_EQ(seen, (std::multiset<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  }
  EXPECT_THROW(DataLoader(ds, {.sampler = ferry::data::DistributedSampler{2, 2}}),
               ferry::ValueError);
  EXPECT_THROW(DataLoader(ds, {.sampler = ferry::data::DistributedSampler{0, 0}}),
               ferry::ValueError);
}

}  // namespace
