// runtime/data/dataset.cpp — Dataset's default batching and TensorDataset.
#include <fmt/format.h>

#include <cstdint>

#include "ferry/data.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"

namespace ferry::data {

Dataset::~Dataset() = default;

Batch Dataset::get_batch(const std::vector<std::size_t>& indices) const {
  if (indices.empty())
    throw Error(
        "Dataset::get_batch: the list of indices is empty; a batch needs at least one "
        "sample");
  std::vector<std::vector<Tensor>> samples;
  samples.reserve(indices.size());
  for (std::size_t index : indices) samples.push_back(get(index));

  const std::vector<Tensor>& first = samples[0];
  for (std::size_t f = 0; f < first.size(); ++f)
    if (!first[f].defined())
      throw Error(fmt::format("Dataset::get_batch: field {} of sample {} is an undefined tensor", f,
                              indices[0]));
  for (std::size_t s = 1; s < samples.size(); ++s) {
    const std::vector<Tensor>& sample = samples[s];
    if (sample.size() != first.size())
      throw ShapeError(fmt::format(
          "Dataset::get_batch: sample {} has {} fields but sample {} has {}; every sample of a "
          "batch needs the same fields",
          indices[s], sample.size(), indices[0], first.size()));
    for (std::size_t f = 0; f < first.size(); ++f) {
      const Tensor& t = sample[f];
      if (!t.defined())
        throw Error(fmt::format("Dataset::get_batch: field {} of sample {} is an undefined tensor",
                                f, indices[s]));
      if (t.sizes() != first[f].sizes())
        throw ShapeError(fmt::format(
            "Dataset::get_batch: field {} of sample {} has shape {} but sample {} has shape {}; "
            "samples are stacked, so their shapes must be equal (pad them, or override get_batch)",
            f, indices[s], shape_str(t.sizes()), indices[0], shape_str(first[f].sizes())));
      if (t.dtype() != first[f].dtype())
        throw DTypeError(fmt::format(
            "Dataset::get_batch: field {} of sample {} is {} but sample {} is {}; samples are "
            "stacked, so their dtypes must be equal",
            f, indices[s], dtype_name(t.dtype()), indices[0], dtype_name(first[f].dtype())));
    }
  }

  Batch batch;
  batch.reserve(first.size());
  std::vector<Tensor> field(samples.size());
  for (std::size_t f = 0; f < first.size(); ++f) {
    for (std::size_t s = 0; s < samples.size(); ++s) field[s] = samples[s][f];
    batch.push_back(stack(field, 0));
  }
  return batch;
}

TensorDataset::TensorDataset(std::vector<Tensor> tensors) {
  if (tensors.empty())
    throw Error(
        "TensorDataset: the list of tensors is empty; pass at least one tensor whose dim 0 "
        "numbers the samples");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined()) throw Error(fmt::format("TensorDataset: tensors[{}] is undefined", i));
    if (t.dim() == 0)
      throw ShapeError(fmt::format(
          "TensorDataset: tensors[{}] is 0-d; dim 0 numbers the samples, so every tensor needs at "
          "least one dim (unsqueeze it)",
          i));
    if (t.size(0) != tensors[0].size(0))
      throw ShapeError(fmt::format(
          "TensorDataset: tensors[{}] has {} samples (shape {}) but tensors[0] has {} (shape {}); "
          "every tensor needs the same size of dim 0",
          i, t.size(0), shape_str(t.sizes()), tensors[0].size(0), shape_str(tensors[0].sizes())));
  }
  size_ = std::size_t(tensors[0].size(0));
  tensors_.reserve(tensors.size());
  for (const Tensor& t : tensors) tensors_.push_back(t.detach());
}

namespace {
void check_index(std::size_t index, std::size_t size) {
  if (index >= size)
    throw ShapeError(fmt::format(
        "TensorDataset: sample index {} is out of range for a dataset of {} samples (expected 0 "
        "to {})",
        index, size, std::int64_t(size) - 1));
}
}  // namespace

std::vector<Tensor> TensorDataset::get(std::size_t index) const {
  check_index(index, size_);
  std::vector<Tensor> sample;
  sample.reserve(tensors_.size());
  for (const Tensor& t : tensors_) sample.push_back(t.select(0, std::int64_t(index)));
  return sample;
}

Batch TensorDataset::get_batch(const std::vector<std::size_t>& indices) const {
  std::vector<std::int64_t> rows;
  rows.reserve(indices.size());
  for (std::size_t index : indices) {
    check_index(index, size_);
    rows.push_back(std::int64_t(index));
  }
  Tensor host_index = tensor(rows, {std::int64_t(rows.size())});
  Batch batch;
  batch.reserve(tensors_.size());
  for (const Tensor& t : tensors_) batch.push_back(index_select(t, 0, host_index.to(t.device())));
  return batch;
}

}  // namespace ferry::data
