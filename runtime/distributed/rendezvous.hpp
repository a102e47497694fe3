// runtime/distributed/rendezvous.hpp — how a rank learns its job where no MPI library tells it
// (the nccl backend): its rank, the world size and its local rank from InitOptions or the
// launcher's environment, and a rendezvous file through which rank 0 hands every rank the bytes
// the collective library needs to connect (NCCL's unique id). Host logic only: tested in one
// process, with threads as ranks (tests/test_distributed_init.cpp).
#pragma once

#include <chrono>
#include <string>

#include "distributed/collectives.hpp"

namespace ferry::distributed {

struct JobPlace {
  int rank = 0, size = 1, local_rank = 0;
};

// `rank` and `size` where given (not -1), else FERRY_RANK and FERRY_WORLD_SIZE, else
// OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE, else PMI_RANK and PMI_SIZE, else rank 0 of 1;
// the local rank from FERRY_LOCAL_RANK, else OMPI_COMM_WORLD_LOCAL_RANK, else the rank.
// ValueError for a variable that is not a number, or a rank outside [0, size).
JobPlace job_place(int rank, int size);

// Note [Rendezvous file]
// Rank 0 writes its value to a temporary file and links it to `path` in one step (link(2)
// fails where `path` exists, so a file left by an earlier job is refused, never read as this
// job's by rank 0); every other rank polls until `path` appears, reads it, and leaves
// `path.<rank>.ack`; rank 0 waits for every acknowledgement and removes them and `path`, so the
// same path serves the next job. A rank that waits longer than `timeout` raises
// DistributedError naming what it waited for. One share() per rendezvous.
class FileRendezvous final : public Rendezvous {
 public:
  FileRendezvous(std::string path, JobPlace place, std::chrono::milliseconds timeout)
      : path_(std::move(path)), place_(place), timeout_(timeout) {}
  int rank() const override { return place_.rank; }
  int size() const override { return place_.size; }
  std::string share(const std::string& value) override;

 private:
  std::string path_;
  JobPlace place_;
  std::chrono::milliseconds timeout_;
  bool used_ = false;
};

}  // namespace ferry::distributed
