// The logging facility: quiet by default, ops and copies visible at debug.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ferry/ferry.hpp"

namespace {
std::vector<std::string>* g_lines = nullptr;
void capture(ferry::LogLevel, std::string_view msg) { g_lines->emplace_back(msg); }

struct LogCapture {
  std::vector<std::string> lines;
  ferry::LogLevel saved = ferry::log_level();
  explicit LogCapture(ferry::LogLevel level) {
    g_lines = &lines;
    ferry::set_log_sink(capture);
    ferry::set_log_level(level);
  }
  ~LogCapture() {
    ferry::set_log_level(saved);
    ferry::set_log_sink(nullptr);
    g_lines = nullptr;
  }
  bool any_contains(const std::string& s) const {
    for (const auto& l : lines)
      if (l.find(s) != std::string::npos) return true;
    return false;
  }
};
}  // namespace

TEST(Log, QuietByDefault) {
  LogCapture cap(ferry::LogLevel::warn);
  ferry::Tensor a = ferry::ones({4});
  (void)(a + a).to_vector<float>();
  EXPECT_TRUE(cap.lines.empty());
}

TEST(Log, DebugShowsEachOpWithDeviceAndKernel) {
  LogCapture cap(ferry::LogLevel::debug);
  ferry::Tensor a = ferry::ones({2, 3});
  ferry::Tensor b = ferry::exp(a + a);
  (void)b;
  EXPECT_TRUE(cap.any_contains("op add on cpu: [f32[2, 3], f32[2, 3]] -> [f32[2, 3]]"));
  EXPECT_TRUE(cap.any_contains("op exp on cpu"));
  EXPECT_TRUE(cap.any_contains("op fill on cpu"));
}

TEST(Log, LevelsFilter) {
  LogCapture cap(ferry::LogLevel::error);
  EXPECT_FALSE(ferry::log_enabled(ferry::LogLevel::warn));
  EXPECT_TRUE(ferry::log_enabled(ferry::LogLevel::error));
  ferry::log_message(ferry::LogLevel::info, "hidden");
  ferry::log_message(ferry::LogLevel::error, "shown");
  ASSERT_EQ(cap.lines.size(), 1u);
  EXPECT_EQ(cap.lines[0], "shown");
}
