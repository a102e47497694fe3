// tests/distributed/test_distributed.cpp — ferry::distributed's collectives, run by every rank
// of an mpirun job (tests/distributed/CMakeLists.txt: 2 and 3 ranks over loopback TCP), on
// the CPU and on vulkan:0 where it exists, against closed forms: rank r's element i is a small
// integer f(i, r), so sums, products, minima and maxima are exact in every dtype and the
// expected value is computed here from the formula. The Faults tests end the job on purpose
// and run in entries of their own, which check mpirun's output.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ferry/distributed.hpp"
#include "ferry/ferry.hpp"
#include "ferry/nn.hpp"
#include "ferry/nn/parallel.hpp"
#include "ferry/optim.hpp"
#include "ferry/safetensors.hpp"
#include "ferry/transfer.hpp"

namespace {

namespace dist = ferry::distributed;
using dist::ReduceOp;
using ferry::DType;
using ferry::Tensor;

dist::ProcessGroup& group() { return *dist::default_group(); }

// The CPU, and vulkan:0 and cuda:0 where they exist (the ranks share them); rank 0 says which.
std::vector<std::string> devices() {
  static const std::vector<std::string> d = [] {
    std::vector<std::string> v{"cpu"};
    if (ferry::is_available("vulkan:0")) v.push_back("vulkan:0");
    if (ferry::is_available("cuda:0")) v.push_back("cuda:0");
    if (group().rank() == 0)
      std::printf("collectives on: %s\n", fmt::format("{}", fmt::join(v, ", ")).c_str());
    return v;
  }();
  return d;
}

// Rank r's element i: 0..3 for most dtypes (products stay within i8 for 3 ranks), 0 or 1 for bool.
double value(std::int64_t i, int r, DType dt) {
  if (dt == DType::boolean) return double((i + r) % 2 == 0 || i % 5 == 0);
  return double((i * 7 + r * 3) % 4);
}

Tensor rank_tensor(std::int64_t n, int r, DType dt, const std::string& device) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[std::size_t(i)] = value(i, r, dt);
  return ferry::tensor(v).to(dt).to(ferry::Device(device));
}

double reduce(std::int64_t i, DType dt, ReduceOp op, int ranks) {
  double acc = value(i, 0, dt);
  for (int r = 1; r < ranks; ++r) {
    const double v = value(i, r, dt);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        acc += v;
        break;
      case ReduceOp::product:
        acc *= v;
        break;
      case ReduceOp::min:
        acc = std::min(acc, v);
        break;
      case ReduceOp::max:
        acc = std::max(acc, v);
        break;
    }
  }
  if (op == ReduceOp::avg) acc /= ranks;
  if (dt == DType::boolean) acc = acc != 0;  // sum: or; product: and
  return acc;
}

void expect_values(const Tensor& t, const std::vector<double>& want, const std::string& what) {
  const auto got = t.to(DType::f64).to_vector<double>();
  ASSERT_EQ(got.size(), want.size()) << what;
  // avg's thirds round in the 16-bit floats; everything else is exact.
  const double tol = t.dtype() == DType::f16 ? 1e-3 : t.dtype() == DType::bf16 ? 8e-3 : 1e-6;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * std::fabs(want[i])) << what << " element " << i;
}

TEST(Collectives, AllreduceEveryDtypeAndOp) {
  const int R = group().size(), me = group().rank();
  const std::int64_t n = 45;  // past one 40-byte chunk for every dtype (the np3 entry's)
  for (const std::string& device : devices())
    for (const DType dt : ferry::kAllDTypes)
      for (const ReduceOp op :
           {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max, ReduceOp::product}) {
        const std::string what = device + " " + std::string(ferry::dtype_name(dt)) + " " +
                                 std::string(dist::reduce_op_name(op));
        Tensor t = rank_tensor(n, me, dt, device);
        if (op == ReduceOp::avg && !ferry::is_floating(dt)) {
          EXPECT_THROW(group().allreduce(t, op), ferry::DTypeError) << what;
          continue;
        }
        group().allreduce(t, op);
        EXPECT_EQ(t.device(), ferry::Device(device));
        std::vector<double> want(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) want[std::size_t(i)] = reduce(i, dt, op, R);
        expect_values(t, want, what);
      }
}

TEST(Collectives, BroadcastAllgatherReduceScatterAllToAll) {
  const int R = group().size(), me = group().rank();
  for (const std::string& device : devices())
    for (const DType dt : ferry::kAllDTypes) {
      const std::string what = device + " " + std::string(ferry::dtype_name(dt));
      const ferry::TensorOptions on{.dtype = dt, .device = ferry::Device(device)};
      // Sizes past 40 bytes for every dtype, so that the np3 entry's 40-byte chunks (Note
      // [Chunked staging]) split each device collective into several, the last one short.
      for (int root = 0; root < R; ++root) {
        Tensor t = rank_tensor(45, me, dt, device);
        group().broadcast(t, root);
        expect_values(t, rank_tensor(45, root, dt, "cpu").to(DType::f64).to_vector<double>(),
                      what + " broadcast from " + std::to_string(root));
      }
      // allgather: out[r] is rank r's tensor, here a [3, 15] non-contiguous view's worth.
      Tensor in = rank_tensor(45, me, dt, device).reshape({15, 3}).t();
      Tensor out = ferry::zeros({R, 3, 15}, on);
      group().allgather(out, in);
      std::vector<double> want;
      for (int r = 0; r < R; ++r) {
        const auto v = rank_tensor(45, r, dt, "cpu").reshape({15, 3}).t().contiguous();
        for (double x : v.to(DType::f64).to_vector<double>()) want.push_back(x);
      }
      expect_values(out, want, what + " allgather");
      // ... into a non-contiguous output: out[r] is written through a copy.
      Tensor out_t = ferry::zeros({3, 15, R}, on).permute({2, 0, 1});
      group().allgather(out_t, in);
      expect_values(out_t, want, what + " allgather into a permuted output");
      // reduce_scatter: rank r gets the sum over ranks of their block r.
      Tensor blocks = rank_tensor(R * 43, me, dt, device).reshape({R, 43});
      Tensor mine = ferry::zeros({43}, on);
      group().reduce_scatter(mine, blocks, ReduceOp::sum);
      want.assign(43, 0);
      for (std::int64_t i = 0; i < 43; ++i)
        want[std::size_t(i)] = reduce(me * 43 + i, dt, ReduceOp::sum, R);
      expect_values(mine, want, what + " reduce_scatter");
      // all_to_all: out[s] is rank s's in[me].
      Tensor a2a = ferry::zeros({R, 41}, on);
      group().all_to_all(a2a, rank_tensor(R * 41, me, dt, device).reshape({R, 41}));
      want.clear();
      for (int s = 0; s < R; ++s)
        for (std::int64_t i = 0; i < 41; ++i) want.push_back(value(me * 41 + i, s, dt));
      expect_values(a2a, want, what + " all_to_all");
    }
  group().barrier();
}

TEST(Collectives, SendRecvAroundTheRing) {
  const int R = group().size(), me = group().rank();
  for (const std::string& device : devices()) {
    const int next = (me + 1) % R, prev = (me + R - 1) % R;
    Tensor mine = rank_tensor(45, me, DType::f32, device);  // in chunks in the np3 entry
    Tensor got = ferry::zeros({45}, {.device = ferry::Device(device)});
    // Even ranks send first: blocking sends on every rank at once could wait on each other.
    if (me % 2 == 0) {
      group().send(mine, next, 7);
      group().recv(got, prev, 7);
    } else {
      group().recv(got, prev, 7);
      group().send(mine, next, 7);
    }
    expect_values(got, rank_tensor(45, prev, DType::f64, "cpu").to_vector<double>(),
                  device + " recv");
  }
}

// Odd ranks on vulkan:0, even ones on the CPU: a device tensor is sent in chunks and a CPU one
// whole, and each receiver takes the messages as its sender made them (the header says how).
TEST(Collectives, SendRecvBetweenTheCpuAndADeviceInChunks) {
  if (!ferry::is_available("vulkan:0")) GTEST_SKIP() << "needs vulkan:0 beside the CPU";
  const int R = group().size(), me = group().rank();
  if (R % 2 == 1 && me == R - 1) {  // the ring needs an even count of ranks: the last one waits
    group().barrier();
    return;
  }
  const int peer = me ^ 1;  // pairs (0, 1), (2, 3), ...
  const ferry::Device here = me % 2 ? ferry::Device("vulkan:0") : ferry::Device::cpu();
  // Two chunks and a short third of the entry's chunk size (40 bytes at np3, 4 MiB by default).
  const char* chunk = std::getenv("FERRY_DISTRIBUTED_CHUNK");
  const std::int64_t n = 2 * (chunk ? std::atoll(chunk) : std::int64_t(4) << 20) / 4 + 3;
  const auto values = [&](int r) {
    return ferry::arange(double(n), {.dtype = DType::f32}) * double(r + 1);
  };
  Tensor got = ferry::zeros({n}, {.device = here});
  if (me % 2 == 0) {
    group().send(values(me).to(here), peer, 3);
    group().recv(got, peer, 3);
  } else {
    group().recv(got, peer, 3);
    group().send(values(me).to(here), peer, 3);
  }
  EXPECT_EQ(ferry::max(ferry::abs(got.cpu() - values(peer))).item<float>(), 0.0f);
  // A mismatched recv takes the chunks all the same: the next message arrives whole.
  Tensor wrong = ferry::zeros({n - 1}, {.device = here});
  if (me % 2 == 1) {
    group().send(values(me).to(here), peer, 4);
    group().send(ferry::full({2}, 7.0), peer, 4);
  } else {
    EXPECT_THROW(group().recv(wrong, peer, 4), dist::DistributedError);
    Tensor next = ferry::zeros({2});
    group().recv(next, peer, 4);
    EXPECT_EQ(next.to_vector<float>(), (std::vector<float>{7, 7}));
  }
  group().barrier();
}

TEST(Collectives, AsyncWorkCompletesInIssueOrder) {
  const int R = group().size(), me = group().rank();
  std::vector<Tensor> ts;
  std::vector<dist::Work> works;
  for (int k = 0; k < 6; ++k) {
    ts.push_back(ferry::full({1000}, double(me + k)));
    works.push_back(group().allreduce_async(ts.back()));
  }
  for (int k = 5; k >= 0; --k) {  // waited for out of order
    works[std::size_t(k)].wait();
    EXPECT_TRUE(works[std::size_t(k)].is_completed());
    const double want = double(R * k) + double(R * (R - 1)) / 2;
    EXPECT_EQ(ts[std::size_t(k)].to_vector<float>()[999], want);
  }
}

TEST(Collectives, MismatchedCallsRaiseOnEveryRankAndTheGroupGoesOn) {
  const int me = group().rank();
  Tensor t = ferry::ones({10 + me});  // rank-dependent sizes
  try {
    group().allreduce(t);
    ADD_FAILURE() << "no error for different sizes";
  } catch (const dist::DistributedError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank 0: allreduce of 10 f32 elements (sum)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 1: allreduce of 11 f32 elements (sum)"), std::string::npos) << msg;
  }
  Tensor d = ferry::ones({4}, {.dtype = me == 0 ? DType::f32 : DType::f64});
  EXPECT_THROW(group().broadcast(d, 0), dist::DistributedError);
  Tensor ok = ferry::ones({3});
  group().allreduce(ok);
  EXPECT_EQ(ok.to_vector<float>()[0], float(group().size()));
}

TEST(Collectives, ABlockingCallWaitsForTheAsyncWorkIssuedBeforeIt) {
  const int R = group().size(), me = group().rank();
  for (const std::string& device : devices()) {
    // A blocking call runs on this thread only where nothing is queued or running: here it
    // must queue behind the async reductions, so when it returns they have completed.
    std::vector<Tensor> big;
    std::vector<dist::Work> works;
    for (int k = 0; k < 3; ++k) {
      big.push_back(ferry::full({1 << 14}, double(me + k), {.device = ferry::Device(device)}));
      works.push_back(group().allreduce_async(big.back()));
    }
    Tensor small = ferry::full({3}, double(me), {.device = ferry::Device(device)});
    group().allreduce(small, ReduceOp::max);
    for (int k = 0; k < 3; ++k) {
      EXPECT_TRUE(works[std::size_t(k)].is_completed()) << device << " work " << k;
      EXPECT_EQ(big[std::size_t(k)].to_vector<float>()[7], float(R * k + R * (R - 1) / 2))
          << device;
    }
    EXPECT_EQ(small.to_vector<float>()[2], float(R - 1)) << device;
    // Then, with nothing queued, blocking calls of every kind one after another.
    Tensor b = ferry::full({4}, double(me + 1), {.device = ferry::Device(device)});
    group().broadcast(b, R - 1);
    EXPECT_EQ(b.to_vector<float>()[3], float(R)) << device;
    group().barrier();
  }
}

// A profile shows each collective as a range named by its call, on the thread that ran it: a
// blocking call with nothing queued runs on the caller's thread, inside the caller's own range;
// an async one on the group's thread (Note [Process groups]).
TEST(Collectives, AProfileShowsEachCollectiveOnTheThreadThatRanIt) {
  namespace prof = ferry::profiler;
  Tensor t = ferry::ones({256});
  prof::Scope scope;
  {
    auto caller = prof::range("caller");
    group().allreduce(t);
  }
  group().allreduce_async(t).wait();
  const prof::Profile p = scope.stop();
  const prof::Event* caller = nullptr;
  std::vector<const prof::Event*> calls;
  for (const prof::Event& e : p.events()) {
    if (e.kind != prof::EventKind::range) continue;
    if (e.name == "caller") caller = &e;
    if (e.name == "mpi allreduce of 256 f32 elements (sum)") calls.push_back(&e);
  }
  ASSERT_NE(caller, nullptr);
  ASSERT_EQ(calls.size(), 2u) << "one range per allreduce";
  std::sort(calls.begin(), calls.end(),
            [](const prof::Event* a, const prof::Event* b) { return a->begin_ns < b->begin_ns; });
  EXPECT_EQ(calls[0]->thread, caller->thread) << "the blocking call ran on the caller's thread";
  EXPECT_GE(calls[0]->begin_ns, caller->begin_ns);
  EXPECT_LE(calls[0]->end_ns, caller->end_ns);
  EXPECT_NE(calls[1]->thread, caller->thread) << "the async call ran on the group's thread";
  EXPECT_EQ(t.to_vector<float>()[255], float(group().size() * group().size()));
}

TEST(Collectives, CallsGoUncomparedWhenSwitchedOff) {
  const int R = group().size(), me = group().rank();
  ASSERT_TRUE(group().compare_calls());  // the default
  group().set_compare_calls(false);      // every rank, between the same two calls
  Tensor t = ferry::full({5}, double(me));
  group().allreduce(t);
  EXPECT_EQ(t.to_vector<float>()[4], float(R * (R - 1) / 2));
  // Not compared, a broadcast of f32 to i32 of the same size moves rank 0's bits as they are
  // (undefined as an API contract; here it shows that no comparison ran).
  Tensor d = ferry::ones({4}, {.dtype = me == 0 ? DType::f32 : DType::i32});
  EXPECT_NO_THROW(group().broadcast(d, 0));
  if (me != 0) EXPECT_EQ(d.to_vector<std::int32_t>()[0], 0x3f800000);  // 1.0f
  group().set_compare_calls(true);
  EXPECT_THROW(group().broadcast(d, 0), dist::DistributedError);
}

// Rank 0's tensor on the CPU, the others' on vulkan:0: a collective larger than a chunk would
// go to the library whole on rank 0 and in chunks elsewhere, so the compared calls differ and
// name it (Note [Chunked staging]); one within a chunk goes whole everywhere and works.
TEST(Collectives, RanksThatStageDifferentlyAreNamed) {
  if (!ferry::is_available("vulkan:0")) GTEST_SKIP() << "needs vulkan:0 beside the CPU";
  const int R = group().size(), me = group().rank();
  const ferry::Device here = me == 0 ? ferry::Device::cpu() : ferry::Device("vulkan:0");
  Tensor small = ferry::full({4}, 1.0, {.device = here});
  group().allreduce(small);
  EXPECT_EQ(small.cpu().to_vector<float>()[3], float(R));
  // Past one chunk at the default 4 MiB and at the np3 entry's 40 bytes.
  Tensor big = ferry::full({(std::int64_t(1) << 20) + 1}, 1.0, {.device = here});
  try {
    group().allreduce(big);
    ADD_FAILURE() << "an allreduce staged whole on one rank and in chunks on another ran";
  } catch (const dist::DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("staged in chunks of"), std::string::npos) << e.what();
  }
  group().barrier();
}

TEST(Collectives, BadArgumentsAreTypedErrors) {
  const int R = group().size();
  Tensor t = ferry::ones({4});
  EXPECT_THROW(group().broadcast(t, R), ferry::ValueError);
  EXPECT_THROW(group().send(t, group().rank()), ferry::ValueError);
  Tensor wrong = ferry::zeros({R + 1, 4});
  EXPECT_THROW(group().allgather(wrong, t), ferry::ShapeError);
  EXPECT_THROW(group().all_to_all(t, t), ferry::ShapeError);
  EXPECT_THROW(dist::init(), ferry::Error);  // already initialized
  group().barrier();
}

// ---- DistributedDataParallel ----

std::shared_ptr<ferry::nn::Sequential> mlp(std::uint64_t seed, const std::string& device) {
  ferry::manual_seed(seed);
  auto m = std::make_shared<ferry::nn::Sequential>(std::make_shared<ferry::nn::Linear>(6, 16),
                                                   std::make_shared<ferry::nn::Tanh>(),
                                                   std::make_shared<ferry::nn::Linear>(16, 3));
  m->to(ferry::Device(device));
  return m;
}

// Rank r's part of step k's batch: rows [r * 4, r * 4 + 4) of a batch every rank can make.
std::pair<Tensor, Tensor> batch(int step, int ranks, const std::string& device) {
  ferry::manual_seed(1000 + std::uint64_t(step));
  const ferry::Device dev(device);
  return {ferry::randn({4 * ranks, 6}).to(dev), ferry::randn({4 * ranks, 3}).to(dev)};
}

void expect_same_parameters(const ferry::nn::Module& got, const ferry::nn::Module& want,
                            const std::string& what) {
  const auto g = got.parameters(), w = want.parameters();
  ASSERT_EQ(g.size(), w.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    const auto a = g[i].to_vector<float>(), b = w[i].to_vector<float>();
    for (std::size_t j = 0; j < a.size(); ++j)
      ASSERT_NEAR(a[j], b[j], 1e-6 * (1 + std::fabs(b[j]))) << what << " parameter " << i;
  }
}

using MakeOptimizer =
    std::function<std::unique_ptr<ferry::optim::Optimizer>(const std::vector<Tensor>&)>;

// Every optimizer keeps the replicas equal: each rank's state is built from the same averaged
// gradients. (Adam's eps is large so that an element whose gradient is near zero cannot turn
// rounding in the average into a different step.)
const std::vector<std::pair<std::string, MakeOptimizer>>& optimizers() {
  static const std::vector<std::pair<std::string, MakeOptimizer>> o = {
      {"SGD",
       [](const std::vector<Tensor>& p) {
         return std::make_unique<ferry::optim::SGD>(
             p, ferry::optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
       }},
      {"Adam",
       [](const std::vector<Tensor>& p) {
         return std::make_unique<ferry::optim::Adam>(
             p, ferry::optim::AdamOptions{.lr = 0.01, .eps = 1e-3});
       }},
      {"AdamW", [](const std::vector<Tensor>& p) {
         return std::make_unique<ferry::optim::AdamW>(
             p, ferry::optim::AdamWOptions{.lr = 0.01, .eps = 1e-3, .weight_decay = 0.1});
       }}};
  return o;
}

// DDP on rank r's rows of each step's batch against one process on the whole batch: `steps`
// steps, parameters compared after each. Even steps clear the gradients (set to none: DDP
// copies each into its bucket), odd steps zero them in place (they stay the buckets' views).
void train_and_compare(ferry::nn::DistributedDataParallel& ddp, ferry::nn::Module& whole,
                       ferry::optim::Optimizer& opt, ferry::optim::Optimizer& ref,
                       const std::string& device, int first, int steps, const std::string& what) {
  const int R = group().size(), me = group().rank();
  for (int step = first; step < first + steps; ++step) {
    const auto [x, y] = batch(step, R, device);
    opt.zero_grad(step % 2 == 0);
    ferry::nn::functional::mse_loss(ddp.forward(x.narrow(0, me * 4, 4)), y.narrow(0, me * 4, 4))
        .backward();
    opt.step();
    ref.zero_grad(step % 2 == 0);
    ferry::nn::functional::mse_loss(whole.forward(x), y).backward();
    ref.step();
    expect_same_parameters(*ddp.module(), whole, what + " step " + std::to_string(step));
  }
}

TEST(DistributedDataParallel, EqualsOneProcessOnTheWholeBatch) {
  const int me = group().rank();
  for (const std::string& device : devices())
    for (const double cap_mb : {25.0, 0.0002})  // one bucket; a bucket per parameter or two
      for (const auto& [name, make] : optimizers()) {
        if (cap_mb < 1 && name != "SGD") continue;  // the buckets do not depend on the optimizer
        const std::string what = device + " " + name + " bucket_cap_mb " + std::to_string(cap_mb);
        // Each rank starts from its own seed: the wrapper makes every replica rank 0's.
        auto ddp = std::make_shared<ferry::nn::DistributedDataParallel>(
            mlp(7 + std::uint64_t(me), device),
            ferry::nn::DistributedDataParallelOptions{.bucket_cap_mb = cap_mb});
        auto whole = mlp(7, device);  // rank 0's start, trained on the whole batch
        // In reverse registration order: 2.bias (12 bytes), 2.weight (192), 0.bias (64),
        // 0.weight (384); a cap of 209 bytes takes the first two (Note [Arena packing]).
        using Buckets = std::vector<std::vector<std::size_t>>;
        const Buckets want = cap_mb < 1 ? Buckets{{0, 1}, {2}, {3}} : Buckets{{0, 1, 2, 3}};
        EXPECT_EQ(ddp->buckets(), want) << what;
        auto opt = make(ddp->parameters());
        auto ref = make(whole->parameters());
        train_and_compare(*ddp, *whole, *opt, *ref, device, 0, 4, what);
      }
  // A cap beyond any byte count (here infinite) is no cap: one bucket.
  const ferry::nn::DistributedDataParallel uncapped(
      mlp(7, "cpu"), ferry::nn::DistributedDataParallelOptions{
                         .bucket_cap_mb = std::numeric_limits<double>::infinity()});
  EXPECT_EQ(uncapped.buckets(), (std::vector<std::vector<std::size_t>>{{0, 1, 2, 3}}));
}

// A model converted to channels-last before it is wrapped: each gradient is its bucket's view
// in the parameter's layout (PyTorch's reducer lays them so), the fused update takes it as it
// is (fused = true raises where it cannot), and training equals one process's.
TEST(DistributedDataParallel, AChannelsLastModelKeepsItsLayoutInTheBuckets) {
  const int R = group().size(), me = group().rank();
  const auto cnn = [](std::uint64_t seed) {
    ferry::manual_seed(seed);
    auto m = std::make_shared<ferry::nn::Sequential>(
        std::make_shared<ferry::nn::Conv2d>(2, 4, ferry::ConvSizes{3}, ferry::ConvSizes{1}, 1),
        std::make_shared<ferry::nn::Tanh>(),
        std::make_shared<ferry::nn::Conv2d>(4, 3, ferry::ConvSizes{3}, ferry::ConvSizes{1}, 1));
    m->to(ferry::MemoryFormat::channels_last);
    return m;
  };
  ferry::nn::DistributedDataParallel ddp(cnn(31 + std::uint64_t(me)));
  auto whole = cnn(31);
  const ferry::optim::SGDOptions options{.lr = 0.1, .momentum = 0.9, .fused = true};
  ferry::optim::SGD opt(ddp.parameters(), options), ref(whole->parameters(), options);
  for (int step = 0; step < 3; ++step) {
    ferry::manual_seed(2000 + std::uint64_t(step));
    const Tensor x = ferry::randn({2 * R, 2, 5, 4}).contiguous(ferry::MemoryFormat::channels_last);
    const Tensor y = ferry::randn({2 * R, 3, 5, 4});
    opt.zero_grad(step % 2 == 0);
    ferry::nn::functional::mse_loss(ddp.forward(x.narrow(0, me * 2, 2)), y.narrow(0, me * 2, 2))
        .backward();
    for (const Tensor& p : ddp.parameters())
      EXPECT_EQ(p.grad().is_contiguous(ferry::MemoryFormat::channels_last), p.dim() == 4)
          << "step " << step;
    ASSERT_NO_THROW(opt.step());
    ref.zero_grad(step % 2 == 0);
    ferry::nn::functional::mse_loss(whole->forward(x), y).backward();
    ref.step();
    expect_same_parameters(*ddp.module(), *whole, "channels-last step " + std::to_string(step));
  }
}

// migrate() moves the wrapped replica, its gradients and the optimizer's state in place: the
// buckets follow the parameters to the new device, with the gradients (their views) or, where
// the gradients were cleared, at the next backward.
TEST(DistributedDataParallel, TrainingGoesOnAfterMigrate) {
  if (!ferry::is_available("vulkan:0")) GTEST_SKIP() << "no vulkan:0 to migrate to";
  const int me = group().rank();
  auto ddp = std::make_shared<ferry::nn::DistributedDataParallel>(
      mlp(11 + std::uint64_t(me), "cpu"),
      ferry::nn::DistributedDataParallelOptions{.bucket_cap_mb = 0.0002});
  auto whole = mlp(11, "cpu");
  ferry::optim::Adam opt(ddp->parameters(), {.lr = 0.01, .eps = 1e-3});
  ferry::optim::Adam ref(whole->parameters(), {.lr = 0.01, .eps = 1e-3});
  train_and_compare(*ddp, *whole, opt, ref, "cpu", 0, 2, "cpu");
  ferry::migrate(*ddp, opt, ferry::Device("vulkan:0"));
  ferry::migrate(*whole, ref, ferry::Device("vulkan:0"));
  EXPECT_EQ(ddp->module()->parameters()[0].device().str(), "vulkan:0");
  train_and_compare(*ddp, *whole, opt, ref, "vulkan:0", 2, 2, "after migrate to vulkan:0");
  opt.zero_grad();
  ref.zero_grad();
  ferry::migrate(*ddp, opt, ferry::Device::cpu());
  ferry::migrate(*whole, ref, ferry::Device::cpu());
  train_and_compare(*ddp, *whole, opt, ref, "cpu", 4, 2, "back on cpu, gradients cleared");
}

// broadcast_buffers: each forward starts from rank 0's buffers, so the running statistics that
// every rank moved with its own batch are rank 0's again at the next forward (in evaluation,
// which reads them and moves nothing, they stay so).
TEST(DistributedDataParallel, BatchNormBuffersFollowRankZero) {
  const int R = group().size(), me = group().rank();
  ferry::manual_seed(5);
  auto net = std::make_shared<ferry::nn::Sequential>(std::make_shared<ferry::nn::Linear>(6, 8),
                                                     std::make_shared<ferry::nn::BatchNorm1d>(8),
                                                     std::make_shared<ferry::nn::Linear>(8, 3));
  ferry::nn::DistributedDataParallel ddp(net);
  auto& bn = static_cast<ferry::nn::BatchNorm1d&>(*net->children()[1]);
  ferry::optim::SGD opt(ddp.parameters(), {.lr = 0.1});
  const auto gather = [&](const Tensor& t) {
    Tensor all = ferry::zeros({R, t.numel()});
    group().allgather(all, t.flatten().contiguous());
    return all;
  };
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = batch(step, R, "cpu");
    opt.zero_grad();
    ferry::nn::functional::mse_loss(ddp.forward(x.narrow(0, me * 4, 4) * double(me + 1)),
                                    y.narrow(0, me * 4, 4))
        .backward();
    opt.step();
  }
  // Each rank moved the statistics with its own batch: they differ now.
  Tensor before = gather(bn.running_mean);
  EXPECT_GT(ferry::max(ferry::abs(before.select(0, 1) - before.select(0, 0))).item<float>(), 1e-3);
  const Tensor rank0 = before.select(0, 0).clone();
  ddp.eval();
  ddp.forward(ferry::ones({2, 6}));
  Tensor after = gather(bn.running_mean);
  for (int r = 0; r < R; ++r)
    EXPECT_EQ(after.select(0, r).to_vector<float>(), rank0.to_vector<float>()) << "rank " << r;
  EXPECT_EQ(gather(bn.num_batches_tracked.to(DType::f32)).to_vector<float>(),
            std::vector<float>(std::size_t(R), 3.0f));
}

// Checkpoints: rank 0 saves the wrapper's state ("module."-prefixed names, as PyTorch's DDP),
// every rank loads it into a model of its own, and holds what rank 0 trained.
TEST(DistributedDataParallel, RankZeroSavesEveryRankLoads) {
  const int R = group().size(), me = group().rank();
  auto ddp =
      std::make_shared<ferry::nn::DistributedDataParallel>(mlp(21 + std::uint64_t(me), "cpu"));
  ferry::optim::SGD opt(ddp->parameters(), {.lr = 0.1});
  for (int step = 0; step < 2; ++step) {
    const auto [x, y] = batch(step, R, "cpu");
    opt.zero_grad();
    ferry::nn::functional::mse_loss(ddp->forward(x.narrow(0, me * 4, 4)), y.narrow(0, me * 4, 4))
        .backward();
    opt.step();
  }
  // One path for the job: rank 0's process id.
  Tensor pid = ferry::full({1}, double(::getpid()), {.dtype = DType::i64});
  group().broadcast(pid, 0);
  const std::string path = (std::filesystem::temp_directory_path() /
                            fmt::format("ferry-ddp-{}.safetensors", pid.item<std::int64_t>()))
                               .string();
  if (me == 0) {
    const ferry::StateDict state = ddp->state_dict();
    for (const auto& [name, t] : state) EXPECT_EQ(name.rfind("module.", 0), 0u) << name;
    ferry::save_safetensors(path, state);
  }
  group().barrier();
  // A replica of each rank's own, not wrapped (whose broadcast would make it rank 0's anyway):
  // it holds what it read.
  auto plain_ptr = mlp(99 + std::uint64_t(me), "cpu");
  ferry::nn::Module& plain = *plain_ptr;
  plain.load_state_dict(ferry::load_safetensors(path).strip_prefix("module."));
  group().barrier();
  if (me == 0) std::filesystem::remove(path);
  expect_same_parameters(plain, *ddp->module(), "loaded");
}

TEST(DistributedDataParallel, NoSyncAccumulatesAndTheNextBackwardAveragesIt) {
  const int R = group().size(), me = group().rank();
  auto ddp = std::make_shared<ferry::nn::DistributedDataParallel>(mlp(3, "cpu"));
  auto whole = mlp(3, "cpu");
  const auto [x, y] = batch(0, 2 * R, "cpu");  // two micro-batches per rank
  {
    ferry::nn::DistributedDataParallel::NoSync local(*ddp);
    ferry::nn::functional::mse_loss(ddp->forward(x.narrow(0, me * 8, 4)), y.narrow(0, me * 8, 4))
        .backward();
    // Nothing was reduced: the gradient is this rank's alone.
  }
  ferry::nn::functional::mse_loss(ddp->forward(x.narrow(0, me * 8 + 4, 4)),
                                  y.narrow(0, me * 8 + 4, 4))
      .backward();
  // The whole batch's mean loss per micro-batch: half the rows of each rank's shard at a time.
  for (int half = 0; half < 2; ++half) {
    std::vector<Tensor> xs, ys;
    for (int r = 0; r < R; ++r) {
      xs.push_back(x.narrow(0, r * 8 + half * 4, 4));
      ys.push_back(y.narrow(0, r * 8 + half * 4, 4));
    }
    ferry::nn::functional::mse_loss(whole->forward(ferry::cat(xs)), ferry::cat(ys)).backward();
  }
  const auto g = ddp->module()->parameters(), w = whole->parameters();
  for (std::size_t i = 0; i < g.size(); ++i) {
    const auto a = g[i].grad().to_vector<float>(), b = w[i].grad().to_vector<float>();
    for (std::size_t j = 0; j < a.size(); ++j)
      ASSERT_NEAR(a[j], b[j], 1e-6 * (1 + std::fabs(b[j]))) << "parameter " << i;
  }
}

// Heads of which forward uses the first always, the second where `rank_zeros` is set on rank
// 0, and the third never.
struct TwoHeads : ferry::nn::Module {
  explicit TwoHeads(bool rank_zeros = false) : rank_zeros(rank_zeros) {
    used = register_module("used", std::make_shared<ferry::nn::Linear>(4, 2));
    spare = register_module("spare", std::make_shared<ferry::nn::Linear>(4, 2));
    sometimes = register_module("sometimes", std::make_shared<ferry::nn::Linear>(4, 2));
  }
  Tensor forward(const Tensor& x) override {
    if (rank_zeros && group().rank() == 0) return used->forward(x) + sometimes->forward(x);
    return used->forward(x);
  }
  bool rank_zeros;
  std::shared_ptr<ferry::nn::Linear> used, spare, sometimes;
};

TEST(DistributedDataParallel, UnusedParametersAreNamedOrFoundWhenAsked) {
  const Tensor x = ferry::ones({3, 4});
  {
    ferry::nn::DistributedDataParallel ddp(std::make_shared<TwoHeads>());
    ferry::sum(ddp.forward(x)).backward();
    try {
      ddp.forward(x);
      ADD_FAILURE() << "no error for a parameter without a gradient";
    } catch (const ferry::Error& e) {
      EXPECT_NE(std::string(e.what()).find("module.spare.weight"), std::string::npos) << e.what();
    }
  }
  ferry::nn::DistributedDataParallel ddp(std::make_shared<TwoHeads>(true),
                                         {.find_unused_parameters = true});
  const auto& m = static_cast<const TwoHeads&>(*ddp.module());
  const int R = group().size();
  for (int step = 0; step < 2; ++step) {
    ddp.zero_grad();
    ferry::sum(ddp.forward(x * double(group().rank() + 1))).backward();
    // d(sum)/d(bias) is the batch size on every rank; the weight's is the mean of the ranks' x.
    EXPECT_EQ(m.used->bias.grad().to_vector<float>()[0], 3.0f);
    const double mean_scale = double(R + 1) / 2;
    EXPECT_NEAR(m.used->weight.grad().to_vector<float>()[0], 3.0 * mean_scale, 1e-5);
    // Used on rank 0 alone: the others contribute zeros to the average, as in PyTorch.
    ASSERT_TRUE(m.sometimes->bias.grad().defined());
    EXPECT_NEAR(m.sometimes->bias.grad().to_vector<float>()[1], 3.0 / R, 1e-6);
    EXPECT_NEAR(m.sometimes->weight.grad().to_vector<float>()[0], 3.0 / R, 1e-6);
    // Used nowhere: its gradient stays none, so an optimizer leaves it be.
    EXPECT_FALSE(m.spare->weight.grad().defined());
    EXPECT_FALSE(m.spare->bias.grad().defined());
  }
  // One that has a gradient keeps it untouched where no rank uses it: this rank's own value,
  // not the ranks' average.
  ddp.zero_grad();
  const float own = 0.25f * float(group().rank() + 1);
  m.spare->weight.set_grad(ferry::full({2, 4}, double(own)));
  ferry::sum(ddp.forward(x)).backward();
  ASSERT_TRUE(m.spare->weight.grad().defined());
  EXPECT_EQ(m.spare->weight.grad().to_vector<float>()[5], own);
  ferry::optim::SGD sgd(ddp.parameters(), {.lr = 0.1, .weight_decay = 0.5});
  const float spare_before = m.spare->weight.to_vector<float>()[0];
  ddp.zero_grad();
  ferry::sum(ddp.forward(x)).backward();
  sgd.step();  // skips the parameter without a gradient, weight decay and all
  EXPECT_EQ(m.spare->weight.to_vector<float>()[0], spare_before);
}

// ---- faults: each ends the job; run alone (tests/distributed/CMakeLists.txt) ----

TEST(Faults, RankKilledMidJob) {
  Tensor t = ferry::ones({8});
  if (group().rank() == group().size() - 1) std::raise(SIGKILL);
  group().allreduce(t);  // the others wait for the killed rank until the launcher ends them
  ADD_FAILURE() << "the allreduce completed without the killed rank";
}

TEST(Faults, HangingPeerTimesOut) {
  Tensor t = ferry::ones({8});
  if (group().rank() == group().size() - 1) std::this_thread::sleep_for(std::chrono::minutes(2));
  group().allreduce(t);  // runs on this thread; the group's thread watches it
  ADD_FAILURE() << "the allreduce completed without the hanging rank";
}

TEST(Faults, HangingPeerTimesOutTheWaiter) {
  Tensor t = ferry::ones({8});
  if (group().rank() == group().size() - 1) std::this_thread::sleep_for(std::chrono::minutes(2));
  group().allreduce_async(t).wait();  // runs on the group's thread; the waiter times out
  ADD_FAILURE() << "the allreduce completed without the hanging rank";
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  dist::init();
  const int rc = RUN_ALL_TESTS();
  dist::shutdown();
  return rc;
}
