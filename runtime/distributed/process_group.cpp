// runtime/distributed/process_group.cpp — ferry::distributed's process group over a backend
// module's Collectives (Note [Process groups] in ferry/distributed.hpp): argument checks, the
// cross-rank check of each call, and staging through host memory or the group's device. The
// calls run in order through a CallQueue (work_queue.hpp); init() makes the group (init.cpp).
#include "distributed/process_group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <vector>

#include "dispatch.hpp"
#include "distributed/call.hpp"
#include "distributed/chunked_staging.hpp"
#include "distributed/work_queue.hpp"
#include "ferry/autograd.hpp"
#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "ferry/profiler.hpp"
#include "profiler/profiler_hooks.hpp"

namespace ferry::distributed {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
    case ReduceOp::product:
      return "product";
  }
  return "?";
}

namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw ShapeError(message);
}
class Group final : public ProcessGroup {
 public:
  // `device`: the device of a device module's group (its buffers are that device's memory).
  Group(std::unique_ptr<Collectives> lib, std::chrono::milliseconds timeout,
        std::optional<Device> device, std::size_t chunk_bytes, bool compare_calls)
      : lib_(std::move(lib)),
        timeout_(timeout),
        compare_calls_(compare_calls),
        device_(std::move(device)),
        home_(device_.value_or(Device::cpu())),
        impl_(device_ ? &device_impl(*device_) : nullptr),
        chunk_bytes_(chunk_bytes),
        queue_(timeout_, lib_.get()) {}

  int rank() const override { return lib_->rank(); }
  int size() const override { return lib_->size(); }
  std::string backend() const override { return lib_->name(); }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  std::optional<Device> device() const override { return device_; }
  bool compare_calls() const override { return compare_calls_.load(); }
  void set_compare_calls(bool on) override { compare_calls_.store(on); }

  Work allreduce_async(const Tensor& t, ReduceOp op) override {
    check_device("allreduce", {t});
    check_reduction("allreduce", t.dtype(), op);
    const std::int64_t chunk = chunk_elements({&t}, t.numel(), compute_dtype(t.dtype()));
    return issue(Call{std::int64_t(Kind::allreduce), std::int64_t(t.dtype()), t.numel(),
                      std::int64_t(op), chunk},
                 [this, t, op, chunk] {
                   // In place: 16-bit floats in f32, rounded once at the end.
                   const DType wide = compute_dtype(t.dtype());
                   const auto run = [&](Tensor& h, Tensor&) {
                     lib_->allreduce(bytes(h), std::size_t(h.numel()), wide,
                                     library_op(t.dtype(), op));
                     finish_reduction(h, op);
                   };
                   if (through_host({&t})) {
                     stage_in_chunks({t}, {t}, wide, true, chunk, run);
                     return;
                   }
                   Tensor h = staged(t, true, wide);
                   run(h, h);
                   write_back(t, h);
                 });
  }
  Work broadcast_async(const Tensor& t, int root) override {
    check_rank("broadcast", root);
    check_device("broadcast", {t});
    const std::int64_t chunk = chunk_elements({&t}, t.numel(), t.dtype());
    return issue(
        Call{std::int64_t(Kind::broadcast), std::int64_t(t.dtype()), t.numel(), root, chunk},
        [this, t, root, chunk] {
          if (through_host({&t})) {  // Note [Chunked staging]
            const bool mine = root == rank();
            stage_in_chunks(
                mine ? std::vector{t} : std::vector<Tensor>{},
                mine ? std::vector<Tensor>{} : std::vector{t}, t.dtype(), true, chunk,
                [&](Tensor& h, Tensor&) { lib_->broadcast(bytes(h), nbytes(h), root); });
            return;
          }
          Tensor h = staged(t);
          lib_->broadcast(bytes(h), nbytes(h), root);
          write_back(t, h);
        });
  }
  Work allgather_async(const Tensor& out, const Tensor& in) override {
    check_blocks("allgather", out, in);
    check_device("allgather", {out, in});
    const std::int64_t chunk = chunk_elements({&out, &in}, in.numel(), in.dtype());
    return issue(
        Call{std::int64_t(Kind::allgather), std::int64_t(in.dtype()), in.numel(), 0, chunk},
        [this, out, in, chunk] {
          if (through_host({&out, &in})) {
            stage_in_chunks({in}, rows(out), in.dtype(), false, chunk, [&](Tensor& hi, Tensor& ho) {
              lib_->allgather(bytes(hi), bytes(ho), nbytes(hi));
            });
            return;
          }
          Tensor hi = staged(in), ho = staged(out, false);
          lib_->allgather(bytes(hi), bytes(ho), nbytes(hi));
          write_back(out, ho);
        });
  }
  Work reduce_scatter_async(const Tensor& out, const Tensor& in, ReduceOp op) override {
    check_blocks("reduce_scatter", in, out);
    check_device("reduce_scatter", {out, in});
    check_reduction("reduce_scatter", in.dtype(), op);
    const std::int64_t chunk = chunk_elements({&out, &in}, out.numel(), compute_dtype(in.dtype()));
    return issue(Call{std::int64_t(Kind::reduce_scatter), std::int64_t(in.dtype()), out.numel(),
                      std::int64_t(op), chunk},
                 [this, out, in, op, chunk] {
                   const DType wide = compute_dtype(in.dtype());
                   const auto run = [&](Tensor& hi, Tensor& ho) {
                     lib_->reduce_scatter(bytes(hi), bytes(ho), std::size_t(ho.numel()), wide,
                                          library_op(in.dtype(), op));
                     finish_reduction(ho, op);
                   };
                   if (through_host({&out, &in})) {
                     stage_in_chunks(rows(in), {out}, wide, false, chunk, run);
                     return;
                   }
                   Tensor hi = staged(in, true, wide), ho = staged(out, false, wide);
                   run(hi, ho);
                   write_back(out, ho);
                 });
  }
  Work all_to_all_async(const Tensor& out, const Tensor& in) override {
    require(out.dtype() == in.dtype() && out.sizes() == in.sizes() && in.dim() >= 1 &&
                in.size(0) == size(),
            fmt::format("all_to_all: in and out must both have shape [{}, ...] (the world size "
                        "first) and one dtype, got {} {} and {} {}",
                        size(), shape_str(in.sizes()), dtype_name(in.dtype()),
                        shape_str(out.sizes()), dtype_name(out.dtype())));
    check_device("all_to_all", {out, in});
    const std::int64_t chunk = chunk_elements({&out, &in}, in.numel() / size(), in.dtype());
    return issue(
        Call{std::int64_t(Kind::all_to_all), std::int64_t(in.dtype()), in.numel(), 0, chunk},
        [this, out, in, chunk] {
          const auto run = [&](Tensor& hi, Tensor& ho) {
            lib_->all_to_all(bytes(hi), bytes(ho), nbytes(hi) / std::size_t(size()));
          };
          if (through_host({&out, &in})) {
            stage_in_chunks(rows(in), rows(out), in.dtype(), false, chunk, run);
            return;
          }
          Tensor hi = staged(in), ho = staged(out, false);
          run(hi, ho);
          write_back(out, ho);
        });
  }
  Work barrier_async() override {
    return issue(Call{std::int64_t(Kind::barrier), 0, 0, 0}, [this] { lib_->barrier(); });
  }
  Work send_async(const Tensor& t, int dst, int tag) override {
    check_peer("send", dst);
    check_device("send", {t});
    // A device tensor goes in chunks, one message each (Note [Chunked staging]); the header
    // tells the receiver how many, so that it takes them whatever its own tensor's device.
    const Call call{std::int64_t(Kind::send), std::int64_t(t.dtype()), t.numel(), tag,
                    chunk_elements({&t}, t.numel(), t.dtype())};
    return issue_local(Described{.call = call, .peer = dst}, [this, t, dst, tag, call] {
      Tensor header = staged_call(call);
      lib_->send(bytes(header), sizeof call, dst, tag);
      if (call.chunk) {
        stage_in_chunks({t}, {}, t.dtype(), true, call.chunk,
                        [&](Tensor& h, Tensor&) { lib_->send(bytes(h), nbytes(h), dst, tag); });
        return;
      }
      Tensor h = staged(t);
      lib_->send(bytes(h), nbytes(h), dst, tag);
    });
  }
  Work recv_async(const Tensor& t, int src, int tag) override {
    check_peer("recv", src);
    check_device("recv", {t});
    const Call call{std::int64_t(Kind::recv), std::int64_t(t.dtype()), t.numel(), tag};
    return issue_local(Described{.call = call, .peer = src}, [this, t, src, tag] {
      Tensor header = staged_call(Call{});
      lib_->recv(bytes(header), sizeof(Call), src, tag);
      const Call sent = read_calls(header)[0];
      // In the sender's chunks, whatever they are.
      const Call want{std::int64_t(Kind::send), std::int64_t(t.dtype()), t.numel(), tag,
                      sent.chunk};
      if (!(sent == want)) {
        // Take the messages all the same, so that the next one on this tag is read whole.
        std::int64_t left = sent.count;
        do {
          const std::int64_t n = sent.chunk > 0 ? std::min(sent.chunk, left) : left;
          Tensor drain = staged(empty({n}, {.dtype = DType(sent.dtype)}), false);
          lib_->recv(bytes(drain), nbytes(drain), src, tag);
          left -= n;
        } while (left > 0);
        throw DistributedError(
            fmt::format("recv: rank {} expected {} elements of {} from rank {} (tag {}), which "
                        "sent {} elements of {}",
                        rank(), want.count, dtype_name(t.dtype()), src, tag, sent.count,
                        dtype_name(DType(sent.dtype))));
      }
      if (sent.chunk) {
        stage_in_chunks({}, {t}, t.dtype(), true, sent.chunk,
                        [&](Tensor& h, Tensor&) { lib_->recv(bytes(h), nbytes(h), src, tag); });
        return;
      }
      Tensor h = staged(t, false);
      lib_->recv(bytes(h), nbytes(h), src, tag);
      write_back(t, h);
    });
  }

 private:
  // ---- checks, on the caller's thread ----
  void check_rank(const char* what, int r) const {
    if (r < 0 || r >= size())
      throw ValueError(fmt::format("{}: rank {} is not in the group of {}", what, r, size()));
  }
  void check_peer(const char* what, int r) const {
    check_rank(what, r);
    if (r == rank()) throw ValueError(fmt::format("{}: rank {} cannot {} itself", what, r, what));
  }
  static void check_reduction(const char* what, DType dt, ReduceOp op) {
    if (op == ReduceOp::avg && !is_floating(dt))
      throw DTypeError(fmt::format("{}: avg takes floating tensors, got {}", what, dtype_name(dt)));
  }
  // A device module's group takes tensors on its device alone.
  void check_device(const char* what, std::initializer_list<Tensor> ts) const {
    if (!device_) return;
    for (const Tensor& t : ts)
      if (t.device() != *device_)
        throw DeviceError(fmt::format(
            "{}: the {} group of rank {} takes tensors on {}, got one on {} (move it with .to())",
            what, backend(), rank(), device_->str(), t.device().str()));
  }
  // `whole` is [size, *part.shape], of part's dtype.
  void check_blocks(const char* what, const Tensor& whole, const Tensor& part) const {
    Shape want{size()};
    want.insert(want.end(), part.sizes().begin(), part.sizes().end());
    if (whole.sizes() != want || whole.dtype() != part.dtype())
      throw ShapeError(fmt::format("{}: expected {} {} beside {} {} (the world size {} first)",
                                   what, shape_str(want), dtype_name(part.dtype()),
                                   shape_str(part.sizes()), dtype_name(part.dtype()), size()));
  }

  // ---- staging, on the worker thread ----
  // Where the module's buffers live: host memory, or the group's device.
  const Device& home() const { return home_; }
  // t's values (when `read`) in a contiguous buffer the module takes, of dtype `dt`: t itself
  // when it already is that, else a copy. A device module's work is ordered after t's producers
  // by the device's queue; host memory is read once the device has finished writing it.
  Tensor staged(const Tensor& t, bool read = true, std::optional<DType> dt = {}) const {
    const DType want = dt.value_or(t.dtype());
    if (t.dtype() == want && t.is_contiguous() && t.device() == home_) {
      if (!device_) detail::wait_for(t.storage()->impl());
      return t;
    }
    if (!read) return empty(t.sizes(), {.dtype = want, .device = home()});
    Tensor h = t.to(home(), want).contiguous();
    if (!device_) detail::wait_for(t.storage()->impl());
    return h;
  }
  void write_back(const Tensor& t, const Tensor& h) const {
    if (!h.is_same(t)) const_cast<Tensor&>(t).copy_(h);
    if (!device_) detail::wait_for(t.storage()->impl());
  }
  // The address the module reads and writes h at (Note [Native memory]).
  void* bytes(const Tensor& h) const {
    const std::size_t offset = std::size_t(h.storage_offset()) * dtype_size(h.dtype());
    if (!impl_) return static_cast<char*>(h.storage()->buffer().host_ptr()) + offset;
    void* p = impl_->native_address(h.storage()->buffer(), offset);
    if (!p)
      throw UnsupportedError(fmt::format("distributed: {} gives no device address for the {} group",
                                         device_->str(), backend()));
    return p;
  }
  // Calls as the module exchanges them: [n, 4] i64 in its memory.
  Tensor staged_call(const Call& c) const {
    return staged(
        tensor(std::vector<std::int64_t>{c.kind, c.dtype, c.count, c.arg, c.chunk}, {1, 5}));
  }
  static std::vector<Call> read_calls(const Tensor& t) {
    const std::vector<std::int64_t> v = t.to_vector<std::int64_t>();
    std::vector<Call> calls;
    for (std::size_t i = 0; i + 4 < v.size(); i += 5)
      calls.push_back({v[i], v[i + 1], v[i + 2], v[i + 3], v[i + 4]});
    return calls;
  }
  static std::size_t nbytes(const Tensor& h) {
    return std::size_t(h.numel()) * dtype_size(h.dtype());
  }
  // The op the library runs: bool's sum is a logical or, its product a logical and; avg sums.
  static ReduceOp library_op(DType dt, ReduceOp op) {
    if (dt == DType::boolean && op == ReduceOp::sum) return ReduceOp::max;
    if (dt == DType::boolean && op == ReduceOp::product) return ReduceOp::min;
    return op == ReduceOp::avg ? ReduceOp::sum : op;
  }
  void finish_reduction(Tensor& h, ReduceOp op) const {
    if (op == ReduceOp::avg) h.div_(Scalar(double(size())));
  }
  // Whether a collective of these tensors stages through host memory in chunks (Note [Chunked
  // staging]): the library takes host memory and one of them is on a device.
  bool through_host(std::initializer_list<const Tensor*> ts) const {
    return !device_ &&
           std::any_of(ts.begin(), ts.end(), [](const Tensor* t) { return !t->device().is_cpu(); });
  }
  // The elements per chunk of a collective of `ts` whose blocks hold `elements` of `dt` each,
  // where it stages in more than one chunk; else 0 (the Call's `chunk`).
  std::int64_t chunk_elements(std::initializer_list<const Tensor*> ts, std::int64_t elements,
                              DType dt) const {
    if (!through_host(ts) || chunk_bytes_ == 0) return 0;
    const auto per = std::max<std::int64_t>(1, std::int64_t(chunk_bytes_ / dtype_size(dt)));
    return elements > per ? per : 0;
  }
  // t's blocks along dim 0 (a rank's each), as stage_in_chunks takes them.
  static std::vector<Tensor> rows(const Tensor& t) {
    std::vector<Tensor> out;
    for (std::int64_t r = 0; r < t.size(0); ++r) out.push_back(t.select(0, r));
    return out;
  }

  // ---- the queue (Note [Process groups]) ----
  // A collective: the ranks' calls are compared first, then `body` runs.
  template <typename Body> Work issue(Call call, Body&& body) {
    // Compared or not as the switch stood at issue, which every rank flips between the same
    // two calls.
    return enqueue(Described{.call = call}, std::forward<Body>(body),
                   compare_calls_.load(std::memory_order_relaxed));
  }
  // Raises DistributedError on every rank where the ranks' calls differ.
  void check_calls(const Call& call) const {
    std::vector<Call>& all = calls_;  // one job at a time: kept from call to call
    all.resize(static_cast<std::size_t>(size()));
    if (!device_) {
      lib_->allgather(&call, all.data(), sizeof call);  // host memory: no tensor needed
    } else {
      const Tensor mine = staged_call(call);
      const Tensor gathered = empty({size(), 5}, {.dtype = DType::i64, .device = home()});
      lib_->allgather(bytes(mine), bytes(gathered), sizeof call);
      all = read_calls(gathered);
    }
    for (const Call& c : all)
      if (!(c == call)) {
        std::string calls;
        for (std::size_t r = 0; r < all.size(); ++r)
          calls += fmt::format("{}rank {}: {}", r ? "; " : "", r, all[r].str());
        throw DistributedError(
            fmt::format("distributed: the ranks called different collectives ({})", calls));
      }
  }
  template <typename Body> Work issue_local(const Described& what, Body&& body) {
    return enqueue(what, std::forward<Body>(body), false);
  }
  // A blocking form's call may run on its caller's thread (work_queue.hpp).
  template <typename Body> Work enqueue(const Described& what, Body&& body, bool compare) {
    return queue_.enqueue(
        what,
        [this, what, compare, body = std::forward<Body>(body)] {
          NoGradGuard no_grad;  // collectives write tensors in place, outside autograd
          // A profile shows each collective (its comparison included) as a range on the thread
          // that ran it, the caller's or the group's, named by the backend and the call: "mpi
          // allreduce of 1024 f32 elements (sum)".
          std::optional<profiler::Range> traced;
          if (profiler::detail::on()) [[unlikely]]
            traced.emplace(fmt::format("{} {}", lib_->name(), what.name()));
          if (compare) check_calls(what.call);
          body();
        },
        take_blocking_mark(this));
  }

  std::unique_ptr<Collectives> lib_;  // first: leaves the job after the queue's thread ended
  std::chrono::milliseconds timeout_;
  std::atomic<bool> compare_calls_;
  std::optional<Device> device_;
  Device home_;              // where the module's buffers live: device_, else the CPU
  DeviceImpl* impl_;         // device_'s
  std::size_t chunk_bytes_;  // Note [Chunked staging]
  mutable std::vector<Call> calls_;  // check_calls' gathered calls
  CallQueue queue_;  // last: its thread starts once the rest is built, and ends first
};

}  // namespace

std::shared_ptr<ProcessGroup> make_process_group(std::unique_ptr<Collectives> lib,
                                                 std::chrono::milliseconds timeout,
                                                 std::optional<Device> device,
                                                 std::size_t chunk_bytes, bool compare_calls) {
  return std::make_shared<Group>(std::move(lib), timeout, std::move(device), chunk_bytes,
                                 compare_calls);
}

}  // namespace ferry::distributed
