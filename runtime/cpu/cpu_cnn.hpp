// runtime/cpu/cpu_cnn.hpp — what the CPU's CNN layer kernels (cpu_kernels_cnn.cpp,
// cpu_kernels_pool.cpp) share: their threads' grain and their layout check.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <initializer_list>

#include "cpu/cpu_loops.hpp"
#include "ferry/backend.hpp"
#include "ferry/error.hpp"
#include "ferry/memory_format.hpp"

namespace ferry::cpu {

// Work per thread before the channels (or planes) are split.
inline std::int64_t grain_for(std::int64_t per_item) {
  return std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(per_item, 1));
}

// The call's activations dense in the layout its attributes say (docs/kernel-contract.md).
inline MemoryFormat check_activations(const OpCall& call,
                                      std::initializer_list<const TensorArg*> ts) {
  const MemoryFormat f = activation_format(call.attrs, call.inputs.at(0).ndim());
  for (const TensorArg* t : ts)
    if (!t->is_contiguous(f))
      throw Error(fmt::format("{}: the cpu kernel takes dense {} activations, got strides {}",
                              call.name(), memory_format_name(f), fmt::join(t->strides, ", ")));
  return f;
}

}  // namespace ferry::cpu
