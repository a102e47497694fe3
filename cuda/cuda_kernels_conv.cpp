// cuda/cuda_kernels_conv.cpp — conv1d/2d/3d, conv_backward_input and conv_backward_weight on
// CUDA through cuDNN (the attributes are the CPU kernel's: docs/kernel-contract.md).
//
// Note [cuDNN convolutions]
// Each call describes its contiguous NC* tensors to cuDNN's convolution API (a 1-D
// convolution as a 2-D one of height 1; groups as cuDNN's group count) and runs the algorithm
// cuDNN's heuristics rank first among those that take the case with at most kMaxWorkspace of
// scratch, as PyTorch does by default (torch.backends.cudnn.benchmark off). The descriptors and
// that choice are kept per device and shape (a Plan): a model calls the same few shapes every
// step. f32 runs without TF32 (CUDNN_FMA_MATH, and only algorithms that keep it), so cuda:0
// gives the CPU's f32 results as ferry's cuBLAS matmul does; f16 and bf16 use the tensor cores
// and accumulate in f32; f64 computes in double.
// cuDNN pads both sides of a dim alike. Where the output's size says the high side takes
// more padding than the low (padding='same' with an even kernel), the input is copied into a
// zeroed, explicitly padded buffer first, and the input gradient is computed in that padded
// shape and its interior copied out (cudaMemcpy3DAsync, on the device's stream). The bias's
// gradient comes from the device's own sum kernel: cuDNN's BackwardBias takes no bf16.
// Where libcudnn.so.9 does not load, supports() says no for these ops and the front-end runs
// the composition (unfold and cuBLAS matmul) instead.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "cuda_conv_geometry.hpp"
#include "cuda_cudnn.hpp"
#include "cuda_error.hpp"
#include "cuda_kernels.hpp"
#include "ferry/kit/conv_ops.hpp"

namespace ferry::cuda {

#ifndef FERRY_HAVE_CUDNN_HEADERS

void add_conv_kernels(KernelTable& table) {
  for (OpId op : kConvKernelOps)
    table.emplace_back(op, [](DeviceImpl&, const OpCall& c) {
      throw UnsupportedError(fmt::format("{}: {}", c.name(), cudnn::status()));
    });
}

#else

namespace {

using cudnn::api;

constexpr std::size_t kMaxWorkspace = std::size_t(1) << 30;

// BackendError naming the device and the call, for a failed cuDNN call.
void check(const CudaDevice& dev, cudnnStatus_t st, const char* call) {
  if (st == CUDNN_STATUS_SUCCESS) return;
  const char* name = api().cudnnGetErrorString(st);
  throw_error(dev.device().str(), call, name ? name : "CUDNN_STATUS_UNKNOWN",
              fmt::format("cuDNN status {}", int(st)));
}

// A device's cuDNN handle, on its stream, made on first use, and the mutex its calls hold
// until they are enqueued: a handle is not to be used by two threads at once (as cuBLAS's).
struct Handle {
  std::mutex mutex;
  cudnnHandle_t h = nullptr;  // under mutex
};

Handle& device_handle(const CudaDevice& dev) {
  static std::mutex mutex;
  static auto* all = new std::map<int, std::unique_ptr<Handle>>;  // lives as the devices do
  std::lock_guard<std::mutex> lock(mutex);
  auto& h = (*all)[dev.ordinal()];
  if (!h) h = std::make_unique<Handle>();
  return *h;
}

// ---- descriptors, destroyed with their scope ----
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc(const CudaDevice& dev, cudnnDataType_t dt, const std::vector<int>& dims) {
    check(dev, api().cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor");
    std::vector<int> strides(dims.size(), 1);
    for (std::size_t i = dims.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * dims[i];
    check(dev,
          api().cudnnSetTensorNdDescriptor(d, dt, int(dims.size()), dims.data(), strides.data()),
          "cudnnSetTensorNdDescriptor");
  }
  ~TensorDesc() { api().cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};

struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc(const CudaDevice& dev, cudnnDataType_t dt, const std::vector<int>& dims) {
    check(dev, api().cudnnCreateFilterDescriptor(&d), "cudnnCreateFilterDescriptor");
    check(dev,
          api().cudnnSetFilterNdDescriptor(d, dt, CUDNN_TENSOR_NCHW, int(dims.size()), dims.data()),
          "cudnnSetFilterNdDescriptor");
  }
  ~FilterDesc() { api().cudnnDestroyFilterDescriptor(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc(const CudaDevice& dev, int nd, const int* pad, const int* stride, const int* dil,
           int groups, cudnnDataType_t data, cudnnDataType_t compute) {
    check(dev, api().cudnnCreateConvolutionDescriptor(&d), "cudnnCreateConvolutionDescriptor");
    check(dev,
          api().cudnnSetConvolutionNdDescriptor(d, nd, pad, stride, dil, CUDNN_CROSS_CORRELATION,
                                                compute),
          "cudnnSetConvolutionNdDescriptor");
    check(dev, api().cudnnSetConvolutionGroupCount(d, groups), "cudnnSetConvolutionGroupCount");
    // The heuristics rank the algorithms under this math type: no TF32 for f32.
    const cudnnMathType_t math = compute == CUDNN_DATA_DOUBLE ? CUDNN_DEFAULT_MATH
                                 : data == CUDNN_DATA_FLOAT   ? CUDNN_FMA_MATH
                                                              : CUDNN_TENSOR_OP_MATH;
    check(dev, api().cudnnSetConvolutionMathType(d, math), "cudnnSetConvolutionMathType");
  }
  ~ConvDesc() { api().cudnnDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

cudnnDataType_t data_type(std::string_view op, DType dt) {
  switch (dt) {
    case DType::f32:
      return CUDNN_DATA_FLOAT;
    case DType::f16:
      return CUDNN_DATA_HALF;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    case DType::f64:
      return CUDNN_DATA_DOUBLE;
    default:
      unsupported_dtype(std::string(op).c_str(), dt);
  }
}

// Copies between a contiguous [N*C, in...] tensor and the interior of one of the padded sizes
// (at the low padding), on the device's stream: into the padded one (`into_padded`) or out of it.
void copy_interior(CudaDevice& dev, const ConvGeometry& g, std::size_t elt, void* padded,
                   void* plain, bool into_padded) {
  const std::size_t planes = std::size_t(g.N) * std::size_t(g.C);
  // Three spatial dims as [depth, height, width]; 2-D has depth 1, so its planes are the depth.
  const bool three = g.nd == 3;
  const std::size_t d = three ? std::size_t(g.in[0]) : 1, h = std::size_t(g.in[g.nd - 2]),
                    w = std::size_t(g.in[g.nd - 1]);
  const std::size_t pd = three ? std::size_t(g.padded[0]) : 1, ph = std::size_t(g.padded[g.nd - 2]),
                    pw = std::size_t(g.padded[g.nd - 1]);
  const std::size_t od = three ? std::size_t(g.lo[0]) : 0, oh = std::size_t(g.lo[g.nd - 2]),
                    ow = std::size_t(g.lo[g.nd - 1]);
  const std::size_t calls = three ? planes : 1;
  for (std::size_t p = 0; p < calls; ++p) {
    cudaMemcpy3DParms m{};
    char* small = static_cast<char*>(plain) + p * d * h * w * elt;
    char* big = static_cast<char*>(padded) + p * pd * ph * pw * elt;
    const cudaPitchedPtr sp{small, w * elt, w, h}, bp{big, pw * elt, pw, ph};
    const cudaPos inner{ow * elt, oh, od};
    if (into_padded) {
      m.srcPtr = sp;
      m.dstPtr = bp;
      m.dstPos = inner;
    } else {
      m.srcPtr = bp;
      m.srcPos = inner;
      m.dstPtr = sp;
    }
    m.extent = cudaExtent{w * elt, h, three ? d : planes};
    m.kind = cudaMemcpyDeviceToDevice;
    dev.check(cudaMemcpy3DAsync(&m, dev.stream()), "cudaMemcpy3DAsync");
  }
}

// The scaling factors cuDNN reads: double for double data, float otherwise.
struct Scale {
  float f;
  double d;
  const void* of(DType dt) const { return dt == DType::f64 ? static_cast<const void*>(&d) : &f; }
};
constexpr Scale kOne{1.0f, 1.0}, kZero{0.0f, 0.0};

// An algorithm cuDNN ranks first among those that fit, kept per device and shape.
struct Choice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::size_t workspace = 0;
};

enum class Pass { forward, backward_data, backward_filter };

// Whether a ranked result may run: it works, fits kMaxWorkspace, and keeps f32 off TF32.
template <typename Perf> bool usable(const Perf& p, DType dt) {
  if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxWorkspace) return false;
  return dt != DType::f32 || p.mathType == CUDNN_DEFAULT_MATH || p.mathType == CUDNN_FMA_MATH;
}

// The first usable result of cuDNN's ranking, asked by `rank(requested, &returned, perf)`.
template <typename Perf, int kCount, typename Rank>
Choice first_usable(const CudaDevice& dev, DType dt, const char* call, Rank rank) {
  Perf perf[kCount];
  int n = 0;
  check(dev, rank(kCount, &n, perf), call);
  for (int i = 0; i < n; ++i)
    if (usable(perf[i], dt))
      return {int(perf[i].algo), perf[i].mathType, std::size_t(perf[i].memory)};
  // Algorithm 0 (implicit GEMM) takes every case with no scratch.
  return {0, CUDNN_DEFAULT_MATH, 0};
}

Choice choose(CudaDevice& dev, cudnnHandle_t h, Pass pass, DType dt, const TensorDesc& x,
              const FilterDesc& w, const ConvDesc& conv, const TensorDesc& y) {
  Choice c;
  switch (pass) {
    case Pass::forward:
      c = first_usable<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
          dev, dt, "cudnnGetConvolutionForwardAlgorithm_v7", [&](int k, int* n, auto* perf) {
            return api().cudnnGetConvolutionForwardAlgorithm_v7(h, x.d, w.d, conv.d, y.d, k, n,
                                                                perf);
          });
      break;
    case Pass::backward_data:
      c = first_usable<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
          dev, dt, "cudnnGetConvolutionBackwardDataAlgorithm_v7", [&](int k, int* n, auto* perf) {
            return api().cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w.d, y.d, conv.d, x.d, k, n,
                                                                     perf);
          });
      break;
    case Pass::backward_filter:
      c = first_usable<cudnnConvolutionBwdFilterAlgoPerf_t,
                       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
          dev, dt, "cudnnGetConvolutionBackwardFilterAlgorithm_v7", [&](int k, int* n, auto* perf) {
            return api().cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x.d, y.d, conv.d, w.d, k,
                                                                       n, perf);
          });
      break;
  }
  // f32 keeps to FMA kernels whatever the algorithm's own listing (CUDNN_DEFAULT_MATH would
  // let cuDNN use TF32).
  if (dt == DType::f32) c.math = CUDNN_FMA_MATH;
  return c;
}

// A shape's descriptors and algorithm, made on its first call on a device and kept: a model
// calls the same few shapes every step, and descriptors are read-only once set.
struct Plan {
  TensorDesc x, y, bias;
  FilterDesc w;
  ConvDesc conv;
  Choice choice;
  Plan(CudaDevice& dev, cudnnHandle_t h, Pass pass, DType dt, cudnnDataType_t type,
       const ConvGeometry& g)
      : x(dev, type, g.x_dims()),
        y(dev, type, g.y_dims()),
        bias(dev, type, g.bias_dims()),
        w(dev, type, g.w_dims()),
        conv(dev, g.nd, g.pad.data(), g.stride.data(), g.dil.data(), g.G, type,
             dt == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT),
        choice(choose(dev, h, pass, dt, x, w, conv, y)) {
    check(dev, api().cudnnSetConvolutionMathType(conv.d, choice.math),
          "cudnnSetConvolutionMathType");
  }
};

const Plan& plan(CudaDevice& dev, cudnnHandle_t h, Pass pass, DType dt, cudnnDataType_t type,
                 const ConvGeometry& g) {
  static std::mutex mutex;  // guards `plans` (each device's calls hold only their own handle)
  static auto* plans = new std::map<std::string, std::unique_ptr<Plan>>;  // lives as devices do
  const std::string key =
      fmt::format("{}|{}|{}|{},{},{},{}|{}|{}|{}|{}|{}|{}", dev.ordinal(), int(pass), int(dt), g.N,
                  g.C, g.OC, g.G, fmt::join(g.explicit_pad ? g.padded : g.in, ","),
                  fmt::join(g.k, ","), fmt::join(g.out, ","), fmt::join(g.stride, ","),
                  fmt::join(g.pad, ","), fmt::join(g.dil, ","));
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = plans->find(key); it != plans->end()) return *it->second;
  }
  auto made = std::make_unique<Plan>(dev, h, pass, dt, type, g);
  std::lock_guard<std::mutex> lock(mutex);
  return *plans->emplace(key, std::move(made)).first->second;  // a racing thread's, if first
}

// The bias gradient, gy summed over the batch and every position, by the device's own sum
// kernel (cuDNN's cudnnConvolutionBackwardBias takes no bf16): gy [N, OC, L...] seen as
// [OC | N, L] with the last two dims reduced.
void bias_gradient(DeviceImpl& d, const ConvGeometry& g, const TensorArg& gy, const TensorArg& gb) {
  std::int64_t L = 1;
  for (int i = 0; i < g.nd; ++i) L *= g.out[std::size_t(i)];
  TensorArg view{gy.buffer, gy.offset, {g.OC, g.N, L}, {L, std::int64_t(g.OC) * L, 1}, gy.dtype};
  const KernelFn* sum = d.find_kernel(OpId::sum);
  if (!sum) throw UnsupportedError("conv_backward_weight: the device has no sum kernel");
  (*sum)(d, OpCall{OpId::sum, {view}, {gb}, Attrs{{"reduce_ndim", std::int64_t(2)}}});
}

std::unique_ptr<Buffer> scratch(CudaDevice& dev, std::size_t bytes) {
  return bytes ? dev.allocate(bytes) : nullptr;
}
void* ptr(const std::unique_ptr<Buffer>& b) {
  return b ? static_cast<CudaBuffer*>(b.get())->ptr() : nullptr;
}

void run(DeviceImpl& d, const OpCall& c) {
  CudaDevice& dev = cuda_device(d);
  const bool fwd = c.op != OpId::conv_backward_input && c.op != OpId::conv_backward_weight;
  // x-, w- and y-shaped operands of each pass (the kernels' argument orders).
  const TensorArg& xs = c.op == OpId::conv_backward_input ? c.outputs.at(0) : c.inputs.at(0);
  const TensorArg& ws = c.op == OpId::conv_backward_weight ? c.outputs.at(0) : c.inputs.at(1);
  const TensorArg& ys =
      fwd ? c.outputs.at(0) : (c.op == OpId::conv_backward_input ? c.inputs.at(0) : c.inputs.at(1));
  const DType dt = ws.dtype;
  for (const auto* list : {&c.inputs, &c.outputs})
    for (const TensorArg& t : *list)
      if (t.dtype != dt)
        throw DTypeError(fmt::format("{}: the cuda kernel takes one dtype", c.name()));
  const cudnnDataType_t type = data_type(c.name(), dt);
  const ConvGeometry g = conv_geometry(c, xs, ws, ys);
  const std::size_t elt = dtype_size(dt);
  dev.make_current();
  if (c.op == OpId::conv_backward_weight && g.N == 0) {  // a sum of nothing
    for (const TensorArg& t : c.outputs)
      dev.check(cudaMemsetAsync(data_ptr(t), 0, std::size_t(t.numel()) * elt, dev.stream()),
                "cudaMemsetAsync");
    return;
  }
  if (ys.numel() == 0 || xs.numel() == 0) return;

  Handle& handle = device_handle(dev);
  const std::lock_guard<std::mutex> lock(handle.mutex);
  if (!handle.h) {
    cudnnHandle_t made = nullptr;
    check(dev, api().cudnnCreate(&made), "cudnnCreate");
    handle.h = made;
    check(dev, api().cudnnSetStream(made, dev.stream()), "cudnnSetStream");
  }
  cudnnHandle_t h = handle.h;
  const Pass pass =
      fwd ? Pass::forward
          : (c.op == OpId::conv_backward_input ? Pass::backward_data : Pass::backward_filter);
  const Plan& pl = plan(dev, h, pass, dt, type, g);
  const Choice& ch = pl.choice;
  const TensorDesc &x = pl.x, &y = pl.y;
  const FilterDesc& w = pl.w;
  const ConvDesc& conv = pl.conv;
  const std::unique_ptr<Buffer> work = scratch(dev, ch.workspace);
  // The explicitly padded input (or input gradient), where the padding is uneven.
  std::unique_ptr<Buffer> padded;
  if (g.explicit_pad) {
    std::size_t count = std::size_t(g.N) * std::size_t(g.C);
    for (int i = 0; i < g.nd; ++i) count *= std::size_t(g.padded[std::size_t(i)]);
    padded = dev.allocate(count * elt);
    if (pass != Pass::backward_data) {
      dev.check(cudaMemsetAsync(ptr(padded), 0, count * elt, dev.stream()), "cudaMemsetAsync");
      copy_interior(dev, g, elt, ptr(padded), data_ptr(xs), true);
    }
  }
  void* xp = g.explicit_pad ? ptr(padded) : data_ptr(xs);
  switch (pass) {
    case Pass::forward:
      check(dev,
            api().cudnnConvolutionForward(h, kOne.of(dt), x.d, xp, w.d, data_ptr(ws), conv.d,
                                          cudnnConvolutionFwdAlgo_t(ch.algo), ptr(work),
                                          ch.workspace, kZero.of(dt), y.d, data_ptr(ys)),
            "cudnnConvolutionForward");
      if (c.inputs.size() > 2)
        check(dev,
              api().cudnnAddTensor(h, kOne.of(dt), pl.bias.d, data_ptr(c.inputs[2]), kOne.of(dt),
                                   y.d, data_ptr(ys)),
              "cudnnAddTensor");
      break;
    case Pass::backward_data:
      check(dev,
            api().cudnnConvolutionBackwardData(h, kOne.of(dt), w.d, data_ptr(ws), y.d, data_ptr(ys),
                                               conv.d, cudnnConvolutionBwdDataAlgo_t(ch.algo),
                                               ptr(work), ch.workspace, kZero.of(dt), x.d, xp),
            "cudnnConvolutionBackwardData");
      if (g.explicit_pad) copy_interior(dev, g, elt, xp, data_ptr(xs), false);
      break;
    case Pass::backward_filter:
      check(
          dev,
          api().cudnnConvolutionBackwardFilter(h, kOne.of(dt), x.d, xp, y.d, data_ptr(ys), conv.d,
                                               cudnnConvolutionBwdFilterAlgo_t(ch.algo), ptr(work),
                                               ch.workspace, kZero.of(dt), w.d, data_ptr(ws)),
          "cudnnConvolutionBackwardFilter");
      if (c.attrs.b("has_bias")) bias_gradient(d, g, ys, c.outputs.at(1));
      break;
  }
}

}  // namespace

void add_conv_kernels(KernelTable& table) {
  for (OpId op : kConvKernelOps) table.emplace_back(op, run);
}

#endif

}  // namespace ferry::cuda
