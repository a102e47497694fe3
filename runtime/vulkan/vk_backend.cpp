// runtime/vulkan/vk_backend.cpp — the Vulkan backend module: loads the Vulkan
// loader at run time (volk), creates the instance (with the Khronos validation
// layer when FERRY_VULKAN_VALIDATION=1), and makes every physical device a
// ferry device, ordered discrete, integrated, virtual, CPU-type
// (FERRY_VULKAN_DEVICES overrides; vk_policy.hpp).
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "ferry/error.hpp"
#include "ferry/kit/env.hpp"
#include "log_internal.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_policy.hpp"

namespace ferry::vulkan {
namespace {

// Note [Validation messages are failures]
// With FERRY_VULKAN_VALIDATION=1 (every Vulkan test sets it) each warning or
// error of the validation layer, synchronization validation included, is
// printed and aborts the process: a test run with a validation message fails,
// and the message is the last thing in its log.
VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  std::fprintf(stderr, "ferry: Vulkan validation %s: %s\n",
               severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning",
               data && data->pMessage ? data->pMessage : "(no message)");
  std::fflush(stderr);
  std::abort();
}

bool has_layer(const char* name) {
  std::uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

class VulkanBackend;
VulkanBackend* g_backend = nullptr;

class VulkanBackend final : public Backend {
 public:
  VulkanBackend() {
    try {
      open();
    } catch (const Error& e) {
      reason_ = e.what();
      if (reason_.rfind("vulkan", 0) != 0) reason_.insert(0, "vulkan: ");
    }
    g_backend = this;
    // Devices live until the process exits; their pipeline caches are saved then.
    std::atexit([] {
      if (g_backend) g_backend->save_caches();
    });
  }

  std::string name() const override { return "vulkan"; }
  std::string unavailable_reason() override { return reason_; }
  std::vector<DeviceImpl*> devices() override {
    std::vector<DeviceImpl*> out;
    for (auto& d : devices_) out.push_back(d.get());
    return out;
  }

  void save_caches() {
    for (auto& d : devices_) d->save_pipeline_cache();
  }

 private:
  void open() {
    if (volkInitialize() != VK_SUCCESS)
      throw BackendError(
          "vulkan: the Vulkan loader (libvulkan.so.1) was not found; install it and a driver "
          "(Debian: libvulkan1 mesa-vulkan-drivers)",
          "VK_ERROR_INITIALIZATION_FAILED");
    std::uint32_t api = VK_API_VERSION_1_1;
    if (vkEnumerateInstanceVersion) vkEnumerateInstanceVersion(&api);
    api = std::min<std::uint32_t>(api, VK_API_VERSION_1_3);
    if (api < VK_API_VERSION_1_1)
      throw BackendError("vulkan: the Vulkan loader supports only Vulkan 1.0; ferry needs 1.1",
                         "VK_ERROR_INCOMPATIBLE_DRIVER");

    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "ferry";
    app.pEngineName = "ferry";
    app.apiVersion = api;
    VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ici.pApplicationInfo = &app;
    std::vector<const char*> layers, exts;
    VkValidationFeatureEnableEXT enables[] = {
        VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
    VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
    VkDebugUtilsMessengerCreateInfoEXT mci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mci.pfnUserCallback = on_validation_message;
    const bool validate = kit::env::flag("FERRY_VULKAN_VALIDATION");
    if (validate) {
      if (!has_layer("VK_LAYER_KHRONOS_validation"))
        throw BackendError(
            "vulkan: FERRY_VULKAN_VALIDATION=1 but VK_LAYER_KHRONOS_validation is not installed "
            "(Debian: vulkan-validationlayers)",
            "VK_ERROR_LAYER_NOT_PRESENT");
      layers.push_back("VK_LAYER_KHRONOS_validation");
      exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
      features.enabledValidationFeatureCount = 1;
      features.pEnabledValidationFeatures = enables;
      features.pNext = &mci;  // also reports problems in vkCreateInstance itself
      ici.pNext = &features;
    }
    ici.enabledLayerCount = std::uint32_t(layers.size());
    ici.ppEnabledLayerNames = layers.data();
    ici.enabledExtensionCount = std::uint32_t(exts.size());
    ici.ppEnabledExtensionNames = exts.data();
    VkResult r = vkCreateInstance(&ici, nullptr, &instance_);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
      throw BackendError("vulkan: no Vulkan driver is installed (VK_ERROR_INCOMPATIBLE_DRIVER)",
                         result_name(r));
    check(r, "vkCreateInstance");
    volkLoadInstanceOnly(instance_);
    if (validate)
      check(vkCreateDebugUtilsMessengerEXT(instance_, &mci, nullptr, &messenger_),
            "vkCreateDebugUtilsMessengerEXT");

    std::uint32_t n = 0;
    check(vkEnumeratePhysicalDevices(instance_, &n, nullptr), "vkEnumeratePhysicalDevices");
    std::vector<VkPhysicalDevice> handles(n);
    check(vkEnumeratePhysicalDevices(instance_, &n, handles.data()), "vkEnumeratePhysicalDevices");
    std::vector<PhysicalDevice> found;
    std::vector<DeviceKind> kinds;
    for (std::uint32_t i = 0; i < n; ++i) {
      PhysicalDevice pd;
      pd.handle = handles[i];
      pd.enumeration_index = i;
      vkGetPhysicalDeviceProperties(pd.handle, &pd.props);
      pd.api_version = std::min(pd.props.apiVersion, api);
      found.push_back(pd);
      kinds.push_back(device_kind(pd.props.deviceType));
    }
    if (found.empty()) throw BackendError("vulkan: the Vulkan loader found no device", "no_device");
    std::vector<std::string> skipped;
    for (std::size_t i : order_devices(kinds, std::getenv("FERRY_VULKAN_DEVICES"))) {
      const PhysicalDevice& pd = found[i];
      if (pd.api_version < VK_API_VERSION_1_1) {
        skipped.push_back(fmt::format("{} supports only Vulkan 1.0", pd.props.deviceName));
        continue;
      }
      try {
        Device dev = Device::unchecked("vulkan", int(devices_.size()));
        devices_.push_back(std::make_unique<VulkanDevice>(dev, pd));
      } catch (const Error& e) {
        skipped.push_back(fmt::format("{}: {}", pd.props.deviceName, e.what()));
      }
    }
    for (auto& s : skipped) FERRY_WARN("vulkan: skipping a device: {}", s);
    if (devices_.empty())
      throw BackendError(fmt::format("vulkan: no usable device ({})", fmt::join(skipped, "; ")),
                         "no_device");
  }

  std::string reason_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  std::vector<std::unique_ptr<VulkanDevice>> devices_;
};

}  // namespace
}  // namespace ferry::vulkan

FERRY_DEFINE_BACKEND(ferry::vulkan::VulkanBackend)
