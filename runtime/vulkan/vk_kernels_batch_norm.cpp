// runtime/vulkan/vk_kernels_batch_norm.cpp — batch_norm and batch_norm_backward through
// shaders/batch_norm.comp (docs/kernel-contract.md; the attributes are the CPU kernel's).
//
// Note [Vulkan batch_norm]
// A channel's values are N runs of H·W elements, one per sample, C runs apart. Composed, the
// statistics, the normalisation and the backward read a ResNet activation about ten times
// forward and twenty backward, a dispatch each. The kernel reads x twice forward (the sums,
// then y) and g and x twice backward, in three dispatches:
// 1. SUMS: a workgroup per channel and chunk of samples. The chunks make enough workgroups to
//    fill the device (Note [Row kernel geometry]: a GPU's 2^17 threads, lavapipe's 4096)
//    where the channels are few, none of fewer than kMinPerThread elements a thread.
// 2. FINISH: a thread per channel merges its chunks in order (deterministic: no atomics) into
//    the statistics, or the weight's and bias's gradients, and the per-channel coefficients.
// 3. APPLY: y or dx, a thread per element (plane_grid: a workgroup a plane on lavapipe).
// Tensors larger than one binding are cut between samples, then between channels
// (vk_split.hpp); every part's chunks go to one scratch. One channel of one sample larger than
// a binding raises UnsupportedError. The activations are contiguous: Vulkan does not claim
// DeviceCapabilities::channels_last_cnn, so the core hands it NCHW copies of channels-last ones.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "abi/batch_norm.h"
#include "ferry/error.hpp"
#include "ferry/kit/batch_norm_args.hpp"
#include "vulkan/vk_device.hpp"
#include "vulkan/vk_split.hpp"

namespace ferry::vulkan {
namespace {

constexpr std::uint64_t kMinPerThread = 16;  // SUMS: elements a thread adds, at least
constexpr std::uint64_t kMaxCount = std::uint64_t(1) << 31;  // 32-bit indices in the shader

// One call: its operands, its parts and the dispatches of its three passes.
class BatchNormCall {
 public:
  BatchNormCall(VulkanDevice& dev, const OpCall& c, bool backward)
      : dev_(dev), lim_(dev.limits()), c_(c), o_(batch_norm_args(c, backward, "vulkan")) {
    const TensorArg& x = *o_.x;
    for (const TensorArg* t : {o_.x, o_.g, o_.out})
      if (t && !t->is_contiguous())
        throw Error(fmt::format("{}: the vulkan kernel takes contiguous activations", c.name()));
    dev.require_op(c.op, x.dtype);
    if (o_.N * o_.area == 0 || o_.C == 0)  // the core composes empty inputs (Note [Composite ops])
      throw ShapeError(fmt::format("{}: the vulkan kernel takes a non-empty input", c.name()));
    if (std::uint64_t(o_.C) >= kMaxCount || std::uint64_t(o_.area) >= kMaxCount)
      throw UnsupportedError(fmt::format(
          "{}: {} channels of {} elements a sample exceed the Vulkan kernel's 2^31 limit", c.name(),
          o_.C, o_.area));
    // The parts, each within one binding: whole samples, or one sample's channels [c0, ...).
    std::vector<TensorArg> views;
    for (const TensorArg* t : {o_.g, o_.x, o_.out})
      if (t) views.push_back(*t);
    for_each_part(lim_, views, 0, 2, [&](const auto& part, const auto& at) {
      for (const TensorArg& t : part)
        if (!fits(lim_, t))
          throw UnsupportedError(fmt::format(
              "{}: one channel of one sample ({} elements) spans more than the device's "
              "storage-buffer range ({} bytes)",
              c.name(), o_.area, lim_.max_storage_range));
      parts_.push_back({part, at[1]});
    });
    p_.channels = std::uint32_t(o_.C);
    p_.area = std::uint32_t(o_.area);
    p_.eps = float(o_.eps);
    std::memcpy(p_.eps_bits, &o_.eps, sizeof o_.eps);
    spec_ = {.WG = wg_,
             .DT = dtype_code(x.dtype),
             .MODE = abi::BATCH_NORM_MODE_SUMS,
             .BACKWARD = backward,
             .TRAINING = o_.training,
             .HAS_W = o_.weight != nullptr,
             .HAS_B = o_.bias != nullptr};
  }

  void run() {
    std::optional<TensorArg> sums;
    if (o_.training || o_.backward) sums = this->sums();
    apply(finish(sums));
  }

 private:
  struct Part {
    std::vector<TensorArg> views;  // (g,) x, out
    std::int64_t c0;               // its first channel
  };
  const TensorArg& a(const Part& part) const { return part.views[0]; }  // x, or g
  // The slot-4 operand: the backward's x (else slot 3's, unread).
  Binding bind_b(const Part& part, const Binding& a) const {
    return o_.backward ? dev_.bind(part.views[1], Access::read) : a;
  }
  void set_part(const Part& part) {
    p_.c0 = std::uint32_t(part.c0);
    p_.part_c = std::uint32_t(a(part).sizes[1]);
    p_.samples = std::uint32_t(a(part).sizes[0]);
  }
  std::uint32_t groups(std::uint64_t n) const { return group_count(lim_, n); }
  // One dispatch of the eight slots (batch_norm.comp's list), their offsets passed.
  void dispatch(const std::array<Binding, 8>& b, std::array<std::uint32_t, 3> grid) {
    for (std::size_t i = 0; i < b.size(); ++i) p_.off[i] = b[i].element_offset;
    dev_.dispatch({"batch_norm",
                   spec_.values(),
                   {b.begin(), b.end()},
                   &p_,
                   sizeof p_,
                   grid,
                   std::uint32_t(c_.op),
                   o_.x->dtype == DType::f64});
  }
  // A scratch of `count` values of the statistics' dtype; the device keeps its memory until
  // the GPU is done with it.
  TensorArg scratch(std::uint64_t count) {
    scratch_.push_back(dev_.allocate(std::size_t(count * dtype_size(o_.stats))));
    return TensorArg{scratch_.back().get(), 0, {std::int64_t(count)}, {1}, o_.stats};
  }

  // 1. SUMS: each chunk's sums, into a scratch of chunks_ chunks.
  TensorArg sums() {
    const std::uint64_t C = std::uint64_t(o_.C), N = std::uint64_t(o_.N);
    const std::uint64_t target = (lim_.row_target_threads + wg_ - 1) / wg_;  // workgroups
    const std::uint64_t want = std::clamp<std::uint64_t>(
        std::min((target + C - 1) / C, N * std::uint64_t(o_.area) / (wg_ * kMinPerThread)), 1, N);
    const std::uint64_t chunk = (N + want - 1) / want;
    // Each part's first chunk: a part cut between channels shares its sample's one.
    std::vector<std::uint64_t> first(parts_.size());
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      first[i] = parts_[i].c0 != 0 ? first[i - 1] : chunks_;
      if (parts_[i].c0 == 0) chunks_ += (std::uint64_t(a(parts_[i]).sizes[0]) + chunk - 1) / chunk;
    }
    const TensorArg t = scratch(chunks_ * abi::BATCH_NORM_SLOTS * C);
    const Binding sw = dev_.bind(t, Access::write);
    const std::optional<Binding> mean =
        o_.backward ? std::optional(dev_.bind(*o_.mean, Access::read)) : std::nullopt;
    spec_.MODE = abi::BATCH_NORM_MODE_SUMS;
    p_.chunk = std::uint32_t(chunk);
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      const Binding ab = dev_.bind(a(parts_[i]), Access::read), bb = bind_b(parts_[i], ab);
      set_part(parts_[i]);
      p_.chunk0 = std::uint32_t(first[i]);
      dispatch({sw, sw, sw, ab, bb, mean.value_or(ab), ab, ab},
               {groups(p_.part_c), groups((p_.samples + p_.chunk - 1) / p_.chunk), 1});
    }
    return t;
  }

  // 2. FINISH: the statistics or the parameters' gradients, and the coefficients, which it
  // returns.
  TensorArg finish(const std::optional<TensorArg>& sums) {
    const TensorArg coefficients = scratch(4 * std::uint64_t(o_.C));
    const Binding cw = dev_.bind(coefficients, Access::write);
    const Binding in = dev_.bind(sums ? *sums : *o_.mean, Access::read);
    // Written, else the coefficients again; read, else slot 3's tensor again.
    auto written = [&](const TensorArg* t) { return t ? dev_.bind(*t, Access::write) : cw; };
    auto read = [&](const TensorArg* t) { return t ? dev_.bind(*t, Access::read) : in; };
    const TensorArg* stat_a = o_.backward ? o_.dbias : o_.batch_mean;
    const TensorArg* stat_b = o_.backward ? o_.dweight : o_.batch_var;
    spec_.MODE = abi::BATCH_NORM_MODE_FINISH;
    p_.chunks = std::uint32_t(chunks_);
    dispatch({cw, written(stat_a), written(stat_b), in, read(o_.weight), read(o_.bias),
              read(o_.mean), read(o_.var)},
             {groups((std::uint64_t(o_.C) + wg_ - 1) / wg_), 1, 1});
    return coefficients;
  }

  // 3. APPLY: y or dx, a part at a time.
  void apply(const TensorArg& coefficients) {
    const Binding cr = dev_.bind(coefficients, Access::read);
    spec_.MODE = abi::BATCH_NORM_MODE_APPLY;
    for (const Part& part : parts_) {
      const Binding ab = dev_.bind(a(part), Access::read), bb = bind_b(part, ab);
      const Binding ob = dev_.bind(part.views.back(), Access::write);
      set_part(part);
      dispatch({ob, ob, ob, ab, bb, cr, ab, ab},
               plane_grid_within_budget(dev_, c_.name(), std::uint64_t(p_.samples) * p_.part_c,
                                        p_.area, wg_));
    }
  }

  VulkanDevice& dev_;
  const KernelLimits& lim_;
  const OpCall& c_;
  const BatchNormOperands o_;
  const std::uint32_t wg_ = workgroup_size(lim_);
  std::vector<Part> parts_;
  abi::BatchNormParams p_{};
  abi::BatchNormSpec spec_{};
  std::uint64_t chunks_ = 0;  // SUMS' chunks in the scratch
  std::vector<std::unique_ptr<Buffer>> scratch_;
};

}  // namespace

void add_batch_norm_kernels(KernelTable& table) {
  for (const bool backward : {false, true})
    table.emplace_back(backward ? OpId::batch_norm_backward : OpId::batch_norm,
                       [backward](DeviceImpl& d, const OpCall& c) {
                         BatchNormCall(vulkan_device(d), c, backward).run();
                       });
}

}  // namespace ferry::vulkan
