// tests/conformance/runner.cpp — runs a case on a device and on the CPU.
#include <fmt/format.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <thread>

#include "catalog.hpp"
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

// Each of `threads` threads runs the case kThreadRuns times at once on its
// own inputs; "" when every result equals `serial` (on the CPU) exactly.
//
// Note [Thread checks of large cases]
// A case whose inputs and result pass kLargeCaseBytes (the > 2^24-element
// and > 128 MiB cases, there for index arithmetic and split dispatches) runs
// from 2 threads once each instead. Two calls at once still meet in the
// shared host state the contract is about, and in the split path; N threads
// of 3 runs each of a 384 MiB add made those few cases most of the threads
// entries' time (64 of 112 s on lavapipe, 32 of 34 on the CPU) and took the
// process past 11 GB, every thread holding its inputs and results on both
// sides.
constexpr int kThreadRuns = 3;
constexpr double kLargeCaseBytes = 64.0 * 1024 * 1024;
std::string check_threads(const Case& c, const Device& device, const Tensor& serial, int threads) {
  // Inputs are made here, one thread at a time: a case may seed the process's
  // generator to make them.
  std::vector<Inputs> inputs;
  inputs.push_back(c.make_inputs());
  const bool large = bytes_of(inputs[0], serial) > kLargeCaseBytes;
  if (large) threads = std::min(threads, 2);
  const int runs = large ? 1 : kThreadRuns;
  for (int t = 1; t < threads; ++t) inputs.push_back(c.make_inputs());
  std::vector<std::string> errors(static_cast<std::size_t>(threads));
  std::barrier start(threads);
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        std::string& error = errors[std::size_t(t)];
        try {
          Inputs in = to_device(inputs[std::size_t(t)], device);
          Inputs view = c.view ? c.view(in) : in;
          start.arrive_and_wait();
          for (int run = 0; run < runs && error.empty(); ++run) {
            double nmse = 0;
            std::string m = compare(c.run(view).to(Device::cpu()), serial, 0.0, &nmse);
            if (!m.empty())
              error = fmt::format("thread {} of {}, run {}: not the serial run's result: {}", t + 1,
                                  threads, run + 1, m);
          }
        } catch (const std::exception& e) {
          error = fmt::format("thread {} of {}: {}", t + 1, threads, e.what());
          start.arrive_and_drop();  // harmless when it already arrived: then nobody waits
        }
      });
  }
  for (const std::string& e : errors)
    if (!e.empty()) return e;
  return {};
}

}  // namespace

Result run_case(const Case& c, const Device& device, bool perf, int threads) {
  const auto started = std::chrono::steady_clock::now();
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
    want = c.reference ? c.reference(cpu_view) : c.run(cpu_view);
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
    Tensor got_cpu = got.to(Device::cpu());
    std::string mismatch = compare(got_cpu, want, c.max_nmse, &r.nmse);
    if (mismatch.empty() && c.max_ulp >= 0) mismatch = compare_ulp(got_cpu, want, c.max_ulp);
    if (mismatch.empty() && threads > 1 && !c.global_rng) {
      GuardScope guards;
      mismatch = check_threads(c, device, got_cpu, threads);
    }
    if (perf && mismatch.empty()) {
      r.bytes = bytes_of(cpu_view, want);
      r.flops = c.flops;
      r.device_us = time_us(c, dev_view, device);
      r.cpu_us = device.is_cpu() ? r.device_us : time_us(c, cpu_view, Device::cpu());
    }
    return mismatch;
  });
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return r;
}

std::vector<OpId> Case::kernel_ops() const {
  if (!kernels.empty()) return kernels;
  if (auto id = op_from_name(op)) return {*id};
  const std::string grad = ".grad";
  if (op.size() > grad.size() && op.ends_with(grad)) {
    const std::string base = op.substr(0, op.size() - grad.size());
    if (auto id = op_from_name(base + "_backward")) return {*id};
    if (auto id = op_from_name(base)) return {*id};
  }
  return {};
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  add_elementwise_cases(cases);
  add_reduction_cases(cases);
  add_other_cases(cases);
  add_shape_cases(cases);
  add_sort_cases(cases);
  add_conv_cases(cases);
  add_attention_cases(cases);
  add_loss_cases(cases);
  add_math_cases(cases);
  add_stats_cases(cases);
  return cases;
}

std::vector<Case> grad_cases() {
  std::vector<Case> cases;
  add_grad_cases(cases);
  return cases;
}

}  // namespace ferry::conformance
