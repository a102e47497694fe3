# Included by runtime/vulkan/CMakeLists.txt (custom-command outputs are only
# visible in the folder that defines them).
# shaders/*.comp -> SPIR-V (glslangValidator, checked with spirv-val) in two
# variants each (shaders/common.glsl), plus one module per op of the shaders in
# FERRY_PER_OP_SHADERS (Note [Per-op shader modules] in runtime/vulkan/vk_pipelines.cpp),
# embedded into one generated C++ file that the Vulkan module compiles
# (runtime/vulkan/vk_shaders.hpp).
set(FERRY_SHADER_DIR ${PROJECT_SOURCE_DIR}/shaders)
set(FERRY_SHADER_BUILD_DIR ${CMAKE_CURRENT_BINARY_DIR}/shaders)
find_program(FERRY_GLSLANG glslangValidator REQUIRED)
find_program(FERRY_SPIRV_VAL spirv-val REQUIRED)
find_program(FERRY_SPIRV_OPT spirv-opt REQUIRED)

file(GLOB FERRY_SHADER_SOURCES CONFIGURE_DEPENDS ${FERRY_SHADER_DIR}/*.comp)
# The interfaces each shader shares with its host code (shaders/abi/abi.h).
file(GLOB FERRY_SHADER_HEADERS CONFIGURE_DEPENDS ${FERRY_SHADER_DIR}/*.glsl
     ${FERRY_SHADER_DIR}/abi/*.h)
# The kit's rules written for both languages (Note [Code shared with the shaders] in
# include/ferry/kit/pool_windows.hpp), included from include/.
list(APPEND FERRY_SHADER_HEADERS ${PROJECT_SOURCE_DIR}/include/ferry/kit/pool_windows.hpp)
# The ops' codes, generated from ops/ops.table (ops/generate.cmake).
list(APPEND FERRY_SHADER_HEADERS ${FERRY_GENERATED_DIR}/shaders/ferry_ops.glsl)
# Note [Per-op shader modules]: each shader here, with the op kinds it runs (its OP
# specialization constant), is also compiled once per op of those kinds that the Vulkan backend
# dispatches (FERRY_VULKAN_OPS_<kind>, from ops/ops.table), in place of the shader's one full
# module, with OP a constant (FERRY_FIXED_OP); spirv-opt then inlines and drops the other ops' code. The passes
# only remove code and move values into registers: no arithmetic is reassociated, and
# `precise` (NoContraction) stays on what it marks.
# The ops a shader lists on its `// ferry-f64-ops:` lines also get an f64 module, compiled with
# FERRY_F64 as well (Note [f64 on Vulkan] in runtime/vulkan/vk_pipelines.cpp): one per op here,
# one of the whole shader for the shaders not listed here (below).
set(FERRY_PER_OP_SHADERS "elementwise:unary,binary,compare,activation_backward,where,copy,fill,arange"
    "reduce:reduce" "scan:scan" "random:random")
# Note [Subgroup row reductions] (shaders/subgroup.glsl): these shaders are also compiled with
# FERRY_SUBGROUP, as the shader <name>_subgroup with every module <name> has; the devices whose
# subgroups can shuffle take those modules (runtime/vulkan/vk_pipelines.cpp).
set(FERRY_SUBGROUP_SHADERS reduce softmax layer_norm layer_norm_backward)
# A per-op shader's subgroup variant is per-op too, with the same op kinds.
foreach(entry ${FERRY_PER_OP_SHADERS})
  string(REGEX REPLACE ":.*" "" _name ${entry})
  if(_name IN_LIST FERRY_SUBGROUP_SHADERS)
    string(REGEX REPLACE "^([^:]+):" "\\1_subgroup:" _entry ${entry})
    list(APPEND FERRY_PER_OP_SHADERS ${_entry})
  endif()
endforeach()
# ferry_shader_source(NAME SRC_VAR DEFS_VAR): the source file of shader NAME and the -D
# arguments that make it (a <name>_subgroup shader is <name>.comp with FERRY_SUBGROUP).
function(ferry_shader_source name src_var defs_var)
  if(name MATCHES "^(.*)_subgroup$" AND CMAKE_MATCH_1 IN_LIST FERRY_SUBGROUP_SHADERS)
    set(${src_var} ${FERRY_SHADER_DIR}/${CMAKE_MATCH_1}.comp PARENT_SCOPE)
    set(${defs_var} -DFERRY_SUBGROUP=1 PARENT_SCOPE)
  else()
    set(${src_var} ${FERRY_SHADER_DIR}/${name}.comp PARENT_SCOPE)
    set(${defs_var} "" PARENT_SCOPE)
  endif()
endfunction()
set(FERRY_SHADER_NAMES_ALL)
foreach(src ${FERRY_SHADER_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  list(APPEND FERRY_SHADER_NAMES_ALL ${name})
  if(name IN_LIST FERRY_SUBGROUP_SHADERS)
    list(APPEND FERRY_SHADER_NAMES_ALL ${name}_subgroup)
  endif()
endforeach()
set(FERRY_PER_OP_SHADER_NAMES)
foreach(entry ${FERRY_PER_OP_SHADERS})
  string(REGEX REPLACE ":.*" "" _name ${entry})
  list(APPEND FERRY_PER_OP_SHADER_NAMES ${_name})
endforeach()
set(FERRY_SPV_DIR ${FERRY_SHADER_BUILD_DIR}/spv)
# Note [Shader cache] in tools/spv_compile.sh: a folder that build folders share.
set(FERRY_SHADER_CACHE "" CACHE PATH
    "Folder of compiled shader modules shared between build folders (empty: none)")
set(_spv_cache_arg)
if(FERRY_SHADER_CACHE)
  set(_spv_cache_arg --cache=${FERRY_SHADER_CACHE})
endif()

# ferry_add_spv(NAME SRC COMMENT PASSES [glslang -D arguments]): the command that compiles
# SRC to ${FERRY_SPV_DIR}/NAME.spv (tools/spv_compile.sh), spirv-opt running PASSES (a comma
# list, or "" for none) in between.
function(ferry_add_spv name src comment passes)
  set(spv ${FERRY_SPV_DIR}/${name}.spv)
  set(_passes_arg)
  if(passes)
    set(_passes_arg --passes=${passes})
  endif()
  add_custom_command(
    OUTPUT ${spv}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_SPV_DIR}
    COMMAND bash ${PROJECT_SOURCE_DIR}/tools/spv_compile.sh --glslang=${FERRY_GLSLANG}
            --spirv-opt=${FERRY_SPIRV_OPT} --spirv-val=${FERRY_SPIRV_VAL} --out=${spv}
            ${_spv_cache_arg} ${_passes_arg} ${src} ${ARGN} -I${FERRY_SHADER_DIR}
            -I${FERRY_GENERATED_DIR}/shaders -I${PROJECT_SOURCE_DIR}/include
    DEPENDS ${src} ${FERRY_SHADER_HEADERS} ${PROJECT_SOURCE_DIR}/tools/spv_compile.sh
            ${PROJECT_SOURCE_DIR}/tools/shader_cache.sh
    COMMENT "${comment}"
    VERBATIM)
  set(FERRY_SPV_FILES ${FERRY_SPV_FILES} ${spv} PARENT_SCOPE)
endfunction()

set(FERRY_SPV_FILES)
set(FERRY_SHADER_NAMES)
foreach(name ${FERRY_SHADER_NAMES_ALL})
  ferry_shader_source(${name} src _sg_defs)
  list(APPEND FERRY_SHADER_NAMES ${name})
  set(_variants full base)
  if(name IN_LIST FERRY_PER_OP_SHADER_NAMES)
    set(_variants base)  # its full variant is its per-op modules
  endif()
  foreach(variant ${_variants})
    set(defs ${_sg_defs})
    if(variant STREQUAL "full")
      list(APPEND defs -DFERRY_FULL=1)
    endif()
    ferry_add_spv(${name}.${variant} ${src} "glslang: ${name} (${variant})" "" ${defs})
  endforeach()
endforeach()

# The first two passes drop the other ops' functions before anything is inlined: glslang's
# module still holds every op of the shader, and inlining them all first made spirv-opt 3x
# slower (189 modules: 132 s against 41 s), for the same module up to the order of phi
# operands and the empty switch that merge-return wraps around an inlined call.
set(_per_op_passes eliminate-dead-branches,eliminate-dead-functions,
    merge-return,inline-entry-points-exhaustive,eliminate-dead-functions,
    eliminate-local-single-block,eliminate-local-single-store,eliminate-local-multi-store,
    ccp,eliminate-dead-branches,eliminate-dead-code-aggressive,merge-blocks,
    eliminate-dead-functions)
string(REPLACE ";" "" _per_op_passes "${_per_op_passes}")
set(FERRY_OP_MODULES)
foreach(entry ${FERRY_PER_OP_SHADERS})
  string(REPLACE ":" ";" _parts ${entry})
  list(GET _parts 0 name)
  list(GET _parts 1 _kinds)
  string(REPLACE "," ";" _kinds ${_kinds})
  ferry_shader_source(${name} src _sg_defs)
  file(STRINGS ${src} _f64_lines REGEX "^// ferry-f64-ops:")
  string(REPLACE "// ferry-f64-ops:" "" _f64_ops "${_f64_lines}")
  string(REGEX REPLACE "[ ;]+" ";" _f64_ops "${_f64_ops}")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src})
  foreach(kind ${_kinds})
    foreach(op ${FERRY_VULKAN_OPS_${kind}})
      string(REPLACE "=" ";" _op ${op})
      list(GET _op 0 op_name)
      list(GET _op 1 op_code)
      set(_variants full)
      if(op_name IN_LIST _f64_ops)
        list(APPEND _variants f64)
        list(REMOVE_ITEM _f64_ops ${op_name})
      endif()
      foreach(variant ${_variants})
        set(defs -DFERRY_FULL=1 -DFERRY_FIXED_OP=${op_code}u ${_sg_defs})
        if(variant STREQUAL "f64")
          list(APPEND defs -DFERRY_F64=1)
        endif()
        ferry_add_spv(${name}.${variant}.${op_name} ${src}
                      "glslang + spirv-opt: ${name} for ${op_name} alone (${variant})"
                      ${_per_op_passes} ${defs})
        list(APPEND FERRY_OP_MODULES "${name}:${op_name}:${op_code}:${variant}:${name}.${variant}.${op_name}")
      endforeach()
    endforeach()
  endforeach()
  if(_f64_ops)
    message(FATAL_ERROR "${src}: ferry-f64-ops names ops it does not run: ${_f64_ops}")
  endif()
endforeach()

# The other shaders with `// ferry-f64-ops:` lines get one f64 module of the whole shader, which
# each op listed there runs (they pick their work by other specialization constants).
foreach(name ${FERRY_SHADER_NAMES_ALL})
  ferry_shader_source(${name} src _sg_defs)
  file(STRINGS ${src} _f64_lines REGEX "^// ferry-f64-ops:")
  if(name IN_LIST FERRY_PER_OP_SHADER_NAMES OR NOT _f64_lines)
    continue()
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src})
  string(REPLACE "// ferry-f64-ops:" "" _f64_ops "${_f64_lines}")
  string(REGEX REPLACE "[ ;]+" ";" _f64_ops "${_f64_ops}")
  list(REMOVE_ITEM _f64_ops "")
  ferry_add_spv(${name}.f64 ${src} "glslang: ${name} (f64)" "" -DFERRY_FULL=1 -DFERRY_F64=1
                ${_sg_defs})
  foreach(op_name ${_f64_ops})
    set(_match ${FERRY_VULKAN_OPS})
    list(FILTER _match INCLUDE REGEX "^${op_name}=")
    if(NOT _match)
      message(FATAL_ERROR "${src}: ferry-f64-ops names ${op_name}, which Vulkan does not run")
    endif()
    string(REPLACE "${op_name}=" "" op_code ${_match})
    list(APPEND FERRY_OP_MODULES "${name}:${op_name}:${op_code}:f64:${name}.f64")
  endforeach()
endforeach()

set(FERRY_SHADERS_CPP ${FERRY_SHADER_BUILD_DIR}/ferry_shaders.cpp)
add_custom_command(
  OUTPUT ${FERRY_SHADER_BUILD_DIR}/ferry_shaders.cpp
  COMMAND ${CMAKE_COMMAND} -DSPV_DIR=${FERRY_SPV_DIR} "-DNAMES=${FERRY_SHADER_NAMES}"
          "-DOP_MODULES=${FERRY_OP_MODULES}" "-DPER_OP_NAMES=${FERRY_PER_OP_SHADER_NAMES}"
          -DOUT=${FERRY_SHADER_BUILD_DIR}/ferry_shaders.cpp -P ${FERRY_SHADER_DIR}/embed.cmake
  DEPENDS ${FERRY_SPV_FILES} ${FERRY_SHADER_DIR}/embed.cmake ${FERRY_SHADER_DIR}/embed_words.cmake
  COMMENT "Embedding ${FERRY_SHADER_BUILD_DIR}/ferry_shaders.cpp"
  VERBATIM)
