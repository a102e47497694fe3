// The chunked staging pipeline (Note [Chunked staging]) on its own, without a device or a job:
// its order (each chunk copied down, then reduced, then copied back up), the first error from
// any stage stopping the rest, and a helper thread that the system refuses to make, which must
// end in a typed error once the helper that did start has ended, never std::terminate.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "distributed/chunked_staging.hpp"
#include "ferry/distributed.hpp"

namespace {

namespace dist = ferry::distributed;

// Every stage's calls, in the order they happened.
struct Log {
  std::mutex m;
  std::vector<std::string> events;
  void add(char stage, std::int64_t i) {
    std::lock_guard lock(m);
    events.push_back(std::string(1, stage) + std::to_string(i));
  }
  std::ptrdiff_t at(const std::string& e) {
    std::lock_guard lock(m);
    for (std::size_t k = 0; k < events.size(); ++k)
      if (events[k] == e) return std::ptrdiff_t(k);
    return -1;
  }
  std::size_t count(char stage) {
    std::lock_guard lock(m);
    std::size_t n = 0;
    for (const auto& e : events) n += e[0] == stage;
    return n;
  }
};

TEST(ChunkPipeline, EachChunkGoesDownThenIsReducedThenGoesUp) {
  constexpr std::int64_t chunks = 40;
  for (int run = 0; run < 20; ++run) {
    Log log;
    dist::run_chunk_pipeline(
        chunks, [&](std::int64_t i) { log.add('d', i); }, [&](std::int64_t i) { log.add('u', i); },
        [&](std::int64_t i) { log.add('r', i); });
    ASSERT_EQ(log.events.size(), std::size_t(3 * chunks));
    for (std::int64_t i = 0; i < chunks; ++i) {
      const std::string n = std::to_string(i);
      EXPECT_LT(log.at("d" + n), log.at("r" + n)) << "chunk " << i;
      EXPECT_LT(log.at("r" + n), log.at("u" + n)) << "chunk " << i;
      if (i > 0) {
        const std::string p = std::to_string(i - 1);
        EXPECT_LT(log.at("d" + p), log.at("d" + n));
        EXPECT_LT(log.at("r" + p), log.at("r" + n));
        EXPECT_LT(log.at("u" + p), log.at("u" + n));
      }
    }
  }
}

TEST(ChunkPipeline, TheFirstErrorOfAnyStageStopsTheRestAndIsThrown) {
  for (char failing : {'d', 'r', 'u'}) {
    Log log;
    const auto stage = [&](char s) {
      return [&, s](std::int64_t i) {
        if (s == failing && i == 5) throw ferry::ValueError(std::string("stage ") + s);
        log.add(s, i);
      };
    };
    try {
      dist::run_chunk_pipeline(30, stage('d'), stage('u'), stage('r'));
      ADD_FAILURE() << "no error from stage " << failing;
    } catch (const ferry::ValueError& e) {
      EXPECT_EQ(std::string(e.what()), std::string("stage ") + failing);
    }
    // Nothing past the failed chunk was copied back, nor reduced when the failure came first
    // (the reduction runs ahead of the copies up), and every helper has ended: the log no longer
    // grows.
    if (failing != 'u') EXPECT_EQ(log.at("r5"), -1) << failing;
    EXPECT_EQ(log.at("u5"), -1) << failing;
    EXPECT_EQ(log.at("u6"), -1) << failing;
    const std::size_t seen = log.events.size();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(log.events.size(), seen);
  }
}

TEST(ChunkPipeline, AHelperTheSystemRefusesIsADistributedErrorAfterTheOtherHasEnded) {
  for (int refused = 0; refused < 2; ++refused) {
    Log log;
    std::atomic<bool> helper_running{false};
    int made = 0;
    const dist::HelperStarter start = [&](std::function<void()> body) {
      if (made++ == refused)
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                                "pthread_create");
      return std::thread([&, body = std::move(body)] {
        helper_running = true;
        body();
        helper_running = false;
      });
    };
    try {
      dist::run_chunk_pipeline(
          1000, [&](std::int64_t i) { log.add('d', i); }, [&](std::int64_t i) { log.add('u', i); },
          [&](std::int64_t i) { log.add('r', i); }, start);
      ADD_FAILURE() << "a refused helper went unnoticed";
    } catch (const dist::DistributedError& e) {
      EXPECT_NE(std::string(e.what()).find("could not start a staging thread"), std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(helper_running) << "a helper outlived the call";
    EXPECT_EQ(log.count('r'), 0u) << "chunks were reduced with a helper missing";
    EXPECT_EQ(log.count('u'), 0u);
  }
  // No memory for the second helper's state: that error, once the first has ended.
  std::atomic<bool> helper_running{false};
  int made = 0;
  const dist::HelperStarter start = [&](std::function<void()> body) {
    if (made++ == 1) throw std::bad_alloc();
    return std::thread([&, body = std::move(body)] {
      helper_running = true;
      body();
      helper_running = false;
    });
  };
  EXPECT_THROW(dist::run_chunk_pipeline(
                   1000, [](std::int64_t) {}, [](std::int64_t) {}, [](std::int64_t) {}, start),
               std::bad_alloc);
  EXPECT_FALSE(helper_running) << "a helper outlived the call";
}

}  // namespace
