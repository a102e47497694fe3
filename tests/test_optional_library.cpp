// kit::OptionalLibrary, the loader behind oneDNN and cuDNN: what it says when a library is
// switched off, missing, or lacks a function, and that what it binds is the library's own.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "ferry/kit/optional_library.hpp"

namespace {

using ferry::kit::OptionalLibrary;

TEST(OptionalLibrary, BindsTheLibrarysFunctions) {
  auto lib = OptionalLibrary::open("libc", "FERRY_TEST_LIBC", "libc.so.6", "none");
  ASSERT_TRUE(lib.ok()) << lib.why_not();
  decltype(&std::strlen) len = nullptr;
  int (*abs_fn)(int) = nullptr;
  EXPECT_TRUE(lib.bind(len, "strlen") && lib.bind(abs_fn, "abs"));
  EXPECT_EQ(len("ferry"), 5u);
  EXPECT_EQ(abs_fn(-3), 3);
  EXPECT_TRUE(lib.why_not().empty());
}

TEST(OptionalLibrary, SaysWhyAPathIsOff) {
  ::setenv("FERRY_TEST_LIBC", "0", 1);
  auto off = OptionalLibrary::open("libc", "FERRY_TEST_LIBC", "libc.so.6", "none");
  ::unsetenv("FERRY_TEST_LIBC");
  EXPECT_FALSE(off.ok());
  EXPECT_EQ(off.why_not(), "libc off: FERRY_TEST_LIBC=0");

  auto missing = OptionalLibrary::open("Nothing", "FERRY_TEST_NOTHING", "libferry-no-such.so.1",
                                       "install nothing");
  EXPECT_FALSE(missing.ok());
  const std::string why = missing.why_not();
  EXPECT_EQ(why.rfind("Nothing off: libferry-no-such.so.1 did not load (", 0), 0u) << why;
  EXPECT_NE(why.find("); install nothing"), std::string::npos) << why;
  void (*fn)() = nullptr;
  EXPECT_FALSE(missing.bind(fn, "anything"));
  EXPECT_EQ(missing.why_not(), why)
      << "a bind on a library that is not open keeps the first reason";

  auto lib = OptionalLibrary::open("libc", "FERRY_TEST_LIBC", "libc.so.6", "none");
  decltype(&std::strlen) len = nullptr;
  EXPECT_FALSE(lib.bind(fn, "ferry_no_such_function") && lib.bind(len, "strlen"));
  EXPECT_EQ(len, nullptr) << "binding goes on after a missing function";
  EXPECT_FALSE(lib.ok());
  EXPECT_EQ(lib.why_not(), "libc off: libc.so.6 lacks ferry_no_such_function");
}

}  // namespace
