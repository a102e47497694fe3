// runtime/vulkan/vk_error.cpp — Vulkan results as ferry errors (vk_error.hpp).
#include "vulkan/vk_error.hpp"

#include <fmt/format.h>

#include "ferry/error.hpp"

namespace ferry::vulkan {

const char* result_name(VkResult r) {
  switch (r) {
#define FERRY_VK_RESULT(name) \
  case name:                  \
    return #name;
    FERRY_VK_RESULT(VK_SUCCESS)
    FERRY_VK_RESULT(VK_NOT_READY)
    FERRY_VK_RESULT(VK_TIMEOUT)
    FERRY_VK_RESULT(VK_INCOMPLETE)
    FERRY_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    FERRY_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    FERRY_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    FERRY_VK_RESULT(VK_ERROR_DEVICE_LOST)
    FERRY_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    FERRY_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    FERRY_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    FERRY_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    FERRY_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    FERRY_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    FERRY_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    FERRY_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    FERRY_VK_RESULT(VK_ERROR_UNKNOWN)
    FERRY_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    FERRY_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    FERRY_VK_RESULT(VK_ERROR_FRAGMENTATION)
    FERRY_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    FERRY_VK_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
#undef FERRY_VK_RESULT
    default:
      return "VK_ERROR_(unknown)";
  }
}

void throw_result(VkResult r, std::string_view what) {
  throw BackendError(fmt::format("vulkan: {} failed: {}", what, result_name(r)), result_name(r));
}

}  // namespace ferry::vulkan
