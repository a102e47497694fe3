// runtime/distributed/rendezvous.hpp — how a rank learns its job where no MPI library tells it
// (the nccl backend): its rank, the world size and its local rank from InitOptions or the
// launcher's environment, and a rendezvous (a file, or a TCP address) through which rank 0 hands
// every rank the bytes the collective library needs to connect (NCCL's unique id). Host logic only:
// tested in one process, with threads as ranks (tests/test_distributed_init.cpp).
#pragma once

#include <chrono>
#include <memory>
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

// What the core's rendezvous share: the job's place, the timeout, one share() each, and no
// exchange at all for a job of one rank; exchange() is the way rank 0's value travels.
class PlacedRendezvous : public Rendezvous {
 public:
  int rank() const override { return place_.rank; }
  int size() const override { return place_.size; }
  std::string share(const std::string& value) final;

 protected:
  PlacedRendezvous(std::string where, JobPlace place, std::chrono::milliseconds timeout)
      : where_(std::move(where)), place_(place), timeout_(timeout) {}
  virtual std::string exchange(const std::string& value) = 0;  // more than one rank

  std::string where_;  // the path or address, as given
  JobPlace place_;
  std::chrono::milliseconds timeout_;

 private:
  bool used_ = false;
};

// Note [Rendezvous file]
// Rank 0 writes its value to a temporary file and links it to `path` in one step (link(2)
// fails where `path` exists, so a file left by an earlier job is refused, never read as this
// job's by rank 0); every other rank polls until `path` appears, reads it, and leaves
// `path.<rank>.ack`; rank 0 waits for every acknowledgement and removes them and `path`, so the
// same path serves the next job. A rank that waits longer than `timeout` raises
// DistributedError naming what it waited for.
class FileRendezvous final : public PlacedRendezvous {
 public:
  FileRendezvous(std::string path, JobPlace place, std::chrono::milliseconds timeout)
      : PlacedRendezvous(std::move(path), place, timeout) {}

 private:
  std::string exchange(const std::string& value) override;
};

// Note [Rendezvous address]
// Where the ranks share no file system, rank 0 listens at a TCP address ("tcp://HOST:PORT",
// HOST being rank 0's machine as the others reach it, e.g. the first host of the hostfile):
// each other rank connects (again every 20 ms until rank 0 listens), says "ferryrd1", its rank
// and the world size, and reads rank 0's value; rank 0 answers each rank once and stops
// listening when every rank has its value. A peer from another job (another world size, a rank
// twice) is a DistributedError, a connection that says nothing is dropped after a second, and
// every wait is bounded by `timeout`. This is the rendezvous alone: the collectives run over the
// library's own transports.
class TcpRendezvous final : public PlacedRendezvous {
 public:
  TcpRendezvous(std::string address, JobPlace place, std::chrono::milliseconds timeout)
      : PlacedRendezvous(std::move(address), place, timeout) {}

 private:
  std::string exchange(const std::string& value) override;
};

// A TcpRendezvous for "tcp://HOST:PORT", else a FileRendezvous for the path ("file:" optional,
// empty where there is none).
std::unique_ptr<Rendezvous> make_rendezvous(const std::string& spec, JobPlace place,
                                            std::chrono::milliseconds timeout);

}  // namespace ferry::distributed
