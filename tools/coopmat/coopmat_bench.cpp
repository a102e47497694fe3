// coopmat_bench: f16 x f16 -> f32 GEMM through Vulkan VK_KHR_cooperative_matrix.
//
// Loads precompiled SPIR-V kernels (built by build.sh from gemm_coopmat.slang, listed in
// variants.txt next to the binary), checks them against a CPU reference and times them.
// Run-time dependencies: libvulkan.so.1 (dlopen'ed; override with COOPMAT_VK_LIB) + the .spv files.
//
// usage: coopmat_bench [--dir DIR] [--device IDX] [--only SUBSTR] [--size S] [--iters N]
//                      [--reps R] [--warmup W] [--timeout-s T] [--no-perf] [--emulate]
//   --emulate : run the scalar-emulation kernels (no cooperative matrices needed; self-test of the
//               host code / tiling on any Vulkan device, e.g. lavapipe). Correctness + tiny timing.
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

// ----------------------------------------------------------------------------------------------
// Error handling: print and exit; never hang (fence waits have timeouts, plus a global watchdog).
static const char* vkResultName(VkResult r) {
  switch (r) {
#define C(x) \
  case x:    \
    return #x;
    C(VK_SUCCESS)
    C(VK_NOT_READY) C(VK_TIMEOUT) C(VK_EVENT_SET) C(VK_EVENT_RESET) C(VK_INCOMPLETE)
        C(VK_ERROR_OUT_OF_HOST_MEMORY) C(VK_ERROR_OUT_OF_DEVICE_MEMORY)
            C(VK_ERROR_INITIALIZATION_FAILED) C(VK_ERROR_DEVICE_LOST) C(VK_ERROR_MEMORY_MAP_FAILED)
                C(VK_ERROR_LAYER_NOT_PRESENT) C(VK_ERROR_EXTENSION_NOT_PRESENT)
                    C(VK_ERROR_FEATURE_NOT_PRESENT) C(VK_ERROR_INCOMPATIBLE_DRIVER)
                        C(VK_ERROR_TOO_MANY_OBJECTS) C(VK_ERROR_FORMAT_NOT_SUPPORTED)
                            C(VK_ERROR_FRAGMENTED_POOL) C(VK_ERROR_UNKNOWN)
                                C(VK_ERROR_OUT_OF_POOL_MEMORY) C(VK_ERROR_INVALID_EXTERNAL_HANDLE)
                                    C(VK_ERROR_FRAGMENTATION)
                                        C(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
                                            C(VK_PIPELINE_COMPILE_REQUIRED)
                                                C(VK_ERROR_INVALID_SHADER_NV)
#undef C
                                                    default : return "VK_RESULT_?";
  }
}

[[noreturn]] static void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fflush(stdout);
  fprintf(stdout, "FATAL: ");
  vfprintf(stdout, fmt, ap);
  fprintf(stdout, "\n");
  va_end(ap);
  fflush(stdout);
  fflush(stderr);
  // _exit: do not run destructors / touch a possibly hung device.
  _exit(1);
}

#define VK_CHECK(expr)                                                                     \
  do {                                                                                     \
    VkResult _r = (expr);                                                                  \
    if (_r != VK_SUCCESS)                                                                  \
      die("%s -> %s (%d) at %s:%d", #expr, vkResultName(_r), (int)_r, __FILE__, __LINE__); \
  } while (0)

static void watchdogHandler(int) {
  const char msg[] = "\nFATAL: watchdog timeout (COOPMAT_WATCHDOG_S) - aborting to avoid a hang\n";
  ssize_t w = write(1, msg, sizeof(msg) - 1);
  (void)w;
  _exit(4);
}

// ----------------------------------------------------------------------------------------------
// f16 helpers (round-to-nearest-even conversion; no reliance on _Float16)
static uint16_t floatToHalf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return (uint16_t)(sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {                                    // subnormal / zero in half
    if (absx < 0x33000000u) return (uint16_t)sign;
    uint32_t e = absx >> 23;
    uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 14..24
    uint32_t h = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((absx - 0x38000000u) >> 13);
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
  return (uint16_t)(sign | h);
}
static float halfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 31u, m = h & 1023u;
  float v;
  if (e == 0)
    v = (float)m * (1.0f / 16777216.0f);
  else if (e == 31) {
    uint32_t x = 0x7f800000u | (m << 13);
    memcpy(&v, &x, 4);
  } else {
    uint32_t x = ((e + 112u) << 23) | (m << 13);
    memcpy(&v, &x, 4);
  }
  uint32_t x;
  memcpy(&x, &v, 4);
  x |= sign;
  memcpy(&v, &x, 4);
  return v;
}

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

static std::string exeDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  std::string s(buf);
  size_t p = s.find_last_of('/');
  return p == std::string::npos ? "." : s.substr(0, p);
}

static const char* deviceTypeName(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_OTHER:
      return "other";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "CPU";
    default:
      return "?";
  }
}
static const char* componentTypeName(uint32_t t) {
  static const char* names[] = {"f16", "f32", "f64", "s8",  "s16", "s32",
                                "s64", "u8",  "u16", "u32", "u64"};
  if (t < 11) return names[t];
  switch (t) {  // newer registry additions (VK_NV_cooperative_matrix2 / bfloat16 / fp8), for
                // printing only
    case 1000141000:
      return "bf16";
    case 1000491000:
      return "e4m3";
    case 1000491001:
      return "e5m2";
    case 1000491002:
      return "s8_packed";
    case 1000491003:
      return "u8_packed";
    default:
      return "other";
  }
}
static const char* scopeName(uint32_t s) {
  switch (s) {
    case 1:
      return "device";
    case 2:
      return "workgroup";
    case 3:
      return "subgroup";
    case 5:
      return "queue_family";
    default:
      return "?";
  }
}

static bool hasExtension(const std::vector<VkExtensionProperties>& exts, const char* name) {
  for (auto& e : exts)
    if (strcmp(e.extensionName, name) == 0) return true;
  return false;
}

static std::vector<VkExtensionProperties> deviceExtensions(VkPhysicalDevice pd) {
  uint32_t n = 0;
  VK_CHECK(vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr));
  std::vector<VkExtensionProperties> v(n);
  if (n) VK_CHECK(vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, v.data()));
  v.resize(n);
  return v;
}

static uint32_t findMemoryType(const Ctx& c, uint32_t typeBits, VkMemoryPropertyFlags want,
                               VkMemoryPropertyFlags prefer) {
  int best = -1;
  for (uint32_t i = 0; i < c.memProps.memoryTypeCount; ++i) {
    if (!(typeBits & (1u << i))) continue;
    VkMemoryPropertyFlags f = c.memProps.memoryTypes[i].propertyFlags;
    if ((f & want) != want) continue;
    if ((f & (want | prefer)) == (want | prefer)) return i;
    if (best < 0) best = (int)i;
  }
  if (best < 0) die("no memory type with flags 0x%x (type bits 0x%x)", want, typeBits);
  return (uint32_t)best;
}

static Buffer createBuffer(const Ctx& c, VkDeviceSize size, VkBufferUsageFlags usage,
                           bool hostVisible) {
  Buffer b;
  b.size = size;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = size;
  bi.usage = usage;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VK_CHECK(vkCreateBuffer(c.device, &bi, nullptr, &b.buf));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(c.device, b.buf, &req);
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex =
      hostVisible ? findMemoryType(
                        c, req.memoryTypeBits,
                        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                        VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
                  : findMemoryType(c, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  VK_CHECK(vkAllocateMemory(c.device, &ai, nullptr, &b.mem));
  VK_CHECK(vkBindBufferMemory(c.device, b.buf, b.mem, 0));
  if (hostVisible) VK_CHECK(vkMapMemory(c.device, b.mem, 0, VK_WHOLE_SIZE, 0, &b.mapped));
  return b;
}
static void destroyBuffer(const Ctx& c, Buffer& b) {
  if (b.mapped) vkUnmapMemory(c.device, b.mem);
  if (b.buf) vkDestroyBuffer(c.device, b.buf, nullptr);
  if (b.mem) vkFreeMemory(c.device, b.mem, nullptr);
  b = Buffer{};
}

static void beginCmd(const Ctx& c) {
  VK_CHECK(vkResetCommandBuffer(c.cmd, 0));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_CHECK(vkBeginCommandBuffer(c.cmd, &bi));
}

// Submits c.cmd and waits on the fence with a timeout. Returns wall seconds (submit -> signaled).
static double submitAndWait(const Ctx& c, const char* what) {
  VK_CHECK(vkEndCommandBuffer(c.cmd));
  VK_CHECK(vkResetFences(c.device, 1, &c.fence));
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &c.cmd;
  auto t0 = std::chrono::steady_clock::now();
  VK_CHECK(vkQueueSubmit(c.queue, 1, &si, c.fence));
  VkResult r = vkWaitForFences(c.device, 1, &c.fence, VK_TRUE, (uint64_t)(c.timeoutS * 1e9));
  auto t1 = std::chrono::steady_clock::now();
  if (r == VK_TIMEOUT)
    die("GPU work '%s' did not finish within %.3g s (fence timeout; use --timeout-s to raise)",
        what, c.timeoutS);
  if (r != VK_SUCCESS) die("vkWaitForFences for '%s' -> %s", what, vkResultName(r));
  return std::chrono::duration<double>(t1 - t0).count();
}

static void barrierAll(const Ctx& c, VkPipelineStageFlags src, VkAccessFlags srcA,
                       VkPipelineStageFlags dst, VkAccessFlags dstA) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = srcA;
  mb.dstAccessMask = dstA;
  vkCmdPipelineBarrier(c.cmd, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

static std::vector<uint32_t> readSpv(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return {};
  std::streamsize n = f.tellg();
  if (n <= 0 || n % 4 != 0) return {};
  std::vector<uint32_t> words((size_t)n / 4);
  f.seekg(0);
  f.read((char*)words.data(), n);
  if (!f || words[0] != 0x07230203u) return {};
  return words;
}

static std::vector<Variant> readVariants(const std::string& dir) {
  std::vector<Variant> out;
  std::string path = dir + "/variants.txt";
  std::ifstream f(path);
  if (!f) die("cannot open %s (run build.sh first, or pass --dir)", path.c_str());
  std::string line;
  int ln = 0;
  while (std::getline(f, line)) {
    ++ln;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    Variant v;
    int emu = 0;
    if (!(ss >> v.name >> v.spv >> v.warpsM >> v.warpsN >> v.tm >> v.tn >> v.bk >> emu))
      die("%s:%d: malformed line '%s'", path.c_str(), ln, line.c_str());
    v.emulate = emu != 0;
    if (v.spv[0] != '/') v.spv = dir + "/" + v.spv;
    out.push_back(v);
  }
  return out;
}

// ----------------------------------------------------------------------------------------------
struct Pipeline {
  VkShaderModule module = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
};

static void printPipelineStats(const Ctx& c, VkPipeline p) {
  if (!c.pipelineExecInfo) return;
  auto getExecProps = (PFN_vkGetPipelineExecutablePropertiesKHR)vkGetDeviceProcAddr(
      c.device, "vkGetPipelineExecutablePropertiesKHR");
  auto getStats = (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(
      c.device, "vkGetPipelineExecutableStatisticsKHR");
  if (!getExecProps || !getStats) return;
  VkPipelineInfoKHR pi{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  pi.pipeline = p;
  uint32_t n = 0;
  if (getExecProps(c.device, &pi, &n, nullptr) != VK_SUCCESS || n == 0) return;
  std::vector<VkPipelineExecutablePropertiesKHR> ep(
      n, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR});
  if (getExecProps(c.device, &pi, &n, ep.data()) != VK_SUCCESS) return;
  for (uint32_t e = 0; e < n; ++e) {
    printf("    executable %u: %s (%s), subgroupSize %u\n", e, ep[e].name, ep[e].description,
           ep[e].subgroupSize);
    VkPipelineExecutableInfoKHR ei{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    ei.pipeline = p;
    ei.executableIndex = e;
    uint32_t ns = 0;
    if (getStats(c.device, &ei, &ns, nullptr) != VK_SUCCESS || ns == 0) continue;
    std::vector<VkPipelineExecutableStatisticKHR> st(
        ns, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    if (getStats(c.device, &ei, &ns, st.data()) != VK_SUCCESS) continue;
    for (uint32_t s = 0; s < ns; ++s) {
      printf("      stat %-28s = ", st[s].name);
      switch (st[s].format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
          printf("%s", st[s].value.b32 ? "true" : "false");
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
          printf("%" PRId64, st[s].value.i64);
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
          printf("%" PRIu64, st[s].value.u64);
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR:
          printf("%g", st[s].value.f64);
          break;
        default:
          printf("?");
      }
      printf("\n");
    }
  }
}

static bool createPipeline(const Ctx& c, const Variant& v, Pipeline& out) {
  std::vector<uint32_t> code = readSpv(v.spv);
  if (code.empty()) {
    printf("  ERROR: cannot read a valid SPIR-V module from %s\n", v.spv.c_str());
    return false;
  }
  VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  smi.codeSize = code.size() * 4;
  smi.pCode = code.data();
  VkResult r = vkCreateShaderModule(c.device, &smi, nullptr, &out.module);
  if (r != VK_SUCCESS) {
    printf("  ERROR: vkCreateShaderModule(%s) -> %s\n", v.spv.c_str(), vkResultName(r));
    return false;
  }
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo rss{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO};
  rss.requiredSubgroupSize = 32;
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = out.module;
  ci.stage.pName = "gemm_main";
  if (!v.emulate) {
    if (c.requireSubgroup32) ci.stage.pNext = &rss;
    if (c.fullSubgroups)
      ci.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  }
  if (c.pipelineExecInfo) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  ci.layout = c.pipeLayout;
  auto t0 = std::chrono::steady_clock::now();
  r = vkCreateComputePipelines(c.device, VK_NULL_HANDLE, 1, &ci, nullptr, &out.pipeline);
  auto t1 = std::chrono::steady_clock::now();
  if (r != VK_SUCCESS) {
    printf("  ERROR: vkCreateComputePipelines(%s) -> %s\n", v.name.c_str(), vkResultName(r));
    return false;
  }
  printf("  pipeline created in %.1f ms (requiredSubgroupSize=%s, fullSubgroups=%s)\n",
         std::chrono::duration<double, std::milli>(t1 - t0).count(),
         (!v.emulate && c.requireSubgroup32) ? "32" : "default",
         (!v.emulate && c.fullSubgroups) ? "yes" : "no");
  printPipelineStats(c, out.pipeline);
  return true;
}

static void destroyPipeline(const Ctx& c, Pipeline& p) {
  if (p.pipeline) vkDestroyPipeline(c.device, p.pipeline, nullptr);
  if (p.module) vkDestroyShaderModule(c.device, p.module, nullptr);
  p = Pipeline{};
}

// ----------------------------------------------------------------------------------------------
struct Problem {
  uint32_t M, N, K, lda, ldb, ldc;
};

struct GemmBuffers {
  Buffer A, B, C, staging;
};

static void bindDescriptors(const Ctx& c, const GemmBuffers& g) {
  VkDescriptorBufferInfo infos[3] = {
      {g.A.buf, 0, VK_WHOLE_SIZE}, {g.B.buf, 0, VK_WHOLE_SIZE}, {g.C.buf, 0, VK_WHOLE_SIZE}};
  VkWriteDescriptorSet w[3];
  for (int i = 0; i < 3; ++i) {
    w[i] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w[i].dstSet = c.descSet;
    w[i].dstBinding = (uint32_t)i;
    w[i].descriptorCount = 1;
    w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(c.device, 3, w, 0, nullptr);
}

// Upload host f16 A and B (with their leading dimensions) into the device buffers.
static void uploadInputs(const Ctx& c, GemmBuffers& g, const std::vector<uint16_t>& A,
                         const std::vector<uint16_t>& B) {
  const VkDeviceSize aBytes = A.size() * 2, bBytes = B.size() * 2;
  if (aBytes > g.A.size || bBytes > g.B.size || aBytes + bBytes > g.staging.size)
    die("internal: buffers too small");
  memcpy(g.staging.mapped, A.data(), aBytes);
  memcpy((char*)g.staging.mapped + aBytes, B.data(), bBytes);
  beginCmd(c);
  VkBufferCopy ca{0, 0, aBytes}, cb{aBytes, 0, bBytes};
  vkCmdCopyBuffer(c.cmd, g.staging.buf, g.A.buf, 1, &ca);
  vkCmdCopyBuffer(c.cmd, g.staging.buf, g.B.buf, 1, &cb);
  submitAndWait(c, "upload A/B");
}

static void readbackC(const Ctx& c, GemmBuffers& g, VkDeviceSize bytes, std::vector<float>& out) {
  if (bytes > g.staging.size) die("internal: staging too small");
  beginCmd(c);
  VkBufferCopy cc{0, 0, bytes};
  vkCmdCopyBuffer(c.cmd, g.C.buf, g.staging.buf, 1, &cc);
  barrierAll(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
             VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  submitAndWait(c, "readback C");
  out.resize(bytes / 4);
  memcpy(out.data(), g.staging.mapped, bytes);
}

static void recordGemm(const Ctx& c, const Variant& v, const Pipeline& p, const Problem& pr) {
  vkCmdBindPipeline(c.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  vkCmdBindDescriptorSets(c.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c.pipeLayout, 0, 1, &c.descSet, 0,
                          nullptr);
  PushConsts pc{pr.M, pr.N, pr.K, pr.lda, pr.ldb, pr.ldc};
  vkCmdPushConstants(c.cmd, c.pipeLayout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(pc), &pc);
  vkCmdDispatch(c.cmd, pr.N / v.bn(), pr.M / v.bm(), 1);
}

static const char* problemUnsupported(const Ctx& c, const Variant& v, const Problem& p) {
  if (p.M % v.bm() || p.N % v.bn() || p.K % v.bk) return "M/N/K not multiples of the block tile";
  if (p.lda % 8 || p.ldb % 8 || p.ldc % 4) return "leading dimensions not 16-byte multiples";
  if (p.lda < p.K || p.ldb < p.N || p.ldc < p.N) return "leading dimension too small";
  if (p.N / v.bn() > c.props.limits.maxComputeWorkGroupCount[0] ||
      p.M / v.bm() > c.props.limits.maxComputeWorkGroupCount[1])
    return "too many workgroups";
  return nullptr;
}

static void makeInputs(const Problem& p, uint32_t seed, std::vector<uint16_t>& A,
                       std::vector<uint16_t>& B) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  A.assign((size_t)p.M * p.lda, 0);
  B.assign((size_t)p.K * p.ldb, 0);
  for (uint32_t i = 0; i < p.M; ++i)
    for (uint32_t k = 0; k < p.lda; ++k)  // padding columns get values too (must be ignored)
      A[(size_t)i * p.lda + k] = floatToHalf(k < p.K ? dist(rng) : 1000.0f);
  for (uint32_t k = 0; k < p.K; ++k)
    for (uint32_t j = 0; j < p.ldb; ++j)
      B[(size_t)k * p.ldb + j] = floatToHalf(j < p.N ? dist(rng) : 1000.0f);
}

static double refElem(const Problem& p, const std::vector<float>& Af, const std::vector<float>& Bf,
                      uint32_t i, uint32_t j) {
  double s = 0;
  const float* a = &Af[(size_t)i * p.lda];
  for (uint32_t k = 0; k < p.K; ++k) s += (double)a[k] * (double)Bf[(size_t)k * p.ldb + j];
  return s;
}

// Returns true on pass. sampleCount == 0 -> full comparison.
static bool compareResult(const Problem& p, const std::vector<uint16_t>& A,
                          const std::vector<uint16_t>& B, const std::vector<float>& Cgpu,
                          uint32_t sampleCount, const char* label) {
  std::vector<float> Af(A.size()), Bf(B.size());
  for (size_t i = 0; i < A.size(); ++i) Af[i] = halfToFloat(A[i]);
  for (size_t i = 0; i < B.size(); ++i) Bf[i] = halfToFloat(B[i]);
  double maxAbsErr = 0, maxAbsRef = 0, errSq = 0, refSq = 0;
  uint64_t nonFinite = 0, checked = 0, printed = 0;
  std::vector<double> refRow;
  auto check = [&](uint32_t i, uint32_t j, double ref) {
    float g = Cgpu[(size_t)i * p.ldc + j];
    ++checked;
    maxAbsRef = std::max(maxAbsRef, std::fabs(ref));
    refSq += ref * ref;
    if (!std::isfinite(g)) {
      if (nonFinite++ < 5)
        printf("    [%s] C[%u][%u] = %g (non-finite; expected %.6f)\n", label, i, j, g, ref);
      return;
    }
    double e = std::fabs((double)g - ref);
    errSq += e * e;
    if (e > maxAbsErr) maxAbsErr = e;
    if (e > 0.05 + 0.01 * std::fabs(ref) && printed < 8) {
      ++printed;
      printf("    [%s] mismatch C[%u][%u]: gpu %.6f  ref %.6f  (|diff| %.3g)\n", label, i, j, g,
             ref, e);
    }
  };
  if (sampleCount == 0) {
    // Full reference, i-k-j loop order in double.
    refRow.assign(p.N, 0.0);
    for (uint32_t i = 0; i < p.M; ++i) {
      std::fill(refRow.begin(), refRow.end(), 0.0);
      for (uint32_t k = 0; k < p.K; ++k) {
        double a = Af[(size_t)i * p.lda + k];
        const float* b = &Bf[(size_t)k * p.ldb];
        for (uint32_t j = 0; j < p.N; ++j) refRow[j] += a * (double)b[j];
      }
      for (uint32_t j = 0; j < p.N; ++j) check(i, j, refRow[j]);
    }
  } else {
    std::mt19937 rng(12345);
    for (uint32_t s = 0; s < sampleCount; ++s) {
      uint32_t i = rng() % p.M, j = rng() % p.N;
      if (s < 4) {
        i = s & 1 ? p.M - 1 : 0;
        j = s & 2 ? p.N - 1 : 0;
      }  // corners
      check(i, j, refElem(p, Af, Bf, i, j));
    }
  }
  const double relMax = maxAbsRef > 0 ? maxAbsErr / maxAbsRef : maxAbsErr;
  const double relFro = refSq > 0 ? std::sqrt(errSq / refSq) : std::sqrt(errSq);
  const bool pass = nonFinite == 0 && relMax <= 1e-2 && relFro <= 1e-2;
  printf("  [%s] %s: checked %" PRIu64
         " elements: max|err| = %.3e, max|ref| = %.3e, rel err (max) = %.3e, "
         "rel err (Frobenius) = %.3e, non-finite = %" PRIu64 "\n",
         label, pass ? "PASS" : "FAIL", checked, maxAbsErr, maxAbsRef, relMax, relFro, nonFinite);
  if (!pass)
    printf("  !!!!!!!! [%s] CORRECTNESS FAILURE (threshold rel err 1e-2) !!!!!!!!\n", label);
  fflush(stdout);
  return pass;
}

// ----------------------------------------------------------------------------------------------
static void usage(const char* argv0) {
  printf(
      "usage: %s [--dir DIR] [--device IDX] [--only SUBSTR] [--size S] [--iters N] [--reps R]\n"
      "          [--warmup W] [--timeout-s T] [--no-perf] [--emulate]\n",
      argv0);
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options opt;
  opt.dir = exeDir();
  bool sizeSet = false, itersSet = false, repsSet = false, warmSet = false, timeoutSet = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        usage(argv[0]);
        die("missing value for %s", a.c_str());
      }
      return argv[++i];
    };
    if (a == "--dir")
      opt.dir = next();
    else if (a == "--device")
      opt.device = atoi(next());
    else if (a == "--only")
      opt.only = next();
    else if (a == "--size") {
      opt.size = (uint32_t)atoi(next());
      sizeSet = true;
    } else if (a == "--iters") {
      opt.iters = (uint32_t)atoi(next());
      itersSet = true;
    } else if (a == "--reps") {
      opt.reps = (uint32_t)atoi(next());
      repsSet = true;
    } else if (a == "--warmup") {
      opt.warmup = (uint32_t)atoi(next());
      warmSet = true;
    } else if (a == "--timeout-s") {
      opt.timeoutS = atof(next());
      timeoutSet = true;
    } else if (a == "--no-perf")
      opt.perf = false;
    else if (a == "--emulate")
      opt.emulate = true;
    else if (a == "-h" || a == "--help") {
      usage(argv[0]);
      return 0;
    } else {
      usage(argv[0]);
      die("unknown argument '%s'", a.c_str());
    }
  }
  if (opt.emulate) {  // scalar emulation on a CPU device: keep it small
    if (!sizeSet) opt.size = 256;
    if (!itersSet) opt.iters = 2;
    if (!repsSet) opt.reps = 1;
    if (!warmSet) opt.warmup = 1;
    if (!timeoutSet) opt.timeoutS = 120;
  }
  if (opt.iters == 0 || opt.reps == 0 || opt.size == 0 || opt.timeoutS <= 0)
    die("invalid numeric option");

  // Global watchdog so the program can never hang (e.g. in driver calls without timeouts).
  unsigned watchdog = opt.emulate ? 900 : 200;
  if (const char* w = getenv("COOPMAT_WATCHDOG_S")) watchdog = (unsigned)atoi(w);
  signal(SIGALRM, watchdogHandler);
  alarm(watchdog);

  printf("=== coopmat_bench: f16 x f16 -> f32 GEMM via VK_KHR_cooperative_matrix ===\n");
  printf(
      "mode: %s; variants dir: %s; perf size %u, warmup %u, iters %u, reps %u, fence timeout %.0f "
      "s, "
      "watchdog %u s\n",
      opt.emulate ? "EMULATE (scalar kernels, self-test)" : "cooperative matrix", opt.dir.c_str(),
      opt.size, opt.warmup, opt.iters, opt.reps, opt.timeoutS, watchdog);

  // ---------------------------------------------------------------- loader
  const char* libEnv = getenv("COOPMAT_VK_LIB");
  std::vector<std::string> libs;
  if (libEnv && *libEnv) libs.push_back(libEnv);
  libs.push_back("libvulkan.so.1");
  libs.push_back("libvulkan.so");
  void* lib = nullptr;
  std::string libErrors;
  for (auto& l : libs) {
    lib = dlopen(l.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      printf("Vulkan loader: %s\n", l.c_str());
      break;
    }
    libErrors += std::string("\n  ") + dlerror();
  }
  if (!lib)
    die("cannot load the Vulkan loader (libvulkan.so.1):%s\n  Install libvulkan1 or set "
        "COOPMAT_VK_LIB / LD_LIBRARY_PATH.",
        libErrors.c_str());
  auto gipa = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr");
  if (!gipa) die("vkGetInstanceProcAddr not found in the Vulkan loader");
  volkInitializeCustom(gipa);

  uint32_t loaderVersion = VK_API_VERSION_1_0;
  if (vkEnumerateInstanceVersion) vkEnumerateInstanceVersion(&loaderVersion);
  printf("loader instance version: %u.%u.%u\n", VK_API_VERSION_MAJOR(loaderVersion),
         VK_API_VERSION_MINOR(loaderVersion), VK_API_VERSION_PATCH(loaderVersion));
  if (loaderVersion < VK_API_VERSION_1_3) die("the Vulkan loader is older than 1.3");
  for (const char* e : {"VK_DRIVER_FILES", "VK_ICD_FILENAMES", "VK_LOADER_DEBUG"})
    if (const char* v = getenv(e)) printf("env %s=%s\n", e, v);

  Ctx c;
  c.timeoutS = opt.timeoutS;
  {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "coopmat_bench";
    app.apiVersion = VK_API_VERSION_1_3;
    VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ici.pApplicationInfo = &app;
    VkResult r = vkCreateInstance(&ici, nullptr, &c.instance);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
      die("vkCreateInstance -> VK_ERROR_INCOMPATIBLE_DRIVER: no Vulkan driver (ICD) found. "
          "Set VK_DRIVER_FILES=/path/to/nvidia_icd.json (and VK_LOADER_DEBUG=all to debug).");
    VK_CHECK(r);
  }
  volkLoadInstanceOnly(c.instance);
  auto getCoopProps = (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(
      c.instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");

  // ---------------------------------------------------------------- device selection
  uint32_t nDev = 0;
  VK_CHECK(vkEnumeratePhysicalDevices(c.instance, &nDev, nullptr));
  std::vector<VkPhysicalDevice> devs(nDev);
  if (nDev) VK_CHECK(vkEnumeratePhysicalDevices(c.instance, &nDev, devs.data()));
  printf("physical devices: %u\n", nDev);
  int chosen = -1;
  for (uint32_t i = 0; i < nDev; ++i) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(devs[i], &p);
    auto exts = deviceExtensions(devs[i]);
    const bool coop = hasExtension(exts, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    printf(
        "  [%u] %s (%s) vendor 0x%04x device 0x%04x, API %u.%u.%u, driver 0x%08x, "
        "VK_KHR_cooperative_matrix: %s\n",
        i, p.deviceName, deviceTypeName(p.deviceType), p.vendorID, p.deviceID,
        VK_API_VERSION_MAJOR(p.apiVersion), VK_API_VERSION_MINOR(p.apiVersion),
        VK_API_VERSION_PATCH(p.apiVersion), p.driverVersion, coop ? "yes" : "no");
    std::string why;
    if (opt.device >= 0 && (uint32_t)opt.device != i)
      why = "not the --device index";
    else if (p.apiVersion < VK_API_VERSION_1_3)
      why = "device API < 1.3";
    else if (!opt.emulate && !coop)
      why = "no VK_KHR_cooperative_matrix";
    else if (!opt.emulate && opt.device < 0 &&
             p.deviceType != VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU &&
             p.deviceType != VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU)
      why = "not a discrete/integrated GPU";
    if (!why.empty()) {
      printf("      skipped: %s\n", why.c_str());
      continue;
    }
    if (chosen < 0)
      chosen = (int)i;
    else
      printf("      (also suitable; the first suitable device is used)\n");
  }
  if (chosen < 0) {
    printf("RESULT: no usable device%s - nothing to benchmark. Exiting cleanly.\n",
           opt.emulate ? "" : " supports VK_KHR_cooperative_matrix");
    vkDestroyInstance(c.instance, nullptr);
    return 0;
  }
  c.phys = devs[chosen];
  vkGetPhysicalDeviceProperties(c.phys, &c.props);
  vkGetPhysicalDeviceMemoryProperties(c.phys, &c.memProps);
  printf("using device [%d] %s\n", chosen, c.props.deviceName);
  auto devExts = deviceExtensions(c.phys);

  // ---------------------------------------------------------------- properties
  VkPhysicalDeviceCooperativeMatrixPropertiesKHR coopDevProps{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR};
  VkPhysicalDeviceVulkan13Properties p13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES};
  VkPhysicalDeviceVulkan12Properties p12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
  VkPhysicalDeviceVulkan11Properties p11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
  VkPhysicalDeviceProperties2 props2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  const bool devHasCoop = hasExtension(devExts, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  props2.pNext = &p11;
  p11.pNext = &p12;
  p12.pNext = &p13;
  if (devHasCoop) p13.pNext = &coopDevProps;
  vkGetPhysicalDeviceProperties2(c.phys, &props2);
  printf("driver: %s %s (driverID %d), conformance %u.%u.%u.%u\n", p12.driverName, p12.driverInfo,
         (int)p12.driverID, p12.conformanceVersion.major, p12.conformanceVersion.minor,
         p12.conformanceVersion.subminor, p12.conformanceVersion.patch);
  printf(
      "subgroupSize %u (min %u, max %u), subgroup stages 0x%x ops 0x%x, requiredSubgroupSizeStages "
      "0x%x\n",
      p11.subgroupSize, p13.minSubgroupSize, p13.maxSubgroupSize, p11.subgroupSupportedStages,
      p11.subgroupSupportedOperations, p13.requiredSubgroupSizeStages);
  printf(
      "maxComputeSharedMemorySize %u, maxComputeWorkGroupInvocations %u, timestampPeriod %.3f ns\n",
      c.props.limits.maxComputeSharedMemorySize, c.props.limits.maxComputeWorkGroupInvocations,
      c.props.limits.timestampPeriod);

  bool haveShape = false;
  if (devHasCoop) {
    printf("cooperativeMatrixSupportedStages: 0x%x\n",
           coopDevProps.cooperativeMatrixSupportedStages);
    if (!getCoopProps)
      die("vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR not available from the loader");
    uint32_t n = 0;
    VK_CHECK(getCoopProps(c.phys, &n, nullptr));
    std::vector<VkCooperativeMatrixPropertiesKHR> cps(n);
    for (auto& cp : cps) {
      memset(&cp, 0, sizeof(cp));
      cp.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
    }
    if (n) {
      VkResult r = getCoopProps(c.phys, &n, cps.data());
      if (r != VK_SUCCESS && r != VK_INCOMPLETE) VK_CHECK(r);
      cps.resize(n);
    }
    printf("cooperative matrix properties (%u):\n", n);
    for (uint32_t i = 0; i < n; ++i) {
      const auto& cp = cps[i];
      const bool match = cp.MSize == 16 && cp.NSize == 16 && cp.KSize == 16 &&
                         cp.AType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
                         cp.BType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
                         cp.CType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
                         cp.ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
                         cp.scope == VK_SCOPE_SUBGROUP_KHR && !cp.saturatingAccumulation;
      haveShape |= match;
      printf(
          "  [%2u] M=%-3u N=%-3u K=%-3u A=%-5s B=%-5s C=%-5s Result=%-5s saturating=%u "
          "scope=%s%s\n",
          i, cp.MSize, cp.NSize, cp.KSize, componentTypeName(cp.AType), componentTypeName(cp.BType),
          componentTypeName(cp.CType), componentTypeName(cp.ResultType), cp.saturatingAccumulation,
          scopeName(cp.scope), match ? "   <== used by gemm_coopmat" : "");
    }
  }
  if (!opt.emulate && !haveShape)
    die("the device does not report 16x16x16 f16*f16+f32->f32 subgroup-scope cooperative matrices; "
        "the kernels would be invalid on it");

  // ---------------------------------------------------------------- features
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR coopF{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pexF{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceVulkan13Features f13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  const bool devHasPex =
      hasExtension(devExts, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  f2.pNext = &f11;
  f11.pNext = &f12;
  f12.pNext = &f13;
  void** tail = &f13.pNext;
  if (devHasCoop) {
    *tail = &coopF;
    tail = &coopF.pNext;
  }
  if (devHasPex) {
    *tail = &pexF;
    tail = &pexF.pNext;
  }
  vkGetPhysicalDeviceFeatures2(c.phys, &f2);
  printf(
      "features: cooperativeMatrix=%u cooperativeMatrixRobustBufferAccess=%u shaderFloat16=%u "
      "storageBuffer16BitAccess=%u vulkanMemoryModel=%u vulkanMemoryModelDeviceScope=%u "
      "subgroupSizeControl=%u computeFullSubgroups=%u pipelineExecutableInfo=%u\n",
      coopF.cooperativeMatrix, coopF.cooperativeMatrixRobustBufferAccess, f12.shaderFloat16,
      f11.storageBuffer16BitAccess, f12.vulkanMemoryModel, f12.vulkanMemoryModelDeviceScope,
      f13.subgroupSizeControl, f13.computeFullSubgroups, pexF.pipelineExecutableInfo);

  // Enable exactly what the kernels need (from their OpCapability list: CooperativeMatrixKHR,
  // Float16, GroupNonUniformBallot, VulkanMemoryModel(+DeviceScope)), plus optional extras.
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR enCoop{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR enPex{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceVulkan13Features en13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceVulkan12Features en12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features en11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceFeatures2 en2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  std::vector<const char*> enableExts;
  en2.pNext = &en11;
  en11.pNext = &en12;
  en12.pNext = &en13;
  tail = &en13.pNext;
  if (!opt.emulate) {
    std::string missing;
    if (!coopF.cooperativeMatrix) missing += " cooperativeMatrix";
    if (!f12.shaderFloat16) missing += " shaderFloat16";
    if (!f12.vulkanMemoryModel) missing += " vulkanMemoryModel";
    if (!f12.vulkanMemoryModelDeviceScope) missing += " vulkanMemoryModelDeviceScope";
    if (!(p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT))
      missing += " subgroup-ops-in-compute";
    if (!(p11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT))
      missing += " subgroup-ballot";
    if (!(coopDevProps.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT))
      missing += " coopmat-in-compute-stage";
    if (!missing.empty()) die("required device features missing:%s", missing.c_str());
    enCoop.cooperativeMatrix = VK_TRUE;
    *tail = &enCoop;
    tail = &enCoop.pNext;
    enableExts.push_back(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    en12.shaderFloat16 = VK_TRUE;
    en12.vulkanMemoryModel = VK_TRUE;
    en12.vulkanMemoryModelDeviceScope = VK_TRUE;
    if (f11.storageBuffer16BitAccess)
      en11.storageBuffer16BitAccess = VK_TRUE;  // not needed, harmless
    // The kernels derive the subgroup index as invocation/32, so the subgroup size must be 32.
    const bool canRequire32 = f13.subgroupSizeControl &&
                              (p13.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                              p13.minSubgroupSize <= 32 && p13.maxSubgroupSize >= 32;
    if (canRequire32) {
      en13.subgroupSizeControl = VK_TRUE;
      c.requireSubgroup32 = true;
      if (f13.computeFullSubgroups) {
        en13.computeFullSubgroups = VK_TRUE;
        c.fullSubgroups = true;
      }
    } else if (p11.subgroupSize != 32) {
      die("subgroup size is %u and cannot be forced to 32 (kernels assume 32)", p11.subgroupSize);
    }
  }
  if (devHasPex && pexF.pipelineExecutableInfo && !getenv("COOPMAT_NO_PIPELINE_STATS")) {
    enPex.pipelineExecutableInfo = VK_TRUE;
    *tail = &enPex;
    tail = &enPex.pNext;
    enableExts.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    c.pipelineExecInfo = true;
  }

  // ---------------------------------------------------------------- queue + device
  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(c.phys, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(c.phys, &nq, qf.data());
  int qfi = -1;
  for (uint32_t i = 0; i < nq;
       ++i)  // prefer a family with compute (and graphics = usually the "main" one)
    if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
        (qfi < 0 || (qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)))
      if (qfi < 0 || !(qf[qfi].queueFlags & VK_QUEUE_GRAPHICS_BIT)) qfi = (int)i;
  if (qfi < 0) die("no compute queue family");
  c.queueFamily = (uint32_t)qfi;
  c.timestampValidBits = qf[qfi].timestampValidBits;
  printf("queue family %d (flags 0x%x), timestampValidBits %u\n", qfi, qf[qfi].queueFlags,
         c.timestampValidBits);

  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = c.queueFamily;
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &en2;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = (uint32_t)enableExts.size();
  dci.ppEnabledExtensionNames = enableExts.data();
  printf("creating device with extensions:");
  for (auto e : enableExts) printf(" %s", e);
  printf("%s\n", enableExts.empty() ? " (none)" : "");
  VK_CHECK(vkCreateDevice(c.phys, &dci, nullptr, &c.device));
  volkLoadDevice(c.device);
  vkGetDeviceQueue(c.device, c.queueFamily, 0, &c.queue);

  {
    VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = c.queueFamily;
    VK_CHECK(vkCreateCommandPool(c.device, &pci, nullptr, &c.cmdPool));
    VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = c.cmdPool;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    VK_CHECK(vkAllocateCommandBuffers(c.device, &cai, &c.cmd));
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vkCreateFence(c.device, &fci, nullptr, &c.fence));
    if (c.timestampValidBits) {
      VkQueryPoolCreateInfo qpi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      qpi.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qpi.queryCount = 2;
      VK_CHECK(vkCreateQueryPool(c.device, &qpi, nullptr, &c.queryPool));
    }
    VkDescriptorSetLayoutBinding b[3];
    for (uint32_t i = 0; i < 3; ++i) {
      b[i] = VkDescriptorSetLayoutBinding{};
      b[i].binding = i;
      b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      b[i].descriptorCount = 1;
      b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dli{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    dli.bindingCount = 3;
    dli.pBindings = b;
    VK_CHECK(vkCreateDescriptorSetLayout(c.device, &dli, nullptr, &c.dsl));
    VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(PushConsts)};
    VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pli.setLayoutCount = 1;
    pli.pSetLayouts = &c.dsl;
    pli.pushConstantRangeCount = 1;
    pli.pPushConstantRanges = &pcr;
    VK_CHECK(vkCreatePipelineLayout(c.device, &pli, nullptr, &c.pipeLayout));
    VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3};
    VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dpi.maxSets = 1;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &ps;
    VK_CHECK(vkCreateDescriptorPool(c.device, &dpi, nullptr, &c.descPool));
    VkDescriptorSetAllocateInfo dai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    dai.descriptorPool = c.descPool;
    dai.descriptorSetCount = 1;
    dai.pSetLayouts = &c.dsl;
    VK_CHECK(vkAllocateDescriptorSets(c.device, &dai, &c.descSet));
  }

  // ---------------------------------------------------------------- variants
  std::vector<Variant> all = readVariants(opt.dir), vars;
  for (auto& v : all)
    if (v.emulate == opt.emulate &&
        (opt.only.empty() || v.name.find(opt.only) != std::string::npos))
      vars.push_back(v);
  if (vars.empty())
    die("no %s variants selected from %s/variants.txt", opt.emulate ? "emulated" : "coopmat",
        opt.dir.c_str());

  std::vector<Problem> tests = {
      {256, 256, 256, 256, 256, 256},
      {512, 256, 384, 384, 256, 256},
      {256, 512, 32, 32, 512, 512},    // a single K tile (only for BK <= 32)
      {256, 256, 256, 264, 264, 260},  // padded leading dimensions
  };
  Problem perf{opt.size, opt.size, opt.size, opt.size, opt.size, opt.size};

  // One set of buffers big enough for everything.
  VkDeviceSize maxA = 0, maxB = 0, maxC = 0;
  for (auto& t : tests) {
    maxA = std::max<VkDeviceSize>(maxA, (VkDeviceSize)t.M * t.lda * 2);
    maxB = std::max<VkDeviceSize>(maxB, (VkDeviceSize)t.K * t.ldb * 2);
    maxC = std::max<VkDeviceSize>(maxC, (VkDeviceSize)t.M * t.ldc * 4);
  }
  if (opt.perf) {
    maxA = std::max<VkDeviceSize>(maxA, (VkDeviceSize)perf.M * perf.lda * 2);
    maxB = std::max<VkDeviceSize>(maxB, (VkDeviceSize)perf.K * perf.ldb * 2);
    maxC = std::max<VkDeviceSize>(maxC, (VkDeviceSize)perf.M * perf.ldc * 4);
  }
  GemmBuffers g;
  const VkBufferUsageFlags usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
  g.A = createBuffer(c, maxA, usage, false);
  g.B = createBuffer(c, maxB, usage, false);
  g.C = createBuffer(c, maxC, usage, false);
  g.staging =
      createBuffer(c, std::max(maxA + maxB, maxC),
                   VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, true);
  bindDescriptors(c, g);
  printf("buffers: A %.1f MiB, B %.1f MiB, C %.1f MiB, staging %.1f MiB\n", maxA / 1048576.0,
         maxB / 1048576.0, maxC / 1048576.0, g.staging.size / 1048576.0);

  struct Summary {
    std::string name;
    std::string correctness;
    double bestGpuTflops = 0, bestWallTflops = 0, bestMsPerGemm = 0;
  };
  std::vector<Summary> summary;
  bool anyFail = false;

  for (const Variant& v : vars) {
    Summary sm;
    sm.name = v.name;
    printf(
        "\n--- variant %s: block %ux%u, BK %u, %u threads (%ux%u subgroups of 32, %ux%u 16x16 "
        "tiles each), "
        "shared %u B, spv %s\n",
        v.name.c_str(), v.bm(), v.bn(), v.bk, v.threads(), v.warpsM, v.warpsN, v.tm, v.tn,
        v.smemBytes(), v.spv.c_str());
    const bool ignoreLimits = opt.emulate && getenv("COOPMAT_IGNORE_LIMITS");  // self-test only
    if (!ignoreLimits && (v.threads() > c.props.limits.maxComputeWorkGroupInvocations ||
                          v.threads() > c.props.limits.maxComputeWorkGroupSize[0] ||
                          v.smemBytes() > c.props.limits.maxComputeSharedMemorySize)) {
      printf("  SKIP: exceeds device limits (workgroup size or shared memory)\n");
      sm.correctness = "SKIPPED(limits)";
      summary.push_back(sm);
      continue;
    }
    Pipeline pipe;
    if (!createPipeline(c, v, pipe)) {
      sm.correctness = "PIPELINE-ERROR";
      anyFail = true;
      summary.push_back(sm);
      destroyPipeline(c, pipe);
      continue;
    }
    bool pass = true;
    int ran = 0;
    for (size_t ti = 0; ti < tests.size(); ++ti) {
      const Problem& t = tests[ti];
      char label[96];
      snprintf(label, sizeof(label), "%s M=%u N=%u K=%u lda=%u ldb=%u ldc=%u", v.name.c_str(), t.M,
               t.N, t.K, t.lda, t.ldb, t.ldc);
      if (const char* why = problemUnsupported(c, v, t)) {
        printf("  [%s] skipped: %s\n", label, why);
        continue;
      }
      std::vector<uint16_t> A, B;
      makeInputs(t, 1000u + (uint32_t)ti, A, B);
      uploadInputs(c, g, A, B);
      beginCmd(c);
      // C := NaN pattern, so elements the kernel does not write are detected.
      vkCmdFillBuffer(c.cmd, g.C.buf, 0, VK_WHOLE_SIZE, 0xFFFFFFFFu);
      barrierAll(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
      recordGemm(c, v, pipe, t);
      barrierAll(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                 VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
      double wall = submitAndWait(c, label);
      std::vector<float> Cg;
      readbackC(c, g, (VkDeviceSize)t.M * t.ldc * 4, Cg);
      printf("  [%s] ran in %.3f ms (wall)\n", label, wall * 1e3);
      pass &= compareResult(t, A, B, Cg, 0, label);
      ++ran;
    }
    if (ran == 0) printf("  WARNING: no correctness test applicable to this variant\n");
    sm.correctness = ran == 0 ? "UNTESTED" : (pass ? "PASS" : "FAIL");
    anyFail |= !pass;

    if (opt.perf) {
      const char* why = problemUnsupported(c, v, perf);
      if (why) {
        printf("  perf %ux%ux%u skipped: %s\n", perf.M, perf.N, perf.K, why);
      } else {
        char label[64];
        snprintf(label, sizeof(label), "%s perf %u^3", v.name.c_str(), opt.size);
        static std::vector<uint16_t> A, B;  // generated once, reused by all variants
        if (A.empty()) makeInputs(perf, 77u, A, B);
        uploadInputs(c, g, A, B);
        const double flop = 2.0 * perf.M * perf.N * (double)perf.K;
        // warm-up
        if (opt.warmup) {
          beginCmd(c);
          for (uint32_t w = 0; w < opt.warmup; ++w) {
            recordGemm(c, v, pipe, perf);
            barrierAll(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT);
          }
          double ws = submitAndWait(c, "warm-up");
          printf("  [%s] warm-up: %u dispatches in %.3f ms wall\n", label, opt.warmup, ws * 1e3);
        }
        for (uint32_t rep = 0; rep < opt.reps; ++rep) {
          beginCmd(c);
          if (c.queryPool) {
            vkCmdResetQueryPool(c.cmd, c.queryPool, 0, 2);
            vkCmdWriteTimestamp(c.cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, c.queryPool, 0);
          }
          for (uint32_t it = 0; it < opt.iters; ++it) {
            recordGemm(c, v, pipe, perf);
            // serialize the GEMMs (they all write C) - realistic back-to-back dependent GEMMs
            barrierAll(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT);
          }
          if (c.queryPool)
            vkCmdWriteTimestamp(c.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c.queryPool, 1);
          double wall = submitAndWait(c, label);
          double gpuS = -1;
          if (c.queryPool) {
            uint64_t ts[2] = {0, 0};
            VkResult r =
                vkGetQueryPoolResults(c.device, c.queryPool, 0, 2, sizeof(ts), ts, sizeof(uint64_t),
                                      VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
            if (r == VK_SUCCESS) {
              uint64_t mask =
                  c.timestampValidBits >= 64 ? ~0ull : ((1ull << c.timestampValidBits) - 1);
              uint64_t d = (ts[1] - ts[0]) & mask;
              gpuS = (double)d * c.props.limits.timestampPeriod * 1e-9;
            } else {
              printf("  vkGetQueryPoolResults -> %s\n", vkResultName(r));
            }
          }
          const double wallT = flop * opt.iters / wall * 1e-12;
          if (gpuS > 0) {
            const double gpuT = flop * opt.iters / gpuS * 1e-12;
            printf(
                "  [%s] rep %u: %u GEMMs: GPU timestamps %.3f ms (%.4f ms/GEMM) => %.2f TFLOP/s | "
                "wall submit+wait %.3f ms => %.2f TFLOP/s\n",
                label, rep, opt.iters, gpuS * 1e3, gpuS * 1e3 / opt.iters, gpuT, wall * 1e3, wallT);
            if (gpuT > sm.bestGpuTflops) {
              sm.bestGpuTflops = gpuT;
              sm.bestMsPerGemm = gpuS * 1e3 / opt.iters;
            }
          } else {
            printf(
                "  [%s] rep %u: %u GEMMs: (no GPU timestamps) wall submit+wait %.3f ms => %.2f "
                "TFLOP/s\n",
                label, rep, opt.iters, wall * 1e3, wallT);
          }
          sm.bestWallTflops = std::max(sm.bestWallTflops, wallT);
        }
        // Sanity check of the last perf result on sampled elements.
        std::vector<float> Cg;
        readbackC(c, g, (VkDeviceSize)perf.M * perf.ldc * 4, Cg);
        bool ok = compareResult(perf, A, B, Cg, 512, label);
        if (!ok) {
          sm.correctness += "+PERF-CHECK-FAIL";
          anyFail = true;
        }
      }
    }
    summary.push_back(sm);
    destroyPipeline(c, pipe);
  }

  printf("\n=== SUMMARY (%s, %s) ===\n", c.props.deviceName,
         opt.emulate ? "EMULATED kernels" : "coopmat kernels");
  for (auto& s : summary)
    printf(
        "  %-28s correctness %-22s  perf %u^3: best GPU-timestamp %.2f TFLOP/s (%.4f ms/GEMM), "
        "best wall %.2f TFLOP/s\n",
        s.name.c_str(), s.correctness.c_str(), opt.size, s.bestGpuTflops, s.bestMsPerGemm,
        s.bestWallTflops);
  printf("RESULT: %s\n", anyFail ? "FAIL (see above)" : "OK");

  VK_CHECK(vkDeviceWaitIdle(c.device));
  destroyBuffer(c, g.A);
  destroyBuffer(c, g.B);
  destroyBuffer(c, g.C);
  destroyBuffer(c, g.staging);
  vkDestroyDescriptorPool(c.device, c.descPool, nullptr);
  vkDestroyPipelineLayout(c.device, c.pipeLayout, nullptr);
  vkDestroyDescriptorSetLayout(c.device, c.dsl, nullptr);
  if (c.queryPool) vkDestroyQueryPool(c.device, c.queryPool, nullptr);
  vkDestroyFence(c.device, c.fence, nullptr);
  vkDestroyCommandPool(c.device, c.cmdPool, nullptr);
  vkDestroyDevice(c.device, nullptr);
  vkDestroyInstance(c.instance, nullptr);
  return anyFail ? 1 : 0;
}
