// ferry/safetensors.hpp — reading and writing safetensors checkpoints
// (https://github.com/huggingface/safetensors), the format PyTorch, JAX and the
// Hugging Face hub store named tensors in. The rules the reader enforces, and
// how the PyTorch interop files are made, are in docs/checkpoints.md.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON (one
// object: per tensor {"dtype", "shape", "data_offsets"}, plus an optional
// "__metadata__" object of strings), then the tensors' bytes, little-endian
// and row-major, back to back.
//
// Errors: a file that is not a well-formed safetensors file raises FormatError
// (file(): the path, offset(): the byte where the problem is); a tensor of a
// dtype ferry has no equivalent for (U16, U32, F8_E4M3, ...) raises DTypeError
// on load; the operating system's failures (a missing file, a full disk) raise
// Error naming the path and the system's reason. Nothing is ever read or
// allocated on the word of a header before it has been checked against the
// file. All functions are thread-safe with respect to each other; saving to
// one path from two threads at once leaves one of the two complete files.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/device.hpp"
#include "ferry/dtype.hpp"
#include "ferry/state_dict.hpp"
#include "ferry/tensor.hpp"

namespace ferry {

// Loads every tensor of the file onto `map_location` (any available device),
// in the order their bytes lie in the file, and the file's "__metadata__"
// into StateDict::metadata. Each tensor is a fresh, contiguous storage of
// its own. BOOL bytes other than 0 and 1 load as true.
StateDict load_safetensors(const std::string& path, const Device& map_location = Device::cpu());

// Writes `tensors` (on any devices, with any strides; non-contiguous ones are
// written contiguous) and their metadata as "__metadata__". Two names may
// share one tensor or storage (weight tying): each name is written with its
// own copy of the data, as the format has no sharing. The layout is the
// reference writer's: tensors ordered by dtype, widest first (ties: the
// reference's dtype order, then name), the header padded with spaces so the
// data starts 8-byte aligned. The file is written under a temporary name in
// the same folder, flushed to disk, then renamed over `path`: a failed save
// leaves `path` as it was and no temporary file behind. Error when a tensor
// is undefined, a name is "__metadata__" or not valid UTF-8, or the system
// refuses the write.
void save_safetensors(const std::string& path, const StateDict& tensors);

// One tensor of a file, as its header describes it.
struct SafetensorsTensorInfo {
  std::string name;
  std::string file_dtype;      // as written in the file: "F32", "BF16", "F8_E4M3", ...
  std::optional<DType> dtype;  // ferry's dtype for it; empty when ferry has none
  Shape shape;
  std::uint64_t data_begin = 0;  // [data_begin, data_end): bytes relative to the data section
  std::uint64_t data_end = 0;
  std::uint64_t nbytes() const { return data_end - data_begin; }
};

// A file's header, checked as load_safetensors checks it.
struct SafetensorsInfo {
  std::string path;
  std::uint64_t file_size = 0;
  std::uint64_t header_size = 0;  // N: the JSON header's length in bytes, padding included
  std::uint64_t data_offset = 0;  // 8 + N: where the data section starts in the file
  std::vector<SafetensorsTensorInfo> tensors;  // in the order their bytes lie in the file
  std::map<std::string, std::string> metadata;
  // The tensor named `name`, or nullptr.
  const SafetensorsTensorInfo* find(std::string_view name) const;
};

// Reads and checks the header only (no tensor data is read): names, dtypes,
// shapes, offsets and metadata. Tensors of dtypes ferry cannot load are
// listed too (their `dtype` is empty). Same FormatError and Error as loading.
SafetensorsInfo inspect_safetensors(const std::string& path);

}  // namespace ferry
