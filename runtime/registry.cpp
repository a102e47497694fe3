// runtime/registry.cpp — backends, their devices, and module discovery
// (Note [Backend discovery] in ferry/registry.hpp).
#include "ferry/registry.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "cpu/cpu_backend.hpp"
#include "deferred_checks.hpp"
#include "ferry/backend.hpp"
#include "ferry/error.hpp"
#include "log_internal.hpp"
#include "profiler/profiler_hooks.hpp"
#include "registry_internal.hpp"

namespace ferry {
namespace {

namespace fs = std::filesystem;

constexpr const char* kModulePrefix = "libferry_backend_";
constexpr const char* kModuleSuffix = ".so";
// Backends a user expects to hear about even when this build lacks them.
constexpr const char* kWellKnown[] = {"cuda", "vulkan"};

struct BackendEntry {
  std::string name;
  Backend* backend = nullptr;        // null when unavailable
  std::unique_ptr<Backend> owned;    // built-in and registered backends
  std::vector<DeviceImpl*> devices;  // cached at load
  std::string reason;                // why unavailable
  std::string module_path;
  bool pending = false;  // found on the search path, not opened yet (Note [Backend discovery])
};

struct Registry {
  std::mutex mutex;
  std::vector<BackendEntry> entries;
  bool discovered = false;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: buffers may outlive static teardown
  return *r;
}

std::string self_library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&self_library_dir), &info) && info.dli_fname)
    return fs::path(info.dli_fname).parent_path().string();
  return {};
}

int backend_rank(const std::string& name) {
  if (name == "cpu") return 0;
  if (name == "cuda") return 1;
  if (name == "vulkan") return 2;
  return 3;
}

void sort_entries(std::vector<BackendEntry>& entries) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const BackendEntry& a, const BackendEntry& b) {
                     int ra = backend_rank(a.name), rb = backend_rank(b.name);
                     return ra != rb ? ra < rb : a.name < b.name;
                   });
}

BackendEntry* find_entry(Registry& r, std::string_view name) {
  for (auto& e : r.entries)
    if (e.name == name) return &e;
  return nullptr;
}

// Fills an entry from a live backend, turning any failure into a reason.
void adopt_backend(BackendEntry& e, Backend* backend) {
  try {
    std::string reason = backend->unavailable_reason();
    if (!reason.empty()) {
      e.reason = reason;
      return;
    }
    e.devices = backend->devices();
    if (e.devices.empty()) {
      e.reason = fmt::format("{}: the backend loaded but found no devices", e.name);
      return;
    }
    e.backend = backend;
  } catch (const std::exception& ex) {
    e.reason = fmt::format("{}: initialisation failed: {}", e.name, ex.what());
  }
}

// Opens one module file; the entry says whether it worked and, if not, why.
BackendEntry open_module(const std::string& path, const std::string& expected_name) {
  BackendEntry e;
  e.name = expected_name;
  e.module_path = path;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    e.reason =
        fmt::format("{}: could not load module {}: {}", e.name, path, err ? err : "unknown error");
  } else if (auto create =
                 reinterpret_cast<Backend* (*)(int)>(dlsym(handle, "ferry_create_backend"));
             !create) {
    e.reason = fmt::format("{}: module {} does not export ferry_create_backend", e.name, path);
  } else {
    Backend* backend = nullptr;
    try {
      backend = create(kBackendAbiVersion);
    } catch (const std::exception& ex) {
      e.reason = fmt::format("{}: module {} failed to start: {}", e.name, path, ex.what());
    }
    if (!backend && e.reason.empty()) {
      e.reason = fmt::format("{}: module {} was built for another ferry backend ABI (this is {})",
                             e.name, path, kBackendAbiVersion);
    } else if (backend) {
      e.name = backend->name();
      adopt_backend(e, backend);
    }
  }
  FERRY_INFO("backend module {}: {}", path, e.reason.empty() ? "loaded" : e.reason);
  return e;
}

// Records a discovered module unless a module of that name was found earlier
// on the search path (the first one found wins).
void add_discovered(Registry& r, BackendEntry e) {
  if (BackendEntry* existing = find_entry(r, e.name)) {
    if (existing->backend || !existing->module_path.empty()) return;
    *existing = std::move(e);
  } else {
    r.entries.push_back(std::move(e));
  }
}

void discover_locked(Registry& r) {
  if (r.discovered) return;
  r.discovered = true;
  BackendEntry cpu;
  cpu.name = "cpu";
  try {
    cpu.owned = make_cpu_backend();
  } catch (...) {  // a bad FERRY_CPU_* setting: refused again at the next use, not half-found
    r.discovered = false;
    throw;
  }
  adopt_backend(cpu, cpu.owned.get());
  r.entries.insert(r.entries.begin(), std::move(cpu));

  std::vector<std::string> searched = backend_search_path();
  for (const std::string& dir : searched) {
    std::error_code ec;
    std::vector<fs::path> files;
    for (const auto& f : fs::directory_iterator(dir, ec)) files.push_back(f.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      std::string file = f.filename().string();
      if (!file.starts_with(kModulePrefix) || !file.ends_with(kModuleSuffix)) continue;
      std::string name =
          file.substr(std::strlen(kModulePrefix),
                      file.size() - std::strlen(kModulePrefix) - std::strlen(kModuleSuffix));
      BackendEntry* existing = find_entry(r, name);
      if (existing && (existing->backend || !existing->module_path.empty())) continue;
      BackendEntry e;
      e.name = name;
      e.module_path = f.string();
      e.pending = true;
      r.entries.push_back(std::move(e));
    }
  }
  for (const char* name : kWellKnown) {
    if (find_entry(r, name)) continue;
    BackendEntry e;
    e.name = name;
    e.reason = fmt::format(
        "{}: backend module {}{}{} not found (searched: {}); this build of ferry has no {} backend",
        name, kModulePrefix, name, kModuleSuffix, fmt::join(searched, ", "), name);
    r.entries.push_back(std::move(e));
  }
  sort_entries(r.entries);
}

// Opens the pending modules of backend `name` (every pending module when `name` is empty).
void open_pending_locked(Registry& r, std::string_view name) {
  bool opened = false;
  for (std::size_t i = 0; i < r.entries.size(); ++i) {
    if (!r.entries[i].pending || (!name.empty() && r.entries[i].name != name)) continue;
    BackendEntry e = open_module(r.entries[i].module_path, r.entries[i].name);
    r.entries.erase(r.entries.begin() + std::ptrdiff_t(i--));
    add_discovered(r, std::move(e));  // under the name the backend gives itself
    opened = true;
  }
  if (opened) sort_entries(r.entries);
}

// Discovery, then every module opened: for listing the devices.
Registry& opened_registry() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  discover_locked(r);
  open_pending_locked(r, {});
  return r;
}

// The entry of backend `name` with its module opened, or null when no backend has that name.
BackendEntry* backend_entry_locked(Registry& r, std::string_view name) {
  discover_locked(r);
  if (BackendEntry* e = find_entry(r, name); e && !e->pending) return e;
  open_pending_locked(r, name);
  if (BackendEntry* e = find_entry(r, name)) return e;
  open_pending_locked(r, {});  // a module may give its backend another name than its file's
  return find_entry(r, name);
}

}  // namespace

std::vector<std::string> backend_search_path() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("FERRY_BACKEND_PATH")) {
    std::string_view s(env);
    while (!s.empty()) {
      std::size_t colon = s.find(':');
      std::string_view part = s.substr(0, colon);
      if (!part.empty()) dirs.emplace_back(part);
      if (colon == std::string_view::npos) break;
      s.remove_prefix(colon + 1);
    }
  }
  std::string self = self_library_dir();
  if (!self.empty()) {
    dirs.push_back(self);
    dirs.push_back((fs::path(self) / "ferry").string());
  }
  return dirs;
}

void register_backend(std::unique_ptr<Backend> backend) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string name = backend->name();
  BackendEntry* existing = backend_entry_locked(r, name);
  if (existing && existing->backend)
    throw Error(fmt::format("register_backend: a backend named '{}' is already registered", name));
  BackendEntry e;
  e.name = name;
  e.owned = std::move(backend);
  adopt_backend(e, e.owned.get());
  if (existing)
    *existing = std::move(e);
  else
    r.entries.push_back(std::move(e));
  sort_entries(r.entries);
}

void load_backend_module(const std::string& path) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  discover_locked(r);
  std::string file = fs::path(path).filename().string();
  std::string name = file;
  bool conventional = file.starts_with(kModulePrefix) && file.ends_with(kModuleSuffix);
  if (conventional)
    name = file.substr(std::strlen(kModulePrefix),
                       file.size() - std::strlen(kModulePrefix) - std::strlen(kModuleSuffix));
  backend_entry_locked(r, name);  // a module of that name on the search path is opened first
  BackendEntry e = open_module(path, name);
  BackendEntry* existing = backend_entry_locked(r, e.name);
  if (existing && existing->backend) {
    if (existing->module_path == path) return;  // already loaded from this very file
    if (e.backend)
      throw BackendError(
          fmt::format(
              "load_backend_module: backend '{}' is already loaded from {}; {} was not loaded",
              e.name, existing->module_path.empty() ? "the application" : existing->module_path,
              path),
          "module-duplicate");
  }
  if (!e.backend) {
    std::string reason = e.reason;
    // A conventionally named module is listed as unavailable with the reason;
    // any other file leaves no trace beyond the exception.
    if (conventional && !(existing && existing->backend)) {
      if (existing)
        *existing = std::move(e);
      else
        r.entries.push_back(std::move(e));
      sort_entries(r.entries);
    }
    throw BackendError(reason, "module-load-failed");
  }
  if (existing)
    *existing = std::move(e);
  else
    r.entries.push_back(std::move(e));
  sort_entries(r.entries);
}

std::vector<DeviceInfo> devices() {
  Registry& r = opened_registry();
  std::vector<DeviceInfo> available, unavailable;
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto& e : r.entries) {
    if (e.backend) {
      for (DeviceImpl* d : e.devices) {
        DeviceInfo info = d->info();
        info.device = d->device().str();
        info.backend = e.name;
        info.index = d->device().index();
        info.available = true;
        available.push_back(std::move(info));
      }
    } else {
      DeviceInfo info;
      info.device = e.name;
      info.backend = e.name;
      info.name = e.name + " (unavailable)";
      info.available = false;
      info.unavailable_reason = e.reason;
      unavailable.push_back(std::move(info));
    }
  }
  available.insert(available.end(), unavailable.begin(), unavailable.end());
  return available;
}

std::string describe_devices() {
  Registry& r = opened_registry();
  std::vector<std::string> ok, bad;
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto& e : r.entries) {
    if (e.backend) {
      for (DeviceImpl* d : e.devices) ok.push_back(d->device().str());
    } else {
      bad.push_back(fmt::format("{} ({})", e.name, e.reason));
    }
  }
  std::string s = fmt::format("available: {}", fmt::join(ok, ", "));
  if (!bad.empty()) s += fmt::format("; unavailable: {}", fmt::join(bad, "; "));
  return s;
}

DeviceImpl& device_impl(const Device& device) {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    BackendEntry* e = backend_entry_locked(r, device.type());
    if (e && e->backend && device.index() >= 0 && std::size_t(device.index()) < e->devices.size())
      return *e->devices[std::size_t(device.index())];
    if (e && !e->backend) {
      std::string reason = e->reason;
      throw DeviceError(fmt::format("device '{}' is unavailable: {}", device.str(), reason));
    }
    if (e)
      throw DeviceError(fmt::format("device '{}' does not exist: backend '{}' has {} device(s)",
                                    device.str(), e->name, e->devices.size()));
  }
  throw DeviceError(fmt::format("unknown device '{}': no backend named '{}' ({})", device.str(),
                                device.type(), describe_devices()));
}

void synchronize(const Device& device) {
  DeviceImpl& impl = device_impl(device);
  {
    profiler::detail::MaybeWork wait(profiler::EventKind::wait, impl, "synchronize");
    impl.synchronize();
  }
  detail::raise_deferred_checks(impl);  // Note [Deferred checks]
}
MemoryStats memory_stats(const Device& device) { return device_impl(device).memory_stats(); }
void empty_cache(const Device& device) { device_impl(device).empty_cache(); }
void reset_peak_memory_stats(const Device& device) {
  device_impl(device).reset_peak_memory_stats();
}

bool is_available(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::size_t colon = name.find(':');
  std::string_view backend = name.substr(0, colon);
  BackendEntry* e = backend_entry_locked(r, backend);
  if (!e || !e->backend) return false;
  if (colon == std::string_view::npos) return true;
  try {
    Device d = Device::parse_syntax(name);
    return d.index() < int(e->devices.size());
  } catch (const DeviceError&) {
    return false;
  }
}

namespace detail {

Device choose_default_device(const std::vector<DeviceInfo>& infos) {
  auto rank = [](const DeviceInfo& d) {
    if (!d.available) return -1;
    if (d.backend == "cuda") return 10;
    if (d.backend != "vulkan") return -1;  // the CPU is the fallback; plugins are chosen by name
    switch (d.kind) {
      case DeviceKind::discrete_gpu:
        return 9;
      case DeviceKind::integrated_gpu:
        return 8;
      case DeviceKind::virtual_gpu:
        return 7;
      default:
        return -1;  // CPU-type GPUs (lavapipe) and others: the CPU backend is faster
    }
  };
  const DeviceInfo* best = nullptr;
  for (const DeviceInfo& d : infos)  // the first of the best rank: cuda:0 before cuda:1
    if (rank(d) >= 0 && (!best || rank(d) > rank(*best))) best = &d;
  return best ? Device::unchecked(best->backend, best->index) : Device::cpu();
}

}  // namespace detail

Device default_device() {
  if (const char* env = std::getenv("FERRY_DEVICE"); env && *env) {
    try {
      return Device(std::string_view(env));
    } catch (const DeviceError& e) {
      throw DeviceError(fmt::format("FERRY_DEVICE='{}' names no usable device: {}", env, e.what()));
    }
  }
  return detail::choose_default_device(devices());
}

}  // namespace ferry
