// tests/conformance/conformance.hpp — the backend conformance suite: every op
// on every device, held to the CPU reference (ggml's test-backend-ops is the
// model). Written against the public API only, so a third party's backend is
// checked exactly like ours.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ferry/backend.hpp"  // DeviceImpl::supports, for a third party's backend too
#include "ferry/ferry.hpp"

namespace ferry::conformance {

using Inputs = std::vector<Tensor>;

// One op applied to one set of inputs. Inputs are made on the CPU
// (deterministically), copied to the device under test, then `view` (if any)
// turns them into the non-contiguous views the case is about, on each side.
struct Case {
  std::string op;           // the op as the API names it: "add", "matmul", "cast"
  DType dtype;              // the dtype under test (of the inputs)
  std::string shape;        // the inputs' shapes, e.g. "[7, 1] x [1, 13]"
  std::string shape_class;  // scalar, empty, size-1, odd, broadcast, non-contiguous, large, ...
  double max_nmse;          // per-op threshold on Σ(a−b)²/Σb²
  std::function<Inputs()> make_inputs;
  std::function<Inputs(const Inputs&)> view;  // optional
  std::function<Tensor(const Inputs&)> run;
  double flops = 0;  // per call, for --perf (0: report bandwidth only)
  // `run` reseeds the process's one generator (random ops): threads running it
  // at once would interleave their draws, so --threads checks it serially only.
  bool global_rng = false;
  // When >= 0, also every element within this many ulps of the CPU's (f32
  // results): the special-value grids of the transcendental ops, where a
  // relative error that NMSE averages away is what matters.
  double max_ulp = -1;
  // The op-table ops this case exercises (Note [The op table] in ferry/op.hpp),
  // when not the op named `op` (or, for "<op>.grad", <op>_backward or <op>):
  // cast -> copy, rand -> random_uniform, ... kernel_ops() resolves it.
  std::vector<OpId> kernels = {};
  std::vector<OpId> kernel_ops() const;
  // When set, the CPU reference runs this instead of `run`: a composite op's
  // cases run its composition there, under debug::CompositesOnly, so that a
  // device's fused kernel (the CPU's too) is held to the composition (Note
  // [Composite ops] in ferry/op.hpp).
  std::function<Tensor(const Inputs&)> reference = {};

  std::string id() const { return op + " " + std::string(dtype_name(dtype)) + " " + shape; }
};

enum class Status { passed, failed, skipped };
const char* status_name(Status s);

struct Result {
  std::string device;
  std::string op, dtype, shape, shape_class;
  Status status = Status::passed;
  std::string detail;  // why it failed or was skipped
  double nmse = 0;
  double device_us = -1;  // --perf: µs per call on the device
  double cpu_us = -1;     //         and on the CPU reference
  double bytes = 0, flops = 0;
  double seconds = 0;  // wall time of the whole case (inputs, reference, device run, compare)
};

// Every case of every op (the catalog: cases_*.cpp).
std::vector<Case> all_cases();
void add_elementwise_cases(std::vector<Case>& out);
void add_reduction_cases(std::vector<Case>& out);
void add_other_cases(std::vector<Case>& out);
// The gradient mode: each differentiable op's backward ("<op>.grad" cases,
// cases_grad.cpp), whose result is every input's gradient.
std::vector<Case> grad_cases();
void add_grad_cases(std::vector<Case>& out);

// Runs one case on `device` (output guards on) and compares with the CPU.
// With threads > 1 (--threads N), a case that passed is then run by N
// threads at once, each on its own copy of the inputs on `device`, several
// times each, and every result must equal the serial run's bit for bit
// (Note [Device thread-safety] in ferry/backend.hpp).
Result run_case(const Case& c, const Device& device, bool perf, int threads = 1);
// Round trips host->device->host for every dtype, views and offsets, and the
// same randn on `device` as on the CPU.
std::vector<Result> run_round_trip_checks(const Device& device);
// device->device copies, bit for bit, between each tested device and every
// other available one (the CPU included), both ways, every dtype.
std::vector<Result> run_pair_checks(const std::vector<Device>& tested,
                                    const std::vector<Device>& available);

// Compares a device result (already on the CPU) with the reference: shapes and
// dtypes exactly, NaN with NaN, ±inf by sign, integers and bools exactly,
// floats by NMSE. Returns an empty string when they agree, else what differs.
std::string compare(const Tensor& got, const Tensor& want, double max_nmse, double* nmse);
// Every element of two f32 tensors within `max_ulp` units in the last place
// (NaN with NaN, ±inf and ±0 exactly; denormals count as the values they are).
// Returns an empty string when they agree, else the worst element.
std::string compare_ulp(const Tensor& got, const Tensor& want, double max_ulp);

// Runs `body`, which returns what went wrong ("" when all is well), and
// records the outcome: an UnsupportedError means skipped (with its message as
// the reason), any other ferry::Error means failed.
template <typename Body> void classify(Result& r, Body body) {
  try {
    r.detail = body();
    r.status = r.detail.empty() ? Status::passed : Status::failed;
  } catch (const UnsupportedError& e) {
    r.status = Status::skipped;
    r.detail = e.what();
  } catch (const Error& e) {
    r.status = Status::failed;
    r.detail = e.what();
  }
}

// Deterministic inputs on the CPU.
Tensor make_input(const Shape& shape, DType dtype, std::uint64_t seed, double lo = -3,
                  double hi = 3);

}  // namespace ferry::conformance
