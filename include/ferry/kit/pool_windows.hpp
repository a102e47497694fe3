// include/ferry/kit/pool_windows.hpp — where a pooling window lies along one dim, and which
// windows cover an input position: PyTorch's rules, written once for the CPU kernels, the
// core's composition and the Vulkan shader (shaders/pool.comp includes this file).
//
// Note [Code shared with the shaders]
// This file is written in the subset that C++ and GLSL read alike: functions of integers and
// bools, ternaries for min and max, no library calls, no names GLSL reserves (in, out). In C++ its
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

// The input positions window o reads along a dim of `extent` positions (kernel, stride and
// padding before it), dilation 1: [pool_window_first, pool_window_end), clipped to the input.
FERRY_POOL_FN pool_int pool_window_first(pool_int o, pool_int stride, pool_int padding) {
  return o * stride - padding > 0 ? o * stride - padding : 0;
}
FERRY_POOL_FN pool_int pool_window_end(pool_int o, pool_int extent, pool_int kernel,
                                       pool_int stride, pool_int padding) {
  return o * stride - padding + kernel < extent ? o * stride - padding + kernel : extent;
}

// The number of positions average pooling's window o counts along that dim (PyTorch's
// avg_pool2d): the window clipped to the padded input with count_include_pad, else to the
// input.
FERRY_POOL_FN pool_int avg_pool_window_count(pool_int o, pool_int extent, pool_int kernel,
                                             pool_int stride, pool_int padding,
                                             bool count_include_pad) {
  // with the padding: min(kernel, what is left of the padded input from the window's start)
  return count_include_pad
             ? (kernel < extent + 2 * padding - o * stride ? kernel
                                                           : extent + 2 * padding - o * stride)
             : pool_window_end(o, extent, kernel, stride, padding) -
                   pool_window_first(o, stride, padding);
}

// The windows that cover input position i along a dim of `windows` windows, each spanning `span`
// positions (the kernel, dilated): [pool_covering_first, pool_covering_end), in output order.
// With dilation, a window in the range may step over i.
FERRY_POOL_FN pool_int pool_covering_first(pool_int i, pool_int span, pool_int stride,
                                           pool_int padding) {
  return i + padding < span ? 0 : (i + padding - span) / stride + 1;
}
FERRY_POOL_FN pool_int pool_covering_end(pool_int i, pool_int windows, pool_int stride,
                                         pool_int padding) {
  return (i + padding) / stride + 1 < windows ? (i + padding) / stride + 1 : windows;
}

#ifdef __cplusplus
}  // namespace ferry
#endif
#undef FERRY_POOL_FN

#endif  // FERRY_KIT_POOL_WINDOWS_HPP
