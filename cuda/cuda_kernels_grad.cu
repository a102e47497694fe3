// cuda/cuda_kernels_grad.cu — the fused activation derivatives on CUDA
// (docs/kernel-contract.md, "Activation backward"): out = f(grad, z) element by
// element, f32, f16, bf16 and f64 (in double), with the functors of
// include/ferry/kit/math/elementwise_ops.hpp the CPU runs
// (runtime/cpu/cpu_kernels_grad.cpp). index_add and scatter_add,
// the other training kernels there, are in cuda_kernels_index.cu.
#include "cuda_elementwise.cuh"

namespace ferry::cuda {
namespace {

namespace ops = math::ops;

// grad and z: the output's floating dtype and shape, any strides (0 included).
template <typename Op> KernelFn activation_backward(const char* op) {
  return [op](DeviceImpl& d, const OpCall& c) {
    const TensorArg& out = check_operands(c, 2, op);
    check_dtype(c.inputs[0], out.dtype, "grad", op);
    check_dtype(c.inputs[1], out.dtype, "z", op);
    CudaDevice& dev = cuda_device(d);
    FERRY_CUDA_DISPATCH_FLOATING(
        out.dtype, op,
        launch_elementwise<scalar_t, scalar_t, 2>(dev, out, {&c.inputs[0], &c.inputs[1]},
                                                  BinaryFn<scalar_t, scalar_t, Op>{}, op));
  };
}

}  // namespace

void add_grad_kernels(KernelTable& t) {
#define FERRY_ACTIVATION_BACKWARD(name, F, set) \
  t.emplace_back(OpId::name, activation_backward<ops::F>(#name));
  FERRY_ACTIVATION_BACKWARD_OPS(FERRY_ACTIVATION_BACKWARD)
#undef FERRY_ACTIVATION_BACKWARD
}

}  // namespace ferry::cuda
