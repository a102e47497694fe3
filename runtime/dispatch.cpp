// runtime/dispatch.cpp — device checks, kernel lookup, cross-device copies.
#include "dispatch.hpp"

#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <span>

#include "autograd/graph.hpp"
#include "copy_route.hpp"
#include "deferred_checks.hpp"
#include "ferry/autograd.hpp"
#include "ferry/debug.hpp"
#include "ferry/error.hpp"
#include "ferry/registry.hpp"
#include "guard.hpp"
#include "log_internal.hpp"
#include "profiler/profiler_hooks.hpp"

namespace ferry {

TensorArg tensor_arg(const Tensor& t) {
  TensorArg a;
  a.buffer = &t.storage()->buffer();
  a.offset = t.storage_offset();
  a.sizes = t.sizes();
  a.strides = t.strides();
  a.dtype = t.dtype();
  return a;
}

}  // namespace ferry

namespace ferry::detail {

void check_same_device(std::string_view op,
                       std::initializer_list<std::pair<std::string_view, const Tensor*>> args) {
  const Tensor* first = nullptr;
  std::string_view first_name;
  for (auto& [name, t] : args) {
    if (!t || !t->defined()) continue;
    if (!first) {
      first = t;
      first_name = name;
    } else if (t->device() != first->device()) {
      throw DeviceMismatchError(fmt::format(
          "{}: argument '{}' is on {} but argument '{}' is on {}; move them to one device first "
          "(e.g. {}.to({}))",
          op, name, t->device().str(), first_name, first->device().str(), name,
          first->device().str()));
    }
  }
}

void check_same_device(std::string_view op, const std::vector<Tensor>& tensors) {
  for (std::size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i].defined() && tensors[0].defined() && tensors[i].device() != tensors[0].device())
      throw DeviceMismatchError(fmt::format(
          "{}: tensors[{}] is on {} but tensors[0] is on {}; move them to one device first", op, i,
          tensors[i].device().str(), tensors[0].device().str()));
}

namespace {
std::string describe_args(const std::vector<TensorArg>& args) {
  std::string s;
  for (const auto& a : args) {
    if (!s.empty()) s += ", ";
    s += fmt::format("{}{}", dtype_name(a.dtype), shape_str(a.sizes));
  }
  return s;
}
}  // namespace

namespace {
void run_tensors(OpId op, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                 const Attrs& attrs) {
  if (outputs.empty() && inputs.empty()) throw Error(fmt::format("{}: no tensors", op_name(op)));
  const Tensor* anchor = !outputs.empty() ? &outputs[0] : &inputs[0];
  const Device& device = anchor->device();
  OpCall call;
  call.op = op;
  call.attrs = attrs;
  call.inputs.reserve(inputs.size());
  call.outputs.reserve(outputs.size());
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    if (t.device() != device)
      throw DeviceMismatchError(fmt::format("{}: an input is on {} but the op runs on {}",
                                            op_name(op), t.device().str(), device.str()));
    call.inputs.push_back(tensor_arg(t));
  }
  for (const Tensor& t : outputs) {
    if (t.device() != device)
      throw DeviceMismatchError(fmt::format("{}: an output is on {} but the op runs on {}",
                                            op_name(op), t.device().str(), device.str()));
    call.outputs.push_back(tensor_arg(t));
  }
  run_call(anchor->storage()->impl(), std::move(call));
  // Note [Higher-order gradients]: a backward kernel with no derivative of its own, met by a
  // backward pass that builds a graph, gets a node that says so if a second backward reaches it.
  if (is_grad_enabled() && op_info(op).grad == OpGrad::backward) [[unlikely]]
    autograd::record_without_derivative(op_name(op), {inputs.begin(), inputs.end()},
                                        {outputs.begin(), outputs.end()});
}
}  // namespace

void run_kernel(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                const Attrs& attrs) {
  run_tensors(op, inputs, outputs, attrs);
}

void run_kernel(OpId op, std::initializer_list<Tensor> inputs,
                std::initializer_list<Tensor> outputs, const Attrs& attrs) {
  run_tensors(op, {inputs.begin(), inputs.size()}, {outputs.begin(), outputs.size()}, attrs);
}

void run_call(DeviceImpl& impl, OpCall call) {
  const OpId op = call.op;
  const KernelFn* kernel = impl.find_kernel(op);
  if (!kernel)
    throw UnsupportedError(fmt::format("op '{}' is not implemented on device {} (inputs: {})",
                                       op_name(op), impl.device().str(),
                                       describe_args(call.inputs)));
  FERRY_DEBUG("op {} on {}: [{}] -> [{}]{}{}", op_name(op), impl.device().str(),
              describe_args(call.inputs), describe_args(call.outputs),
              call.attrs.str().empty() ? "" : " ", call.attrs.str());
  // Note [Profiler]: one relaxed load when the profiler is off.
  std::optional<profiler::detail::Work> work;
  if (profiler::detail::on()) [[unlikely]] {
    work.emplace(profiler::EventKind::op, impl, op_name(op));
    if (work->record_shapes()) work->set_inputs(describe_args(call.inputs));
  }
  if (debug::output_guards()) {
    run_guarded(impl, *kernel, std::move(call));
    return;
  }
  (*kernel)(impl, call);
}

void wait_for(DeviceImpl& d) {
  if (d.device().is_cpu()) return d.synchronize();
  profiler::detail::MaybeWork wait(profiler::EventKind::wait, d, "synchronize");
  d.synchronize();
}

void copy_storage_bytes(Storage& dst, std::size_t dst_offset, Storage& src, std::size_t src_offset,
                        std::size_t bytes) {
  if (bytes == 0) return;
  DeviceImpl& di = dst.impl();
  DeviceImpl& si = src.impl();
  const auto* src_ptr = static_cast<const std::byte*>(src.buffer().host_ptr());
  auto* dst_ptr = static_cast<std::byte*>(dst.buffer().host_ptr());
  auto done = [&](const char* how) {
    FERRY_DEBUG("copy {} -> {}: {} bytes ({})", si.device().str(), di.device().str(), bytes, how);
  };
  // Note [Profiler]: the copy, on the device that makes it.
  std::optional<profiler::detail::Work> work;
  auto profile = [&](DeviceImpl& on, const char* route, bool device_timed) {
    if (!profiler::detail::on()) [[likely]]
      return;
    work.reset();
    work.emplace(profiler::EventKind::copy, on, profiler::detail::copy_name(si, di), device_timed);
    work->set_detail(fmt::format("{} -> {}, {}", si.device().str(), di.device().str(), route));
    work->set_bytes(bytes);
  };
  // Note [Copy routes]: the one decision, shared with the transfer planner.
  switch (copy_route(si, src.buffer(), di, &dst.buffer())) {
    case CopyRoute::dma:
      profile(di, "DMA, pinned memory", true);
      dma_copy(di, dst.buffer(), dst_offset, si, src.buffer(), src_offset, bytes);
      return done("DMA, pinned memory");
    case CopyRoute::on_device:
      profile(di, "on device", true);
      di.copy_within(dst.buffer(), dst_offset, src.buffer(), src_offset, bytes);
      return done("on device");
    case CopyRoute::upload:
    case CopyRoute::host:
    case CopyRoute::gather:  // one copy: read back straight into place
      // The host reads the source's device: its deferred checks are decided first, so that
      // an error comes before the bytes reach dst (Note [Deferred checks]).
      raise_deferred_checks(si);
      if (src_ptr) {
        wait_for(si);  // pending writes to host-visible memory must land first
        profile(di, si.device().is_cpu() ? "upload" : "read from mapped memory", true);
        di.copy_from_host(dst.buffer(), dst_offset, src_ptr + src_offset, bytes);
        return done("upload");
      }
      wait_for(di);  // the host writes dst's memory itself: dst's own uses must end first
      // copy_to_host waits for the device inside: its host span is the copy's.
      profile(si, di.device().is_cpu() ? "download" : "download into mapped memory", false);
      si.copy_to_host(dst_ptr + dst_offset, src.buffer(), src_offset, bytes);
      return done("download");
    case CopyRoute::peer:
      profile(di, "peer", true);
      if (di.copy_from_peer(dst.buffer(), dst_offset, si, src.buffer(), src_offset, bytes))
        return done("peer");
      if (work) work->drop();  // this pair refused: through the host
      break;
    case CopyRoute::staged:
      break;
  }
  raise_deferred_checks(si);
  profile(di, "through the host", false);
  std::vector<std::byte> bounce(bytes);
  si.copy_to_host(bounce.data(), src.buffer(), src_offset, bytes);
  di.copy_from_host(dst.buffer(), dst_offset, bounce.data(), bytes);
  done("through the host");
}

std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim, std::string_view op) {
  std::int64_t n = ndim == 0 ? 1 : ndim;  // a 0-d tensor accepts dim 0 and -1, like PyTorch
  if (dim < -n || dim >= n)
    throw ShapeError(
        fmt::format("{}: dim {} is out of range for a tensor of {} dims (expected {} to {})", op,
                    dim, ndim, -n, n - 1));
  return dim < 0 ? dim + n : dim;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  std::int64_t s = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<std::int64_t>(sizes[i], 1);
  }
  return strides;
}

std::int64_t shape_numel(const Shape& sizes) {
  std::int64_t n = 1;
  for (auto s : sizes) n *= s;
  return n;
}

std::int64_t checked_numel(const Shape& sizes, std::string_view op) {
  std::int64_t n = 1;
  for (auto s : sizes) {
    if (s < 0)
      throw ShapeError(fmt::format("{}: shape {} has a negative size", op, shape_str(sizes)));
    if (__builtin_mul_overflow(n, s, &n))
      throw ShapeError(fmt::format("{}: shape {} has more elements than 64 bits can count", op,
                                   shape_str(sizes)));
  }
  return n;
}

Tensor new_tensor(const Shape& sizes, DType dtype, const Device& device) {
  return new_tensor(sizes, dtype, device_impl(device));
}

Tensor new_tensor(const Shape& sizes, DType dtype, DeviceImpl& device) {
  // Checked once here, so no later numel() or byte offset can overflow.
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(checked_numel(sizes, "new tensor"), std::int64_t(dtype_size(dtype)),
                             &bytes))
    throw ShapeError(
        fmt::format("cannot make a tensor of shape {} and dtype {}: its size overflows 64 bits",
                    shape_str(sizes), dtype_name(dtype)));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(device, device.allocate(std::size_t(bytes)));
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, std::int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  const auto& b = base.impl_ptr();
  if (is_grad_enabled()) {
    std::shared_ptr<TensorImpl> root = b->view_base.lock();
    impl->view_base = root ? root : b;
  }
  impl->view_made_without_grad = !is_grad_enabled() || b->view_made_without_grad;
  impl->view_made_without_grad_of_grad_base =
      b->view_made_without_grad_of_grad_base || (!is_grad_enabled() && base.requires_grad());
  return Tensor(std::move(impl));
}

}  // namespace ferry::detail
