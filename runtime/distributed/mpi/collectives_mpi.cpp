// runtime/distributed/mpi/collectives_mpi.cpp — the "mpi" distributed backend
// (libferry_distributed_mpi.so): runtime/distributed/collectives.hpp over Open MPI, on
// MPI_COMM_WORLD of the job mpirun launched.
//
// MPI is initialised with MPI_THREAD_SERIALIZED: the core calls it from one thread at a time
// (its worker thread, or a blocking call's own thread: runtime/distributed/collectives.hpp). Counts
// above INT_MAX elements are sent in pieces, since MPI counts are ints. Errors return
// (MPI_ERRORS_RETURN) and become ferry::DistributedError with MPI's own message; abort_job is
// MPI_Abort, which mpirun turns into the end of every rank.
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <map>

#include "distributed/collectives.hpp"

namespace ferry::distributed {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw DistributedError(fmt::format("mpi: {} failed: {}", what, std::string(text, len)));
}

MPI_Datatype mpi_type(DType dt) {
  switch (dt) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::i8:
      return MPI_INT8_T;
    case DType::i16:
      return MPI_INT16_T;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
    case DType::u8:
    case DType::boolean:
      return MPI_UINT8_T;
    default:
      throw DistributedError(fmt::format("mpi: no MPI type for {}", dtype_name(dt)));
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return MPI_SUM;
    case ReduceOp::min:
      return MPI_MIN;
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::product:
      return MPI_PROD;
    case ReduceOp::avg:
      break;
  }
  throw DistributedError("mpi: avg reaches the module as sum");
}

// Elements per MPI call: MPI counts are ints.
constexpr std::size_t kMaxCount = std::size_t(INT_MAX) / 16 * 16;

class MpiCollectives final : public Collectives {
 public:
  // MPI learns the rank and size from its launcher; the core checks them against the
  // rendezvous's (InitOptions) after the join.
  void join(const JoinArgs&) override {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      if (provided < MPI_THREAD_SERIALIZED)
        throw DistributedError(fmt::format(
            "mpi: the MPI library gives thread level {}, ferry needs MPI_THREAD_SERIALIZED",
            provided));
      owns_init_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  }
  ~MpiCollectives() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_init_ && !finalized) MPI_Finalize();
  }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce(void* buf, std::size_t count, DType dt, ReduceOp op) override {
    auto* p = static_cast<char*>(buf);
    for (std::size_t at = 0; at < count; at += kMaxCount) {
      const int n = int(std::min(kMaxCount, count - at));
      check(MPI_Allreduce(MPI_IN_PLACE, p + at * dtype_size(dt), n, mpi_type(dt), mpi_op(op),
                          MPI_COMM_WORLD),
            "MPI_Allreduce");
    }
  }
  void broadcast(void* buf, std::size_t bytes, int root) override {
    auto* p = static_cast<char*>(buf);
    for (std::size_t at = 0; at < bytes; at += kMaxCount)
      check(MPI_Bcast(p + at, int(std::min(kMaxCount, bytes - at)), MPI_BYTE, root, MPI_COMM_WORLD),
            "MPI_Bcast");
  }
  void allgather(const void* in, void* out, std::size_t bytes) override {
    check(MPI_Allgather(in, int(block(bytes)), blocks(bytes), out, int(block(bytes)), blocks(bytes),
                        MPI_COMM_WORLD),
          "MPI_Allgather");
  }
  void reduce_scatter(const void* in, void* out, std::size_t count, DType dt,
                      ReduceOp op) override {
    if (count > kMaxCount)
      throw DistributedError(fmt::format("mpi: reduce_scatter of {} elements per rank (at most {})",
                                         count, kMaxCount));
    check(MPI_Reduce_scatter_block(in, out, int(count), mpi_type(dt), mpi_op(op), MPI_COMM_WORLD),
          "MPI_Reduce_scatter_block");
  }
  void all_to_all(const void* in, void* out, std::size_t bytes) override {
    check(MPI_Alltoall(in, int(block(bytes)), blocks(bytes), out, int(block(bytes)), blocks(bytes),
                       MPI_COMM_WORLD),
          "MPI_Alltoall");
  }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  void send(const void* buf, std::size_t bytes, int dst, int tag) override {
    const auto* p = static_cast<const char*>(buf);
    for (std::size_t at = 0; at < bytes || at == 0; at += kMaxCount) {
      check(MPI_Send(p + at, int(std::min(kMaxCount, bytes - at)), MPI_BYTE, dst, tag,
                     MPI_COMM_WORLD),
            "MPI_Send");
      if (bytes == 0) break;
    }
  }
  void recv(void* buf, std::size_t bytes, int src, int tag) override {
    auto* p = static_cast<char*>(buf);
    for (std::size_t at = 0; at < bytes || at == 0; at += kMaxCount) {
      check(MPI_Recv(p + at, int(std::min(kMaxCount, bytes - at)), MPI_BYTE, src, tag,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE),
            "MPI_Recv");
      if (bytes == 0) break;
    }
  }
  [[noreturn]] void abort_job(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort returned (it should not)
  }

 private:
  // Per-rank blocks of `bytes` as one count of a contiguous type, so that large blocks fit an
  // int count: the largest of 1, 16, 4096 or 1 MiB bytes that divides `bytes`.
  static std::size_t unit(std::size_t bytes) {
    for (std::size_t u : {std::size_t(1) << 20, std::size_t(4096), std::size_t(16)})
      if (bytes % u == 0 && bytes / u > 0) return u;
    return 1;
  }
  std::size_t block(std::size_t bytes) {
    const std::size_t n = bytes / unit(bytes);
    if (n > std::size_t(INT_MAX))
      throw DistributedError(fmt::format("mpi: a block of {} bytes per rank is too large", bytes));
    return n;
  }
  MPI_Datatype blocks(std::size_t bytes) {
    const std::size_t u = unit(bytes);
    if (u == 1) return MPI_BYTE;
    auto [it, fresh] = types_.try_emplace(u, MPI_DATATYPE_NULL);
    if (fresh) {
      check(MPI_Type_contiguous(int(u), MPI_BYTE, &it->second), "MPI_Type_contiguous");
      check(MPI_Type_commit(&it->second), "MPI_Type_commit");
    }
    return it->second;
  }

  int rank_ = 0, size_ = 1;
  bool owns_init_ = false;
  std::map<std::size_t, MPI_Datatype> types_;
};

}  // namespace
}  // namespace ferry::distributed

extern "C" __attribute__((visibility("default"))) ferry::distributed::Collectives*
ferry_create_collectives(int abi_version) {
  if (abi_version != ferry::distributed::kCollectivesAbiVersion) return nullptr;
  return new ferry::distributed::MpiCollectives();
}
