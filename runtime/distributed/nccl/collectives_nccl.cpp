// runtime/distributed/nccl/collectives_nccl.cpp — the "nccl" distributed backend
// (libferry_distributed_nccl.so): runtime/distributed/collectives.hpp over NCCL, on cuda
// device memory and the device's own stream (Note [Native memory]).
//
// NCCL has no launcher: join() takes the rank and size from the core's rendezvous, rank 0 makes
// the unique id and the rendezvous hands it to every rank, then ncclCommInitRank. Each call
// enqueues its NCCL work on the device's stream, which orders it after the kernels that wrote
// its buffers, and blocks until an event recorded after it has completed, polling
// ncclCommGetAsyncError meanwhile, so a failure in the network becomes DistributedError with
// NCCL's own message instead of a wait that never ends. Point-to-point tags are not NCCL's:
// messages between two ranks arrive in the order sent, and the core's header (which carries the
// tag) catches a mismatch. NCCL needs one GPU per rank: two ranks on one GPU are refused by
// NCCL itself.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "distributed/collectives.hpp"
#include "distributed/nccl/nccl_types.hpp"

namespace ferry::distributed {
namespace {

class NcclCollectives final : public Collectives {
 public:
  ~NcclCollectives() override {
    if (!comm_) return;
    cudaSetDevice(device_);
    if (done_) cudaEventDestroy(done_);
    if (scratch_) cudaFree(scratch_);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    if (async == ncclSuccess)
      ncclCommDestroy(comm_);
    else
      ncclCommAbort(comm_);
  }

  std::string name() const override { return "nccl"; }
  std::string device_backend() const override { return "cuda"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void join(const JoinArgs& args) override {
    rank_ = args.rendezvous->rank();
    size_ = args.rendezvous->size();
    device_ = args.device_index;
    stream_ = static_cast<cudaStream_t>(args.queue);
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    ncclUniqueId id{};
    if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    const std::string shared = args.rendezvous->share(std::string(id.internal, sizeof id.internal));
    if (shared.size() != sizeof id.internal)
      throw DistributedError(
          fmt::format("nccl: the rendezvous gave {} bytes for the unique id "
                      "of {} bytes",
                      shared.size(), sizeof id.internal));
    std::memcpy(id.internal, shared.data(), sizeof id.internal);
    check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
    check_cuda(cudaMalloc(&scratch_, 16), "cudaMalloc");
    check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
  }

  void allreduce(void* buf, std::size_t count, DType dt, ReduceOp op) override {
    run("ncclAllReduce", [&] {
      return ncclAllReduce(buf, buf, count, nccl::nccl_type(dt), nccl::nccl_op(op), comm_, stream_);
    });
  }
  void broadcast(void* buf, std::size_t bytes, int root) override {
    run("ncclBroadcast",
        [&] { return ncclBroadcast(buf, buf, bytes, ncclUint8, root, comm_, stream_); });
  }
  void allgather(const void* in, void* out, std::size_t bytes) override {
    run("ncclAllGather", [&] { return ncclAllGather(in, out, bytes, ncclUint8, comm_, stream_); });
  }
  void reduce_scatter(const void* in, void* out, std::size_t count, DType dt,
                      ReduceOp op) override {
    run("ncclReduceScatter", [&] {
      return ncclReduceScatter(in, out, count, nccl::nccl_type(dt), nccl::nccl_op(op), comm_,
                               stream_);
    });
  }
  void all_to_all(const void* in, void* out, std::size_t bytes) override {
    run("ncclSend/ncclRecv (all_to_all)", [&] {
      ncclResult_t rc = ncclGroupStart();
      for (int peer = 0; peer < size_ && rc == ncclSuccess; ++peer) {
        rc = ncclSend(static_cast<const char*>(in) + std::size_t(peer) * bytes, bytes, ncclUint8,
                      peer, comm_, stream_);
        if (rc == ncclSuccess)
          rc = ncclRecv(static_cast<char*>(out) + std::size_t(peer) * bytes, bytes, ncclUint8, peer,
                        comm_, stream_);
      }
      const ncclResult_t end = ncclGroupEnd();
      return rc != ncclSuccess ? rc : end;
    });
  }
  // NCCL has none: an allreduce of one element, which no rank finishes before all have begun.
  void barrier() override {
    run("ncclAllReduce (barrier)",
        [&] { return ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, stream_); });
  }
  void send(const void* buf, std::size_t bytes, int dst, int) override {
    run("ncclSend", [&] { return ncclSend(buf, bytes, ncclUint8, dst, comm_, stream_); });
  }
  void recv(void* buf, std::size_t bytes, int src, int) override {
    run("ncclRecv", [&] { return ncclRecv(buf, bytes, ncclUint8, src, comm_, stream_); });
  }
  [[noreturn]] void abort_job(int code) override {
    // The launcher (mpirun, a batch system) ends the other ranks when this one exits.
    if (comm_) ncclCommAbort(comm_);
    std::_Exit(code);
  }

 private:
  void check(ncclResult_t rc, const char* what) const {
    if (rc == ncclSuccess || rc == ncclInProgress) return;
    const char* last = comm_ ? ncclGetLastError(comm_) : nullptr;
    throw DistributedError(fmt::format("nccl: {} failed: {}{}{}", what, ncclGetErrorString(rc),
                                       last && *last ? ": " : "", last ? last : ""));
  }
  static void check_cuda(cudaError_t err, const char* what) {
    if (err != cudaSuccess)
      throw DistributedError(fmt::format("nccl: {} failed: {}", what, cudaGetErrorString(err)));
  }
  // Enqueues `call` on the stream and waits for it, watching for NCCL's asynchronous errors.
  template <typename F> void run(const char* what, F call) {
    // The calling thread's device: the group's thread, or a blocking call's own (ferry's cuda
    // device makes its own current before its work, so this leaves nothing behind for it).
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    check(call(), what);
    check_cuda(cudaEventRecord(done_, stream_), "cudaEventRecord");
    for (int spins = 0;; ++spins) {
      const cudaError_t q = cudaEventQuery(done_);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) check_cuda(q, what);
      ncclResult_t async = ncclSuccess;
      check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
      check(async, what);
      if (spins < 1000)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  int rank_ = 0, size_ = 1, device_ = 0;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  cudaEvent_t done_ = nullptr;
  void* scratch_ = nullptr;  // the barrier's element
};

}  // namespace
}  // namespace ferry::distributed

extern "C" __attribute__((visibility("default"))) ferry::distributed::Collectives*
ferry_create_collectives(int abi_version) {
  if (abi_version != ferry::distributed::kCollectivesAbiVersion) return nullptr;
  return new ferry::distributed::NcclCollectives();
}
