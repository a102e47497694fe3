# Included by the -P scripts shaders/embed.cmake and shaders/embed_coopmat.cmake.
# embed_words(FILE ARRAY): appends `const std::uint32_t ARRAY[n] = {...};`, the words of the
# .spv file FILE, to the variable `body`.
macro(embed_words file array)
  file(READ ${file} hex HEX)
  string(LENGTH "${hex}" len)
  math(EXPR words "${len} / 8")
  # Little-endian bytes -> 32-bit words.
  string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," hex "${hex}")
  string(APPEND body "const std::uint32_t ${array}[${words}] = {${hex}};\n")
endmacro()
