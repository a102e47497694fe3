// runtime/deferred_checks.hpp — checks of values that live on a device, read when the host next
// reads that device instead of at the call. Internal to the core.
//
// Note [Deferred checks]
// Some arguments are wrong only in their values: an index past its dim (gather, index_select,
// take, embedding), a class target past the classes (nll_loss, cross_entropy), a probability
// outside [0, 1] (binary_cross_entropy), a negative variance (gaussian_nll_loss). Their
// front-ends reduce the values on the device to a few numbers (the least and the greatest index;
// whether any value is out of range) and the host decides. Reading those numbers at the call is
// a host wait for everything queued before it: a training step on a GPU stalled at its embedding
// and at its loss, every step, and the host could not run ahead (the largest wait in a profile of
// the MLP sample on vulkan:0, docs/profiling.md). So on a device whose work may still be queued
// (every device but the CPU, whose kernels are done when they return) the numbers are read at
// this thread's next read of that device instead: ferry::synchronize(device), a copy out of it
// (to_vector, item, .to(cpu), printing), or a migration of tensors on it. That read raises the
// check's error (a ShapeError, or a ValueError for a loss's values), saying which op made it,
// before it gives anything back; PyTorch's CUDA kernels raise their device-side asserts the same
// way, at a later call. Meanwhile the kernels keep their contract for bad values — never a read
// or write outside a buffer; gather and index_select write 0 for an index out of range — so the
// results made in between are wrong but nothing is corrupted.
//
// What is deferred are the ops that write a fresh tensor. In-place ops (scatter_, index_copy_,
// index_put_, embedding_renorm_) check at the call, so that a bad index never leaves a tensor the
// caller holds half written. A thread holds at most debug::kMaxDeferredChecks pending checks;
// the next one reads them all at once (one wait), so a loop that never reads its device still
// sees its errors. A pending check holds its numbers' device memory (16 bytes) until it is read.
// Checks pending when a thread ends are dropped: no later read can raise them.
// `debug::set_sync_checks(true)`, or FERRY_SYNC_CHECKS=1 in the environment, reads every check
// at its call, as the CPU does (what CUDA_LAUNCH_BLOCKING=1 is for in PyTorch: the error at the
// line that caused it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "ferry/backend.hpp"
#include "ferry/tensor.hpp"

namespace ferry::detail {

// The message of the error that `values` (the check's numbers, read back) call for, or an
// empty string where they are fine.
using CheckVerdict = std::function<std::string(std::span<const std::int64_t> values)>;

// The error a failed check raises.
enum class CheckError { shape, value };  // ShapeError, ValueError

// When it is decided: an op that writes a fresh tensor lets the check wait for the thread's next
// read of the device; one that writes into a tensor the caller holds decides at the call, so
// that a bad value leaves nothing half written.
enum class CheckTime { at_call, deferrable };

// Decides `verdict` on `values` (a small i64 tensor computed on its device): at the call on the
// CPU, under sync checks or for CheckTime::at_call, else at this thread's next read of that
// device.
void check_values(const Tensor& values, CheckVerdict verdict, CheckError error = CheckError::shape,
                  CheckTime when = CheckTime::deferrable);

// Reads and decides this thread's pending checks of `device`, oldest first: the error of the
// first that fails, and the rest are dropped. Called where the host reads `device` (a copy out
// of it, synchronize, a migration), before that read gives anything back; it returns at once
// when none is pending.
void raise_deferred_checks(DeviceImpl& device);

}  // namespace ferry::detail
