// tests/test_plugin.cpp — a third party's backend module through the public
// plugin interface: "testdev" (tests/plugin/testdev_backend.cpp), whose memory
// the core can only reach through copy_from_host/copy_to_host, with four
// kernels (copy, fill, add, mul). Also: what a missing or bogus module does to
// the registry. Discovery through FERRY_BACKEND_PATH is checked in a fresh
// process by the plugin_env_check CTest test (tests/plugin/env_check.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"

namespace {

namespace fs = std::filesystem;

const std::string kTestdevModule =
    std::string(FERRY_TEST_PLUGIN_DIR) + "/libferry_backend_testdev.so";

// Loads the module by path: other tests in this binary may have run the
// registry's discovery already, so FERRY_BACKEND_PATH cannot be relied on.
// Loading it a second time is a no-op.
class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kTestdevModule)) << kTestdevModule << " was not built";
    ASSERT_NO_THROW(ferry::load_backend_module(kTestdevModule)) << ferry::describe_devices();
    ASSERT_TRUE(ferry::is_available("testdev:0")) << ferry::describe_devices();
    ASSERT_TRUE(ferry::is_available("testdev:1")) << ferry::describe_devices();
  }
  ferry::Device dev0() const { return ferry::Device("testdev:0"); }
  ferry::Device dev1() const { return ferry::Device("testdev:1"); }
};

std::vector<float> iota_f(std::size_t n, float start = 0.5f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + float(i) * 1.25f;
  return v;
}

std::vector<std::int64_t> iota_i(std::size_t n) {
  std::vector<std::int64_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::int64_t(i) * 1000003LL - 7;
  return v;
}

// A temp folder, removed at scope exit. Its name is fixed per process and
// test, so a repeated test (--gtest_repeat) loads the same module path again
// and sees the same registry entry.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path =
        fs::temp_directory_path() / ("ferry_test_plugin_" + std::to_string(::getpid()) + "_" + tag);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Restores an environment variable at scope exit.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* value) : name(n) { ::setenv(n, value, 1); }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

TEST_F(PluginTest, DevicesAreListedWithTheirKernels) {
  bool saw0 = false, saw1 = false;
  for (const ferry::DeviceInfo& d : ferry::devices()) {
    if (d.device == "testdev:0") {
      saw0 = true;
      EXPECT_TRUE(d.available);
      EXPECT_EQ(d.backend, "testdev");
      EXPECT_EQ(d.kind, ferry::DeviceKind::other);
      EXPECT_FALSE(d.caps.host_visible_memory);
    }
    if (d.device == "testdev:1") saw1 = true;
  }
  EXPECT_TRUE(saw0 && saw1) << ferry::describe_devices();
  EXPECT_EQ(dev0().str(), "testdev:0");
  EXPECT_EQ(ferry::device_impl(dev1()).device(), dev1());
  EXPECT_EQ(ferry::device_impl(dev0()).kernel_names(),
            (std::vector<std::string>{"add", "copy", "fill", "mul"}));
  EXPECT_THROW(ferry::Device("testdev:2"), ferry::DeviceError);
  EXPECT_FALSE(ferry::is_available("testdev:2"));
}

std::vector<std::string>* g_log = nullptr;
void capture_log(ferry::LogLevel, std::string_view msg) { g_log->emplace_back(msg); }

TEST_F(PluginTest, DebugLogShowsEveryCopyWithItsPath) {
  std::vector<std::string> lines;
  g_log = &lines;
  ferry::LogLevel saved = ferry::log_level();
  ferry::set_log_sink(capture_log);
  ferry::set_log_level(ferry::LogLevel::debug);
  ferry::Tensor x = ferry::ones({8}).to(dev0());
  ferry::Tensor y = (x + x).to(dev1()).to(ferry::Device::cpu());
  ferry::set_log_level(saved);
  ferry::set_log_sink(nullptr);
  g_log = nullptr;
  auto seen = [&](const std::string& s) {
    for (const auto& l : lines)
      if (l.find(s) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(seen("copy cpu -> testdev:0: 32 bytes (upload)"));
  EXPECT_TRUE(seen("op add on testdev:0"));
  EXPECT_TRUE(seen("copy testdev:0 -> testdev:1: 32 bytes (through the host)"));
  EXPECT_TRUE(seen("copy testdev:1 -> cpu: 32 bytes (download)"));
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(8, 2.0f));
}

TEST_F(PluginTest, BuffersAreNotHostVisible) {
  ferry::Tensor t = ferry::zeros({4}, {.device = dev0()});
  EXPECT_EQ(t.storage()->buffer().host_ptr(), nullptr);
}

TEST_F(PluginTest, RoundTripF32) {
  std::vector<float> v = iota_f(24);
  ferry::Tensor t = ferry::tensor(v, {2, 3, 4}).to(dev0());
  EXPECT_EQ(t.device(), dev0());
  EXPECT_EQ(t.sizes(), (ferry::Shape{2, 3, 4}));
  ferry::Tensor back = t.to(ferry::Device::cpu());
  EXPECT_TRUE(back.device().is_cpu());
  EXPECT_EQ(back.to_vector<float>(), v);
  EXPECT_EQ(t.to_vector<float>(), v);  // to_vector from the device directly
}

TEST_F(PluginTest, RoundTripI64) {
  std::vector<std::int64_t> v = iota_i(15);
  ferry::Tensor t = ferry::tensor(v, {5, 3}).to(dev0());
  EXPECT_EQ(t.dtype(), ferry::DType::i64);
  EXPECT_EQ(t.cpu().to_vector<std::int64_t>(), v);
}

TEST_F(PluginTest, RoundTripOfNonContiguousViews) {
  // A view made on the device: the core needs the device's strided "copy" kernel.
  ferry::Tensor cpu_f = ferry::tensor(iota_f(12), {3, 4});
  ferry::Tensor dev_f = cpu_f.to(dev0());
  ferry::Tensor dev_t = dev_f.t();
  ASSERT_FALSE(dev_t.is_contiguous());
  EXPECT_EQ(dev_t.to_vector<float>(), cpu_f.t().to_vector<float>());
  ferry::Tensor dev_s = dev_f.slice(1, 1, 4, 2);  // columns 1 and 3
  EXPECT_EQ(dev_s.cpu().to_vector<float>(), cpu_f.slice(1, 1, 4, 2).to_vector<float>());
  EXPECT_EQ(dev_t.contiguous().device(), dev0());

  ferry::Tensor cpu_i = ferry::tensor(iota_i(24), {2, 3, 4});
  ferry::Tensor dev_i = cpu_i.to(dev0()).permute({2, 0, 1});
  EXPECT_EQ(dev_i.to_vector<std::int64_t>(), cpu_i.permute({2, 0, 1}).to_vector<std::int64_t>());

  // A view made on the CPU, moved to the device: it arrives contiguous.
  ferry::Tensor moved = cpu_f.t().to(dev0());
  EXPECT_TRUE(moved.is_contiguous());
  EXPECT_EQ(moved.to_vector<float>(), cpu_f.t().to_vector<float>());

  // Writing into a strided view on the device (copy_ with a broadcast source).
  ferry::Tensor z = ferry::zeros({3, 4}, {.device = dev0()});
  z.slice(1, 0, 4, 2).copy_(ferry::tensor(std::vector<float>{7, 8}, {2}));
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{7, 0, 8, 0, 7, 0, 8, 0, 7, 0, 8, 0}));
}

TEST_F(PluginTest, Fill) {
  EXPECT_EQ(ferry::full({2, 2}, 2.5, {.device = dev0()}).to_vector<float>(),
            (std::vector<float>{2.5f, 2.5f, 2.5f, 2.5f}));
  ferry::Tensor i = ferry::zeros({3}, {.dtype = ferry::DType::i64, .device = dev1()});
  i.fill_(std::int64_t(1) << 40);
  EXPECT_EQ(i.to_vector<std::int64_t>(), (std::vector<std::int64_t>(3, std::int64_t(1) << 40)));
}

TEST_F(PluginTest, AddAndMulBroadcast) {
  ferry::Tensor a = ferry::tensor(iota_f(6), {2, 1, 3});
  ferry::Tensor b = ferry::tensor(iota_f(4, -3.0f), {4, 1});
  ferry::Tensor da = a.to(dev0()), db = b.to(dev0());
  ferry::Tensor sum = ferry::add(da, db);
  ferry::Tensor prod = ferry::mul(da, db);
  EXPECT_EQ(sum.device(), dev0());
  EXPECT_EQ(sum.sizes(), (ferry::Shape{2, 4, 3}));
  EXPECT_EQ(sum.cpu().to_vector<float>(), ferry::add(a, b).to_vector<float>());
  EXPECT_EQ(prod.cpu().to_vector<float>(), ferry::mul(a, b).to_vector<float>());
  // Operators, a scalar operand (a 0-d tensor filled on the device), and a
  // transposed input.
  EXPECT_EQ(((da + db) * 2.0).to_vector<float>(), ((a + b) * 2.0).to_vector<float>());
  ferry::Tensor m = ferry::tensor(iota_f(12), {3, 4});
  ferry::Tensor row = ferry::tensor(iota_f(3, 1.0f), {3});
  EXPECT_EQ(ferry::mul(m.to(dev1()).t(), row.to(dev1())).to_vector<float>(),
            ferry::mul(m.t(), row).to_vector<float>());
}

TEST_F(PluginTest, CopyBetweenItsTwoDevicesGoesThroughTheHost) {
  ferry::Tensor cpu_t = ferry::tensor(iota_f(20), {4, 5});
  ferry::Tensor on0 = cpu_t.to(dev0());
  ferry::Tensor on1 = on0.to(dev1());
  EXPECT_EQ(on1.device(), dev1());
  EXPECT_NE(on1.storage().get(), on0.storage().get());
  EXPECT_EQ(on1.cpu().to_vector<float>(), cpu_t.to_vector<float>());
  ferry::Tensor view1 = on0.t().to(dev1());  // non-contiguous source
  EXPECT_EQ(view1.to_vector<float>(), cpu_t.t().to_vector<float>());
  ferry::Tensor i1 = ferry::tensor(iota_i(7)).to(dev0()).to(dev1());
  EXPECT_EQ(i1.to_vector<std::int64_t>(), iota_i(7));
  // And the result is usable there.
  EXPECT_EQ(ferry::add(on1, on1).to_vector<float>(), ferry::add(cpu_t, cpu_t).to_vector<float>());
}

TEST_F(PluginTest, MissingOpIsUnsupportedNamingOpAndDevice) {
  ferry::Tensor t = ferry::ones({3}, {.device = dev0()});
  try {
    (void)ferry::exp(t);
    FAIL() << "exp on testdev:0 should throw UnsupportedError";
  } catch (const ferry::UnsupportedError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("exp"), std::string::npos) << msg;
    EXPECT_NE(msg.find("testdev:0"), std::string::npos) << msg;
  }
  // A kernel it has, with a dtype it lacks: the kernel names op and dtype.
  ferry::Tensor h =
      ferry::ones({3}, {.dtype = ferry::DType::f16}).to(dev0());  // raw bytes move fine
  try {
    (void)h.clone();
    FAIL() << "clone of an f16 tensor on testdev:0 should throw UnsupportedError";
  } catch (const ferry::UnsupportedError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("copy"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f16"), std::string::npos) << msg;
  }
  // What it says it supports is what its kernels take (Note [Capabilities]).
  const ferry::DeviceImpl& impl = ferry::device_impl(dev0());
  EXPECT_FALSE(impl.supports(ferry::OpId::copy, ferry::DType::f16));
  EXPECT_TRUE(impl.supports(ferry::OpId::copy, ferry::DType::i64));
  EXPECT_FALSE(impl.supports(ferry::OpId::add, ferry::DType::i64));
  EXPECT_FALSE(impl.supports(ferry::OpId::sub, ferry::DType::f32));  // no kernel
  EXPECT_EQ(t.to(ferry::DType::i64).to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{1, 1, 1}));
}

// testdev computes no f64: its bytes move to a plugin's device and back unchanged,
// and a kernel there refuses it with UnsupportedError naming op and dtype.
TEST_F(PluginTest, F64MovesAsBytesAndKernelsRefuseIt) {
  const std::vector<double> v = {0.1, -1e300, 4.9e-324, -0.0, 1.0 / 3.0, 2.5};
  ferry::Tensor t = ferry::tensor(v, {2, 3}).to(dev0());
  EXPECT_EQ(t.dtype(), ferry::DType::f64);
  EXPECT_EQ(t.cpu().to_vector<double>(), v);
  EXPECT_EQ(t.to(dev1()).to_vector<double>(), v);
  EXPECT_EQ(t.to_vector<float>(), ferry::tensor(v).to_vector<float>());  // converted on the host
  auto expect_refused = [](auto call, const char* op) {
    try {
      call();
      ADD_FAILURE() << op << " on an f64 tensor on testdev should throw UnsupportedError";
    } catch (const ferry::UnsupportedError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(op), std::string::npos) << msg;
      EXPECT_NE(msg.find("f64"), std::string::npos) << msg;
    }
  };
  expect_refused([&] { (void)t.clone(); }, "copy");
  expect_refused([&] { (void)t.t().contiguous(); }, "copy");
  expect_refused([&] { (void)ferry::zeros({2}, {.dtype = ferry::DType::f64, .device = dev0()}); },
                 "fill");
  expect_refused([&] { (void)ferry::add(t, t); }, "add");
}

TEST_F(PluginTest, MixingDevicesIsAMismatchNamingBoth) {
  ferry::Tensor c = ferry::ones({3});
  ferry::Tensor d = ferry::ones({3}, {.device = dev0()});
  for (int order = 0; order < 2; ++order) {
    try {
      (void)(order == 0 ? ferry::add(c, d) : ferry::add(d, c));
      FAIL() << "add of a cpu and a testdev tensor should throw DeviceMismatchError";
    } catch (const ferry::DeviceMismatchError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
      EXPECT_NE(msg.find("testdev:0"), std::string::npos) << msg;
    }
  }
  EXPECT_THROW((void)ferry::mul(d, ferry::ones({3}, {.device = dev1()})),
               ferry::DeviceMismatchError);
}

// Note [testdev fault switches] in tests/plugin/testdev_backend.cpp.
TEST_F(PluginTest, FaultSwitchBrokenAdd) {
  ferry::Tensor a = ferry::ones({4}, {.device = dev0()});
  EXPECT_EQ(ferry::add(a, a).to_vector<float>(), (std::vector<float>{2, 2, 2, 2}));
  ScopedEnv broken("FERRY_TESTDEV_BROKEN", "1");
  EXPECT_EQ(ferry::add(a, a).to_vector<float>(), (std::vector<float>{3, 2, 2, 2}));
}

TEST_F(PluginTest, FaultSwitchOutOfBoundsMul) {
  // Run "mul" straight through the device's kernel table with an output view
  // over the first 4 of 6 elements, the way a conformance suite guards outputs.
  ferry::DeviceImpl& impl = ferry::device_impl(dev0());
  ferry::Tensor guard = ferry::zeros({6}, {.device = dev0()});
  ferry::Tensor x = ferry::full({4}, 3.0, {.device = dev0()});
  auto arg = [](const ferry::Tensor& t, std::vector<std::int64_t> sizes) {
    ferry::TensorArg a = ferry::tensor_arg(t);
    a.sizes = std::move(sizes);
    a.strides = {1};
    return a;
  };
  const ferry::KernelFn* mul = impl.find_kernel(ferry::OpId::mul);
  ASSERT_NE(mul, nullptr);
  ferry::OpCall call{.op = ferry::OpId::mul,
                     .inputs = {arg(x, {4}), arg(x, {4})},
                     .outputs = {arg(guard, {4})},
                     .attrs = {}};
  (*mul)(impl, call);
  EXPECT_EQ(guard.to_vector<float>(), (std::vector<float>{9, 9, 9, 9, 0, 0}));
  ScopedEnv oob("FERRY_TESTDEV_OOB", "1");
  (*mul)(impl, call);
  EXPECT_EQ(guard.to_vector<float>(), (std::vector<float>{9, 9, 9, 9, 9, 0}));
  // A whole-buffer output: the stray write lands in the buffer's padding.
  EXPECT_EQ(ferry::mul(x, x).to_vector<float>(), (std::vector<float>{9, 9, 9, 9}));
}

TEST(PluginLoading, MissingModuleIsABackendError) {
  TempDir dir("missing");
  std::string path = (dir.path / "libferry_backend_nosuchthing.so").string();
  try {
    ferry::load_backend_module(path);
    FAIL() << "loading a module that does not exist should throw BackendError";
  } catch (const ferry::BackendError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  }
  EXPECT_FALSE(ferry::is_available("nosuchthing"));
}

TEST(PluginLoading, FileThatIsNotABackendIsListedUnavailable) {
  TempDir dir("bogus");
  std::string path = (dir.path / "libferry_backend_bogus.so").string();
  { std::ofstream(path).flush(); }  // an empty file: dlopen refuses it
  std::string reason;
  try {
    ferry::load_backend_module(path);
    FAIL() << "loading an empty file should throw BackendError";
  } catch (const ferry::BackendError& e) {
    reason = e.what();
    EXPECT_NE(reason.find("bogus"), std::string::npos) << reason;
    EXPECT_NE(reason.find(path), std::string::npos) << reason;
    EXPECT_NE(reason.find("could not load"), std::string::npos) << reason;
  }
  bool listed = false;
  for (const ferry::DeviceInfo& d : ferry::devices()) {
    if (d.backend != "bogus") continue;
    listed = true;
    EXPECT_FALSE(d.available);
    EXPECT_EQ(d.unavailable_reason, reason);
  }
  EXPECT_TRUE(listed) << ferry::describe_devices();
  EXPECT_FALSE(ferry::is_available("bogus"));
  EXPECT_THROW(ferry::Device("bogus:0"), ferry::DeviceError);
  // The process carries on: the CPU still works.
  EXPECT_EQ(ferry::add(ferry::ones({2}), ferry::ones({2})).to_vector<float>(),
            (std::vector<float>{2, 2}));
}

TEST(PluginLoading, AFailedModuleCanBeRetriedFromAnotherPath) {
  TempDir dir("retry");
  std::string bad = (dir.path / "libferry_backend_retrytest.so").string();
  { std::ofstream(bad).flush(); }
  EXPECT_THROW(ferry::load_backend_module(bad), ferry::BackendError);
  // A second bad file under the same name is tried too, and reports its own path.
  TempDir dir2("retry2");
  std::string bad2 = (dir2.path / "libferry_backend_retrytest.so").string();
  { std::ofstream(bad2).flush(); }
  try {
    ferry::load_backend_module(bad2);
    FAIL() << "the second attempt returned silently";
  } catch (const ferry::BackendError& e) {
    EXPECT_NE(std::string(e.what()).find(bad2), std::string::npos) << e.what();
  }
}

TEST(PluginLoading, AnUnconventionalFileLeavesNoEntryBehind) {
  TempDir dir("nope");
  std::string path = (dir.path / "nope.so").string();
  { std::ofstream(path).flush(); }
  EXPECT_THROW(ferry::load_backend_module(path), ferry::BackendError);
  for (const ferry::DeviceInfo& d : ferry::devices())
    EXPECT_EQ(d.backend.find("nope"), std::string::npos) << d.backend;
}

}  // namespace
