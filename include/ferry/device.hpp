// ferry/device.hpp — the Device value: a backend name and an index.
//
// Note [Device strings]
// A device is written "cpu", "vulkan:1", "cuda:0"; "cuda" means "cuda:0".
// Parsing is strict (lower-case backend name, optional ":N" with N decimal and
// nothing else), and a parsed device must name a backend the registry knows and
// a device it has available; otherwise DeviceError lists what is available.
// Device values are cheap to copy, compare and hash, and str() round-trips.
#pragma once

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

namespace ferry {

class Device {
 public:
  // The CPU.
  Device() : type_("cpu"), index_(0) {}
  // Parses and checks against the registry (see Note [Device strings]).
  Device(std::string_view spec);  // NOLINT(google-explicit-constructor): "vulkan:0" reads well
  Device(const char* spec) : Device(std::string_view(spec)) {}
  Device(const std::string& spec) : Device(std::string_view(spec)) {}

  static Device cpu() { return Device(); }
  // Builds a device without consulting the registry; for backends and the
  // registry itself, which define what exists.
  static Device unchecked(std::string type, int index);
  // Parses syntax only, without the registry; throws DeviceError on bad syntax.
  static Device parse_syntax(std::string_view spec);

  const std::string& type() const { return type_; }
  int index() const { return index_; }
  bool is_cpu() const { return type_ == "cpu"; }
  std::string str() const;  // "cpu", "vulkan:0"

  friend bool operator==(const Device& a, const Device& b) {
    return a.index_ == b.index_ && a.type_ == b.type_;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
  friend bool operator<(const Device& a, const Device& b) {
    return a.type_ != b.type_ ? a.type_ < b.type_ : a.index_ < b.index_;
  }

 private:
  std::string type_;
  int index_;
};

std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace ferry

template <> struct std::hash<ferry::Device> {
  std::size_t operator()(const ferry::Device& d) const noexcept {
    return std::hash<std::string>()(d.type()) * 31u + std::size_t(d.index());
  }
};
