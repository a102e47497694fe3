// runtime/io/safetensors_format.hpp — the safetensors format without files:
// the reader's untrusted-bytes half (header parsing, validation, the tensor
// table, copying tensors out) and the writer's layout.
//
// Note [Untrusted bytes in one place]
// Everything that looks at bytes a file supplies lives in safetensors_format.cpp
// and works on memory the caller hands in, so the fuzz target
// (tests/fuzz/fuzz_safetensors.cpp) compiles that one file with clang's
// sanitizers and coverage and runs exactly the code load_safetensors runs.
// The file I/O around it (safetensors.cpp) only moves bytes whose offsets and
// sizes this code has checked against the file's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/safetensors.hpp"

namespace ferry::detail {

// The reference implementation's limit (safetensors' MAX_HEADER_SIZE).
inline constexpr std::uint64_t kSafetensorsMaxHeaderSize = 100'000'000;
// More dims than this is a FormatError: numpy 2's limit, and far beyond any
// real tensor, so that a header cannot make every op carry a huge shape.
inline constexpr std::size_t kSafetensorsMaxRank = 64;
// JSON nesting allowed inside unknown fields of a tensor entry (they are
// skipped, as the reference skips them); bounds the parser's recursion.
inline constexpr int kSafetensorsMaxDepth = 32;

// Step 1: the 8-byte little-endian header length N at the start of a file of
// `file_size` bytes. `prefix` holds the file's first min(8, file_size) bytes.
// FormatError when the file is shorter than 8 bytes, N exceeds the limit, or
// 8 + N exceeds the file.
std::uint64_t parse_safetensors_header_length(const std::uint8_t* prefix, std::size_t prefix_size,
                                              std::uint64_t file_size, std::string_view file);

// Step 2: the N header bytes found at file offset 8 (N as step 1 returned it),
// checked against the file's size: the JSON, every entry, and that the
// entries' data tile the data section exactly. `file` names the file in
// errors and becomes SafetensorsInfo::path.
SafetensorsInfo parse_safetensors_header(const std::uint8_t* header, std::uint64_t header_size,
                                         std::uint64_t file_size, std::string_view file);

// Steps 1 and 2 on a whole file held in memory (the fuzz target's entry point).
SafetensorsInfo parse_safetensors(const std::uint8_t* data, std::size_t size,
                                  std::string_view file);

// Copies `count` bytes found at file offset `offset` into `dst`; throws (a
// FormatError when the file turns out shorter) if it cannot.
using SafetensorsByteSource =
    std::function<void(std::uint64_t offset, void* dst, std::size_t count)>;

// One tensor of a parsed file as a fresh, contiguous CPU tensor; its bytes
// are copied once, from `read` into the tensor's storage. DTypeError when
// ferry has no dtype for the entry's; FormatError when the entry does not lie
// inside the data section `info` describes.
Tensor read_safetensors_tensor(const SafetensorsInfo& info, const SafetensorsTensorInfo& entry,
                               const SafetensorsByteSource& read);
// Every tensor of a parsed file, in the file's order, each moved to `device`
// as soon as it is read; the metadata too.
StateDict read_safetensors_tensors(const SafetensorsInfo& info, const SafetensorsByteSource& read,
                                   const Device& device);

// The file's name for a ferry dtype ("F32", ...), and ferry's dtype for a
// file's name (empty for names ferry has no dtype for, and unknown names).
std::string_view safetensors_dtype_name(DType dtype);
std::optional<DType> dtype_from_safetensors_name(std::string_view name);
// The reference writer's order of dtypes (its Dtype enum: BOOL < U8 < ... < I64);
// -1 for unknown names.
int safetensors_dtype_rank(std::string_view name);
bool is_valid_utf8(std::string_view s);

// ---- the writer's layout (safetensors.cpp) ----

struct SafetensorsPlannedTensor {
  std::string name;
  Tensor tensor;
  std::uint64_t data_begin = 0;
  std::uint64_t data_end = 0;
};

struct SafetensorsWritePlan {
  std::vector<SafetensorsPlannedTensor> tensors;  // in file order
  std::string header;                             // the JSON, padded: its size is N
  std::uint64_t data_size = 0;
};

// Orders the tensors, assigns offsets and writes the header JSON; Error for
// an undefined tensor, the reserved name "__metadata__" or text that is not
// UTF-8. Touches no file.
SafetensorsWritePlan plan_safetensors(const StateDict& tensors);
// A whole file in memory, as save_safetensors would write it (tests, fuzzing).
std::vector<std::uint8_t> serialize_safetensors(const StateDict& tensors);

}  // namespace ferry::detail
