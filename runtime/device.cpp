// runtime/device.cpp — parsing and printing Device values.
#include "ferry/device.hpp"

#include <fmt/format.h>

#include <ostream>

#include "ferry/device_info.hpp"
#include "ferry/error.hpp"
#include "ferry/registry.hpp"

namespace ferry {

Device Device::unchecked(std::string type, int index) {
  Device d;
  d.type_ = std::move(type);
  d.index_ = index;
  return d;
}

Device Device::parse_syntax(std::string_view spec) {
  auto fail = [&](std::string_view why) -> Device {
    throw DeviceError(
        fmt::format("invalid device string '{}': {}; write a backend name and an optional index, "
                    "e.g. 'cpu', 'cuda', 'vulkan:1' ({})",
                    spec, why, describe_devices()));
  };
  std::size_t colon = spec.find(':');
  std::string_view name = spec.substr(0, colon);
  if (name.empty()) return fail("the backend name is empty");
  if (!(name[0] >= 'a' && name[0] <= 'z')) return fail("the backend name must start with a-z");
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return fail(fmt::format("'{}' is not allowed in a backend name (a-z, 0-9, _)", c));
  int index = 0;
  if (colon != std::string_view::npos) {
    std::string_view digits = spec.substr(colon + 1);
    if (digits.empty()) return fail("the index after ':' is missing");
    if (digits.size() > 6) return fail("the index is too large");
    for (char c : digits)
      if (c < '0' || c > '9')
        return fail(fmt::format("the index '{}' is not a decimal number", digits));
    if (digits.size() > 1 && digits[0] == '0') return fail("the index has a leading zero");
    index = std::stoi(std::string(digits));
  }
  return unchecked(std::string(name), index);
}

Device::Device(std::string_view spec) : Device(parse_syntax(spec)) {
  device_impl(*this);  // throws DeviceError listing what is available
}

std::string Device::str() const {
  if (type_ == "cpu" && index_ == 0) return "cpu";
  return fmt::format("{}:{}", type_, index_);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

const char* device_kind_name(DeviceKind k) {
  switch (k) {
    case DeviceKind::cpu:
      return "cpu";
    case DeviceKind::discrete_gpu:
      return "discrete GPU";
    case DeviceKind::integrated_gpu:
      return "integrated GPU";
    case DeviceKind::virtual_gpu:
      return "virtual GPU";
    case DeviceKind::cpu_gpu:
      return "CPU-type GPU";
    case DeviceKind::other:
      return "other";
  }
  return "other";
}

std::string DeviceInfo::uuid_str() const {
  std::string s;
  for (std::size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", uuid[i]);
  }
  return s;
}

}  // namespace ferry
