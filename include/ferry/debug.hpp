// ferry/debug.hpp — switches that make the runtime check itself; for backend
// authors and the conformance suite, slow by design.
//
// Note [Output guards]
// With output guards on, every kernel writes its outputs into a scratch buffer
// on the same device that has guard bytes of a known pattern before and after
// the output's memory span. After the kernel the core reads the guards back;
// a changed guard raises BackendError (code "out-of-bounds-write") naming the
// op, the device and the output, and the output span is copied to its real
// place only when the guards are intact. This catches kernels that write past
// either end of their output, on any backend, without help from the backend.
#pragma once

#include <cstddef>

#include "ferry/config.hpp"
#include "ferry/device.hpp"

namespace ferry::debug {

void set_output_guards(bool enabled);
bool output_guards();
// Bytes of guard on each side (a multiple of every element size).
inline constexpr std::size_t kGuardBytes = 256;

// While one lives, composite ops on this thread run their composition even
// where the device has a fused kernel (Note [Composite ops] in ferry/op.hpp):
// the conformance suite's reference for a fused kernel. Scopes nest.
class FERRY_EXPORT CompositesOnly {
 public:
  CompositesOnly();
  ~CompositesOnly();
  CompositesOnly(const CompositesOnly&) = delete;
  CompositesOnly& operator=(const CompositesOnly&) = delete;

 private:
  bool previous_;
};
FERRY_EXPORT bool composites_only();

// Where a check of values that live on a device (an index out of range in gather,
// index_select, take or embedding; a class target out of range in nll_loss and cross_entropy;
// binary_cross_entropy's probabilities, gaussian_nll_loss's variances) raises its error: on GPUs,
// at the thread's next read of the device, so that the host need not wait for the device at every
// such op (Note [Deferred checks] in runtime/deferred_checks.hpp); with sync checks on, at the
// call, as on the CPU. Off unless FERRY_SYNC_CHECKS=1.
FERRY_EXPORT void set_sync_checks(bool enabled);
FERRY_EXPORT bool sync_checks();
// A thread holds at most this many pending checks; the next one reads them all.
inline constexpr std::size_t kMaxDeferredChecks = 64;

}  // namespace ferry::debug
