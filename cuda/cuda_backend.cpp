// cuda/cuda_backend.cpp — the CUDA backend module: counts the GPUs through the
// CUDA runtime (linked statically; it opens the driver, libcuda.so.1, at this
// point), makes each one a ferry device, and enables peer access between
// every pair the hardware allows. No driver or no GPU: the backend is listed
// unavailable with the runtime's own error name and text.
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include "cuda_device.hpp"
#include "cuda_error.hpp"

namespace ferry::cuda {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      reason_ = cuda::unavailable_reason(cudaGetErrorName(err), cudaGetErrorString(err));
      cudaGetLastError();
    } else if (n == 0) {
      reason_ = "cuda: no CUDA-capable GPU found (the driver reports 0 devices)";
    }
    count_ = err == cudaSuccess ? n : 0;
  }
  std::string name() const override { return "cuda"; }
  std::string unavailable_reason() override { return reason_; }

  std::vector<DeviceImpl*> devices() override {
    std::call_once(once_, [this] {
      for (int i = 0; i < count_; ++i) devices_.push_back(std::make_unique<CudaDevice>(i, i));
      enable_peer_access();
    });
    std::vector<DeviceImpl*> out;
    for (auto& d : devices_) out.push_back(d.get());
    return out;
  }

 private:
  // Direct copies over NVLink / PCIe where the hardware allows them; where not,
  // cudaMemcpyPeerAsync still works, through host memory (Note [Peer copies]).
  void enable_peer_access() {
    for (auto& a : devices_)
      for (auto& b : devices_) {
        if (a == b) continue;
        int can = 0;
        if (cudaDeviceCanAccessPeer(&can, a->ordinal(), b->ordinal()) != cudaSuccess || !can) {
          cudaGetLastError();
          continue;
        }
        a->make_current();
        cudaError_t err = cudaDeviceEnablePeerAccess(b->ordinal(), 0);
        if (err != cudaSuccess && err != cudaErrorPeerAccessAlreadyEnabled)
          a->check(err, "cudaDeviceEnablePeerAccess");
        cudaGetLastError();
      }
  }

  std::string reason_;
  int count_ = 0;
  std::once_flag once_;
  std::vector<std::unique_ptr<CudaDevice>> devices_;
};

}  // namespace
}  // namespace ferry::cuda

FERRY_DEFINE_BACKEND(ferry::cuda::CudaBackend)
