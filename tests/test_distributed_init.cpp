// ferry::distributed's init() in a single process, without a job: what a machine or a build
// without a distributed backend sees (typed errors that say what is missing), and its checks
// of the timeout setting; and the gradient hook DistributedDataParallel uses. The collectives
// themselves run under mpirun (tests/distributed/).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "ferry/distributed.hpp"
#include "ferry/ferry.hpp"

namespace {

namespace dist = ferry::distributed;

TEST(DistributedInit, AnUnknownBackendSaysWhatIsMissing) {
  EXPECT_FALSE(dist::is_initialized());
  EXPECT_THROW(dist::default_group(), ferry::Error);
  try {
    dist::init({.backend = "carrier-pigeon"});
    ADD_FAILURE() << "init() opened a backend that does not exist";
  } catch (const ferry::UnsupportedError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("no 'carrier-pigeon' backend"), std::string::npos) << msg;
    EXPECT_NE(msg.find("libferry_distributed_carrier-pigeon.so"), std::string::npos) << msg;
  }
  EXPECT_FALSE(dist::is_initialized());
}

TEST(DistributedInit, ABadTimeoutIsAValueError) {
  for (const char* bad : {"soon", "0", "-3", "5s"}) {
    ::setenv("FERRY_DISTRIBUTED_TIMEOUT", bad, 1);
    EXPECT_THROW(dist::init({.backend = "carrier-pigeon"}), ferry::ValueError) << bad;
  }
  ::unsetenv("FERRY_DISTRIBUTED_TIMEOUT");
  EXPECT_FALSE(dist::is_initialized());
}

TEST(DistributedInit, ReduceOpsHavePyTorchsNames) {
  EXPECT_EQ(dist::reduce_op_name(dist::ReduceOp::sum), "sum");
  EXPECT_EQ(dist::reduce_op_name(dist::ReduceOp::avg), "avg");
  EXPECT_EQ(dist::reduce_op_name(dist::ReduceOp::product), "product");
}

}  // namespace

namespace {

// The hook DistributedDataParallel is built on: called after each accumulation, with the
// accumulated gradient, until removed; refused on a tensor that accumulates nothing.
TEST(PostAccumulateGradHook, CalledWithTheAccumulatedGradientUntilRemoved) {
  ferry::Tensor w = ferry::ones({3}).requires_grad_();
  std::vector<float> seen;
  const auto id = ferry::autograd::register_post_accumulate_grad_hook(
      w, [&](const ferry::Tensor& g) { seen.push_back(g.to_vector<float>()[0]); });
  ferry::sum(w * 2.0).backward();
  ferry::sum(w * 3.0).backward();  // accumulates: 2 + 3
  EXPECT_EQ(seen, (std::vector<float>{2.0f, 5.0f}));
  ferry::autograd::remove_post_accumulate_grad_hook(w, id);
  ferry::sum(w * 4.0).backward();
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_EQ(w.grad().to_vector<float>()[0], 9.0f);
  const ferry::Tensor y = w * 2.0;
  EXPECT_THROW(ferry::autograd::register_post_accumulate_grad_hook(y, [](const ferry::Tensor&) {}),
               ferry::Error);
  EXPECT_THROW(ferry::autograd::register_post_accumulate_grad_hook(ferry::ones({2}),
                                                                   [](const ferry::Tensor&) {}),
               ferry::Error);
}

}  // namespace
