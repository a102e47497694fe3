// The CUDA backend's host-side logic, which needs no GPU and no driver: error
// translation (cuda/cuda_error.hpp), stream-ordered releases of staging memory
// (Note [Stream-ordered reuse]), the kernels' offset calculator (Note [Offset
// calculator], FERRY_HD code run here on the CPU) and the device allocator's
// size classes (cuda/cuda_memory_policy.hpp) over a fake cudaMalloc.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda_deferred.hpp"
#include "cuda_error.hpp"
#include "cuda_memory_policy.hpp"
#include "cuda_offsets.hpp"
#include "ferry/error.hpp"

namespace fc = ferry::cuda;

namespace {

TEST(CudaErrors, ClassifiesTheRuntimesNames) {
  EXPECT_EQ(fc::classify_error("cudaErrorMemoryAllocation"), fc::ErrorClass::out_of_memory);
  EXPECT_EQ(fc::classify_error("CUBLAS_STATUS_ALLOC_FAILED"), fc::ErrorClass::out_of_memory);
  EXPECT_EQ(fc::classify_error("cudaErrorInsufficientDriver"), fc::ErrorClass::no_driver);
  EXPECT_EQ(fc::classify_error("cudaErrorNoDevice"), fc::ErrorClass::no_device);
  EXPECT_EQ(fc::classify_error("cudaErrorIllegalAddress"), fc::ErrorClass::sticky);
  EXPECT_EQ(fc::classify_error("cudaErrorLaunchFailure"), fc::ErrorClass::sticky);
  EXPECT_EQ(fc::classify_error("cudaErrorInvalidValue"), fc::ErrorClass::other);
}

TEST(CudaErrors, BecomeBackendErrorsWithTheCudaName) {
  try {
    fc::throw_error("cuda:1", "cudaMemcpyAsync", "cudaErrorInvalidValue", "invalid argument");
    FAIL() << "throw_error returned";
  } catch (const ferry::BackendError& e) {
    EXPECT_EQ(e.code(), "cudaErrorInvalidValue");
    EXPECT_STREQ(e.what(),
                 "cuda:1: cudaMemcpyAsync failed: cudaErrorInvalidValue (invalid argument)");
  }
  // A sticky error says what it means for the process.
  std::string m = fc::error_message("cuda:0", "cudaStreamSynchronize", "cudaErrorIllegalAddress",
                                    "an illegal memory access was encountered");
  EXPECT_NE(m.find("cudaErrorIllegalAddress"), std::string::npos) << m;
  EXPECT_NE(m.find("restart the process"), std::string::npos) << m;
}

TEST(CudaErrors, UnavailableReasonsStartWithTheBackendName) {
  std::string r =
      fc::unavailable_reason("cudaErrorInsufficientDriver",
                             "CUDA driver version is insufficient for CUDA runtime version");
  EXPECT_EQ(r.rfind("cuda: no usable NVIDIA driver found (cudaErrorInsufficientDriver: ", 0), 0u)
      << r;
  r = fc::unavailable_reason("cudaErrorNoDevice", "no CUDA-capable device is detected");
  EXPECT_EQ(r.rfind("cuda: no CUDA-capable GPU found", 0), 0u) << r;
  r = fc::unavailable_reason("cudaErrorUnknown", "unknown error");
  EXPECT_EQ(r.rfind("cuda: ", 0), 0u) << r;
  EXPECT_NE(r.find("cudaErrorUnknown"), std::string::npos) << r;
}

// NVRTC's log of a failed custom kernel becomes CompileError with the first
// error's line, its message and the offending source line.
TEST(CudaErrors, NvrtcLogsBecomeCompileErrors) {
  const std::string code = "extern \"C\" __global__ void f(float* x) {\n  x[0] = nope;\n}\n";
  const std::string log =
      "bad.cu(2): error: identifier \"nope\" is undefined\n    x[0] = nope;\n           ^\n\n"
      "1 error detected in the compilation of \"bad.cu\".\n";
  try {
    fc::throw_compile_error("bad", code, log);
    FAIL() << "throw_compile_error returned";
  } catch (const ferry::CompileError& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.log(), log);
    EXPECT_STREQ(e.what(),
                 "custom kernel 'bad' (CUDA C++) does not compile: line 2: identifier \"nope\" is "
                 "undefined\n  2 |   x[0] = nope;");
  }
  // Newer NVRTCs number their diagnostics ("error #20-D: ..."); a log with no
  // line keeps its first line as the message.
  try {
    fc::throw_compile_error("k", code, "k.cu(1): error #20-D: identifier \"y\" is undefined\n");
  } catch (const ferry::CompileError& e) {
    EXPECT_EQ(e.line(), 1);
    EXPECT_NE(std::string(e.what()).find("identifier \"y\" is undefined"), std::string::npos)
        << e.what();
  }
  // A warning before the error is passed over; "catastrophic error" is an error.
  try {
    fc::throw_compile_error("k", code,
                            "k.cu(1): warning #177-D: variable \"v\" was declared but never "
                            "referenced\nk.cu(2): catastrophic error: cannot open source file "
                            "\"x.h\"\n");
  } catch (const ferry::CompileError& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_NE(std::string(e.what()).find("line 2: cannot open source file \"x.h\"\n  2 |"),
              std::string::npos)
        << e.what();
  }
  try {
    fc::throw_compile_error("k", code, "nvrtc: error: invalid value for --gpu-architecture\n");
  } catch (const ferry::CompileError& e) {
    EXPECT_EQ(e.line(), 0);
    EXPECT_NE(std::string(e.what()).find("--gpu-architecture"), std::string::npos) << e.what();
  }
}

// A fence the test completes by hand; wait() completes it (as the GPU would).
struct FakeFence final : fc::Fence {
  bool is_done = false;
  int waits = 0;
  bool done() override { return is_done; }
  void wait() override {
    ++waits;
    is_done = true;
  }
};

TEST(CudaDeferredReleases, WaitForEveryFenceOfAnEntry) {
  fc::DeferredReleases d;
  std::vector<int> released;
  d.defer({}, [&] { released.push_back(0); });  // nothing in flight: at once
  EXPECT_EQ(released, std::vector<int>{0});

  auto a = std::make_shared<FakeFence>(), b = std::make_shared<FakeFence>();
  auto c = std::make_shared<FakeFence>();
  d.defer(
      {a, b}, [&] { released.push_back(1); }, 100);
  d.defer(
      {c}, [&] { released.push_back(2); }, 10);
  EXPECT_EQ(d.pending(), 2u);
  EXPECT_EQ(d.pending_bytes(), 110u);
  EXPECT_EQ(d.collect(), 0u);

  a->is_done = true;  // one of two streams done: not yet
  EXPECT_EQ(d.collect(), 0u);
  c->is_done = true;  // a later entry may finish first (another stream)
  EXPECT_EQ(d.collect(), 1u);
  EXPECT_EQ(released, (std::vector<int>{0, 2}));
  EXPECT_EQ(d.pending_bytes(), 100u);

  EXPECT_TRUE(d.wait_oldest());  // blocks on b, then releases entry 1
  EXPECT_EQ(b->waits, 1);
  EXPECT_EQ(a->waits, 1);  // waiting an already-done fence is harmless
  EXPECT_EQ(released, (std::vector<int>{0, 2, 1}));
  EXPECT_FALSE(d.wait_oldest());
  EXPECT_EQ(d.pending(), 0u);
  EXPECT_EQ(d.pending_bytes(), 0u);
}

TEST(CudaDeferredReleases, DrainAndDestructionReleaseEverythingInOrder) {
  std::vector<int> released;
  {
    fc::DeferredReleases d;
    for (int i = 0; i < 3; ++i)
      d.defer({std::make_shared<FakeFence>()}, [&released, i] { released.push_back(i); });
  }
  EXPECT_EQ(released, (std::vector<int>{0, 1, 2}));
}

// Naive reference: offsets of linear index i over (sizes, strides[operand][dim]).
std::vector<std::int64_t> naive_offsets(const std::vector<std::int64_t>& sizes,
                                        const std::vector<std::vector<std::int64_t>>& strides,
                                        std::int64_t linear) {
  std::vector<std::int64_t> off(strides.size(), 0);
  for (int d = int(sizes.size()) - 1; d >= 0; --d) {
    std::int64_t i = linear % sizes[std::size_t(d)];
    linear /= sizes[std::size_t(d)];
    for (std::size_t k = 0; k < strides.size(); ++k) off[k] += i * strides[k][std::size_t(d)];
  }
  return off;
}

template <typename Index> void check_offsets(std::mt19937& rng) {
  std::uniform_int_distribution<int> nd(0, 5), size(1, 5), pick(0, 3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::int64_t> sizes(std::size_t(nd(rng)));
    for (auto& s : sizes) s = size(rng);
    // Operand 0 contiguous (an output), 1 transposed, 2 broadcast in random dims.
    std::vector<std::vector<std::int64_t>> strides(3, std::vector<std::int64_t>(sizes.size()));
    std::int64_t st = 1;
    for (int d = int(sizes.size()) - 1; d >= 0; --d) {
      strides[0][std::size_t(d)] = st;
      st *= sizes[std::size_t(d)];
    }
    st = 1;
    for (std::size_t d = 0; d < sizes.size(); ++d) {
      strides[1][d] = st;
      st *= sizes[d];
    }
    st = 7;
    for (int d = int(sizes.size()) - 1; d >= 0; --d) {
      strides[2][std::size_t(d)] = pick(rng) == 0 ? 0 : st;
      st *= sizes[std::size_t(d)] + 1;  // padded rows: never mergeable with the next dim
    }
    std::vector<ferry::TensorArg> args(3);
    for (std::size_t k = 0; k < 3; ++k) {
      args[k].sizes = sizes;
      args[k].strides = strides[k];
    }
    auto oc = fc::make_offset_calc<3, Index>({&args[0], &args[1], &args[2]}, "test");
    std::int64_t numel = 1;
    for (auto s : sizes) numel *= s;
    for (std::int64_t i = 0; i < numel; ++i) {
      std::int64_t off[3];
      oc.get(Index(i), off);
      auto want = naive_offsets(sizes, strides, i);
      for (std::size_t k = 0; k < 3; ++k)
        ASSERT_EQ(off[k], want[k]) << "operand " << k << " index " << i << " trial " << trial;
    }
  }
}

TEST(CudaOffsetCalc, MatchesNaiveStridedIndexing) {
  std::mt19937 rng(7);
  check_offsets<std::uint32_t>(rng);
  check_offsets<std::uint64_t>(rng);
}

TEST(CudaOffsetCalc, CoalescesAndRefusesTooManyDims) {
  ferry::TensorArg a;
  a.sizes = {2, 3, 4};
  a.strides = {12, 4, 1};
  auto oc = fc::make_offset_calc<1, std::uint32_t>({&a}, "test");
  EXPECT_EQ(oc.ndim, 1);  // contiguous: one run
  EXPECT_EQ(oc.sizes[0], 24u);
  // 13 dims of size 2, each stride 3x the next: nothing merges.
  ferry::TensorArg b;
  std::int64_t st = 1;
  for (int d = 0; d < 13; ++d) {
    b.sizes.insert(b.sizes.begin(), 2);
    b.strides.insert(b.strides.begin(), st);
    st *= 3;
  }
  EXPECT_THROW((fc::make_offset_calc<1, std::uint64_t>({&b}, "add")), ferry::UnsupportedError);
  EXPECT_TRUE(fc::fits_uint32(std::int64_t(UINT32_MAX)));
  EXPECT_FALSE(fc::fits_uint32(std::int64_t(UINT32_MAX) + 1));
}

// The device pool's size classes over a fake cudaMalloc with `capacity` bytes.
struct FakeCudaMalloc {
  std::uint64_t capacity = UINT64_MAX, used = 0, next = 0x7f0000000000;
  std::map<std::uint64_t, std::uint64_t> live;
  ferry::detail::BlockAllocator make() {
    return ferry::detail::BlockAllocator(
        fc::device_allocator_config(),
        [this](std::uint64_t bytes) -> std::optional<std::uint64_t> {
          if (used + bytes > capacity) return std::nullopt;
          used += bytes;
          next += bytes + 4096;
          live[next] = bytes;
          return next;
        },
        [this](std::uint64_t block) {
          used -= live.at(block);
          live.erase(block);
        });
  }
};

TEST(CudaAllocatorPolicy, SizeClassesFollowPyTorch) {
  FakeCudaMalloc fake;
  auto pool = fake.make();
  EXPECT_EQ(pool.rounded_size(1), 512u);
  EXPECT_EQ(pool.rounded_size(513), 1024u);
  EXPECT_EQ(pool.rounded_size(10 * fc::kMiB), 10 * fc::kMiB);      // still a shared-block size
  EXPECT_EQ(pool.rounded_size(10 * fc::kMiB + 1), 12 * fc::kMiB);  // dedicated, 2 MiB steps
  // Small tensors split one 20 MiB block; freed neighbours merge again.
  auto a = pool.allocate(1000), b = pool.allocate(3 * fc::kMiB);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a.allocation.block, b.allocation.block);
  EXPECT_EQ(fake.live.size(), 1u);
  EXPECT_EQ(fake.used, 20 * fc::kMiB);
  auto big = pool.allocate(30 * fc::kMiB);
  ASSERT_TRUE(big);
  EXPECT_EQ(fake.live.size(), 2u);
  pool.free(big.allocation);
  const std::uint64_t hits = pool.stats().cache_hits;
  auto again = pool.allocate(29 * fc::kMiB);  // the cached dedicated block serves it
  ASSERT_TRUE(again);
  EXPECT_EQ(again.allocation.block, big.allocation.block);
  EXPECT_EQ(pool.stats().cache_hits, hits + 1);
  EXPECT_EQ(fake.live.size(), 2u);
  pool.free(a.allocation);
  pool.free(b.allocation);
  pool.free(again.allocation);
  EXPECT_EQ(pool.check_invariants(), "");
  pool.empty_cache();
  EXPECT_TRUE(fake.live.empty());
}

TEST(CudaAllocatorPolicy, OutOfMemoryReleasesTheCacheBeforeFailing) {
  FakeCudaMalloc fake;
  fake.capacity = 64 * fc::kMiB;
  auto pool = fake.make();
  auto a = pool.allocate(40 * fc::kMiB);
  ASSERT_TRUE(a);
  pool.free(a.allocation);                // cached, 40 MiB held
  auto b = pool.allocate(50 * fc::kMiB);  // fits only once the cached block is released
  ASSERT_TRUE(b);
  EXPECT_EQ(fake.live.size(), 1u);
  auto c = pool.allocate(20 * fc::kMiB);
  EXPECT_EQ(c.status, ferry::detail::AllocStatus::out_of_memory);
  pool.free(b.allocation);
  EXPECT_EQ(pool.check_invariants(), "");
}

}  // namespace
