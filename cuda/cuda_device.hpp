// cuda/cuda_device.hpp — one CUDA GPU: its stream, memory pools, copies and
// kernel table (docs/cuda.md has the design).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_deferred.hpp"
#include "ferry/backend.hpp"
#include "ferry/kit/block_allocator.hpp"

namespace ferry::cuda {

class CudaDevice;

// Device memory (a range of the caching allocator, or a sub-buffer of one), or
// pinned host memory (staging): then host_ptr() is set too.
class CudaBuffer final : public Buffer {
 public:
  CudaBuffer(CudaDevice& device, std::size_t size, void* ptr, bool pinned,
             detail::Allocation allocation, std::shared_ptr<Buffer> parent = nullptr)
      : Buffer(size),
        device_(&device),
        ptr_(ptr),
        pinned_(pinned),
        allocation_(allocation),
        parent_(std::move(parent)) {}
  ~CudaBuffer() override;
  void* host_ptr() const override { return pinned_ ? ptr_ : nullptr; }
  void* ptr() const { return ptr_; }
  bool pinned() const { return pinned_; }
  CudaDevice& device() const { return *device_; }

 private:
  friend class CudaDevice;
  CudaDevice* device_;
  void* ptr_;
  bool pinned_;
  detail::Allocation allocation_;   // unused for sub-buffers
  std::shared_ptr<Buffer> parent_;  // set for sub-buffers: the parent owns the memory
  bool registered_ = false;         // a caller's host memory (register_host_memory)
};

// The device pointer of a CUDA buffer (a kernel's scratch), as U*.
template <typename U> U* ptr_of(const std::unique_ptr<Buffer>& b) {
  return static_cast<U*>(static_cast<CudaBuffer*>(b.get())->ptr());
}

// A user's CUDA C++ kernel compiled by NVRTC for a GPU of compute capability
// `cc` (75 for sm_75): machine code (CUBIN) for sm_<cc> when this NVRTC
// targets it; otherwise PTX for the newest architecture it targets below cc,
// which the driver compiles for the GPU when the image is loaded (a GPU newer
// than the toolkit, as PyTorch's run-time compiled kernels do). Needs no GPU
// and no driver, so it is tested where neither is (tests/cuda_module_tests.cpp).
// CompileError with NVRTC's log when the code does not compile; BackendError
// naming `device` when NVRTC fails otherwise or targets nothing up to cc.
struct NvrtcImage {
  std::vector<char> bytes;  // PTX ends with its NUL, as cudaLibraryLoadData takes it
  bool ptx = false;
  int arch = 0;  // the architecture compiled for (cc itself for CUBIN)
};
NvrtcImage nvrtc_compile(const std::string& device, int cc, const KernelSource& source);

class CudaDevice final : public DeviceImpl {
 public:
  CudaDevice(int index, int ordinal);
  ~CudaDevice() override;

  DeviceInfo info() override;
  std::unique_ptr<Buffer> allocate(std::size_t bytes) override;
  void copy_from_host(Buffer& dst, std::size_t dst_offset, const void* src,
                      std::size_t bytes) override;
  void copy_to_host(void* dst, const Buffer& src, std::size_t src_offset,
                    std::size_t bytes) override;
  void copy_within(Buffer& dst, std::size_t dst_offset, const Buffer& src, std::size_t src_offset,
                   std::size_t bytes) override;
  bool copy_from_peer(Buffer& dst, std::size_t dst_offset, DeviceImpl& src_device,
                      const Buffer& src, std::size_t src_offset, std::size_t bytes) override;
  std::unique_ptr<Buffer> sub_buffer(std::shared_ptr<Buffer> parent, std::size_t offset,
                                     std::size_t bytes) override;
  DeviceCapabilities capabilities() const override {
    return {.f16 = true,
            .bf16 = true,
            .int64 = true,
            .host_visible_memory = false,
            .peer_copy = true,
            .sub_buffers = true,
            .staging = true,
            .host_registration = true};
  }
  // Every kernel computes every dtype its op-table row takes, f64 included
  // (in double: Note [Where f64 computes] in docs/kernel-contract.md), so
  // DeviceImpl::supports answers, except for the convolutions, which run where
  // cuDNN loaded (Note [cuDNN convolutions]; else their composition runs).
  bool supports(OpId op, DType dtype) const override;
  std::unique_ptr<Buffer> allocate_staging(std::size_t bytes) override;
  // cudaHostRegister (portable: every CUDA device's copies use it).
  std::unique_ptr<Buffer> register_host_memory(void* ptr, std::size_t bytes) override;
  // The buffer's device pointer, and this device's stream (Note [Native memory]).
  void* native_address(const Buffer& buffer, std::size_t offset) const override;
  void* native_queue() const override { return stream_; }
  MemoryStats memory_stats() override;
  void reset_peak_memory_stats() override;
  void empty_cache() override;
  void synchronize() override;
  std::unique_ptr<Event> record_event() override;
  // CUDA events with timing on the stream (Note [CUDA timing] in cuda_device.cpp).
  bool start_timing() override;
  void mark_time(std::uint64_t id, bool end) override;
  std::vector<DeviceTimeSpan> stop_timing() override;
  // CUDA C++ through NVRTC (cuda_custom_kernel.cpp).
  std::unique_ptr<CompiledKernel> compile_kernel(const KernelSource& source) override;

  // For kernels (cuda_kernels.hpp).
  int ordinal() const { return ordinal_; }
  cudaStream_t stream() const { return stream_; }
  int sm_count() const { return sm_count_; }
  int compute_capability() const { return cc_major_ * 10 + cc_minor_; }
  std::size_t shared_memory_per_block() const { return smem_per_block_; }
  // Makes this device current on the calling thread (cheap when it already is).
  void make_current() const;
  // The device's cuBLAS handle, made on first use. Call with cublas_mutex()
  // held, and hold it until the cuBLAS calls are enqueued: threads share the
  // handle (its pointer mode, its workspace), and cuBLAS leaves sharing one
  // across threads to the caller (Note [Device thread-safety]).
  cublasHandle_t cublas();
  std::mutex& cublas_mutex() { return cublas_mutex_; }
  // Throws BackendError for a failed call, naming this device.
  void check(cudaError_t err, const char* call) const;
  // An event recorded on this device's stream now, as a Fence.
  std::shared_ptr<Fence> fence();

 private:
  friend class CudaBuffer;
  void init_memory();
  void release(CudaBuffer& buffer) noexcept;
  // Pinned staging of at least `bytes`, waiting for in-flight staging when the
  // bound is reached.
  detail::Allocation allocate_pinned_range(std::size_t bytes);
  std::size_t free_memory() const;

  int ordinal_;
  int cc_major_ = 0, cc_minor_ = 0, sm_count_ = 0;
  std::size_t smem_per_block_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;  // under cublas_mutex_
  std::mutex cublas_mutex_;
  std::unique_ptr<detail::BlockAllocator> device_pool_;  // cudaMalloc blocks
  std::unique_ptr<detail::BlockAllocator> pinned_pool_;  // cudaHostAlloc blocks
  DeferredReleases deferred_;                            // pinned ranges whose copies are in flight
  std::mutex deferred_mutex_;  // buffers may be freed on another host thread
  // Note [CUDA timing]; under timing_mutex_.
  std::mutex timing_mutex_;
  cudaEvent_t timing_origin_ = nullptr;
  std::int64_t timing_origin_ns_ = 0;
  std::vector<std::pair<std::uint64_t, cudaEvent_t>> timing_marks_;  // (id << 1 | end, event)
};

// The device a kernel was called on.
CudaDevice& cuda_device(DeviceImpl& d);
// The device pointer of element 0 of a view.
void* data_ptr(const TensorArg& a);

}  // namespace ferry::cuda
