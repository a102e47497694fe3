// cuda/cuda_device.cpp — a CUDA GPU as a ferry device: description, stream,
// events and the kernel table. Memory and copies are in cuda_memory.cpp.
#include "cuda_device.hpp"

#include <fmt/format.h>

#include <chrono>
#include <unordered_map>

#include "cuda_cudnn.hpp"
#include "cuda_error.hpp"
#include "cuda_kernels.hpp"
#include "ferry/error.hpp"
#include "ferry/kit/conv_ops.hpp"

namespace ferry::cuda {
namespace {

// Note [Events]: a fresh cudaEvent_t per marker (creation costs about a
// microsecond, far below any copy it orders), without timing, which makes
// record and query cheaper.
class CudaFence final : public Fence {
 public:
  explicit CudaFence(const CudaDevice& dev) : dev_(dev) {
    dev.make_current();
    dev.check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
    cudaError_t err = cudaEventRecord(event_, dev.stream());
    if (err != cudaSuccess) {
      cudaEventDestroy(event_);
      dev.check(err, "cudaEventRecord");
    }
  }
  ~CudaFence() override { cudaEventDestroy(event_); }
  bool done() override {
    cudaError_t err = cudaEventQuery(event_);
    if (err == cudaErrorNotReady) {
      cudaGetLastError();  // not an error: clear it so the next check does not see it
      return false;
    }
    dev_.check(err, "cudaEventQuery");
    return true;
  }
  void wait() override { dev_.check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }
  cudaEvent_t event() const { return event_; }

 private:
  const CudaDevice& dev_;
  cudaEvent_t event_ = nullptr;
};

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(std::shared_ptr<Fence> f) : fence_(std::move(f)) {}
  void wait() override { fence_->wait(); }
  bool query() override { return fence_->done(); }

 private:
  std::shared_ptr<Fence> fence_;
};

}  // namespace

KernelTable kernel_table() {
  KernelTable table;
  add_elementwise_kernels(table);
  add_random_kernels(table);
  add_reduce_kernels(table);
  add_scan_kernels(table);
  add_sort_kernels(table);
  add_nn_kernels(table);
  add_linalg_kernels(table);
  add_index_kernels(table);
  add_grad_kernels(table);
  add_optim_kernels(table);
  add_conv_kernels(table);
  add_attention_kernels(table);
  return table;
}

CudaDevice::CudaDevice(int index, int ordinal)
    : DeviceImpl(Device::unchecked("cuda", index)), ordinal_(ordinal) {
  make_current();
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, ordinal_), "cudaGetDeviceProperties");
  name_ = p.name;
  cc_major_ = p.major;
  cc_minor_ = p.minor;
  sm_count_ = p.multiProcessorCount;
  smem_per_block_ = p.sharedMemPerBlock;
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  init_memory();
  for (auto& [op, fn] : kernel_table()) register_kernel(op, std::move(fn));
}

// Devices live until the process exits (Note in ferry/backend.hpp): this runs
// only for a device whose construction failed after the stream was made.
CudaDevice::~CudaDevice() {
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

bool CudaDevice::supports(OpId op, DType dtype) const {
  if (is_conv_kernel_op(op) && !cudnn::takes(compute_capability(), dtype)) return false;
  return DeviceImpl::supports(op, dtype);
}

void CudaDevice::make_current() const {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == ordinal_) return;
  check(cudaSetDevice(ordinal_), "cudaSetDevice");
}

void CudaDevice::check(cudaError_t err, const char* call) const {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so later calls do not report it again
  throw_error(device().str(), call, cudaGetErrorName(err), cudaGetErrorString(err));
}

cublasHandle_t CudaDevice::cublas() {
  if (!cublas_) {
    make_current();
    cublasHandle_t h = nullptr;
    cublasStatus_t st = cublasCreate(&h);
    if (st != CUBLAS_STATUS_SUCCESS)
      throw_error(device().str(), "cublasCreate", cublasGetStatusName(st),
                  cublasGetStatusString(st));
    st = cublasSetStream(h, stream_);
    if (st != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(h);
      throw_error(device().str(), "cublasSetStream", cublasGetStatusName(st),
                  cublasGetStatusString(st));
    }
    cublas_ = h;
  }
  return cublas_;
}

std::shared_ptr<Fence> CudaDevice::fence() { return std::make_shared<CudaFence>(*this); }

std::unique_ptr<Event> CudaDevice::record_event() { return std::make_unique<CudaEvent>(fence()); }

void CudaDevice::synchronize() {
  make_current();
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  std::lock_guard lock(deferred_mutex_);
  deferred_.collect();
}

// Note [CUDA timing]
// For the profiler (Note [Device timing] in ferry/backend.hpp): each mark is a
// timed cudaEvent_t recorded on the stream, and each is read at stop_timing as
// cudaEventElapsedTime from an origin event recorded at start_timing. The
// origin is mapped onto the host clock by recording it on an idle stream and
// waiting for it: the host time read right after the wait is at most the
// wait's wake-up latency late. Events cost about a microsecond each to create
// (Note [Events]), paid only while profiling.
bool CudaDevice::start_timing() {
  make_current();
  std::lock_guard lock(timing_mutex_);
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  if (!timing_origin_) check(cudaEventCreate(&timing_origin_), "cudaEventCreate");
  check(cudaEventRecord(timing_origin_, stream_), "cudaEventRecord");
  check(cudaEventSynchronize(timing_origin_), "cudaEventSynchronize");
  timing_origin_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  return true;
}

void CudaDevice::mark_time(std::uint64_t id, bool end) {
  make_current();
  std::lock_guard lock(timing_mutex_);
  if (!timing_origin_) return;
  cudaEvent_t e = nullptr;
  check(cudaEventCreate(&e), "cudaEventCreate");
  const cudaError_t err = cudaEventRecord(e, stream_);
  if (err != cudaSuccess) {
    cudaEventDestroy(e);
    check(err, "cudaEventRecord");
  }
  timing_marks_.emplace_back(id << 1 | std::uint64_t(end), e);
}

std::vector<DeviceTimeSpan> CudaDevice::stop_timing() {
  make_current();
  std::lock_guard lock(timing_mutex_);
  std::vector<DeviceTimeSpan> out;
  if (!timing_origin_) return out;
  const cudaError_t sync = cudaStreamSynchronize(stream_);
  std::unordered_map<std::uint64_t, DeviceTimeSpan> spans;
  for (const auto& [mark, e] : timing_marks_) {
    float ms = 0;
    if (sync == cudaSuccess && cudaEventElapsedTime(&ms, timing_origin_, e) == cudaSuccess) {
      DeviceTimeSpan& sp = spans[mark >> 1];
      sp.id = mark >> 1;
      (mark & 1 ? sp.end_ns : sp.begin_ns) = timing_origin_ns_ + std::int64_t(double(ms) * 1e6);
    } else {
      cudaGetLastError();  // a span left out, not an error for the next call
    }
    cudaEventDestroy(e);
  }
  timing_marks_.clear();
  cudaEventDestroy(timing_origin_);
  timing_origin_ = nullptr;
  check(sync, "cudaStreamSynchronize");
  for (const auto& [id, sp] : spans)
    if (sp.begin_ns != 0 && sp.end_ns != 0) out.push_back(sp);
  return out;
}

std::size_t CudaDevice::free_memory() const {
  make_current();
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return free;
}

DeviceInfo CudaDevice::info() {
  make_current();
  DeviceInfo d;
  d.device = device().str();
  d.backend = "cuda";
  d.index = device().index();
  d.available = true;
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, ordinal_), "cudaGetDeviceProperties");
  d.name = p.name;
  d.vendor = "NVIDIA";
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  d.driver = fmt::format("CUDA driver API {}.{}, runtime {}.{}", driver / 1000, driver % 1000 / 10,
                         runtime / 1000, runtime % 1000 / 10);
  d.kind = p.integrated ? DeviceKind::integrated_gpu : DeviceKind::discrete_gpu;
  std::size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  d.memory_total = total;
  d.memory_free = free;
  d.max_allocation = total;
  // The UUID NVIDIA's Vulkan driver reports as deviceUUID and nvidia-smi as
  // GPU-<uuid>: one card, one UUID, whichever backend describes it.
  for (int i = 0; i < 16; ++i) d.uuid[std::size_t(i)] = std::uint8_t(p.uuid.bytes[i]);
  d.caps = capabilities();
  d.properties["compute_capability"] = fmt::format("{}.{}", p.major, p.minor);
  d.properties["sm_count"] = std::to_string(p.multiProcessorCount);
  d.properties["warp_size"] = std::to_string(p.warpSize);
  d.properties["shared_memory_per_block"] = std::to_string(p.sharedMemPerBlock);
  d.properties["l2_cache_bytes"] = std::to_string(p.l2CacheSize);
  d.properties["pci_bus_id"] =
      fmt::format("{:04x}:{:02x}:{:02x}.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
  d.properties["ordinal"] = std::to_string(ordinal_);
  d.properties["cudnn"] = cudnn::status();
  const MemoryStats s = memory_stats();
  d.properties["allocator_reserved_bytes"] = std::to_string(s.reserved);
  return d;
}

CudaDevice& cuda_device(DeviceImpl& d) { return static_cast<CudaDevice&>(d); }

void* data_ptr(const TensorArg& a) {
  auto* b = static_cast<CudaBuffer*>(a.buffer);
  return static_cast<char*>(b->ptr()) + a.offset * std::int64_t(dtype_size(a.dtype));
}

void check_launch(CudaDevice& dev, const char* kernel) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw_error(dev.device().str(), fmt::format("launching the {} kernel", kernel),
                cudaGetErrorName(err), cudaGetErrorString(err));
}

void unsupported_dtype(const char* op, DType dt) {
  throw UnsupportedError(
      fmt::format("{}: the cuda kernel does not take dtype {}", op, dtype_name(dt)));
}

}  // namespace ferry::cuda
