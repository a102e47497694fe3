// tests/plugin/env_check.cpp — run by CTest with FERRY_BACKEND_PATH set to the
// folder holding libferry_backend_testdev.so: checks that the registry
// discovers a third party's module from the environment alone and that ops
// run on it, and that modules are opened only when their backend is asked for
// (Note [Backend discovery] in ferry/registry.hpp). Prints every failed check;
// exits non-zero when any failed.
#include <link.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <ferry/ferry.hpp>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++failures;
  } else {
    std::printf("ok: %s\n", what.c_str());
  }
}

// The backend modules this process has loaded ("testdev", "vulkan", ...), from the
// dynamic linker's list of loaded objects.
std::string loaded_modules() {
  std::string names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        std::string path = info->dlpi_name ? info->dlpi_name : "";
        const std::string prefix = "libferry_backend_";
        if (auto at = path.rfind(prefix); at != std::string::npos) {
          std::string name = path.substr(at + prefix.size());
          name = name.substr(0, name.find('.'));
          *static_cast<std::string*>(out) +=
              (static_cast<std::string*>(out)->empty() ? "" : " ") + name;
        }
        return 0;
      },
      &names);
  return names.empty() ? "(none)" : names;
}

}  // namespace

int main() {
  const char* path = std::getenv("FERRY_BACKEND_PATH");
  std::printf("FERRY_BACKEND_PATH=%s\n", path ? path : "(unset)");
  try {
    // The CPU alone opens no module.
    ferry::Tensor x = ferry::tensor(std::vector<float>{1, 2}, {2});
    check(ferry::add(x, x).to_vector<float>() == std::vector<float>{2, 4},
          "add on the cpu gives 2 4");
    check(loaded_modules() == "(none)",
          "ops on the cpu open no backend module (loaded: " + loaded_modules() + ")");
    check(ferry::is_available("testdev"), "is_available(\"testdev\")");
    check(loaded_modules() == "testdev",
          "is_available(\"testdev\") opens testdev's module alone (loaded: " + loaded_modules() +
              ")");
    check(ferry::is_available("testdev:1"), "is_available(\"testdev:1\")");
    check(!ferry::is_available("testdev:2"), "!is_available(\"testdev:2\")");

    bool saw0 = false, saw1 = false;
    for (const ferry::DeviceInfo& d : ferry::devices()) {
      if (d.device == "testdev:0") saw0 = d.available && d.backend == "testdev";
      if (d.device == "testdev:1") saw1 = d.available && d.backend == "testdev";
      if (d.backend == "testdev" && !d.available)
        std::fprintf(stderr, "testdev listed as unavailable: %s\n", d.unavailable_reason.c_str());
    }
    check(saw0, "devices() lists testdev:0 as available");
    check(saw1, "devices() lists testdev:1 as available");

    ferry::Device dev("testdev:0");
    check(dev.str() == "testdev:0" && dev.type() == "testdev" && dev.index() == 0,
          "Device(\"testdev:0\") parses and round-trips");

    ferry::Tensor a = ferry::tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).to(dev);
    ferry::Tensor b = ferry::tensor(std::vector<float>{10, 20, 30}, {3}).to(dev);
    ferry::Tensor c = ferry::add(a, b);
    check(c.device() == dev, "add's result lives on testdev:0 (it is on " + c.device().str() + ")");
    std::vector<float> got = c.to(ferry::Device::cpu()).to_vector<float>();
    std::vector<float> want = {11, 22, 33, 14, 25, 36};
    bool same = got.size() == want.size();
    for (std::size_t i = 0; same && i < got.size(); ++i) same = got[i] == want[i];
    std::string got_s;
    for (float v : got) got_s += std::to_string(v) + " ";
    check(same, "add on testdev:0 gives 11 22 33 14 25 36 (got " + got_s + ")");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAILED: exception: %s\n", e.what());
    std::fprintf(stderr, "devices: %s\n", ferry::describe_devices().c_str());
    return 1;
  }
  if (failures) std::fprintf(stderr, "devices: %s\n", ferry::describe_devices().c_str());
  std::printf("%s\n",
              failures ? "plugin_env_check: FAILED" : "plugin_env_check: all checks passed");
  return failures ? 1 : 0;
}
