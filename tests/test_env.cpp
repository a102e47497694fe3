// tests/test_env.cpp — Note [Environment variables] (runtime/env_internal.hpp): unset and empty
// mean the default; whole values only; anything else a ValueError naming the variable, what it
// takes and what it got.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "ferry/error.hpp"
#include "ferry/kit/env.hpp"

namespace {

namespace env = ferry::kit::env;
constexpr const char* kName = "FERRY_TEST_ENV_HELPER";

// Sets kName for one check; unsets it after.
struct Set {
  explicit Set(const char* v) { v ? ::setenv(kName, v, 1) : ::unsetenv(kName); }
  ~Set() { ::unsetenv(kName); }
};

// The ValueError's text for kName set to `v` (empty where f does not throw).
template <typename F> std::string refusal(const char* v, F f) {
  const Set set(v);
  try {
    f();
  } catch (const ferry::ValueError& e) {
    return e.what();
  }
  return "";
}

TEST(Env, UnsetAndEmptyMeanTheDefault) {
  for (const char* v : {static_cast<const char*>(nullptr), ""}) {
    const Set set(v);
    EXPECT_FALSE(env::value(kName));
    EXPECT_EQ(env::choice(kName, {"a", "b"}, "b"), "b");
    EXPECT_FALSE(env::flag(kName));
    EXPECT_FALSE(env::whole_number(kName, 0, 9, "a digit"));
    EXPECT_FALSE(env::positive_number(kName, "a time"));
  }
}

TEST(Env, ValuesAreReadWhole) {
  {
    const Set set("onednn");
    EXPECT_EQ(env::choice(kName, {"auto", "openblas", "onednn"}, "auto"), "onednn");
  }
  {
    const Set set("1");
    EXPECT_TRUE(env::flag(kName));
  }
  {
    const Set set("0");
    EXPECT_FALSE(env::flag(kName));
  }
  {
    const Set set("4096");
    EXPECT_EQ(env::whole_number(kName, 0, 1 << 20, "bytes"), 4096);
  }
  {
    const Set set("-3");
    EXPECT_EQ(env::whole_number(kName, -5, 5, "a small number"), -3);
  }
  {
    const Set set("2.5");
    EXPECT_EQ(env::positive_number(kName, "seconds"), 2.5);
  }
}

TEST(Env, AnythingElseIsAValueErrorThatSaysWhatItTakes) {
  EXPECT_EQ(refusal("mkl",
                    [] {
                      env::choice(kName, {"auto", "openblas", "onednn"}, "auto");
                    }),
            "FERRY_TEST_ENV_HELPER must be auto, openblas or onednn, got 'mkl'");
  EXPECT_EQ(refusal("32",
                    [] {
                      env::choice(kName, {"4", "8", "16"}, "8", "(floats)");
                    }),
            "FERRY_TEST_ENV_HELPER must be 4, 8 or 16 (floats), got '32'");
  for (const char* bad : {"yes", "true", "2", " 1"})
    EXPECT_EQ(refusal(bad, [] { env::flag(kName); }),
              std::string("FERRY_TEST_ENV_HELPER must be 0 or 1, got '") + bad + "'");
  for (const char* bad : {"4M", "-1", " 7", "+7", "big", "99999999999999999999", "1025"})
    EXPECT_EQ(refusal(bad, [] { env::whole_number(kName, 0, 1024, "a number of bytes"); }),
              std::string("FERRY_TEST_ENV_HELPER must be a number of bytes, got '") + bad + "'")
        << bad;
  for (const char* bad : {"soon", "0", "-3", "5s", "inf", "nan"})
    EXPECT_EQ(refusal(bad, [] { env::positive_number(kName, "a positive number of seconds"); }),
              std::string("FERRY_TEST_ENV_HELPER must be a positive number of seconds, got '") +
                  bad + "'")
        << bad;
}

}  // namespace
