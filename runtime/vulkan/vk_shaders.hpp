// runtime/vulkan/vk_shaders.hpp — the SPIR-V of shaders/*.comp, compiled at
// build time (shaders/CMakeLists.txt) and embedded in the module, so only the
// build machine needs glslang.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::vulkan {

struct EmbeddedShader {
  const char* name;           // "elementwise" for shaders/elementwise.comp
  const std::uint32_t* full;  // compiled with FERRY_FULL (i64, 8/16-bit storage); null
                              // for a shader made per op (Note [Per-op shader modules])
  std::size_t full_words;
  const std::uint32_t* base;  // f32/i32 only
  std::size_t base_words;
};

extern const EmbeddedShader kEmbeddedShaders[];
extern const std::size_t kEmbeddedShaderCount;

// One op of a shader alone, full variant (Note [Per-op shader modules] in vk_pipelines.cpp).
struct EmbeddedOpShader {
  const char* name;  // the shader's name, as EmbeddedShader::name
  std::uint32_t op;  // the op's code (ferry::OpId), the shader's OP constant
  bool f64;          // compiled with FERRY_F64 (Note [f64 on Vulkan] in vk_pipelines.cpp)
  const std::uint32_t* words;
  std::size_t word_count;
};

extern const EmbeddedOpShader kEmbeddedOpShaders[];
extern const std::size_t kEmbeddedOpShaderCount;

}  // namespace ferry::vulkan
