// The shared memory the Vulkan backend reads from a SPIR-V module (runtime/vulkan/vk_spirv.hpp),
// which decides which cooperative-matrix modules fit a device: a module written word by word
// here, malformed ones, and the modules the build made, against their kernels' shared arrays
// in closed form.
#ifdef FERRY_TEST_COOPMAT_SPV_DIR
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ferry/error.hpp"
#include "vulkan/vk_spirv.hpp"

namespace {

using ferry::vulkan::spirv_shared_bytes;

constexpr std::uint32_t instruction(std::uint32_t words, std::uint32_t opcode) {
  return words << 16 | opcode;
}
// SPIR-V's opcodes and storage classes used below.
constexpr std::uint32_t kTypeInt = 21, kTypeFloat = 22, kTypeVector = 23, kTypeArray = 28,
                        kTypeRuntimeArray = 29, kTypePointer = 32, kConstant = 43, kVariable = 59;
constexpr std::uint32_t kWorkgroup = 4, kStorageBuffer = 12;

// uint4 shared[10]; float row; and a storage buffer of uint4[10], which is not shared memory.
std::vector<std::uint32_t> module() {
  return {0x07230203,
          0x00010600,
          0,
          20,
          0,
          instruction(4, kTypeInt),
          1,
          32,
          0,
          instruction(4, kTypeVector),
          2,
          1,
          4,
          instruction(4, kConstant),
          1,
          3,
          10,
          instruction(4, kTypeArray),
          4,
          2,
          3,
          instruction(4, kTypePointer),
          5,
          kWorkgroup,
          4,
          instruction(4, kVariable),
          5,
          6,
          kWorkgroup,
          instruction(3, kTypeFloat),
          7,
          32,
          instruction(4, kTypePointer),
          8,
          kWorkgroup,
          7,
          instruction(4, kVariable),
          8,
          9,
          kWorkgroup,
          instruction(4, kTypePointer),
          10,
          kStorageBuffer,
          4,
          instruction(4, kVariable),
          10,
          11,
          kStorageBuffer};
}

TEST(Spirv, SharedBytesAreTheWorkgroupVariablesSizes) {
  EXPECT_EQ(spirv_shared_bytes(module(), "hand-made"), 10u * 16 + 4);
  const std::vector<std::uint32_t> m = module();
  EXPECT_EQ(spirv_shared_bytes(std::vector(m.begin(), m.begin() + 5), "empty"), 0u);
}

TEST(Spirv, WhatItCannotReadIsAFormatError) {
  std::vector<std::uint32_t> m = module();
  m.pop_back();  // the last instruction runs past the end
  EXPECT_THROW(spirv_shared_bytes(m, "truncated"), ferry::FormatError);
  m = module();
  m[0] = 0;
  EXPECT_THROW(spirv_shared_bytes(m, "not SPIR-V"), ferry::FormatError);
  m = module();
  m.insert(m.end(), {instruction(3, kTypeRuntimeArray), 12, 2, instruction(4, kTypePointer), 13,
                     kWorkgroup, 12, instruction(4, kVariable), 13, 14, kWorkgroup});
  EXPECT_THROW(spirv_shared_bytes(m, "a runtime array shared"), ferry::FormatError);
  m = module();
  m.push_back(instruction(2, kTypePointer));  // a pointer type without its operands
  m.push_back(99);
  EXPECT_THROW(spirv_shared_bytes(m, "an instruction too short"), ferry::FormatError);
}

std::vector<std::uint32_t> read_words(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<std::uint32_t> w(std::filesystem::file_size(p) / 4);
  f.read(reinterpret_cast<char*>(w.data()), std::streamsize(w.size() * 4));
  return w;
}

// The kernels' groupshared arrays: gemm_coopmat.slang's two stages of A [BM, BK + 8] and
// B [BK, BN + 8] halves (B [BN, BK + 8] given transposed); attention_coopmat.slang's sA (q's
// rows, P's, the f32 staging), sB (k's and v's tiles) in 16-byte vectors, rows padded by 8
// halves, and sRow; the backward's with two operands' rows in sA, and DKV's sStat pairs (DQ
// declares them but never uses them: the compiler drops them).
TEST(Spirv, CoopmatModulesDeclareTheirKernelsSharedArrays) {
  const std::filesystem::path dir = FERRY_TEST_COOPMAT_SPV_DIR;
  if (!std::filesystem::exists(dir / "gemm_coopmat_w2x2_t4x4_k32.spv"))
    GTEST_SKIP() << "the build made no cooperative-matrix modules (no Slang)";
  auto gemm = [](std::uint64_t bm, std::uint64_t bn, std::uint64_t bk, bool b_transposed) {
    return 2 * (bm * (bk + 8) + (b_transposed ? bn * (bk + 8) : bk * (bn + 8))) * 2;
  };
  enum Pass { forward, dq, dkv };
  auto attention = [](Pass pass, std::uint64_t d, std::uint64_t warps, std::uint64_t tile) {
    const std::uint64_t rows = 16 * warps, ld = (d + 8) / 8, p_ld = (tile + 8) / 8;
    return 16 * ((pass == forward ? 1 : 2) * rows * ld + rows * p_ld + warps * (tile / 16) * 64) +
           16 * 2 * tile * ld +
           (pass == forward ? 4 * rows
            : pass == dkv   ? 8 * tile
                            : 0);
  };
  const std::vector<std::pair<std::string, std::uint64_t>> modules{
      {"gemm_coopmat_w2x2_t4x4_k32", gemm(128, 128, 32, false)},
      {"gemm_coopmat_w2x2_t4x4_k16_bt", gemm(128, 128, 16, true)},
      {"gemm_coopmat_w2x2_t2x2_k32_bf16", gemm(64, 64, 32, false)},
      {"gemm_coopmat_w2x2_t4x4_k16_f32out_bf16", gemm(128, 128, 16, false)},
      {"attention_coopmat_d64_w4_k32", attention(forward, 64, 4, 32)},
      {"attention_coopmat_d128_w2_k16_bf16", attention(forward, 128, 2, 16)},
      {"attention_dq_coopmat_d64_w2_k16", attention(dq, 64, 2, 16)},
      {"attention_dkv_coopmat_d128_w2_k32", attention(dkv, 128, 2, 32)}};
  for (const auto& [name, bytes] : modules)
    for (const char* emulated : {"", "_emulated"}) {
      const std::string file = name + emulated + ".spv";
      EXPECT_EQ(spirv_shared_bytes(read_words(dir / file), file), bytes) << file;
    }
}

}  // namespace
#endif
