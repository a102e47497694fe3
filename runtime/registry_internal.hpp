// runtime/registry_internal.hpp — the registry's decisions as pure functions,
// so they are tested without the devices they decide between.
#pragma once

#include <vector>

#include "ferry/device.hpp"
#include "ferry/device_info.hpp"

namespace ferry::detail {

// default_device()'s choice among `infos` (FERRY_DEVICE aside): the first
// CUDA device, else the best discrete, integrated or virtual Vulkan GPU, else
// the CPU. CPU-type Vulkan devices and plugins are never chosen.
Device choose_default_device(const std::vector<DeviceInfo>& infos);

}  // namespace ferry::detail
