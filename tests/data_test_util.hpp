// Shared by the data-loading tests (test_data*.cpp): a TensorDataset whose
// samples carry their own id, and readers of a loader's epochs.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ferry/ferry.hpp"

namespace ferry_data_test {

using ferry::Tensor;
using ferry::data::Batch;
using ferry::data::DataLoader;
using ferry::data::TensorDataset;

// n samples: field 0 is the sample's id (i64), field 1 its features
// {id, id + 0.5, -id} (f32).
inline std::shared_ptr<TensorDataset> id_dataset(std::int64_t n) {
  std::vector<std::int64_t> ids(std::size_t(n), 0);
  std::vector<float> features;
  for (std::int64_t i = 0; i < n; ++i) {
    ids[std::size_t(i)] = i;
    features.insert(features.end(), {float(i), float(i) + 0.5f, -float(i)});
  }
  return std::make_shared<TensorDataset>(
      std::vector<Tensor>{ferry::tensor(ids), ferry::tensor(features, {n, 3})});
}

inline std::vector<std::int64_t> ids_of(const Batch& b) {
  return b.at(0).to_vector<std::int64_t>();
}

// Every batch of one epoch, as ids.
inline std::vector<std::vector<std::int64_t>> epoch_ids(DataLoader& loader) {
  std::vector<std::vector<std::int64_t>> out;
  for (const Batch& b : loader) out.push_back(ids_of(b));
  return out;
}

// Every batch of one epoch, as the raw values of each field (bit-exact checks).
inline std::vector<std::vector<std::int64_t>> epoch_ids_and_features(
    DataLoader& loader, std::vector<std::vector<float>>& f) {
  std::vector<std::vector<std::int64_t>> out;
  f.clear();
  for (const Batch& b : loader) {
    out.push_back(ids_of(b));
    f.push_back(b.at(1).to_vector<float>());
  }
  return out;
}

}  // namespace ferry_data_test
