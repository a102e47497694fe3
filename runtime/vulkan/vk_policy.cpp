// runtime/vulkan/vk_policy.cpp — see vk_policy.hpp.
#include "vulkan/vk_policy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "ferry/error.hpp"

namespace ferry::vulkan {
namespace {

int kind_rank(DeviceKind k) {
  switch (k) {
    case DeviceKind::discrete_gpu:
      return 0;
    case DeviceKind::integrated_gpu:
      return 1;
    case DeviceKind::virtual_gpu:
      return 2;
    case DeviceKind::cpu_gpu:
      return 3;
    default:
      return 4;
  }
}

std::uint64_t fnv1a(std::span<const std::uint8_t> data) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::uint8_t b : data) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

constexpr char kMagic[8] = {'F', 'E', 'R', 'R', 'Y', 'P', 'C', '1'};

}  // namespace

std::vector<std::size_t> order_devices(const std::vector<DeviceKind>& kinds,
                                       const char* selection) {
  std::vector<std::size_t> order;
  if (selection && *selection) {
    std::string list = selection;
    if (list.back() == ',') list += ',';  // getline drops a trailing empty item: keep it
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) {
      std::size_t pos = 0;
      unsigned long v = 0;
      bool ok = !item.empty();
      try {
        v = std::stoul(item, &pos);
      } catch (const std::exception&) {
        ok = false;
      }
      if (!ok || pos != item.size() || v >= kinds.size())
        throw Error(fmt::format(
            "FERRY_VULKAN_DEVICES='{}': '{}' is not the index of a Vulkan device (this machine "
            "has {}: 0..{})",
            selection, item, kinds.size(), kinds.empty() ? -1 : int(kinds.size()) - 1));
      if (std::find(order.begin(), order.end(), v) != order.end())
        throw Error(
            fmt::format("FERRY_VULKAN_DEVICES='{}': device {} is listed twice", selection, v));
      order.push_back(v);
    }
    return order;
  }
  for (std::size_t i = 0; i < kinds.size(); ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return kind_rank(kinds[a]) < kind_rank(kinds[b]);
  });
  return order;
}

std::vector<std::uint8_t> wrap_pipeline_cache(std::span<const std::uint8_t> driver_data) {
  std::vector<std::uint8_t> out(16 + driver_data.size());
  std::memcpy(out.data(), kMagic, 8);
  std::uint64_t h = fnv1a(driver_data);
  std::memcpy(out.data() + 8, &h, 8);
  if (!driver_data.empty()) std::memcpy(out.data() + 16, driver_data.data(), driver_data.size());
  return out;
}

std::optional<std::vector<std::uint8_t>> unwrap_pipeline_cache(std::span<const std::uint8_t> file,
                                                               const CacheIdentity& id) {
  // VkPipelineCacheHeaderVersionOne: headerSize, headerVersion, vendorID, deviceID (uint32
  // each), pipelineCacheUUID[16].
  constexpr std::size_t kHeader = 32;
  if (file.size() < 16 + kHeader || std::memcmp(file.data(), kMagic, 8) != 0) return std::nullopt;
  std::uint64_t h = 0;
  std::memcpy(&h, file.data() + 8, 8);
  auto data = file.subspan(16);
  if (fnv1a(data) != h) return std::nullopt;
  std::uint32_t f[4];
  std::memcpy(f, data.data(), 16);
  if (f[0] < kHeader || f[0] > data.size() || f[1] != 1 || f[2] != id.vendor_id ||
      f[3] != id.device_id || std::memcmp(data.data() + 16, id.uuid, 16) != 0)
    return std::nullopt;
  return std::vector<std::uint8_t>(data.begin(), data.end());
}

bool fused_attention(const char* env) {
  if (env && *env) {
    const std::string v(env);
    if (v == "1") return true;
    if (v == "0") return false;
    throw Error("FERRY_VULKAN_FUSED_ATTENTION must be 1 or 0, not '" + v + "'");
  }
  return true;
}

bool subgroup_reductions(const char* env, bool has_ops) {
  if (!env || !*env) return false;
  const std::string v(env);
  if (v != "1" && v != "0") throw Error("FERRY_VULKAN_SUBGROUPS must be 1 or 0, not '" + v + "'");
  return v == "1" && has_ops;
}

}  // namespace ferry::vulkan
