// shaders/abi/abi.h — how a shader and the host code that launches it share one
// declaration of what crosses between them. Each shaders/<name>.comp has an
// interface file shaders/abi/<name>.h that both sides include: the shader
// (GLSL, through GL_GOOGLE_include_directive) and its kernel file in
// runtime/vulkan/ (C++). This file gives the few words those interface files
// are written in a meaning in each language.
//
// Note [Shader interfaces]
// A push-constant block, the order of a shader's specialization constants, and
// the codes the host passes (dtypes, modes, flags) are written once, in the
// shader's interface file, instead of once in GLSL and again in C++ where
// nothing compared the two (a Slang kernel includes them too, where it shares
// a GLSL shader's interface: __SLANG__ below):
//   FERRY_PUSH_CONSTANTS(Name) { members } FERRY_END_PUSH_CONSTANTS(Name)
//       GLSL: the block `layout(push_constant) uniform Name {...} p;`
//       C++:  struct ferry::vulkan::abi::Name with the same members and layout
//   FERRY_SPEC_CONSTANTS(Name, LIST), LIST(X) being X(id, type, NAME, default)...
//       GLSL: `layout(constant_id = id) const type NAME = default;` for each
//       C++:  struct Name { uint WG; uint NAME...; values() }: the workgroup
//             size (constant 0) and each constant, in id order, as the
//             dispatch passes them; ids must be 1, 2, 3... (checked at compile
//             time), and designated initializers must name them in that order
//   FERRY_CODE(NAME, value)
//       GLSL: `const uint NAME = value;`   C++: `abi::NAME`
// Members are uint, int, float, uvec2 and uvec4 and arrays of them. Push
// constants follow std430, whose alignments (4 for scalars and their arrays,
// 8 for uvec2, 16 for uvec4) are the C++ types' below; vec3 types, whose
// std430 size and alignment differ, are not defined here, so they cannot be
// used.
#ifndef FERRY_SHADER_ABI_H
#define FERRY_SHADER_ABI_H

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ferry::vulkan::abi {
using uint = std::uint32_t;
struct alignas(8) uvec2 {
  uint v[2];
  uint& operator[](std::size_t i) { return v[i]; }
  uint operator[](std::size_t i) const { return v[i]; }
};
struct alignas(16) uvec4 {
  uint v[4];
  uint& operator[](std::size_t i) { return v[i]; }
  uint operator[](std::size_t i) const { return v[i]; }
};
inline constexpr uint kMaxPushBytes = 128;  // the limit every device guarantees

// Whether the ids of a spec-constant list are 0, 1, 2, ...: the position of each
// value in DispatchDesc::spec is its constant_id.
template <std::size_t N> constexpr bool ids_are_positions(const uint (&ids)[N]) {
  for (std::size_t i = 0; i < N; ++i)
    if (ids[i] != i) return false;
  return true;
}
}  // namespace ferry::vulkan::abi

#define FERRY_PUSH_CONSTANTS(Name) \
  namespace ferry::vulkan::abi {   \
  struct Name
#define FERRY_END_PUSH_CONSTANTS(Name)                                      \
  ;                                                                         \
  static_assert(sizeof(Name) <= kMaxPushBytes, #Name " exceeds 128 bytes"); \
  }
#define FERRY_SPEC_MEMBER_(id, type, name, dflt) uint name = uint(dflt);
#define FERRY_SPEC_VALUE_(id, type, name, dflt) , name
#define FERRY_SPEC_ID_(id, type, name, dflt) , id
#define FERRY_SPEC_CONSTANTS(Name, LIST)                                                   \
  namespace ferry::vulkan::abi {                                                           \
  struct Name {                                                                            \
    uint WG = 0; /* constant_id 0: the workgroup size (local_size_x_id = 0) */             \
    LIST(FERRY_SPEC_MEMBER_)                                                               \
    std::vector<uint> values() const { return {WG LIST(FERRY_SPEC_VALUE_)}; }              \
    static constexpr uint kIds[] = {0 LIST(FERRY_SPEC_ID_)};                               \
  };                                                                                       \
  static_assert(ids_are_positions(Name::kIds), #Name ": constant ids must be 1, 2, 3..."); \
  }
#define FERRY_CODE(name, value)       \
  namespace ferry::vulkan::abi {      \
  inline constexpr uint name = value; \
  }

#elif defined(__SLANG__)  // the cooperative-matrix kernels (shaders/*.slang)

#define FERRY_PUSH_CONSTANTS(Name) struct Name
#define FERRY_END_PUSH_CONSTANTS(Name) \
  ;                                    \
  [[vk::push_constant]] ConstantBuffer<Name> p;
#define FERRY_SPEC_DECL_(id, type, name, dflt) [[vk::constant_id(id)]] const type name = dflt;
#define FERRY_SPEC_CONSTANTS(Name, LIST) LIST(FERRY_SPEC_DECL_)  // [numthreads] is the kernel's
#define FERRY_CODE(name, value) static const uint name = value;

#else  // GLSL

#define FERRY_PUSH_CONSTANTS(Name) layout(push_constant) uniform Name
#define FERRY_END_PUSH_CONSTANTS(Name) p;
#define FERRY_SPEC_DECL_(id, type, name, dflt) layout(constant_id = id) const type name = dflt;
#define FERRY_SPEC_CONSTANTS(Name, LIST) \
  layout(local_size_x_id = 0) in;        \
  LIST(FERRY_SPEC_DECL_)
#define FERRY_CODE(name, value) const uint name = value;

#endif

// Dtype codes: ferry::vulkan::dtype_code() maps ferry::DType onto these; the
// shaders' loads and stores (common.glsl) switch on them.
FERRY_CODE(DT_F32, 0u)
FERRY_CODE(DT_F16, 1u)
FERRY_CODE(DT_BF16, 2u)
FERRY_CODE(DT_I32, 3u)
FERRY_CODE(DT_I64, 4u)
FERRY_CODE(DT_U8, 5u)
FERRY_CODE(DT_BOOL, 6u)
FERRY_CODE(DT_I8, 7u)
FERRY_CODE(DT_I16, 8u)
FERRY_CODE(DT_F64, 9u)  // only in the f64 modules (Note [f64 on Vulkan] in vk_pipelines.cpp)

#endif  // FERRY_SHADER_ABI_H
