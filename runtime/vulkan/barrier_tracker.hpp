// runtime/vulkan/barrier_tracker.hpp — where the Vulkan recorder needs pipeline barriers.
//
// Note [Barrier placement]
// The recorder puts many dispatches and copies into one command buffer. Vulkan orders none of
// them: two commands that touch the same bytes, one of them writing, need a pipeline barrier
// between them. Lavapipe gives right answers without one and the validation layer misses some
// hazards, so placement is decided here, with no Vulkan headers, and tested on its own.
//
// The recorder calls before() for each command in recording order with the byte ranges the
// command reads and writes, and records the returned barrier (a global VkMemoryBarrier) first.
// A barrier is returned exactly when the command reads or writes bytes that a command since
// the last barrier wrote (read-after-write, write-after-write), or writes bytes such a command
// read (write-after-read). Read-after-read, disjoint ranges and other buffers need none, and a
// command's own uses never conflict with each other.
//
// Every barrier *retires* everything pending, so the tracker then forgets it all and its state
// stays small. That is only sound if the barrier orders every pending access before every
// later device access, whatever its stage, so the masks are:
//   src stages  = the stages of all pending accesses (not only the conflicting ones: a transfer
//                 write left out of a compute->compute barrier would be forgotten unordered);
//   src access  = the access bits of all pending writes (made available);
//   dst stages  = compute | transfer, every stage a later command can have (a barrier whose
//                 dst were only the new command's stage would not order a later copy after a
//                 forgotten dispatch);
//   dst access  = every device read and write bit (made visible to every later access: a
//                 write made visible only to shader_write by a WAW barrier could then be read
//                 unsynchronised), or 0 when no write is pending: a write-after-read needs only
//                 an execution dependency, since a read leaves nothing to make available.
// Writes from before the previous barrier need nothing more: that barrier made them visible to
// every later device access. Wider masks cost nothing measurable next to the pipeline drain
// every barrier causes; the number of barriers is what matters, and that is exact.
//
// Host reads of mapped memory (after the host waited for the queue) need a barrier with dst
// stage host and dst access host_read, which device barriers do not give, so writes are also
// tracked until the next host barrier: before_host_read(). Host writes need no tracking: the
// backend writes mapped memory only while the queue is idle, and vkQueueSubmit makes host
// writes visible to the commands it submits.
//
// Pending state persists across command-buffer submissions: submission order alone orders
// nothing on the device. One tracker serves one queue; work on other queues is ordered with
// semaphores, outside this class. With serialize (FERRY_VULKAN_SERIALIZE=1, read by the
// backend) every command but the first gets a full barrier, so a wrong result that goes away
// under it points at synchronisation (nothing is tracked in that mode).
//
// Cost: pending ranges are kept per buffer as merged interval sets, so a command costs
// O(uses * log(pending intervals in that buffer)) and a barrier frees what it retires.
// Not thread-safe: one recorder owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>

namespace ferry::vulkan {

using StageMask = std::uint32_t;   // a VkPipelineStageFlags value
using AccessMask = std::uint32_t;  // a VkAccessFlags value

// The values are Vulkan's own bits, so the backend passes masks through unchanged; it
// static_asserts each against the VK_* constant, since this header cannot include Vulkan.
enum class Stage : std::uint32_t {
  compute = 0x00000800,       // VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
  transfer = 0x00001000,      // VK_PIPELINE_STAGE_TRANSFER_BIT
  host = 0x00004000,          // VK_PIPELINE_STAGE_HOST_BIT
  all_commands = 0x00010000,  // VK_PIPELINE_STAGE_ALL_COMMANDS_BIT
};

enum class AccessBit : std::uint32_t {
  shader_read = 0x00000020,     // VK_ACCESS_SHADER_READ_BIT
  shader_write = 0x00000040,    // VK_ACCESS_SHADER_WRITE_BIT
  transfer_read = 0x00000800,   // VK_ACCESS_TRANSFER_READ_BIT
  transfer_write = 0x00001000,  // VK_ACCESS_TRANSFER_WRITE_BIT
  host_read = 0x00002000,       // VK_ACCESS_HOST_READ_BIT
  host_write = 0x00004000,      // VK_ACCESS_HOST_WRITE_BIT
  memory_read = 0x00008000,     // VK_ACCESS_MEMORY_READ_BIT
  memory_write = 0x00010000,    // VK_ACCESS_MEMORY_WRITE_BIT
};

constexpr StageMask mask(Stage s) { return static_cast<StageMask>(s); }
constexpr AccessMask mask(AccessBit a) { return static_cast<AccessMask>(a); }

// Every stage and access a command recorded through before() can have.
inline constexpr StageMask kDeviceStages = mask(Stage::compute) | mask(Stage::transfer);
inline constexpr AccessMask kDeviceAccess =
    mask(AccessBit::shader_read) | mask(AccessBit::shader_write) | mask(AccessBit::transfer_read) |
    mask(AccessBit::transfer_write);

// VK_WHOLE_SIZE: a Range of this size reaches from its offset to the end of the buffer.
inline constexpr std::uint64_t kWholeSize = ~std::uint64_t(0);

// Bytes [offset, offset + size) of one buffer. `buffer` is an opaque id (the VkBuffer handle
// as an integer); a size of 0 is an empty range and conflicts with nothing.
struct Range {
  std::uint64_t buffer = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  static constexpr Range whole(std::uint64_t buffer) { return {buffer, 0, kWholeSize}; }
  // One past the last byte; saturates, so kWholeSize (or any size running past 2^64) reaches
  // to the end of the address space and so overlaps everything from its offset on.
  constexpr std::uint64_t end() const {
    return size > ~std::uint64_t(0) - offset ? ~std::uint64_t(0) : offset + size;
  }
};

enum class Access { read, write };

struct Use {
  Range range;
  Access access;
};

// The access bit a command of stage `stage` uses for `access` (shader_read for a compute read).
AccessMask access_bit(Stage stage, Access access);

// Why a barrier was placed, for logs and tests. A command with several hazards is named by
// the first of raw, waw, war.
enum class BarrierKind { raw, waw, war, host_read, serialize };
const char* to_string(BarrierKind kind);

// A global memory barrier: vkCmdPipelineBarrier(src_stages, dst_stages, 0, 1,
// &VkMemoryBarrier{src_access, dst_access}, 0, nullptr, 0, nullptr).
struct Barrier {
  StageMask src_stages = 0;
  StageMask dst_stages = 0;
  AccessMask src_access = 0;
  AccessMask dst_access = 0;
  BarrierKind kind = BarrierKind::raw;
  bool operator==(const Barrier&) const = default;
};

struct BarrierStats {
  std::uint64_t commands = 0;    // before() calls
  std::uint64_t host_reads = 0;  // before_host_read() calls
  std::uint64_t raw = 0, waw = 0, war = 0, host_read = 0, serialize = 0;  // barriers by kind
  std::uint64_t barriers() const { return raw + waw + war + host_read + serialize; }
};

class BarrierTracker {
 public:
  // `stages`: the stages the queue's commands run in (kDeviceStages, or Stage::transfer alone
  // on a transfer-only queue, where a barrier may name no compute stage or shader access); a
  // device barrier's dst stages and access are those of `stages`.
  explicit BarrierTracker(bool serialize = false, StageMask stages = kDeviceStages)
      : serialize_(serialize), stages_(stages) {}

  // Call for each dispatch (Stage::compute) or copy/fill (Stage::transfer) in recording order;
  // record the returned barrier before the command. Throws std::invalid_argument for another
  // stage, or one outside the queue's stages.
  std::optional<Barrier> before(Stage stage, std::span<const Use> uses);
  std::optional<Barrier> before(Stage stage, std::initializer_list<Use> uses) {
    return before(stage, std::span<const Use>(uses.begin(), uses.size()));
  }

  // Call before the host reads `ranges` of mapped memory; record the returned barrier (dst
  // host/host_read) at the end of the batch, then wait for the queue, then read. Device-side
  // pending state is unchanged: a host barrier orders nothing on the device.
  std::optional<Barrier> before_host_read(std::span<const Range> ranges);
  std::optional<Barrier> before_host_read(std::initializer_list<Range> ranges) {
    return before_host_read(std::span<const Range>(ranges.begin(), ranges.size()));
  }

  // Forgets everything. Valid only when every recorded command has completed (the host waited
  // on its fence or timeline value) AND nothing it wrote still lacks a barrier its reader
  // needs: e.g. after a host barrier from before_host_read() that covered the whole batch and
  // nothing recorded since, or when the memory written has been freed. Otherwise do not call
  // it: the tracker stays correct across submissions, costing at most one barrier at the start
  // of the next batch.
  void reset();

  bool serialize() const { return serialize_; }
  const BarrierStats& stats() const { return stats_; }
  // Merged intervals held (device-pending plus host-unsynchronised), to check state stays small.
  std::size_t tracked_intervals() const;

 private:
  // Disjoint, non-adjacent half-open intervals [begin, end), keyed by begin; adding merges.
  class IntervalSet {
   public:
    bool overlaps(std::uint64_t begin, std::uint64_t end) const;
    void add(std::uint64_t begin, std::uint64_t end);
    std::size_t size() const { return spans_.size(); }

   private:
    std::map<std::uint64_t, std::uint64_t> spans_;
  };
  using PerBuffer = std::unordered_map<std::uint64_t, IntervalSet>;
  static bool overlaps(const PerBuffer& set, const Range& r);
  static void add(PerBuffer& set, const Range& r);

  bool serialize_;
  StageMask stages_;
  BarrierStats stats_;
  // Accesses since the last device barrier, and the union of their stages / write bits.
  PerBuffer reads_, writes_;
  StageMask pending_stages_ = 0;
  AccessMask pending_write_access_ = 0;
  // Writes since the last host barrier.
  PerBuffer host_unsynced_;
  StageMask host_stages_ = 0;
  AccessMask host_access_ = 0;
  // Serialize mode: whether a command was recorded since the last (host) barrier.
  bool command_since_barrier_ = false;
  bool command_since_host_barrier_ = false;
};

}  // namespace ferry::vulkan
