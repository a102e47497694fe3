// runtime/backend.cpp — the parts of the backend interface every device shares:
// attributes, argument helpers, and the defaults of optional abilities.
#include "ferry/backend.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "ferry/error.hpp"
#include "parallel.hpp"

namespace ferry {

std::int64_t TensorArg::numel() const {
  std::int64_t n = 1;
  for (auto s : sizes) n *= s;
  return n;
}

bool TensorArg::is_contiguous(MemoryFormat format) const {
  return is_dense_in(sizes, strides, format);
}

MemoryFormat activation_format(const Attrs& attrs, std::int64_t rank) {
  if (!attrs.has("channels_last") || !attrs.b("channels_last")) return MemoryFormat::contiguous;
  return rank == 5 ? MemoryFormat::channels_last_3d : MemoryFormat::channels_last;
}

Attrs::Attrs(std::initializer_list<std::pair<std::string, AttrValue>> init) : items_(init) {}

Attrs& Attrs::set(std::string name, AttrValue v) {
  for (auto& [k, val] : items_)
    if (k == name) {
      val = std::move(v);
      return *this;
    }
  items_.emplace_back(std::move(name), std::move(v));
  return *this;
}

bool Attrs::has(std::string_view name) const {
  for (auto& [k, v] : items_)
    if (k == name) return true;
  return false;
}

const AttrValue& Attrs::get(std::string_view name) const {
  for (auto& [k, v] : items_)
    if (k == name) return v;
  throw Error(fmt::format("kernel attribute '{}' is missing (have: {})", name, str()));
}

std::int64_t Attrs::i(std::string_view name) const {
  const AttrValue& v = get(name);
  if (auto* p = std::get_if<std::int64_t>(&v)) return *p;
  if (auto* b = std::get_if<bool>(&v)) return *b;
  throw Error(fmt::format("kernel attribute '{}' is not an integer", name));
}

double Attrs::f(std::string_view name) const {
  const AttrValue& v = get(name);
  if (auto* p = std::get_if<double>(&v)) return *p;
  if (auto* p = std::get_if<std::int64_t>(&v)) return double(*p);
  throw Error(fmt::format("kernel attribute '{}' is not a number", name));
}

bool Attrs::b(std::string_view name) const {
  const AttrValue& v = get(name);
  if (auto* p = std::get_if<bool>(&v)) return *p;
  if (auto* p = std::get_if<std::int64_t>(&v)) return *p != 0;
  throw Error(fmt::format("kernel attribute '{}' is not a flag", name));
}

const std::vector<std::int64_t>& Attrs::ints(std::string_view name) const {
  const AttrValue& v = get(name);
  if (auto* p = std::get_if<std::vector<std::int64_t>>(&v)) return *p;
  throw Error(fmt::format("kernel attribute '{}' is not a list of integers", name));
}

const std::vector<double>& Attrs::floats(std::string_view name) const {
  const AttrValue& v = get(name);
  if (auto* p = std::get_if<std::vector<double>>(&v)) return *p;
  throw Error(fmt::format("kernel attribute '{}' is not a list of numbers", name));
}

const std::string& Attrs::s(std::string_view name) const {
  const AttrValue& v = get(name);
  if (auto* p = std::get_if<std::string>(&v)) return *p;
  throw Error(fmt::format("kernel attribute '{}' is not a string", name));
}

std::string Attrs::str() const {
  std::string out;
  for (auto& [k, v] : items_) {
    if (!out.empty()) out += ", ";
    out += k + "=";
    std::visit(
        [&](const auto& x) {
          using X = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<X, std::vector<std::int64_t>> ||
                        std::is_same_v<X, std::vector<double>>)
            out += fmt::format("[{}]", fmt::join(x, ", "));
          else
            out += fmt::format("{}", x);
        },
        v);
  }
  return out;
}

bool DeviceImpl::copy_from_peer(Buffer&, std::size_t, DeviceImpl&, const Buffer&, std::size_t,
                                std::size_t) {
  return false;
}

std::unique_ptr<Buffer> DeviceImpl::sub_buffer(std::shared_ptr<Buffer>, std::size_t, std::size_t) {
  return nullptr;
}

std::unique_ptr<Buffer> DeviceImpl::allocate_staging(std::size_t) { return nullptr; }

std::unique_ptr<Buffer> DeviceImpl::register_host_memory(void*, std::size_t) { return nullptr; }

void* DeviceImpl::native_address(const Buffer& buffer, std::size_t offset) const {
  // Memory the host reaches directly is its own address (the CPU; mapped memory is not
  // what a device library would take, so only the CPU's counts).
  if (!device().is_cpu() || !buffer.host_ptr()) return nullptr;
  return static_cast<char*>(buffer.host_ptr()) + offset;
}

// Large copies are split over threads: one core cannot saturate memory bandwidth.
void host_memcpy(void* dst, const void* src, std::size_t bytes) {
  constexpr std::int64_t kChunk = 1 << 16;
  std::int64_t chunks = std::int64_t((bytes + kChunk - 1) / kChunk);
  detail::parallel_range(chunks, 64, [&](std::int64_t b, std::int64_t e) {
    std::size_t begin = std::size_t(b) * kChunk, end = std::min(bytes, std::size_t(e) * kChunk);
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                end - begin);
  });
}

// ---- Note [Failure injection]

namespace {
std::atomic<bool> failure_armed{false};
std::mutex failure_mutex;
long failure_countdown = -1;  // under failure_mutex
long failure_calls = 0;       // under failure_mutex
}  // namespace

void failure_point(const DeviceImpl& device, const char* what) {
  if (!failure_armed.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(failure_mutex);
  ++failure_calls;
  if (failure_countdown < 0 || failure_countdown-- > 0) return;
  throw BackendError(fmt::format("{}: injected failure in {} (call {} since testing::fail_at)",
                                 device.device().str(), what, failure_calls - 1),
                     kInjectedFailureCode);
}

long testing::fail_at(long n) {
  std::lock_guard<std::mutex> lock(failure_mutex);
  const long counted = failure_calls;
  failure_countdown = n;
  failure_calls = 0;
  // Stays armed after the failure fired, so the calls after it are counted.
  failure_armed.store(n >= 0, std::memory_order_relaxed);
  return counted;
}

namespace {
class CompletedEvent final : public Event {
 public:
  void wait() override {}
  bool query() override { return true; }
};
}  // namespace

std::unique_ptr<Event> DeviceImpl::record_event() {
  synchronize();
  return std::make_unique<CompletedEvent>();
}

bool DeviceImpl::supports(OpId op, DType dtype) const {
  return find_kernel(op) != nullptr && op_info(op).kernel_dtypes().has(dtype);
}

std::vector<OpId> DeviceImpl::kernel_ops() const {
  std::vector<OpId> ops;
  for (std::size_t i = 0; i < kOpCount; ++i)
    if (kernels_[i]) ops.push_back(OpId(i));
  return ops;
}

std::vector<std::string> DeviceImpl::kernel_names() const {
  std::vector<std::string> names;
  for (OpId op : kernel_ops()) names.emplace_back(op_name(op));
  std::sort(names.begin(), names.end());
  return names;
}

void DeviceImpl::register_kernel(OpId op, KernelFn fn) {
  if (op_info(op).kind == OpKind::composite)
    throw Error(fmt::format(
        "{}: op '{}' has no kernel interface: it is only a composition of other ops (Note "
        "[Composite ops] in ferry/op.hpp)",
        device_.str(), op_name(op)));
  KernelFn& slot = kernels_[std::size_t(op)];
  if (slot)
    throw Error(fmt::format("{}: a second kernel for op '{}' (each op has one per device)",
                            device_.str(), op_name(op)));
  slot = std::move(fn);
}

void DeviceImpl::register_kernel(std::string_view op, KernelFn fn) {
  const std::optional<OpId> id = op_from_name(op);
  if (!id)
    throw Error(
        fmt::format("{}: '{}' is not an op of ferry's op table (ops/ops.table); a "
                    "device registers kernels for the table's ops only",
                    device_.str(), op));
  register_kernel(*id, std::move(fn));
}

}  // namespace ferry
