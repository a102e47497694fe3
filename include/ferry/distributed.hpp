// ferry/distributed.hpp — process groups: collectives across processes (ranks), each rank
// usually driving its own device, over a collective library loaded at run time.
//
// Note [Process groups]
// init() opens a backend module from the backend search path (FERRY_BACKEND_PATH, then the
// folder of libferry): "mpi" is libferry_distributed_mpi.so over Open MPI, which reads the rank
// and the world size from the launcher's environment (mpirun). A machine without the module or
// the library still runs ferry: init() raises UnsupportedError saying which is missing.
// "nccl" is libferry_distributed_nccl.so over NCCL (from the CUDA toolkit), for cuda tensors:
// its collectives run on the device's own stream, on device memory, with no staging. NCCL has
// no launcher of its own, so its rank and world size come from InitOptions or the environment
// (FERRY_RANK and FERRY_WORLD_SIZE, or mpirun's OMPI_COMM_WORLD_RANK and _SIZE), and rank 0
// hands the others NCCL's unique id through a rendezvous: a file that every rank sees, or a
// TCP address rank 0 listens at ("tcp://HOST:PORT").
//
// Every collective has an async form returning a Work handle, and a blocking form that waits
// on it. A group runs its collectives one at a time, in the order they were issued. An async
// form's runs on a thread of the group's own, so the caller's thread goes on while it is in
// flight; a tensor handed to one must not be touched until its Work has completed. A blocking
// form's runs on the calling thread itself where nothing issued before is still queued or
// running (else it is queued and waited for): a short collective takes microseconds, and
// handing it to another thread and back would cost as much again. Run so, it needs no Work
// state at all (its error is thrown where the wait would have rethrown it). A waiter looks again a
// while (yielding the core) before it sleeps, for the same reason. An mpi group takes tensors on
// any device, staged through host memory (a collective of device tensors in chunks whose
// copies overlap the library's work: Note [Chunked staging] in
// runtime/distributed/chunked_staging.hpp); an nccl group takes tensors on its own device()
// only. Every collective first compares, across the ranks, what each was asked (which
// collective, dtype, element count, root, chunking): a mismatch raises DistributedError on every
// rank, naming each rank's call, and the group stays usable. The comparison is one more collective
// of 40 bytes per rank, which a short allreduce feels (measured over shared memory: about 1 µs
// beside 2.5 µs for the allreduce of 4 KiB), so it can be switched off (compare_calls), as
// PyTorch only compares under TORCH_DISTRIBUTED_DEBUG=DETAIL; mismatched calls are then the
// library's undefined behaviour, which the timeout below still bounds. A collective that has
// not completed within the group's timeout (FERRY_DISTRIBUTED_TIMEOUT seconds, 300 by default)
// means a peer died or hangs: the group prints which collective timed out on which rank and
// ends the whole job (MPI_Abort; nccl: it aborts its communicator and exits, and the launcher
// ends the other ranks), so no rank waits forever. The group's thread watches a collective
// that runs on its caller's thread for this. A rank that dies or exits with an error is ended
// by the launcher, and with it the job. Under ferry::profiler, each collective is a range on the
// thread that ran it, named by the backend and the call ("mpi allreduce of 1024 f32 elements
// (sum)").
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/config.hpp"
#include "ferry/error.hpp"
#include "ferry/tensor.hpp"

namespace ferry::distributed {

// PyTorch's ReduceOp. avg is sum / world size (floating tensors). On bool tensors sum is a
// logical or and product a logical and, as in PyTorch.
enum class ReduceOp { sum, avg, min, max, product };
FERRY_EXPORT std::string_view reduce_op_name(ReduceOp op);

// A collective that the ranks called differently, or that failed in the collective library.
class DistributedError : public Error {
  using Error::Error;
};

class WorkState;

// An issued collective. wait() blocks until it has completed and rethrows its error, if any.
class FERRY_EXPORT Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<WorkState> state) : state_(std::move(state)) {}
  void wait() const;
  bool is_completed() const;

 private:
  std::shared_ptr<WorkState> state_;
};

struct InitOptions {
  std::string backend = "mpi";
  // This process's rank and the number of ranks; -1: from the launcher's environment
  // (FERRY_RANK and FERRY_WORLD_SIZE, else OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE, else
  // PMI_RANK and PMI_SIZE, else a single rank). MPI knows its own: an mpi group checks them.
  int rank = -1;
  int world_size = -1;
  // Where rank 0 hands the other ranks what the library needs to connect (NCCL's unique id):
  // "tcp://HOST:PORT", an address on rank 0's machine that rank 0 listens at and the others
  // connect to, or the path of a file on a file system that every rank sees, which must not
  // exist yet (rank 0 removes it once every rank has read it). Empty: FERRY_RENDEZVOUS. Unused
  // by mpi.
  std::string rendezvous;
  // A group of one device backend (nccl: cuda) uses this device; none: the device of that
  // backend numbered by the local rank (FERRY_LOCAL_RANK or OMPI_COMM_WORLD_LOCAL_RANK, else
  // the rank) modulo the number of devices.
  std::optional<Device> device;
  // How long a collective may take before the job is ended; zero: FERRY_DISTRIBUTED_TIMEOUT
  // (seconds), else 300 s.
  std::chrono::milliseconds timeout{0};
  // Whether the ranks compare each collective's call before running it (Note [Process
  // groups]); unset: FERRY_DISTRIBUTED_COMPARE_CALLS (0 or 1), else on.
  std::optional<bool> compare_calls;
};

class FERRY_EXPORT ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;
  virtual std::chrono::milliseconds timeout() const = 0;
  // The one device whose tensors this group takes (nccl: this rank's cuda device), or none
  // where it takes tensors on every device (mpi).
  virtual std::optional<Device> device() const = 0;
  // Whether each collective issued from now on is first compared across the ranks. Every rank
  // must switch it between the same two calls, as the calls themselves must match.
  virtual bool compare_calls() const = 0;
  virtual void set_compare_calls(bool on) = 0;

  // In place: every rank's `t` becomes the reduction of all ranks' `t`.
  virtual Work allreduce_async(const Tensor& t, ReduceOp op = ReduceOp::sum) = 0;
  // In place: every rank's `t` becomes rank `root`'s.
  virtual Work broadcast_async(const Tensor& t, int root) = 0;
  // out [size, *in.shape]: out[r] is rank r's `in`.
  virtual Work allgather_async(const Tensor& out, const Tensor& in) = 0;
  // in [size, *out.shape]: rank r's `out` is the reduction of every rank's in[r].
  virtual Work reduce_scatter_async(const Tensor& out, const Tensor& in,
                                    ReduceOp op = ReduceOp::sum) = 0;
  // in and out [size, ...]: rank r's out[s] is rank s's in[r].
  virtual Work all_to_all_async(const Tensor& out, const Tensor& in) = 0;
  virtual Work barrier_async() = 0;
  // Point to point: `t` to rank `dst`, matched by a recv of the same tag and dtype and size.
  virtual Work send_async(const Tensor& t, int dst, int tag = 0) = 0;
  virtual Work recv_async(const Tensor& t, int src, int tag = 0) = 0;

  // The blocking forms: issue, then wait. Where nothing issued before is still queued or
  // running, the group runs the collective on the calling thread (Note [Process groups]).
  void allreduce(const Tensor& t, ReduceOp op = ReduceOp::sum);
  void broadcast(const Tensor& t, int root);
  void allgather(const Tensor& out, const Tensor& in);
  void reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::sum);
  void all_to_all(const Tensor& out, const Tensor& in);
  void barrier();
  void send(const Tensor& t, int dst, int tag = 0);
  void recv(const Tensor& t, int src, int tag = 0);
};

// Opens the backend, joins the job and makes the result the default group. A second call
// raises Error while the first group lives; after shutdown() the library may not allow
// another (MPI does not).
FERRY_EXPORT std::shared_ptr<ProcessGroup> init(const InitOptions& options = {});
FERRY_EXPORT bool is_initialized();
FERRY_EXPORT std::shared_ptr<ProcessGroup> default_group();  // Error before init()
// Waits for every issued collective and leaves the job (MPI_Finalize).
FERRY_EXPORT void shutdown();

}  // namespace ferry::distributed
