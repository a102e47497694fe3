// cuda/cuda_memory.cpp — the CUDA device's memory and copies.
//
// Note [CUDA memory]
// - Device memory: a detail::BlockAllocator (Note [Block allocator]) over
//   cudaMalloc blocks, with PyTorch's size classes (cuda_memory_policy.hpp):
//   small requests are carved best fit out of shared blocks (split, and
//   merged again when freed); large ones get a dedicated block, cached whole
//   for a later request of about the same size.
//   Reuse needs no waiting (Note [Stream-ordered reuse]): every kernel and
//   copy that touches a device buffer runs on its device's one op stream, and
//   a peer copy is ordered into both devices' streams with events.
// - Out of memory: the allocator releases its cached blocks and retries; if
//   that fails too, the device waits for its stream, returns the staging
//   ranges whose copies are done, and tries once more before throwing
//   OutOfMemoryError with the bytes asked and cudaMemGetInfo's free bytes.
// - Pinned host memory (cudaHostAlloc) is a second BlockAllocator. Host to
//   device copies from ordinary (pageable) memory go through it in chunks so
//   the call returns as soon as the bytes are staged, while the DMA engine
//   copies asynchronously; each chunk returns to the pool once the event
//   after its copy completes, and at most kMaxStagingInFlight bytes are in
//   flight. Device to host copies stream through two chunks: the GPU fills
//   one while the host empties the other.
#include <fmt/format.h>

#include <cstring>
#include <optional>

#include "cuda_device.hpp"
#include "cuda_memory_policy.hpp"
#include "ferry/error.hpp"

namespace ferry::cuda {
namespace {

char* block_ptr(const detail::Allocation& a) {
  return reinterpret_cast<char*>(std::uintptr_t(a.block)) + a.offset;
}

CudaBuffer& as_cuda(const Buffer& b) {
  return const_cast<CudaBuffer&>(static_cast<const CudaBuffer&>(b));
}

}  // namespace

CudaBuffer::~CudaBuffer() { device_->release(*this); }

void CudaDevice::init_memory() {
  device_pool_ = std::make_unique<detail::BlockAllocator>(
      device_allocator_config(),
      [this](std::uint64_t bytes) -> std::optional<std::uint64_t> {
        make_current();
        void* p = nullptr;
        cudaError_t err = cudaMalloc(&p, bytes);
        if (err == cudaErrorMemoryAllocation) {
          cudaGetLastError();
          return std::nullopt;
        }
        check(err, "cudaMalloc");
        return std::uint64_t(reinterpret_cast<std::uintptr_t>(p));
      },
      [this](std::uint64_t block) {
        make_current();
        cudaFree(reinterpret_cast<void*>(std::uintptr_t(block)));  // synchronizes the device
      });
  pinned_pool_ = std::make_unique<detail::BlockAllocator>(
      pinned_allocator_config(),
      [this](std::uint64_t bytes) -> std::optional<std::uint64_t> {
        make_current();
        void* p = nullptr;
        cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
        if (err == cudaErrorMemoryAllocation) {
          cudaGetLastError();
          return std::nullopt;
        }
        check(err, "cudaHostAlloc");
        return std::uint64_t(reinterpret_cast<std::uintptr_t>(p));
      },
      [](std::uint64_t block) { cudaFreeHost(reinterpret_cast<void*>(std::uintptr_t(block))); });
}

std::unique_ptr<Buffer> CudaDevice::allocate(std::size_t bytes) {
  failure_point(*this, "allocate");
  detail::AllocResult r = device_pool_->allocate(bytes);
  if (!r.ok()) {
    // The allocator has already released its own cache; what else can go:
    // staging ranges whose copies are done.
    synchronize();
    device_pool_->empty_cache();
    r = device_pool_->allocate(bytes);
  }
  if (!r.ok()) {
    const std::size_t free = free_memory();
    throw OutOfMemoryError(
        fmt::format("{}: out of memory: cannot allocate {} bytes ({} bytes free on the GPU, {} "
                    "bytes held by ferry's allocator)",
                    device().str(), bytes, free, device_pool_->stats().reserved),
        bytes, free, device().str());
  }
  return std::make_unique<CudaBuffer>(*this, bytes, block_ptr(r.allocation), false, r.allocation);
}

detail::Allocation CudaDevice::allocate_pinned_range(std::size_t bytes) {
  {
    std::lock_guard lock(deferred_mutex_);
    deferred_.collect();
    while (deferred_.pending_bytes() + bytes > kMaxStagingInFlight && deferred_.wait_oldest()) {
    }
  }
  detail::AllocResult r = pinned_pool_->allocate(bytes);
  if (!r.ok()) {
    {
      std::lock_guard lock(deferred_mutex_);
      deferred_.drain();
    }
    pinned_pool_->empty_cache();
    r = pinned_pool_->allocate(bytes);
  }
  if (!r.ok())
    throw OutOfMemoryError(
        fmt::format("{}: cannot allocate {} bytes of pinned host memory", device().str(), bytes),
        bytes, 0, "cpu");
  return r.allocation;
}

std::unique_ptr<Buffer> CudaDevice::allocate_staging(std::size_t bytes) {
  failure_point(*this, "allocate_staging");
  detail::Allocation a = allocate_pinned_range(bytes);
  return std::make_unique<CudaBuffer>(*this, bytes, block_ptr(a), true, a);
}

// Note [Pinned host memory] (runtime/pinned_memory.hpp): the memory stays the
// caller's; a CudaBuffer marks it registered, and unregisters it when freed
// (every copy through it has completed by then).
std::unique_ptr<Buffer> CudaDevice::register_host_memory(void* ptr, std::size_t bytes) {
  failure_point(*this, "register_host_memory");
  make_current();
  const cudaError_t err = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear it: the caller reports the refusal
    return nullptr;
  }
  auto b = std::make_unique<CudaBuffer>(*this, bytes, ptr, true, detail::Allocation{});
  b->registered_ = true;
  return b;
}

void* CudaDevice::native_address(const Buffer& buffer, std::size_t offset) const {
  auto* b = dynamic_cast<const CudaBuffer*>(&buffer);
  // Pinned host memory is not device memory a device library should be handed.
  if (!b || &b->device() != this || b->pinned() || offset > b->size()) return nullptr;
  return static_cast<char*>(b->ptr()) + offset;
}

std::unique_ptr<Buffer> CudaDevice::sub_buffer(std::shared_ptr<Buffer> parent, std::size_t offset,
                                               std::size_t bytes) {
  auto* p = dynamic_cast<CudaBuffer*>(parent.get());
  if (!p || &p->device() != this || offset + bytes > p->size())
    throw Error(fmt::format("{}: sub_buffer of a buffer of another device or out of its range",
                            device().str()));
  return std::make_unique<CudaBuffer>(*this, bytes, static_cast<char*>(p->ptr()) + offset,
                                      p->pinned(), detail::Allocation{}, std::move(parent));
}

void CudaDevice::release(CudaBuffer& b) noexcept {
  if (b.parent_) return;  // the parent (kept alive by the member) owns the memory
  if (b.registered_) {
    cudaSetDevice(ordinal_);
    cudaHostUnregister(b.ptr_);
    cudaGetLastError();
    return;
  }
  if (!b.pinned_) {
    // Note [Stream-ordered reuse]: work already enqueued on the stream runs
    // before anything that can be given this range next.
    device_pool_->free(b.allocation_);
    return;
  }
  // Pinned memory is written by the host, outside stream order: the range
  // returns once the copies enqueued so far (which may read it) are done.
  try {
    std::lock_guard lock(deferred_mutex_);
    detail::Allocation a = b.allocation_;
    deferred_.defer(
        {fence()}, [this, a] { pinned_pool_->free(a); }, a.size);
  } catch (...) {
    // No event could be recorded (a lost device): the range is leaked, never
    // handed out while a copy might still read it.
  }
}

MemoryStats CudaDevice::memory_stats() { return device_pool_->stats(); }

void CudaDevice::reset_peak_memory_stats() { device_pool_->reset_peak(); }

void CudaDevice::empty_cache() {
  synchronize();
  {
    std::lock_guard lock(deferred_mutex_);
    deferred_.drain();
  }
  device_pool_->empty_cache();
  pinned_pool_->empty_cache();
}

void CudaDevice::copy_from_host(Buffer& dst, std::size_t dst_offset, const void* src,
                                std::size_t bytes) {
  failure_point(*this, "copy_from_host");
  if (bytes == 0) return;
  CudaBuffer& d = as_cuda(dst);
  char* out = static_cast<char*>(d.ptr()) + dst_offset;
  const char* in = static_cast<const char*>(src);
  make_current();
  if (d.pinned()) {  // staging memory: host to host, after the copies that read it
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    host_memcpy(out, in, bytes);
    return;
  }
  for (std::size_t pos = 0; pos < bytes;) {
    const std::size_t n = std::min(kStagingChunk, bytes - pos);
    detail::Allocation a = allocate_pinned_range(n);
    char* stage = block_ptr(a);
    host_memcpy(stage, in + pos, n);
    cudaError_t err = cudaMemcpyAsync(out + pos, stage, n, cudaMemcpyHostToDevice, stream_);
    if (err != cudaSuccess) pinned_pool_->free(a);  // nothing was enqueued
    check(err, "cudaMemcpyAsync (host to device)");
    std::lock_guard lock(deferred_mutex_);
    deferred_.defer(
        {fence()}, [this, a] { pinned_pool_->free(a); }, a.size);
    pos += n;
  }
}

void CudaDevice::copy_to_host(void* dst, const Buffer& src, std::size_t src_offset,
                              std::size_t bytes) {
  failure_point(*this, "copy_to_host");
  if (bytes == 0) return;
  CudaBuffer& s = as_cuda(src);
  const char* in = static_cast<const char*>(s.ptr()) + src_offset;
  char* out = static_cast<char*>(dst);
  make_current();
  if (s.pinned()) {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    host_memcpy(out, in, bytes);
    return;
  }
  // Two chunks in flight: the DMA engine fills chunk k + 1 while the host
  // copies chunk k out.
  struct Chunk {
    detail::Allocation a;
    std::shared_ptr<Fence> done;
    std::size_t pos, n;
  };
  std::optional<Chunk> prev;
  auto finish = [&](Chunk& c) {
    c.done->wait();
    host_memcpy(out + c.pos, block_ptr(c.a), c.n);
    pinned_pool_->free(c.a);
  };
  try {
    for (std::size_t pos = 0; pos < bytes;) {
      const std::size_t n = std::min(kStagingChunk, bytes - pos);
      Chunk c{allocate_pinned_range(n), nullptr, pos, n};
      cudaError_t err =
          cudaMemcpyAsync(block_ptr(c.a), in + pos, n, cudaMemcpyDeviceToHost, stream_);
      if (err != cudaSuccess) pinned_pool_->free(c.a);
      check(err, "cudaMemcpyAsync (device to host)");
      c.done = fence();
      if (prev) finish(*prev);
      prev = std::move(c);
      pos += n;
    }
    if (prev) finish(*prev);
  } catch (...) {
    if (prev) {
      cudaStreamSynchronize(stream_);
      cudaGetLastError();
      pinned_pool_->free(prev->a);
    }
    throw;
  }
}

void CudaDevice::copy_within(Buffer& dst, std::size_t dst_offset, const Buffer& src,
                             std::size_t src_offset, std::size_t bytes) {
  failure_point(*this, "copy_within");
  if (bytes == 0) return;
  make_current();
  // cudaMemcpyDefault: either side may be pinned staging (unified addressing).
  check(cudaMemcpyAsync(static_cast<char*>(as_cuda(dst).ptr()) + dst_offset,
                        static_cast<const char*>(as_cuda(src).ptr()) + src_offset, bytes,
                        cudaMemcpyDefault, stream_),
        "cudaMemcpyAsync (device to device)");
}

// Note [Peer copies]: the copy runs on this (the destination) device's stream
// after everything enqueued on the source's stream so far (an event the
// destination waits for), and the source's stream waits for the copy in
// turn, so neither side can overwrite or reuse the bytes while they move.
// cudaMemcpyPeerAsync goes over NVLink or PCIe peer-to-peer where the backend
// enabled peer access (cuda_backend.cpp), and through host memory otherwise.
bool CudaDevice::copy_from_peer(Buffer& dst, std::size_t dst_offset, DeviceImpl& src_device,
                                const Buffer& src, std::size_t src_offset, std::size_t bytes) {
  auto* peer = dynamic_cast<CudaDevice*>(&src_device);
  if (!peer) return false;
  failure_point(*this, "copy_from_peer");
  if (bytes == 0) return true;
  cudaEvent_t src_ready = nullptr, copied = nullptr;
  peer->make_current();
  peer->check(cudaEventCreateWithFlags(&src_ready, cudaEventDisableTiming), "cudaEventCreate");
  cudaError_t err = cudaEventRecord(src_ready, peer->stream_);
  make_current();
  if (err == cudaSuccess) err = cudaStreamWaitEvent(stream_, src_ready, 0);
  if (err == cudaSuccess)
    err = cudaMemcpyPeerAsync(static_cast<char*>(as_cuda(dst).ptr()) + dst_offset, ordinal_,
                              static_cast<const char*>(as_cuda(src).ptr()) + src_offset,
                              peer->ordinal_, bytes, stream_);
  if (err == cudaSuccess) err = cudaEventCreateWithFlags(&copied, cudaEventDisableTiming);
  if (err == cudaSuccess) err = cudaEventRecord(copied, stream_);
  if (err == cudaSuccess) {
    peer->make_current();
    err = cudaStreamWaitEvent(peer->stream_, copied, 0);
  }
  cudaEventDestroy(src_ready);  // destroying a recorded event is safe: it completes on its own
  if (copied) cudaEventDestroy(copied);
  check(err, "cudaMemcpyPeerAsync");
  return true;
}

}  // namespace ferry::cuda
