// ferry::distributed's init() in a single process, without a job: what a machine or a build
// without a distributed backend sees (typed errors that say what is missing), and its checks
// of the timeout setting; and the gradient hook DistributedDataParallel uses. The collectives
// themselves run under mpirun (tests/distributed/).
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "distributed/rendezvous.hpp"
#include "ferry/distributed.hpp"
#include "ferry/ferry.hpp"
#ifdef FERRY_TEST_HAVE_NCCL
#include "distributed/nccl/nccl_types.hpp"
#endif

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

TEST(DistributedInit, ABadTimeoutChunkOrCompareSwitchIsAValueError) {
  for (const char* bad : {"soon", "0", "-3", "5s"}) {
    ::setenv("FERRY_DISTRIBUTED_TIMEOUT", bad, 1);
    EXPECT_THROW(dist::init({.backend = "carrier-pigeon"}), ferry::ValueError) << bad;
  }
  ::unsetenv("FERRY_DISTRIBUTED_TIMEOUT");
  for (const char* bad : {"4M", "-1", "big"}) {
    ::setenv("FERRY_DISTRIBUTED_CHUNK", bad, 1);
    EXPECT_THROW(dist::init({.backend = "carrier-pigeon"}), ferry::ValueError) << bad;
  }
  ::unsetenv("FERRY_DISTRIBUTED_CHUNK");
  for (const char* bad : {"yes", "2", " 1"}) {
    ::setenv("FERRY_DISTRIBUTED_COMPARE_CALLS", bad, 1);
    EXPECT_THROW(dist::init({.backend = "carrier-pigeon"}), ferry::ValueError) << bad;
  }
  // An explicit choice is not read from the environment: the missing backend is what fails.
  EXPECT_THROW(dist::init({.backend = "carrier-pigeon", .compare_calls = false}),
               ferry::UnsupportedError);
  ::unsetenv("FERRY_DISTRIBUTED_COMPARE_CALLS");
  EXPECT_FALSE(dist::is_initialized());
}

TEST(DistributedInit, ReduceOpsHavePyTorchsNames) {
  EXPECT_EQ(dist::reduce_op_name(dist::ReduceOp::sum), "sum");
  EXPECT_EQ(dist::reduce_op_name(dist::ReduceOp::avg), "avg");
  EXPECT_EQ(dist::reduce_op_name(dist::ReduceOp::product), "product");
}

// Sets environment variables for one scope and restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
      if (value)
        ::setenv(name, value, 1);
      else
        ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    for (auto& [name, old] : saved_)
      if (old)
        ::setenv(name.c_str(), old->c_str(), 1);
      else
        ::unsetenv(name.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Every launcher variable unset, so that each test says what its launcher set.
ScopedEnv no_launcher() {
  return ScopedEnv({{"FERRY_RANK", nullptr},
                    {"FERRY_WORLD_SIZE", nullptr},
                    {"FERRY_LOCAL_RANK", nullptr},
                    {"OMPI_COMM_WORLD_RANK", nullptr},
                    {"OMPI_COMM_WORLD_SIZE", nullptr},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", nullptr},
                    {"PMI_RANK", nullptr},
                    {"PMI_SIZE", nullptr},
                    {"FERRY_RENDEZVOUS", nullptr}});
}

TEST(DistributedJobPlace, FromOptionsThenFerrysThenMpirunsVariables) {
  const ScopedEnv clean = no_launcher();
  auto p = dist::job_place(-1, -1);
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.size, 1);
  {
    const ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "2"},
                         {"OMPI_COMM_WORLD_SIZE", "4"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
    p = dist::job_place(-1, -1);
    EXPECT_EQ(p.rank, 2);
    EXPECT_EQ(p.size, 4);
    EXPECT_EQ(p.local_rank, 0);
    const ScopedEnv ferry({{"FERRY_RANK", "1"}, {"FERRY_WORLD_SIZE", "3"}});
    p = dist::job_place(-1, -1);  // ferry's own variables come first
    EXPECT_EQ(p.rank, 1);
    EXPECT_EQ(p.size, 3);
    p = dist::job_place(5, 8);  // and the options before them
    EXPECT_EQ(p.rank, 5);
    EXPECT_EQ(p.size, 8);
    EXPECT_EQ(p.local_rank, 0);
  }
  {
    const ScopedEnv env({{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}});
    p = dist::job_place(-1, -1);
    EXPECT_EQ(p.rank, 3);
    EXPECT_EQ(p.local_rank, 3);  // no local rank given: the rank
  }
}

TEST(DistributedJobPlace, BadValuesAreValueErrors) {
  const ScopedEnv clean = no_launcher();
  EXPECT_THROW(dist::job_place(3, 3), ferry::ValueError);
  EXPECT_THROW(dist::job_place(0, -1), ferry::ValueError);
  EXPECT_THROW(dist::job_place(-1, 0), ferry::ValueError);
  {
    const ScopedEnv env({{"FERRY_RANK", "1"}});  // the size is missing
    EXPECT_THROW(dist::job_place(-1, -1), ferry::ValueError);
  }
  for (const char* bad : {"one", "-1", "2x", ""}) {
    const ScopedEnv env({{"FERRY_RANK", bad}, {"FERRY_WORLD_SIZE", "2"}});
    EXPECT_THROW(dist::job_place(-1, -1), ferry::ValueError) << bad;
  }
  const ScopedEnv env({{"FERRY_RANK", "2"}, {"FERRY_WORLD_SIZE", "2"}});
  EXPECT_THROW(dist::job_place(-1, -1), ferry::ValueError);
}

std::string fresh_path(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ferry-rendezvous-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::filesystem::remove(path);
  return path.string();
}

// Three ranks as threads: each gets rank 0's bytes (zeros among them, as in NCCL's id), and rank
// 0 leaves no file behind, so the same path serves the next job.
TEST(DistributedRendezvous, EveryRankGetsRankZerosBytesAndNothingIsLeft) {
  const std::string path = fresh_path("share");
  const std::string id("unique\0id\xff", 10);
  for (int job = 0; job < 2; ++job) {
    std::vector<std::string> got(3);
    std::vector<std::thread> ranks;
    for (int r = 2; r >= 0; --r)  // the others first: they wait for rank 0
      ranks.emplace_back([&, r] {
        dist::FileRendezvous rdv("file:" + path, {.rank = r, .size = 3, .local_rank = r},
                                 std::chrono::seconds(20));
        got[std::size_t(r)] = rdv.share(r == 0 ? id : std::string("ignored"));
      });
    for (auto& t : ranks) t.join();
    for (int r = 0; r < 3; ++r) EXPECT_EQ(got[std::size_t(r)], id) << "rank " << r;
    const auto dir = std::filesystem::path(path).parent_path();
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << "job " << job;
  }
}

TEST(DistributedRendezvous, AFileLeftByAnEarlierJobIsRefused) {
  const std::string path = fresh_path("stale");
  std::ofstream(path) << "an earlier job's";
  dist::FileRendezvous rdv(path, {.rank = 0, .size = 2}, std::chrono::seconds(5));
  try {
    rdv.share("id");
    ADD_FAILURE() << "rank 0 wrote over a file it did not make";
  } catch (const ferry::distributed::DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("left by an earlier job"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(DistributedRendezvous, AMissingPeerEndsTheWaitWithATypedError) {
  const std::string path = fresh_path("alone");
  // Rank 1 waits for a rank 0 that never comes; rank 0 for a rank 1 that never reads.
  dist::FileRendezvous one(path, {.rank = 1, .size = 2}, std::chrono::milliseconds(200));
  EXPECT_THROW(one.share(""), ferry::distributed::DistributedError);
  dist::FileRendezvous zero(path, {.rank = 0, .size = 2}, std::chrono::milliseconds(200));
  try {
    zero.share("id");
    ADD_FAILURE() << "rank 0 returned without rank 1";
  } catch (const ferry::distributed::DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 to read"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));  // removed, so a retry can use the path
  // One rank needs no file; several need one.
  dist::FileRendezvous single("", {.rank = 0, .size = 1}, std::chrono::seconds(1));
  EXPECT_EQ(single.share("x"), "x");
  dist::FileRendezvous none("", {.rank = 0, .size = 2}, std::chrono::seconds(1));
  EXPECT_THROW(none.share("x"), ferry::ValueError);
}

// A TCP port nothing listens at now: the kernel's pick for a socket bound to port 0, closed
// again (another program could take it meanwhile; on a test machine, none does).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("no free port");
  ::close(fd);
  return ntohs(a.sin_port);
}

// Note [Rendezvous address]: four ranks as threads, rank 0 last (the others connect again until
// it listens), every rank gets rank 0's bytes, and the port serves a second job at once.
TEST(DistributedRendezvous, OverTcpEveryRankGetsRankZerosBytes) {
  const std::string address = fmt::format("tcp://127.0.0.1:{}", free_port());
  std::string id(128, '\0');  // NCCL's id is 128 bytes
  for (std::size_t i = 0; i < id.size(); i += 3) id[i] = char(i);
  for (int job = 0; job < 2; ++job) {
    std::vector<std::string> got(4);
    std::vector<std::thread> ranks;
    for (int r = 3; r >= 0; --r)
      ranks.emplace_back([&, r] {
        if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const auto rdv = dist::make_rendezvous(address, {.rank = r, .size = 4, .local_rank = r},
                                               std::chrono::seconds(20));
        got[std::size_t(r)] = rdv->share(r == 0 ? id : std::string("ignored"));
      });
    for (auto& t : ranks) t.join();
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(got[std::size_t(r)], id) << "job " << job << " rank " << r;
  }
}

TEST(DistributedRendezvous, OverTcpAMissingOrForeignPeerIsATypedError) {
  const std::string address = fmt::format("tcp://127.0.0.1:{}", free_port());
  // Rank 1 with no rank 0; rank 0 with no rank 1. Each names what it waited for.
  const auto expect_wait = [&](int rank, const std::string& says) {
    dist::TcpRendezvous rdv(address, {.rank = rank, .size = 2}, std::chrono::milliseconds(300));
    const auto t0 = std::chrono::steady_clock::now();
    try {
      rdv.share("id");
      ADD_FAILURE() << "rank " << rank << " returned alone";
    } catch (const ferry::distributed::DistributedError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  };
  expect_wait(1, "for rank 0 to listen at " + address);
  expect_wait(0, "for 1 of the other 1 ranks to connect");
  // A rank of a job of another size at rank 0's address.
  std::string error;
  std::thread zero([&] {
    dist::TcpRendezvous rdv(address, {.rank = 0, .size = 2}, std::chrono::seconds(10));
    try {
      rdv.share("id");
    } catch (const ferry::distributed::DistributedError& e) {
      error = e.what();
    }
  });
  dist::TcpRendezvous foreign(address, {.rank = 2, .size = 3}, std::chrono::milliseconds(1500));
  EXPECT_THROW(foreign.share(""), ferry::distributed::DistributedError);
  zero.join();
  EXPECT_NE(error.find("a rank 2 of 3 joined"), std::string::npos) << error;
  // Addresses that are not tcp://HOST:PORT.
  for (const char* bad :
       {"tcp://127.0.0.1", "tcp://:80", "tcp://host:0", "tcp://host:99999", "tcp://host:8x"}) {
    dist::TcpRendezvous rdv(bad, {.rank = 1, .size = 2}, std::chrono::seconds(1));
    EXPECT_THROW(rdv.share(""), ferry::ValueError) << bad;
  }
  // One rank needs no rendezvous at all.
  dist::TcpRendezvous single("tcp://unused:1", {.rank = 0, .size = 1}, std::chrono::seconds(1));
  EXPECT_EQ(single.share("x"), "x");
}

// Rank 0 out of file descriptors when a rank connects: accept() fails the same way every time
// it is tried, so rank 0 says so at once, instead of spinning until its deadline and then
// blaming the other ranks. The peer is a child process (its own descriptors), which only
// connects.
TEST(DistributedRendezvous, OverTcpRankZeroOutOfDescriptorsSaysSoAtOnce) {
#if defined(__SANITIZE_ADDRESS__)
  // The sanitized build runs UBSan too, whose vptr check reads memory through a pipe: in a
  // process with no descriptors left it reports every virtual call as a bad object.
  GTEST_SKIP() << "a process out of file descriptors cannot run UBSan's checks";
#endif
  const int port = free_port();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // system calls only, as after fork() in a threaded process
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(std::uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 500; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
        ::sleep(5);
        ::_exit(0);
      }
      if (fd >= 0) ::close(fd);
      ::usleep(10000);
    }
    ::_exit(1);
  }
  // Every descriptor but one taken (under a soft limit of 1024, restored after): the
  // listening socket takes that one, and accept() finds none.
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = std::min<rlim_t>(old.rlim_cur, 1024);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> filler;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) filler.push_back(fd);
  ASSERT_FALSE(filler.empty());
  ::close(filler.back());
  filler.pop_back();
  std::string error;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    dist::TcpRendezvous zero(fmt::format("tcp://127.0.0.1:{}", port), {.rank = 0, .size = 2},
                             std::chrono::seconds(20));
    zero.share("id");
  } catch (const ferry::distributed::DistributedError& e) {
    error = e.what();
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  for (const int fd : filler) ::close(fd);
  ::setrlimit(RLIMIT_NOFILE, &old);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_NE(error.find("rank 0 cannot accept connections"), std::string::npos) << error;
  EXPECT_NE(error.find(std::strerror(EMFILE)), std::string::npos) << error;
  EXPECT_LT(took, std::chrono::seconds(10));
}

bool module_present(const std::string& name) {
  for (const std::string& dir : ferry::backend_search_path())
    if (std::filesystem::exists(std::filesystem::path(dir) /
                                ("libferry_distributed_" + name + ".so")))
      return true;
  return false;
}

// Where no CUDA device is usable, init("nccl") says so with the cuda backend's reason; where
// one is, a group of one rank runs on it (NCCL takes a single rank) and refuses other devices'
// tensors.
TEST(DistributedNccl, InitSaysWhyOrRunsOneRankOnTheGpu) {
  const ScopedEnv clean = no_launcher();
  if (!module_present("nccl")) {
    EXPECT_THROW(dist::init({.backend = "nccl"}), ferry::UnsupportedError);
    GTEST_SKIP() << "libferry_distributed_nccl.so is not built here (no NCCL beside the toolkit)";
  }
  if (!ferry::is_available("cuda")) {
    try {
      dist::init({.backend = "nccl"});
      ADD_FAILURE() << "init(nccl) succeeded without a CUDA device";
    } catch (const ferry::UnsupportedError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("runs on cuda devices, and this machine has none usable"),
                std::string::npos)
          << msg;
    }
    EXPECT_FALSE(dist::is_initialized());
    GTEST_SKIP() << "no usable CUDA device: the nccl group's collectives were not run";
  }
  auto group = dist::init({.backend = "nccl", .rank = 0, .world_size = 1});
  ASSERT_TRUE(group->device().has_value());
  EXPECT_EQ(group->device()->str(), "cuda:0");
  ferry::Tensor t = ferry::tensor(std::vector<float>{1, 2, 3}).to("cuda:0");
  group->allreduce(t, dist::ReduceOp::avg);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  ferry::Tensor h =
      ferry::tensor(std::vector<float>{1, 2}, {2}, {.dtype = ferry::DType::f16}).to("cuda:0");
  ferry::Tensor all = ferry::zeros({1, 2}, {.dtype = ferry::DType::f16, .device = "cuda:0"});
  group->allgather(all, h);
  EXPECT_EQ(all.to(ferry::DType::f32).to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_THROW(group->allreduce(ferry::ones({2})), ferry::DeviceError);
  group->barrier();
  dist::shutdown();
}

TEST(DistributedInit, TheMpiGroupTakesEveryDeviceSoNamingOneIsAnError) {
  const ScopedEnv clean = no_launcher();
  if (!module_present("mpi")) GTEST_SKIP() << "libferry_distributed_mpi.so is not built here";
#if defined(__SANITIZE_ADDRESS__)
  // Loading Open MPI patches the allocator's calls (tests/distributed/CMakeLists.txt).
  GTEST_SKIP() << "Open MPI is not loaded under the sanitizers";
#endif
  EXPECT_THROW(dist::init({.backend = "mpi", .device = ferry::Device::cpu()}), ferry::ValueError);
  EXPECT_FALSE(dist::is_initialized());
}

#ifdef FERRY_TEST_HAVE_NCCL
TEST(DistributedNccl, TypesAndReductionsMapOntoNcclsOwn) {
  using namespace ferry::distributed::nccl;
  EXPECT_EQ(nccl_type(ferry::DType::f32), ncclFloat32);
  EXPECT_EQ(nccl_type(ferry::DType::f64), ncclFloat64);
  EXPECT_EQ(nccl_type(ferry::DType::i8), ncclInt8);
  EXPECT_EQ(nccl_type(ferry::DType::i32), ncclInt32);
  EXPECT_EQ(nccl_type(ferry::DType::i64), ncclInt64);
  EXPECT_EQ(nccl_type(ferry::DType::u8), ncclUint8);
  EXPECT_EQ(nccl_type(ferry::DType::boolean), ncclUint8);  // the core turns or/and into max/min
  EXPECT_THROW(nccl_type(ferry::DType::i16), ferry::distributed::DistributedError);
  EXPECT_EQ(nccl_op(dist::ReduceOp::sum), ncclSum);
  EXPECT_EQ(nccl_op(dist::ReduceOp::product), ncclProd);
  EXPECT_EQ(nccl_op(dist::ReduceOp::min), ncclMin);
  EXPECT_EQ(nccl_op(dist::ReduceOp::max), ncclMax);
  EXPECT_THROW(nccl_op(dist::ReduceOp::avg), ferry::distributed::DistributedError);
}
#endif

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
