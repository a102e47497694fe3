// ferry/tensor.hpp — Storage (memory on one device) and Tensor (a view of it).
//
// Note [Tensors and storages]
// A Tensor is a handle to a TensorImpl: sizes, strides, an element offset and
// a dtype over a reference-counted Storage. Views (reshape of a contiguous
// tensor, permute, slice, expand, ...) make a new TensorImpl over the same
// Storage, so writing through one is seen through the other. A Storage keeps
// its identity when its memory moves to another device (the transfer planner
// swaps the buffer in place), so views stay views after a migration.
// Copying a Tensor copies the handle, never the data; clone() copies data.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ferry/device.hpp"
#include "ferry/dtype.hpp"
#include "ferry/memory_format.hpp"

namespace ferry {

class Buffer;
class DeviceImpl;
namespace autograd {
struct AutogradMeta;
}

using Shape = std::vector<std::int64_t>;

struct TensorOptions {
  std::optional<DType> dtype;  // f32 for factories, the data's dtype for tensor()
  Device device = Device::cpu();
  DType dtype_or(DType fallback) const { return dtype.value_or(fallback); }
};

// Memory on one device. Thread-compatible: callers serialise mutation (one
// thread writes a tensor while no other reads or writes it, as in PyTorch);
// any number of threads may read one tensor and run ops on it at once.
class Storage {
 public:
  Storage(DeviceImpl& impl, std::unique_ptr<Buffer> buffer);
  ~Storage();
  // Allocates `bytes` on `device` (OutOfMemoryError when it cannot).
  static std::shared_ptr<Storage> allocate(const Device& device, std::size_t bytes);

  const Device& device() const;
  DeviceImpl& impl() const { return *impl_; }
  Buffer& buffer() const { return *buffer_; }
  std::size_t nbytes() const;
  // Replaces the memory, keeping this Storage's identity (the transfer
  // planner's commit). The old buffer is returned so the caller decides when
  // it is freed.
  std::unique_ptr<Buffer> exchange(DeviceImpl& impl, std::unique_ptr<Buffer> buffer) noexcept;

  // Counts in-place writes to this memory (copy_, fill_, optimizer steps), so
  // that autograd can tell a tensor it saved was changed (Note [Autograd]).
  // Atomic, as PyTorch's version counter: threads may write views of one
  // storage (each its own elements) at once.
  std::uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  DeviceImpl* impl_;
  std::unique_ptr<Buffer> buffer_;
  std::atomic<std::uint64_t> version_{0};
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;            // in elements
  std::int64_t offset = 0;  // in elements
  DType dtype = DType::f32;
  // Gradient bookkeeping; null for tensors that never took part in autograd.
  std::shared_ptr<autograd::AutogradMeta> autograd;
  // A view made under grad mode: the tensor whose memory it views (the root:
  // a view of a view names the first one's base), so that an in-place write
  // through the view reaches the base's history (Note [In-place through a
  // view] in runtime/autograd/formulas_views.cpp). Weak: a view must not keep
  // its base's graph alive (a node may hold a view of its own output); a base
  // gone is one no gradient can be asked of. Empty otherwise.
  std::weak_ptr<TensorImpl> view_base;
  // A view made with grad mode off (or a view of one): an in-place write through it with
  // grad mode on, where the write would be tracked, is refused as PyTorch refuses it (Note
  // [In-place ops] in ferry/ops_inplace.hpp). `of_grad_base`: its base required grad then.
  bool view_made_without_grad = false;
  bool view_made_without_grad_of_grad_base = false;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: no storage, every accessor but defined() throws
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const { return impl().sizes; }
  const Shape& shape() const { return impl().sizes; }
  std::int64_t size(std::int64_t dim) const;  // negative dims count from the end
  const Shape& strides() const { return impl().strides; }
  std::int64_t stride(std::int64_t dim) const;
  std::int64_t dim() const { return std::int64_t(impl().sizes.size()); }
  std::int64_t numel() const;
  std::int64_t storage_offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  std::size_t element_size() const { return dtype_size(dtype()); }
  const Device& device() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_contiguous() const;
  // Same TensorImpl (not just the same storage).
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // Copies to another device and/or dtype; returns *this when nothing changes.
  Tensor to(const Device& device) const;
  Tensor to(DType dtype) const;
  Tensor to(const Device& device, DType dtype) const;
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor contiguous() const;  // *this when already contiguous
  Tensor clone() const;       // always a new storage, contiguous or channels-last as this one is
  // Memory formats (Note [Memory formats] in ferry/memory_format.hpp), PyTorch's
  // is_contiguous(memory_format=...), contiguous(memory_format=...) and
  // suggest_memory_format(). contiguous(format) returns *this when already in that format,
  // else a copy in it (differentiable); ShapeError for channels_last on a tensor that is not
  // 4-D (channels_last_3d: 5-D), ValueError for preserve. is_contiguous(format) is false for
  // a tensor of another rank. suggest_memory_format() is channels_last (_3d) for a tensor in
  // that layout and not also contiguous, else contiguous.
  bool is_contiguous(MemoryFormat format) const;
  Tensor contiguous(MemoryFormat format) const;
  MemoryFormat suggest_memory_format() const;

  // Pinned (page-locked) host memory (Note [Pinned host memory]): a copy of
  // this CPU tensor, contiguous, in host memory that the GPUs' copy engines
  // read and write directly, so copies to and from them skip staging
  // (PyTorch's pin_memory). pin_memory() pins for every available discrete
  // GPU or device whose memory the host cannot map that can pin (CUDA GPUs,
  // Vulkan GPUs with VK_EXT_external_memory_host), UnsupportedError when
  // there is none;
  // pin_memory(device) for that device only. Returns *this when already
  // pinned for those devices; DeviceError for a tensor not on the CPU.
  Tensor pin_memory() const;
  Tensor pin_memory(const Device& device) const;
  bool is_pinned() const;                      // pinned for some device
  bool is_pinned(const Device& device) const;  // pinned for `device`

  // Views (no copy). Dims may be negative. Errors are ShapeError.
  Tensor view(const Shape& shape) const;     // contiguous-compatible only; one -1 allowed
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy
  Tensor permute(const Shape& dims) const;
  Tensor transpose(std::int64_t d0, std::int64_t d1) const;
  Tensor t() const;  // 2-D transpose
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor select(std::int64_t dim, std::int64_t index) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a size
  Tensor squeeze() const;
  Tensor squeeze(std::int64_t dim) const;
  Tensor unsqueeze(std::int64_t dim) const;
  Tensor flatten(std::int64_t start_dim = 0, std::int64_t end_dim = -1) const;

  // In place. copy_ takes any source device and dtype and broadcasts it. The
  // arithmetic ones are ferry::add_(*this, other) ... (ferry/ops_inplace.hpp,
  // Note [In-place ops]: recorded by autograd).
  Tensor& fill_(const Scalar& value);
  Tensor& copy_(const Tensor& src);
  Tensor& zero_() { return fill_(0); }
  Tensor& add_(const Tensor& other);
  Tensor& add_(const Scalar& other);
  Tensor& sub_(const Tensor& other);
  Tensor& sub_(const Scalar& other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(const Scalar& other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(const Scalar& other);
  Tensor& pow_(const Tensor& exponent);
  Tensor& pow_(const Scalar& exponent);

  // Synchronizes and copies to the host, converting to T's dtype if needed.
  template <typename T> std::vector<T> to_vector() const {
    Tensor c = to(Device::cpu(), dtype_of<T>()).contiguous();
    if constexpr (std::is_same_v<T, bool>) {  // vector<bool> is packed
      std::vector<std::uint8_t> bytes(std::size_t(c.numel()));
      if (!bytes.empty()) c.read_bytes(bytes.data(), bytes.size());
      return std::vector<bool>(bytes.begin(), bytes.end());
    } else {
      std::vector<T> out(std::size_t(c.numel()));
      if (!out.empty()) c.read_bytes(out.data(), out.size() * sizeof(T));
      return out;
    }
  }
  // The single element's value; ShapeError unless numel() == 1.
  template <typename T> T item() const {
    check_single_element();
    return to_vector<T>()[0];
  }

  std::string str() const;  // PyTorch-style printing, elided when large

  // Autograd (Note [Autograd] in ferry/autograd.hpp).
  // Marks a leaf as needing gradients (DTypeError unless floating; Error to
  // turn it off on a non-leaf).
  Tensor& requires_grad_(bool requires_grad = true);
  bool requires_grad() const;
  bool is_leaf() const;  // true unless the result of a recorded op
  // The gradient accumulated by backward() (leaves, and tensors that
  // retain_grad()); undefined when there is none.
  Tensor grad() const;
  // Replaces the gradient (an undefined tensor clears it). It must have this
  // tensor's shape, dtype and device.
  void set_grad(const Tensor& grad) const;
  // Backpropagates from this tensor: `gradient` is d(loss)/d(this) and may be
  // left out for a one-element tensor. See autograd::backward (create_graph: a
  // gradient that can itself be differentiated).
  void backward(const Tensor& gradient = {}, bool retain_graph = false,
                bool create_graph = false) const;
  // The same memory and view, without history: never requires grad.
  Tensor detach() const;
  // Makes backward() keep this non-leaf tensor's gradient in grad().
  void retain_grad() const;
  // Gradient hooks (PyTorch's Tensor.register_hook, Note [Gradient hooks] in ferry/autograd.hpp):
  // hook(gradient) runs each time a backward pass (backward() or autograd::grad()) has this
  // tensor's whole gradient, before the gradient goes on. A hook that returns a defined tensor
  // (of the gradient's shape, dtype and device) replaces the gradient; one that returns void or
  // an undefined tensor leaves it. Returns an id for remove_hook. Error unless the tensor
  // requires grad. A hook that holds this tensor (or a tensor made from it) keeps the tensor and
  // its graph alive until the hook is removed: a reference cycle, as in libtorch.
  using GradHook = std::function<Tensor(const Tensor& grad)>;
  template <typename F> std::uint64_t register_hook(F&& hook) const {
    if constexpr (std::is_void_v<std::invoke_result_t<F&, const Tensor&>>)
      return add_grad_hook([h = std::forward<F>(hook)](const Tensor& g) mutable {
        h(g);
        return Tensor();
      });
    else
      return add_grad_hook(GradHook(std::forward<F>(hook)));
  }
  // Removes a hook this tensor's register_hook returned the id of; an unknown id does nothing.
  void remove_hook(std::uint64_t id) const;
  // The backward node's name ("MatmulBackward"), or "" for a leaf.
  std::string grad_fn_name() const;

  // Unary minus and the arithmetic operators live in ops.hpp.

 private:
  const TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& checked_impl() const;  // impl_; Error when undefined
  void read_bytes(void* dst, std::size_t bytes) const;      // contiguous CPU tensor -> host
  void check_single_element() const;
  std::uint64_t add_grad_hook(GradHook hook) const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::string shape_str(const Shape& s);  // "[2, 3]"

// Factories. Sizes must be >= 0 (ShapeError).
Tensor empty(const Shape& shape, const TensorOptions& options = {});
Tensor zeros(const Shape& shape, const TensorOptions& options = {});
Tensor ones(const Shape& shape, const TensorOptions& options = {});
Tensor full(const Shape& shape, const Scalar& value, const TensorOptions& options = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, const Scalar& value);
// [start, end) by step; the dtype is f32 unless options say otherwise.
Tensor arange(double end, const TensorOptions& options = {});
Tensor arange(double start, double end, double step = 1, const TensorOptions& options = {});
// The n x m identity (m = n when not given).
Tensor eye(std::int64_t n, std::optional<std::int64_t> m = std::nullopt,
           const TensorOptions& options = {});
// `steps` values from start to end, evenly spaced (PyTorch's formula: from
// start for the first half, from end for the rest, so both ends are exact);
// logspace: base raised to them.
Tensor linspace(double start, double end, std::int64_t steps, const TensorOptions& options = {});
Tensor logspace(double start, double end, std::int64_t steps, double base = 10,
                const TensorOptions& options = {});
// A tensor holding host data. shape defaults to {data.size()}.
template <typename T> Tensor tensor(const std::vector<T>& data, const Shape& shape = {},
                                    const TensorOptions& options = {});
Tensor tensor_from_bytes(const void* data, std::size_t bytes, DType dtype, const Shape& shape,
                         const Device& device);
Tensor scalar_tensor(const Scalar& value, const TensorOptions& options = {});

template <typename T>
Tensor tensor(const std::vector<T>& data, const Shape& shape, const TensorOptions& options) {
  Shape s = shape.empty() ? Shape{std::int64_t(data.size())} : shape;
  Tensor t;
  if constexpr (std::is_same_v<T, bool>) {  // vector<bool> is packed: unpack it
    std::vector<std::uint8_t> bytes(data.begin(), data.end());
    t = tensor_from_bytes(bytes.data(), bytes.size(), DType::boolean, s, Device::cpu());
  } else {
    t = tensor_from_bytes(data.data(), data.size() * sizeof(T), dtype_of<T>(), s, Device::cpu());
  }
  return t.to(options.device, options.dtype_or(dtype_of<T>()));
}

}  // namespace ferry
