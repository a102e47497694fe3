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
#include "coopmat.hpp"

// ----------------------------------------------------------------------------------------------
int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options opt = parseOptions(argc, argv);

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
