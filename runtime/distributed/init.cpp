// runtime/distributed/init.cpp — ferry::distributed::init and the default group: the backend
// module loaded from the search path, the group's options from InitOptions or the environment,
// its device, and the job joined through a rendezvous (Note [Process groups] in
// ferry/distributed.hpp).
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>

#include "dispatch.hpp"
#include "distributed/chunked_staging.hpp"
#include "distributed/collectives.hpp"
#include "distributed/process_group.hpp"
#include "distributed/rendezvous.hpp"
#include "ferry/backend.hpp"
#include "ferry/distributed.hpp"
#include "ferry/kit/env.hpp"
#include "ferry/registry.hpp"

namespace ferry::distributed {

namespace {

bool compare_calls_from(const InitOptions& o) {
  if (o.compare_calls) return *o.compare_calls;
  return kit::env::choice("FERRY_DISTRIBUTED_COMPARE_CALLS", {"0", "1"}, "1") == "1";
}

std::chrono::milliseconds timeout_from(const InitOptions& o) {
  if (o.timeout.count() > 0) return o.timeout;
  if (const auto s =
          kit::env::positive_number("FERRY_DISTRIBUTED_TIMEOUT", "a positive number of seconds"))
    return std::chrono::milliseconds(std::max<std::int64_t>(1, std::int64_t(*s * 1000)));
  return std::chrono::minutes(5);
}

// The module libferry_distributed_<name>.so from the backend search path.
std::unique_ptr<Collectives> open_backend(const std::string& name) {
  const std::string file = "libferry_distributed_" + name + ".so";
  std::vector<std::string> tried;
  for (const std::string& dir : backend_search_path()) {
    const std::string path = (std::filesystem::path(dir) / file).string();
    if (!std::filesystem::exists(path)) {
      tried.push_back(dir);
      continue;
    }
    // RTLD_GLOBAL: the collective library opens components of its own that look for its
    // symbols (Open MPI's MCA modules).
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      const char* err = dlerror();
      throw UnsupportedError(fmt::format("distributed: the {} backend ({}) could not be loaded: {}",
                                         name, path, err ? err : "unknown error"));
    }
    auto create =
        reinterpret_cast<FerryCreateCollectivesFn>(dlsym(handle, "ferry_create_collectives"));
    if (!create)
      throw UnsupportedError(
          fmt::format("distributed: {} does not export ferry_create_collectives", path));
    Collectives* c = create(kCollectivesAbiVersion);
    if (!c)
      throw UnsupportedError(
          fmt::format("distributed: {} was built for another collectives ABI (this is {})", path,
                      kCollectivesAbiVersion));
    return std::unique_ptr<Collectives>(c);
  }
  throw UnsupportedError(fmt::format(
      "distributed: no '{}' backend: {} is not in the backend search path ({}); ferry builds "
      "it where {} is found at build time{}",
      name, file, fmt::join(tried, ", "),
      name == "mpi"    ? "Open MPI (libopenmpi-dev)"
      : name == "nccl" ? "the CUDA toolkit and NCCL (nccl.h, libnccl.so)"
                       : name,
      name == "mpi" || name == "nccl" ? "" : " (known backends: mpi, nccl)"));
}

// A device module's device (InitOptions::device, else its backend's device numbered by the
// local rank); none for a module over host memory.
std::optional<Device> group_device(const Collectives& lib, const InitOptions& o,
                                   const JobPlace& place) {
  const std::string backend = lib.device_backend();
  if (backend.empty()) {
    if (o.device)
      throw ValueError(
          fmt::format("distributed: the {} backend takes tensors on every device; "
                      "InitOptions::device is for a device backend's group (nccl)",
                      lib.name()));
    return std::nullopt;
  }
  if (o.device) {
    if (o.device->type() != backend)
      throw DeviceError(fmt::format("distributed: the {} backend runs on {} devices, not {}",
                                    lib.name(), backend, o.device->str()));
    return o.device;
  }
  int usable = 0;
  std::string reason;
  for (const DeviceInfo& d : devices()) {
    if (d.backend != backend) continue;
    if (d.available)
      ++usable;
    else if (reason.empty())
      reason = d.unavailable_reason;
  }
  if (usable == 0)
    throw UnsupportedError(
        fmt::format("distributed: the {} backend runs on {} devices, and this machine has none "
                    "usable ({})",
                    lib.name(), backend, reason.empty() ? backend + " has no devices" : reason));
  return Device::unchecked(backend, place.local_rank % usable);
}

std::mutex g_mutex;
std::shared_ptr<ProcessGroup> g_default;

}  // namespace

std::shared_ptr<ProcessGroup> init(const InitOptions& options) {
  std::lock_guard lock(g_mutex);
  if (g_default)
    throw Error(fmt::format("distributed::init: already initialized (backend {}, rank {} of {})",
                            g_default->backend(), g_default->rank(), g_default->size()));
  const auto timeout = timeout_from(options);
  const bool compare_calls = compare_calls_from(options);
  const std::size_t chunk_bytes = staging_chunk_bytes();
  const JobPlace place = job_place(options.rank, options.world_size);
  std::unique_ptr<Collectives> lib = open_backend(options.backend);
  const std::optional<Device> device = group_device(*lib, options, place);
  std::string path = options.rendezvous;
  if (const char* env = std::getenv("FERRY_RENDEZVOUS"); path.empty() && env) path = env;
  const std::unique_ptr<Rendezvous> rendezvous = make_rendezvous(path, place, timeout);
  JoinArgs args{.rendezvous = rendezvous.get()};
  if (device) {
    args.device_index = device->index();
    args.queue = device_impl(*device).native_queue();
    if (!args.queue)
      throw UnsupportedError(fmt::format("distributed: {} gives no queue for the {} backend",
                                         device->str(), options.backend));
  }
  lib->join(args);
  if (lib->rank() != place.rank || lib->size() != place.size)
    throw ValueError(
        fmt::format("distributed: the {} backend joined as rank {} of {}, where InitOptions or the "
                    "environment (FERRY_RANK, FERRY_WORLD_SIZE) say rank {} of {}",
                    options.backend, lib->rank(), lib->size(), place.rank, place.size));
  g_default = make_process_group(std::move(lib), timeout, device, chunk_bytes, compare_calls);
  return g_default;
}

bool is_initialized() {
  std::lock_guard lock(g_mutex);
  return bool(g_default);
}

std::shared_ptr<ProcessGroup> default_group() {
  std::lock_guard lock(g_mutex);
  if (!g_default) throw Error("distributed: no process group; call ferry::distributed::init()");
  return g_default;
}

void shutdown() {
  std::shared_ptr<ProcessGroup> g;
  {
    std::lock_guard lock(g_mutex);
    g = std::move(g_default);
  }
  if (g) g->barrier();  // every rank is done before any leaves
}

}  // namespace ferry::distributed
