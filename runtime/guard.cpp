// runtime/guard.cpp — output guards (Note [Output guards] in ferry/debug.hpp).
#include "guard.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cstring>

#include "ferry/debug.hpp"
#include "ferry/error.hpp"
#include "ferry/tensor.hpp"

namespace ferry {
namespace debug {
namespace {
std::atomic<bool> g_guards{false};
}
void set_output_guards(bool enabled) { g_guards.store(enabled); }
bool output_guards() { return g_guards.load(std::memory_order_relaxed); }
}  // namespace debug

namespace detail {
namespace {

constexpr std::uint8_t kCanary = 0xA5;

struct Span {
  std::int64_t first = 0;  // element offsets, inclusive
  std::int64_t last = -1;
  std::size_t bytes(std::size_t el) const { return std::size_t(last - first + 1) * el; }
};

Span span_of(const TensorArg& a) {
  Span s{a.offset, a.offset};
  if (a.numel() == 0) return Span{a.offset, a.offset - 1};
  for (int d = 0; d < a.ndim(); ++d) {
    std::int64_t reach = (a.sizes[std::size_t(d)] - 1) * a.strides[std::size_t(d)];
    (reach < 0 ? s.first : s.last) += reach;
  }
  return s;
}

struct Guarded {
  Buffer* real;
  Span span;
  std::size_t el;
  std::unique_ptr<Buffer> scratch;
};

}  // namespace

void run_guarded(DeviceImpl& impl, const KernelFn& kernel, OpCall call) {
  constexpr std::size_t g = debug::kGuardBytes;
  std::vector<std::uint8_t> canary(g, kCanary);
  std::vector<Guarded> guarded;
  for (TensorArg& out : call.outputs) {
    Guarded gd{out.buffer, span_of(out), dtype_size(out.dtype), nullptr};
    std::size_t span_bytes = gd.span.bytes(gd.el);
    gd.scratch = impl.allocate(2 * g + span_bytes);
    impl.copy_from_host(*gd.scratch, 0, canary.data(), g);
    impl.copy_from_host(*gd.scratch, g + span_bytes, canary.data(), g);
    // Elements inside the span that the view skips keep their values.
    if (span_bytes)
      impl.copy_within(*gd.scratch, g, *gd.real, std::size_t(gd.span.first) * gd.el, span_bytes);
    out.buffer = gd.scratch.get();
    out.offset = std::int64_t(g / gd.el) + (out.offset - gd.span.first);
    guarded.push_back(std::move(gd));
  }
  kernel(impl, call);
  std::vector<std::uint8_t> before(g), after(g);
  for (std::size_t i = 0; i < guarded.size(); ++i) {
    Guarded& gd = guarded[i];
    std::size_t span_bytes = gd.span.bytes(gd.el);
    impl.copy_to_host(before.data(), *gd.scratch, 0, g);
    impl.copy_to_host(after.data(), *gd.scratch, g + span_bytes, g);
    auto changed = [&](const std::vector<std::uint8_t>& v) {
      std::size_t n = 0;
      for (auto b : v) n += b != kCanary;
      return n;
    };
    std::size_t nb = changed(before), na = changed(after);
    if (nb || na)
      throw BackendError(
          fmt::format("kernel '{}' on {} wrote outside output {} ({}{}): {} guard byte(s) before "
                      "and {} after "
                      "its memory span changed",
                      call.name(), impl.device().str(), i, dtype_name(call.outputs[i].dtype),
                      shape_str(call.outputs[i].sizes), nb, na),
          "out-of-bounds-write");
    if (span_bytes)
      impl.copy_within(*gd.real, std::size_t(gd.span.first) * gd.el, *gd.scratch, g, span_bytes);
  }
  impl.synchronize();  // scratch buffers are freed on return
}

}  // namespace detail
}  // namespace ferry
