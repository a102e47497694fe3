// ferry-devices — every backend and device ferry knows of on this machine,
// available or not: what each device is and can do, and for anything
// unavailable, why (a missing driver, loader or GPU).
#include <cstdio>

#include "sample_common.hpp"

namespace {

const char* yes(bool b) { return b ? "yes" : "no"; }

void describe(const ferry::DeviceInfo& d, bool verbose) {
  if (!d.available) {
    std::printf("%s\n  unavailable: %s\n\n", d.device.c_str(), d.unavailable_reason.c_str());
    return;
  }
  std::printf("%s\n", d.device.c_str());
  std::printf("  name           %s\n", d.name.c_str());
  std::printf("  vendor         %s\n", d.vendor.c_str());
  std::printf("  kind           %s\n", ferry::device_kind_name(d.kind));
  if (!d.driver.empty()) std::printf("  driver         %s\n", d.driver.c_str());
  std::printf("  memory         %s total, %s free, largest allocation %s\n",
              sample::mib(d.memory_total).c_str(), sample::mib(d.memory_free).c_str(),
              sample::mib(d.max_allocation).c_str());
  std::printf("  uuid           %s\n", d.uuid_str().c_str());
  std::printf("  computes in    f16 %s, bf16 %s, int64 %s\n", yes(d.caps.f16), yes(d.caps.bf16),
              yes(d.caps.int64));
  std::printf("  host-visible memory %s, peer copies %s, pins host memory %s\n",
              yes(d.caps.host_visible_memory), yes(d.caps.peer_copy),
              yes(d.caps.host_registration));
  if (verbose)
    for (const auto& [k, v] : d.properties) std::printf("  %-26s %s\n", k.c_str(), v.c_str());
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  sample::Args args(argc, argv,
                    "usage: ferry-devices [--verbose]\n\n"
                    "Lists every backend and device, available or not, with what each device is\n"
                    "and can do, and the reason for anything unavailable. FERRY_BACKEND_PATH adds\n"
                    "third-party backend modules; FERRY_DEVICE sets the default device.",
                    {{"verbose!", "also print each backend's own properties"}});
  try {
    std::printf("ferry %s\n\n", ferry::version());
    for (const ferry::DeviceInfo& d : ferry::devices()) describe(d, args.has("verbose"));
    std::printf("default device: %s\n", ferry::default_device().str().c_str());
    return 0;
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-devices: %s\n", e.what());
    return 1;
  }
}
