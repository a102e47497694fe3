# Included by the -P scripts shaders/embed.cmake and shaders/embed_coopmat.cmake.
#
# Note [Embedding SPIR-V by .incbin]
# The modules go into the backend as the assembler's `.incbin` of each .spv file, in one
# top-level asm statement, and C++ sees each as an `extern "C"` array of its word count
# (the file's size over 4). The generator only lists the files, and the compiler copies
# their bytes: writing the words out as C++ literals took CMake about 45 s a build variant
# to write 100 MB of text and the compiler 15 s to read it back, three times in the test
# command (release, asan, tsan). The bytes are the .spv file's, in the host's order, as
# glslang and Slang write them; Vulkan takes SPIR-V words in the host's order too.
# The .cpp is written afresh whenever a .spv file changes (its command depends on them), so
# the object that includes the bytes is rebuilt with them even when the text is the same.
#
# embed_words(FILE ARRAY): appends to `body` a reference ARRAY to FILE's words (a
# `const std::uint32_t[n]`), and to `embed_decls` and `embed_asm` what defines them;
# embed_words_prelude(VAR) sets VAR to those two, to go before the namespaces.
macro(embed_words file array)
  file(SIZE ${file} _bytes)
  math(EXPR _words "${_bytes} / 4")
  math(EXPR _rest "${_bytes} % 4")
  if(_bytes EQUAL 0 OR NOT _rest EQUAL 0)
    message(FATAL_ERROR "${file}: ${_bytes} bytes, not SPIR-V words")
  endif()
  set(_sym ferry_spv_${EMBED_PREFIX}_${array})
  # The path in the assembler's string, inside a C++ string literal: \ and " escaped twice.
  string(REPLACE "\\" "\\\\\\\\" _path "${file}")
  string(REPLACE "\"" "\\\\\\\"" _path "${_path}")
  string(APPEND embed_decls "extern \"C\" const std::uint32_t ${_sym}[${_words}];\n")
  string(APPEND embed_asm "    \".balign 4\\n.globl ${_sym}\\n.hidden ${_sym}\\n"
         ".type ${_sym}, @object\\n${_sym}:\\n.incbin \\\"${_path}\\\"\\n"
         ".size ${_sym}, . - ${_sym}\\n\"\n")
  string(APPEND body "constexpr const std::uint32_t (&${array})[${_words}] = ${_sym};\n")
endmacro()

function(embed_words_prelude var)
  set(text "")
  if(embed_decls)
    set(text "${embed_decls}\n// Note [Embedding SPIR-V by .incbin] in shaders/embed_words.cmake.\n")
    string(APPEND text "asm(\".pushsection .rodata.ferry_spv, \\\"a\\\"\\n\"\n${embed_asm}")
    string(APPEND text "    \".popsection\\n\");\n\n")
  endif()
  set(${var} "${text}" PARENT_SCOPE)
endfunction()
