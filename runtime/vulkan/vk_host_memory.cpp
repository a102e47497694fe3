// runtime/vulkan/vk_host_memory.cpp — pinning a caller's host memory for the
// device's copies (VK_EXT_external_memory_host; Note [Pinned host memory] in
// runtime/pinned_memory.hpp).
//
// The host range is imported as VkDeviceMemory of a host-coherent type and
// bound to a VkBuffer of its own: vkCmdCopyBuffer then reads or writes the
// host's pages directly (on a discrete GPU, the copy engine over PCIe), with
// no copy into staging memory. The buffer is released (kImportedPool) once
// the last batch that used it has completed, before the caller frees the
// memory. Host writes before a copy are made visible by vkQueueSubmit
// (coherent memory), and device writes are made visible to the host by the
// barrier that ends every submission (Note [Vulkan execution]).
#include <fmt/format.h>

#include "ferry/error.hpp"
#include "vulkan/vk_device.hpp"

namespace ferry::vulkan {

std::unique_ptr<Buffer> VulkanDevice::register_host_memory(void* ptr, std::size_t bytes) {
  if (!host_import_ || bytes == 0) return nullptr;
  if (std::uintptr_t(ptr) % host_import_alignment_ != 0 || bytes % host_import_alignment_ != 0)
    return nullptr;
  failure_point(*this, "register_host_memory");
  constexpr auto kHandle = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkMemoryHostPointerPropertiesEXT host{VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
  if (vk_.vkGetMemoryHostPointerPropertiesEXT(device_, kHandle, ptr, &host) != VK_SUCCESS)
    return nullptr;

  VkExternalMemoryBufferCreateInfo ext{VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO};
  ext.handleTypes = kHandle;
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.pNext = &ext;
  bci.size = bytes;
  bci.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  MemoryPools::share(bci, queue_families_);
  VkBuffer buffer = VK_NULL_HANDLE;
  check(vk_.vkCreateBuffer(device_, &bci, nullptr, &buffer), "vkCreateBuffer (host memory)");
  VkMemoryRequirements req;
  vk_.vkGetBufferMemoryRequirements(device_, buffer, &req);

  // A host-visible, coherent type among those the import and the buffer allow.
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(physical_.handle, &mp);
  constexpr VkMemoryPropertyFlags kWanted =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const std::uint32_t allowed = host.memoryTypeBits & req.memoryTypeBits;
  std::uint32_t type = mp.memoryTypeCount;
  for (std::uint32_t t = 0; t < mp.memoryTypeCount && type == mp.memoryTypeCount; ++t)
    if ((allowed >> t & 1) && (mp.memoryTypes[t].propertyFlags & kWanted) == kWanted) type = t;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkResult r = VK_ERROR_FEATURE_NOT_PRESENT;
  if (type < mp.memoryTypeCount && req.size <= bytes) {
    VkImportMemoryHostPointerInfoEXT import{VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT};
    import.handleType = kHandle;
    import.pHostPointer = ptr;
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.pNext = &import;
    mai.allocationSize = bytes;
    mai.memoryTypeIndex = type;
    r = vk_.vkAllocateMemory(device_, &mai, nullptr, &memory);
    if (r == VK_SUCCESS) r = vk_.vkBindBufferMemory(device_, buffer, memory, 0);
  }
  if (r != VK_SUCCESS) {  // no suitable type, or the driver refused the range
    vk_.vkDestroyBuffer(device_, buffer, nullptr);
    if (memory) vk_.vkFreeMemory(device_, memory, nullptr);
    return nullptr;
  }
  Lock lock(mutex_);
  imported_[buffer] = memory;
  detail::Allocation a{};
  a.offset = 0;
  a.size = bytes;
  auto b = std::make_unique<VulkanBuffer>(*this, kImportedPool, a, buffer,
                                          static_cast<std::byte*>(ptr), bytes);
  b->last_use = recorder_->completed_serial();
  return b;
}

void VulkanDevice::release_imported(Lock& lock, VulkanBuffer& b) {
  // The caller frees the host memory next: no batch may still use it.
  try {
    if (!recorder_->lost()) recorder_->wait_for(lock, b.last_use);
  } catch (...) {
    // A lost device runs nothing more; the memory can go.
  }
  auto it = imported_.find(b.handle());
  if (it == imported_.end()) return;
  vk_.vkDestroyBuffer(device_, it->first, nullptr);
  vk_.vkFreeMemory(device_, it->second, nullptr);
  imported_.erase(it);
}

}  // namespace ferry::vulkan
