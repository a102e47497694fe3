// runtime/dispatch.hpp — from a resolved op to the kernel of the inputs' device.
// Internal to the core: op front-ends (runtime/ops_*.cpp) do shape and dtype
// work, then call run_kernel (Note [Kernel contract] in ferry/backend.hpp).
#pragma once

#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/tensor.hpp"

namespace ferry::detail {

// Synchronizes `d` before the host touches its memory: a host wait in the profile (Note
// [Profiler]), except on the CPU, whose work is done already. ferry::synchronize(Device) less
// the registry's lookup, for callers that hold the device (a storage's impl()).
void wait_for(DeviceImpl& d);

// DeviceMismatchError unless every defined tensor is on one device; names the
// op and the arguments.
void check_same_device(std::string_view op,
                       std::initializer_list<std::pair<std::string_view, const Tensor*>> args);
void check_same_device(std::string_view op, const std::vector<Tensor>& tensors);

// Runs `op` on the device of outputs (and inputs). UnsupportedError when the
// device lacks the kernel. Undefined input tensors are skipped.
void run_kernel(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                const Attrs& attrs = {});
// The same for braced lists, `run_kernel(op, {x}, {out})`, without a vector's
// allocation on every op.
void run_kernel(OpId op, std::initializer_list<Tensor> inputs,
                std::initializer_list<Tensor> outputs, const Attrs& attrs = {});
// Runs a call whose arguments the front-end made itself, for views that need no
// Tensor of their own (matmul's operands seen as a batch of one): the caller has
// checked that every argument lives on `device`. run_kernel ends here too.
void run_call(DeviceImpl& device, OpCall call);

// Whether `device` converts `from` to `to` (its copy kernel takes both).
inline bool can_convert(const DeviceImpl& device, DType from, DType to) {
  return device.supports(OpId::copy, from) && device.supports(OpId::copy, to);
}

// Copies `bytes` from one storage to another on any pair of devices: a
// same-device copy, a peer copy, or through the host (the core's fallback).
void copy_storage_bytes(Storage& dst, std::size_t dst_offset, Storage& src, std::size_t src_offset,
                        std::size_t bytes);

// Normalises a possibly negative dim against `ndim` (ShapeError when out of range).
std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim, std::string_view op);
// Contiguous strides of a shape.
Shape contiguous_strides(const Shape& sizes);
std::int64_t shape_numel(const Shape& sizes);
// shape_numel for sizes a caller gave: ShapeError when a size is negative or
// the product overflows 63 bits.
std::int64_t checked_numel(const Shape& sizes, std::string_view op);
// A new contiguous tensor of the given shape and dtype on `device`. Front-ends
// pass the DeviceImpl of an input they hold (impl_of): every op output is made
// here, and naming the device by its Device would look it up in the registry.
Tensor new_tensor(const Shape& sizes, DType dtype, DeviceImpl& device);
Tensor new_tensor(const Shape& sizes, DType dtype, const Device& device);
inline DeviceImpl& impl_of(const Tensor& t) { return t.storage()->impl(); }
// The same storage viewed with other metadata.
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, std::int64_t offset);

}  // namespace ferry::detail
