// runtime/distributed/process_group.hpp — the process group over a backend module's
// Collectives (process_group.cpp), as init() makes it.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>

#include "distributed/collectives.hpp"
#include "ferry/device.hpp"
#include "ferry/distributed.hpp"

namespace ferry::distributed {

// A group over `lib`, which has joined its job. `device`: the device of a device module's
// group (its buffers are that device's memory), none for a module over host memory.
// `chunk_bytes`: Note [Chunked staging]; `compare_calls`: the ranks' calls are compared before
// each collective (InitOptions::compare_calls).
std::shared_ptr<ProcessGroup> make_process_group(std::unique_ptr<Collectives> lib,
                                                 std::chrono::milliseconds timeout,
                                                 std::optional<Device> device,
                                                 std::size_t chunk_bytes, bool compare_calls);

}  // namespace ferry::distributed
