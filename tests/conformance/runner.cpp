// tests/conformance/runner.cpp — runs a case on a device and on the CPU.
#include <fmt/format.h>

#include <chrono>

#include "conformance.hpp"
#include "ferry/debug.hpp"

namespace ferry::conformance {
namespace {

struct GuardScope {
  GuardScope() { debug::set_output_guards(true); }
  ~GuardScope() { debug::set_output_guards(false); }
};

Inputs to_device(const Inputs& in, const Device& d) {
  Inputs out;
  for (const Tensor& t : in) out.push_back(t.defined() ? t.to(d) : t);
  return out;
}

double bytes_of(const Inputs& in, const Tensor& out) {
  double b = double(out.numel()) * double(out.element_size());
  for (const Tensor& t : in)
    if (t.defined()) b += double(t.numel()) * double(t.element_size());
  return b;
}

// µs per call: one warm-up, then repeats until 20 ms or 200 calls.
double time_us(const Case& c, const Inputs& in, const Device& d) {
  (void)c.run(in);
  synchronize(d);
  auto start = std::chrono::steady_clock::now();
  int n = 0;
  double elapsed = 0;
  do {
    (void)c.run(in);
    ++n;
    synchronize(d);
    elapsed =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < 20000 && n < 200);
  return elapsed / n;
}

}  // namespace

Result run_case(const Case& c, const Device& device, bool perf) {
  Result r;
  r.device = device.str();
  r.op = c.op;
  r.dtype = std::string(dtype_name(c.dtype));
  r.shape = c.shape;
  r.shape_class = c.shape_class;
  Inputs cpu_in = c.make_inputs();
  Inputs cpu_view = c.view ? c.view(cpu_in) : cpu_in;
  Tensor want;
  try {
    want = c.run(cpu_view);
  } catch (const Error& e) {
    r.status = Status::failed;
    r.detail = fmt::format("the CPU reference itself failed (a bug in the suite): {}", e.what());
    return r;
  }
  classify(r, [&]() -> std::string {
    Inputs dev_view;
    Tensor got;
    {
      Inputs dev_in = to_device(cpu_in, device);
      dev_view = c.view ? c.view(dev_in) : dev_in;
      GuardScope guards;
      got = c.run(dev_view);
    }
    if (got.device() != device)
      return fmt::format("the result is on {}, not on {}", got.device().str(), device.str());
    std::string mismatch = compare(got.to(Device::cpu()), want, c.max_nmse, &r.nmse);
    if (perf && mismatch.empty()) {
      r.bytes = bytes_of(cpu_view, want);
      r.flops = c.flops;
      r.device_us = time_us(c, dev_view, device);
      r.cpu_us = device.is_cpu() ? r.device_us : time_us(c, cpu_view, Device::cpu());
    }
    return mismatch;
  });
  return r;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  add_elementwise_cases(cases);
  add_reduction_cases(cases);
  add_other_cases(cases);
  return cases;
}

std::vector<Case> grad_cases() {
  std::vector<Case> cases;
  add_grad_cases(cases);
  return cases;
}

}  // namespace ferry::conformance
