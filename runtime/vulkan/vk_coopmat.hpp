// runtime/vulkan/vk_coopmat.hpp — what a device offers matmul's cooperative-matrix path (Note
// [Cooperative-matrix GEMM] in vk_kernels_coopmat.cpp), and the structures of
// VK_KHR_cooperative_matrix and VK_KHR_shader_bfloat16 that Debian 12's Vulkan headers
// (1.3.239) lack, declared from the Vulkan registry (the extensions' ABI is fixed).
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <volk.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vulkan/vk_policy.hpp"

#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_cooperative_matrix 1
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR \
  (static_cast<VkStructureType>(1000506000))
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR \
  (static_cast<VkStructureType>(1000506001))
typedef enum VkComponentTypeKHR {
  VK_COMPONENT_TYPE_FLOAT16_KHR = 0,
  VK_COMPONENT_TYPE_FLOAT32_KHR = 1,
  VK_COMPONENT_TYPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkComponentTypeKHR;
typedef enum VkScopeKHR {
  VK_SCOPE_SUBGROUP_KHR = 3,
  VK_SCOPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkScopeKHR;
typedef struct VkCooperativeMatrixPropertiesKHR {
  VkStructureType sType;
  void* pNext;
  uint32_t MSize;
  uint32_t NSize;
  uint32_t KSize;
  VkComponentTypeKHR AType;
  VkComponentTypeKHR BType;
  VkComponentTypeKHR CType;
  VkComponentTypeKHR ResultType;
  VkBool32 saturatingAccumulation;
  VkScopeKHR scope;
} VkCooperativeMatrixPropertiesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
  VkStructureType sType;
  void* pNext;
  VkBool32 cooperativeMatrix;
  VkBool32 cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef VkResult(VKAPI_PTR* PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice physicalDevice, uint32_t* pPropertyCount,
    VkCooperativeMatrixPropertiesKHR* pProperties);
#endif
#ifndef VK_KHR_shader_bfloat16
#define VK_KHR_shader_bfloat16 1
#define VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME "VK_KHR_shader_bfloat16"
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR \
  (static_cast<VkStructureType>(1000141000))
typedef struct VkPhysicalDeviceShaderBfloat16FeaturesKHR {
  VkStructureType sType;
  void* pNext;
  VkBool32 shaderBFloat16Type;
  VkBool32 shaderBFloat16DotProduct;
  VkBool32 shaderBFloat16CooperativeMatrix;
} VkPhysicalDeviceShaderBfloat16FeaturesKHR;
#endif

namespace ferry::vulkan {

// Whether a device can run gemm_coopmat's tensor-core modules, and the feature structures that
// turn on what they use at vkCreateDevice (besides the extension and 16-bit storage).
struct CoopmatProbe {
  bool ready = false;
  std::string why_not;  // what the device lacks, when not ready
  // And the bf16 modules: VK_KHR_shader_bfloat16 with its type and cooperative matrices, and
  // the 16x16x16 bf16 x bf16 + f32 subgroup shape.
  bool bf16 = false;
  std::string bf16_why_not;
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
  VkPhysicalDeviceShaderFloat16Int8Features float16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  VkPhysicalDeviceVulkanMemoryModelFeatures memory_model{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
  VkPhysicalDeviceSubgroupSizeControlFeatures size_control{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
  VkPhysicalDeviceShaderBfloat16FeaturesKHR bfloat16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR};

  // Sets exactly the features the modules need and links the structures in front of `next`;
  // returns the head. The probe must outlive vkCreateDevice.
  void* enable_chain(void* next);
};

// Asks the device: the extension, the 16x16x16 f16 -> f32 subgroup shape, cooperativeMatrix
// in compute shaders, shaderFloat16, the Vulkan memory model at device scope, uniform and
// storage 16-bit access, and subgroups of exactly 32 (subgroup size control with full
// subgroups), which the modules are compiled for; then, for the bf16 modules,
// VK_KHR_shader_bfloat16 and its shape.
CoopmatProbe probe_coopmat(VkPhysicalDevice pd, std::uint32_t api_version,
                           const std::vector<VkExtensionProperties>& exts);

}  // namespace ferry::vulkan
