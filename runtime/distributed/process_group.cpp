// runtime/distributed/process_group.cpp — ferry::distributed's process group over a backend
// module's Collectives (Note [Process groups] in ferry/distributed.hpp): argument checks, the
// cross-rank check of each call, staging through host memory, the worker thread that runs the
// collectives in order, and the timeout that ends a job a peer left hanging.
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "distributed/collectives.hpp"
#include "ferry/autograd.hpp"
#include "ferry/backend.hpp"
#include "ferry/distributed.hpp"
#include "ferry/ferry.hpp"
#include "ferry/registry.hpp"

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

class WorkState {
 public:
  WorkState(std::string what, std::chrono::milliseconds timeout, int rank, Collectives* lib)
      : what_(std::move(what)), timeout_(timeout), rank_(rank), lib_(lib) {}

  void finish(std::exception_ptr error) {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
      error_ = std::move(error);
    }
    cv_.notify_all();
  }
  bool done() const {
    std::lock_guard lock(mutex_);
    return done_;
  }
  void wait() const {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, timeout_, [&] { return done_; })) {
      // A peer died or hangs in another call: no rank may wait forever.
      std::fprintf(stderr,
                   "ferry.distributed: rank %d: %s did not complete within %.1f s (a peer may "
                   "have died, hung, or called something else); ending the job\n",
                   rank_, what_.c_str(), double(timeout_.count()) / 1000.0);
      std::fflush(stderr);
      lib_->abort_job(3);
    }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::string what_;
  std::chrono::milliseconds timeout_;
  int rank_;
  Collectives* lib_;
};

void Work::wait() const {
  if (state_) state_->wait();
}
bool Work::is_completed() const { return !state_ || state_->done(); }

namespace {

enum class Kind : std::int64_t {
  allreduce,
  broadcast,
  allgather,
  reduce_scatter,
  all_to_all,
  barrier,
  send
};
constexpr const char* kKindNames[] = {"allreduce",  "broadcast", "allgather", "reduce_scatter",
                                      "all_to_all", "barrier",   "send"};

// What a rank was asked, compared across the ranks before each collective.
struct Call {
  std::int64_t kind = 0, dtype = 0, count = 0, arg = 0;  // arg: the op, or the root
  bool operator==(const Call&) const = default;
  std::string str() const {
    const Kind k = Kind(kind);
    std::string s = kKindNames[kind];
    if (k == Kind::barrier) return s;
    s += fmt::format(" of {} {} elements", count, dtype_name(DType(dtype)));
    if (k == Kind::allreduce || k == Kind::reduce_scatter)
      s += fmt::format(" ({})", reduce_op_name(ReduceOp(arg)));
    if (k == Kind::broadcast) s += fmt::format(" from rank {}", arg);
    return s;
  }
};

std::chrono::milliseconds timeout_from(const InitOptions& o) {
  if (o.timeout.count() > 0) return o.timeout;
  if (const char* env = std::getenv("FERRY_DISTRIBUTED_TIMEOUT")) {
    char* end = nullptr;
    const double s = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(s > 0))
      throw ValueError(fmt::format(
          "FERRY_DISTRIBUTED_TIMEOUT must be a positive number of seconds, got '{}'", env));
    return std::chrono::milliseconds(std::int64_t(s * 1000));
  }
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
      "it where {} was found at build time{}",
      name, file, fmt::join(tried, ", "), name == "mpi" ? "Open MPI (libopenmpi-dev)" : name,
      name == "mpi" || name == "nccl" ? "" : " (known backends: mpi)"));
}

void require(bool ok, const std::string& message) {
  if (!ok) throw ShapeError(message);
}

bool is_16_bit_float(DType dt) { return dt == DType::f16 || dt == DType::bf16; }

class Group final : public ProcessGroup {
 public:
  Group(std::unique_ptr<Collectives> lib, std::chrono::milliseconds timeout)
      : lib_(std::move(lib)), timeout_(timeout), worker_([this] { run(); }) {}
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

  Work allreduce_async(const Tensor& t, ReduceOp op) override {
    check_reduction("allreduce", t.dtype(), op);
    return issue(
        Call{std::int64_t(Kind::allreduce), std::int64_t(t.dtype()), t.numel(), std::int64_t(op)},
        [this, t, op] {
          reduce(t, op, [&](void* p, std::size_t n, DType dt, ReduceOp o) {
            lib_->allreduce(p, n, dt, o);
          });
        });
  }
  Work broadcast_async(const Tensor& t, int root) override {
    check_rank("broadcast", root);
    return issue(Call{std::int64_t(Kind::broadcast), std::int64_t(t.dtype()), t.numel(), root},
                 [this, t, root] {
                   Tensor h = host(t);
                   lib_->broadcast(bytes(h), nbytes(h), root);
                   write_back(t, h);
                 });
  }
  Work allgather_async(const Tensor& out, const Tensor& in) override {
    check_blocks("allgather", out, in);
    return issue(Call{std::int64_t(Kind::allgather), std::int64_t(in.dtype()), in.numel(), 0},
                 [this, out, in] {
                   Tensor hi = host(in), ho = host(out, false);
                   lib_->allgather(bytes(hi), bytes(ho), nbytes(hi));
                   write_back(out, ho);
                 });
  }
  Work reduce_scatter_async(const Tensor& out, const Tensor& in, ReduceOp op) override {
    check_blocks("reduce_scatter", in, out);
    check_reduction("reduce_scatter", in.dtype(), op);
    return issue(Call{std::int64_t(Kind::reduce_scatter), std::int64_t(in.dtype()), out.numel(),
                      std::int64_t(op)},
                 [this, out, in, op] {
                   const DType wide = is_16_bit_float(in.dtype()) ? DType::f32 : in.dtype();
                   Tensor hi = host(in, true, wide), ho = host(out, false, wide);
                   lib_->reduce_scatter(bytes(hi), bytes(ho), std::size_t(ho.numel()), ho.dtype(),
                                        library_op(in.dtype(), op));
                   finish_reduction(ho, op);
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
    return issue(Call{std::int64_t(Kind::all_to_all), std::int64_t(in.dtype()), in.numel(), 0},
                 [this, out, in] {
                   Tensor hi = host(in), ho = host(out, false);
                   lib_->all_to_all(bytes(hi), bytes(ho), nbytes(hi) / std::size_t(size()));
                   write_back(out, ho);
                 });
  }
  Work barrier_async() override {
    return issue(Call{std::int64_t(Kind::barrier), 0, 0, 0}, [this] { lib_->barrier(); });
  }
  Work send_async(const Tensor& t, int dst, int tag) override {
    check_peer("send", dst);
    const Call call{std::int64_t(Kind::send), std::int64_t(t.dtype()), t.numel(), tag};
    return issue_local(fmt::format("send to rank {} (tag {})", dst, tag),
                       [this, t, dst, tag, call] {
                         lib_->send(&call, sizeof call, dst, tag);
                         Tensor h = host(t);
                         lib_->send(bytes(h), nbytes(h), dst, tag);
                       });
  }
  Work recv_async(const Tensor& t, int src, int tag) override {
    check_peer("recv", src);
    return issue_local(fmt::format("recv from rank {} (tag {})", src, tag), [this, t, src, tag] {
      Call sent;
      lib_->recv(&sent, sizeof sent, src, tag);
      const Call want{std::int64_t(Kind::send), std::int64_t(t.dtype()), t.numel(), tag};
      if (!(sent == want)) {
        // Take the message all the same, so that the next one on this tag is read whole.
        std::vector<char> drain(std::size_t(sent.count) * dtype_size(DType(sent.dtype)));
        lib_->recv(drain.data(), drain.size(), src, tag);
        throw DistributedError(
            fmt::format("recv: rank {} expected {} elements of {} from rank {} (tag {}), which "
                        "sent {} elements of {}",
                        rank(), want.count, dtype_name(t.dtype()), src, tag, sent.count,
                        dtype_name(DType(sent.dtype))));
      }
      Tensor h = host(t, false);
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
  // t's values (when `read`) in contiguous host memory of dtype `dt`: t itself when it already
  // is that, else a copy.
  static Tensor host(const Tensor& t, bool read = true, std::optional<DType> dt = {}) {
    const DType want = dt.value_or(t.dtype());
    if (t.device().is_cpu() && t.is_contiguous() && t.dtype() == want) {
      synchronize(t.device());
      return t;
    }
    if (!read) return empty(t.sizes(), {.dtype = want});
    return t.to(Device::cpu(), want).contiguous();
  }
  static void write_back(const Tensor& t, const Tensor& h) {
    if (!h.is_same(t)) const_cast<Tensor&>(t).copy_(h);
    synchronize(t.device());
  }
  static void* bytes(const Tensor& h) {
    return static_cast<char*>(h.storage()->buffer().host_ptr()) +
           h.storage_offset() * std::int64_t(dtype_size(h.dtype()));
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
  // An in-place reduction of t: 16-bit floats in f32, rounded once at the end.
  void reduce(const Tensor& t, ReduceOp op, const Reducer& run) const {
    const DType wide = is_16_bit_float(t.dtype()) ? DType::f32 : t.dtype();
    Tensor h = host(t, true, wide);
    run(bytes(h), std::size_t(h.numel()), wide, library_op(t.dtype(), op));
    finish_reduction(h, op);
    write_back(t, h);
  }

  // ---- the queue ----
  // A collective: the ranks' calls are compared first, then `body` runs.
  Work issue(Call call, std::function<void()> body) {
    return enqueue(call.str(), [this, call, body = std::move(body)] {
      std::vector<Call> all(static_cast<std::size_t>(size()));
      lib_->allgather(&call, all.data(), sizeof call);
      for (const Call& c : all)
        if (!(c == call)) {
          std::string calls;
          for (std::size_t r = 0; r < all.size(); ++r)
            calls += fmt::format("{}rank {}: {}", r ? "; " : "", r, all[r].str());
          throw DistributedError(
              fmt::format("distributed: the ranks called different collectives ({})", calls));
        }
      body();
    });
  }
  Work issue_local(std::string what, std::function<void()> body) {
    return enqueue(std::move(what), std::move(body));
  }
  Work enqueue(std::string what, std::function<void()> body) {
    std::shared_ptr<WorkState> state;
    {
      std::lock_guard lock(mutex_);
      state = std::make_shared<WorkState>(
          fmt::format("{} (call #{} of this rank)", what, ++issued_), timeout_, rank(), lib_.get());
      queue_.emplace_back(state, std::move(body));
    }
    cv_.notify_all();
    return Work(state);
  }
  void run() {
    NoGradGuard no_grad;  // collectives write tensors in place, outside autograd
    for (;;) {
      std::pair<std::shared_ptr<WorkState>, std::function<void()>> job;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything issued has run
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      try {
        job.second();
        job.first->finish(nullptr);
      } catch (...) {
        job.first->finish(std::current_exception());
      }
    }
  }

  std::unique_ptr<Collectives> lib_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<WorkState>, std::function<void()>>> queue_;
  bool stopping_ = false;
  std::uint64_t issued_ = 0;
  std::thread worker_;  // last: starts once the rest is built
};

std::mutex g_mutex;
std::shared_ptr<ProcessGroup> g_default;

}  // namespace

std::shared_ptr<ProcessGroup> init(const InitOptions& options) {
  std::lock_guard lock(g_mutex);
  if (g_default)
    throw Error(fmt::format("distributed::init: already initialized (backend {}, rank {} of {})",
                            g_default->backend(), g_default->rank(), g_default->size()));
  const auto timeout = timeout_from(options);
  g_default = std::make_shared<Group>(open_backend(options.backend), timeout);
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
