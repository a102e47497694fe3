// ferry/transfer.hpp — the transfer planner: moves a whole model (parameters,
// gradients, buffers), its optimizer's state and any other tensors between
// devices in one batched, all-or-nothing hop.
//
// Note [Transfer planning]
// A plan starts from a list of named tensors. Tensors listed twice (one
// TensorImpl under two names: a tied weight) are one entry; tensors that share
// a Storage (views, a gradient aliasing another tensor) are found by storage
// identity, so each storage moves once and every view of it stays a view of
// the same moved memory. Storages are grouped by (source, destination)
// device; each group gets one destination allocation (the arena, Note
// [Transfer arenas]) and its bytes move in few large copies: small storages
// are packed into staging chunks (the device's pinned or host-visible staging
// memory when it has some), large ones are streamed through the same chunks,
// two of them in flight so that packing one overlaps copying the other.
// Extra host memory is bounded by `staging_bytes`, whatever the model's size;
// the arena is the only allocation that grows with the model.
//
// Note [All or nothing]
// execute() checks every destination's free memory first (OutOfMemoryError
// naming the bytes needed and free), allocates every destination, copies
// every byte and waits for every copy; only then does it switch all tensors at
// once, with operations that cannot fail. A failure before that point (an
// allocation, a copy, a driver error) frees what it allocated and leaves every
// tensor where it was, bit for bit, usable. The switch keeps each Storage's
// identity (Storage::exchange): handles, views and optimizer state held
// anywhere follow the move. With a dtype conversion a floating storage cannot
// keep its identity (its elements change size): the listed tensors are
// rebound to a new storage of the new dtype, like PyTorch's module.to(dtype);
// views of it that were not listed stay on the old memory.
//
// Note [Transfer arenas]
// An arena is one allocation holding many storages, each at an offset aligned
// to kSubBufferAlignment (ferry/backend.hpp), each a sub-buffer that keeps the
// arena alive: the memory returns to the device when the last tensor using it
// is freed. An arena is split where it would exceed the device's largest
// allocation; TransferOptions::separate_allocations, or a device without
// sub-buffers, gives every storage its own allocation instead.
//
// Thread-safety: planning and executing must not race with other use of the
// tensors being moved (a model is moved by one thread while no other uses
// it). Other threads may keep using the devices involved meanwhile, on other
// tensors: allocating, freeing, running ops (Note [Device thread-safety]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ferry/device.hpp"
#include "ferry/dtype.hpp"
#include "ferry/tensor.hpp"

namespace ferry {

namespace nn {
class Module;
}
namespace optim {
class Optimizer;
}

struct TransferOptions {
  // Converts floating tensors (f32, f16, bf16, f64) to this dtype on the way,
  // on whichever side moves fewer bytes; integer and bool tensors keep theirs.
  std::optional<DType> dtype;
  // One allocation per storage instead of one arena per destination.
  bool separate_allocations = false;
  // The most extra host memory the plan uses for staging (two chunks of half
  // this size); at least 64 KiB.
  std::size_t staging_bytes = std::size_t(64) << 20;
  // Tensors to move with the model, under names used by explain() and errors.
  std::vector<std::pair<std::string, Tensor>> extra;
};

// One (source, destination) device pair of a migration.
struct TransferPairReport {
  Device source = Device::cpu();
  Device destination = Device::cpu();
  std::size_t storages = 0;
  std::uint64_t bytes = 0;  // bytes written at the destination
  std::size_t copies = 0;   // copy calls made to devices
  double seconds = 0;       // from the first copy of this pair to its last completion
  double gb_per_s() const { return seconds > 0 ? double(bytes) / seconds / 1e9 : 0; }
};

struct MigrationReport {
  double seconds = 0;  // the whole execute(), checks and commit included
  std::uint64_t bytes = 0;
  std::vector<TransferPairReport> pairs;
  std::string str() const;  // one line per pair
};

// A planned migration: what moves where, in which batches. Made by
// plan_migration; executed once (a second execute() raises Error).
class TransferPlan {
 public:
  struct State;
  explicit TransferPlan(std::shared_ptr<State> state);
  ~TransferPlan();
  TransferPlan(TransferPlan&&) noexcept;
  TransferPlan& operator=(TransferPlan&&) noexcept;

  // Tensors, unique storages, aliases found (ties and views, by name), bytes,
  // and per device pair: storages, bytes, arena allocations, staging chunks
  // and copy calls; and the peak extra memory the plan needs on each device
  // and on the host.
  std::string explain() const;
  // Runs the plan (Note [All or nothing]). Error if the tensors were moved,
  // freed or resized since planning, or if the plan already ran.
  MigrationReport execute();

  std::size_t num_tensors() const;   // distinct tensors listed
  std::size_t num_storages() const;  // unique storages that move or convert
  std::uint64_t bytes() const;       // bytes written at the destinations
  // Extra memory the plan needs while it runs on `device` (the arena, staging
  // and conversion temporaries); 0 for a device it does not touch.
  std::uint64_t peak_bytes(const Device& device) const;

 private:
  std::shared_ptr<State> state_;
};

// Plans moving `tensors` to `device` (nullopt: each stays on its device, for a
// dtype-only conversion). DeviceError when the device is unknown or
// unavailable; Error for an undefined tensor.
TransferPlan plan_migration(const std::vector<std::pair<std::string, Tensor>>& tensors,
                            std::optional<Device> device, const TransferOptions& options = {});
// A module's parameters, their gradients and its buffers (persistent or not).
TransferPlan plan_migration(nn::Module& module, const Device& device,
                            const TransferOptions& options = {});
// ... and every parameter and state tensor of `optimizer`.
TransferPlan plan_migration(nn::Module& module, optim::Optimizer& optimizer, const Device& device,
                            const TransferOptions& options = {});

// plan_migration(...).execute().
MigrationReport migrate(nn::Module& module, const Device& device,
                        const TransferOptions& options = {});
MigrationReport migrate(nn::Module& module, optim::Optimizer& optimizer, const Device& device,
                        const TransferOptions& options = {});

}  // namespace ferry
