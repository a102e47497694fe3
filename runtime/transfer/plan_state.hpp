// runtime/transfer/plan_state.hpp — what a TransferPlan holds between
// plan_migration and execute (Note [Transfer planning] in ferry/transfer.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "copy_route.hpp"
#include "ferry/backend.hpp"
#include "ferry/transfer.hpp"

namespace ferry {

// One storage that moves and/or converts.
struct PlannedStorage {
  std::shared_ptr<Storage> storage;  // released once the plan has run
  Buffer* planned_buffer = nullptr;  // the buffer at planning time (staleness check)
  std::size_t src_bytes = 0;
  std::size_t dst_bytes = 0;
  DType src_dtype = DType::f32;
  DType dst_dtype = DType::f32;
  bool convert = false;              // dst_dtype != src_dtype
  std::vector<std::size_t> tensors;  // indices into State::tensors
  std::string name;                  // the first tensor's name
  std::size_t group = 0;
  std::size_t arena = 0;   // within the group; unused with separate allocations
  std::size_t offset = 0;  // within the arena
};

// Storages of one (source, destination) device pair.
struct TransferGroup {
  DeviceImpl* src = nullptr;
  DeviceImpl* dst = nullptr;
  bool arenas = false;                                  // one arena per (split of the) group
  detail::CopyRoute route = detail::CopyRoute::staged;  // Note [Copy routes]
  std::vector<std::size_t> arena_bytes;                 // when `arenas`
  std::vector<std::size_t> storages;   // indices into State::storages, in layout order
  std::uint64_t bytes = 0;             // destination bytes
  std::size_t largest_conversion = 0;  // the biggest temporary a conversion makes
  // Storages in pinned memory copied by the destination's DMA (route dma).
  std::size_t dma_storages = 0;
  std::uint64_t dma_bytes = 0;
};

struct ListedTensor {
  std::string name;
  Tensor tensor;  // released once the plan has run
};

struct TransferPlan::State {
  std::vector<ListedTensor> tensors;  // distinct TensorImpls, first names
  std::vector<PlannedStorage> storages;
  std::vector<TransferGroup> groups;
  std::size_t unique_storages = 0;   // moving or not
  std::vector<std::string> aliases;  // "b is a (tied)", "v shares a's storage (view)"
  std::optional<Device> destination;
  TransferOptions options;  // without `extra`
  bool executed = false;
};

MigrationReport execute_plan(TransferPlan::State& s);

}  // namespace ferry
