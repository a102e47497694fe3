# Included by runtime/vulkan/CMakeLists.txt (custom-command outputs are only
# visible in the folder that defines them).
# shaders/*.comp -> SPIR-V (glslangValidator, checked with spirv-val) in two
# variants each (shaders/common.glsl), embedded into one generated C++ file
# that the Vulkan module compiles (runtime/vulkan/vk_shaders.hpp).
set(FERRY_SHADER_DIR ${PROJECT_SOURCE_DIR}/shaders)
set(FERRY_SHADER_BUILD_DIR ${CMAKE_CURRENT_BINARY_DIR}/shaders)
find_program(FERRY_GLSLANG glslangValidator REQUIRED)
find_program(FERRY_SPIRV_VAL spirv-val REQUIRED)

file(GLOB FERRY_SHADER_SOURCES CONFIGURE_DEPENDS ${FERRY_SHADER_DIR}/*.comp)
# The interfaces each shader shares with its host code (shaders/abi/abi.h).
file(GLOB FERRY_SHADER_HEADERS CONFIGURE_DEPENDS ${FERRY_SHADER_DIR}/*.glsl
     ${FERRY_SHADER_DIR}/abi/*.h)
# The ops' codes, generated from ops/ops.table (ops/generate.cmake).
list(APPEND FERRY_SHADER_HEADERS ${FERRY_GENERATED_DIR}/shaders/ferry_ops.glsl)
set(FERRY_SPV_DIR ${FERRY_SHADER_BUILD_DIR}/spv)
set(FERRY_SPV_FILES)
set(FERRY_SHADER_NAMES)
foreach(src ${FERRY_SHADER_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  list(APPEND FERRY_SHADER_NAMES ${name})
  foreach(variant full base)
    set(spv ${FERRY_SPV_DIR}/${name}.${variant}.spv)
    if(variant STREQUAL "full")
      set(defs -DFERRY_FULL=1)
    else()
      set(defs)
    endif()
    add_custom_command(
      OUTPUT ${spv}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_SPV_DIR}
      COMMAND ${FERRY_GLSLANG} -V --target-env vulkan1.1 ${defs} -I${FERRY_SHADER_DIR}
              -I${FERRY_GENERATED_DIR}/shaders -o ${spv} ${src}
      COMMAND ${FERRY_SPIRV_VAL} --target-env vulkan1.1 ${spv}
      DEPENDS ${src} ${FERRY_SHADER_HEADERS}
      COMMENT "glslang: ${name}.comp (${variant})"
      VERBATIM)
    list(APPEND FERRY_SPV_FILES ${spv})
  endforeach()
endforeach()

set(FERRY_SHADERS_CPP ${FERRY_SHADER_BUILD_DIR}/ferry_shaders.cpp)
add_custom_command(
  OUTPUT ${FERRY_SHADER_BUILD_DIR}/ferry_shaders.cpp
  COMMAND ${CMAKE_COMMAND} -DSPV_DIR=${FERRY_SPV_DIR} "-DNAMES=${FERRY_SHADER_NAMES}"
          -DOUT=${FERRY_SHADER_BUILD_DIR}/ferry_shaders.cpp -P ${FERRY_SHADER_DIR}/embed.cmake
  DEPENDS ${FERRY_SPV_FILES} ${FERRY_SHADER_DIR}/embed.cmake
  COMMENT "Embedding ${FERRY_SHADER_BUILD_DIR}/ferry_shaders.cpp"
  VERBATIM)
