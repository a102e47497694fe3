// runtime/distributed/collectives.hpp — what a distributed backend module implements:
// collectives over host memory within one job (Note [Process groups] in ferry/distributed.hpp).
//
// The core (process_group.cpp) checks every argument, stages tensors through host buffers,
// widens f16 and bf16 to f32 for reductions, maps bool's sum and product onto max and min and
// divides for avg, so a module sees contiguous host buffers of the dtypes below and only sum,
// min, max and product. It calls a module from one thread at a time (the group's worker
// thread; create() and the destructor from the thread that called init() and shutdown()).
// Each call blocks until its part is done and raises ferry::Error on failure.
#pragma once

#include <cstddef>
#include <string>

#include "ferry/distributed.hpp"
#include "ferry/dtype.hpp"

namespace ferry::distributed {

// Bumped when this interface changes; a module built for another is refused.
inline constexpr int kCollectivesAbiVersion = 1;

class Collectives {
 public:
  virtual ~Collectives() = default;  // leaves the job
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // `count` elements of `dt` (f32, f64, i8, i16, i32, i64, u8) in place; op is not avg.
  virtual void allreduce(void* buf, std::size_t count, DType dt, ReduceOp op) = 0;
  virtual void broadcast(void* buf, std::size_t bytes, int root) = 0;
  // out: size() blocks of `bytes`, block r from rank r.
  virtual void allgather(const void* in, void* out, std::size_t bytes) = 0;
  // in: size() blocks of `count` elements; out: the reduction of every rank's block rank().
  virtual void reduce_scatter(const void* in, void* out, std::size_t count, DType dt,
                              ReduceOp op) = 0;
  // in and out: size() blocks of `bytes`; out block s is rank s's in block rank().
  virtual void all_to_all(const void* in, void* out, std::size_t bytes) = 0;
  virtual void barrier() = 0;
  virtual void send(const void* buf, std::size_t bytes, int dst, int tag) = 0;
  virtual void recv(void* buf, std::size_t bytes, int src, int tag) = 0;
  // Ends every rank of the job now (a collective timed out); may be called from any thread.
  [[noreturn]] virtual void abort_job(int code) = 0;
};

}  // namespace ferry::distributed

// A module exports `ferry_create_collectives` of this type: the collectives of the job the
// process was launched in (it raises ferry::Error when it cannot join one), or null when the
// module was built for another ABI version.
extern "C" {
using FerryCreateCollectivesFn = ferry::distributed::Collectives* (*)(int abi_version);
}
