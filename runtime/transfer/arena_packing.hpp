// runtime/transfer/arena_packing.hpp — how items of memory are laid end to end into arenas:
// the transfer planner's arenas (plan.cpp: a migration's storages in one allocation per device
// pair) and DistributedDataParallel's buckets (runtime/nn/distributed_data_parallel.cpp: a
// model's gradients in one tensor per all-reduce) are both this.
//
// Note [Arena packing]
// Items are placed in the order given. Each goes at the end of the last arena, rounded up to
// `align` bytes, unless that would take the arena past `cap` bytes, or the caller says the
// item cannot share it (another dtype or device): then it starts an arena of its own. An item
// larger than the cap gets an arena to itself rather than an error; the caller decides whether
// such an arena can exist. An arena's size is its end, rounded up to `align`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ferry::detail {

class ArenaPacker {
 public:
  struct Slot {
    std::size_t arena = 0;
    std::uint64_t offset = 0;  // bytes from the arena's start
  };
  // cap: an arena's most bytes (0: no limit); align: a power of two or any positive number.
  ArenaPacker(std::uint64_t cap, std::uint64_t align) : cap_(cap), align_(align ? align : 1) {}

  Slot place(std::uint64_t bytes, bool fresh = false) {
    if (arenas_.empty() || fresh || (arenas_.back() > 0 && cap_ && arenas_.back() + bytes > cap_))
      arenas_.push_back(0);
    const Slot slot{arenas_.size() - 1, arenas_.back()};
    arenas_.back() = round_up(slot.offset + bytes);
    return slot;
  }
  // Each arena's size, in the order they were started.
  const std::vector<std::uint64_t>& arena_bytes() const { return arenas_; }

 private:
  std::uint64_t round_up(std::uint64_t n) const { return (n + align_ - 1) / align_ * align_; }

  std::uint64_t cap_, align_;
  std::vector<std::uint64_t> arenas_;
};

}  // namespace ferry::detail
