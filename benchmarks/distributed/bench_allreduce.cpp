// benchmarks/distributed/bench_allreduce.cpp — ferry-bench-allreduce, run under mpirun: the
// bus bandwidth of ferry's mpi process group's allreduce (sum, f32, a CPU tensor) beside
// MPI_Allreduce called directly on a host buffer of the same size, in the same processes, from
// 4 KiB to 256 MiB (16 MiB with --quick). Bus bandwidth is NCCL's measure: 2 (R - 1) / R times
// the bytes, per second, which is what each rank's links carry in a ring. ferry's figure
// includes what its group adds to the library call (Note [Process groups]): the staging, and
// the cross-rank comparison of each call (one allgather of 40 bytes), which the second ferry
// column leaves out (set_compare_calls(false)). The calls are blocking, so each runs on the
// calling thread, as MPI's does. With
// --device DEV, ferry's tensor lives on DEV (vulkan:0, cuda:0) and its figure includes the
// staging through host memory (Note [Chunked staging]; FERRY_DISTRIBUTED_CHUNK=0 stages whole).
// With --broadcast, the collective is a broadcast from rank 0 beside MPI_Bcast (bus bandwidth =
// the bytes per second, NCCL's measure for a broadcast).
//   mpirun -np 2 ferry-bench-allreduce [--quick] [--device DEV] [--broadcast]
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "ferry/distributed.hpp"
#include "ferry/ferry.hpp"

namespace dist = ferry::distributed;

int main(int argc, char** argv) {
  bool quick = false, broadcast = false;
  std::string device = "cpu";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--broadcast") == 0) broadcast = true;
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = argv[++i];
  }
  try {
    auto group = dist::init();  // MPI is initialised by the group's module; the baseline uses it
    const int R = group->size(), me = group->rank();
    const double bus = R > 1 && !broadcast ? 2.0 * (R - 1) / R : 1.0;
    if (me == 0)
      fmt::print(
          "{} of f32 on {}, {} ranks; bus bandwidth = {:.2f} x bytes / time; "
          "ratio = MPI time / ferry time (compared calls, the default; uncompared)\n"
          "{:>10} {:>10} {:>10} {:>12} {:>10} {:>10} {:>7} {:>7}\n",
          broadcast ? "broadcast from rank 0" : "allreduce, sum", device, R, bus, "bytes",
          "ferry us", "GB/s", "uncompared", "MPI us", "MPI GB/s", "ratio", "uncomp.");
    const std::size_t top = quick ? std::size_t(16) << 20 : std::size_t(256) << 20;
    for (std::size_t bytes = 4096; bytes <= top; bytes *= 4) {
      const std::int64_t n = std::int64_t(bytes / 4);
      // Enough calls that a short one is timed over tens of milliseconds, in five rounds that
      // take turns with the baseline; each figure is its median round, since this machine's
      // speed drifts from one moment to the next.
      constexpr int kRounds = 5;
      const int iters =
          int(std::clamp<std::size_t>((std::size_t(256) << 20) / bytes, 3, 100000) + kRounds - 1) /
          kRounds;
      ferry::Tensor t = ferry::zeros({n}, {.device = ferry::Device(device)});  // sums stay finite
      std::vector<float> host(std::size_t(n), 0.0f);
      auto time = [&](auto&& call) {
        group->barrier();
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) call();
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // The slowest rank's time: a collective is as fast as its last rank.
        ferry::Tensor worst = ferry::full({1}, s);
        group->allreduce(worst, dist::ReduceOp::max);
        return worst.item<double>() / iters;
      };
      auto ferry_call = [&] { broadcast ? group->broadcast(t, 0) : group->allreduce(t); };
      auto compared = [&] { ferry_call(); };
      auto uncompared = [&] {
        group->set_compare_calls(false);  // every rank, between the same two calls
        ferry_call();
        group->set_compare_calls(true);
      };
      // The group's thread is idle between its calls, so this thread may call MPI (the module
      // asked for MPI_THREAD_SERIALIZED).
      auto mpi = [&] {
        if (broadcast)
          MPI_Bcast(host.data(), int(n), MPI_FLOAT, 0, MPI_COMM_WORLD);
        else
          MPI_Allreduce(MPI_IN_PLACE, host.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      };
      compared(), uncompared(), mpi();  // warm-up
      std::vector<double> ferry_r, uncompared_r, mpi_r;
      for (int round = 0; round < kRounds; ++round) {
        ferry_r.push_back(time(compared));
        uncompared_r.push_back(time(uncompared));
        mpi_r.push_back(time(mpi));
      }
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      const double ferry_s = median(ferry_r), uncompared_s = median(uncompared_r),
                   mpi_s = median(mpi_r);
      if (me == 0)
        fmt::print("{:>10} {:>10.1f} {:>10.2f} {:>12.1f} {:>10.1f} {:>10.2f} {:>7.2f} {:>7.2f}\n",
                   bytes, ferry_s * 1e6, bus * double(bytes) / ferry_s / 1e9, uncompared_s * 1e6,
                   mpi_s * 1e6, bus * double(bytes) / mpi_s / 1e9, mpi_s / ferry_s,
                   mpi_s / uncompared_s);
    }
    dist::shutdown();
    return 0;
  } catch (const ferry::Error& e) {
    fmt::print(stderr, "ferry-bench-allreduce: {}\n", e.what());
    return 1;
  }
}
