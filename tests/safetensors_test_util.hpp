// Helpers shared by the safetensors tests: a scratch folder per test, whole
// files as bytes, and hand-made files from a header string and data bytes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"

namespace st_test {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

inline Bytes read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const fs::path& p, const Bytes& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << p;
}

// A file whose header is `header` (exactly, no padding added) followed by `data`.
inline Bytes make_file(const std::string& header, const Bytes& data = {}) {
  Bytes out(8 + header.size());
  std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// The header text of a file (without the length prefix).
inline std::string header_of(const Bytes& file) {
  std::uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  return std::string(file.begin() + 8, file.begin() + 8 + std::ptrdiff_t(n));
}

// A fresh folder for one test, removed afterwards.
class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / (std::string("ferry_st_") + info->test_suite_name() + "_" +
                                        info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Every entry of the folder, by name (to see that no temporary file was left).
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path dir_;
};

}  // namespace st_test
