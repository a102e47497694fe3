// runtime/vulkan/vk_spirv.hpp — what the runtime reads from a SPIR-V module itself, so that no
// figure about a kernel is kept twice (once in the shader, once in C++).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace ferry::vulkan {

// The bytes of shared memory a module declares: its Workgroup-storage variables, each of its
// type's size (scalars, vectors, arrays of a constant length and structs, whose members are
// summed: the kernels' shared arrays are of 16-byte vectors and floats, with no padding
// between). `what` names the module in errors. Throws ferry::FormatError for words that are
// not a SPIR-V module, or a shared variable of a type it cannot size.
std::uint64_t spirv_shared_bytes(std::span<const std::uint32_t> words, const std::string& what);

}  // namespace ferry::vulkan
