# Included by runtime/vulkan/CMakeLists.txt after shaders.cmake (FERRY_SHADER_DIR,
# FERRY_SHADER_BUILD_DIR).
# shaders/gemm_coopmat.slang (with the shaders/coopmat_*.slang it includes) -> SPIR-V with
# Slang's compiler, embedded in one generated C++
# file that the Vulkan module compiles (runtime/vulkan/vk_coopmat_shaders.hpp; Note
# [Cooperative-matrix GEMM] in runtime/vulkan/vk_kernels_coopmat.cpp). Debian packages no
# Slang, so the configure step takes the compiler library from PyPI's slangpy wheel
# (tools/fetch_slang.py); where it cannot, the module is built without these kernels and
# kCoopmatBuildNote says why.
# The environment's FERRY_COOPMAT is the default, so tools/test.sh and tools/demo.sh take it.
set(_coopmat_default AUTO)
if(DEFINED ENV{FERRY_COOPMAT})
  set(_coopmat_default $ENV{FERRY_COOPMAT})
endif()
set(FERRY_COOPMAT ${_coopmat_default} CACHE STRING
    "Cooperative-matrix GEMM modules (Slang): AUTO (when Slang can be fetched), ON, OFF")
set_property(CACHE FERRY_COOPMAT PROPERTY STRINGS AUTO ON OFF)
if(NOT FERRY_COOPMAT MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "FERRY_COOPMAT is AUTO, ON or OFF, not '${FERRY_COOPMAT}'")
endif()
# In the source tree's build/ by default, so every build folder shares one download.
set(FERRY_SLANG_DIR ${PROJECT_SOURCE_DIR}/build/slang CACHE PATH
    "Where tools/fetch_slang.py puts Slang's compiler library and headers")
# The tile variants, name:WARPS_M:WARPS_N:TM:TN:BK (shaders/gemm_coopmat.slang). Each is built
# twenty times: B's rows contiguous, B transposed (B_TRANS, "_bt"), a convolution's input
# (CONV=1, "_conv"), its output's gradient (CONV=2, "_conv_dgrad") or its input's im2col
# transposed for the weight's gradient (CONV=3, "_conv_wgrad"), each with f16 or bf16 operands
# and result (BF16=1, "_bf16"), on cooperative matrices or in the scalar emulation
# ("_emulated").
# The first is the fastest measured (the prototype's sweep on an H100, docs/gpu-results.md:
# 170 TFLOP/s at 4096^3, against 124 for its BK = 16 form); that one needs 37 KiB of shared
# memory (40 with B transposed), so devices with 32 KiB (lavapipe among them) take the second,
# same blocks in 21 KiB (24); the third keeps smaller products busy (choose_coopmat_tile in
# runtime/vulkan/vk_policy.hpp). What each module needs is read from its SPIR-V
# (runtime/vulkan/vk_spirv.hpp), so these figures are kept nowhere else.
set(FERRY_COOPMAT_VARIANTS "w2x2_t4x4_k32:2:2:4:4:32" "w2x2_t4x4_k16:2:2:4:4:16"
    "w2x2_t2x2_k32:2:2:2:2:32")

# scaled_dot_product_attention's forward pass (shaders/attention_coopmat.slang), per head dim:
# name:D:WARPS:TILE_KEYS. They take 31, 20, 21 and 47 KiB of shared memory: the first three
# fit lavapipe's 32 (two for dim 64, so that measuring one against the other is tested
# there), the fourth the usual 48 of a GPU. Where tuning is on the fastest that fits runs,
# else the largest (Note [Attention on cooperative matrices] in
# runtime/vulkan/vk_kernels_attention.cpp).
set(FERRY_COOPMAT_ATTENTION_VARIANTS "d64_w4_k32:64:4:32" "d64_w2_k32:64:2:32"
    "d128_w2_k16:128:2:16" "d128_w4_k32:128:4:32")
# Its backward (shaders/attention_backward_coopmat.slang), each variant twice (the query
# gradient's pass, DQ, and the key and value gradients', DKV): name:D:WARPS:TILE, TILE the
# other side's rows per step. Both passes hold two operands' rows of the workgroup and two
# of the tile: 25, 17 and 29 KiB of shared memory for the first three (lavapipe's 32 fit),
# 40 and 41 KiB for the last two.
set(FERRY_COOPMAT_ATTENTION_BACKWARD_VARIANTS "d64_w2_k32:64:2:32" "d64_w2_k16:64:2:16"
    "d128_w2_k16:128:2:16" "d64_w4_k32:64:4:32" "d128_w2_k32:128:2:32")

set(FERRY_COOPMAT_SOURCE ${FERRY_SHADER_DIR}/gemm_coopmat.slang)
set(FERRY_COOPMAT_ATTENTION_SOURCE ${FERRY_SHADER_DIR}/attention_coopmat.slang)
set(FERRY_COOPMAT_ATTENTION_BACKWARD_SOURCE ${FERRY_SHADER_DIR}/attention_backward_coopmat.slang)
# Every Slang file in shaders/ decides every module, and so do the interfaces a Slang kernel
# shares with a GLSL shader (shaders/abi).
file(GLOB FERRY_COOPMAT_SLANG_FILES CONFIGURE_DEPENDS ${FERRY_SHADER_DIR}/*.slang
     ${FERRY_SHADER_DIR}/abi/*.h)
set(FERRY_COOPMAT_CPP ${FERRY_SHADER_BUILD_DIR}/coopmat_shaders.cpp)
set(_coopmat_dir ${FERRY_SHADER_BUILD_DIR}/coopmat)
set(_slang_stamp ${FERRY_SLANG_DIR}/slangpy-0.43.1.stamp)  # tools/fetch_slang.py's STAMP

# Slang, fetched at configure time: the build's commands need to know whether they have it.
set(_coopmat_note "")
if(FERRY_COOPMAT STREQUAL "OFF")
  set(_coopmat_note "the build had no Slang compiler (FERRY_COOPMAT=OFF)")
elseif(NOT EXISTS ${FERRY_SLANG_DIR}/include/slang.h OR NOT EXISTS ${_slang_stamp})
  message(STATUS "ferry: fetching Slang's compiler (slangpy 0.43.1 wheel) into ${FERRY_SLANG_DIR}")
  find_program(FERRY_PYTHON3 python3)
  if(NOT FERRY_PYTHON3)
    set(_fetch_rc "no python3")
    set(_fetch_err "no python3 to run tools/fetch_slang.py")
  else()
    execute_process(
      COMMAND ${FERRY_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/fetch_slang.py ${FERRY_SLANG_DIR}
      RESULT_VARIABLE _fetch_rc
      ERROR_VARIABLE _fetch_err
      TIMEOUT 300)
  endif()
  if(NOT _fetch_rc STREQUAL "0")
    # The script's one line, else what stopped it (a timeout: "Process terminated due to timeout").
    string(STRIP "${_fetch_err}" _fetch_err)
    string(REGEX REPLACE ".*\n" "" _fetch_err "${_fetch_err}")
    if(NOT _fetch_err)
      set(_fetch_err "tools/fetch_slang.py: ${_fetch_rc}")
    endif()
    if(FERRY_COOPMAT STREQUAL "ON")
      message(FATAL_ERROR "ferry: FERRY_COOPMAT=ON, but no Slang compiler: ${_fetch_err}")
    endif()
    string(REPLACE ";" "," _fetch_err "${_fetch_err}")  # one argument of the embed command
    set(_coopmat_note "the build had no Slang compiler: ${_fetch_err}")
  endif()
endif()
if(_coopmat_note)
  message(STATUS "ferry: cooperative-matrix GEMM off: ${_coopmat_note}")
endif()

set(FERRY_COOPMAT_SPV_FILES)
set(_coopmat_modules)  # name:emulated:b_layout:bf16:WARPS_M:WARPS_N:TM:TN:BK, for the embed step
if(NOT _coopmat_note)
  # The driver runs at build time: built by a plain command rather than as a target, so that
  # the sanitizer builds' global -fsanitize flags (FERRY_SANITIZE) stay off a tool that loads
  # Slang's uninstrumented library.
  set(_slangc ${_coopmat_dir}/ferry_slangc)
  set(_slangc_src ${PROJECT_SOURCE_DIR}/tools/slangc/ferry_slangc.cpp)
  add_custom_command(
    OUTPUT ${_slangc}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_coopmat_dir}
    COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -O1 -I${FERRY_SLANG_DIR}/include ${_slangc_src}
            -o ${_slangc} ${FERRY_SLANG_DIR}/lib/libslang-compiler.so
            -Wl,-rpath,${FERRY_SLANG_DIR}/lib
    DEPENDS ${_slangc_src} ${_slang_stamp}
    COMMENT "Building ferry_slangc (Slang -> SPIR-V, build-time only)"
    VERBATIM)
  set(_slang_compile ${PROJECT_SOURCE_DIR}/tools/slang_compile.sh)
  # The cache key holds what decides a module besides its arguments: the Slang files, the
  # driver's source and the compiler's version (the stamp names it).
  set(_slang_cache_args)
  if(FERRY_SHADER_CACHE)
    set(_slang_cache_args --cache=${FERRY_SHADER_CACHE} --key-file=${_slangc_src}
                          --key-file=${_slang_stamp})
    foreach(_f ${FERRY_COOPMAT_SLANG_FILES})
      list(APPEND _slang_cache_args --key-file=${_f})
    endforeach()
  endif()
  # ferry_coopmat_module(SOURCE NAME EMULATED BF16 ENTRY DEFINES...): module NAME of SOURCE
  # (EMULATED, BF16: 0 or 1), the suffixes _bf16 and _emulated added to NAME where they apply;
  # ENTRY (the table's fields after the name's, emulated's and bf16's) joins _coopmat_modules.
  macro(ferry_coopmat_module _src _base _m_emulated _m_bf16 _entry)
    set(name ${_base})
    set(defs ${ARGN})
    if(${_m_bf16})
      list(APPEND defs -DBF16=1)
      string(APPEND name _bf16)
    endif()
    if(${_m_emulated})
      string(APPEND name _emulated)
      list(APPEND defs -DEMULATE_COOPMAT=1)
    else()
      # And fail unless the module holds OpCapability CooperativeMatrixKHR (6022): code that
      # stopped using cooperative matrices would compile, and be slow.
      # spvCooperativeMatrixConversionsNV: Slang's type checker files the accumulator's f32 ->
      # f16 conversion under it (and warns, adding it itself); the SPIR-V is the same byte for
      # byte without it, KHR's OpFConvert, no NV extension.
      list(APPEND defs -cap spvCooperativeMatrixKHR -cap spvGroupNonUniformBallot
           -cap spvCooperativeMatrixConversionsNV --require-capability 6022)
      if(${_m_bf16})
        # SPV_KHR_bfloat16's BFloat16TypeKHR and BFloat16CooperativeMatrixKHR (5118). The
        # other five: Slang files the BFloat16 cooperative matrix under a capability set that
        # names them (and warns, adding them itself); the module declares none of them, and is
        # the same byte for byte without them.
        list(APPEND defs -cap spvBFloat16KHR --require-capability 5118 -cap SPV_GOOGLE_user_type
             -cap spvImageQuery -cap spvImageGatherExtended -cap spvSparseResidency
             -cap spvMinLod)
      endif()
    endif()
    set(spv ${_coopmat_dir}/${name}.spv)
    # tools/slang_compile.sh: Slang checks each module with its bundled spirv-val (Debian's
    # predates SPV_KHR_cooperative_matrix), and the modules go through the shader cache
    # (FERRY_SHADER_CACHE) like the GLSL ones.
    add_custom_command(
      OUTPUT ${spv}
      COMMAND bash ${_slang_compile} --slangc=${_slangc} --out=${spv} ${_slang_cache_args}
              ${_src} main ${defs}
      DEPENDS ${FERRY_COOPMAT_SLANG_FILES} ${_slangc} ${_slang_compile}
              ${PROJECT_SOURCE_DIR}/tools/shader_cache.sh
      COMMENT "slang: ${name}"
      VERBATIM)
    list(APPEND FERRY_COOPMAT_SPV_FILES ${spv})
    list(APPEND _coopmat_modules "${name}:${_m_emulated}:${_m_bf16}:${_entry}")
  endmacro()
  # A variant's fields ("name:a:b:...", the form `form`) into the variables named after it.
  function(ferry_coopmat_fields variant form)
    string(REPLACE ":" ";" parts ${variant})
    list(LENGTH parts n)
    list(LENGTH ARGN want)
    if(NOT n EQUAL want)
      message(FATAL_ERROR "ferry's cooperative-matrix variants: '${variant}' is not ${form}")
    endif()
    foreach(name value IN ZIP_LISTS ARGN parts)
      set(${name} ${value} PARENT_SCOPE)
    endforeach()
  endfunction()
  foreach(variant ${FERRY_COOPMAT_VARIANTS})
    ferry_coopmat_fields(${variant} name:WARPS_M:WARPS_N:TM:TN:BK _vname _wm _wn _tm _tn _bk)
    set(_tile -DWARPS_M=${_wm} -DWARPS_N=${_wn} -DTM=${_tm} -DTN=${_tn} -DBK=${_bk})
    # B's layouts (vk_coopmat_shaders.hpp's CoopmatOperandB), their names' suffixes and defines.
    set(_b_suffixes "" _bt _conv _conv_dgrad _conv_wgrad)
    set(_b_defines "" -DB_TRANS=1 -DCONV=1 -DCONV=2 -DCONV=3)
    foreach(_b 0 1 2 3 4)
      list(GET _b_suffixes ${_b} _suffix)
      list(GET _b_defines ${_b} _define)
      foreach(_bf16 0 1)
        foreach(_emulated 0 1)
          ferry_coopmat_module(${FERRY_COOPMAT_SOURCE} gemm_coopmat_${_vname}${_suffix}
                               ${_emulated} ${_bf16} "${_b}:${_wm}:${_wn}:${_tm}:${_tn}:${_bk}:0:0:0" ${_tile} ${_define})
        endforeach()
      endforeach()
    endforeach()
    # And bf16 operands with an f32 result, B's rows contiguous ("_f32out", OUT_F32=1): f32
    # products through bf16 x 3 (Note [f32 products on cooperative matrices] in
    # runtime/vulkan/vk_kernels_coopmat.cpp).
    foreach(_emulated 0 1)
      ferry_coopmat_module(${FERRY_COOPMAT_SOURCE} gemm_coopmat_${_vname}_f32out ${_emulated} 1
                           "0:${_wm}:${_wn}:${_tm}:${_tn}:${_bk}:0:0:1" ${_tile} -DOUT_F32=1)
    endforeach()
  endforeach()
  # Attention: name:D:WARPS:TILE_KEYS, each with f16 and bf16 operands, on cooperative matrices
  # and emulated; in the table, WARPS as warps_m, TILE_KEYS (the backward's TILE) as bk, D as
  # head_dim and the pass as attention_pass (shaders/abi/attention.h's ATTN_MODE_*: 0 the
  # forward, shaders/attention_coopmat.slang; 2 DQ and 3 DKV, shaders/
  # attention_backward_coopmat.slang with KEY_ROWS 0 and 1).
  foreach(_pass forward dq dkv)
    if(_pass STREQUAL "forward")
      set(_variants ${FERRY_COOPMAT_ATTENTION_VARIANTS})
      set(_src ${FERRY_COOPMAT_ATTENTION_SOURCE})
      set(_code 0)
      set(_base attention_coopmat)
      set(_keys_define TILE_KEYS)
      set(_pass_define "")
    else()
      set(_variants ${FERRY_COOPMAT_ATTENTION_BACKWARD_VARIANTS})
      set(_src ${FERRY_COOPMAT_ATTENTION_BACKWARD_SOURCE})
      set(_base attention_${_pass}_coopmat)
      set(_keys_define TILE)
      if(_pass STREQUAL "dq")
        set(_code 2)
        set(_pass_define -DKEY_ROWS=0)
      else()
        set(_code 3)
        set(_pass_define -DKEY_ROWS=1)
      endif()
    endif()
    foreach(variant ${_variants})
      ferry_coopmat_fields(${variant} name:D:WARPS:TILE_KEYS _vname _d _warps _keys)
      foreach(_bf16 0 1)
        foreach(_emulated 0 1)
          ferry_coopmat_module(${_src} ${_base}_${_vname} ${_emulated} ${_bf16}
                               "0:${_warps}:1:1:1:${_keys}:${_d}:${_code}:0" -DD=${_d}
                               -DWARPS=${_warps} -D${_keys_define}=${_keys} ${_pass_define})
        endforeach()
      endforeach()
    endforeach()
  endforeach()
endif()

# Without Slang this writes the empty table and the note; a changed note changes the command,
# so Ninja runs it again.
add_custom_command(
  OUTPUT ${FERRY_COOPMAT_CPP}
  COMMAND ${CMAKE_COMMAND} -DSPV_DIR=${_coopmat_dir} "-DMODULES=${_coopmat_modules}"
          "-DNOTE=${_coopmat_note}" -DOUT=${FERRY_COOPMAT_CPP}
          -P ${FERRY_SHADER_DIR}/embed_coopmat.cmake
  DEPENDS ${FERRY_COOPMAT_SPV_FILES} ${FERRY_SHADER_DIR}/embed_coopmat.cmake
          ${FERRY_SHADER_DIR}/embed_words.cmake
  COMMENT "Embedding ${FERRY_COOPMAT_CPP}"
  VERBATIM)
