// benchmarks/bench_cudnn.cpp — the baseline of bench_conv.cpp's cuda:0 rows: cuDNN called
// directly on raw cudaMalloc memory, as an application would call it (f32 NCHW, no TF32,
// the algorithm cuDNN's heuristics rank first with at most 1 GiB of workspace, as PyTorch
// picks by default). The library is opened through the loader the CUDA backend uses
// (cuda/cuda_cudnn.hpp); everything else here is the application's own.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "bench_conv.hpp"
#include "cuda_cudnn.hpp"

namespace bench::conv {

#ifndef FERRY_HAVE_CUDNN_HEADERS

void cudnn_conv(const ConvCase&, bool, bool) {
  throw std::runtime_error(ferry::cuda::cudnn::status());
}

#else

namespace {

using ferry::cuda::cudnn::api;

void ok(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error(fmt::format("{}: {}", what, api().cudnnGetErrorString(s)));
}
void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

struct Device {
  void* p = nullptr;
  explicit Device(std::size_t floats) {
    ok(cudaMalloc(&p, floats * sizeof(float)), "cudaMalloc");
    std::vector<float> host(floats);
    std::mt19937 gen(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (float& v : host) v = nd(gen);
    ok(cudaMemcpy(p, host.data(), floats * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  ~Device() { cudaFree(p); }
};

// One case's buffers, descriptors and algorithms, made on its first call.
struct Prepared {
  cudnnHandle_t h = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::unique_ptr<Device> xb, wb, yb, gxb, gwb, work;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t data{};
  cudnnConvolutionBwdFilterAlgo_t filter{};
  std::size_t work_bytes = 0;
};

constexpr std::size_t kMaxWorkspace = std::size_t(1) << 30;
template <typename Perf> Perf pick(const Perf* perf, int n) {
  for (int i = 0; i < n; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace &&
        (perf[i].mathType == CUDNN_DEFAULT_MATH || perf[i].mathType == CUDNN_FMA_MATH))
      return perf[i];
  throw std::runtime_error("cuDNN ranked no usable algorithm");
}

cudnnTensorDescriptor_t tensor(int n, int c, int h, int w) {
  cudnnTensorDescriptor_t d;
  ok(api().cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor");
  const int dims[4] = {n, c, h, w}, strides[4] = {c * h * w, h * w, w, 1};
  ok(api().cudnnSetTensorNdDescriptor(d, CUDNN_DATA_FLOAT, 4, dims, strides),
     "cudnnSetTensorNdDescriptor");
  return d;
}

Prepared& prepare(const ConvCase& c, bool quick) {
  static std::map<std::string, Prepared> all;
  auto [it, fresh] = all.try_emplace(c.name);
  Prepared& p = it->second;
  if (!fresh) return p;
  if (!api().ok) throw std::runtime_error(api().status);
  const int n = int(batch(quick)), h = int(size(c, quick)), o = int(out_size(c, quick));
  const int C = int(c.c), OC = int(c.oc), k = int(c.k);
  ok(api().cudnnCreate(&p.h), "cudnnCreate");
  p.x = tensor(n, C, h, h);
  p.y = tensor(n, OC, o, o);
  ok(api().cudnnCreateFilterDescriptor(&p.w), "cudnnCreateFilterDescriptor");
  const int wd[4] = {OC, C, k, k};
  ok(api().cudnnSetFilterNdDescriptor(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, wd),
     "cudnnSetFilterNdDescriptor");
  ok(api().cudnnCreateConvolutionDescriptor(&p.conv), "cudnnCreateConvolutionDescriptor");
  const int pad[2] = {int(c.pad), int(c.pad)}, stride[2] = {int(c.stride), int(c.stride)},
            dil[2] = {1, 1};
  ok(api().cudnnSetConvolutionNdDescriptor(p.conv, 2, pad, stride, dil, CUDNN_CROSS_CORRELATION,
                                           CUDNN_DATA_FLOAT),
     "cudnnSetConvolutionNdDescriptor");
  ok(api().cudnnSetConvolutionMathType(p.conv, CUDNN_FMA_MATH), "cudnnSetConvolutionMathType");
  int got = 0;
  cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  ok(api().cudnnGetConvolutionForwardAlgorithm_v7(p.h, p.x, p.w, p.conv, p.y,
                                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fp),
     "cudnnGetConvolutionForwardAlgorithm_v7");
  const auto f = pick(fp, got);
  cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  ok(api().cudnnGetConvolutionBackwardDataAlgorithm_v7(
         p.h, p.w, p.y, p.conv, p.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, dp),
     "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  const auto d = pick(dp, got);
  cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  ok(api().cudnnGetConvolutionBackwardFilterAlgorithm_v7(
         p.h, p.x, p.y, p.conv, p.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, wp),
     "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  const auto w = pick(wp, got);
  p.fwd = f.algo, p.data = d.algo, p.filter = w.algo;
  p.work_bytes = std::max<std::size_t>({f.memory, d.memory, w.memory});
  const std::size_t xs = std::size_t(n) * C * h * h, ys = std::size_t(n) * OC * o * o,
                    ws = std::size_t(OC) * C * k * k;
  p.xb = std::make_unique<Device>(xs);
  p.gxb = std::make_unique<Device>(xs);
  p.wb = std::make_unique<Device>(ws);
  p.gwb = std::make_unique<Device>(ws);
  p.yb = std::make_unique<Device>(ys);
  p.work = std::make_unique<Device>(p.work_bytes / sizeof(float) + 1);
  return p;
}

}  // namespace

void cudnn_conv(const ConvCase& c, bool quick, bool backward) {
  Prepared& p = prepare(c, quick);
  const float one = 1, zero = 0;
  ok(api().cudnnConvolutionForward(p.h, &one, p.x, p.xb->p, p.w, p.wb->p, p.conv, p.fwd, p.work->p,
                                   p.work_bytes, &zero, p.y, p.yb->p),
     "cudnnConvolutionForward");
  if (backward) {
    // The output's gradient is the output itself: the same bytes as ones would move.
    ok(api().cudnnConvolutionBackwardData(p.h, &one, p.w, p.wb->p, p.y, p.yb->p, p.conv, p.data,
                                          p.work->p, p.work_bytes, &zero, p.x, p.gxb->p),
       "cudnnConvolutionBackwardData");
    ok(api().cudnnConvolutionBackwardFilter(p.h, &one, p.x, p.xb->p, p.y, p.yb->p, p.conv, p.filter,
                                            p.work->p, p.work_bytes, &zero, p.w, p.gwb->p),
       "cudnnConvolutionBackwardFilter");
  }
  ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

#endif

}  // namespace bench::conv
