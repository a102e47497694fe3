// runtime/distributed/collectives.hpp — what a distributed backend module implements:
// collectives within one job (Note [Process groups] in ferry/distributed.hpp).
//
// A module's buffers are host memory (mpi), or the device memory of one backend's devices
// (nccl: cuda), as device_backend() says. The core (process_group.cpp) checks every argument,
// stages tensors into contiguous buffers where the module takes them (host memory; or the
// group's device, at the addresses DeviceImpl::native_address gives: Note [Native memory]),
// widens f16 and bf16 to f32 for reductions, maps bool's sum and product onto max and min and
// divides for avg, so a module sees contiguous buffers of the dtypes below and only sum, min,
// max and product. It calls a module from one thread at a time, though not always the same one
// (the group's worker thread, or the thread of a blocking call that runs its collective itself;
// join() and the destructor from the thread that called init() and shutdown()), with the
// group's mutex between them. Each call blocks until its part is done, on the device too, and
// raises ferry::Error on failure.
#pragma once

#include <cstddef>
#include <string>

#include "ferry/distributed.hpp"
#include "ferry/dtype.hpp"

namespace ferry::distributed {

// Bumped when this interface changes; a module built for another is refused.
// 2: join() and Rendezvous; device_backend() (modules over device memory).
inline constexpr int kCollectivesAbiVersion = 2;

// How a rank learns the job it joins: the rank and world size the core read from InitOptions
// or the launcher's environment, and a way for rank 0 to hand every rank a few bytes (NCCL's
// unique id). A library that learns these itself (MPI) need not ask.
class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank 0's `value` on every rank (the other ranks' `value` is ignored). Blocks until rank 0
  // has given it; DistributedError after the group's timeout, ValueError where no rendezvous
  // was configured and there is more than one rank.
  virtual std::string share(const std::string& value) = 0;
};

struct JoinArgs {
  Rendezvous* rendezvous = nullptr;
  // A device module's device: its index among device_backend()'s devices, and that device's
  // queue (DeviceImpl::native_queue), on which the module enqueues its work.
  int device_index = -1;
  void* queue = nullptr;
};

class Collectives {
 public:
  virtual ~Collectives() = default;  // leaves the job, where it joined one
  // Empty where the module's buffers are host memory; else the backend whose device memory
  // they are ("cuda").
  virtual std::string device_backend() const { return {}; }
  // Joins the job (raises ferry::Error where it cannot). Called once, before anything below.
  virtual void join(const JoinArgs& args) = 0;
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

// A module exports `ferry_create_collectives` of this type: its collectives, not yet joined
// (cheap: no library is initialised), or null when the module was built for another ABI
// version.
extern "C" {
using FerryCreateCollectivesFn = ferry::distributed::Collectives* (*)(int abi_version);
}
