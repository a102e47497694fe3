// runtime/transfer/plan.cpp — plan_migration: finding the unique storages of a
// set of tensors, grouping them by device pair and laying out the arenas
// (Note [Transfer planning] in ferry/transfer.hpp). execute.cpp runs a plan.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "ferry/error.hpp"
#include "ferry/nn/module.hpp"
#include "ferry/optim.hpp"
#include "ferry/registry.hpp"
#include "transfer/arena_packing.hpp"
#include "transfer/plan_state.hpp"

namespace ferry {

namespace {

std::string human_bytes(std::uint64_t b) {
  if (b >= (std::uint64_t(1) << 30)) return fmt::format("{:.2f} GiB", double(b) / (1 << 30));
  if (b >= (std::uint64_t(1) << 20)) return fmt::format("{:.2f} MiB", double(b) / (1 << 20));
  if (b >= (std::uint64_t(1) << 10)) return fmt::format("{:.1f} KiB", double(b) / (1 << 10));
  return fmt::format("{} B", b);
}

// The chunk size of the staging pipeline: two chunks fit in staging_bytes.
std::size_t chunk_bytes(const TransferOptions& o) { return o.staging_bytes / 2; }

// Lays out one group: arenas of at most the device's largest allocation (Note [Arena
// packing]), each storage at a sub-buffer's alignment.
void lay_out(TransferPlan::State& s, TransferGroup& g) {
  g.arenas = !s.options.separate_allocations && g.dst->capabilities().sub_buffers;
  const DeviceInfo dst_info = g.dst->info();
  g.route = detail::copy_route(*g.src, *g.dst);
  detail::ArenaPacker packer(dst_info.max_allocation, kSubBufferAlignment);  // 0: no limit
  for (std::size_t i : g.storages) {
    PlannedStorage& p = s.storages[i];
    g.bytes += p.dst_bytes;
    // A converted storage gets its own allocation: the conversion kernel
    // writes a new tensor (execute.cpp, convert_storage).
    if (p.convert) g.largest_conversion = std::max(g.largest_conversion, p.src_bytes);
    if (!p.convert &&
        detail::copy_route(*g.src, p.storage->buffer(), *g.dst, nullptr) == detail::CopyRoute::dma)
      ++g.dma_storages, g.dma_bytes += p.src_bytes;
    if (!g.arenas || p.convert) continue;
    const detail::ArenaPacker::Slot slot = packer.place(p.dst_bytes);
    p.arena = slot.arena;
    p.offset = std::size_t(slot.offset);
  }
  g.arena_bytes.assign(packer.arena_bytes().begin(), packer.arena_bytes().end());
}

}  // namespace

TransferPlan plan_migration(const std::vector<std::pair<std::string, Tensor>>& tensors,
                            std::optional<Device> device, const TransferOptions& options) {
  auto s = std::make_shared<TransferPlan::State>();
  s->options = options;
  s->options.extra.clear();
  s->destination = device;
  if (options.staging_bytes < (std::size_t(64) << 10))
    throw Error(fmt::format("plan_migration: staging_bytes = {} is below the 64 KiB minimum",
                            options.staging_bytes));
  if (options.dtype && !is_floating(*options.dtype))
    throw DTypeError(
        fmt::format("plan_migration: dtype {} is not a floating dtype (only floating "
                    "tensors are converted; integer tensors keep theirs)",
                    dtype_name(*options.dtype)));
  DeviceImpl* dst_impl = device ? &device_impl(*device) : nullptr;  // DeviceError if unavailable

  // Distinct tensors (a TensorImpl listed twice is one tied tensor), then
  // their storages, in the order they were first listed.
  std::unordered_map<const TensorImpl*, std::size_t> seen_tensor;
  std::unordered_map<const Storage*, std::size_t> seen_storage;
  std::vector<std::vector<std::size_t>> storage_tensors;
  std::vector<std::shared_ptr<Storage>> storages;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) throw Error(fmt::format("plan_migration: '{}' is an undefined tensor", name));
    auto [it, fresh] = seen_tensor.emplace(t.impl_ptr().get(), s->tensors.size());
    if (!fresh) {
      s->aliases.push_back(fmt::format("{} is {} (tied)", name, s->tensors[it->second].name));
      continue;
    }
    const std::size_t ti = s->tensors.size();
    s->tensors.push_back({name, t});
    auto [st, new_storage] = seen_storage.emplace(t.storage().get(), storages.size());
    if (new_storage) {
      storages.push_back(t.storage());
      storage_tensors.emplace_back();
    } else {
      s->aliases.push_back(fmt::format("{} shares the storage of {} (view)", name,
                                       s->tensors[storage_tensors[st->second][0]].name));
    }
    storage_tensors[st->second].push_back(ti);
  }
  s->unique_storages = storages.size();

  // What each storage becomes; storages that neither move nor convert stay.
  std::map<std::pair<DeviceImpl*, DeviceImpl*>, std::size_t> group_of;
  for (std::size_t i = 0; i < storages.size(); ++i) {
    const Tensor& first = s->tensors[storage_tensors[i][0]].tensor;
    PlannedStorage p;
    p.storage = storages[i];
    p.planned_buffer = &storages[i]->buffer();
    p.src_dtype = first.dtype();
    p.tensors = storage_tensors[i];
    p.name = s->tensors[p.tensors[0]].name;
    for (std::size_t ti : p.tensors) {
      if (s->tensors[ti].tensor.dtype() != p.src_dtype && options.dtype)
        throw UnsupportedError(fmt::format(
            "plan_migration: '{}' ({}) and '{}' ({}) share one storage with different dtypes, "
            "which a dtype conversion cannot keep",
            p.name, dtype_name(p.src_dtype), s->tensors[ti].name,
            dtype_name(s->tensors[ti].tensor.dtype())));
    }
    p.dst_dtype = options.dtype && is_floating(p.src_dtype) ? *options.dtype : p.src_dtype;
    p.convert = p.dst_dtype != p.src_dtype;
    p.src_bytes = p.storage->nbytes();
    p.dst_bytes = p.src_bytes / dtype_size(p.src_dtype) * dtype_size(p.dst_dtype);
    DeviceImpl* src = &p.storage->impl();
    DeviceImpl* dst = dst_impl ? dst_impl : src;
    if (src == dst && !p.convert) continue;
    auto [g, fresh] = group_of.emplace(std::make_pair(src, dst), s->groups.size());
    if (fresh) {
      s->groups.emplace_back();
      s->groups.back().src = src;
      s->groups.back().dst = dst;
    }
    p.group = g->second;
    s->groups[g->second].storages.push_back(s->storages.size());
    s->storages.push_back(std::move(p));
  }
  for (TransferGroup& g : s->groups) lay_out(*s, g);
  return TransferPlan(std::move(s));
}

namespace {

// What a module's migration lists: Module::named_tensors() and options.extra.
std::vector<std::pair<std::string, Tensor>> module_tensors(nn::Module& module,
                                                           const TransferOptions& options) {
  std::vector<std::pair<std::string, Tensor>> out = module.named_tensors();
  for (const auto& e : options.extra) out.push_back(e);
  return out;
}

// The optimizer's parameters the module does not hold, and all its state.
void add_optimizer(std::vector<std::pair<std::string, Tensor>>& out, optim::Optimizer& opt) {
  std::unordered_map<const TensorImpl*, bool> listed;
  for (const auto& [name, t] : out) listed.emplace(t.impl_ptr().get(), true);
  const auto& params = opt.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (listed.count(params[i].impl_ptr().get())) continue;
    out.emplace_back(fmt::format("optimizer.param.{}", i), params[i]);
    if (Tensor g = params[i].grad(); g.defined())
      out.emplace_back(fmt::format("optimizer.param.{}.grad", i), g);
  }
  for (auto& [name, t] : opt.named_state()) out.emplace_back("optimizer." + name, t);
}

}  // namespace

TransferPlan plan_migration(nn::Module& module, const Device& device,
                            const TransferOptions& options) {
  return plan_migration(module_tensors(module, options), device, options);
}

TransferPlan plan_migration(nn::Module& module, optim::Optimizer& optimizer, const Device& device,
                            const TransferOptions& options) {
  auto tensors = module_tensors(module, options);
  add_optimizer(tensors, optimizer);
  return plan_migration(tensors, device, options);
}

MigrationReport migrate(nn::Module& module, const Device& device, const TransferOptions& options) {
  return plan_migration(module, device, options).execute();
}

MigrationReport migrate(nn::Module& module, optim::Optimizer& optimizer, const Device& device,
                        const TransferOptions& options) {
  return plan_migration(module, optimizer, device, options).execute();
}

// ---- TransferPlan ----

TransferPlan::TransferPlan(std::shared_ptr<State> state) : state_(std::move(state)) {}
TransferPlan::~TransferPlan() = default;
TransferPlan::TransferPlan(TransferPlan&&) noexcept = default;
TransferPlan& TransferPlan::operator=(TransferPlan&&) noexcept = default;

std::size_t TransferPlan::num_tensors() const { return state_->tensors.size(); }
std::size_t TransferPlan::num_storages() const { return state_->storages.size(); }

std::uint64_t TransferPlan::bytes() const {
  std::uint64_t b = 0;
  for (const TransferGroup& g : state_->groups) b += g.bytes;
  return b;
}

std::uint64_t TransferPlan::peak_bytes(const Device& device) const {
  std::uint64_t peak = 0;
  const std::uint64_t staging = chunk_bytes(state_->options) * 2;
  for (const TransferGroup& g : state_->groups) {
    if (g.dst->device() == device) {
      std::uint64_t arena = 0;
      if (g.arenas)
        for (std::size_t a : g.arena_bytes) arena += a;
      else
        for (std::size_t i : g.storages) arena += state_->storages[i].dst_bytes;
      peak += arena + g.largest_conversion;
    }
    if (g.src->device() == device) peak += g.largest_conversion;
    // Staging chunks (host memory, pinned or host-visible) on the routes
    // that stage (Note [Copy routes]).
    const bool stages = g.route == detail::CopyRoute::staged ||
                        g.route == detail::CopyRoute::upload ||
                        g.route == detail::CopyRoute::gather;
    if (device.is_cpu() && stages && g.bytes > g.dma_bytes)
      peak += std::min<std::uint64_t>(staging, g.bytes - g.dma_bytes);
  }
  return peak;
}

std::string TransferPlan::explain() const {
  const State& s = *state_;
  std::string out = fmt::format(
      "transfer plan to {}{}: {} tensors, {} unique storages, {} to move or convert, {}\n",
      s.destination ? s.destination->str() : "each tensor's own device",
      s.options.dtype ? fmt::format(" as {}", dtype_name(*s.options.dtype)) : "", s.tensors.size(),
      s.unique_storages, s.storages.size(), human_bytes(bytes()));
  out += fmt::format("  aliases found: {}\n", s.aliases.size());
  for (std::size_t i = 0; i < s.aliases.size() && i < 20; ++i)
    out += fmt::format("    {}\n", s.aliases[i]);
  if (s.aliases.size() > 20) out += fmt::format("    ... and {} more\n", s.aliases.size() - 20);
  const std::size_t chunk = chunk_bytes(s.options);
  std::vector<Device> touched;
  for (const TransferGroup& g : s.groups) {
    std::size_t conversions = 0;
    for (std::size_t i : g.storages) conversions += s.storages[i].convert ? 1 : 0;
    const std::size_t chunks = std::size_t((g.bytes - g.dma_bytes + chunk - 1) / chunk);
    out +=
        fmt::format("  {} -> {}: {} storages ({} converted), {}, {}, {}\n", g.src->device().str(),
                    g.dst->device().str(), g.storages.size(), conversions, human_bytes(g.bytes),
                    g.arenas ? fmt::format("{} arena allocation(s)", g.arena_bytes.size())
                             : fmt::format("{} separate allocations", g.storages.size()),
                    g.route == detail::CopyRoute::staged || g.route == detail::CopyRoute::upload ||
                            g.route == detail::CopyRoute::gather
                        ? fmt::format("{}, {} chunk(s) of up to {}",
                                      detail::copy_route_name(g.route), chunks, human_bytes(chunk))
                        : std::string(detail::copy_route_name(g.route)));
    if (g.dma_storages)
      out += fmt::format("    of which {} storages ({}) {}\n", g.dma_storages,
                         human_bytes(g.dma_bytes), detail::copy_route_name(detail::CopyRoute::dma));
    for (DeviceImpl* d : {g.src, g.dst})
      if (std::find(touched.begin(), touched.end(), d->device()) == touched.end())
        touched.push_back(d->device());
  }
  if (std::find(touched.begin(), touched.end(), Device::cpu()) == touched.end() &&
      !s.groups.empty())
    touched.push_back(Device::cpu());
  for (const Device& d : touched)
    out += fmt::format("  peak extra memory on {}: {}\n", d.str(), human_bytes(peak_bytes(d)));
  return out;
}

MigrationReport TransferPlan::execute() { return execute_plan(*state_); }

std::string MigrationReport::str() const {
  std::string out = fmt::format("migrated {} in {:.3f} ms", human_bytes(bytes), seconds * 1e3);
  for (const TransferPairReport& p : pairs)
    out += fmt::format("\n  {} -> {}: {} storages, {}, {} copies, {:.3f} ms, {:.2f} GB/s",
                       p.source.str(), p.destination.str(), p.storages, human_bytes(p.bytes),
                       p.copies, p.seconds * 1e3, p.gb_per_s());
  return out;
}

}  // namespace ferry
