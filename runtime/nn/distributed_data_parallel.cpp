// runtime/nn/distributed_data_parallel.cpp — nn::DistributedDataParallel's reducer: buckets,
// the gradient hooks that start their all-reduces in order, and the write-back at the end of
// backward (Note [DistributedDataParallel] in ferry/nn/parallel.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "autograd/graph.hpp"
#include "ferry/autograd.hpp"
#include "ferry/ferry.hpp"
#include "ferry/nn/parallel.hpp"
#include "memory_format_internal.hpp"
#include "transfer/arena_packing.hpp"

namespace ferry::nn {

struct DistributedDataParallel::Reducer {
  struct Bucket {
    std::vector<std::size_t> members;  // indices into params
    std::size_t pending = 0;           // members whose gradient has not come yet
    std::int64_t numel = 0;            // of flat
    Tensor flat;  // the members' gradients, end to end; each member's grad is a view of it
    distributed::Work work;
  };

  distributed::ProcessGroup* group = nullptr;
  std::vector<Tensor> params;  // reverse registration order
  std::vector<std::string> names;
  std::vector<std::uint64_t> hooks;
  std::vector<Bucket> buckets;
  std::vector<std::size_t> bucket_of;
  std::vector<std::int64_t> offset_in_bucket;  // params[i]'s first element in its bucket
  std::vector<Tensor> views;  // params[i]'s slot in its bucket, shaped as the parameter
  std::vector<bool> ready;
  std::size_t next_bucket = 0;  // buckets start in order, the same on every rank
  bool sync = true;
  bool in_progress = false;  // a gradient came since the last write-back
  std::mutex mutex;

  // Note [Unused parameters]
  // With find_unused_parameters, forward() marks ready the parameters its output does not
  // reach, each contributing the gradient it already has (zero where it has none), and keeps
  // that gradient. Once every bucket has started, the ranks take the maximum of which
  // parameters each used (one all-reduce of a byte per parameter, as PyTorch's reducer does
  // with its local_used_map). A parameter some rank used gets the average like any other; one
  // that no rank used gets back the gradient it had before (none, after zero_grad()), so an
  // optimizer skips it as it would in one process, instead of applying momentum or weight
  // decay to a zero.
  bool find_unused = false;
  std::vector<std::uint8_t> used;  // 1 where this rank used the parameter in this pass, else 0
  std::vector<Tensor> before;  // an unreached parameter's gradient before forward

  // Note [Gradients as bucket views]
  // Each parameter's gradient is made a view of its slot in its bucket the first time it comes
  // (a copy), and stays one while the optimizer zeroes it in place (zero_grad(false): backward
  // then adds into the slot itself, with no copy at all); the all-reduce averages the bucket
  // in place, so nothing is copied back. A gradient that is not the view (zero_grad() set it to
  // none, or code replaced it) is copied into the slot, and the view takes its place.
  void adopt(std::size_t i, const Tensor& grad) {
    // A migration while the gradients were unset moved the parameters without the bucket.
    Bucket& b = buckets[bucket_of[i]];
    if (b.flat.device() != params[i].device() || b.flat.dtype() != params[i].dtype()) allocate(b);
    const Tensor& view = views[i];
    if (grad.defined() && grad.storage() == view.storage() &&
        grad.storage_offset() == view.storage_offset() && grad.sizes() == view.sizes() &&
        grad.strides() == view.strides())
      return;
    NoGradGuard no_grad;
    if (grad.defined())
      const_cast<Tensor&>(view).copy_(grad);
    else
      const_cast<Tensor&>(view).zero_();
    params[i].set_grad(view);
  }

  // The bucket's memory, on its members' device and of their dtype, and their views of it,
  // each laid out as its parameter (channels-last for a channels-last one, as PyTorch's reducer
  // lays them), so that an optimizer's fused update takes the gradient as it is. The layout is
  // the parameters' when the bucket is made: convert the model before wrapping it, as PyTorch
  // asks (a later conversion still gives the same gradients, copied into the parameter's layout
  // by the optimizer).
  void allocate(Bucket& b) {
    const Tensor& first = params[b.members.front()];
    b.flat = zeros({b.numel}, {.dtype = first.dtype(), .device = first.device()});
    for (std::size_t m : b.members)
      views[m] = ferry::detail::as_layout_of(
          b.flat.narrow(0, offset_in_bucket[m], params[m].numel()), params[m]);
  }

  void mark_ready(std::size_t i) {
    if (ready[i])
      throw Error(fmt::format(
          "DistributedDataParallel: parameter '{}' received a second gradient before its "
          "all-reduce finished; run one backward per forward, or accumulate inside no_sync()",
          names[i]));
    ready[i] = true;
    in_progress = true;
    --buckets[bucket_of[i]].pending;
    while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0)
      launch(buckets[next_bucket++]);
    if (next_bucket == buckets.size()) finish();
  }

  void launch(Bucket& b) { b.work = group->allreduce_async(b.flat, distributed::ReduceOp::avg); }

  // Every bucket has started: wait for each (the gradients are views of the buckets, so they
  // hold the averages once it has completed).
  void finish() {
    Tensor used_anywhere;
    distributed::Work used_work;
    if (find_unused) {
      // On the group's own device where it takes one (nccl: cuda), else on the CPU.
      used_anywhere =
          tensor(used, {}, {.dtype = DType::u8, .device = group->device().value_or(Device::cpu())});
      used_work = group->allreduce_async(used_anywhere, distributed::ReduceOp::max);
    }
    for (Bucket& b : buckets) {
      b.work.wait();
      b.work = distributed::Work();
      b.pending = b.members.size();
    }
    if (find_unused) {
      used_work.wait();
      const std::vector<std::uint8_t> anywhere = used_anywhere.to_vector<std::uint8_t>();
      for (std::size_t i = 0; i < params.size(); ++i)
        if (!anywhere[i]) params[i].set_grad(before[i]);  // Note [Unused parameters]
      std::fill(used.begin(), used.end(), std::uint8_t(1));
      std::fill(before.begin(), before.end(), Tensor());
    }
    std::fill(ready.begin(), ready.end(), false);
    next_bucket = 0;
    in_progress = false;
  }

  // The parameters whose gradients did not come in the last backward.
  std::string missing() const {
    std::string s;
    for (std::size_t i = 0; i < params.size(); ++i)
      if (!ready[i]) s += (s.empty() ? "" : ", ") + names[i];
    return s;
  }
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module,
                                                 DistributedDataParallelOptions options)
    : module_(std::move(module)), options_(std::move(options)) {
  if (!module_) throw Error("DistributedDataParallel: the module is null");
  group_ = options_.group ? options_.group : distributed::default_group();
  if (!(options_.bucket_cap_mb > 0))
    throw ValueError(fmt::format("DistributedDataParallel: bucket_cap_mb must be positive, got {}",
                                 options_.bucket_cap_mb));
  register_module("module", module_);

  // Every replica starts from rank 0's state.
  {
    NoGradGuard no_grad;
    std::vector<distributed::Work> works;
    for (const NamedTensor& p : module_->named_parameters())
      works.push_back(group_->broadcast_async(p.second.detach(), 0));
    for (const NamedTensor& b : module_->named_buffers())
      works.push_back(group_->broadcast_async(b.second.detach(), 0));
    for (const distributed::Work& w : works) w.wait();
  }

  auto r = std::make_shared<Reducer>();
  r->group = group_.get();
  const auto named = module_->named_parameters();
  for (auto it = named.rbegin(); it != named.rend(); ++it)
    if (it->second.requires_grad()) {
      r->params.push_back(it->second);
      r->names.push_back("module." + it->first);  // as in this module's own state_dict
    }
  // The buckets are arenas of the gradients' bytes, laid out as the transfer planner lays
  // out a migration's (Note [Arena packing]); a bucket holds one dtype on one device.
  // A cap past 2^63 bytes (or infinite) is no cap: 0 to the packer.
  const double cap = options_.bucket_cap_mb * 1024 * 1024;
  detail::ArenaPacker packer(cap >= 0x1p63 ? 0 : std::max<std::uint64_t>(1, std::uint64_t(cap)), 1);
  for (std::size_t i = 0; i < r->params.size(); ++i) {
    const Tensor& p = r->params[i];
    bool fresh = false;
    if (!r->buckets.empty()) {
      const Tensor& first = r->params[r->buckets.back().members.front()];
      fresh = first.dtype() != p.dtype() || first.device() != p.device();
    }
    const auto slot = packer.place(std::uint64_t(p.numel()) * p.element_size(), fresh);
    if (slot.arena == r->buckets.size()) r->buckets.emplace_back();
    Reducer::Bucket& b = r->buckets.back();
    b.members.push_back(i);
    ++b.pending;
    b.numel = std::int64_t(packer.arena_bytes().back() / p.element_size());
    r->bucket_of.push_back(slot.arena);
    r->offset_in_bucket.push_back(std::int64_t(slot.offset / p.element_size()));
  }
  r->ready.assign(r->params.size(), false);
  r->views.resize(r->params.size());
  if (options_.find_unused_parameters) {
    r->find_unused = true;
    r->used.assign(r->params.size(), std::uint8_t(1));
    r->before.resize(r->params.size());
  }
  for (Reducer::Bucket& b : r->buckets) r->allocate(b);
  Reducer* raw = r.get();
  for (std::size_t i = 0; i < r->params.size(); ++i)
    r->hooks.push_back(
        autograd::register_post_accumulate_grad_hook(r->params[i], [raw, i](const Tensor&) {
          std::lock_guard lock(raw->mutex);
          if (!raw->sync) return;
          raw->adopt(i, raw->params[i].grad());
          raw->mark_ready(i);
        }));
  reducer_ = std::move(r);
}

DistributedDataParallel::~DistributedDataParallel() {
  if (!reducer_) return;
  for (std::size_t i = 0; i < reducer_->params.size(); ++i)
    autograd::remove_post_accumulate_grad_hook(reducer_->params[i], reducer_->hooks[i]);
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  Reducer& r = *reducer_;
  {
    std::lock_guard lock(r.mutex);
    if (r.in_progress)
      throw Error(fmt::format(
          "DistributedDataParallel: the last backward produced no gradient for {}, so their "
          "buckets' all-reduces never ran; construct it with find_unused_parameters = true "
          "when parts of the model may go unused",
          r.missing()));
  }
  if (options_.broadcast_buffers && group_->size() > 1) {
    NoGradGuard no_grad;
    for (const NamedTensor& b : module_->named_buffers()) group_->broadcast(b.second.detach(), 0);
  }
  Tensor y = module_->forward(input);
  if (options_.find_unused_parameters && is_grad_enabled() && y.requires_grad()) {
    // The leaves backward will reach from y; the others count as ready now (Note [Unused
    // parameters]).
    const auto reached = autograd::leaves_reached_from(y);
    std::lock_guard lock(r.mutex);
    if (r.sync) {
      NoGradGuard no_grad;
      for (std::size_t i = 0; i < r.params.size(); ++i)
        if (!reached.count(r.params[i].impl_ptr().get())) {
          r.before[i] = r.params[i].grad();
          r.used[i] = 0;
          r.adopt(i, r.before[i]);
          r.mark_ready(i);
        }
    }
  }
  return y;
}

std::vector<std::vector<std::size_t>> DistributedDataParallel::buckets() const {
  std::vector<std::vector<std::size_t>> out;
  for (const auto& b : reducer_->buckets) out.push_back(b.members);
  return out;
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp) : ddp_(ddp) {
  std::lock_guard lock(ddp_.reducer_->mutex);
  previous_ = ddp_.reducer_->sync;
  ddp_.reducer_->sync = false;
}

DistributedDataParallel::NoSync::~NoSync() {
  std::lock_guard lock(ddp_.reducer_->mutex);
  ddp_.reducer_->sync = previous_;
}

}  // namespace ferry::nn
