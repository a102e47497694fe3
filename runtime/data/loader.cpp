// runtime/data/loader.cpp — DataLoader: epochs, the sample order, worker
// threads and device prefetch (Note [DataLoader threading] in ferry/data.hpp).
//
// Note [DataLoader shuffle]
// The order of epoch e is a function of (options.seed, e) alone, the same on
// every platform and standard library, whatever num_workers is, and apart
// from ferry's global generator (manual_seed):
//  - an std::mt19937_64 (fully specified by the standard) is seeded with
//    std::seed_seq{seed_lo, seed_hi, e_lo, e_hi} (the 32-bit halves; the
//    standard specifies seed_seq's algorithm too);
//  - a Fisher-Yates shuffle of 0, 1, ..., n-1: for i = n-1 down to 1, swap
//    element i with element j, j uniform in [0, i]. j is drawn without bias
//    by rejection: r = gen() until r >= 2^64 mod (i+1), then j = r % (i+1).
// std::shuffle and std::uniform_int_distribution are not used: their
// algorithms are left to the implementation.
#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <system_error>
#include <thread>

#include "ferry/autograd.hpp"
#include "ferry/data.hpp"
#include "ferry/error.hpp"
#include "ferry/registry.hpp"
#include "log_internal.hpp"
#include "pinned_memory.hpp"
#include "profiler/profiler_hooks.hpp"

namespace ferry::data {
namespace {

constexpr std::size_t kMaxWorkers = 4096;

// Uniform in [0, bound), bound > 0 (Note [DataLoader shuffle]).
std::uint64_t uniform_below(std::mt19937_64& gen, std::uint64_t bound) {
  const std::uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  for (;;) {
    const std::uint64_t r = gen();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace

// One epoch. The consumer-side members are used by the iterating thread only;
// the worker-side ones are guarded by `mutex`; the rest is fixed before the
// workers start.
struct DataLoader::Epoch {
  Epoch(std::shared_ptr<const Dataset> dataset_, const DataLoaderOptions& options_,
        std::vector<std::size_t> order_, std::size_t num_batches_)
      : dataset(std::move(dataset_)),
        options(options_),
        order(std::move(order_)),
        num_batches(num_batches_),
        window(options.num_workers * std::max<std::size_t>(options.prefetch, 1)),
        pin_for(pinning_devices(options)) {}
  ~Epoch() { join_workers(); }
  Epoch(const Epoch&) = delete;
  Epoch& operator=(const Epoch&) = delete;

  // Fixed.
  const std::shared_ptr<const Dataset> dataset;
  const DataLoaderOptions options;
  const std::vector<std::size_t> order;
  const std::size_t num_batches;
  const std::size_t window;                // host batches built or waiting ahead of the consumer
  const std::vector<DeviceImpl*> pin_for;  // pin_memory: the devices batches are pinned for

  // Consumer side.
  struct Fetched {
    Batch batch;
    std::exception_ptr error;
  };
  std::size_t position = 0;          // the batch handed out; num_batches at the end
  Batch current;                     // that batch
  std::size_t next_fetch = 0;        // the next batch to take from the host side
  std::deque<Fetched> fetched;       // batches position .. next_fetch-1, moved
  bool ended_by_loader = false;      // a newer begin() or ~DataLoader ended us
  std::vector<std::thread> workers;  // joined by join_workers()

  // Worker side, under `mutex`.
  struct Slot {
    bool ready = false;
    Batch batch;
    std::exception_ptr error;
  };
  std::mutex mutex;
  std::condition_variable work_cv;   // workers wait for room, or for stop
  std::condition_variable ready_cv;  // the consumer waits for its batch
  std::size_t next_build = 0;        // the next batch a worker takes
  std::size_t taken = 0;             // batches the consumer took from `slots`
  bool stop = false;
  std::vector<Slot> slots;  // batch k lives in slots[k % window] until taken

  void start() {
    if (options.num_workers == 0 || num_batches == 0) return;
    slots.resize(window);
    const std::size_t threads = std::min(options.num_workers, num_batches);  // no idle ones
    try {
      for (std::size_t w = 0; w < threads; ++w) workers.emplace_back([this] { worker_loop(); });
    } catch (const std::system_error& e) {
      join_workers();
      throw Error(
          fmt::format("DataLoader: could not start {} worker threads ({}); use fewer "
                      "num_workers",
                      options.num_workers, e.what()));
    }
  }

  // The host batch k, built on this thread (grad mode off: batches are data).
  Batch build(std::size_t k) const {
    NoGradGuard no_grad;
    std::optional<profiler::Range> range;  // Note [Profiler]
    if (profiler::detail::on()) [[unlikely]]
      range.emplace(fmt::format("DataLoader: build batch {}", k));
    const std::size_t first = k * options.batch_size;
    const std::size_t last = std::min(first + options.batch_size, order.size());
    std::vector<std::size_t> indices(order.begin() + std::ptrdiff_t(first),
                                     order.begin() + std::ptrdiff_t(last));
    Batch batch = dataset->get_batch(indices);
    if (!pin_for.empty())
      for (Tensor& t : batch)
        if (t.device().is_cpu()) t = detail::pin_tensor(t, pin_for);
    return batch;
  }

  // The profiler's range around sending batch k to the device: its copies
  // overlap the training step's ops in the trace (Note [Profiler]).
  profiler::Range send_range(std::size_t k) const {
    if (!profiler::detail::on() || options.device.is_cpu()) [[likely]]
      return profiler::Range();
    return profiler::Range(fmt::format("DataLoader: send batch {} to {}", k, options.device.str()));
  }

  // Note [Pinned host memory]: for the loader's device when it can pin, for
  // every device that would gain by it when batches stay on the CPU; none
  // (with a warning, as PyTorch's) when pin_memory is off or nothing can pin.
  static std::vector<DeviceImpl*> pinning_devices(const DataLoaderOptions& o) {
    if (!o.pin_memory) return {};
    std::vector<DeviceImpl*> devices;
    if (o.device.is_cpu()) {
      devices = detail::default_pinning_devices();
    } else {
      DeviceImpl& d = device_impl(o.device);
      if (d.capabilities().host_registration) devices.push_back(&d);
    }
    if (devices.empty()) {
      static std::once_flag warned;
      std::call_once(warned, [&] {
        FERRY_WARN(
            "DataLoader: pin_memory is set but no device pins host memory for {}; "
            "batches are not pinned",
            o.device.str());
      });
    }
    return devices;
  }

  void worker_loop() {
    for (;;) {
      std::size_t k = 0;
      {
        std::unique_lock<std::mutex> lock(mutex);
        work_cv.wait(
            lock, [&] { return stop || next_build >= num_batches || next_build < taken + window; });
        if (stop || next_build >= num_batches) return;
        k = next_build++;
      }
      Slot slot;
      slot.ready = true;
      try {
        slot.batch = build(k);
        NoGradGuard no_grad;
        // Enqueued on the device's stream from this thread (Note [DataLoader threading]).
        const profiler::Range range = send_range(k);
        for (Tensor& t : slot.batch) t = t.to(options.device);
      } catch (...) {
        slot.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex);
        slots[k % window] = std::move(slot);
      }
      ready_cv.notify_one();  // one consumer
    }
  }

  // Batch k from the workers, in order; rethrows the worker's exception.
  Batch take(std::size_t k) {
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(mutex);
      // Batch k is always taken by a worker eventually: k < taken + window
      // holds once batches 0 .. k-1 are taken, and only this thread stops them.
      ready_cv.wait(lock, [&] { return slots[k % window].ready; });
      slot = std::move(slots[k % window]);
      slots[k % window] = Slot{};
      taken = k + 1;
    }
    work_cv.notify_all();
    if (slot.error) std::rethrow_exception(slot.error);
    return std::move(slot.batch);
  }

  // Batch k built (here or by a worker) and moved to the device; an error is
  // kept with the batch.
  Fetched fetch(std::size_t k) {
    Fetched f;
    try {
      NoGradGuard no_grad;
      if (options.num_workers > 0) {
        f.batch = take(k);  // the worker has moved it
      } else {
        Batch batch = build(k);
        const profiler::Range range = send_range(k);
        for (Tensor& t : batch) t = t.to(options.device);  // enqueued on the device's stream
        f.batch = std::move(batch);
      }
    } catch (...) {
      f.error = std::current_exception();
    }
    return f;
  }

  // Hands out batch k, first sending batches k+1 .. k+prefetch to a non-CPU
  // device when there are no workers to do it (Note [DataLoader threading]).
  void hand_out(std::size_t k) {
    current.clear();  // the previous batch's memory goes back first
    position = k;
    const std::size_t lookahead =
        options.device.is_cpu() || options.num_workers > 0 ? 0 : options.prefetch;
    const std::size_t until = std::min(k + 1 + lookahead, num_batches);
    while (next_fetch < until) fetched.push_back(fetch(next_fetch++));
    Fetched f = std::move(fetched.front());
    fetched.pop_front();
    if (f.error) {
      finish();
      std::rethrow_exception(f.error);
    }
    current = std::move(f.batch);
  }

  void advance() {
    if (position + 1 >= num_batches) {
      finish();
      return;
    }
    hand_out(position + 1);
  }

  // Ends the epoch: workers joined, batches released, position at the end.
  void finish() {
    join_workers();
    fetched.clear();
    current.clear();
    position = num_batches;
  }

  void join_workers() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    work_cv.notify_all();
    for (std::thread& t : workers)
      if (t.joinable()) t.join();
    workers.clear();
  }
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  if (!dataset_) throw Error("DataLoader: the dataset is null");
  if (options_.batch_size == 0) throw Error("DataLoader: batch_size is 0; it must be at least 1");
  if (options_.num_workers > kMaxWorkers)
    throw Error(fmt::format("DataLoader: num_workers is {}; at most {} worker threads are allowed",
                            options_.num_workers, kMaxWorkers));
  if (const auto& d = options_.sampler;
      d && (d->num_replicas < 1 || d->rank < 0 || d->rank >= d->num_replicas))
    throw ValueError(
        fmt::format("DataLoader: the sampler's rank {} is not in [0, num_replicas = {})", d->rank,
                    d->num_replicas));
  if (!is_available(options_.device.str()))
    throw DeviceError(fmt::format("DataLoader: device {} is not available ({})",
                                  options_.device.str(), describe_devices()));
}

DataLoader::~DataLoader() {
  if (std::shared_ptr<Epoch> running = running_.lock()) {
    running->finish();
    running->ended_by_loader = true;
  }
}

std::size_t DistributedSampler::num_samples(std::size_t n) const {
  const std::size_t r = std::size_t(num_replicas);
  return drop_last ? n / r : (n + r - 1) / r;
}

std::vector<std::size_t> DistributedSampler::shard(const std::vector<std::size_t>& order) const {
  const std::size_t r = std::size_t(num_replicas), total = num_samples(order.size()) * r;
  std::vector<std::size_t> mine;
  if (order.empty()) return mine;
  for (std::size_t i = std::size_t(rank); i < total; i += r)
    mine.push_back(order[i % order.size()]);
  return mine;
}

std::size_t DataLoader::size() const {
  const std::size_t n = options_.sampler ? options_.sampler->num_samples(dataset_->size())
                                         : dataset_->size(),
                    b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

namespace {
void shuffle(std::vector<std::size_t>& order, std::uint64_t seed, std::uint64_t epoch);
}

std::vector<std::size_t> DataLoader::sample_order(std::uint64_t epoch) const {
  std::vector<std::size_t> order(dataset_->size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  if (options_.shuffle && order.size() >= 2) shuffle(order, options_.seed, epoch);
  return options_.sampler ? options_.sampler->shard(order) : order;
}

namespace {
// Note [DataLoader shuffle]'s Fisher-Yates shuffle of epoch `epoch`.
void shuffle(std::vector<std::size_t>& order, std::uint64_t seed, std::uint64_t epoch) {
  std::seed_seq seq{std::uint32_t(seed), std::uint32_t(seed >> 32), std::uint32_t(epoch),
                    std::uint32_t(epoch >> 32)};
  std::mt19937_64 gen(seq);
  for (std::size_t i = order.size() - 1; i > 0; --i)
    std::swap(order[i], order[std::size_t(uniform_below(gen, std::uint64_t(i) + 1))]);
}
}  // namespace

DataLoader::Iterator DataLoader::begin() {
  if (std::shared_ptr<Epoch> running = running_.lock()) {
    running->finish();
    running->ended_by_loader = true;
  }
  const std::size_t num_batches = size();
  auto epoch = std::make_shared<Epoch>(dataset_, options_, sample_order(next_epoch_), num_batches);
  ++next_epoch_;
  if (num_batches == 0) return end();
  running_ = epoch;
  epoch->start();
  epoch->hand_out(0);  // rethrows batch 0's error; `epoch` then joins as it goes
  return Iterator(std::move(epoch));
}

DataLoader::Iterator DataLoader::end() const { return Iterator(); }

bool DataLoader::Iterator::at_end() const {
  return !epoch_ || epoch_->position >= epoch_->num_batches;
}

const Batch& DataLoader::Iterator::operator*() const {
  if (at_end()) throw Error("DataLoader: dereferencing an iterator at the end of its epoch");
  return epoch_->current;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  if (epoch_ && epoch_->ended_by_loader)
    throw Error(
        "DataLoader: this epoch was ended by a newer begin() or by the loader's "
        "destruction; start a new one with begin()");
  if (at_end()) throw Error("DataLoader: operator++ on an iterator at the end of its epoch");
  epoch_->advance();
  return *this;
}

bool DataLoader::Iterator::operator==(const Iterator& other) const {
  const bool a = at_end(), b = other.at_end();
  if (a || b) return a == b;
  return epoch_ == other.epoch_;
}

std::size_t DataLoader::Iterator::batch_index() const {
  if (!epoch_) throw Error("DataLoader: batch_index() of an end iterator");
  return epoch_->position;
}

}  // namespace ferry::data
