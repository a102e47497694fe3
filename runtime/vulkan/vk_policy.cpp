// runtime/vulkan/vk_policy.cpp — see vk_policy.hpp.
#include "vulkan/vk_policy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <sstream>

#include "ferry/error.hpp"
#include "ferry/kit/env.hpp"
#include "vulkan/vk_coopmat_shaders.hpp"

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
  return kit::env::choice_of("FERRY_VULKAN_FUSED_ATTENTION", env, {"0", "1"}, "1") == "1";
}

SplitAttention split_attention(const char* env) {
  const std::string v =
      kit::env::choice_of("FERRY_VULKAN_SPLIT_ATTENTION", env, {"0", "1", "force"}, "1");
  return v == "force" ? SplitAttention::force : v == "1" ? SplitAttention::on : SplitAttention::off;
}

KeySplit key_split(SplitAttention mode, const AttentionShape& a, bool forward_fits,
                   std::uint64_t loop_budget, std::uint32_t min_head_chunk) {
  const auto ceil_div = [](std::int64_t x, std::int64_t y) { return (x + y - 1) / y; };
  std::int64_t len = 0;
  if (mode == SplitAttention::force) {
    len = kForcedSplitKeys;
  } else if (mode == SplitAttention::on && (a.query_rows <= kSplitKeyRows || !forward_fits)) {
    const std::int64_t most = std::max<std::int64_t>(1, ceil_div(kSplitTargetWorkgroups, a.rows));
    len = std::max(kMinSplitKeys, ceil_div(a.keys, most));
  } else {
    return {};
  }
  if (loop_budget != 0) {
    // An invocation of SPLIT (shaders/attention.comp, 64 threads, tiles of 8 to 16 rows), per
    // pass of EVC columns of v (Note [Attention head chunks]) and per row of the grid's rounds
    // (65,535 rows a round): for each key it takes, the head dim and the columns twice; for
    // the merge, some 800 more.
    const std::int64_t columns = attention_head_chunk(a.value_dim, min_head_chunk);
    const std::int64_t passes = ceil_div(std::max<std::int64_t>(a.value_dim, 1), columns);
    const std::int64_t rounds = ceil_div(std::max<std::int64_t>(a.rows, 1), 65535);
    const std::int64_t per_key = a.head_dim + 2 * columns + 2, merge = 800 + columns;
    const std::int64_t each = std::int64_t(loop_budget) / (passes * rounds) - merge;
    if (each < per_key) return {};
    len = std::min(len, each / per_key * 64);
  }
  const std::int64_t splits = std::max<std::int64_t>(1, ceil_div(a.keys, len));
  if (splits > (loop_budget != 0 ? 65535 : std::numeric_limits<std::uint32_t>::max()) ||
      len > std::numeric_limits<std::uint32_t>::max())
    return {};
  return {std::uint32_t(splits), std::uint32_t(len)};
}

bool subgroup_reductions(const char* env, bool has_ops) {
  return kit::env::choice_of("FERRY_VULKAN_SUBGROUPS", env, {"0", "1"}, "0") == "1" && has_ops;
}

const char* coopmat_mode_name(CoopmatMode m) {
  switch (m) {
    case CoopmatMode::on:
      return "on";
    case CoopmatMode::emulated:
      return "emulated";
    case CoopmatMode::off:
      break;
  }
  return "off";
}

CoopmatMode coopmat_mode(const char* env, bool built, bool device_ready) {
  const std::string v =
      kit::env::choice_of("FERRY_VULKAN_COOPMAT", env, {"0", "1", "emulate"}, "0");
  if (v == "1") return built && device_ready ? CoopmatMode::on : CoopmatMode::off;
  if (v == "emulate") return built ? CoopmatMode::emulated : CoopmatMode::off;
  return CoopmatMode::off;
}

bool has_coopmat_shape(std::span<const CoopmatShape> shapes, std::uint32_t operands) {
  for (const CoopmatShape& s : shapes)
    if (s.m == 16 && s.n == 16 && s.k == 16 && s.a == operands && s.b == operands && s.c == 1 &&
        s.result == 1 && s.subgroup_scope)
      return true;
  return false;
}

int choose_coopmat_tile(std::span<const CoopmatTile> tiles, std::uint64_t batches, std::uint64_t m,
                        std::uint64_t n, std::uint64_t k, std::uint32_t shared_memory,
                        std::uint32_t max_invocations, std::uint64_t min_groups) {
  int best = -1, most = -1;
  std::uint64_t best_padded = 0, best_area = 0, most_groups = 0;
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    const CoopmatTile& t = tiles[i];
    if (!t.bm || !t.bn || !t.bk || m == 0 || n == 0 || k == 0 || t.shared_bytes > shared_memory ||
        t.threads > max_invocations)
      continue;
    // Blocks past an edge multiply zeros: the work a tile does is that of the padded sizes.
    const std::uint64_t gm = (m + t.bm - 1) / t.bm, gn = (n + t.bn - 1) / t.bn;
    const std::uint64_t groups = batches * gm * gn, area = t.bm * t.bn;
    const std::uint64_t padded = gm * t.bm * gn * t.bn * ((k + t.bk - 1) / t.bk * t.bk);
    if (groups >= min_groups &&
        (best < 0 || padded < best_padded || (padded == best_padded && area > best_area)))
      best = int(i), best_padded = padded, best_area = area;
    if (groups > most_groups) most = int(i), most_groups = groups;
  }
  return best >= 0 ? best : most;
}

TransferQueueChoice choose_transfer_queue(const char* env, std::span<const QueueFamilyInfo> families,
                                          std::uint32_t compute_family, bool timeline) {
  const std::string v =
      kit::env::choice_of("FERRY_VULKAN_TRANSFER_QUEUE", env, {"0", "1", "force"}, "0");
  int dedicated = -1;
  for (std::size_t i = 0; i < families.size() && dedicated < 0; ++i)
    if ((families[i].flags & kQueueTransfer) &&
        !(families[i].flags & (kQueueCompute | kQueueGraphics)) && families[i].count > 0)
      dedicated = int(i);
  TransferQueueChoice c;
  if (v == "0") {
    c.note = dedicated >= 0 ? fmt::format("off (queue family {} is transfer-only; "
                                          "FERRY_VULKAN_TRANSFER_QUEUE=1 uses it)",
                                          dedicated)
                            : "off (the device has no transfer-only queue family)";
    return c;
  }
  if (!timeline) {
    c.note = "off (the device lacks timeline semaphores)";
    return c;
  }
  if (dedicated >= 0) {
    c.on = true;
    c.family = std::uint32_t(dedicated);
    c.note = fmt::format("on (queue family {}, transfer-only)", dedicated);
  } else if (v == "1") {
    c.note = "off (the device has no transfer-only queue family)";
  } else if (compute_family < families.size() && families[compute_family].count >= 2) {
    c.on = true;
    c.family = compute_family;
    c.index = 1;
    c.note = fmt::format("forced (a second queue of the compute family {})", compute_family);
  } else {
    c.on = true;
    c.family = compute_family;
    c.note = "forced (the compute queue itself)";
  }
  return c;
}

std::string write_tile_table(const TileTable& table) {
  std::string out = "FERRYTILES3\n";
  for (const auto& [k, name] : table)
    out += fmt::format("{} {} {} {} {} {} {} {} {}\n", k.batches, k.m, k.n, k.k, k.b_layout,
                       int(k.emulated), k.operands, k.attention, name);
  return out;
}

TileTable read_tile_table(std::string_view text) {
  TileTable table;
  std::istringstream in{std::string(text)};
  std::string line;
  if (!std::getline(in, line) || line != "FERRYTILES3") return table;
  constexpr int kNumbers = 8;  // batches m n k b_layout emulated operands attention
  // The largest value of each field past the four sizes.
  constexpr std::uint64_t kMost[] = {kCoopmatLayouts - 1, 1, 2, kMaxTileKeyAttention};
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string f[kNumbers + 2];
    int n = 0;
    while (n < kNumbers + 2 && fields >> f[n]) ++n;
    std::uint64_t v[kNumbers];
    bool ok = n == kNumbers + 1;
    for (int i = 0; ok && i < kNumbers; ++i) {  // digits only: istream would wrap "-1"
      const auto [end, ec] = std::from_chars(f[i].data(), f[i].data() + f[i].size(), v[i]);
      ok = ec == std::errc() && end == f[i].data() + f[i].size() && (i < 4 || v[i] <= kMost[i - 4]);
    }
    // A product's entry names a GEMM module, an attention pass's an attention module.
    if (!ok || !f[kNumbers].starts_with(v[7] == 0 ? "gemm_coopmat_" : "attention_")) continue;
    table[TileKey{v[0], v[1], v[2], v[3], std::uint32_t(v[4]), v[5] == 1, std::uint32_t(v[6]),
                  std::uint32_t(v[7])}] = f[kNumbers];
  }
  return table;
}

bool coopmat_tuning(const char* env, CoopmatMode mode) {
  const std::string v = kit::env::choice_of("FERRY_VULKAN_COOPMAT_TUNE", env, {"0", "1"}, "");
  if (v.empty()) return mode == CoopmatMode::on;  // measured on the GPU path only
  return v == "1" && mode != CoopmatMode::off;
}

}  // namespace ferry::vulkan
