// coopmat.hpp — the shared declarations of tools/coopmat's benchmark: the
// VK_KHR_cooperative_matrix structures Debian's 1.3.239 headers lack, error handling, the
// Vulkan context and the GEMM problem. coopmat_vk.cpp: Vulkan helpers and pipelines;
// coopmat_gemm.cpp: inputs, dispatch and the CPU reference; coopmat_bench.cpp: main.
#pragma once

#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <unistd.h>
#include <volk.h>  // includes vulkan_core.h (1.3.239) with VK_NO_PROTOTYPES

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

// ----------------------------------------------------------------------------------------------
// VK_KHR_cooperative_matrix (not in the 1.3.239 headers). Values from the Vulkan registry
// (vk.xml / vulkan_core.h of newer Vulkan-Headers).
#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_cooperative_matrix 1
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
typedef enum VkComponentTypeKHR {
  VK_COMPONENT_TYPE_FLOAT16_KHR = 0,
  VK_COMPONENT_TYPE_FLOAT32_KHR = 1,
  VK_COMPONENT_TYPE_FLOAT64_KHR = 2,
  VK_COMPONENT_TYPE_SINT8_KHR = 3,
  VK_COMPONENT_TYPE_SINT16_KHR = 4,
  VK_COMPONENT_TYPE_SINT32_KHR = 5,
  VK_COMPONENT_TYPE_SINT64_KHR = 6,
  VK_COMPONENT_TYPE_UINT8_KHR = 7,
  VK_COMPONENT_TYPE_UINT16_KHR = 8,
  VK_COMPONENT_TYPE_UINT32_KHR = 9,
  VK_COMPONENT_TYPE_UINT64_KHR = 10,
  VK_COMPONENT_TYPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkComponentTypeKHR;
typedef enum VkScopeKHR {
  VK_SCOPE_DEVICE_KHR = 1,
  VK_SCOPE_WORKGROUP_KHR = 2,
  VK_SCOPE_SUBGROUP_KHR = 3,
  VK_SCOPE_QUEUE_FAMILY_KHR = 5,
  VK_SCOPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkScopeKHR;
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR \
  ((VkStructureType)1000506000)
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR ((VkStructureType)1000506001)
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR \
  ((VkStructureType)1000506002)
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
typedef struct VkPhysicalDeviceCooperativeMatrixPropertiesKHR {
  VkStructureType sType;
  void* pNext;
  VkShaderStageFlags cooperativeMatrixSupportedStages;
} VkPhysicalDeviceCooperativeMatrixPropertiesKHR;
typedef VkResult(VKAPI_PTR* PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice physicalDevice, uint32_t* pPropertyCount,
    VkCooperativeMatrixPropertiesKHR* pProperties);
#endif

#define VK_CHECK(expr)                                                                     \
  do {                                                                                     \
    VkResult _r = (expr);                                                                  \
    if (_r != VK_SUCCESS)                                                                  \
      die("%s -> %s (%d) at %s:%d", #expr, vkResultName(_r), (int)_r, __FILE__, __LINE__); \
  } while (0)

// ----------------------------------------------------------------------------------------------
struct Variant {
  std::string name, spv;
  uint32_t warpsM = 0, warpsN = 0, tm = 0, tn = 0, bk = 0;
  bool emulate = false;
  uint32_t bm() const { return warpsM * tm * 16; }
  uint32_t bn() const { return warpsN * tn * 16; }
  uint32_t threads() const { return warpsM * warpsN * 32; }
  // must match gemm_coopmat.slang: 2 stages x (BM*(BK+8) + BK*(BN+8)) halves
  uint32_t smemBytes() const { return 2u * (bm() * (bk + 8) + bk * (bn() + 8)) * 2u; }
};

struct Options {
  std::string dir;
  int device = -1;
  std::string only;
  uint32_t size = 4096;
  uint32_t iters = 20, reps = 3, warmup = 3;
  double timeoutS = 10.0;
  bool perf = true;
  bool emulate = false;
};

struct Buffer {
  VkBuffer buf = VK_NULL_HANDLE;
  VkDeviceMemory mem = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
  void* mapped = nullptr;
};

struct Ctx {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice phys = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queueFamily = 0;
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceMemoryProperties memProps{};
  uint32_t timestampValidBits = 0;
  bool requireSubgroup32 = false;  // use VkPipelineShaderStageRequiredSubgroupSizeCreateInfo
  bool fullSubgroups = false;      // VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT
  bool pipelineExecInfo = false;   // VK_KHR_pipeline_executable_properties enabled
  VkCommandPool cmdPool = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkQueryPool queryPool = VK_NULL_HANDLE;
  VkDescriptorSetLayout dsl = VK_NULL_HANDLE;
  VkPipelineLayout pipeLayout = VK_NULL_HANDLE;
  VkDescriptorPool descPool = VK_NULL_HANDLE;
  VkDescriptorSet descSet = VK_NULL_HANDLE;
  double timeoutS = 10.0;
};

struct PushConsts {
  uint32_t M, N, K, lda, ldb, ldc;
};

struct Pipeline {
  VkShaderModule module = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
};

struct Problem {
  uint32_t M, N, K, lda, ldb, ldc;
};

struct GemmBuffers {
  Buffer A, B, C, staging;
};

// ---- defined in coopmat_vk.cpp and coopmat_gemm.cpp ----
const char* vkResultName(VkResult r);
[[noreturn]] void die(const char* fmt, ...);
void watchdogHandler(int);
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);
std::string exeDir();
const char* deviceTypeName(VkPhysicalDeviceType t);
const char* componentTypeName(uint32_t t);
const char* scopeName(uint32_t s);
bool hasExtension(const std::vector<VkExtensionProperties>& exts, const char* name);
std::vector<VkExtensionProperties> deviceExtensions(VkPhysicalDevice pd);
uint32_t findMemoryType(const Ctx& c, uint32_t typeBits, VkMemoryPropertyFlags want,
                        VkMemoryPropertyFlags prefer);
Buffer createBuffer(const Ctx& c, VkDeviceSize size, VkBufferUsageFlags usage, bool hostVisible);
void destroyBuffer(const Ctx& c, Buffer& b);
void beginCmd(const Ctx& c);
double submitAndWait(const Ctx& c, const char* what);
void barrierAll(const Ctx& c, VkPipelineStageFlags src, VkAccessFlags srcA,
                VkPipelineStageFlags dst, VkAccessFlags dstA);
std::vector<uint32_t> readSpv(const std::string& path);
std::vector<Variant> readVariants(const std::string& dir);
void printPipelineStats(const Ctx& c, VkPipeline p);
bool createPipeline(const Ctx& c, const Variant& v, Pipeline& out);
void destroyPipeline(const Ctx& c, Pipeline& p);
void bindDescriptors(const Ctx& c, const GemmBuffers& g);
void uploadInputs(const Ctx& c, GemmBuffers& g, const std::vector<uint16_t>& A,
                  const std::vector<uint16_t>& B);
void readbackC(const Ctx& c, GemmBuffers& g, VkDeviceSize bytes, std::vector<float>& out);
void recordGemm(const Ctx& c, const Variant& v, const Pipeline& p, const Problem& pr);
const char* problemUnsupported(const Ctx& c, const Variant& v, const Problem& p);
void makeInputs(const Problem& p, uint32_t seed, std::vector<uint16_t>& A,
                std::vector<uint16_t>& B);
double refElem(const Problem& p, const std::vector<float>& Af, const std::vector<float>& Bf,
               uint32_t i, uint32_t j);
bool compareResult(const Problem& p, const std::vector<uint16_t>& A, const std::vector<uint16_t>& B,
                   const std::vector<float>& Cgpu, uint32_t sampleCount, const char* label);
// ---- coopmat_options.cpp ----
void usage(const char* argv0);
Options parseOptions(int argc, char** argv);
