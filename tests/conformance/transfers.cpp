// tests/conformance/transfers.cpp — moving data: every dtype host->device->host
// and device->device for every pair, views and offsets, bit for bit; and the
// same seed giving the same randn on every device. f64 is among them (a CPU
// dtype that GPU backends store but do not compute): its copies move bytes
// only, and a check that needs a kernel on the device (a view taken there
// leaving as a compact tensor) is reported skipped where the device lacks it.
#include <fmt/format.h>

#include <cstring>

#include "conformance.hpp"
#include "ferry/backend.hpp"

namespace ferry::conformance {
namespace {

// Bit-exact equality of two CPU tensors of one dtype (NaN payloads included).
std::string same_bits(const Tensor& got, const Tensor& want) {
  if (got.sizes() != want.sizes())
    return fmt::format("shape {} instead of {}", shape_str(got.sizes()), shape_str(want.sizes()));
  if (got.dtype() != want.dtype())
    return fmt::format("dtype {} instead of {}", dtype_name(got.dtype()), dtype_name(want.dtype()));
  Tensor g = got.contiguous(), w = want.contiguous();
  std::size_t n = std::size_t(g.numel()) * g.element_size();
  const auto* gp = static_cast<const std::uint8_t*>(g.storage()->buffer().host_ptr()) +
                   g.storage_offset() * std::int64_t(g.element_size());
  const auto* wp = static_cast<const std::uint8_t*>(w.storage()->buffer().host_ptr()) +
                   w.storage_offset() * std::int64_t(w.element_size());
  for (std::size_t i = 0; i < n; ++i)
    if (gp[i] != wp[i])
      return fmt::format("byte {} differs ({:#04x} instead of {:#04x})", i, gp[i], wp[i]);
  return {};
}

Result transfer_result(const std::string& device, const std::string& what, DType dt,
                       const std::string& shape) {
  Result r;
  r.device = device;
  r.op = "transfer";
  r.dtype = std::string(dtype_name(dt));
  r.shape = what + " " + shape;
  r.shape_class = "transfer";
  return r;
}

}  // namespace

std::vector<Result> run_round_trip_checks(const Device& d) {
  std::vector<Result> results;
  if (d.is_cpu()) return results;  // the host itself: to(cpu) is the identity
  const Shape shapes[] = {{}, {0}, {1}, {1023}, {7, 13}};
  {
    for (DType dt : kAllDTypes) {
      for (const Shape& s : shapes) {
        Result r = transfer_result(d.str(), fmt::format("cpu->{}->cpu", d.str()), dt, shape_str(s));
        classify(r, [&] {
          Tensor x = make_input(s, dt, 11);
          return same_bits(x.to(d).to(Device::cpu()), x);
        });
        results.push_back(r);
      }
      // A view with an offset and steps leaves as a compact tensor and comes back equal.
      Result r = transfer_result(d.str(), fmt::format("view cpu->{}->cpu", d.str()), dt,
                                 "[9, 14][2:9:3, 1:14:2]");
      classify(r, [&] {
        Tensor base = make_input({9, 14}, dt, 12);
        Tensor v = base.slice(0, 2, 9, 3).slice(1, 1, 14, 2);
        Tensor back = v.to(d).to(Device::cpu());
        if (!back.is_contiguous()) return std::string("the copy is not contiguous");
        return same_bits(back, v);
      });
      results.push_back(r);
      // From and to pinned host memory (Note [Pinned host memory]), where the device pins:
      // a DMA each way where its memory is not the host's, views at an offset included.
      if (device_impl(d).capabilities().host_registration) {
        Result rp = transfer_result(d.str(), fmt::format("pinned cpu->{}->pinned cpu", d.str()), dt,
                                    "[7, 13] and [1023][100:900]");
        classify(rp, [&] {
          Tensor x = make_input({7, 13}, dt, 14).pin_memory(d);
          Tensor back = make_input({7, 13}, dt, 15).pin_memory(d);
          back.copy_(x.to(d));
          if (std::string e = same_bits(back, x); !e.empty()) return e;
          Tensor long_x = make_input({1023}, dt, 16).pin_memory(d);
          return same_bits(long_x.narrow(0, 100, 800).to(d).to(Device::cpu()),
                           long_x.narrow(0, 100, 800));
        });
        results.push_back(rp);
      }
      // A view taken on the device (offset into a device storage) leaves correctly too.
      Result rv =
          transfer_result(d.str(), fmt::format("device view {}->cpu", d.str()), dt, "[64][5:64:4]");
      classify(rv, [&] {
        Tensor base = make_input({64}, dt, 13);
        return same_bits(base.to(d).slice(0, 5, 64, 4).to(Device::cpu()), base.slice(0, 5, 64, 4));
      });
      results.push_back(rv);
    }
    Result rr = transfer_result(d.str(), "randn seed 42", DType::f32, "[4099]");
    classify(rr, [&] {
      manual_seed(42);
      Tensor want = randn({4099});
      manual_seed(42);
      Tensor got = randn({4099}, {.device = d}).to(Device::cpu());
      double nmse = 0;
      return compare(got, want, 1e-12, &nmse);
    });
    results.push_back(rr);
  }
  return results;
}

std::vector<Result> run_pair_checks(const std::vector<Device>& tested,
                                    const std::vector<Device>& available) {
  std::vector<Result> results;
  std::vector<std::pair<Device, Device>> pairs;
  for (const Device& a : tested)
    for (const Device& b : available) {
      if (a == b) continue;
      for (auto p : {std::pair{a, b}, std::pair{b, a}})
        if (std::find(pairs.begin(), pairs.end(), p) == pairs.end()) pairs.push_back(p);
    }
  for (const auto& [a, b] : pairs)
    for (DType dt : kAllDTypes) {
      Result r = transfer_result(a.str(), fmt::format("{}->{}", a.str(), b.str()), dt, "[127, 3]");
      classify(r, [&] {
        Tensor x = make_input({127, 3}, dt, 14);
        Tensor moved = x.to(a).to(b);
        if (moved.device() != b) return fmt::format("landed on {}", moved.device().str());
        return same_bits(moved.to(Device::cpu()), x);
      });
      results.push_back(r);
    }
  return results;
}

}  // namespace ferry::conformance
