// tests/distributed/test_distributed.cpp — ferry::distributed's collectives, run by every rank
// of an mpirun job (tests/distributed/CMakeLists.txt: 2 and 3 ranks over loopback TCP), on
// the CPU and on vulkan:0 where it exists, against closed forms: rank r's element i is a small
// integer f(i, r), so sums, products, minima and maxima are exact in every dtype and the
// expected value is computed here from the formula. The Faults tests end the job on purpose
// and run in entries of their own, which check mpirun's output.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "ferry/distributed.hpp"
#include "ferry/ferry.hpp"

namespace {

namespace dist = ferry::distributed;
using dist::ReduceOp;
using ferry::DType;
using ferry::Tensor;

dist::ProcessGroup& group() { return dist::default_group(); }

// The CPU and vulkan:0 where it exists (rank 0 says which, once).
std::vector<std::string> devices() {
  static const std::vector<std::string> d = [] {
    std::vector<std::string> v{"cpu"};
    if (ferry::is_available("vulkan:0")) v.push_back("vulkan:0");
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
  const std::int64_t n = 37;
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
    for (const DType dt : {DType::f32, DType::bf16, DType::i64, DType::u8, DType::f64}) {
      const std::string what = device + " " + std::string(ferry::dtype_name(dt));
      const ferry::TensorOptions on{.dtype = dt, .device = ferry::Device(device)};
      for (int root = 0; root < R; ++root) {
        Tensor t = rank_tensor(11, me, dt, device);
        group().broadcast(t, root);
        expect_values(t, rank_tensor(11, root, dt, "cpu").to(DType::f64).to_vector<double>(),
                      what + " broadcast from " + std::to_string(root));
      }
      // allgather: out[r] is rank r's tensor, here a [2, 3] non-contiguous view's worth.
      Tensor in = rank_tensor(6, me, dt, device).reshape({3, 2}).t();
      Tensor out = ferry::zeros({R, 2, 3}, on);
      group().allgather(out, in);
      std::vector<double> want;
      for (int r = 0; r < R; ++r) {
        const auto v = rank_tensor(6, r, dt, "cpu").reshape({3, 2}).t().contiguous();
        for (double x : v.to(DType::f64).to_vector<double>()) want.push_back(x);
      }
      expect_values(out, want, what + " allgather");
      // reduce_scatter: rank r gets the sum over ranks of their block r.
      Tensor blocks = rank_tensor(R * 5, me, dt, device).reshape({R, 5});
      Tensor mine = ferry::zeros({5}, on);
      group().reduce_scatter(mine, blocks, ReduceOp::sum);
      want.assign(5, 0);
      for (std::int64_t i = 0; i < 5; ++i)
        want[std::size_t(i)] = reduce(me * 5 + i, dt, ReduceOp::sum, R);
      expect_values(mine, want, what + " reduce_scatter");
      // all_to_all: out[s] is rank s's in[me].
      Tensor a2a = ferry::zeros({R, 4}, on);
      group().all_to_all(a2a, rank_tensor(R * 4, me, dt, device).reshape({R, 4}));
      want.clear();
      for (int s = 0; s < R; ++s)
        for (std::int64_t i = 0; i < 4; ++i) want.push_back(value(me * 4 + i, s, dt));
      expect_values(a2a, want, what + " all_to_all");
    }
  group().barrier();
}

TEST(Collectives, SendRecvAroundTheRing) {
  const int R = group().size(), me = group().rank();
  for (const std::string& device : devices()) {
    const int next = (me + 1) % R, prev = (me + R - 1) % R;
    Tensor mine = rank_tensor(9, me, DType::f32, device);
    Tensor got = ferry::zeros({9}, {.device = ferry::Device(device)});
    // Even ranks send first: blocking sends on every rank at once could wait on each other.
    if (me % 2 == 0) {
      group().send(mine, next, 7);
      group().recv(got, prev, 7);
    } else {
      group().recv(got, prev, 7);
      group().send(mine, next, 7);
    }
    expect_values(got, rank_tensor(9, prev, DType::f64, "cpu").to_vector<double>(),
                  device + " recv");
  }
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
  group().allreduce(t);
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
