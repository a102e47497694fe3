// runtime/cpu/cpu_lane_sums.hpp — sums over a run in independent lanes, the CPU's
// reductions inside a kernel (batch_norm's moments, layer_norm's row statistics).
// Internal to the CPU backend.
//
// Note [Lane sums]
// One running sum is a chain of dependent adds: the adder's latency, not its width, sets its
// speed, and the compiler may not reorder it into vectors (that changes the rounding).
// lane_sums keeps, for each of K sums, one accumulator of type A per lane (64 bytes of lanes:
// 16 floats or 8 doubles, which the compiler keeps in vector registers) and adds the lanes
// into double every kLaneBlock elements. A float accumulator so sums at most kLaneBlock /
// 16 terms before its value goes to double: the float speed of PyTorch's CPU norms, with an
// error that does not grow with the run. An A of double sums in double throughout.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

namespace ferry::cpu {

inline constexpr std::int64_t kLaneBlock = 512;

// Σ_i term(i)[k] for i in [0, n), each k: term(i) gives element i's K terms as
// std::array<A, K>. term is called once per i, in blocks of increasing i, so it may also
// write element i's results.
template <typename A, std::size_t K, typename Term>
inline std::array<double, K> lane_sums(std::int64_t n, const Term& term) {
  constexpr int kLanes = int(64 / sizeof(A));
  std::array<double, K> out{};
  for (std::int64_t b0 = 0; b0 < n; b0 += kLaneBlock) {
    const std::int64_t b1 = std::min(n, b0 + kLaneBlock);
    A acc[K][kLanes] = {};
    std::int64_t i = b0;
    for (; i + kLanes <= b1; i += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        const std::array<A, K> t = term(i + l);
        for (std::size_t k = 0; k < K; ++k) acc[k][l] += t[k];
      }
    for (; i < b1; ++i) {
      const std::array<A, K> t = term(i);
      for (std::size_t k = 0; k < K; ++k) acc[k][0] += t[k];
    }
    for (std::size_t k = 0; k < K; ++k)
      for (int l = 0; l < kLanes; ++l) out[k] += double(acc[k][l]);
  }
  return out;
}

}  // namespace ferry::cpu
