// runtime/distributed/call.hpp — what a rank asked its process group to run: the record the
// ranks compare before each collective, and the description a timeout's message gives.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "ferry/distributed.hpp"
#include "ferry/dtype.hpp"

namespace ferry::distributed {

enum class Kind : std::int64_t {
  allreduce,
  broadcast,
  allgather,
  reduce_scatter,
  all_to_all,
  barrier,
  send,
  recv  // a Work's description only: a recv's sender exchanges Kind::send
};
inline constexpr const char* kKindNames[] = {"allreduce",      "broadcast",  "allgather",
                                             "reduce_scatter", "all_to_all", "barrier",
                                             "send",           "recv"};

// What a rank was asked, compared across the ranks before each collective.
struct Call {  // 40 bytes: exchanged as [1, 5] i64 where the module takes device memory
  std::int64_t kind = 0, dtype = 0, count = 0, arg = 0;  // arg: the op, or the root
  // Elements per chunk where the collective stages through host memory in more than one
  // (Note [Chunked staging]), else 0: ranks that chunk differently (one rank's tensor on the
  // CPU, another's on a device; unequal FERRY_DISTRIBUTED_CHUNK) would call the library
  // differently, so it is compared with the rest.
  std::int64_t chunk = 0;
  bool operator==(const Call&) const = default;
  std::string str() const {
    const Kind k = Kind(kind);
    std::string s = kKindNames[kind];
    if (k == Kind::barrier) return s;
    s += fmt::format(" of {} {} elements", count, dtype_name(DType(dtype)));
    if (k == Kind::allreduce || k == Kind::reduce_scatter)
      s += fmt::format(" ({})", reduce_op_name(ReduceOp(arg)));
    if (k == Kind::broadcast) s += fmt::format(" from rank {}", arg);
    if (chunk) s += fmt::format(", staged in chunks of {} elements", chunk);
    return s;
  }
};
static_assert(sizeof(Call) == 5 * sizeof(std::int64_t));

// What a Work is, for the message that ends a job: its call, and for a send or recv its peer.
// Kept as numbers and put into words only when needed, off the hot path.
struct Described {
  Call call;
  int peer = -1;              // a send's or recv's other rank; -1 for a collective
  std::uint64_t number = 0;   // the rank's how-manieth call this is
  std::string name() const {  // what was called, with the peer
    return peer < 0 ? call.str()
                    : fmt::format("{} rank {} (tag {})",
                                  Kind(call.kind) == Kind::send ? "send to" : "recv from", peer,
                                  call.arg);
  }
  std::string str() const { return fmt::format("{} (call #{} of this rank)", name(), number); }
};

}  // namespace ferry::distributed
