// ferry/backend.hpp — the interface a backend implements (CPU, Vulkan, CUDA,
// or a third party's plugin). Application code never needs this header.
//
// Note [Kernel contract]
// The core does everything that is the same on every device: shape inference,
// broadcasting, dtype promotion, output allocation, device checks. A kernel
// receives an OpCall whose TensorArgs are already broadcast to the output's
// shape (stride 0 where an input is expanded) and already in the dtypes the op
// computes in; it writes its outputs and nothing else. Kernels run on the
// device's in-order stream: they may return before the work is done, and the
// device's synchronize() waits for everything enqueued before it.
// Per-op conventions (what attrs mean, which dims reduce) are in
// docs/kernel-contract.md.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "ferry/config.hpp"
#include "ferry/custom_kernel.hpp"
#include "ferry/device_info.hpp"
#include "ferry/dtype.hpp"
#include "ferry/memory.hpp"
#include "ferry/memory_format.hpp"
#include "ferry/op.hpp"

namespace ferry {

// A block of device memory. Owned by one Storage; its destructor returns the
// memory to the device (a caching allocator may keep it). A Buffer must not
// outlive the DeviceImpl that made it; devices live until the process exits.
// The alignment of pinned host memory (a page): register_host_memory takes
// ranges aligned to it.
inline constexpr std::size_t kPinnedAlignment = 4096;

class DeviceImpl;

class Buffer {
 public:
  explicit Buffer(std::size_t size) : size_(size) {}
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::size_t size() const { return size_; }
  // The host address of byte 0 when the host can reach the memory directly
  // (CPU memory, mapped device memory), else nullptr.
  virtual void* host_ptr() const { return nullptr; }
  // For pinned host memory (Tensor::pin_memory, Note [Pinned host memory]):
  // this memory as a buffer of `device` (its register_host_memory), whose DMA
  // reads and writes it with copy_within, and where byte 0 of this buffer
  // lies in it. {nullptr, 0} when the memory is not pinned for `device`.
  struct Registration {
    Buffer* buffer = nullptr;
    std::size_t offset = 0;
  };
  virtual Registration registration(const DeviceImpl& device) const {
    (void)device;
    return {};
  }

 private:
  std::size_t size_;
};

// A strided view as a kernel sees it. offset and strides count elements.
struct TensorArg {
  Buffer* buffer = nullptr;
  std::int64_t offset = 0;
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
  DType dtype = DType::f32;

  int ndim() const { return int(sizes.size()); }
  std::int64_t numel() const;
  // Dense in `format`'s order (ferry::is_dense_in): contiguous by default, or channels-last
  // where a kernel's attributes say so (docs/kernel-contract.md, "Layouts").
  bool is_contiguous(MemoryFormat format = MemoryFormat::contiguous) const;
  // Typed host pointer to element 0 of the view (host-visible buffers only).
  template <typename T> T* data() const { return static_cast<T*>(buffer->host_ptr()) + offset; }
};

class Tensor;
// A kernel's view of a tensor (for tests and benchmarks that call a kernel
// directly; the dispatcher builds these itself).
TensorArg tensor_arg(const Tensor& t);

// Named op attributes: dims, scalar operands, flags.
using AttrValue = std::variant<std::int64_t, double, bool, std::vector<std::int64_t>,
                               std::vector<double>, std::string>;
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> init);
  Attrs& set(std::string name, AttrValue v);
  bool has(std::string_view name) const;
  std::int64_t i(std::string_view name) const;  // throws Error when missing or another type
  double f(std::string_view name) const;        // accepts an int too
  bool b(std::string_view name) const;
  const std::vector<std::int64_t>& ints(std::string_view name) const;
  const std::vector<double>& floats(std::string_view name) const;  // per-tensor scalars
  const std::string& s(std::string_view name) const;
  std::string str() const;  // for logs and error messages

 private:
  const AttrValue& get(std::string_view name) const;
  std::vector<std::pair<std::string, AttrValue>> items_;
};

// The layout of a CNN layer kernel's activations (docs/kernel-contract.md, "Layouts"):
// channels-last of `rank` (channels_last for 4-D, channels_last_3d for 5-D) where the attribute
// `channels_last` is set, which the core does only on a device whose
// capabilities().channels_last_cnn; contiguous otherwise.
MemoryFormat activation_format(const Attrs& attrs, std::int64_t rank);

struct OpCall {
  OpId op;
  std::string_view name() const { return op_name(op); }  // for messages
  std::vector<TensorArg> inputs;
  std::vector<TensorArg> outputs;
  Attrs attrs;
};

using KernelFn = std::function<void(DeviceImpl&, const OpCall&)>;

// Completion marker on a device's stream.
class Event {
 public:
  virtual ~Event() = default;
  virtual void wait() = 0;   // blocks the host until the work before it is done
  virtual bool query() = 0;  // true when done
};

// A user's kernel compiled for one device (Note [Custom kernels] in
// ferry/custom_kernel.hpp), made by DeviceImpl::compile_kernel.
class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
  // The workgroup (block) size a launch with `grid` uses.
  virtual std::array<std::uint32_t, 3> group_size(const LaunchGrid& grid) const = 0;
  // Enqueues the kernel with `groups` workgroups along x, y, z (each at least
  // 1): tensors[0, first_output) are its inputs, the rest its outputs, bound
  // in order; the scalars follow. The core has checked that every tensor is
  // on this device and contiguous from its element 0.
  virtual void launch(const std::vector<TensorArg>& tensors, std::size_t first_output,
                      const std::vector<KernelScalar>& scalars, const LaunchGrid& grid,
                      const std::array<std::uint32_t, 3>& groups) = 0;
};

// One device.
//
// Note [Device thread-safety]
// The core does not serialise calls into a device: any number of host
// threads call any member of one DeviceImpl (and of its Buffers, Events and
// CompiledKernels, and its kernels) at the same time, as PyTorch lets any
// thread use any device. A backend protects its own shared state (its
// stream or command recorder, its allocator, its caches) with the
// narrowest lock that is correct, and keeps these promises:
//  - Order: what one thread enqueues runs in that thread's issue order, and
//    a result is what a serial run of the same calls gives. One in-order
//    stream per device, shared by every thread, is the simple way to get it;
//    work from several threads may then interleave, never reorder.
//  - Waiting: a call that waits for the device (copy_to_host, synchronize,
//    Event::wait) lets other threads keep enqueueing meanwhile; never hold a
//    lock across the wait that other threads need to enqueue.
//  - Memory: a Buffer freed on one thread may have work in flight enqueued
//    by another; its memory must not be handed to the host or another queue
//    before that work is done. It may be handed at once to later work on the
//    same in-order stream (stream-ordered reuse: Note [Reuse tags] in the
//    core's block allocator).
//  - Bounded run-ahead: the host may enqueue only a bounded amount of
//    unfinished work; past it, enqueueing blocks until the device catches up.
// A backend whose work completes before each call returns (the CPU, the
// testdev plugin) keeps them by having no shared mutable state beyond a
// locked allocator. `ferry-conformance --threads N` checks a backend against
// this contract (docs/backend-guide.md).
// One span of a device's work timed with its own clock, in host steady_clock
// nanoseconds (Note [Device timing]).
struct DeviceTimeSpan {
  std::uint64_t id = 0;
  std::int64_t begin_ns = 0, end_ns = 0;
};

class DeviceImpl {
 public:
  virtual ~DeviceImpl() = default;

  // Describes the device now (memory_free is current).
  virtual DeviceInfo info() = 0;
  const Device& device() const { return device_; }

  // Allocates `bytes` (may be 0). Throws OutOfMemoryError after the device
  // has released its caches and retried.
  virtual std::unique_ptr<Buffer> allocate(std::size_t bytes) = 0;

  // Copies, enqueued on the device's stream. The host memory of
  // copy_from_host may be reused as soon as the call returns; copy_to_host
  // returns once `dst` holds the data.
  virtual void copy_from_host(Buffer& dst, std::size_t dst_offset, const void* src,
                              std::size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const Buffer& src, std::size_t src_offset,
                            std::size_t bytes) = 0;
  virtual void copy_within(Buffer& dst, std::size_t dst_offset, const Buffer& src,
                           std::size_t src_offset, std::size_t bytes) = 0;

  // Note [Capabilities]
  // What a device can do is said in two places only, both asked, never probed:
  // capabilities() for its copies and memory (the transfer planner and the
  // core's copy routes read it) and for the forms its kernels take their inputs
  // in (scatter_in_order), supports() for its ops. A member below that
  // a capability names is only called when the device claims it.
  virtual DeviceCapabilities capabilities() const { return {}; }

  // Whether this device runs `op` with `dtype` as its compute dtype
  // (OpInfo::compute; the values' dtype for index ops, each side's for copy).
  // The default: a kernel is registered and the op's row takes the dtype
  // (OpInfo::kernel_dtypes). A device that computes fewer dtypes (f64 on a
  // GPU, 16-bit types without the hardware) narrows it; a kernel refuses with
  // UnsupportedError exactly where this says false.
  virtual bool supports(OpId op, DType dtype) const;

  // Peer copy (caps.peer_copy): copy straight from another device. Returns
  // false when this pair is not supported; the core then copies through the
  // host.
  virtual bool copy_from_peer(Buffer& dst, std::size_t dst_offset, DeviceImpl& src_device,
                              const Buffer& src, std::size_t src_offset, std::size_t bytes);

  // Sub-buffers (caps.sub_buffers): a Buffer for bytes [offset, offset + bytes)
  // of `parent` (a buffer of this device), sharing its memory and keeping it
  // alive; the parent's memory is released when the parent and every
  // sub-buffer are gone. The transfer planner places many storages in one
  // allocation this way (Note [Transfer arenas] in ferry/transfer.hpp);
  // `offset` is a multiple of kSubBufferAlignment.
  virtual std::unique_ptr<Buffer> sub_buffer(std::shared_ptr<Buffer> parent, std::size_t offset,
                                             std::size_t bytes);
  // Staging (caps.staging): host memory the device copies to and from without
  // an extra host copy (pinned or host-visible staging memory), as a Buffer of
  // this device whose host_ptr() is set, used with copy_within. Without it the
  // planner stages through ordinary host memory and copy_from_host /
  // copy_to_host.
  virtual std::unique_ptr<Buffer> allocate_staging(std::size_t bytes);
  // Host memory registration (caps.host_registration): host memory [ptr, ptr
  // + bytes) that the caller allocated, as a Buffer of this device that
  // copy_within reads and writes by DMA with no staging copy (CUDA:
  // cudaHostRegister; Vulkan: VK_EXT_external_memory_host); its host_ptr()
  // is `ptr`. `ptr` and `bytes` are multiples of kPinnedAlignment. The caller
  // keeps the memory alive until the Buffer is gone, and neither the host
  // writes it while a copy reading it is enqueued nor reads it before a copy
  // writing it has completed (the core's copies through it synchronize:
  // Note [Pinned host memory]). nullptr when this range cannot be
  // registered (the driver's alignment, its limits).
  virtual std::unique_ptr<Buffer> register_host_memory(void* ptr, std::size_t bytes);

  // Note [Native memory]
  // For a library that reads and writes a device's memory itself, on the
  // device's own queue (NCCL on CUDA, for ferry::distributed's nccl group):
  // the device address of byte `offset` of `buffer` (a CUdeviceptr on CUDA),
  // and the in-order queue the device's kernels run on (a cudaStream_t), so
  // that the library's work is ordered with them. nullptr where the device
  // has none to give (the default); the CPU's address is the host pointer.
  virtual void* native_address(const Buffer& buffer, std::size_t offset) const;
  virtual void* native_queue() const { return nullptr; }

  // Optional: allocator statistics and releasing cached memory. Defaults:
  // zeros, and nothing to release. reset_peak_memory_stats starts
  // MemoryStats::peak_allocated afresh from what is allocated now.
  virtual MemoryStats memory_stats() { return {}; }
  virtual void reset_peak_memory_stats() {}
  virtual void empty_cache() {}

  // Waits until everything enqueued so far has finished.
  virtual void synchronize() = 0;
  // Default: synchronizes and returns a completed event.
  virtual std::unique_ptr<Event> record_event();

  // Note [Device timing]
  // For the profiler (ferry/profiler.hpp), which records how long each op and
  // copy took on the device, not just to enqueue. A device with a clock of its
  // own (Vulkan timestamp queries, CUDA events) says so by returning true from
  // start_timing(); from then on the profiler brackets the work it enqueues
  // for each op and copy with mark_time(id, false) before and mark_time(id,
  // true) after, on the issuing thread, and the device writes its clock into
  // its queue there, in stream order. stop_timing() waits for the device and
  // returns every bracketed span as host steady_clock nanoseconds (the device
  // maps its clock onto the host's), in any order, and stops writing. Brackets
  // from threads that enqueue at once may interleave: spans then overlap.
  // The default, false: the device's work has completed when each call
  // returns (the CPU), and the profiler's host clock times it.
  virtual bool start_timing() { return false; }
  virtual void mark_time(std::uint64_t /*id*/, bool /*end*/) {}
  virtual std::vector<DeviceTimeSpan> stop_timing() { return {}; }

  // Optional: compiles a user's kernel for this device (Note [Custom
  // kernels]); CompileError when it does not compile. Default:
  // UnsupportedError naming the device and the language.
  virtual std::unique_ptr<CompiledKernel> compile_kernel(const KernelSource& source);

  // The kernel for `op`, or nullptr when this device does not implement it:
  // an array lookup, on every op's path.
  const KernelFn* find_kernel(OpId op) const {
    const KernelFn& k = kernels_[std::size_t(op)];
    return k ? &k : nullptr;
  }
  std::vector<OpId> kernel_ops() const;  // in OpId order
  std::vector<std::string> kernel_names() const;

 protected:
  explicit DeviceImpl(Device device) : device_(std::move(device)) {}
  // Error when the op already has a kernel here.
  void register_kernel(OpId op, KernelFn fn);
  // The same by the op's name in ops/ops.table; Error for a name not in it.
  void register_kernel(std::string_view op, KernelFn fn);

 private:
  Device device_;
  std::array<KernelFn, kOpCount> kernels_;
};

// A backend: a family of devices that one module provides.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu", "vulkan", "cuda", "mybackend"
  // Empty when usable; otherwise why not, starting with the backend name:
  // "cuda: no CUDA driver found (libcuda.so.1)".
  virtual std::string unavailable_reason() { return {}; }
  // The usable devices, index i is "<name>:i". Owned by the backend.
  virtual std::vector<DeviceImpl*> devices() = 0;
};

// Copies host memory (or host-visible device memory) with the CPU backend's
// threads when it is large: one core cannot saturate memory bandwidth. For
// backends' host copies; the ranges must not overlap.
FERRY_EXPORT void host_memcpy(void* dst, const void* src, std::size_t bytes);

// Note [Failure injection]
// An all-or-nothing promise (the transfer planner's) is only tested when each
// step it takes can be made to fail in turn. A backend calls failure_point at
// the start of every allocation and every copy, before it changes anything;
// a test arms it with testing::fail_at(n) and the n-th call from then on, on
// any device, throws BackendError with code kInjectedFailureCode, exactly as a
// driver error there would. Disarmed (the default) it costs one relaxed
// atomic load. Thread-safe.
inline constexpr const char* kInjectedFailureCode = "FERRY_INJECTED_FAILURE";
FERRY_EXPORT void failure_point(const DeviceImpl& device, const char* what);
namespace testing {
// Arms failure_point: the n-th call from now (counting from 0) throws, once;
// a negative n disarms it. Returns how many calls were counted since the
// previous fail_at (a test learns how many steps an operation took).
FERRY_EXPORT long fail_at(long n);
}  // namespace testing

// The alignment, in bytes, of every sub_buffer offset: Vulkan's largest
// minStorageBufferOffsetAlignment, and CUDA's allocation alignment.
inline constexpr std::size_t kSubBufferAlignment = 256;

// Version of this interface; a module built against another one is refused.
// 2: AttrValue gained std::vector<double> (per-tensor scalars of multi-tensor ops).
// 3: DeviceImpl gained sub_buffer, allocate_staging, has_sub_buffers and
//    has_staging (the transfer planner).
// 4: DeviceImpl gained compile_kernel (custom kernels).
// 5: DeviceImpl gained reset_peak_memory_stats, and the core no longer
//    serialises calls into a device (Note [Device thread-safety]).
// 6: ops are OpIds of the op table (OpCall::op, register_kernel,
//    find_kernel); DeviceImpl gained supports() and capabilities(), which
//    replace has_sub_buffers() and has_staging().
// 7: DType gained i8 and i16; DeviceCapabilities gained scatter_in_order.
// 8: a scatter_in_order device's scatter_reduce kernel also takes the index
//    form (attribute dim; docs/kernel-contract.md).
// 9: pinned host memory: DeviceImpl gained register_host_memory, Buffer gained
//    registration(), DeviceCapabilities gained host_registration.
// 10: DeviceImpl gained native_address and native_queue (Note [Native memory]).
// 11: DeviceCapabilities gained channels_last_conv.
// 12: channels_last_conv became channels_last_cnn: the batch_norm and max_pool2d kernels take
//     the attribute channels_last too; TensorArg::is_contiguous takes a MemoryFormat.
// 13: interpolate's and interpolate_backward's weight tables are in the compute type (f32, or
//     f64 for f64), no longer f64 always.
// 14: the pooling kernels (max_pool1d/2d, avg_pool1d/2d and their backward rows) take the
//     attribute `adaptive`: PyTorch's adaptive windows, placed by the sizes alone.
// 15: DeviceCapabilities gained blocked_linalg.
// 16: the op table gained svd, svdvals, pinv, matrix_rank, matrix_norm and lstsq. DeviceImpl's
//     kernel table is kOpCount long, so every new row of ops/ops.table is a new version.
// 17: the op table gained matrix_exp and matrix_power; lstsq became a kernel row (the CPU runs
//     LAPACK's drivers: docs/kernel-contract.md).
inline constexpr int kBackendAbiVersion = 17;

}  // namespace ferry

// A backend module exports this function (see docs/backend-guide.md).
// It returns nullptr when `abi_version` differs from the one it was built for.
#define FERRY_BACKEND_ENTRY ferry_create_backend
#define FERRY_DEFINE_BACKEND(BackendClass)                                        \
  extern "C" FERRY_EXPORT ferry::Backend* ferry_create_backend(int abi_version) { \
    if (abi_version != ferry::kBackendAbiVersion) return nullptr;                 \
    static BackendClass* instance = new BackendClass();                           \
    return instance;                                                              \
  }
