// Tests of the conformance suite itself: it must be able to fail. The
// test-only plugin (tests/plugin) plants a wrong "add" (FERRY_TESTDEV_BROKEN=1)
// and an out-of-bounds "mul" (FERRY_TESTDEV_OOB=1); the suite must report each
// as failed with the op, dtype and shape named, exit non-zero, and report ops
// the plugin lacks as skipped with a reason, never as passed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "conformance.hpp"
#include "ferry/autocast.hpp"

namespace {

struct SuiteRun {
  int status = -1;
  std::string output;
  nlohmann::json report;
};

SuiteRun run_suite(const std::string& env, const std::string& args) {
  // One file per test process: ctest runs these tests in parallel.
  std::string json = ::testing::TempDir() + "conformance_selftest_" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
                     std::to_string(::getpid()) + ".json";
  std::remove(json.c_str());
  std::string cmd = "env FERRY_BACKEND_PATH=" + std::string(FERRY_TEST_PLUGIN_DIR) + " " + env +
                    " " + FERRY_CONFORMANCE_BIN + " " + args + " --json " + json + " 2>&1";
  SuiteRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) r.output.append(buf, n);
  int raw = pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream f(json);
  if (f) r.report = nlohmann::json::parse(f, nullptr, false);
  std::remove(json.c_str());
  return r;
}

std::vector<nlohmann::json> with_status(const SuiteRun& r, const std::string& status) {
  std::vector<nlohmann::json> out;
  if (!r.report.is_object()) return out;
  for (const auto& res : r.report["results"])
    if (res["status"] == status) out.push_back(res);
  return out;
}

}  // namespace

TEST(ConformanceSelfTest, HonestPluginPassesWhatItClaimsAndSkipsTheRest) {
  SuiteRun r = run_suite("", "--device testdev:0 --op '^(add|mul|exp)$' --no-transfers");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(with_status(r, "passed").empty()) << r.output;
  auto skipped = with_status(r, "skipped");
  ASSERT_FALSE(skipped.empty()) << "exp is not implemented by testdev and must be skipped";
  for (const auto& s : skipped) EXPECT_FALSE(s["detail"].get<std::string>().empty()) << s.dump();
  bool exp_skipped = false;
  for (const auto& s : skipped) exp_skipped |= s["op"] == "exp";
  EXPECT_TRUE(exp_skipped);
  for (const auto& p : with_status(r, "passed")) EXPECT_NE(p["op"], "exp") << p.dump();
  EXPECT_NE(r.output.find(" passed, 0 failed, "), std::string::npos) << r.output;
  // Each case's wall time, where the suite's time goes.
  for (const auto& c : r.report["results"])
    EXPECT_TRUE(c["seconds"].is_number() && c["seconds"].get<double>() >= 0) << c.dump();
  for (const auto& p : with_status(r, "passed"))
    EXPECT_GT(p["seconds"].get<double>(), 0) << p.dump();
}

TEST(ConformanceSelfTest, AWrongKernelIsReportedWithOpDtypeAndShape) {
  SuiteRun r =
      run_suite("FERRY_TESTDEV_BROKEN=1", "--device testdev:0 --op '^add$' --no-transfers");
  EXPECT_EQ(r.status, 1) << r.output;
  auto failed = with_status(r, "failed");
  ASSERT_FALSE(failed.empty()) << r.output;
  bool named = false;
  for (const auto& f : failed)
    named |= f["op"] == "add" && f["dtype"] == "f32" && f["shape"] == "[7] x [7]" &&
             f["detail"].get<std::string>().find("element 0") != std::string::npos;
  EXPECT_TRUE(named) << r.report["results"].dump(1);
  EXPECT_NE(r.output.find("failed  testdev:0  add          f32   [7] x [7]"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.report["summary"]["failed"].get<int>(), int(failed.size()));
}

TEST(ConformanceSelfTest, AnOutOfBoundsWriteIsCaughtByTheGuards) {
  SuiteRun r = run_suite("FERRY_TESTDEV_OOB=1", "--device testdev:0 --op '^mul$' --no-transfers");
  EXPECT_EQ(r.status, 1) << r.output;
  bool caught = false;
  for (const auto& f : with_status(r, "failed"))
    caught |= f["op"] == "mul" && f["dtype"] == "f32" &&
              f["detail"].get<std::string>().find("wrote outside output") != std::string::npos;
  EXPECT_TRUE(caught) << r.output;
}

// --threads (Note [Device thread-safety] in ferry/backend.hpp): a kernel with shared state is
// right serially and reported from threads in every case, the large cases' shorter check too
// (Note [Thread checks of large cases] in runner.cpp).
TEST(ConformanceSelfTest, AKernelThatRacesIsReportedUnderThreads) {
  const std::string args = "--device testdev:0 --op '^add$' --dtype f32 --no-transfers";
  SuiteRun serial = run_suite("FERRY_TESTDEV_RACY=1", args);
  EXPECT_EQ(serial.status, 0) << serial.output;
  SuiteRun r = run_suite("FERRY_TESTDEV_RACY=1", args + " --threads 4");
  EXPECT_EQ(r.status, 1) << r.output;
  // Every case with elements, not some: testdev makes each thread's first call meet another.
  bool small = false, large = false;
  ASSERT_TRUE(r.report.is_object()) << r.output;
  for (const auto& f : r.report["results"]) {
    if (f["class"] == "empty") continue;
    const bool reported =
        f["status"] == "failed" &&
        f["detail"].get<std::string>().find("not the serial run's result") != std::string::npos;
    EXPECT_TRUE(reported) << f.dump(1);
    small |= reported && f["shape"] == "[7] x [7]";
    large |= reported && f["class"] == "large > 128 MiB";
  }
  EXPECT_TRUE(small) << r.report["results"].dump(1);
  EXPECT_TRUE(large) << r.report["results"].dump(1);
}

TEST(ConformanceSelfTest, CompareHoldsNaNInfAndIntegersExactly) {
  using ferry::conformance::compare;
  double nmse = 0;
  auto f = [](std::vector<float> v) { return ferry::tensor(v); };
  EXPECT_EQ(compare(f({1, NAN, INFINITY}), f({1, NAN, INFINITY}), 0, &nmse), "");
  EXPECT_NE(compare(f({1, 2}), f({1, NAN}), 1, &nmse), "");
  EXPECT_NE(compare(f({-INFINITY}), f({INFINITY}), 1, &nmse), "");
  EXPECT_NE(compare(f({1, 2}), f({1, 2, 3}), 1, &nmse), "");
  EXPECT_EQ(compare(f({1.0f, 2.0f}), f({1.0f, 2.0001f}), 1e-8, &nmse), "");
  EXPECT_NEAR(nmse, 1e-8 / 5, 1e-9);
  EXPECT_NE(compare(f({1.0f, 2.0f}), f({1.0f, 2.1f}), 1e-8, &nmse), "");
  auto i = [](std::vector<std::int64_t> v) { return ferry::tensor(v); };
  EXPECT_NE(compare(i({1, 2}), i({1, 3}), 1e9, &nmse),
            "");                                     // integers: exact, whatever the threshold
  EXPECT_NE(compare(f({1}), i({1}), 1, &nmse), "");  // dtypes must match
}

// Every op of the table is exercised by some case (Case::kernel_ops), but the
// multi-tensor optimizer steps, which test_optim*.cpp and
// test_training_optim.cpp hold to the CPU on every device.
TEST(ConformanceSelfTest, EveryOpOfTheTableHasCases) {
  namespace fc = ferry::conformance;
  std::set<ferry::OpId> covered;
  for (const auto& cases : {fc::all_cases(), fc::grad_cases()})
    for (const fc::Case& c : cases)
      for (ferry::OpId k : c.kernel_ops()) covered.insert(k);
  for (const ferry::OpInfo& info : ferry::op_table())
    if (info.kind != ferry::OpKind::optim)
      EXPECT_TRUE(covered.count(info.id)) << "no conformance case exercises '" << info.name << "'";
}

// Every front-end of an op whose row has an autocast policy applies it (Note [Autocast] in
// ferry/autocast.hpp): the op's cases, run on the CPU in an f16 autocast scope, give f16
// from f32 inputs (low) and f32 from f16 inputs (f32), and a banned op is refused. (The
// promote rows meet mixed dtypes, which the cases do not make: test_autocast.cpp has them.)
TEST(ConformanceSelfTest, EveryAutocastRowCastsItsInputs) {
  namespace fc = ferry::conformance;
  using ferry::DType;
  using ferry::OpAutocast;
  std::set<ferry::OpId> checked;
  for (const fc::Case& c : fc::all_cases()) {
    const auto id = ferry::op_from_name(c.op);
    if (!id) continue;
    const OpAutocast policy = ferry::op_info(*id).autocast;
    if (policy == OpAutocast::none || policy == OpAutocast::promote) continue;
    if (c.dtype != (policy == OpAutocast::lower ? DType::f32 : DType::f16)) continue;
    fc::Inputs inputs = c.make_inputs();
    if (c.view) inputs = c.view(inputs);
    ferry::Autocast amp("cpu", DType::f16);
    checked.insert(*id);
    if (policy == OpAutocast::banned) {
      EXPECT_THROW(c.run(inputs), ferry::Error) << c.id();
      continue;
    }
    const ferry::Tensor out = c.run(inputs);
    EXPECT_EQ(out.dtype(), policy == OpAutocast::lower ? DType::f16 : DType::f32) << c.id();
  }
  for (const ferry::OpInfo& info : ferry::op_table())
    if (info.autocast != OpAutocast::none && info.autocast != OpAutocast::promote)
      EXPECT_TRUE(checked.count(info.id)) << "no case checks the autocast of '" << info.name << "'";
}

TEST(ConformanceSelfTest, ListWithADeviceShowsWhatItSupports) {
  SuiteRun r = run_suite("", "--list --device cpu");
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("  add "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("f32 f16 bf16 i32 i64 u8 i8 i16 bool f64"), std::string::npos)
      << r.output;
}

TEST(ConformanceSelfTest, DtypeOptionRunsOnlyThoseDtypes) {
  SuiteRun r = run_suite("", "--device cpu --op '^(add|sum)$' --dtype i64,f16 --no-transfers");
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_TRUE(r.report.is_object()) << r.output;
  std::set<std::string> seen;
  for (const auto& res : r.report["results"]) seen.insert(res["dtype"].get<std::string>());
  EXPECT_EQ(seen, (std::set<std::string>{"i64", "f16"})) << r.output;
  SuiteRun bad = run_suite("", "--list --dtype f32,q7");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("q7"), std::string::npos) << bad.output;
}
