// runtime/distributed/process_group.cpp — ferry::distributed's process group over a backend
// module's Collectives (Note [Process groups] in ferry/distributed.hpp): argument checks, the
// cross-rank check of each call, staging through host memory, the worker thread that runs the
// collectives in order, and the timeout that ends a job a peer left hanging.
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "dispatch.hpp"
#include "distributed/chunked_staging.hpp"
#include "distributed/collectives.hpp"
#include "distributed/rendezvous.hpp"
#include "ferry/autograd.hpp"
#include "ferry/backend.hpp"
#include "ferry/distributed.hpp"
#include "ferry/ferry.hpp"
#include "ferry/kit/env.hpp"
#include "ferry/profiler.hpp"
#include "ferry/registry.hpp"
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

enum class Kind : std::int64_t {
  allreduce,
  broadcast,
  allgather,
  reduce_scatter,
  all_to_all,
  barrier,
  send,
  recv  // a Work's description only: a recv's sender exchanges Kind::send
};
constexpr const char* kKindNames[] = {"allreduce",  "broadcast", "allgather", "reduce_scatter",
                                      "all_to_all", "barrier",   "send",      "recv"};

// What a rank was asked, compared across the ranks before each collective.
struct Call {  // 40 bytes: exchanged as [1, 5] i64 where the module takes device memory
  std::int64_t kind = 0, dtype = 0, count = 0, arg = 0;  // arg: the op, or the root
  // Elements per chunk where the collective stages through host memory in more than one
  // (Note [Chunked staging]), else 0: ranks that chunk differently (one rank's tensor on the
  // CPU, another's on a device; unequal FERRY_DISTRIBUTED_CHUNK) would call the library
  // differently, so it is compared with the rest.
  std::int64_t chunk = 0;
  bool operator==(const Call&) const = default;
  std::string str() const {
    const Kind k = Kind(kind);
    std::string s = kKindNames[kind];
    if (k == Kind::barrier) return s;
    s += fmt::format(" of {} {} elements", count, dtype_name(DType(dtype)));
    if (k == Kind::allreduce || k == Kind::reduce_scatter)
      s += fmt::format(" ({})", reduce_op_name(ReduceOp(arg)));
    if (k == Kind::broadcast) s += fmt::format(" from rank {}", arg);
    if (chunk) s += fmt::format(", staged in chunks of {} elements", chunk);
    return s;
  }
};
static_assert(sizeof(Call) == 5 * sizeof(std::int64_t));

// What a Work is, for the message that ends a job: its call, and for a send or recv its peer.
// Kept as numbers and put into words only when needed, off the hot path.
struct Described {
  Call call;
  int peer = -1;             // a send's or recv's other rank; -1 for a collective
  std::uint64_t number = 0;  // the rank's how-manieth call this is
  std::string name() const {  // what was called, with the peer
    return peer < 0 ? call.str()
                    : fmt::format("{} rank {} (tag {})",
                                  Kind(call.kind) == Kind::send ? "send to" : "recv from", peer,
                                  call.arg);
  }
  std::string str() const { return fmt::format("{} (call #{} of this rank)", name(), number); }
};

// No rank may wait forever for a peer that died or hangs in another call.
[[noreturn]] void end_job_after_timeout(int rank, const Described& what,
                                        std::chrono::milliseconds timeout, Collectives* lib) {
  std::fprintf(stderr,
               "ferry.distributed: rank %d: %s did not complete within %.1f s (a peer may have "
               "died, hung, or called something else); ending the job\n",
               rank, what.str().c_str(), double(timeout.count()) / 1000.0);
  std::fflush(stderr);
  lib->abort_job(3);
  std::_Exit(3);  // abort_job ends the processes; should the library return, this one ends here
}

}  // namespace

class WorkState {
 public:
  WorkState(Described what, std::chrono::milliseconds timeout, int rank, Collectives* lib)
      : what_(what), timeout_(timeout), rank_(rank), lib_(lib) {}

  const Described& what() const { return what_; }
  void finish(std::exception_ptr error) {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
      error_ = std::move(error);
      done_flag_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
  }
  bool done() const { return done_flag_.load(std::memory_order_acquire); }
  void wait() const {
    // A short collective completes within microseconds: looking again for a while costs less
    // than a sleep and a wake-up (Note [Process groups]).
    for (int i = 0; i < kSpins; ++i) {
      if (done_flag_.load(std::memory_order_acquire)) {
        if (error_) std::rethrow_exception(error_);  // written before the flag, never after
        return;
      }
      std::this_thread::yield();
    }
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, timeout_, [&] { return done_; }))
      end_job_after_timeout(rank_, what_, timeout_, lib_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  std::atomic<bool> done_flag_{false};  // done_, read without the mutex while spinning
  static constexpr int kSpins = 2000;
  std::exception_ptr error_;
  Described what_;
  std::chrono::milliseconds timeout_;
  int rank_;
  Collectives* lib_;
};

void Work::wait() const {
  if (state_) state_->wait();
}
bool Work::is_completed() const { return !state_ || state_->done(); }

namespace {

bool compare_calls_from(const InitOptions& o) {
  if (o.compare_calls) return *o.compare_calls;
  return kit::env::choice("FERRY_DISTRIBUTED_COMPARE_CALLS", {"0", "1"}, "1") == "1";
}

std::chrono::milliseconds timeout_from(const InitOptions& o) {
  if (o.timeout.count() > 0) return o.timeout;
  if (const auto s =
          kit::env::positive_number("FERRY_DISTRIBUTED_TIMEOUT", "a positive number of seconds"))
    return std::chrono::milliseconds(std::max<std::int64_t>(1, std::int64_t(*s * 1000)));
  return std::chrono::minutes(5);
}

// The module libferry_distributed_<name>.so from the backend search path.
std::unique_ptr<Collectives> open_backend(const std::string& name) {
  const std::string file = "libferry_distributed_" + name + ".so";
  std::vector<std::string> tried;
  for (const std::string& dir : backend_search_path()) {
    const std::string path = (std::filesystem::path(dir) / file).string();
    if (!std::filesystem::exists(path)) {
      tried.push_back(dir);
      continue;
    }
    // RTLD_GLOBAL: the collective library opens components of its own that look for its
    // symbols (Open MPI's MCA modules).
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      const char* err = dlerror();
      throw UnsupportedError(fmt::format("distributed: the {} backend ({}) could not be loaded: {}",
                                         name, path, err ? err : "unknown error"));
    }
    auto create =
        reinterpret_cast<FerryCreateCollectivesFn>(dlsym(handle, "ferry_create_collectives"));
    if (!create)
      throw UnsupportedError(
          fmt::format("distributed: {} does not export ferry_create_collectives", path));
    Collectives* c = create(kCollectivesAbiVersion);
    if (!c)
      throw UnsupportedError(
          fmt::format("distributed: {} was built for another collectives ABI (this is {})", path,
                      kCollectivesAbiVersion));
    return std::unique_ptr<Collectives>(c);
  }
  throw UnsupportedError(fmt::format(
      "distributed: no '{}' backend: {} is not in the backend search path ({}); ferry builds "
      "it where {} is found at build time{}",
      name, file, fmt::join(tried, ", "),
      name == "mpi"    ? "Open MPI (libopenmpi-dev)"
      : name == "nccl" ? "the CUDA toolkit and NCCL (nccl.h, libnccl.so)"
                       : name,
      name == "mpi" || name == "nccl" ? "" : " (known backends: mpi, nccl)"));
}

// Set by a blocking form for the one call it issues (ProcessGroup::allreduce and the rest):
// that call may run on this thread.
thread_local const ProcessGroup* t_blocking_group = nullptr;

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
        worker_([this] { run(); }) {}
  ~Group() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
    lib_.reset();  // leaves the job, on the thread that joined it
  }

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
                   reduce(t, op, chunk, [&](void* p, std::size_t n, DType dt, ReduceOp o) {
                     lib_->allreduce(p, n, dt, o);
                   });
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
  using Reducer = std::function<void(void*, std::size_t, DType, ReduceOp)>;

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
  // An in-place reduction of t: 16-bit floats in f32, rounded once at the end.
  void reduce(const Tensor& t, ReduceOp op, std::int64_t chunk, const Reducer& run) const {
    const DType wide = compute_dtype(t.dtype());
    if (through_host({&t})) {
      stage_in_chunks({t}, {t}, wide, true, chunk, [&](Tensor& h, Tensor&) {
        run(bytes(h), std::size_t(h.numel()), wide, library_op(t.dtype(), op));
        finish_reduction(h, op);
      });
      return;
    }
    Tensor h = staged(t, true, wide);
    run(bytes(h), std::size_t(h.numel()), wide, library_op(t.dtype(), op));
    finish_reduction(h, op);
    write_back(t, h);
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
  struct Job {
    std::shared_ptr<WorkState> state;
    std::function<void()> body;
    bool compare = false;  // check_calls first
  };
  // A blocking form's call runs on its caller's thread where nothing is queued or running;
  // it then needs no WorkState, no std::function and no hand-off: its Work is an empty one
  // (completed), and its error is thrown here, where the blocking form would have rethrown
  // it. Anything else is queued for the group's thread.
  template <typename Body> Work enqueue(Described what, Body&& body, bool compare) {
    const bool blocking = t_blocking_group == this;
    t_blocking_group = nullptr;  // the one call the blocking form issues
    std::unique_lock lock(mutex_);
    what.number = ++issued_;
    if (blocking && queue_.empty() && !running_) {
      // Nothing before it to wait for: run it here, watched by the group's thread.
      running_ = true;
      running_here_ = what;
      lock.unlock();
      struct Done {  // on return or throw
        Group& g;
        ~Done() {
          std::unique_lock lock(g.mutex_);
          g.running_ = false;
          g.running_here_.reset();
          const bool more = !g.queue_.empty();  // issued meanwhile by other threads
          lock.unlock();
          if (more) g.cv_.notify_all();
        }
      } done{*this};
      run_traced(what, compare, body);
      return Work();
    }
    auto state = std::make_shared<WorkState>(what, timeout_, rank(), lib_.get());
    queue_.push_back(Job{state, std::function<void()>(std::forward<Body>(body)), compare});
    lock.unlock();
    cv_.notify_all();
    return Work(state);
  }
  // Runs one call: the ranks' comparison (when asked), then its body.
  template <typename Body> void run_traced(const Described& what, bool compare, Body& body) const {
    NoGradGuard no_grad;  // collectives write tensors in place, outside autograd
    // A profile shows each collective (its comparison included) as a range on the thread that
    // ran it, the caller's or the group's, named by the backend and the call: "mpi allreduce
    // of 1024 f32 elements (sum)".
    std::optional<profiler::Range> traced;
    if (profiler::detail::on()) [[unlikely]]
      traced.emplace(fmt::format("{} {}", lib_->name(), what.name()));
    if (compare) check_calls(what.call);
    body();
  }
  // A queued job, on the group's thread. Its range ends before the work is finished: a waiter
  // that stops its profile as soon as wait() returns finds the range in it.
  void run_job(Job& job) const {
    std::exception_ptr error;
    try {
      run_traced(job.state->what(), job.compare, job.body);
    } catch (...) {
      error = std::current_exception();
    }
    job.state->finish(std::move(error));
  }
  // The group's thread: runs the queued work in order, and ends the job when a collective run
  // on its caller's thread outlasts the timeout (that thread is inside the library). It times
  // such a call from when it first sees it, looking every `watch`, so that the caller reads no
  // clock: the job ends between the timeout and two `watch`es later.
  void run() {
    const auto watch = std::clamp<std::chrono::milliseconds>(
        timeout_ / 10, std::chrono::milliseconds(10), std::chrono::seconds(1));
    std::uint64_t seen = 0;  // the number of the call seen running here, and since when
    std::chrono::steady_clock::time_point seen_since;
    std::unique_lock lock(mutex_);
    for (;;) {
      if (!running_ && !queue_.empty()) {
        Job job = std::move(queue_.front());
        queue_.pop_front();
        running_ = true;
        lock.unlock();
        run_job(job);
        lock.lock();
        running_ = false;
        continue;
      }
      if (stopping_ && queue_.empty() && !running_) return;
      if (running_here_) {
        const auto now = std::chrono::steady_clock::now();
        if (running_here_->number != seen) {
          seen = running_here_->number;
          seen_since = now;
        } else if (now - seen_since > timeout_) {
          end_job_after_timeout(rank(), *running_here_, timeout_, lib_.get());
        }
      }
      cv_.wait_for(lock, watch);
    }
  }

  std::unique_ptr<Collectives> lib_;
  std::chrono::milliseconds timeout_;
  std::atomic<bool> compare_calls_;
  std::optional<Device> device_;
  Device home_;              // where the module's buffers live: device_, else the CPU
  DeviceImpl* impl_;         // device_'s
  std::size_t chunk_bytes_;  // Note [Chunked staging]
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool running_ = false;                   // a job is in the library (one at a time)
  std::optional<Described> running_here_;  // the call a blocking caller runs itself
  bool stopping_ = false;
  std::uint64_t issued_ = 0;
  mutable std::vector<Call> calls_;  // check_calls' gathered calls
  std::thread worker_;  // last: starts once the rest is built
};

// A device module's device (InitOptions::device, else its backend's device numbered by the
// local rank); none for a module over host memory.
std::optional<Device> group_device(const Collectives& lib, const InitOptions& o,
                                   const JobPlace& place) {
  const std::string backend = lib.device_backend();
  if (backend.empty()) {
    if (o.device)
      throw ValueError(
          fmt::format("distributed: the {} backend takes tensors on every device; "
                      "InitOptions::device is for a device backend's group (nccl)",
                      lib.name()));
    return std::nullopt;
  }
  if (o.device) {
    if (o.device->type() != backend)
      throw DeviceError(fmt::format("distributed: the {} backend runs on {} devices, not {}",
                                    lib.name(), backend, o.device->str()));
    return o.device;
  }
  int usable = 0;
  std::string reason;
  for (const DeviceInfo& d : devices()) {
    if (d.backend != backend) continue;
    if (d.available)
      ++usable;
    else if (reason.empty())
      reason = d.unavailable_reason;
  }
  if (usable == 0)
    throw UnsupportedError(
        fmt::format("distributed: the {} backend runs on {} devices, and this machine has none "
                    "usable ({})",
                    lib.name(), backend, reason.empty() ? backend + " has no devices" : reason));
  return Device::unchecked(backend, place.local_rank % usable);
}

std::mutex g_mutex;
std::shared_ptr<ProcessGroup> g_default;

// Issues one call of `g` from a blocking form, then waits for it.
template <typename Issue> void blocking(const ProcessGroup& g, Issue&& issue) {
  t_blocking_group = &g;
  Work w;
  try {
    w = issue();
  } catch (...) {
    t_blocking_group = nullptr;  // refused before it was queued, or run here and failed
    throw;
  }
  w.wait();
}

}  // namespace

void ProcessGroup::allreduce(const Tensor& t, ReduceOp op) {
  blocking(*this, [&] { return allreduce_async(t, op); });
}
void ProcessGroup::broadcast(const Tensor& t, int root) {
  blocking(*this, [&] { return broadcast_async(t, root); });
}
void ProcessGroup::allgather(const Tensor& out, const Tensor& in) {
  blocking(*this, [&] { return allgather_async(out, in); });
}
void ProcessGroup::reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) {
  blocking(*this, [&] { return reduce_scatter_async(out, in, op); });
}
void ProcessGroup::all_to_all(const Tensor& out, const Tensor& in) {
  blocking(*this, [&] { return all_to_all_async(out, in); });
}
void ProcessGroup::barrier() {
  blocking(*this, [&] { return barrier_async(); });
}
void ProcessGroup::send(const Tensor& t, int dst, int tag) {
  blocking(*this, [&] { return send_async(t, dst, tag); });
}
void ProcessGroup::recv(const Tensor& t, int src, int tag) {
  blocking(*this, [&] { return recv_async(t, src, tag); });
}

std::shared_ptr<ProcessGroup> init(const InitOptions& options) {
  std::lock_guard lock(g_mutex);
  if (g_default)
    throw Error(fmt::format("distributed::init: already initialized (backend {}, rank {} of {})",
                            g_default->backend(), g_default->rank(), g_default->size()));
  const auto timeout = timeout_from(options);
  const bool compare_calls = compare_calls_from(options);
  const std::size_t chunk_bytes = staging_chunk_bytes();
  const JobPlace place = job_place(options.rank, options.world_size);
  std::unique_ptr<Collectives> lib = open_backend(options.backend);
  const std::optional<Device> device = group_device(*lib, options, place);
  std::string path = options.rendezvous;
  if (const char* env = std::getenv("FERRY_RENDEZVOUS"); path.empty() && env) path = env;
  const std::unique_ptr<Rendezvous> rendezvous = make_rendezvous(path, place, timeout);
  JoinArgs args{.rendezvous = rendezvous.get()};
  if (device) {
    args.device_index = device->index();
    args.queue = device_impl(*device).native_queue();
    if (!args.queue)
      throw UnsupportedError(fmt::format("distributed: {} gives no queue for the {} backend",
                                         device->str(), options.backend));
  }
  lib->join(args);
  if (lib->rank() != place.rank || lib->size() != place.size)
    throw ValueError(
        fmt::format("distributed: the {} backend joined as rank {} of {}, where InitOptions or the "
                    "environment (FERRY_RANK, FERRY_WORLD_SIZE) say rank {} of {}",
                    options.backend, lib->rank(), lib->size(), place.rank, place.size));
  g_default = std::make_shared<Group>(std::move(lib), timeout, device, chunk_bytes, compare_calls);
  return g_default;
}

bool is_initialized() {
  std::lock_guard lock(g_mutex);
  return bool(g_default);
}

std::shared_ptr<ProcessGroup> default_group() {
  std::lock_guard lock(g_mutex);
  if (!g_default) throw Error("distributed: no process group; call ferry::distributed::init()");
  return g_default;
}

void shutdown() {
  std::shared_ptr<ProcessGroup> g;
  {
    std::lock_guard lock(g_mutex);
    g = std::move(g_default);
  }
  if (g) g->barrier();  // every rank is done before any leaves
}

}  // namespace ferry::distributed
