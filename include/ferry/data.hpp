// ferry/data.hpp — datasets and the DataLoader: batches, seeded shuffling,
// worker threads, and prefetch onto the device the model trains on.
//
// Note [DataLoader threading]
// Three kinds of work happen while a DataLoader is iterated:
//  - Building host batches: Dataset::get_batch on CPU tensors. With
//    num_workers = 0 it runs on the thread that iterates; with N > 0, N
//    std::threads build batches concurrently, each taking the next batch
//    number, and the consumer receives them strictly in order (batch k is the
//    k-th whatever thread finished first). At most N * max(prefetch, 1)
//    batches are built or waiting ahead of the consumer, so memory is bounded.
//  - Moving batches to options.device: with workers, each worker moves the
//    batch it built, with Tensor::to(device), so the host-to-device copies
//    are enqueued from the worker threads while the consumer trains (devices
//    take work from any thread: Note [Device thread-safety] in
//    ferry/backend.hpp); the window above then counts batches already on the
//    device. With num_workers = 0 the iterating thread moves them: when batch
//    k is handed out, batches k+1 .. k+prefetch have already been sent. Either
//    way the copies go on the device's in-order stream and the host does not
//    wait for them (the Vulkan backend stages them through host-visible
//    memory and records the copy); a batch's copy is enqueued before the
//    consumer can see the batch, so the consumer's work on it runs after it.
//  - Errors: an exception thrown while batch k is built or moved is kept with
//    batch k and rethrown (the same exception object, via std::exception_ptr)
//    by the begin() or operator++ that would have handed out batch k; the
//    epoch then ends and its workers are joined.
// Workers are joined when an epoch ends: at its last batch, when its last
// iterator is destroyed (leaving a range-for early with break), when a new
// epoch begins, or when the DataLoader is destroyed. Joining waits for the
// get_batch calls already running (at most one per worker), never for the
// rest of the epoch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <vector>

#include "ferry/device.hpp"
#include "ferry/tensor.hpp"

namespace ferry::data {

// One batch: a tensor per field of a sample (inputs, labels, ...), each with
// a leading batch dim.
using Batch = std::vector<Tensor>;

// A source of samples, numbered 0 .. size()-1. A sample is a list of tensors
// (its fields).
//
// Contract for dataset authors: size() is constant while a DataLoader uses the
// dataset, and get() and get_batch() may be called from several threads at
// once (the DataLoader's workers): they must not mutate shared state without
// their own locking, and with num_workers > 0 they must use only the CPU
// device (return CPU tensors). An index >= size() should raise ShapeError.
class Dataset {
 public:
  virtual ~Dataset();
  virtual std::size_t size() const = 0;
  // The fields of sample `index`.
  virtual std::vector<Tensor> get(std::size_t index) const = 0;
  // The samples `indices` (in that order), each field stacked along a new
  // dim 0. The default calls get() per index and ferry::stack per field;
  // override it when a batch can be gathered at once. ShapeError when the
  // samples differ in their number of fields or a field's shape, DTypeError
  // when a field's dtype differs, Error for an empty list of indices.
  virtual Batch get_batch(const std::vector<std::size_t>& indices) const;
};

// Samples are the rows (dim 0) of a list of tensors: sample i is
// {t.select(0, i) for each t}. Holds detached handles to the tensors (no
// copy, no autograd history); the tensors must not be written to while a
// DataLoader reads them. Thread-safe for get/get_batch as Dataset requires.
class TensorDataset : public Dataset {
 public:
  // Error for an empty list or an undefined tensor; ShapeError for a 0-d
  // tensor or when dim 0 sizes differ (the message names both sizes).
  explicit TensorDataset(std::vector<Tensor> tensors);
  std::size_t size() const override { return size_; }
  // Views of row `index` (ShapeError when index >= size()).
  std::vector<Tensor> get(std::size_t index) const override;
  // One index_select per tensor with an i64 index on that tensor's device:
  // new contiguous tensors. ShapeError for an index >= size().
  Batch get_batch(const std::vector<std::size_t>& indices) const override;
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  std::size_t size_ = 0;
};

// PyTorch's DistributedSampler, for data-parallel training (ferry/nn/parallel.hpp): a loader
// with one hands rank `rank` of `num_replicas` its share of each epoch. Every rank orders the
// epoch alike (the same seed and shuffle), then the order is padded by repeating its first
// samples to a multiple of num_replicas (or, with drop_last, cut to one), and rank r takes
// samples r, r + num_replicas, r + 2 num_replicas, ...: the ranks' shards are disjoint (but
// for the padding) and of equal size, so every rank runs as many steps.
struct DistributedSampler {
  int num_replicas = 1;
  int rank = 0;
  bool drop_last = false;
  // This rank's samples of a full epoch order.
  std::vector<std::size_t> shard(const std::vector<std::size_t>& order) const;
  std::size_t num_samples(std::size_t dataset_size) const;
};

struct DataLoaderOptions {
  std::size_t batch_size = 1;  // > 0
  // Visit samples in a new order each epoch (Note [DataLoader shuffle] in
  // runtime/data/loader.cpp): a function of (seed, epoch) only, independent
  // of ferry::manual_seed and of num_workers.
  bool shuffle = false;
  std::uint64_t seed = 0;
  bool drop_last = false;         // drop the final batch when it is short
  std::size_t num_workers = 0;    // 0: batches are built on the iterating thread
  std::size_t prefetch = 2;       // batches prepared ahead (Note [DataLoader threading])
  Device device = Device::cpu();  // where batches are handed out
  // Builds CPU batches in pinned host memory (Tensor::pin_memory), so that
  // moving them to a GPU is one DMA with no staging copy: for `device` when
  // it is a GPU, for every GPU that can pin when batches stay on the CPU.
  // Where nothing can pin, batches stay unpinned (logged once).
  bool pin_memory = false;
  // Iterate this rank's share only (ValueError for a rank outside [0, num_replicas)).
  std::optional<DistributedSampler> sampler;
};

// Iterates a Dataset in batches: `for (const Batch& b : loader) ...`. Each
// begin() starts the next epoch (0, 1, 2, ...) and ends the one before it.
// Thread-compatible: one thread iterates a loader (its workers are internal).
class DataLoader {
 public:
  class Iterator;

  // Error for a null dataset, batch_size 0, or more than 4096 workers;
  // DeviceError when options.device is not available.
  explicit DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});
  // Ends the running epoch: joins its workers (Note [DataLoader threading]).
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Batches per epoch: ceil(n / batch_size), or floor with drop_last (n: the
  // sampler's num_samples when there is one).
  std::size_t size() const;
  const DataLoaderOptions& options() const { return options_; }
  const std::shared_ptr<const Dataset>& dataset() const { return dataset_; }

  // Starts epoch epoch() (ending a running one; iterators of that one then
  // throw Error from operator++) and fetches its first batch, rethrowing
  // that batch's error. Returns end() for an epoch without batches.
  Iterator begin();
  Iterator end() const;
  // The epoch the next begin() starts; set_epoch resumes a schedule (say,
  // after loading a checkpoint).
  std::uint64_t epoch() const { return next_epoch_; }
  void set_epoch(std::uint64_t epoch) { next_epoch_ = epoch; }
  // The sample indices of `epoch` in visiting order: a permutation of
  // [0, n) when shuffling, else 0, 1, ..., n-1 (drop_last not applied); with a
  // sampler, this rank's shard of that.
  std::vector<std::size_t> sample_order(std::uint64_t epoch) const;

 private:
  struct Epoch;  // one epoch's state and workers (runtime/data/loader.cpp)
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  std::uint64_t next_epoch_ = 0;
  std::weak_ptr<Epoch> running_;  // owned by the epoch's iterators
};

// An input iterator over one epoch. Copies share the epoch; the epoch ends
// (workers joined) when the last copy is destroyed. A default-constructed
// iterator is the end.
class DataLoader::Iterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = Batch;
  using difference_type = std::ptrdiff_t;
  using pointer = const Batch*;
  using reference = const Batch&;

  Iterator() = default;
  // The current batch; Error at the end.
  const Batch& operator*() const;
  const Batch* operator->() const { return &**this; }
  // Hands out the next batch, rethrowing the exception its building or
  // moving raised (the epoch then ends). Error at the end, or when the epoch
  // was ended by a newer begin() or the loader's destruction.
  Iterator& operator++();
  void operator++(int) { ++*this; }
  // Iterators are equal when both are at the end, or share an epoch and
  // position.
  bool operator==(const Iterator& other) const;
  // The number of the current batch in its epoch.
  std::size_t batch_index() const;

 private:
  friend class DataLoader;
  explicit Iterator(std::shared_ptr<Epoch> epoch) : epoch_(std::move(epoch)) {}
  bool at_end() const;
  std::shared_ptr<Epoch> epoch_;
};

}  // namespace ferry::data
