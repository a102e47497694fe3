// tests/plugin/testdev_backend.cpp — "testdev", a test-only third-party backend
// module (libferry_backend_testdev.so), built the way an outside author would
// build one: against the public headers and ferry::ferry only.
//
// It has two devices, testdev:0 and testdev:1 (DeviceKind::other). Their
// memory is ordinary malloc'd host memory, but Buffer::host_ptr() returns
// nullptr, so the core must treat it as device memory: every transfer goes
// through copy_from_host / copy_to_host / copy_within, and testdev:0 ->
// testdev:1 goes through the host (no peer copy). Execution is synchronous.
//
// Kernels: "copy" (same dtype, any strides, f32 and i64), "fill" (f32, i64),
// "add" and "mul" (f32; inputs arrive broadcast to the output's shape, stride
// 0 where expanded). Anything else is missing on purpose: the dispatcher must
// raise UnsupportedError, and a kernel given a dtype it lacks raises
// UnsupportedError naming the op and the dtype.
//
// Note [testdev fault switches]
// The conformance suite's self-test needs a backend that is wrong in known
// ways, to prove the suite catches them. Two environment variables, read when
// a kernel runs:
//   FERRY_TESTDEV_BROKEN=1  "add" adds 1 extra to output element 0 (a wrong
//                           result the suite must report as a mismatch).
//   FERRY_TESTDEV_OOB=1     "mul" writes one element past the end of its
//                           output view (an out-of-bounds write the suite must
//                           detect, e.g. with guard elements around an output
//                           view). Every buffer is allocated with kPadding
//                           extra bytes, so a write past a whole buffer lands
//                           in that padding and never corrupts the heap.
//   FERRY_TESTDEV_RACY=1    "add" passes output element 0 through one
//                           workspace for the whole process, zeroed as the
//                           call starts, summed into and read back as it
//                           ends, with no lock, as a kernel keeping partial
//                           sums in a global would: calls from two threads
//                           at once read each other's sums (what --threads
//                           must report; a serial run is right).
//
// Every allocate and copy is a failure point (Note [Failure injection] in
// ferry/backend.hpp), so tests can fail each step of a migration in turn.
//
// Threads (Note [Device thread-safety] in ferry/backend.hpp): kernels and
// copies finish before they return and touch only their own arguments, so the
// only shared state, the memory counters, is atomic (but for the
// FERRY_TESTDEV_RACY fault).
//   FERRY_TESTDEV_MEMORY_FREE=B   info() reports B bytes free.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <ferry/backend.hpp>
#include <ferry/device.hpp>
#include <ferry/device_info.hpp>
#include <ferry/error.hpp>
#include <ferry/kit/math/elementwise_ops.hpp>  // the backend kit, as a third party includes it

namespace {

using ferry::DType;
using ferry::OpCall;
using ferry::TensorArg;

constexpr std::size_t kPadding = 64;  // bytes after every buffer (Note [testdev fault switches])
constexpr std::uint64_t kMemoryTotal = std::uint64_t(4) << 30;  // nominal; nothing enforces it

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && std::string_view(v) == "1";
}

// Bytes in live buffers, and their peak, for memory_stats().
struct MemoryCounters {
  std::atomic<std::uint64_t> allocated{0};
  std::atomic<std::uint64_t> peak{0};
  std::atomic<std::uint64_t> allocations{0};
};

class TestdevBuffer final : public ferry::Buffer {
 public:
  TestdevBuffer(std::size_t size, MemoryCounters& counters)
      : Buffer(size), p_(static_cast<char*>(std::calloc(size + kPadding, 1))), counters_(counters) {
    if (!p_) return;
    const std::uint64_t now = counters_.allocated.fetch_add(size) + size;
    std::uint64_t peak = counters_.peak.load();
    while (now > peak && !counters_.peak.compare_exchange_weak(peak, now)) {
    }
    ++counters_.allocations;
  }
  ~TestdevBuffer() override {
    if (p_) counters_.allocated.fetch_sub(size());
    std::free(p_);
  }
  // host_ptr() stays the default nullptr: the core must not touch this memory.
  char* bytes() const { return p_; }
  bool ok() const { return p_ != nullptr; }

 private:
  char* p_;
  MemoryCounters& counters_;
};

char* bytes_of(const ferry::Buffer& b) { return static_cast<const TestdevBuffer&>(b).bytes(); }

template <typename T> T* base_of(const TensorArg& a) {
  return reinterpret_cast<T*>(bytes_of(*a.buffer)) + a.offset;
}

// Calls f(out_index, in_index...) in elements for every element of args[0]'s
// shape, walking the N-d index with each operand's own strides (0 allowed).
template <std::size_t N, typename F> void for_each_index(const TensorArg* const (&args)[N], F f) {
  const std::vector<std::int64_t>& sizes = args[0]->sizes;
  std::int64_t total = 1;
  for (auto s : sizes) total *= s;
  if (total == 0) return;
  const std::size_t nd = sizes.size();
  std::vector<std::int64_t> idx(nd, 0);
  std::int64_t off[N] = {};
  for (std::int64_t i = 0; i < total; ++i) {
    if constexpr (N == 1)
      f(off[0]);
    else if constexpr (N == 2)
      f(off[0], off[1]);
    else
      f(off[0], off[1], off[2]);
    for (std::size_t d = nd; d-- > 0;) {  // odometer increment, innermost dim first
      ++idx[d];
      for (std::size_t k = 0; k < N; ++k) off[k] += args[k]->strides[d];
      if (idx[d] < sizes[d]) break;
      for (std::size_t k = 0; k < N; ++k) off[k] -= args[k]->strides[d] * sizes[d];
      idx[d] = 0;
    }
  }
}

// The element offset one past the last element of a view (for the OOB fault).
std::int64_t one_past_end(const TensorArg& a) {
  std::int64_t last = 0;
  for (int d = 0; d < a.ndim(); ++d)
    last += (a.sizes[std::size_t(d)] - 1) * a.strides[std::size_t(d)];
  return last + 1;
}

[[noreturn]] void unsupported(std::string_view op, DType dt, const char* what) {
  throw ferry::UnsupportedError("testdev: kernel '" + std::string(op) +
                                "' does not support dtype " + std::string(ferry::dtype_name(dt)) +
                                " (" + what + ")");
}

// ferry's conversion rule (docs/kernel-contract.md): float -> integer
// truncates toward zero, NaN gives 0, out-of-range values saturate.
template <typename To, typename From> To convert(From v) {
  if constexpr (std::is_same_v<To, std::int64_t> && std::is_same_v<From, float>) {
    if (v != v) return 0;
    if (v <= -9.2233720368547758e18f) return std::numeric_limits<std::int64_t>::min();
    if (v >= 9.2233720368547758e18f) return std::numeric_limits<std::int64_t>::max();
  }
  return static_cast<To>(v);
}

template <typename To, typename From> void copy_typed(const TensorArg& out, const TensorArg& in) {
  To* o = base_of<To>(out);
  const From* s = base_of<From>(in);
  const TensorArg* args[2] = {&out, &in};
  for_each_index(args, [&](std::int64_t oi, std::int64_t ii) { o[oi] = convert<To, From>(s[ii]); });
}

template <typename To> void copy_to(const TensorArg& out, const TensorArg& in) {
  switch (in.dtype) {
    case DType::f32:
      copy_typed<To, float>(out, in);
      break;
    case DType::i64:
      copy_typed<To, std::int64_t>(out, in);
      break;
    default:
      unsupported("copy", in.dtype, "testdev copies f32 and i64");
  }
}

void copy_kernel(ferry::DeviceImpl&, const OpCall& c) {
  const TensorArg& out = c.outputs.at(0);
  const TensorArg& in = c.inputs.at(0);
  switch (out.dtype) {
    case DType::f32:
      copy_to<float>(out, in);
      break;
    case DType::i64:
      copy_to<std::int64_t>(out, in);
      break;
    default:
      unsupported("copy", out.dtype, "testdev copies f32 and i64");
  }
}

template <typename T> void fill_typed(const TensorArg& out, T v) {
  T* o = base_of<T>(out);
  const TensorArg* args[1] = {&out};
  for_each_index(args, [&](std::int64_t oi) { o[oi] = v; });
}

void fill_kernel(ferry::DeviceImpl&, const OpCall& c) {
  const TensorArg& out = c.outputs.at(0);
  switch (out.dtype) {
    case DType::f32:
      fill_typed<float>(out, float(c.attrs.f("value")));
      break;
    case DType::i64:
      fill_typed<std::int64_t>(out, c.attrs.i("ivalue"));
      break;
    default:
      unsupported("fill", out.dtype, "testdev fills f32 and i64");
  }
}

template <typename F> void binary_f32(const OpCall& c, std::string_view op, F f) {
  const TensorArg& out = c.outputs.at(0);
  const TensorArg& a = c.inputs.at(0);
  const TensorArg& b = c.inputs.at(1);
  for (const TensorArg* t : {&out, &a, &b})
    if (t->dtype != DType::f32)
      unsupported(op, t->dtype, "testdev computes add and mul in f32 only");
  float* o = base_of<float>(out);
  const float* pa = base_of<float>(a);
  const float* pb = base_of<float>(b);
  const TensorArg* args[3] = {&out, &a, &b};
  for_each_index(
      args, [&](std::int64_t oi, std::int64_t ai, std::int64_t bi) { o[oi] = f(pa[ai], pb[bi]); });
}

void add_kernel(ferry::DeviceImpl&, const OpCall& c) {
  // FERRY_TESTDEV_RACY: zeroed as the call starts, summed into and read back as it ends; atomic,
  // so that the race is in the logic, not undefined behaviour.
  //
  // The race must show whenever two threads call at once, however the machine schedules
  // them: sleeps alone missed it once in a loaded test run, where one thread's 128 MiB add
  // started after the other's had ended. So each thread's first call, on any thread but the
  // first to call (the serial run's), waits until another call is inside (up to 5 s) before
  // it adds. Each call zeroes before it counts itself in, so two calls that meet there have
  // both zeroed before either sums: the later reader reads both sums, never its own alone.
  // Later calls overlap by the 10 ms sleeps only, as a real kernel's races do.
  static std::atomic<float> workspace{0.0f};
  static std::atomic<int> inside{0};
  static const std::thread::id first_caller = std::this_thread::get_id();
  thread_local bool met = false;
  const bool racy = env_flag("FERRY_TESTDEV_RACY");
  struct Leave {
    bool racy;
    ~Leave() {
      if (racy) inside.fetch_sub(1);
    }
  } leave{racy};
  if (racy) {
    workspace.store(0.0f);
    inside.fetch_add(1);
    if (std::this_thread::get_id() != first_caller && !std::exchange(met, true)) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (inside.load() < 2 && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  binary_f32(c, "add", ferry::math::ops::Add{});  // the kit's functor: the CPU's own math
  const TensorArg& out = c.outputs[0];
  if (env_flag("FERRY_TESTDEV_BROKEN") && out.numel() > 0) base_of<float>(out)[0] += 1.0f;
  if (racy && out.numel() > 0) {
    workspace.fetch_add(base_of<float>(out)[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    base_of<float>(out)[0] = workspace.load();
  }
}

void mul_kernel(ferry::DeviceImpl&, const OpCall& c) {
  binary_f32(c, "mul", ferry::math::ops::Mul{});
  const TensorArg& out = c.outputs[0];
  if (env_flag("FERRY_TESTDEV_OOB") && out.numel() > 0) {
    float* o = base_of<float>(out);
    o[one_past_end(out)] = o[one_past_end(out) - 1];  // an off-by-one loop bound
  }
}

class TestdevDevice final : public ferry::DeviceImpl {
 public:
  explicit TestdevDevice(int index) : DeviceImpl(ferry::Device::unchecked("testdev", index)) {
    register_kernel("copy", copy_kernel);
    register_kernel("fill", fill_kernel);
    register_kernel("add", add_kernel);
    register_kernel("mul", mul_kernel);
  }

  ferry::DeviceInfo info() override {
    ferry::DeviceInfo d;
    d.device = device().str();
    d.backend = "testdev";
    d.index = device().index();
    d.available = true;
    d.name = "ferry test device " + std::to_string(device().index());
    d.vendor = "ferry tests";
    d.driver = "testdev plugin (host memory behind an opaque buffer)";
    d.kind = ferry::DeviceKind::other;
    d.memory_total = kMemoryTotal;
    const std::uint64_t allocated = counters_.allocated.load();
    d.memory_free = allocated < kMemoryTotal ? kMemoryTotal - allocated : 0;
    if (const char* f = std::getenv("FERRY_TESTDEV_MEMORY_FREE"); f && *f)
      d.memory_free = std::strtoull(f, nullptr, 10);
    d.max_allocation = kMemoryTotal;
    d.caps = capabilities();
    return d;
  }

  ferry::DeviceCapabilities capabilities() const override {
    return {.f16 = false, .bf16 = false, .int64 = true, .host_visible_memory = false};
  }

  // What the kernels above take: copy and fill f32 and i64, add and mul f32.
  bool supports(ferry::OpId op, DType dt) const override {
    if (!DeviceImpl::supports(op, dt)) return false;
    if (op == ferry::OpId::add || op == ferry::OpId::mul) return dt == DType::f32;
    return dt == DType::f32 || dt == DType::i64;
  }

  std::unique_ptr<ferry::Buffer> allocate(std::size_t bytes) override {
    ferry::failure_point(*this, "allocate");
    auto b = std::make_unique<TestdevBuffer>(bytes, counters_);
    if (!b->ok())
      throw ferry::OutOfMemoryError(
          "testdev: out of memory allocating " + std::to_string(bytes) + " bytes", bytes, 0,
          device().str());
    return b;
  }

  ferry::MemoryStats memory_stats() override {
    ferry::MemoryStats s;
    s.allocated = counters_.allocated.load();
    s.reserved = s.allocated;  // nothing is cached
    s.peak_allocated = std::max(counters_.peak.load(), s.allocated);
    s.allocations = counters_.allocations.load();
    return s;
  }
  void reset_peak_memory_stats() override { counters_.peak = counters_.allocated.load(); }

  void copy_from_host(ferry::Buffer& dst, std::size_t off, const void* src,
                      std::size_t bytes) override {
    ferry::failure_point(*this, "copy_from_host");
    check_range("copy_from_host", dst, off, bytes);
    std::memcpy(bytes_of(dst) + off, src, bytes);
  }
  void copy_to_host(void* dst, const ferry::Buffer& src, std::size_t off,
                    std::size_t bytes) override {
    ferry::failure_point(*this, "copy_to_host");
    check_range("copy_to_host", src, off, bytes);
    std::memcpy(dst, bytes_of(src) + off, bytes);
  }
  void copy_within(ferry::Buffer& dst, std::size_t doff, const ferry::Buffer& src, std::size_t soff,
                   std::size_t bytes) override {
    ferry::failure_point(*this, "copy_within");
    check_range("copy_within (dst)", dst, doff, bytes);
    check_range("copy_within (src)", src, soff, bytes);
    std::memmove(bytes_of(dst) + doff, bytes_of(src) + soff, bytes);
  }
  void synchronize() override {}  // kernels and copies complete before they return

 private:
  void check_range(const char* what, const ferry::Buffer& b, std::size_t off,
                   std::size_t bytes) const {
    if (off > b.size() || bytes > b.size() - off)
      throw ferry::Error("testdev: " + std::string(what) + " of " + std::to_string(bytes) +
                         " bytes at offset " + std::to_string(off) + " overruns a buffer of " +
                         std::to_string(b.size()) + " bytes on " + device().str());
  }
  MemoryCounters counters_;
};

class TestdevBackend final : public ferry::Backend {
 public:
  TestdevBackend() : dev0_(0), dev1_(1) {}
  std::string name() const override { return "testdev"; }
  std::vector<ferry::DeviceImpl*> devices() override { return {&dev0_, &dev1_}; }

 private:
  TestdevDevice dev0_;
  TestdevDevice dev1_;
};

}  // namespace

FERRY_DEFINE_BACKEND(TestdevBackend)
