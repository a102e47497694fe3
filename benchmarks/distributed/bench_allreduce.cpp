// benchmarks/distributed/bench_allreduce.cpp — ferry-bench-allreduce, run under mpirun: the
// bus bandwidth of ferry's mpi process group's allreduce (sum, f32, a CPU tensor) beside
// MPI_Allreduce called directly on a host buffer of the same size, in the same processes, from
// 4 KiB to 256 MiB (16 MiB with --quick). Bus bandwidth is NCCL's measure: 2 (R - 1) / R times
// the bytes, per second, which is what each rank's links carry in a ring. ferry's figure
// includes what its group adds to the library call: the cross-rank check of each call (Note
// [Process groups]: one allgather of 32 bytes) and the hand-off to the group's thread. With
// --device DEV, ferry's tensor lives on DEV (vulkan:0, cuda:0) and its figure includes the
// staging through host memory (Note [Chunked staging]; FERRY_DISTRIBUTED_CHUNK=0 stages whole).
//   mpirun -np 2 ferry-bench-allreduce [--quick] [--device DEV]
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
  bool quick = false;
  std::string device = "cpu";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = argv[++i];
  }
  try {
    auto group = dist::init();  // MPI is initialised by the group's module; the baseline uses it
    const int R = group->size(), me = group->rank();
    const double bus = R > 1 ? 2.0 * (R - 1) / R : 1.0;
    if (me == 0)
      fmt::print(
          "allreduce, sum of f32 on {}, {} ranks; bus bandwidth = {:.2f} x bytes / time\n"
          "{:>10} {:>12} {:>12} {:>12} {:>12} {:>7}\n",
          device, R, bus, "bytes", "ferry us", "ferry GB/s", "MPI us", "MPI GB/s", "ratio");
    const std::size_t top = quick ? std::size_t(16) << 20 : std::size_t(256) << 20;
    for (std::size_t bytes = 4096; bytes <= top; bytes *= 4) {
      const std::int64_t n = std::int64_t(bytes / 4);
      const int iters = int(std::clamp<std::size_t>((std::size_t(256) << 20) / bytes, 3, 200));
      ferry::Tensor t = ferry::zeros({n}, {.device = ferry::Device(device)});  // sums stay finite
      std::vector<float> host(std::size_t(n), 0.0f);
      auto time = [&](auto&& call) {
        call();  // warm-up
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
      const double ferry_s = time([&] { group->allreduce(t); });
      // The group's thread is idle between its calls, so this thread may call MPI (the module
      // asked for MPI_THREAD_SERIALIZED).
      const double mpi_s = time([&] {
        MPI_Allreduce(MPI_IN_PLACE, host.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      });
      if (me == 0)
        fmt::print("{:>10} {:>12.1f} {:>12.2f} {:>12.1f} {:>12.2f} {:>7.2f}\n", bytes,
                   ferry_s * 1e6, bus * double(bytes) / ferry_s / 1e9, mpi_s * 1e6,
                   bus * double(bytes) / mpi_s / 1e9, mpi_s / ferry_s);
    }
    dist::shutdown();
    return 0;
  } catch (const ferry::Error& e) {
    fmt::print(stderr, "ferry-bench-allreduce: {}\n", e.what());
    return 1;
  }
}
