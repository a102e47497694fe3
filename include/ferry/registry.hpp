// ferry/registry.hpp — which backends and devices this process has.
//
// Note [Backend discovery]
// The CPU backend is built into libferry. Every other backend is a module,
// libferry_backend_<name>.so, found from, in order: FERRY_BACKEND_PATH
// (':'-separated folders, for third parties), the folder libferry itself was
// loaded from (the build tree and the install's lib folder), and its ferry/
// subfolder. A module is opened when its backend is first asked for (a device
// of it, is_available of its name) or when the devices are listed (devices(),
// default_device(), describe_devices()), so a program that runs on the CPU
// alone loads no GPU library: opening the CUDA module loads cuBLAS and NVRTC
// (85 ms on a machine without a driver), the Vulkan one the loader and its
// drivers. A module that fails to load, or whose backend reports a reason, is
// listed as unavailable with that reason; it never aborts discovery. "cuda" and
// "vulkan" are always listed, as unavailable with a reason when their module is
// missing.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/device.hpp"
#include "ferry/device_info.hpp"

namespace ferry {

class Backend;
class DeviceImpl;

// Every device of every known backend, available or not. Available devices
// come first, in backend order cpu, cuda, vulkan, then plugins by name.
std::vector<DeviceInfo> devices();
// True when `name` is a backend with at least one usable device ("cuda"), or a
// usable device ("vulkan:1").
bool is_available(std::string_view name);
// The best available device: a CUDA GPU, then a discrete, integrated or
// virtual Vulkan GPU, then the CPU. CPU-type Vulkan devices (lavapipe) are
// never chosen: the CPU backend is faster on the same cores. FERRY_DEVICE
// overrides the choice (DeviceError when it names no available device).
Device default_device();

// Waits until all work enqueued on `device` has finished (reading a tensor's
// values on the host does this by itself).
void synchronize(const Device& device);

// The implementation of an available device; DeviceError otherwise.
DeviceImpl& device_impl(const Device& device);
// Adds a backend built into the application (tests, embedders). Throws
// Error when a backend of that name exists.
void register_backend(std::unique_ptr<Backend> backend);
// Loads one module file now; throws BackendError with dlopen's reason.
void load_backend_module(const std::string& path);
// The folders searched for modules, in order (Note [Backend discovery]).
std::vector<std::string> backend_search_path();
// "available: cpu, vulkan:0; unavailable: cuda (no CUDA driver found ...)".
std::string describe_devices();

}  // namespace ferry
