// runtime/vulkan/vk_spirv.cpp — vk_spirv.hpp: a walk over a module's instructions (each a word
// of (word count << 16) | opcode, then its operands), with glslang's SPIR-V enumerants.
#include "vulkan/vk_spirv.hpp"

#include <fmt/format.h>

#include <glslang/SPIRV/spirv.hpp>
#include <unordered_map>
#include <vector>

#include "ferry/error.hpp"

namespace ferry::vulkan {

std::uint64_t spirv_shared_bytes(std::span<const std::uint32_t> words, const std::string& what) {
  constexpr std::size_t kHeader = 5;  // magic, version, generator, bound, schema
  if (words.size() < kHeader || words[0] != spv::MagicNumber)
    throw FormatError(fmt::format("{}: not a SPIR-V module", what), what, 0);
  std::unordered_map<std::uint32_t, std::uint64_t> size_of;   // type id -> bytes
  std::unordered_map<std::uint32_t, std::uint64_t> constant;  // integer constants by id
  std::unordered_map<std::uint32_t, std::uint32_t> pointee;   // Workgroup pointer type -> type
  std::vector<std::uint32_t> shared;                          // the variables' pointee types
  for (std::size_t at = kHeader; at < words.size();) {
    const std::uint32_t count = words[at] >> 16;
    const auto op = spv::Op(words[at] & 0xffffu);
    if (count == 0 || at + count > words.size())
      throw FormatError(fmt::format("{}: an instruction runs past the module's end", what), what,
                        at * 4);
    const std::uint32_t* w = &words[at];
    // The words an instruction of `op` has at least, for the operands read below.
    auto need = [&](std::uint32_t n) {
      if (count < n)
        throw FormatError(fmt::format("{}: an instruction of opcode {} has {} words, not {}", what,
                                      std::uint32_t(op), count, n),
                          what, at * 4);
    };
    auto sized = [&](std::uint32_t id) {
      auto it = size_of.find(id);
      return it == size_of.end() ? std::uint64_t(0) : it->second;  // 0: not sized
    };
    switch (op) {
      case spv::OpTypeInt:
      case spv::OpTypeFloat:
        need(3);
        size_of[w[1]] = w[2] / 8;
        break;
      case spv::OpTypeVector:
        need(4);
        size_of[w[1]] = sized(w[2]) * w[3];
        break;
      case spv::OpTypeArray:
        need(4);
        if (auto c = constant.find(w[3]); c != constant.end())
          size_of[w[1]] = sized(w[2]) * c->second;
        break;
      case spv::OpTypeStruct: {
        need(2);
        std::uint64_t sum = 0;
        bool all = true;
        for (std::uint32_t i = 2; i < count; ++i) all = all && sized(w[i]) != 0, sum += sized(w[i]);
        if (all) size_of[w[1]] = sum;
        break;
      }
      case spv::OpConstant:
        need(4);
        constant[w[2]] = w[3];  // a length is 32 bits wide
        break;
      case spv::OpTypePointer:
        need(4);
        if (w[2] == spv::StorageClassWorkgroup) pointee[w[1]] = w[3];
        break;
      case spv::OpVariable:
        need(4);
        if (w[3] == spv::StorageClassWorkgroup) shared.push_back(pointee[w[1]]);
        break;
      default:
        break;
    }
    at += count;
  }
  std::uint64_t bytes = 0;
  for (std::uint32_t type : shared) {
    auto it = size_of.find(type);
    if (it == size_of.end() || it->second == 0)
      throw FormatError(
          fmt::format("{}: a shared variable of a type the runtime cannot size", what), what, 0);
    bytes += it->second;
  }
  return bytes;
}

}  // namespace ferry::vulkan
