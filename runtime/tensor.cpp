// runtime/tensor.cpp — Storage, Tensor metadata, views, copies and factories.
#include "ferry/tensor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/autograd.hpp"
#include "ferry/backend.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ferry/registry.hpp"
#include "memory_format_internal.hpp"
#include "ops_internal.hpp"
#include "pinned_memory.hpp"
#include "profiler/profiler_hooks.hpp"

namespace ferry {

using detail::contiguous_strides;
using detail::impl_of;
using detail::make_view;
using detail::new_tensor;
using detail::run_kernel;
using detail::shape_numel;
using detail::wrap_dim;

// ---- Storage ----

// Note [Profiler]: every allocation and free, with the allocator's counters
// read after it (so the free is read once the buffer is gone).
Storage::Storage(DeviceImpl& impl, std::unique_ptr<Buffer> buffer)
    : impl_(&impl), buffer_(std::move(buffer)) {
  if (profiler::detail::on()) [[unlikely]]
    profiler::detail::record_memory(*impl_, true, buffer_ ? buffer_->size() : 0);
}

Storage::~Storage() {
  if (profiler::detail::on()) [[unlikely]] {
    const std::size_t bytes = buffer_ ? buffer_->size() : 0;
    buffer_.reset();
    profiler::detail::record_memory(*impl_, false, bytes);
  }
}

std::shared_ptr<Storage> Storage::allocate(const Device& device, std::size_t bytes) {
  DeviceImpl& impl = device_impl(device);
  return std::make_shared<Storage>(impl, impl.allocate(bytes));
}

const Device& Storage::device() const { return impl_->device(); }
std::size_t Storage::nbytes() const { return buffer_->size(); }

std::unique_ptr<Buffer> Storage::exchange(DeviceImpl& impl,
                                          std::unique_ptr<Buffer> buffer) noexcept {
  impl_ = &impl;
  std::swap(buffer_, buffer);
  return buffer;
}

// ---- metadata ----

const TensorImpl& Tensor::impl() const {
  if (!impl_) throw Error("this Tensor is undefined (default-constructed); give it a value first");
  return *impl_;
}

std::int64_t Tensor::size(std::int64_t d) const {
  return sizes()[std::size_t(wrap_dim(d, dim(), "size"))];
}
std::int64_t Tensor::stride(std::int64_t d) const {
  return strides()[std::size_t(wrap_dim(d, dim(), "stride"))];
}
std::int64_t Tensor::numel() const { return shape_numel(sizes()); }
const Device& Tensor::device() const { return impl().storage->device(); }

bool Tensor::is_contiguous() const {
  return is_dense_in(sizes(), strides(), MemoryFormat::contiguous);
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

void Tensor::check_single_element() const {
  if (numel() != 1)
    throw ShapeError(
        fmt::format("item(): the tensor has {} elements (shape {}); item() needs exactly one",
                    numel(), shape_str(sizes())));
}

void Tensor::read_bytes(void* dst, std::size_t bytes) const {
  const auto* p = static_cast<const std::byte*>(storage()->buffer().host_ptr());
  std::memcpy(dst, p + std::size_t(storage_offset()) * element_size(), bytes);
}

// ---- copies ----

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  Tensor out = new_tensor(sizes(), dtype(), storage()->impl());
  run_kernel(OpId::copy, {*this}, {out});
  autograd::record_contiguous(*this, out);
  return out;
}

namespace {
// A copy of t in dtype dt, channels-last when t is (Note [Channels-last outputs]).
Tensor copy_as(const Tensor& t, DType dt) {
  const std::optional<Shape> order = detail::channels_last_order(t.sizes(), {&t});
  return autograd::untracked([&] {
    const Tensor in = order ? t.permute(*order) : t;
    Tensor out = new_tensor(in.sizes(), dt, t.storage()->impl());
    run_kernel(OpId::copy, {in}, {out});
    return order ? out.permute(detail::inverse_permutation(*order)) : out;
  });
}
}  // namespace

Tensor Tensor::clone() const {
  Tensor out = copy_as(*this, dtype());
  autograd::record_identity("clone", *this, out);
  return out;
}

Tensor Tensor::to(DType dt) const {
  if (dt == dtype()) return *this;
  Tensor out = copy_as(*this, dt);
  autograd::record_cast(*this, out);
  return out;
}

Tensor Tensor::to(const Device& dev) const {
  if (dev == device()) return *this;
  Tensor out = autograd::untracked([&] {
    // A channels-last tensor moves as it lies, its bytes in the permuted order.
    const std::optional<Shape> order = detail::channels_last_order(sizes(), {this});
    Tensor src = order ? permute(*order) : contiguous();
    Tensor o = new_tensor(src.sizes(), dtype(), dev);
    detail::copy_storage_bytes(*o.storage(), 0, *src.storage(),
                               std::size_t(src.storage_offset()) * element_size(),
                               std::size_t(numel()) * element_size());
    return order ? o.permute(detail::inverse_permutation(*order)) : o;
  });
  autograd::record_to_device(*this, out);
  return out;
}

Tensor Tensor::pin_memory() const {
  std::vector<DeviceImpl*> devices = detail::default_pinning_devices();
  if (devices.empty() && device().is_cpu())
    throw UnsupportedError(
        "pin_memory: no device here pins host memory (a CUDA GPU, or a Vulkan GPU with "
        "VK_EXT_external_memory_host whose memory the host cannot map); "
        "pin_memory(device) pins for one device regardless");
  return detail::pin_tensor(*this, devices);
}

Tensor Tensor::pin_memory(const Device& dev) const {
  if (dev.is_cpu())
    throw DeviceError("pin_memory: memory is pinned for a GPU, not for the CPU itself");
  DeviceImpl& impl = device_impl(dev);
  if (!impl.capabilities().host_registration)
    throw UnsupportedError(fmt::format(
        "pin_memory: {} cannot pin host memory (it claims no host_registration)", dev.str()));
  return detail::pin_tensor(*this, {&impl});
}

bool Tensor::is_pinned() const { return detail::is_pinned(checked_impl()->storage->buffer()); }

bool Tensor::is_pinned(const Device& dev) const {
  const Buffer& buffer = checked_impl()->storage->buffer();
  if (dev.is_cpu() || !is_available(dev.str())) return false;
  return buffer.registration(device_impl(dev)).buffer != nullptr;
}

Tensor Tensor::to(const Device& dev, DType dt) const {
  // Convert on whichever side moves fewer bytes; on the destination when the
  // source device cannot convert (a GPU holding f64: vk_f64.to(cpu, f32)).
  if (dtype_size(dt) < element_size() && dev != device() &&
      detail::can_convert(storage()->impl(), dtype(), dt))
    return to(dt).to(dev);
  return to(dev).to(dt);
}

namespace {

// Whether the view's base requires grad (for a view made with grad mode off: did when the
// view was made, which write_in_place then refuses).
bool base_requires_grad(const TensorImpl& view) {
  if (view.view_made_without_grad_of_grad_base) return true;
  const std::shared_ptr<TensorImpl> base = view.view_base.lock();
  return base && Tensor(base).requires_grad();
}

}  // namespace

// Under grad mode, a copy or fill that autograd is involved in (a source, a
// destination, or through the destination's base, that requires grad) is an
// in-place op like the others: recorded, or refused where PyTorch refuses it.
Tensor& Tensor::copy_(const Tensor& src) {
  const bool tracked = requires_grad() || src.requires_grad() || base_requires_grad(impl());
  if (is_grad_enabled() && tracked)
    return detail::write_in_place(
        "copy_", *this,
        [&](const Tensor&) {
          Tensor s = src.device() == device() ? src : src.to(device());
          return s.to(dtype()).expand(sizes()).clone();
        },
        /*reads_x=*/false);
  if (src.device() != device() && src.dtype() == dtype() && src.sizes() == sizes() &&
      is_contiguous() && src.is_contiguous()) {
    // Straight into place, no temporary: one copy on the route the two
    // storages take (a DMA into pinned memory: Note [Pinned host memory]).
    detail::copy_storage_bytes(*storage(), std::size_t(storage_offset()) * element_size(),
                               *src.storage(), std::size_t(src.storage_offset()) * element_size(),
                               std::size_t(numel()) * element_size());
    storage()->bump_version();
    return *this;
  }
  Tensor s = src.device() == device() ? src : src.to(device());
  run_kernel(OpId::copy, {s.expand(sizes())}, {*this});
  storage()->bump_version();
  return *this;
}

Tensor& Tensor::fill_(const Scalar& value) {
  const bool tracked = requires_grad() || base_requires_grad(impl());
  if (is_grad_enabled() && tracked)
    return detail::write_in_place(
        "fill_", *this,
        [&](const Tensor&) { return full(sizes(), value, {.dtype = dtype(), .device = device()}); },
        /*reads_x=*/false);
  run_kernel(OpId::fill, {}, {*this},
             Attrs{{"value", value.to_double()}, {"ivalue", value.to_int64()}});
  storage()->bump_version();
  return *this;
}

// ---- views ----

namespace {

// The strides that let `new_sizes` view memory laid out as (sizes, strides),
// or nothing when a copy is needed (PyTorch's computeStride).
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides,
                                  const Shape& new_sizes) {
  if (sizes.empty()) return contiguous_strides(new_sizes);
  Shape out(new_sizes.size());
  if (shape_numel(sizes) == 0) return contiguous_strides(new_sizes);
  std::int64_t view_d = std::int64_t(new_sizes.size()) - 1;
  std::int64_t chunk_base_stride = strides.back();
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (std::int64_t d = std::int64_t(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[std::size_t(d)];
    if (d == 0 || (sizes[std::size_t(d - 1)] != 1 &&
                   strides[std::size_t(d - 1)] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[std::size_t(view_d)] == 1)) {
        out[std::size_t(view_d)] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[std::size_t(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[std::size_t(d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Shape infer_size(const Shape& shape, std::int64_t numel, std::string_view op) {
  Shape out = shape;
  int infer = -1;
  Shape known_sizes;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0)
        throw ShapeError(fmt::format("{}: only one dim may be -1 in {}", op, shape_str(shape)));
      infer = int(i);
    } else if (out[i] < 0) {
      throw ShapeError(fmt::format("{}: invalid size {} in {}", op, out[i], shape_str(shape)));
    } else {
      known_sizes.push_back(out[i]);
    }
  }
  std::int64_t known = detail::checked_numel(known_sizes, op);
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      throw ShapeError(fmt::format("{}: shape {} is invalid for a tensor of {} elements", op,
                                   shape_str(shape), numel));
    out[std::size_t(infer)] = numel / known;
  } else if (known != numel) {
    throw ShapeError(fmt::format("{}: shape {} is invalid for a tensor of {} elements", op,
                                 shape_str(shape), numel));
  }
  return out;
}

}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  Shape s = infer_size(shape, numel(), "view");
  auto st = view_strides(sizes(), strides(), s);
  if (!st)
    throw ShapeError(
        fmt::format("view: a tensor of shape {} and strides {} cannot be viewed as {} without a "
                    "copy; use reshape()",
                    shape_str(sizes()), shape_str(strides()), shape_str(s)));
  Tensor y = make_view(*this, s, *st, storage_offset());
  autograd::record_reshape("view", *this, y);
  return y;
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape s = infer_size(shape, numel(), "reshape");
  Tensor y = autograd::untracked([&] {
    if (auto st = view_strides(sizes(), strides(), s))
      return make_view(*this, s, *st, storage_offset());
    return contiguous().view(s);
  });
  autograd::record_reshape("reshape", *this, y);
  return y;
}

Tensor Tensor::permute(const Shape& dims) const {
  if (std::int64_t(dims.size()) != dim())
    throw ShapeError(
        fmt::format("permute: {} dims given for a tensor of {} dims", dims.size(), dim()));
  Shape sz(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    auto d = std::size_t(wrap_dim(dims[i], dim(), "permute"));
    if (seen[d]) throw ShapeError(fmt::format("permute: dim {} repeats in {}", d, shape_str(dims)));
    seen[d] = true;
    sz[i] = sizes()[d];
    st[i] = strides()[d];
  }
  Tensor y = make_view(*this, sz, st, storage_offset());
  autograd::record_permute(*this, dims, y);
  return y;
}

Tensor Tensor::transpose(std::int64_t d0, std::int64_t d1) const {
  if (dim() == 0) return *this;
  auto a = std::size_t(wrap_dim(d0, dim(), "transpose")),
       b = std::size_t(wrap_dim(d1, dim(), "transpose"));
  Shape sz = sizes(), st = strides();
  std::swap(sz[a], sz[b]);
  std::swap(st[a], st[b]);
  Tensor y = make_view(*this, sz, st, storage_offset());
  autograd::record_transpose(*this, std::int64_t(a), std::int64_t(b), y);
  return y;
}

Tensor Tensor::t() const {
  if (dim() > 2)
    throw ShapeError(fmt::format("t(): expects a tensor of at most 2 dims, got {}", dim()));
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::slice(std::int64_t d, std::int64_t start, std::int64_t end,
                     std::int64_t step) const {
  auto dd = std::size_t(wrap_dim(d, dim(), "slice"));
  if (step <= 0) throw ShapeError(fmt::format("slice: step must be positive, got {}", step));
  std::int64_t n = sizes()[dd];
  auto clamp = [n](std::int64_t i) { return std::clamp<std::int64_t>(i < 0 ? i + n : i, 0, n); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  Shape sz = sizes(), st = strides();
  sz[dd] = (end - start + step - 1) / step;
  st[dd] = strides()[dd] * step;
  Tensor y = make_view(*this, sz, st, storage_offset() + start * strides()[dd]);
  autograd::record_slice(*this, std::int64_t(dd), start, end, step, y);
  return y;
}

Tensor Tensor::narrow(std::int64_t d, std::int64_t start, std::int64_t length) const {
  auto dd = std::size_t(wrap_dim(d, dim(), "narrow"));
  std::int64_t n = sizes()[dd];
  if (start < 0) start += n;
  if (start < 0 || length < 0 || start + length > n)
    throw ShapeError(fmt::format("narrow: start {} and length {} do not fit dim {} of size {}",
                                 start, length, dd, n));
  return slice(std::int64_t(dd), start, start + length);
}

Tensor Tensor::select(std::int64_t d, std::int64_t index) const {
  auto dd = std::size_t(wrap_dim(d, dim(), "select"));
  std::int64_t n = sizes()[dd];
  if (index < -n || index >= n)
    throw ShapeError(
        fmt::format("select: index {} is out of range for dim {} of size {}", index, dd, n));
  if (index < 0) index += n;
  Shape sz = sizes(), st = strides();
  sz.erase(sz.begin() + std::ptrdiff_t(dd));
  st.erase(st.begin() + std::ptrdiff_t(dd));
  Tensor y = make_view(*this, sz, st, storage_offset() + index * strides()[dd]);
  autograd::record_select(*this, std::int64_t(dd), index, y);
  return y;
}

Tensor Tensor::expand(const Shape& shape) const {
  if (std::int64_t(shape.size()) < dim())
    throw ShapeError(fmt::format("expand: cannot expand shape {} to {} (fewer dims)",
                                 shape_str(sizes()), shape_str(shape)));
  std::size_t lead = shape.size() - sizes().size();
  Shape sz(shape.size()), st(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      if (shape[i] < 0)
        throw ShapeError(
            fmt::format("expand: -1 is not allowed for a new leading dim in {}", shape_str(shape)));
      sz[i] = shape[i];
      st[i] = 0;
      continue;
    }
    std::int64_t have = sizes()[i - lead];
    std::int64_t want = shape[i] == -1 ? have : shape[i];
    if (have == want) {
      sz[i] = have;
      st[i] = strides()[i - lead];
    } else if (have == 1) {
      sz[i] = want;
      st[i] = 0;
    } else {
      throw ShapeError(fmt::format("expand: dim {} of size {} cannot expand to {} (shape {} to {})",
                                   i - lead, have, want, shape_str(sizes()), shape_str(shape)));
    }
  }
  detail::checked_numel(sz, "expand");  // no negative sizes, and a countable result
  Tensor y = make_view(*this, sz, st, storage_offset());
  autograd::record_expand(*this, y);
  return y;
}

Tensor Tensor::squeeze() const {
  Shape sz, st;
  for (std::size_t i = 0; i < sizes().size(); ++i)
    if (sizes()[i] != 1) {
      sz.push_back(sizes()[i]);
      st.push_back(strides()[i]);
    }
  Tensor y = make_view(*this, sz, st, storage_offset());
  autograd::record_reshape("squeeze", *this, y);
  return y;
}

Tensor Tensor::squeeze(std::int64_t d) const {
  if (dim() == 0) return *this;
  auto dd = std::size_t(wrap_dim(d, dim(), "squeeze"));
  if (sizes()[dd] != 1) return *this;
  Shape sz = sizes(), st = strides();
  sz.erase(sz.begin() + std::ptrdiff_t(dd));
  st.erase(st.begin() + std::ptrdiff_t(dd));
  Tensor y = make_view(*this, sz, st, storage_offset());
  autograd::record_reshape("squeeze", *this, y);
  return y;
}

Tensor Tensor::unsqueeze(std::int64_t d) const {
  auto dd = std::size_t(wrap_dim(d, dim() + 1, "unsqueeze"));
  Shape sz = sizes(), st = strides();
  std::int64_t stride = dd < sz.size() ? sz[dd] * st[dd] : 1;
  sz.insert(sz.begin() + std::ptrdiff_t(dd), 1);
  st.insert(st.begin() + std::ptrdiff_t(dd), stride);
  Tensor y = make_view(*this, sz, st, storage_offset());
  autograd::record_reshape("unsqueeze", *this, y);
  return y;
}

Tensor Tensor::flatten(std::int64_t start_dim, std::int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  auto s = wrap_dim(start_dim, dim(), "flatten"), e = wrap_dim(end_dim, dim(), "flatten");
  if (s > e) throw ShapeError(fmt::format("flatten: start_dim {} comes after end_dim {}", s, e));
  Shape shape(sizes().begin(), sizes().begin() + s);
  std::int64_t n = 1;
  for (auto i = s; i <= e; ++i) n *= sizes()[std::size_t(i)];
  shape.push_back(n);
  shape.insert(shape.end(), sizes().begin() + e + 1, sizes().end());
  return reshape(shape);
}

// ---- factories ----

Tensor empty(const Shape& shape, const TensorOptions& o) {
  return new_tensor(shape, o.dtype_or(DType::f32), o.device);
}
Tensor zeros(const Shape& shape, const TensorOptions& o) { return full(shape, 0, o); }
Tensor ones(const Shape& shape, const TensorOptions& o) { return full(shape, 1, o); }
Tensor full(const Shape& shape, const Scalar& value, const TensorOptions& o) {
  Tensor t = empty(shape, o);
  t.fill_(value);
  return t;
}
Tensor empty_like(const Tensor& t) { return new_tensor(t.sizes(), t.dtype(), impl_of(t)); }
Tensor zeros_like(const Tensor& t) { return full_like(t, 0); }
Tensor ones_like(const Tensor& t) { return full_like(t, 1); }
Tensor full_like(const Tensor& t, const Scalar& value) { return empty_like(t).fill_(value); }
Tensor scalar_tensor(const Scalar& value, const TensorOptions& o) {
  return full({}, value, {.dtype = o.dtype_or(value.natural_dtype()), .device = o.device});
}

Tensor arange(double end, const TensorOptions& o) { return arange(0, end, 1, o); }
Tensor arange(double start, double end, double step, const TensorOptions& o) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw ShapeError(fmt::format("arange: start {}, end {}, step {} do not describe a finite range",
                                 start, end, step));
  double n = std::ceil((end - start) / step);
  if (n > 9e15) throw ShapeError(fmt::format("arange: {} elements is too many", n));
  Tensor t = empty({std::int64_t(std::max(n, 0.0))}, o);
  run_kernel(OpId::arange, {}, {t}, Attrs{{"start", start}, {"step", step}});
  return t;
}

Tensor tensor_from_bytes(const void* data, std::size_t bytes, DType dtype, const Shape& shape,
                         const Device& device) {
  std::size_t want = std::size_t(shape_numel(shape)) * dtype_size(dtype);
  if (bytes != want)
    throw ShapeError(fmt::format("tensor: {} bytes of data do not fill shape {} of {} ({} bytes)",
                                 bytes, shape_str(shape), dtype_name(dtype), want));
  Tensor t = new_tensor(shape, dtype, Device::cpu());
  if (bytes) std::memcpy(t.storage()->buffer().host_ptr(), data, bytes);
  return t.to(device);
}

}  // namespace ferry
