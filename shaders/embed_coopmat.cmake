# cmake -DSPV_DIR=... -DMODULES=name:emulated:bf16:b_layout:wm:wn:tm:tn:bk:head_dim:pass:f32;...
#       -DNOTE=why
#       -DOUT=file.cpp -P embed_coopmat.cmake
# Writes the SPIR-V words of shaders/coopmat.cmake's modules (SPV_DIR/<name>.spv) and the table
# runtime/vulkan/vk_coopmat_shaders.hpp declares; with no MODULES an empty table, and NOTE
# (why the build had no Slang) as kCoopmatBuildNote.
cmake_minimum_required(VERSION 3.25)  # a -P script: the policies of the build
set(EMBED_PREFIX coopmat)
include(${CMAKE_CURRENT_LIST_DIR}/embed_words.cmake)
set(body "")
set(table "")
set(max_layout 0)
foreach(module ${MODULES})
  string(REPLACE ":" ";" parts ${module})
  list(POP_FRONT parts name emulated bf16 b_layout wm wn tm tn bk head_dim pass f32)
  if(emulated)
    set(emulated true)
  else()
    set(emulated false)
  endif()
  if(bf16)
    set(bf16 true)
  else()
    set(bf16 false)
  endif()
  if(f32)
    set(f32 true)
  else()
    set(f32 false)
  endif()
  if(b_layout GREATER max_layout)
    set(max_layout ${b_layout})
  endif()
  embed_words(${SPV_DIR}/${name}.spv k_${name})
  string(APPEND table "    {.name = \"${name}\", .emulated = ${emulated}, "
         ".b = CoopmatOperandB(${b_layout}), .bf16 = ${bf16}, .warps_m = ${wm}, .warps_n = ${wn}, .tm = ${tm}, "
         ".tn = ${tn}, .bk = ${bk}, .head_dim = ${head_dim}, .attention_pass = ${pass}, "
         ".f32_result = ${f32}, "
         ".words = k_${name}, "
         ".word_count = std::size(k_${name})},\n")
endforeach()
if(MODULES)
  string(PREPEND table "const EmbeddedCoopmatShader kEmbeddedCoopmatShaders[] = {\n")
  string(APPEND table "};\nconst std::size_t kEmbeddedCoopmatShaderCount = std::size(kEmbeddedCoopmatShaders);\n")
  # The module table (vk_kernels_coopmat.cpp) has kCoopmatLayouts slots per kind: a layout
  # shaders/coopmat.cmake builds beyond them fails here rather than landing in another's slot.
  string(APPEND table "static_assert(${max_layout} < kCoopmatLayouts, \"shaders/coopmat.cmake builds "
         "a B layout past vk_coopmat_shaders.hpp's CoopmatOperandB\");\n")
else()  # C++ has no empty arrays: one unused entry
  set(table "const EmbeddedCoopmatShader kEmbeddedCoopmatShaders[1] = {};\n")
  string(APPEND table "const std::size_t kEmbeddedCoopmatShaderCount = 0;\n")
endif()
# NOTE as a C++ string literal.
string(REPLACE "\\" "\\\\" note "${NOTE}")
string(REPLACE "\"" "\\\"" note "${note}")
string(APPEND body "}  // namespace\n\n${table}const char* const kCoopmatBuildNote = \"${note}\";\n\n")
string(APPEND body "}  // namespace ferry::vulkan\n")
embed_write_source(${OUT} "shaders/embed_coopmat.cmake from shaders/*_coopmat.slang" vulkan/vk_coopmat_shaders.hpp)
