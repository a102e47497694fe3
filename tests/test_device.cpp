// Device strings, the registry and default-device selection.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <unordered_set>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "registry_internal.hpp"

using ferry::Device;
using ferry::DeviceError;

TEST(Device, ParsesPrintsAndRoundTrips) {
  Device cpu("cpu");
  EXPECT_TRUE(cpu.is_cpu());
  EXPECT_EQ(cpu.str(), "cpu");
  EXPECT_EQ(Device("cpu:0"), cpu);
  EXPECT_EQ(Device::cpu(), cpu);
  Device v = Device::parse_syntax("vulkan:12");
  EXPECT_EQ(v.type(), "vulkan");
  EXPECT_EQ(v.index(), 12);
  EXPECT_EQ(v.str(), "vulkan:12");
  EXPECT_EQ(Device::parse_syntax(v.str()), v);
  EXPECT_EQ(Device::parse_syntax("cuda"), Device::parse_syntax("cuda:0"));
  EXPECT_EQ(Device::parse_syntax("cuda").str(), "cuda:0");
}

TEST(Device, ComparesAndHashes) {
  Device a = Device::parse_syntax("vulkan:0"), b = Device::parse_syntax("vulkan:1");
  Device c = Device::parse_syntax("cuda:0");
  EXPECT_NE(a, b);
  EXPECT_TRUE(a < b);
  EXPECT_TRUE(c < a);  // ordered by backend name, then index
  std::unordered_set<Device> set{a, b, c, Device::parse_syntax("vulkan:0")};
  EXPECT_EQ(set.size(), 3u);
  EXPECT_EQ(std::hash<Device>()(a), std::hash<Device>()(Device::parse_syntax("vulkan:0")));
}

TEST(Device, StrictParsingRejectsMalformedStrings) {
  for (const char* bad : {"", ":0", "cuda:", "cuda:-1", "cuda:1x", "CUDA", "cuda:01", "cu da",
                          "cuda:0:1", "1cuda", "cuda:9999999", "vulkan: 1"}) {
    try {
      Device::parse_syntax(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const DeviceError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("invalid device string"), std::string::npos) << msg;
      EXPECT_NE(msg.find("available: cpu"), std::string::npos)
          << "should list what is available: " << msg;
    }
  }
}

TEST(Device, UnknownOrUnavailableDevicesListWhatIsAvailable) {
  try {
    Device d("nosuchbackend:0");
    FAIL() << "accepted an unknown backend";
  } catch (const DeviceError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("nosuchbackend"), std::string::npos) << msg;
    EXPECT_NE(msg.find("available: cpu"), std::string::npos) << msg;
  }
  EXPECT_THROW(Device("cpu:1"), DeviceError);  // one CPU device
  if (!ferry::is_available("cuda")) {
    try {
      Device d("cuda:0");
      FAIL();
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("unavailable"), std::string::npos) << e.what();
    }
  }
}

TEST(Registry, ListsEveryKnownBackendWithReasons) {
  auto list = ferry::devices();
  ASSERT_FALSE(list.empty());
  EXPECT_EQ(list[0].device, "cpu");
  EXPECT_TRUE(list[0].available);
  EXPECT_EQ(list[0].kind, ferry::DeviceKind::cpu);
  EXPECT_GT(list[0].memory_total, 0u);
  EXPECT_GT(list[0].memory_free, 0u);
  EXPECT_LE(list[0].memory_free, list[0].memory_total);
  EXPECT_FALSE(list[0].name.empty());
  bool seen_cuda = false, seen_vulkan = false, seen_unavailable = false;
  for (const auto& d : list) {
    if (d.backend == "cuda") seen_cuda = true;
    if (d.backend == "vulkan") seen_vulkan = true;
    if (!d.available) {
      seen_unavailable = true;
      EXPECT_FALSE(d.unavailable_reason.empty()) << d.device;
      EXPECT_EQ(d.unavailable_reason.rfind(d.backend + ":", 0), 0u) << d.unavailable_reason;
    } else {
      EXPECT_TRUE(ferry::is_available(d.device)) << d.device;
      EXPECT_FALSE(seen_unavailable) << "available devices come first";
    }
  }
  EXPECT_TRUE(seen_cuda);
  EXPECT_TRUE(seen_vulkan);
  EXPECT_TRUE(ferry::is_available("cpu"));
  EXPECT_FALSE(ferry::is_available("cpu:3"));
  EXPECT_FALSE(ferry::is_available("nosuch"));
  EXPECT_NE(ferry::describe_devices().find("available: cpu"), std::string::npos);
}

TEST(Registry, UuidPrintsAsCanonicalHex) {
  ferry::DeviceInfo info;
  for (int i = 0; i < 16; ++i) info.uuid[std::size_t(i)] = std::uint8_t(i * 17);
  EXPECT_EQ(info.uuid_str(), "00112233-4455-6677-8899-aabbccddeeff");
}

TEST(Registry, DefaultDeviceNeverPicksCpuTypeGpusAndHonoursFerryDevice) {
  ::unsetenv("FERRY_DEVICE");
  Device d = ferry::default_device();
  for (const auto& info : ferry::devices())
    if (info.device == d.str() && !d.is_cpu()) {
      EXPECT_NE(info.kind, ferry::DeviceKind::cpu_gpu) << "lavapipe must not be the default";
    }
  if (!ferry::is_available("cuda") && !ferry::is_available("vulkan")) EXPECT_TRUE(d.is_cpu());
  ::setenv("FERRY_DEVICE", "cpu", 1);
  EXPECT_TRUE(ferry::default_device().is_cpu());
  ::setenv("FERRY_DEVICE", "nosuch:0", 1);
  try {
    ferry::default_device();
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("FERRY_DEVICE"), std::string::npos) << e.what();
  }
  ::unsetenv("FERRY_DEVICE");
}

TEST(Registry, SearchPathStartsWithFerryBackendPath) {
  ::setenv("FERRY_BACKEND_PATH", "/opt/a:/opt/b", 1);
  auto path = ferry::backend_search_path();
  ::unsetenv("FERRY_BACKEND_PATH");
  ASSERT_GE(path.size(), 3u);
  EXPECT_EQ(path[0], "/opt/a");
  EXPECT_EQ(path[1], "/opt/b");
  EXPECT_NE(path[2].find("lib"), std::string::npos)
      << "then the folder libferry lives in: " << path[2];
}

TEST(Registry, EventsAndSynchronizeHaveCoreDefaults) {
  // The CPU runs ops to completion, so the core's default event is already done.
  ferry::DeviceImpl& cpu = ferry::device_impl(ferry::Device::cpu());
  std::unique_ptr<ferry::Event> e = cpu.record_event();
  EXPECT_TRUE(e->query());
  e->wait();
  ferry::synchronize(ferry::Device::cpu());
  EXPECT_THROW(ferry::synchronize(ferry::Device::parse_syntax("cpu:4")), ferry::DeviceError);
}

namespace {
ferry::DeviceInfo info(const char* backend, int index, ferry::DeviceKind kind,
                       bool available = true) {
  ferry::DeviceInfo d;
  d.backend = backend;
  d.index = index;
  d.device = std::string(backend) + ":" + std::to_string(index);
  d.kind = kind;
  d.available = available;
  return d;
}
}  // namespace

TEST(Registry, DefaultDeviceRanking) {
  using K = ferry::DeviceKind;
  using ferry::detail::choose_default_device;
  auto cpu = info("cpu", 0, K::cpu);
  EXPECT_TRUE(choose_default_device({cpu}).is_cpu());
  // lavapipe is listed but never the default.
  EXPECT_TRUE(choose_default_device({cpu, info("vulkan", 0, K::cpu_gpu)}).is_cpu());
  EXPECT_EQ(
      choose_default_device({cpu, info("vulkan", 0, K::cpu_gpu), info("vulkan", 1, K::virtual_gpu)})
          .str(),
      "vulkan:1");
  EXPECT_EQ(choose_default_device(
                {cpu, info("vulkan", 0, K::integrated_gpu), info("vulkan", 1, K::discrete_gpu)})
                .str(),
            "vulkan:1");
  EXPECT_EQ(
      choose_default_device({cpu, info("vulkan", 0, K::discrete_gpu),
                             info("cuda", 0, K::discrete_gpu), info("cuda", 1, K::discrete_gpu)})
          .str(),
      "cuda:0");
  // Unavailable entries and third-party plugins are not chosen.
  EXPECT_TRUE(choose_default_device({cpu, info("cuda", 0, K::discrete_gpu, false)}).is_cpu());
  EXPECT_TRUE(choose_default_device({cpu, info("testdev", 0, K::discrete_gpu)}).is_cpu());
}

TEST(Registry, CpuUuidIsTheMachineId) {
  std::ifstream f("/etc/machine-id");
  std::string id;
  if (!(f >> id) || id.size() != 32) GTEST_SKIP() << "no /etc/machine-id on this machine";
  std::string want = id.substr(0, 8) + "-" + id.substr(8, 4) + "-" + id.substr(12, 4) + "-" +
                     id.substr(16, 4) + "-" + id.substr(20);
  EXPECT_EQ(ferry::devices()[0].uuid_str(), want);
}
