// cuda/cuda_cudnn.hpp — cuDNN, loaded at run time, for the CUDA backend's convolution
// kernels (cuda_kernels_conv.cpp, Note [cuDNN convolutions]). Built where cudnn.h was found
// with the toolkit; libcudnn.so.9 is opened on first use, so a machine without it runs the
// convolutions through their composition (ferry's unfold and cuBLAS matmul) and status() says
// why. FERRY_CUDNN=0 turns it off (to measure or test the other path). The loader needs
// nothing else of the backend, so ferry-bench's cuDNN baseline opens the library through it
// too.
#pragma once

#include <string>

#include "ferry/dtype.hpp"

#if __has_include(<cudnn.h>)
#include <cudnn.h>
#define FERRY_HAVE_CUDNN_HEADERS 1
#endif

namespace ferry::cuda::cudnn {

// "cuDNN 9.19.0" where it loaded, else "cuDNN off: <why>".
std::string status();

// Whether the convolution kernels run in `dtype` on a GPU of compute capability `cc` (80 for
// 8.0): cuDNN loaded, and bf16 only from Ampere on, where cuDNN has bf16 convolutions.
bool takes(int cc, DType dtype);

#ifdef FERRY_HAVE_CUDNN_HEADERS

// The functions ferry calls, looked up by name in libcudnn.so.9 (cuDNN 9's front library,
// which exports the whole C API and loads its sub-libraries itself).
#define FERRY_CUDNN_FUNCTIONS(X)                   \
  X(cudnnGetVersion)                               \
  X(cudnnGetErrorString)                           \
  X(cudnnCreate)                                   \
  X(cudnnSetStream)                                \
  X(cudnnCreateTensorDescriptor)                   \
  X(cudnnSetTensorNdDescriptor)                    \
  X(cudnnDestroyTensorDescriptor)                  \
  X(cudnnCreateFilterDescriptor)                   \
  X(cudnnSetFilterNdDescriptor)                    \
  X(cudnnDestroyFilterDescriptor)                  \
  X(cudnnCreateConvolutionDescriptor)              \
  X(cudnnSetConvolutionNdDescriptor)               \
  X(cudnnSetConvolutionGroupCount)                 \
  X(cudnnSetConvolutionMathType)                   \
  X(cudnnDestroyConvolutionDescriptor)             \
  X(cudnnGetConvolutionForwardAlgorithm_v7)        \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)   \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) \
  X(cudnnConvolutionForward)                       \
  X(cudnnConvolutionBackwardData)                  \
  X(cudnnConvolutionBackwardFilter)                \
  X(cudnnAddTensor)

struct Api {
#define FERRY_CUDNN_FN(name) decltype(&::name) name = nullptr;
  FERRY_CUDNN_FUNCTIONS(FERRY_CUDNN_FN)
#undef FERRY_CUDNN_FN
  std::string status;
  bool ok = false;
};

// The loaded library (ok false, with the reason in status, where it did not load).
const Api& api();

#endif

}  // namespace ferry::cuda::cudnn
