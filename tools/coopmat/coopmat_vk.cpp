// coopmat_vk.cpp — errors, f16 conversion, Vulkan helpers and pipelines (coopmat.hpp).
#include "coopmat.hpp"

// ----------------------------------------------------------------------------------------------
// Error handling: print and exit; never hang (fence waits have timeouts, plus a global watchdog).
const char* vkResultName(VkResult r) {
  switch (r) {
#define C(x) \
  case x:    \
    return #x;
    C(VK_SUCCESS)
    C(VK_NOT_READY)
    C(VK_TIMEOUT) C(VK_EVENT_SET) C(VK_EVENT_RESET) C(VK_INCOMPLETE) C(VK_ERROR_OUT_OF_HOST_MEMORY)
        C(VK_ERROR_OUT_OF_DEVICE_MEMORY) C(VK_ERROR_INITIALIZATION_FAILED) C(VK_ERROR_DEVICE_LOST)
            C(VK_ERROR_MEMORY_MAP_FAILED) C(VK_ERROR_LAYER_NOT_PRESENT)
                C(VK_ERROR_EXTENSION_NOT_PRESENT) C(VK_ERROR_FEATURE_NOT_PRESENT)
                    C(VK_ERROR_INCOMPATIBLE_DRIVER) C(VK_ERROR_TOO_MANY_OBJECTS)
                        C(VK_ERROR_FORMAT_NOT_SUPPORTED) C(VK_ERROR_FRAGMENTED_POOL)
                            C(VK_ERROR_UNKNOWN) C(VK_ERROR_OUT_OF_POOL_MEMORY)
                                C(VK_ERROR_INVALID_EXTERNAL_HANDLE) C(VK_ERROR_FRAGMENTATION)
                                    C(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
                                        C(VK_PIPELINE_COMPILE_REQUIRED)
                                            C(VK_ERROR_INVALID_SHADER_NV)
#undef C
                                                default : return "VK_RESULT_?";
  }
}

[[noreturn]] void die(const char* fmt, ...) {
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

void watchdogHandler(int) {
  const char msg[] = "\nFATAL: watchdog timeout (COOPMAT_WATCHDOG_S) - aborting to avoid a hang\n";
  ssize_t w = write(1, msg, sizeof(msg) - 1);
  (void)w;
  _exit(4);
}

// ----------------------------------------------------------------------------------------------
// f16 helpers (round-to-nearest-even conversion; no reliance on _Float16)
uint16_t floatToHalf(float f) {
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
float halfToFloat(uint16_t h) {
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

std::string exeDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  std::string s(buf);
  size_t p = s.find_last_of('/');
  return p == std::string::npos ? "." : s.substr(0, p);
}

const char* deviceTypeName(VkPhysicalDeviceType t) {
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
const char* componentTypeName(uint32_t t) {
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
const char* scopeName(uint32_t s) {
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

bool hasExtension(const std::vector<VkExtensionProperties>& exts, const char* name) {
  for (auto& e : exts)
    if (strcmp(e.extensionName, name) == 0) return true;
  return false;
}

std::vector<VkExtensionProperties> deviceExtensions(VkPhysicalDevice pd) {
  uint32_t n = 0;
  VK_CHECK(vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr));
  std::vector<VkExtensionProperties> v(n);
  if (n) VK_CHECK(vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, v.data()));
  v.resize(n);
  return v;
}

uint32_t findMemoryType(const Ctx& c, uint32_t typeBits, VkMemoryPropertyFlags want,
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

Buffer createBuffer(const Ctx& c, VkDeviceSize size, VkBufferUsageFlags usage, bool hostVisible) {
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
void destroyBuffer(const Ctx& c, Buffer& b) {
  if (b.mapped) vkUnmapMemory(c.device, b.mem);
  if (b.buf) vkDestroyBuffer(c.device, b.buf, nullptr);
  if (b.mem) vkFreeMemory(c.device, b.mem, nullptr);
  b = Buffer{};
}

void beginCmd(const Ctx& c) {
  VK_CHECK(vkResetCommandBuffer(c.cmd, 0));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_CHECK(vkBeginCommandBuffer(c.cmd, &bi));
}

// Submits c.cmd and waits on the fence with a timeout. Returns wall seconds (submit -> signaled).
double submitAndWait(const Ctx& c, const char* what) {
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

void barrierAll(const Ctx& c, VkPipelineStageFlags src, VkAccessFlags srcA,
                VkPipelineStageFlags dst, VkAccessFlags dstA) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = srcA;
  mb.dstAccessMask = dstA;
  vkCmdPipelineBarrier(c.cmd, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

std::vector<uint32_t> readSpv(const std::string& path) {
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

std::vector<Variant> readVariants(const std::string& dir) {
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

void printPipelineStats(const Ctx& c, VkPipeline p) {
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

bool createPipeline(const Ctx& c, const Variant& v, Pipeline& out) {
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

void destroyPipeline(const Ctx& c, Pipeline& p) {
  if (p.pipeline) vkDestroyPipeline(c.device, p.pipeline, nullptr);
  if (p.module) vkDestroyShaderModule(c.device, p.module, nullptr);
  p = Pipeline{};
}
