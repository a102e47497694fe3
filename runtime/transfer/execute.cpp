// runtime/transfer/execute.cpp — running a TransferPlan: check, allocate,
// copy, wait, then switch every tensor at once (Note [All or nothing] in
// ferry/transfer.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

#include "copy_route.hpp"
#include "deferred_checks.hpp"
#include "dispatch.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/log.hpp"
#include "log_internal.hpp"
#include "profiler/profiler_hooks.hpp"
#include "transfer/plan_state.hpp"

namespace ferry {

using detail::copy_route;
using detail::CopyRoute;
using profiler::EventKind;
using profiler::detail::copy_name;
using profiler::detail::MaybeWork;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Error unless every planned storage and tensor is as it was at planning.
void check_unchanged(const TransferPlan::State& s) {
  if (s.executed) throw Error("TransferPlan::execute: this plan already ran; make a new plan");
  for (const PlannedStorage& p : s.storages) {
    bool same = &p.storage->buffer() == p.planned_buffer && p.storage->nbytes() == p.src_bytes;
    for (std::size_t ti : p.tensors) {
      const Tensor& t = s.tensors[ti].tensor;
      same = same && t.storage() == p.storage && t.dtype() == p.src_dtype;
    }
    if (!same)
      throw Error(
          fmt::format("TransferPlan::execute: '{}' was moved, converted or rebound since "
                      "the plan was made; make a new plan",
                      p.name));
  }
}

// OutOfMemoryError before anything is allocated when a destination cannot
// hold what the plan puts there.
void check_capacity(const TransferPlan::State& s) {
  std::map<DeviceImpl*, std::uint64_t> needed;
  for (const TransferGroup& g : s.groups) {
    std::uint64_t n = g.largest_conversion;
    if (g.arenas)
      for (std::size_t a : g.arena_bytes) n += a;
    for (std::size_t i : g.storages)
      if (!g.arenas || s.storages[i].convert) n += s.storages[i].dst_bytes;
    needed[g.dst] += n;
  }
  for (const auto& [impl, bytes] : needed) {
    DeviceInfo info = impl->info();
    if (info.memory_total == 0 || bytes <= info.memory_free) continue;  // 0: the device cannot tell
    // Memory the device's allocator caches, or frees once its work completes,
    // is not free yet but would be given up by an allocation: so give it up
    // now (as allocate would) and ask again.
    impl->synchronize();
    impl->empty_cache();
    info = impl->info();
    if (bytes <= info.memory_free) continue;
    throw OutOfMemoryError(
        fmt::format("migration to {} needs {} bytes there but {} bytes are free; nothing was "
                    "moved. Free memory on {} (empty_cache, drop unused tensors) or move fewer "
                    "tensors",
                    impl->device().str(), bytes, info.memory_free, impl->device().str()),
        bytes, info.memory_free, impl->device().str());
  }
}

// One piece of a storage staged through a chunk: [src_off, src_off + len)
// of storage `storage` goes to staging offset `at`.
struct Piece {
  std::size_t storage, src_off, len, at;
};
// One copy out of a chunk into a destination buffer.
struct ChunkCopy {
  Buffer* dst;
  std::size_t dst_off, at, len;
};
struct Chunk {
  std::vector<Piece> pieces;
  std::vector<ChunkCopy> copies;
};

// Cuts the raw storages of a group that go through staging into chunks of at
// most `cap` bytes. With an arena, a chunk is a window of the arena's bytes,
// padding included, so one copy fills it; otherwise storages are packed one
// after another and each piece is its own copy.
std::vector<Chunk> make_chunks(const TransferPlan::State& s, const TransferGroup& g,
                               const std::vector<std::size_t>& staged, std::size_t cap,
                               const std::vector<std::shared_ptr<Buffer>>& arenas,
                               const std::vector<std::unique_ptr<Buffer>>& buffers) {
  std::vector<Chunk> chunks;
  if (g.arenas) {
    std::size_t arena = ~std::size_t(0), base = 0, end = 0;
    for (std::size_t i : staged) {
      const PlannedStorage& p = s.storages[i];
      for (std::size_t off = 0; off < p.src_bytes;) {
        const std::size_t pos = p.offset + off;
        // A new window at another arena, past this one's end, or after a gap
        // (a slot filled another way) that one copy must not overwrite.
        const bool gap = off == 0 && pos > (end + kSubBufferAlignment - 1) / kSubBufferAlignment *
                                               kSubBufferAlignment;
        if (p.arena != arena || pos >= base + cap || gap) {
          if (!chunks.empty())
            chunks.back().copies.push_back({arenas[arena].get(), base, 0, end - base});
          chunks.emplace_back();
          arena = p.arena, base = pos, end = pos;
        }
        const std::size_t len = std::min(p.src_bytes - off, base + cap - pos);
        chunks.back().pieces.push_back({i, off, len, pos - base});
        end = pos + len;
        off += len;
      }
    }
    if (!chunks.empty()) chunks.back().copies.push_back({arenas[arena].get(), base, 0, end - base});
    return chunks;
  }
  std::size_t used = cap;
  for (std::size_t i : staged) {
    const PlannedStorage& p = s.storages[i];
    for (std::size_t off = 0; off < p.src_bytes;) {
      if (used == cap) chunks.emplace_back(), used = 0;
      const std::size_t len = std::min(p.src_bytes - off, cap - used);
      chunks.back().pieces.push_back({i, off, len, used});
      chunks.back().copies.push_back({buffers[i].get(), off, used, len});
      used = (used + len + 63) / 64 * 64;  // keep staging offsets aligned
      if (used > cap) used = cap;
      off += len;
    }
  }
  return chunks;
}

// The bytes a chunk's copies move.
std::size_t chunk_bytes(const Chunk& c) {
  std::size_t n = 0;
  for (const ChunkCopy& cc : c.copies) n += cc.len;
  return n;
}

std::size_t chunk_size(const std::vector<Chunk>& chunks) {
  std::size_t size = 0;
  for (const Chunk& c : chunks)
    for (const Piece& pc : c.pieces) size = std::max(size, pc.at + pc.len);
  return size;
}

// Device memory the host cannot read -> host-visible destination memory: the
// source copies each chunk's pieces into its staging memory (one batch, one
// event), and while it copies the next chunk the host moves the previous one
// out, one copy per chunk with an arena.
std::size_t gather_through_source_staging(const TransferPlan::State& s, const TransferGroup& g,
                                          const std::vector<std::size_t>& gathered,
                                          const std::vector<std::shared_ptr<Buffer>>& arenas,
                                          const std::vector<std::unique_ptr<Buffer>>& buffers) {
  DeviceImpl& src = *g.src;
  DeviceImpl& dst = *g.dst;
  const std::vector<Chunk> chunks =
      make_chunks(s, g, gathered, s.options.staging_bytes / 2, arenas, buffers);
  const std::size_t size = chunk_size(chunks);
  std::unique_ptr<Buffer> staging[2];
  std::unique_ptr<Event> ready[2];
  std::size_t copies = 0;
  auto drain = [&](std::size_t c) {
    const int b = int(c % 2);
    {
      MaybeWork wait(EventKind::wait, src, "wait for staging chunk");
      ready[b]->wait();
    }
    const auto* h = static_cast<const std::byte*>(staging[b]->host_ptr());
    MaybeWork copy(EventKind::copy, dst, copy_name(src, dst), chunk_bytes(chunks[c]),
                   "a chunk from the source's staging memory");
    for (const ChunkCopy& cc : chunks[c].copies) {
      dst.copy_from_host(*cc.dst, cc.dst_off, h + cc.at, cc.len);
      ++copies;
    }
  };
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const int b = int(c % 2);
    if (!staging[b]) staging[b] = src.allocate_staging(size);
    if (!staging[b] || !staging[b]->host_ptr())
      throw BackendError(
          fmt::format("{}: allocate_staging gave no host-visible memory", src.device().str()),
          "allocate_staging");
    {
      MaybeWork gather(EventKind::copy, src, "copy DtoD", chunk_bytes(chunks[c]),
                       "a chunk gathered into staging memory");
      for (const Piece& pc : chunks[c].pieces) {
        src.copy_within(*staging[b], pc.at, s.storages[pc.storage].storage->buffer(), pc.src_off,
                        pc.len);
        ++copies;
      }
    }
    ready[b] = src.record_event();
    if (c > 0) drain(c - 1);
  }
  if (!chunks.empty()) drain(chunks.size() - 1);
  return copies;
}

// Copies the raw (non-converting) storages of group `g` into `buffers`.
std::size_t copy_group(const TransferPlan::State& s, const TransferGroup& g,
                       const std::vector<std::shared_ptr<Buffer>>& arenas,
                       const std::vector<std::unique_ptr<Buffer>>& buffers) {
  DeviceImpl& src = *g.src;
  DeviceImpl& dst = *g.dst;
  {
    MaybeWork wait(EventKind::wait, src, "synchronize");
    src.synchronize();  // pending writes to the sources must land first
  }
  std::size_t copies = 0;
  std::vector<std::size_t> staged, gathered;
  bool peer = true;       // until the destination refuses a peer copy
  bool dst_idle = false;  // the host writes the destination's memory once dst has synchronized
  for (std::size_t i : g.storages) {
    const PlannedStorage& p = s.storages[i];
    if (p.convert || p.src_bytes == 0) continue;
    const Buffer& from = p.storage->buffer();
    const auto* src_ptr = static_cast<const std::byte*>(from.host_ptr());
    auto* dst_ptr = static_cast<std::byte*>(buffers[i]->host_ptr());
    // Note [Copy routes]: the route the plan reported (explain()).
    const CopyRoute route = copy_route(src, from, dst, buffers[i].get());
    switch (route) {
      case CopyRoute::dma: {  // pinned memory (the group synchronizes dst at its end)
        MaybeWork copy(EventKind::copy, dst, copy_name(src, dst), p.src_bytes,
                       "DMA, pinned memory");
        const Buffer::Registration r = from.registration(dst);
        dst.copy_within(*buffers[i], 0, *r.buffer, r.offset, p.src_bytes);
        ++copies;
        break;
      }
      case CopyRoute::gather:
        gathered.push_back(i);
        break;
      case CopyRoute::host:
        if (src_ptr) {
          MaybeWork copy(EventKind::copy, dst, copy_name(src, dst), p.src_bytes, "upload");
          dst.copy_from_host(*buffers[i], 0, src_ptr, p.src_bytes);
        } else {
          if (!std::exchange(dst_idle, true)) dst.synchronize();
          MaybeWork copy(EventKind::copy, src, copy_name(src, dst), p.src_bytes, "download", false);
          src.copy_to_host(dst_ptr, from, 0, p.src_bytes);
        }
        ++copies;
        break;
      case CopyRoute::peer:
        if (peer && dst.copy_from_peer(*buffers[i], 0, src, from, 0, p.src_bytes)) {
          ++copies;
          break;
        }
        peer = false;  // once refused, stage the rest
        staged.push_back(i);
        break;
      case CopyRoute::on_device: {
        MaybeWork copy(EventKind::copy, dst, copy_name(src, dst), p.src_bytes, "on device");
        dst.copy_within(*buffers[i], 0, from, 0, p.src_bytes);
        ++copies;
        break;
      }
      case CopyRoute::upload:  // pipelined through staging chunks
      case CopyRoute::staged:
        staged.push_back(i);
        break;
    }
  }
  if (!gathered.empty()) copies += gather_through_source_staging(s, g, gathered, arenas, buffers);
  if (staged.empty()) return copies;

  // The staging pipeline: two chunks, so that filling one overlaps the
  // device copying the other (when the device has staging memory and events).
  const std::size_t cap = s.options.staging_bytes / 2;
  std::vector<Chunk> chunks = make_chunks(s, g, staged, cap, arenas, buffers);
  std::unique_ptr<Buffer> device_staging[2];
  std::vector<std::byte> host_staging;
  std::unique_ptr<Event> in_flight[2];
  const std::size_t size = chunk_size(chunks);
  device_staging[0] = dst.allocate_staging(size);
  if (device_staging[0] && chunks.size() > 1) device_staging[1] = dst.allocate_staging(size);
  if (!device_staging[0]) host_staging.resize(size);
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const int b = device_staging[1] ? int(c % 2) : 0;
    if (in_flight[b]) {
      MaybeWork wait(EventKind::wait, dst, "wait for staging chunk");
      in_flight[b]->wait();
    }
    auto* h = device_staging[0] ? static_cast<std::byte*>(device_staging[b]->host_ptr())
                                : host_staging.data();
    std::optional<profiler::Range> fill;
    if (profiler::detail::on()) [[unlikely]]
      fill.emplace(fmt::format("fill staging chunk {} of {}", c + 1, chunks.size()));
    for (const Piece& pc : chunks[c].pieces) {
      const Buffer& from = s.storages[pc.storage].storage->buffer();
      if (const auto* sp = static_cast<const std::byte*>(from.host_ptr()))
        host_memcpy(h + pc.at, sp + pc.src_off, pc.len);
      else
        src.copy_to_host(h + pc.at, from, pc.src_off, pc.len), ++copies;
    }
    fill.reset();
    MaybeWork copy(EventKind::copy, dst, copy_name(src, dst), chunk_bytes(chunks[c]),
                   device_staging[0] ? "a chunk from staging memory" : "a chunk from host memory");
    for (const ChunkCopy& cc : chunks[c].copies) {
      if (device_staging[0])
        dst.copy_within(*cc.dst, cc.dst_off, *device_staging[b], cc.at, cc.len);
      else
        dst.copy_from_host(*cc.dst, cc.dst_off, h + cc.at, cc.len);
      ++copies;
    }
    if (device_staging[0]) in_flight[b] = dst.record_event();
  }
  return copies;
}

// Converts one storage: a new contiguous tensor of the new dtype on the
// destination, converted on whichever side moves fewer bytes (Tensor::to).
std::shared_ptr<Storage> convert_storage(const PlannedStorage& p, DeviceImpl& dst) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = p.storage;
  impl->sizes = {std::int64_t(p.src_bytes / dtype_size(p.src_dtype))};
  impl->strides = {1};
  impl->dtype = p.src_dtype;
  NoGradGuard no_grad;
  Tensor converted = Tensor(impl).to(dst.device(), p.dst_dtype);
  return converted.storage();
}

}  // namespace

MigrationReport execute_plan(TransferPlan::State& s) {
  const auto t0 = Clock::now();
  profiler::Range range("migrate");  // Note [Profiler]
  check_unchanged(s);
  check_capacity(s);
  // A migration reads its sources: their deferred checks are decided before anything moves
  // (Note [Deferred checks]), so that an error leaves every tensor where it was.
  for (const TransferGroup& g : s.groups) detail::raise_deferred_checks(*g.src);

  // Everything new is made here, owned by these vectors until the commit:
  // an exception before it frees them and leaves every tensor as it was.
  std::vector<std::unique_ptr<Buffer>> buffers(s.storages.size());
  std::vector<std::shared_ptr<Storage>> converted(s.storages.size());
  std::vector<std::vector<std::shared_ptr<Buffer>>> arenas(s.groups.size());
  MigrationReport report;
  for (std::size_t gi = 0; gi < s.groups.size(); ++gi) {
    const TransferGroup& g = s.groups[gi];
    const auto g0 = Clock::now();
    std::optional<profiler::Range> range;  // Note [Profiler]
    if (profiler::detail::on()) [[unlikely]]
      range.emplace(fmt::format("migrate {} -> {} ({} storages, {} arenas)", g.src->device().str(),
                                g.dst->device().str(), g.storages.size(), g.arena_bytes.size()));
    for (std::size_t bytes : g.arena_bytes) arenas[gi].push_back(g.dst->allocate(bytes));
    for (std::size_t i : g.storages) {
      const PlannedStorage& p = s.storages[i];
      if (p.convert) continue;
      buffers[i] = g.arenas ? g.dst->sub_buffer(arenas[gi][p.arena], p.offset, p.dst_bytes)
                            : g.dst->allocate(p.dst_bytes);
      if (!buffers[i])
        throw BackendError(fmt::format("{}: sub_buffer returned nothing for a buffer it made",
                                       g.dst->device().str()),
                           "sub_buffer");
    }
    TransferPairReport pr{.source = g.src->device(), .destination = g.dst->device()};
    pr.copies = copy_group(s, g, arenas[gi], buffers);
    for (std::size_t i : g.storages)
      if (s.storages[i].convert) converted[i] = convert_storage(s.storages[i], *g.dst), ++pr.copies;
    {
      MaybeWork wait(EventKind::wait, *g.dst, "synchronize");
      g.dst->synchronize();  // every copy has completed (and any error surfaced)
    }
    pr.storages = g.storages.size();
    pr.bytes = g.bytes;
    pr.seconds = seconds_since(g0);
    report.bytes += g.bytes;
    report.pairs.push_back(pr);
  }

  // The commit: nothing below can fail.
  std::vector<std::unique_ptr<Buffer>> old;
  old.reserve(s.storages.size());
  for (std::size_t i = 0; i < s.storages.size(); ++i) {
    PlannedStorage& p = s.storages[i];
    if (!p.convert) {
      old.push_back(p.storage->exchange(*s.groups[p.group].dst, std::move(buffers[i])));
      continue;
    }
    for (std::size_t ti : p.tensors) {
      TensorImpl& impl = *s.tensors[ti].tensor.impl_ptr();
      impl.storage = converted[i];
      impl.dtype = p.dst_dtype;
    }
  }
  s.executed = true;
  // A plan that ran holds no tensor: its arenas and the old memory must be
  // freed when the caller drops the tensors, not when it drops the plan.
  for (ListedTensor& t : s.tensors) t.tensor = Tensor();
  for (PlannedStorage& p : s.storages) p.storage.reset();
  old.clear();  // the old memory goes back to its devices (deferred while in use)
  report.seconds = seconds_since(t0);
  FERRY_DEBUG("{}", report.str());
  return report;
}

}  // namespace ferry
