// ferry::distributed's init() in a single process, without a job: what a machine or a build
// without a distributed backend sees (typed errors that say what is missing), and its checks
// of the timeout setting. The collectives themselves run under mpirun (tests/distributed/).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "ferry/distributed.hpp"

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
