// runtime/vulkan/vk_device.cpp — opening a physical device and describing it.
// Memory and copies are in vk_memory.cpp, recording and submission in
// vk_recorder.cpp, pipelines in vk_pipelines.cpp.
#include "vulkan/vk_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ferry/error.hpp"
#include "ferry/kit/env.hpp"
#include "log_internal.hpp"
#include "vulkan/vk_coopmat.hpp"
#include "vulkan/vk_coopmat_shaders.hpp"
#include "vulkan/vk_policy.hpp"

namespace ferry::vulkan {

DeviceKind device_kind(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return DeviceKind::discrete_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return DeviceKind::integrated_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return DeviceKind::virtual_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return DeviceKind::cpu_gpu;
    default:
      return DeviceKind::other;
  }
}

namespace {
bool has_extension(const std::vector<VkExtensionProperties>& exts, const char* name) {
  return std::any_of(exts.begin(), exts.end(), [&](const VkExtensionProperties& e) {
    return std::strcmp(e.extensionName, name) == 0;
  });
}
}  // namespace

VulkanDevice::VulkanDevice(Device device, const PhysicalDevice& physical)
    : DeviceImpl(std::move(device)), physical_(physical) {
  std::size_t max_in_flight = 4;
  if (const auto n = kit::env::whole_number("FERRY_VULKAN_MAX_BATCHES_IN_FLIGHT", 1, 1 << 16,
                                            "a positive number of batches"))
    max_in_flight = std::size_t(*n);
  fused_attention_ = fused_attention(std::getenv("FERRY_VULKAN_FUSED_ATTENTION"));
  split_attention_ = vulkan::split_attention(std::getenv("FERRY_VULKAN_SPLIT_ATTENTION"));
  create_device();
  memory_ = std::make_unique<MemoryPools>(
      device_, vk_, physical_.handle, this->device().str(), storage_alignment_,
      kit::env::flag("FERRY_VULKAN_FORCE_STAGING"), queue_families_);
  recorder_ =
      std::make_unique<Recorder>(vk_, device_, compute_lane_, transfer_lane_, this->device().str(),
                                 kit::env::flag("FERRY_VULKAN_SERIALIZE"), max_in_flight, *memory_);
  pipelines_ = std::make_unique<Pipelines>(device_, vk_, physical_, this->device().str(),
                                           full_variant_, push_descriptors_,
                                           subgroup_reductions_);
  KernelTable table;
  add_elementwise_kernels(table);
  add_random_kernels(table);
  add_reduce_kernels(table);
  add_nn_kernels(table);
  add_linalg_kernels(table);
  add_factor_kernels(table);
  add_conv_kernels(table);
  add_attention_kernels(table);
  add_batch_norm_kernels(table);
  add_pool_kernels(table);
  add_resample_kernels(table);
  add_index_kernels(table);
  add_optim_kernels(table);
  add_sort_kernels(table);
  for (auto& [name, fn] : table) register_kernel(name, std::move(fn));
}

std::optional<std::string> VulkanDevice::coopmat_tile(const TileKey& key) {
  std::lock_guard lock(mutex_);
  return pipelines_->tile(key);
}

void VulkanDevice::remember_coopmat_tile(const TileKey& key, std::string name) {
  std::lock_guard lock(mutex_);
  pipelines_->remember_tile(key, std::move(name));
  ++coopmat_tiles_measured_;
}

void VulkanDevice::save_pipeline_cache() {
  std::lock_guard lock(mutex_);
  if (pipelines_) pipelines_->save_cache();
}

VulkanDevice::~VulkanDevice() {
  // Devices live until the process exits (backend.hpp); this runs only when
  // opening failed half-way, or in tests that own a device.
  if (!device_) return;
  vk_.vkDeviceWaitIdle(device_);
  recorder_.reset();
  pipelines_.reset();
  memory_.reset();
  vk_.vkDestroyDevice(device_, nullptr);
}

void VulkanDevice::create_device() {
  VkPhysicalDevice pd = physical_.handle;
  std::uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &count, families.data());
  bool found = false;
  for (std::uint32_t i = 0; i < count && !found; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) queue_family_ = i, found = true;
  if (!found) throw BackendError("vulkan: the device has no compute queue", "no_compute_queue");
  static_assert(kQueueGraphics == VK_QUEUE_GRAPHICS_BIT && kQueueCompute == VK_QUEUE_COMPUTE_BIT &&
                kQueueTransfer == VK_QUEUE_TRANSFER_BIT);
  std::vector<QueueFamilyInfo> family_info;
  for (const VkQueueFamilyProperties& f : families)
    family_info.push_back({f.queueFlags, f.queueCount, f.timestampValidBits});

  check(vkEnumerateDeviceExtensionProperties(pd, nullptr, &count, nullptr),
        "vkEnumerateDeviceExtensionProperties");
  std::vector<VkExtensionProperties> exts(count);
  check(vkEnumerateDeviceExtensionProperties(pd, nullptr, &count, exts.data()),
        "vkEnumerateDeviceExtensionProperties");

  std::vector<const char*> enable;
  push_descriptors_ = has_extension(exts, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) &&
                      !kit::env::flag("FERRY_VULKAN_NO_PUSH_DESCRIPTORS");
  if (push_descriptors_) enable.push_back(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  memory_budget_ = has_extension(exts, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  if (memory_budget_) enable.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  const bool api12 = physical_.api_version >= VK_API_VERSION_1_2;
  const bool ext8 = !api12 && has_extension(exts, VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
  if (ext8) enable.push_back(VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
  // Pinning host memory (register_host_memory); external memory is core in 1.1.
  host_import_ = physical_.api_version >= VK_API_VERSION_1_1 &&
                 has_extension(exts, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  if (host_import_) enable.push_back(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  // The profiler's clock mapping (Note [Vulkan timing] in vk_recorder_timing.cpp).
  if (!has_extension(exts, VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME)) {
    calibration_note_ = "the device lacks VK_EXT_calibrated_timestamps";
  } else if (kit::env::choice("FERRY_VULKAN_CALIBRATED_TIMESTAMPS", {"0", "1"}, "1") == "0") {
    calibration_note_ = "FERRY_VULKAN_CALIBRATED_TIMESTAMPS=0";
  } else {
    std::uint32_t n = 0;
    vkGetPhysicalDeviceCalibrateableTimeDomainsEXT(pd, &n, nullptr);
    std::vector<VkTimeDomainEXT> domains(n);
    vkGetPhysicalDeviceCalibrateableTimeDomainsEXT(pd, &n, domains.data());
    const auto has = [&](VkTimeDomainEXT d) {
      return std::find(domains.begin(), domains.end(), d) != domains.end();
    };
    calibrated_timestamps_ =
        has(VK_TIME_DOMAIN_DEVICE_EXT) && has(VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT);
    if (calibrated_timestamps_)
      enable.push_back(VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME);
    else
      calibration_note_ = "VK_EXT_calibrated_timestamps lacks the device or CLOCK_MONOTONIC domain";
  }

  // What the full shader variant needs (shaders/common.glsl).
  VkPhysicalDevice8BitStorageFeatures f8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  VkPhysicalDevice16BitStorageFeatures f16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f2.pNext = &f16;
  if (api12 || ext8) f16.pNext = &f8;
  // Timeline semaphores order the transfer queue (Note [Transfer queue]); a transfer-only
  // family resets its query pools from the host. Both are core in Vulkan 1.2.
  VkPhysicalDeviceTimelineSemaphoreFeatures fts{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES};
  VkPhysicalDeviceHostQueryResetFeatures fqr{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_HOST_QUERY_RESET_FEATURES};
  if (api12) fts.pNext = &fqr, fqr.pNext = f2.pNext, f2.pNext = &fts;
  vkGetPhysicalDeviceFeatures2(pd, &f2);
  const TransferQueueChoice transfer = choose_transfer_queue(
      std::getenv("FERRY_VULKAN_TRANSFER_QUEUE"), family_info, queue_family_,
      api12 && fts.timelineSemaphore);
  transfer_note_ = transfer.note;
  full_variant_ = f2.features.shaderInt64 && f16.storageBuffer16BitAccess &&
                  f8.storageBuffer8BitAccess && !kit::env::flag("FERRY_VULKAN_BASE_SHADERS");
  f64_ = full_variant_ && f2.features.shaderFloat64;

  // Note [Cooperative-matrix GEMM] in vk_kernels_coopmat.cpp. The probe only asks the driver,
  // so every device says what it lacks, asked for the path or not.
  CoopmatProbe coopmat;
  if (full_variant_)
    coopmat = probe_coopmat(pd, physical_.api_version, exts);
  else
    coopmat.why_not = "16-bit storage";
  coopmat_mode_ = vulkan::coopmat_mode(std::getenv("FERRY_VULKAN_COOPMAT"),
                                       kEmbeddedCoopmatShaderCount > 0, coopmat.ready);
  if (coopmat_mode_ == CoopmatMode::off)
    coopmat_note_ = *kCoopmatBuildNote ? kCoopmatBuildNote
                    : coopmat.ready    ? "FERRY_VULKAN_COOPMAT=1 turns it on"
                                       : "the device lacks " + coopmat.why_not;
  if (coopmat_mode_ == CoopmatMode::on) enable.push_back(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  // The emulation reads bf16 as bits and needs nothing of the device.
  coopmat_bf16_ =
      coopmat_mode_ == CoopmatMode::emulated || (coopmat_mode_ == CoopmatMode::on && coopmat.bf16);
  if (coopmat_mode_ == CoopmatMode::on && coopmat.bf16)
    enable.push_back(VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME);
  else if (coopmat_mode_ == CoopmatMode::on)
    coopmat_note_ = "bf16 off: the device lacks " + coopmat.bf16_why_not;
  coopmat_tuning_ = vulkan::coopmat_tuning(std::getenv("FERRY_VULKAN_COOPMAT_TUNE"), coopmat_mode_);

  VkPhysicalDevice8BitStorageFeatures e8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  VkPhysicalDevice16BitStorageFeatures e16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceFeatures2 e2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  if (full_variant_) {
    e2.features.shaderInt64 = VK_TRUE;
    e2.features.shaderFloat64 = f64_ ? VK_TRUE : VK_FALSE;
    e16.storageBuffer16BitAccess = VK_TRUE;
    e8.storageBuffer8BitAccess = VK_TRUE;
    e2.pNext = &e16;
    e16.pNext = &e8;
    if (coopmat_mode_ == CoopmatMode::on) {
      e16.uniformAndStorageBuffer16BitAccess = VK_TRUE;
      e8.pNext = coopmat.enable_chain(nullptr);
    }
  }

  // The transfer lane's features, chained in front of the rest.
  VkPhysicalDeviceTimelineSemaphoreFeatures ets{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES};
  VkPhysicalDeviceHostQueryResetFeatures eqr{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_HOST_QUERY_RESET_FEATURES};
  const bool transfer_only =
      transfer.on && !(families[transfer.family].queueFlags &
                       (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT));
  if (transfer.on) {
    ets.timelineSemaphore = VK_TRUE;
    eqr.hostQueryReset = fqr.hostQueryReset;
    ets.pNext = &eqr;
    eqr.pNext = e2.pNext;
    e2.pNext = &ets;
  }

  const float priorities[2] = {1.0f, 1.0f};
  VkDeviceQueueCreateInfo qci[2]{{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO},
                                 {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO}};
  qci[0].queueFamilyIndex = queue_family_;
  qci[0].queueCount = transfer.on && transfer.family == queue_family_ ? transfer.index + 1 : 1;
  qci[0].pQueuePriorities = priorities;
  qci[1].queueFamilyIndex = transfer.family;
  qci[1].queueCount = 1;
  qci[1].pQueuePriorities = priorities;
  const bool two_families = transfer.on && transfer.family != queue_family_;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &e2;
  dci.queueCreateInfoCount = two_families ? 2 : 1;
  dci.pQueueCreateInfos = qci;
  dci.enabledExtensionCount = std::uint32_t(enable.size());
  dci.ppEnabledExtensionNames = enable.data();
  check(vkCreateDevice(pd, &dci, nullptr, &device_), "vkCreateDevice");
  volkLoadDeviceTable(&vk_, device_);
  vk_.vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
  queue_families_ = {queue_family_};
  compute_lane_ = {queue_, queue_family_, kDeviceStages,
                   families[queue_family_].timestampValidBits, false};
  if (transfer.on) {
    LaneQueue t;
    vk_.vkGetDeviceQueue(device_, transfer.family, transfer.index, &t.queue);
    t.family = transfer.family;
    t.stages = transfer_only ? mask(Stage::transfer) : kDeviceStages;
    t.timestamp_bits = families[transfer.family].timestampValidBits;
    t.host_query_reset = transfer_only;
    // Untimed where it could reset its queries neither in a command buffer nor on the host.
    if (transfer_only && !fqr.hostQueryReset) t.timestamp_bits = 0;
    transfer_lane_ = t;
    if (two_families) queue_families_.push_back(transfer.family);
  }

  // Limits kernels size their work by.
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceExternalMemoryHostPropertiesEXT host{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &sub;
  if (api12) sub.pNext = &drv;
  if (host_import_) host.pNext = p2.pNext, p2.pNext = &host;
  vkGetPhysicalDeviceProperties2(pd, &p2);
  host_import_alignment_ = std::max<std::uint64_t>(1, host.minImportedHostPointerAlignment);
  const VkPhysicalDeviceLimits& l = physical_.props.limits;
  limits_.subgroup_size = std::max(1u, sub.subgroupSize);
  if (physical_.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    limits_.row_elements_per_lane = 1024;  // Note [Row kernel geometry] in vk_kernels.hpp
    limits_.row_target_threads = 4096;
    limits_.attention_min_head_chunk = 64;  // Note [Attention head chunks] in vk_policy.hpp
  }
  if (api12 && drv.driverID == VK_DRIVER_ID_MESA_LLVMPIPE)
    limits_.loop_budget = 65535;  // Note [Loop budget] in vk_kernels.hpp
  if (const auto b = kit::env::whole_number("FERRY_VULKAN_LOOP_BUDGET", 0, 0xffffffffll,
                                            "a number of loop iterations, 0 for none"))
    limits_.loop_budget = std::uint64_t(*b);  // tests: the cuts at small sizes
  if (const auto r =
          kit::env::whole_number("FERRY_VULKAN_ROW_ELEMENTS_PER_LANE", 1, 1 << 20,
                                 "a number of elements from 1 to 2^20"))  // tests: a GPU's
    limits_.row_elements_per_lane = std::uint32_t(*r);                    // rows
  constexpr VkSubgroupFeatureFlags kRowOps =
      VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
  subgroup_reductions_ = subgroup_reductions(std::getenv("FERRY_VULKAN_SUBGROUPS"),
                                             (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                                                 (sub.supportedOperations & kRowOps) == kRowOps);
  limits_.shared_memory = l.maxComputeSharedMemorySize;
  limits_.max_workgroup_invocations = l.maxComputeWorkGroupInvocations;
  limits_.max_groups_x = std::min({l.maxComputeWorkGroupCount[0], l.maxComputeWorkGroupCount[1],
                                   l.maxComputeWorkGroupCount[2]});
  limits_.max_storage_range = l.maxStorageBufferRange;
  if (const auto r =
          kit::env::whole_number("FERRY_VULKAN_MAX_STORAGE_RANGE", 16, INT64_MAX,
                                 "a number of bytes, at least 16"))  // tests: force splitting
    limits_.max_storage_range = std::min<std::uint64_t>(limits_.max_storage_range, *r);
  storage_alignment_ = std::max<std::uint64_t>(16, l.minStorageBufferOffsetAlignment);
  limits_.storage_alignment = storage_alignment_;
  driver_name_ = api12 ? fmt::format("{} {}", drv.driverName, drv.driverInfo)
                       : fmt::format("driver version {}", physical_.props.driverVersion);
}

DeviceInfo VulkanDevice::info() {
  const VkPhysicalDeviceProperties& p = physical_.props;
  DeviceInfo d;
  d.device = device().str();
  d.backend = "vulkan";
  d.index = device().index();
  d.available = true;
  d.name = p.deviceName;
  switch (p.vendorID) {
    case 0x10de:
      d.vendor = "NVIDIA";
      break;
    case 0x1002:
      d.vendor = "AMD";
      break;
    case 0x8086:
      d.vendor = "Intel";
      break;
    case 0x13b5:
      d.vendor = "ARM";
      break;
    case 0x5143:
      d.vendor = "Qualcomm";
      break;
    case 0x106b:
      d.vendor = "Apple";
      break;
    case 0x10005:
      d.vendor = "Mesa";
      break;
    default:
      d.vendor = fmt::format("0x{:04x}", p.vendorID);
  }
  d.driver = driver_name_;
  d.kind = device_kind(p.deviceType);
  // Memory: the device pool's heap; its budget (VK_EXT_memory_budget) when known.
  const std::uint32_t heap = memory_->heap_index(kDevicePool);
  d.memory_total = memory_->heap_size(kDevicePool);
  std::uint64_t used = memory_->allocator(kDevicePool).stats().reserved;
  d.memory_free = d.memory_total > used ? d.memory_total - used : 0;
  if (memory_budget_) {
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 mp2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
    mp2.pNext = &budget;
    vkGetPhysicalDeviceMemoryProperties2(physical_.handle, &mp2);
    d.memory_free = budget.heapBudget[heap] > budget.heapUsage[heap]
                        ? budget.heapBudget[heap] - budget.heapUsage[heap]
                        : 0;
    d.properties["memory_budget"] = std::to_string(budget.heapBudget[heap]);
  }
  d.max_allocation = memory_->allocator(kDevicePool).effective_config().max_allocation;
  VkPhysicalDeviceIDProperties ids{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  VkPhysicalDeviceFloatControlsProperties fc{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &ids;
  const bool float_controls = physical_.api_version >= VK_API_VERSION_1_2;
  if (float_controls) ids.pNext = &fc;  // core in Vulkan 1.2
  vkGetPhysicalDeviceProperties2(physical_.handle, &p2);
  // Whether f32 denormals survive the shaders (docs/kernel-contract.md,
  // "Denormals"): the shaders declare no float mode, so the driver's default
  // applies; these say what the device can guarantee.
  if (float_controls) {
    d.properties["denorm_preserve_f32"] = fc.shaderDenormPreserveFloat32 ? "yes" : "no";
    d.properties["denorm_flush_to_zero_f32"] = fc.shaderDenormFlushToZeroFloat32 ? "yes" : "no";
  }
  std::memcpy(d.uuid.data(), ids.deviceUUID, 16);
  d.caps = capabilities();
  auto& pr = d.properties;
  pr["api_version"] = fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(physical_.api_version),
                                  VK_API_VERSION_MINOR(physical_.api_version),
                                  VK_API_VERSION_PATCH(physical_.api_version));
  pr["subgroup_size"] = std::to_string(limits_.subgroup_size);
  pr["subgroup_reductions"] = subgroup_reductions_ ? "yes" : "no";
  pr["shared_memory"] = std::to_string(limits_.shared_memory);
  pr["max_workgroup_invocations"] = std::to_string(limits_.max_workgroup_invocations);
  pr["max_storage_buffer_range"] = std::to_string(limits_.max_storage_range);
  pr["shader_variant"] =
      full_variant_ ? "full (f32 f16 bf16 i8 i16 i32 i64 u8 bool)" : "base (f32 i32)";
  pr["int64"] = full_variant_ ? "yes" : "no";
  pr["storage_16bit"] = full_variant_ ? "yes" : "no";
  pr["storage_8bit"] = full_variant_ ? "yes" : "no";
  pr["cooperative_matrix"] = coopmat_mode_ == CoopmatMode::off
                                 ? fmt::format("off ({})", coopmat_note_)
                                 : fmt::format("{} ({} matmul{})", coopmat_mode_name(coopmat_mode_),
                                               coopmat_bf16_ ? "f16 and bf16" : "f16",
                                               coopmat_note_.empty() ? "" : "; " + coopmat_note_);
  pr["push_descriptors"] = push_descriptors_ ? "yes" : "no";
  pr["direct_host_access"] = memory_is_mapped() ? "yes" : "no (staging copies)";
  pr["enumeration_index"] = std::to_string(physical_.enumeration_index);
  pr["max_batches_in_flight"] = std::to_string(recorder_->max_in_flight());
  std::lock_guard lock(mutex_);
  pr["batches_submitted"] = std::to_string(recorder_->submitted());
  pr["barriers_recorded"] = std::to_string(recorder_->barriers_recorded());
  pr["transfer_queue"] = transfer_note_;
  if (recorder_->has_transfer_lane())
    pr["transfer_queue_waits"] = std::to_string(recorder_->cross_lane_waits());
  pr["batches_in_flight"] = std::to_string(recorder_->in_flight());
  pr["clock_calibration"] =
      calibrated_timestamps_
          ? recorder_->calibration_note()
          : fmt::format("{} ({})", recorder_->calibration_note(), calibration_note_);
  pr["shaders_used"] = pipelines_->shaders_used();
  pr["loop_budget"] = limits_.loop_budget ? std::to_string(limits_.loop_budget) : "none";
  if (coopmat_mode_ != CoopmatMode::off) {
    pr["coopmat_tiles"] = coopmat_tuning_ ? "measured per shape" : "by block padding";
    pr["coopmat_tiles_measured"] = std::to_string(coopmat_tiles_measured_);
  }
  return d;
}

}  // namespace ferry::vulkan
