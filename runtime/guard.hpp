// runtime/guard.hpp — running a kernel with guarded outputs (Note [Output guards]).
#pragma once

#include "ferry/backend.hpp"

namespace ferry::detail {
void run_guarded(DeviceImpl& impl, const KernelFn& kernel, OpCall call);
}  // namespace ferry::detail
