// runtime/vulkan/vk_device.cpp — opening a physical device, describing it,
// its memory pools and the copies. Recording and submission are in
// vk_recorder.cpp, pipelines in vk_pipelines.cpp.
#include "vulkan/vk_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ferry/error.hpp"
#include "log_internal.hpp"

namespace ferry::vulkan {
namespace {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string_view(v) != "0";
}

bool has_extension(const std::vector<VkExtensionProperties>& exts, const char* name) {
  return std::any_of(exts.begin(), exts.end(), [&](const VkExtensionProperties& e) {
    return std::strcmp(e.extensionName, name) == 0;
  });
}

constexpr VkBufferUsageFlags kBufferUsage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                            VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                            VK_BUFFER_USAGE_TRANSFER_DST_BIT;

// Copies larger than this go through staging in pieces, so staging stays bounded.
constexpr std::uint64_t kStagingChunk = std::uint64_t(64) << 20;

}  // namespace

VulkanDevice::VulkanDevice(Device device, VkInstance instance, const PhysicalDevice& physical)
    : DeviceImpl(std::move(device)),
      instance_(instance),
      physical_(physical),
      tracker_(env_flag("FERRY_VULKAN_SERIALIZE")) {
  serialize_ = tracker_.serialize();
  create_device();
  choose_memory();
  load_pipeline_cache();
  KernelTable table;
  add_elementwise_kernels(table);
  add_random_kernels(table);
  add_reduce_kernels(table);
  add_nn_kernels(table);
  add_linalg_kernels(table);
  add_index_kernels(table);
  for (auto& [name, fn] : table) register_kernel(name, std::move(fn));
}

VulkanDevice::~VulkanDevice() {
  // Devices live until the process exits (backend.hpp); this runs only when
  // opening failed half-way, or in tests that own a device.
  if (!device_) return;
  vk_.vkDeviceWaitIdle(device_);
  destroy_pipelines();
  for (auto& pool : pools_)
    if (pool.allocator) {
      pool.allocator->empty_cache();
      pool.allocator.reset();
    }
  for (VkFence f : free_fences_) vk_.vkDestroyFence(device_, f, nullptr);
  for (auto& s : in_flight_) vk_.vkDestroyFence(device_, s.fence, nullptr);
  for (VkDescriptorPool p : free_descriptor_pools_)
    vk_.vkDestroyDescriptorPool(device_, p, nullptr);
  if (command_pool_) vk_.vkDestroyCommandPool(device_, command_pool_, nullptr);
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

  check(vkEnumerateDeviceExtensionProperties(pd, nullptr, &count, nullptr),
        "vkEnumerateDeviceExtensionProperties");
  std::vector<VkExtensionProperties> exts(count);
  check(vkEnumerateDeviceExtensionProperties(pd, nullptr, &count, exts.data()),
        "vkEnumerateDeviceExtensionProperties");

  std::vector<const char*> enable;
  push_descriptors_ = has_extension(exts, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) &&
                      !env_flag("FERRY_VULKAN_NO_PUSH_DESCRIPTORS");
  if (push_descriptors_) enable.push_back(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  memory_budget_ = has_extension(exts, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  if (memory_budget_) enable.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  const bool api12 = physical_.api_version >= VK_API_VERSION_1_2;
  const bool ext8 = !api12 && has_extension(exts, VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
  if (ext8) enable.push_back(VK_KHR_8BIT_STORAGE_EXTENSION_NAME);

  // What the full shader variant needs (shaders/common.glsl).
  VkPhysicalDevice8BitStorageFeatures f8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  VkPhysicalDevice16BitStorageFeatures f16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f2.pNext = &f16;
  if (api12 || ext8) f16.pNext = &f8;
  vkGetPhysicalDeviceFeatures2(pd, &f2);
  full_variant_ = f2.features.shaderInt64 && f16.storageBuffer16BitAccess &&
                  f8.storageBuffer8BitAccess && !env_flag("FERRY_VULKAN_BASE_SHADERS");

  VkPhysicalDevice8BitStorageFeatures e8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  VkPhysicalDevice16BitStorageFeatures e16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceFeatures2 e2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  if (full_variant_) {
    e2.features.shaderInt64 = VK_TRUE;
    e16.storageBuffer16BitAccess = VK_TRUE;
    e8.storageBuffer8BitAccess = VK_TRUE;
    e2.pNext = &e16;
    e16.pNext = &e8;
  }

  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &e2;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = std::uint32_t(enable.size());
  dci.ppEnabledExtensionNames = enable.data();
  check(vkCreateDevice(pd, &dci, nullptr, &device_), "vkCreateDevice");
  volkLoadDeviceTable(&vk_, device_);
  vk_.vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cpi.queueFamilyIndex = queue_family_;
  check(vk_.vkCreateCommandPool(device_, &cpi, nullptr, &command_pool_), "vkCreateCommandPool");

  // Limits kernels size their work by.
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &sub;
  if (api12) sub.pNext = &drv;
  vkGetPhysicalDeviceProperties2(pd, &p2);
  const VkPhysicalDeviceLimits& l = physical_.props.limits;
  limits_.subgroup_size = std::max(1u, sub.subgroupSize);
  limits_.shared_memory = l.maxComputeSharedMemorySize;
  limits_.max_workgroup_invocations = l.maxComputeWorkGroupInvocations;
  limits_.max_groups_x = std::min({l.maxComputeWorkGroupCount[0], l.maxComputeWorkGroupCount[1],
                                   l.maxComputeWorkGroupCount[2]});
  limits_.max_storage_range = l.maxStorageBufferRange;
  if (const char* r = std::getenv("FERRY_VULKAN_MAX_STORAGE_RANGE"))  // tests: force splitting
    limits_.max_storage_range =
        std::min<std::uint64_t>(limits_.max_storage_range, std::strtoull(r, nullptr, 10));
  storage_alignment_ = std::max<std::uint64_t>(16, l.minStorageBufferOffsetAlignment);
  driver_name_ = api12 ? fmt::format("{} {}", drv.driverName, drv.driverInfo)
                       : fmt::format("driver version {}", physical_.props.driverVersion);
}

void VulkanDevice::choose_memory() {
  VkPhysicalDevice pd = physical_.handle;
  vkGetPhysicalDeviceMemoryProperties(pd, &memory_props_);
  // Which memory types can back our buffers.
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = 4096;
  bci.usage = kBufferUsage;
  VkBuffer probe;
  check(vk_.vkCreateBuffer(device_, &bci, nullptr, &probe), "vkCreateBuffer");
  VkMemoryRequirements req;
  vk_.vkGetBufferMemoryRequirements(device_, probe, &req);
  vk_.vkDestroyBuffer(device_, probe, nullptr);

  const auto& mp = memory_props_;
  auto flags = [&](std::uint32_t t) { return mp.memoryTypes[t].propertyFlags; };
  auto heap_size = [&](std::uint32_t t) {
    return mp.memoryHeaps[mp.memoryTypes[t].heapIndex].size;
  };
  constexpr VkMemoryPropertyFlags kMappable =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  std::optional<std::uint32_t> device_type, mapped_device_type, staging_type;
  for (std::uint32_t t = 0; t < mp.memoryTypeCount; ++t) {
    if (!(req.memoryTypeBits & (1u << t))) continue;
    const VkMemoryPropertyFlags f = flags(t);
    if (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) {
      if (!device_type || heap_size(t) > heap_size(*device_type)) device_type = t;
      if ((f & kMappable) == kMappable &&
          (!mapped_device_type || heap_size(t) > heap_size(*mapped_device_type)))
        mapped_device_type = t;
    }
    if ((f & kMappable) == kMappable &&
        (!staging_type || ((f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) &&
                           !(flags(*staging_type) & VK_MEMORY_PROPERTY_HOST_CACHED_BIT))))
      staging_type = t;
  }
  if (!device_type) device_type = staging_type;
  if (!device_type || !staging_type)
    throw BackendError("vulkan: the device has no memory type for storage buffers",
                       "no_memory_type");
  // Device-local memory the host can map directly (integrated GPUs, lavapipe, resizable BAR)
  // is used for everything when its heap is as large as the largest device-local heap: then
  // transfers need no staging copy. A small BAR window (256 MiB) is not worth it.
  bool direct = mapped_device_type && heap_size(*mapped_device_type) >= heap_size(*device_type) &&
                !env_flag("FERRY_VULKAN_FORCE_STAGING");
  if (direct) device_type = mapped_device_type;

  VkPhysicalDeviceMaintenance3Properties m3{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &m3;
  vkGetPhysicalDeviceProperties2(pd, &p2);

  for (int p : {int(kDevicePool), int(kStagingPool)}) {
    Pool& pool = pools_[p];
    pool.type_index = p == kDevicePool ? *device_type : *staging_type;
    pool.heap_index = mp.memoryTypes[pool.type_index].heapIndex;
    pool.mapped = p == kStagingPool || direct;
    detail::BlockAllocatorConfig cfg;
    cfg.alignment = std::max<std::uint64_t>({256, req.alignment, storage_alignment_});
    cfg.max_allocation = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : UINT64_MAX;
    cfg.block_size = std::min<std::uint64_t>(cfg.block_size, cfg.max_allocation);
    cfg.large_threshold = std::min(cfg.large_threshold, cfg.block_size);
    pool.allocator = std::make_unique<detail::BlockAllocator>(
        cfg, [this, p](std::uint64_t bytes) { return acquire_block(p, bytes); },
        [this, p](std::uint64_t id) { release_block(p, id); });
  }
}

bool VulkanDevice::memory_is_mapped() const { return pools_[kDevicePool].mapped; }

std::optional<std::uint64_t> VulkanDevice::acquire_block(int p, std::uint64_t bytes) {
  Pool& pool = pools_[p];
  Block b;
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = bytes;
  mai.memoryTypeIndex = pool.type_index;
  VkResult r = vk_.vkAllocateMemory(device_, &mai, nullptr, &b.memory);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) return std::nullopt;
  check(r, "vkAllocateMemory");
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = bytes;
  bci.usage = kBufferUsage;
  r = vk_.vkCreateBuffer(device_, &bci, nullptr, &b.buffer);
  if (r == VK_SUCCESS) r = vk_.vkBindBufferMemory(device_, b.buffer, b.memory, 0);
  void* mapped = nullptr;
  if (r == VK_SUCCESS && pool.mapped)
    r = vk_.vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &mapped);
  if (r != VK_SUCCESS) {
    if (b.buffer) vk_.vkDestroyBuffer(device_, b.buffer, nullptr);
    vk_.vkFreeMemory(device_, b.memory, nullptr);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) return std::nullopt;
    throw_result(r, "creating a buffer");
  }
  b.mapped = static_cast<std::byte*>(mapped);
  std::uint64_t id = pool.next_block++;
  pool.blocks.emplace(id, b);
  FERRY_DEBUG("{}: new memory block {} of {} bytes (memory type {})", device().str(), id, bytes,
              pool.type_index);
  return id;
}

void VulkanDevice::release_block(int p, std::uint64_t id) {
  Pool& pool = pools_[p];
  auto it = pool.blocks.find(id);
  if (it == pool.blocks.end()) return;
  vk_.vkDestroyBuffer(device_, it->second.buffer, nullptr);
  vk_.vkFreeMemory(device_, it->second.memory, nullptr);  // unmaps too
  pool.blocks.erase(it);
}

std::unique_ptr<VulkanBuffer> VulkanDevice::allocate_in(int p, std::size_t bytes) {
  check_alive();
  Pool& pool = pools_[p];
  detail::AllocResult r = pool.allocator->allocate(bytes);
  if (r.status == detail::AllocStatus::out_of_memory) {
    // Memory the GPU is done with may still wait in the deferred list, and
    // the cache may hold free blocks: release both, then try once more.
    synchronize();
    empty_cache();
    r = pool.allocator->allocate(bytes);
  }
  if (!r.ok()) {
    DeviceInfo i = info();
    std::string why = r.status == detail::AllocStatus::exceeds_max_allocation
                          ? fmt::format("more than the device's largest allocation ({} bytes)",
                                        pool.allocator->effective_config().max_allocation)
                          : fmt::format("{} bytes free", i.memory_free);
    throw OutOfMemoryError(fmt::format("{}: out of memory allocating {} bytes ({}); free tensors "
                                       "or use a smaller batch",
                                       device().str(), bytes, why),
                           bytes, i.memory_free, device().str());
  }
  const Block& b = pool.blocks.at(r.allocation.block);
  std::byte* mapped = b.mapped ? b.mapped + r.allocation.offset : nullptr;
  return std::make_unique<VulkanBuffer>(*this, p, r.allocation, b.buffer, mapped, bytes);
}

std::unique_ptr<Buffer> VulkanDevice::allocate(std::size_t bytes) {
  return allocate_in(kDevicePool, bytes);
}

MemoryStats VulkanDevice::memory_stats() { return pools_[kDevicePool].allocator->stats(); }

void VulkanDevice::empty_cache() {
  retire(false);
  for (auto& pool : pools_) pool.allocator->empty_cache();
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
  switch (p.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      d.kind = DeviceKind::discrete_gpu;
      break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      d.kind = DeviceKind::integrated_gpu;
      break;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      d.kind = DeviceKind::virtual_gpu;
      break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      d.kind = DeviceKind::cpu_gpu;
      break;
    default:
      d.kind = DeviceKind::other;
  }
  // Memory: the device pool's heap; its budget (VK_EXT_memory_budget) when known.
  const std::uint32_t heap = pools_[kDevicePool].heap_index;
  d.memory_total = memory_props_.memoryHeaps[heap].size;
  std::uint64_t used = pools_[kDevicePool].allocator->stats().reserved;
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
  d.max_allocation = pools_[kDevicePool].allocator->effective_config().max_allocation;
  VkPhysicalDeviceIDProperties ids{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &ids;
  vkGetPhysicalDeviceProperties2(physical_.handle, &p2);
  std::memcpy(d.uuid.data(), ids.deviceUUID, 16);
  d.caps.f16 = full_variant_;
  d.caps.bf16 = full_variant_;
  d.caps.int64 = full_variant_;
  d.caps.host_visible_memory = memory_is_mapped();
  d.caps.peer_copy = false;
  auto& pr = d.properties;
  pr["api_version"] = fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(physical_.api_version),
                                  VK_API_VERSION_MINOR(physical_.api_version),
                                  VK_API_VERSION_PATCH(physical_.api_version));
  pr["subgroup_size"] = std::to_string(limits_.subgroup_size);
  pr["shared_memory"] = std::to_string(limits_.shared_memory);
  pr["max_workgroup_invocations"] = std::to_string(limits_.max_workgroup_invocations);
  pr["max_storage_buffer_range"] = std::to_string(limits_.max_storage_range);
  pr["shader_variant"] = full_variant_ ? "full (f32 f16 bf16 i32 i64 u8 bool)" : "base (f32 i32)";
  pr["int64"] = full_variant_ ? "yes" : "no";
  pr["storage_16bit"] = full_variant_ ? "yes" : "no";
  pr["storage_8bit"] = full_variant_ ? "yes" : "no";
  pr["cooperative_matrix"] = limits_.cooperative_matrix_f16 ? "yes" : "no";
  pr["push_descriptors"] = push_descriptors_ ? "yes" : "no";
  pr["direct_host_access"] = memory_is_mapped() ? "yes" : "no (staging copies)";
  pr["enumeration_index"] = std::to_string(physical_.enumeration_index);
  pr["batches_submitted"] = std::to_string(completed_target_);
  pr["barriers_recorded"] = std::to_string(tracker_.stats().barriers());
  return d;
}

// ---- copies ----

namespace {
VulkanBuffer& as_vk(const Buffer& b, const VulkanDevice& d, const char* what) {
  auto* vb = dynamic_cast<const VulkanBuffer*>(&b);
  if (!vb || &vb->device() != &d)
    throw DeviceError(fmt::format("{}: {} is not a buffer of this device", d.device().str(), what));
  return const_cast<VulkanBuffer&>(*vb);
}
}  // namespace

void VulkanDevice::copy_from_host(Buffer& dst, std::size_t dst_offset, const void* src,
                                  std::size_t bytes) {
  VulkanBuffer& d = as_vk(dst, *this, "copy destination");
  if (bytes == 0) return;
  if (d.host_ptr()) {
    wait_for(d.last_use);  // the GPU must be done with the bytes the host overwrites
    std::memcpy(static_cast<std::byte*>(d.host_ptr()) + dst_offset, src, bytes);
    return;
  }
  for (std::size_t done = 0; done < bytes;) {
    std::size_t n = std::min<std::size_t>(bytes - done, kStagingChunk);
    auto staging = allocate_in(kStagingPool, n);
    std::memcpy(staging->host_ptr(), static_cast<const std::byte*>(src) + done, n);
    VkBufferCopy region{staging->offset(), d.offset() + dst_offset + done, n};
    const Use uses[] = {{{std::uint64_t(staging->handle()), region.srcOffset, n}, Access::read},
                        {{std::uint64_t(d.handle()), region.dstOffset, n}, Access::write}};
    before_command(Stage::transfer, uses, {staging.get(), &d});
    vk_.vkCmdCopyBuffer(batch_cb_, staging->handle(), d.handle(), 1, &region);
    after_command(true);
    done += n;
  }  // each staging range is freed once its batch has completed
}

void VulkanDevice::copy_to_host(void* dst, const Buffer& src, std::size_t src_offset,
                                std::size_t bytes) {
  VulkanBuffer& s = as_vk(src, *this, "copy source");
  if (bytes == 0) return;
  if (s.host_ptr()) {
    wait_for(s.last_use);
    std::memcpy(dst, static_cast<const std::byte*>(s.host_ptr()) + src_offset, bytes);
    return;
  }
  for (std::size_t done = 0; done < bytes;) {
    std::size_t n = std::min<std::size_t>(bytes - done, kStagingChunk);
    auto staging = allocate_in(kStagingPool, n);
    VkBufferCopy region{s.offset() + src_offset + done, staging->offset(), n};
    const Use uses[] = {{{std::uint64_t(s.handle()), region.srcOffset, n}, Access::read},
                        {{std::uint64_t(staging->handle()), region.dstOffset, n}, Access::write}};
    before_command(Stage::transfer, uses, {&s, staging.get()});
    vk_.vkCmdCopyBuffer(batch_cb_, s.handle(), staging->handle(), 1, &region);
    after_command(true);
    wait_for(staging->last_use);
    std::memcpy(static_cast<std::byte*>(dst) + done, staging->host_ptr(), n);
    done += n;
  }
}

void VulkanDevice::copy_within(Buffer& dst, std::size_t dst_offset, const Buffer& src,
                               std::size_t src_offset, std::size_t bytes) {
  VulkanBuffer& d = as_vk(dst, *this, "copy destination");
  VulkanBuffer& s = as_vk(src, *this, "copy source");
  if (bytes == 0) return;
  VkBufferCopy region{s.offset() + src_offset, d.offset() + dst_offset, bytes};
  const Use uses[] = {{{std::uint64_t(s.handle()), region.srcOffset, bytes}, Access::read},
                      {{std::uint64_t(d.handle()), region.dstOffset, bytes}, Access::write}};
  before_command(Stage::transfer, uses, {&s, &d});
  vk_.vkCmdCopyBuffer(batch_cb_, s.handle(), d.handle(), 1, &region);
  after_command(true);
}

}  // namespace ferry::vulkan
