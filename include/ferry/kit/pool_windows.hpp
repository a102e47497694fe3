// include/ferry/kit/pool_windows.hpp — where a pooling window lies along one dim, regular or
// adaptive, and which windows cover an input position: PyTorch's rules, written once for the CPU
// kernels, the core's composition and the Vulkan shader (shaders/pool.comp includes this file).
//
// Note [Code shared with the shaders]
// This file is written in the subset that C++ and GLSL read alike: structs of integers and
// bools, functions of them, ternaries for min and max, no library calls, no names GLSL reserves
// (in, out), and no struct built here (C++ braces one, GLSL calls a constructor). In C++ its
// type `pool_int` is std::int64_t and its functions constexpr in namespace ferry; in GLSL
// `pool_int` is int (the shader's sizes fit 32 bits: Note [Vulkan pooling]). A rule a kernel and a
// shader must agree on then has one home, where a copy in each language would drift apart unseen.
#ifndef FERRY_KIT_POOL_WINDOWS_HPP
#define FERRY_KIT_POOL_WINDOWS_HPP

#ifdef __cplusplus
#include <cstdint>
namespace ferry {
using pool_int = std::int64_t;
#define FERRY_POOL_FN inline constexpr
#else
#define pool_int int
#define FERRY_POOL_FN
#endif

// One spatial dim of a pooling call. A regular pool's window o has `kernel` taps `dilation`
// apart from o·stride - padding; an adaptive pool's (PyTorch's adaptive_avg_pool2d and
// adaptive_max_pool2d) reads [floor(o·extent / windows), ceil((o + 1)·extent / windows)), all
// inside the input and at least one wide: where the sizes do not divide, neighbours overlap by a
// position, and with more windows than positions several read one position.
struct PoolDim {
  pool_int extent;                   // the input's positions
  pool_int windows;                  // the output's
  pool_int kernel, stride, padding;  // a regular pool's (padding before); unused when adaptive
  pool_int dilation;                 // 1 when adaptive
  bool adaptive;
};

// Window o's taps: the first at pool_tap_start, then pool_tap_count of them `dilation` apart.
// A regular pool's taps outside [0, extent) lie in the padding and read nothing.
FERRY_POOL_FN pool_int pool_tap_start(PoolDim d, pool_int o) {
  return d.adaptive ? o * d.extent / d.windows : o * d.stride - d.padding;
}
FERRY_POOL_FN pool_int pool_tap_count(PoolDim d, pool_int o) {
  return d.adaptive ? ((o + 1) * d.extent + d.windows - 1) / d.windows - o * d.extent / d.windows
                    : d.kernel;
}

// The input positions window o reads without dilation: [pool_window_first, pool_window_end),
// clipped to the input.
FERRY_POOL_FN pool_int pool_window_first(PoolDim d, pool_int o) {
  return pool_tap_start(d, o) > 0 ? pool_tap_start(d, o) : 0;
}
FERRY_POOL_FN pool_int pool_window_end(PoolDim d, pool_int o) {
  return pool_tap_start(d, o) + pool_tap_count(d, o) < d.extent
             ? pool_tap_start(d, o) + pool_tap_count(d, o)
             : d.extent;
}

// The number of positions average pooling's window o counts along the dim (PyTorch's
// avg_pool2d): the window clipped to the padded input with count_include_pad, else to the
// input. An adaptive window lies inside the input.
FERRY_POOL_FN pool_int avg_pool_window_count(PoolDim d, pool_int o, bool count_include_pad) {
  // with the padding: min(kernel, what is left of the padded input from the window's start)
  return count_include_pad && !d.adaptive ? (d.kernel < d.extent + 2 * d.padding - o * d.stride
                                                 ? d.kernel
                                                 : d.extent + 2 * d.padding - o * d.stride)
                                          : pool_window_end(d, o) - pool_window_first(d, o);
}

// The windows whose span covers input position i: [pool_covering_first, pool_covering_end), in
// output order. With dilation, a window in the range may step over i. Adaptive: [floor(i·windows
// / extent), ceil((i + 1)·windows / extent)), as first(o) <= i ⇔ o < (i + 1)·windows / extent
// and end(o) > i ⇔ o + 1 > i·windows / extent.
FERRY_POOL_FN pool_int pool_covering_first(PoolDim d, pool_int i) {
  return d.adaptive ? i * d.windows / d.extent
         : i + d.padding < d.dilation * (d.kernel - 1) + 1
             ? 0
             : (i + d.padding - d.dilation * (d.kernel - 1) - 1) / d.stride + 1;
}
FERRY_POOL_FN pool_int pool_covering_end(PoolDim d, pool_int i) {
  return d.adaptive ? ((i + 1) * d.windows + d.extent - 1) / d.extent
         : (i + d.padding) / d.stride + 1 < d.windows ? (i + d.padding) / d.stride + 1
                                                      : d.windows;
}

#ifdef __cplusplus
}  // namespace ferry
#endif
#undef FERRY_POOL_FN

#endif  // FERRY_KIT_POOL_WINDOWS_HPP
