// Tests of ferry::profiler (ferry/profiler.hpp): the events of a known
// sequence of ops, copies and ranges on the CPU and on Vulkan (lavapipe in
// CI), their order, tracks, device spans and nesting; memory counters; the
// Chrome trace as JSON; key_averages; errors; starting and stopping in a loop.
// The trace of a whole sample is checked by tools/check_trace.py
// (tests/CMakeLists.txt: profile_sample_*).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "ferry/ferry.hpp"
#include "profiler/profiler_hooks.hpp"

using namespace ferry;
namespace prof = ferry::profiler;

namespace {

std::vector<const prof::Event*> of_kind(const prof::Profile& p, prof::EventKind kind,
                                        const std::string& device = {}) {
  std::vector<const prof::Event*> out;
  for (const prof::Event& e : p.events())
    if (e.kind == kind && (device.empty() || e.device == device)) out.push_back(&e);
  return out;
}

const prof::Event* find_range(const prof::Profile& p, const std::string& name) {
  for (const prof::Event& e : p.events())
    if (e.kind == prof::EventKind::range && e.name == name) return &e;
  return nullptr;
}

// A forward-and-backward step of a small linear model on `dev` inside a range.
prof::Profile profile_step(const Device& dev) {
  manual_seed(1);
  Tensor w = randn({32, 16}).to(dev).requires_grad_();
  Tensor x = randn({8, 16}).to(dev);
  prof::Scope scope;
  {
    auto r = prof::range("step");
    Tensor y = relu(matmul(x, w.t()));
    Tensor loss = sum(y);
    loss.backward();
    synchronize(dev);
  }
  return scope.stop();
}

void expect_ops_timed_inside(const prof::Profile& p, const std::string& device) {
  const prof::Event* step = find_range(p, "step");
  ASSERT_NE(step, nullptr);
  const auto ops = of_kind(p, prof::EventKind::op, device);
  ASSERT_GE(ops.size(), 4u) << "matmul, relu, sum and their gradients";
  std::vector<std::string> names;
  for (const prof::Event* e : ops) {
    names.push_back(e->name);
    EXPECT_EQ(e->thread, step->thread);
    // The host span (the call, or the enqueue) lies inside the range that issued it.
    EXPECT_GE(e->begin_ns, step->begin_ns) << e->name;
    EXPECT_LE(e->end_ns, step->end_ns) << e->name;
    ASSERT_TRUE(e->has_device_time()) << e->name << " on " << device;
    EXPECT_GT(e->device_end_ns - e->device_begin_ns, 0) << e->name;
  }
  // The forward ops come first, in the order they were called.
  auto at = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) - names.begin();
  };
  ASSERT_LT(at("matmul"), std::ptrdiff_t(names.size())) << "ops seen: " << names.size();
  ASSERT_LT(at("relu"), std::ptrdiff_t(names.size()));
  EXPECT_LT(at("matmul"), at("relu"));
  // The forward matmul's operands as its kernel sees them: a batch of one.
  EXPECT_EQ(ops[std::size_t(at("matmul"))]->inputs, "f32[1, 8, 16], f32[1, 16, 32]");
}

}  // namespace

TEST(Profiler, CpuOpsInOrderOnTheirTrackInsideTheirRange) {
  const prof::Profile p = profile_step(Device("cpu"));
  expect_ops_timed_inside(p, Device::cpu().str());
  // On the CPU the kernel finishes inside the call: the device span is the host's.
  for (const prof::Event* e : of_kind(p, prof::EventKind::op)) {
    EXPECT_EQ(e->device_begin_ns, e->begin_ns);
    EXPECT_EQ(e->device_end_ns, e->end_ns);
  }
  const auto waits = of_kind(p, prof::EventKind::wait);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0]->name, "synchronize");
}

TEST(Profiler, GpuOpsCarryTheDevicesOwnClock) {
  std::vector<std::string> gpus;
  for (const char* d : {"vulkan:0", "cuda:0"})
    if (is_available(d)) gpus.push_back(d);
  if (gpus.empty()) GTEST_SKIP() << "no Vulkan or CUDA device";
  for (const std::string& d : gpus) {
    SCOPED_TRACE(d);
    const prof::Profile p = profile_step(Device(d));
    expect_ops_timed_inside(p, d);
    // The device spans come from its clock (Vulkan timestamp queries, CUDA
    // events), in queue order, one after another (Note [Vulkan timing]), and
    // end before the range's final synchronize returned; the clock mapping
    // is good to a millisecond here.
    const prof::Event* step = find_range(p, "step");
    const auto ops = of_kind(p, prof::EventKind::op, d);
    const std::int64_t slack = 1'000'000;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      EXPECT_NE(ops[i]->device_begin_ns, ops[i]->begin_ns) << "a device clock, not the host's";
      EXPECT_GE(ops[i]->device_begin_ns, step->begin_ns - slack) << ops[i]->name;
      EXPECT_LE(ops[i]->device_end_ns, step->end_ns + slack) << ops[i]->name;
      if (i > 0) EXPECT_GE(ops[i]->device_begin_ns, ops[i - 1]->device_end_ns) << ops[i]->name;
    }
  }
}

// Where the driver samples both clocks at once (VK_EXT_calibrated_timestamps; lavapipe has it),
// the mapping is good to the deviation it reports: no op's device work ends before the host
// enqueued it, nor after the range's final synchronize returned. The mapping by a submitted
// timestamp (FERRY_VULKAN_CALIBRATED_TIMESTAMPS=0, ctest profiler_vulkan_submitted_clock) says so.
TEST(Profiler, CalibratedClocksPlaceDeviceWorkBetweenEnqueueAndWait) {
  if (!is_available("vulkan:0")) GTEST_SKIP() << "no Vulkan device";
  const Device dev("vulkan:0");
  const prof::Profile p = profile_step(dev);
  const std::string how = device_impl(dev).info().properties.at("clock_calibration");
  const char* off = std::getenv("FERRY_VULKAN_CALIBRATED_TIMESTAMPS");
  if (off && std::string(off) == "0") {
    EXPECT_EQ(how.rfind("submitted timestamps, window ", 0), 0u) << how;
    return;
  }
  const std::string prefix = "VK_EXT_calibrated_timestamps, deviation ";
  if (how.rfind(prefix, 0) != 0) GTEST_SKIP() << "clock_calibration: " << how;
  const std::int64_t deviation = std::stoll(how.substr(prefix.size()));
  EXPECT_LT(deviation, 1'000'000) << how;
  const std::int64_t slack = deviation + 1000;  // and the double's rounding of the ticks
  const prof::Event* step = find_range(p, "step");
  ASSERT_NE(step, nullptr);
  for (const prof::Event* e : of_kind(p, prof::EventKind::op, dev.str())) {
    ASSERT_TRUE(e->has_device_time()) << e->name;
    EXPECT_GE(e->device_end_ns, e->begin_ns - slack) << e->name << " ended before it was enqueued";
    EXPECT_LE(e->device_end_ns, step->end_ns + slack) << e->name << " ended after the wait";
  }
}

TEST(Profiler, CopiesNameTheirRouteAndBytes) {
  std::vector<std::string> devs = {"cpu"};
  if (is_available("vulkan:0")) devs.push_back("vulkan:0");
  for (const std::string& d : devs) {
    SCOPED_TRACE(d);
    Tensor x = arange(0, 1000, 1, {.dtype = DType::f32});
    prof::Scope scope;
    Tensor y = x.to(Device(d));
    Tensor back = y.to(Device("cpu"));
    const prof::Profile p = scope.stop();
    if (d == "cpu") continue;  // x.to(cpu) is x itself: nothing moves
    const auto copies = of_kind(p, prof::EventKind::copy);
    ASSERT_EQ(copies.size(), 2u);
    EXPECT_EQ(copies[0]->bytes, 4000u);
    EXPECT_EQ(copies[0]->name, "copy HtoD");
    EXPECT_EQ(copies[0]->detail, "cpu -> vulkan:0, upload");
    EXPECT_EQ(copies[1]->name, "copy DtoH");
    EXPECT_EQ(copies[1]->detail.rfind("vulkan:0 -> cpu, ", 0), 0u) << copies[1]->detail;
  }
}

// A session whose first event on a device is a copy that keeps only its host
// span (a download that waits inside the call) still times later ops with the
// device's clock.
TEST(Profiler, AHostTimedCopyFirstLeavesTheDeviceClockOn) {
  if (!is_available("vulkan:0")) GTEST_SKIP() << "no Vulkan device";
  const Device dev("vulkan:0");
  Tensor x = ones({64}, {.device = dev});
  synchronize(dev);
  prof::Scope scope;
  {
    // The Work the core makes for a download that waits inside the call.
    profiler::detail::Work download(prof::EventKind::copy, device_impl(dev), "copy DtoH",
                                    /*device_timed=*/false);
  }
  Tensor y = relu(x);
  synchronize(dev);
  const prof::Profile p = scope.stop();
  const auto ops = of_kind(p, prof::EventKind::op, dev.str());
  ASSERT_FALSE(ops.empty());
  for (const prof::Event* e : ops) {
    ASSERT_TRUE(e->has_device_time()) << e->name;
    EXPECT_NE(e->device_begin_ns, e->begin_ns) << e->name << ": timed by the device's clock";
  }
}

TEST(Profiler, MigrationShowsItsGroupsAndCopies) {
  if (!is_available("vulkan:0")) GTEST_SKIP() << "no Vulkan device";
  manual_seed(0);
  nn::Sequential model;
  model.push_back(std::make_shared<nn::Linear>(64, 64));
  model.push_back(std::make_shared<nn::Linear>(64, 8));
  prof::Scope scope;
  migrate(model, Device("vulkan:0"));
  const prof::Profile p = scope.stop();
  const prof::Event* migrate_range = find_range(p, "migrate");
  ASSERT_NE(migrate_range, nullptr);
  bool group = false;
  for (const prof::Event& e : p.events())
    if (e.kind == prof::EventKind::range && e.name.rfind("migrate cpu -> vulkan:0 (", 0) == 0)
      group = true;
  EXPECT_TRUE(group);
  std::uint64_t bytes = 0;
  for (const prof::Event* e : of_kind(p, prof::EventKind::copy, "vulkan:0")) {
    EXPECT_GE(e->begin_ns, migrate_range->begin_ns);
    EXPECT_LE(e->end_ns, migrate_range->end_ns);
    EXPECT_TRUE(e->has_device_time()) << e->name;
    bytes += e->bytes;
  }
  EXPECT_EQ(bytes, std::uint64_t(64 * 64 + 64 + 64 * 8 + 8) * 4) << "every parameter's bytes";
}

TEST(Profiler, MemoryCountersReturnToTheirStartAfterFrees) {
  std::vector<std::string> devs = {"cpu"};
  if (is_available("vulkan:0")) devs.push_back("vulkan:0");
  for (const std::string& d : devs) {
    SCOPED_TRACE(d);
    const Device dev(d);
    synchronize(dev);
    const std::uint64_t before = memory_stats(dev).allocated;
    prof::Scope scope;
    {
      Tensor a = ones({256, 256}, {.device = dev});
      Tensor b = a * 2.0;
      Tensor c = b + a;
      synchronize(dev);
    }
    const prof::Profile p = scope.stop();
    const auto mem = of_kind(p, prof::EventKind::memory, dev.str());
    std::size_t allocs = 0, frees = 0;
    std::uint64_t peak = 0;
    for (const prof::Event* e : mem) {
      (e->name == "alloc" ? allocs : frees) += 1;
      peak = std::max(peak, e->allocated);
    }
    EXPECT_GE(allocs, 3u) << "a, b, c (and any scalar operand)";
    EXPECT_EQ(frees, allocs);
    ASSERT_FALSE(mem.empty());
    EXPECT_GE(peak, before + 3 * 256 * 256 * 4);
    EXPECT_EQ(mem.back()->allocated, before) << "the counter returns to where it started";
  }
}

TEST(Profiler, ChromeTraceIsJsonWithTracksFlowsAndCounters) {
  std::string dev = is_available("vulkan:0") ? "vulkan:0" : "cpu";
  const prof::Profile p = profile_step(Device(dev));
  const nlohmann::json j = nlohmann::json::parse(p.chrome_trace());
  ASSERT_TRUE(j.contains("traceEvents"));
  std::set<std::string> processes;
  std::map<std::uint64_t, int> flows;  // id -> starts minus finishes
  std::size_t device_slices = 0, counters = 0;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name") processes.insert(e["args"]["name"]);
    if (ph == "X") {
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      if (e["pid"] != 1) ++device_slices;
    }
    if (ph == "s") ++flows[e["id"]];
    if (ph == "f") --flows[e["id"]];
    if (ph == "C") ++counters;
  }
  EXPECT_TRUE(processes.count("host"));
  EXPECT_TRUE(processes.count(Device(dev).str()));
  EXPECT_GT(device_slices, 0u);
  EXPECT_GT(counters, 0u);
  ASSERT_FALSE(flows.empty());
  for (const auto& [id, n] : flows) EXPECT_EQ(n, 0) << "flow " << id << " has both ends";
}

TEST(Profiler, KeyAveragesCountCallsAndSortByTime) {
  Tensor x = ones({64, 64});
  prof::Scope scope;
  for (int i = 0; i < 5; ++i) x = relu(x * 1.0);
  const prof::Profile p = scope.stop();
  const auto rows = p.key_averages();
  ASSERT_FALSE(rows.empty());
  bool found = false;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) EXPECT_GE(rows[i - 1].device_total_ns, rows[i].device_total_ns);
    if (rows[i].name == "relu") {
      found = true;
      EXPECT_EQ(rows[i].calls, 5u);
      EXPECT_EQ(rows[i].device, Device::cpu().str());
      EXPECT_GT(rows[i].device_total_ns, 0);
    }
  }
  EXPECT_TRUE(found);
  const std::string table = p.table();
  EXPECT_NE(table.find("relu"), std::string::npos) << table;
  EXPECT_NE(table.find("Device total"), std::string::npos);
}

TEST(Profiler, ThreadsGetTracksOfTheirOwn) {
  prof::Scope scope;
  std::thread t([] { Tensor y = relu(ones({16})); });
  Tensor z = relu(ones({16}));
  t.join();
  const prof::Profile p = scope.stop();
  std::set<std::uint32_t> threads;
  for (const prof::Event* e : of_kind(p, prof::EventKind::op))
    if (e->name == "relu") threads.insert(e->thread);
  EXPECT_EQ(threads.size(), 2u);
  EXPECT_TRUE(nlohmann::json::accept(p.chrome_trace()));
}

TEST(Profiler, OffRecordsNothingAndRangesCostNothing) {
  EXPECT_FALSE(prof::enabled());
  {
    auto r = prof::range("ignored");
    Tensor y = relu(ones({16}));
  }
  prof::Scope scope;
  const prof::Profile p = scope.stop();
  EXPECT_TRUE(p.events().empty());
}

TEST(Profiler, MisuseIsAnErrorNamingTheFix) {
  EXPECT_THROW(prof::stop(), Error);
  prof::start();
  EXPECT_THROW(prof::start(), Error);
  EXPECT_THROW(prof::Scope{}, Error);
  const prof::Profile p = prof::stop();
  EXPECT_FALSE(prof::enabled());
  EXPECT_THROW(p.save("/nonexistent-dir/trace.json"), Error);
}

TEST(Profiler, StartingAndStoppingInALoopKeepsNothing) {
  std::vector<std::string> devs = {"cpu"};
  if (is_available("vulkan:0")) devs.push_back("vulkan:0");
  for (const std::string& d : devs) {
    SCOPED_TRACE(d);
    const Device dev(d);
    Tensor x = ones({32}, {.device = dev});
    synchronize(dev);
    const std::uint64_t before = memory_stats(dev).allocated;
    std::size_t first = 0;
    for (int i = 0; i < 20; ++i) {
      prof::Scope scope;
      Tensor y = relu(x * 2.0);
      synchronize(dev);
      y = Tensor();
      const std::size_t n = scope.stop().events().size();
      if (i == 0) first = n;
      EXPECT_EQ(n, first) << "round " << i << ": nothing carried over";
    }
    EXPECT_EQ(memory_stats(dev).allocated, before);
  }
}

TEST(Profiler, SavesATraceFile) {
  const auto path = std::filesystem::temp_directory_path() / "ferry_profiler_test.json";
  const prof::Profile p = profile_step(Device("cpu"));
  p.save(path.string());
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_GT(j["traceEvents"].size(), 10u);
  std::filesystem::remove(path);
}
