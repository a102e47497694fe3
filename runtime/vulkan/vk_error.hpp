// runtime/vulkan/vk_error.hpp — Vulkan failures as ferry errors, in one place
// (Note [Kernel contract]: vendor codes become BackendError once per backend),
// like cuda/cuda_error.hpp for CUDA. VK_ERROR_DEVICE_LOST is also remembered
// by the device's recorder (vk_recorder.hpp), and the device refuses every later call.
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES  // volk loads every entry point at run time
#endif
#include <volk.h>

#include <string_view>

namespace ferry::vulkan {

// "VK_ERROR_DEVICE_LOST", ...; "VK_ERROR_(unknown)" for a code it does not name.
const char* result_name(VkResult r);
// BackendError "vulkan: <what> failed: VK_ERROR_..." with the result's name as its code.
[[noreturn]] void throw_result(VkResult r, std::string_view what);
inline void check(VkResult r, std::string_view what) {
  if (r != VK_SUCCESS) throw_result(r, what);
}

}  // namespace ferry::vulkan
