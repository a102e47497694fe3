// runtime/vulkan/vk_gemm_tiles.hpp — the tiles of shaders/gemm_tile.glsl, the GEMM that
// matmul (vk_kernels_linalg.cpp) and convolution (vk_kernels_conv.cpp) share, and how a call
// picks one from the device's limits and the product's size.
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <string_view>

#include "ferry/error.hpp"
#include "vulkan/vk_kernels.hpp"

namespace ferry::vulkan {

// A workgroup's BM x BN tile of C, BK-deep shared slices, TM x TN accumulators per thread.
struct Tile {
  std::uint32_t bm, bn, bk, tm, tn;
  std::uint32_t threads() const { return (bm / tm) * (bn / tn); }
  // Two buffers of BK rows of A and of B, each row padded by 4 elements (the shader's sA, sB),
  // of floats or (the f64 module) doubles.
  std::uint32_t shared_bytes(std::uint32_t element_bytes) const {
    return 2 * bk * (bm + 4 + bn + 4) * element_bytes;
  }
  // The loop iterations one invocation of gemm_tile.glsl counts per BK-deep slice, every loop
  // counted (Note [Loop budget] in vk_kernels.hpp): its own trip, each thread's loads and
  // stagings of the next slice, and per k the reads of its rows and columns and its TM x TN/4
  // products. (llvmpipe unrolls all but the slice loop; the count does not rely on it.)
  std::uint64_t loop_iterations_per_slice() const {
    return 1 + 2 * loads_per_slice() +
           std::uint64_t(bk) * (1 + tm / 4 + tn / 4 + tm * (1 + tn / 4));
  }
  // The runs of 4 elements of A and of B each thread loads per slice (LOADS_A + LOADS_B).
  std::uint64_t loads_per_slice() const {
    return (bm * bk / 4 + threads() - 1) / threads() + (bn * bk / 4 + threads() - 1) / threads();
  }
};

// Largest first. 128 x 128 with 8 x 8 per thread is the classic shape for f32 on GPUs: 64 FMAs
// per 16 shared-memory floats read, 256 threads. Each is used when the product gives at least
// `min_tiles` workgroups (so that a big GPU has work for all its cores) and the device
// allows its workgroup size and shared memory; the last that fits is the fallback.
struct TileChoice {
  Tile tile;
  std::uint64_t min_tiles;
};
inline constexpr std::array<TileChoice, 4> kTiles = {{
    {{128, 128, 8, 8, 8}, 192},
    {{64, 64, 8, 4, 4}, 48},
    {{32, 32, 8, 4, 4}, 0},
    {{16, 16, 8, 4, 4}, 0},  // for devices with tiny workgroups
}};

inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// The tile for nb products of M x N, for op `op` (its name in the error).
// A tile is passed over where a smaller one the device allows covers C in as many tiles along
// both dims: a batch of 4 x 4 products took 128 x 128 tiles of 256 threads each, 4,096
// workgroups of padding, 1 s on lavapipe where 16 x 16 tiles take a few ms.
inline Tile choose_tile(std::string_view op, const KernelLimits& lim, std::uint64_t nb,
                        std::uint64_t M, std::uint64_t N, std::uint32_t element_bytes) {
  const auto allowed = [&](const Tile& t) {
    return t.threads() <= lim.max_workgroup_invocations &&
           t.shared_bytes(element_bytes) <= lim.shared_memory;
  };
  const auto covers_as_well = [&](const Tile& small, const Tile& t) {
    return ceil_div(M, small.bm) == ceil_div(M, t.bm) && ceil_div(N, small.bn) == ceil_div(N, t.bn);
  };
  const Tile* fallback = nullptr;
  for (std::size_t i = 0; i < kTiles.size(); ++i) {
    const Tile& t = kTiles[i].tile;
    if (!allowed(t)) continue;
    fallback = &t;
    bool oversized = false;
    for (std::size_t j = i + 1; j < kTiles.size() && !oversized; ++j)
      oversized = allowed(kTiles[j].tile) && covers_as_well(kTiles[j].tile, t);
    if (oversized) continue;
    if (nb * ceil_div(M, t.bm) * ceil_div(N, t.bn) >= kTiles[i].min_tiles) return t;
  }
  if (!fallback)
    throw UnsupportedError(fmt::format(
        "{}: the device allows workgroups of {} invocations and {} bytes of shared memory, "
        "fewer than the smallest GEMM tile needs",
        op, lim.max_workgroup_invocations, lim.shared_memory));
  return *fallback;
}

}  // namespace ferry::vulkan
