// runtime/parallel.hpp — splitting a range of host work over OpenMP threads,
// for the core (host_memcpy) and the CPU backend's loops (cpu/cpu_loops.hpp)
// alike. Internal to the core.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace ferry::detail {

// Runs body(begin, end) over [0, total) split across threads when total >= grain.
template <typename Body>
void parallel_range(std::int64_t total, std::int64_t grain, const Body& body) {
  int threads = total >= grain ? omp_get_max_threads() : 1;
  threads = int(std::min<std::int64_t>(
      threads, std::max<std::int64_t>(1, total / std::max<std::int64_t>(grain / 4, 1))));
  if (threads <= 1) {
    body(std::int64_t(0), total);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    std::int64_t chunk = (total + nt - 1) / nt;
    std::int64_t b = std::min(total, t * chunk), e = std::min(total, b + chunk);
    if (b < e) body(b, e);
  }
}

}  // namespace ferry::detail
