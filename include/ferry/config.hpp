// ferry/config.hpp — compiler glue shared by host and device code.
#pragma once

// Functions marked FERRY_HD compile for the host and, under nvcc, for the GPU
// too: the math of an op lives once and the CPU tests cover it.
#if defined(__CUDACC__)
#define FERRY_HD __host__ __device__ inline
#else
#define FERRY_HD inline
#endif

#if defined(_WIN32)
#define FERRY_EXPORT __declspec(dllexport)
#else
#define FERRY_EXPORT __attribute__((visibility("default")))
#endif
