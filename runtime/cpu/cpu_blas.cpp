// runtime/cpu/cpu_blas.cpp — which library multiplies the CPU kernels' matrices (cpu_blas.hpp).
//
// Note [OpenBLAS's kernels]
// OpenBLAS picks its kernels by CPU model when it loads, and Debian 12's 0.3.21 does not know
// every newer model: on a VM naming itself "Intel(R) Xeon(R) Processor" it ran its generic
// Prescott (SSE3) kernels, three times slower than its AVX-512 ones on a convolution's GEMM
// (docs/benchmarks-cpu.md, 2026-11-27). OPENBLAS_CORETYPE, with any value, makes it choose by
// the CPU's features instead, but it is read before ferry's code runs, so ferry cannot set it
// for the process. oneDNN's sgemm, which ferry loads for the convolutions anyway (onednn.hpp),
// picks its kernels by features. So where OpenBLAS's kernels leave out the widest vectors the
// CPU has (AVX2, or AVX-512) and oneDNN loads, f32 products go to oneDNN's sgemm; f64 (oneDNN
// has no dgemm) stays on OpenBLAS. The cpu device names the kernels in its driver string and says
// so once in the log: a warning where oneDNN is off, at info level where it takes the f32 products.
// Measured on a 2-core AMD EPYC with AVX2 (2026-11-29), OpenBLAS forced to Prescott with
// OPENBLAS_CORETYPE against oneDNN 2.6.3, GFLOP/s: [128, 64] x [64, 784] 24 against 108;
// 1024^3 21 against 130; [256, 576] x [576, 3136] 24 against 130. Where OpenBLAS knows the CPU
// it keeps every product: there oneDNN was 1.1 to 1.8x faster on most shapes but 0.68 on a
// 512^3 product with A transposed, too mixed to move every machine's matmuls on one VM's
// figures. That held for AVX2 kernels on an AVX2 CPU. On a 2-core AMD EPYC with AVX-512
// (2026-12-01), whose environment set OPENBLAS_CORETYPE=Haswell, 0.3.21 ran its AVX2 kernels,
// and oneDNN's sgemm was 1.6 to 3.0x OpenBLAS on every shape of ferry-bench's gemm_f32 (1024^3:
// 454 against 228 GFLOP/s), the GPT training step 1.4x and the MLP step 1.2x faster: kernels a
// vector width short are the same case as generic ones. (Left to choose, OpenBLAS ran its
// Cooperlake AVX-512 kernels there and keeps the products, though it was 0.62 to 0.94 of
// oneDNN's speed on those shapes, 64x4096x4096 the worst: one more VM's figures.)
#include "cpu/cpu_blas.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <strings.h>

#include <cstdlib>
#include <mutex>

#include "cpu/onednn.hpp"
#include "ferry/error.hpp"
#include "ferry/kit/env.hpp"
#include "log_internal.hpp"

namespace ferry::cpu {
namespace {

std::string openblas_kernels() {
  const char* core = openblas_get_corename();
  return core && *core ? core : "unknown";
}

// OpenBLAS's kernels with AVX-512, and with AVX2 (0.3.21's names).
constexpr const char* kAvx512Kernels[] = {"skylakex", "cooperlake", "sapphirerapids"};
constexpr const char* kAvx2Kernels[] = {"haswell", "zen", "excavator"};

template <std::size_t N> bool is_one_of(const std::string& core, const char* const (&names)[N]) {
  for (const char* k : names)
    if (strcasecmp(core.c_str(), k) == 0) return true;
  return false;
}

// The widest vectors the CPU has that OpenBLAS's kernels leave out: "AVX-512", "AVX2", or
// nothing.
std::string vectors_left_out(const std::string& core) {
  const bool avx512 = is_one_of(core, kAvx512Kernels);
  if (__builtin_cpu_supports("avx512f") && !avx512) return "AVX-512";
  if (__builtin_cpu_supports("avx2") && !avx512 && !is_one_of(core, kAvx2Kernels)) return "AVX2";
  return "";
}

struct Choice {
  std::string kernels;
  std::string narrow;       // the CPU's vectors that OpenBLAS's kernels leave out, if any
  bool f32_onednn = false;  // f32 products go to oneDNN's sgemm
};

// FERRY_CPU_SGEMM=auto (the rule above), openblas or onednn (to measure or test either; onednn
// falls back to OpenBLAS where oneDNN is off).
const Choice& choice() {
  static const Choice c = [] {
    Choice c;
    c.kernels = openblas_kernels();
    c.narrow = vectors_left_out(c.kernels);
    const std::string how =
        kit::env::choice("FERRY_CPU_SGEMM", {"auto", "openblas", "onednn"}, "auto");
    c.f32_onednn =
        how != "openblas" && (!c.narrow.empty() || how == "onednn") && onednn::has_sgemm();
    return c;
  }();
  return c;
}

}  // namespace

void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc) {
  if (choice().f32_onednn && onednn::sgemm(ta, tb, M, N, K, a, lda, b, ldb, beta, c, ldc)) return;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M),
              int(N), int(K), 1.0f, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c,
          std::int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M),
              int(N), int(K), 1.0, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

std::string blas_status() {
  const Choice& c = choice();
  return fmt::format("OpenBLAS ({} kernels{})", c.kernels,
                     c.f32_onednn ? "; f32 products through oneDNN's sgemm" : "");
}

void warn_about_blas_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const Choice& c = choice();
    if (c.narrow.empty()) return;
    const char* forced = std::getenv("OPENBLAS_CORETYPE");
    // A warning where nothing makes up for it; where oneDNN takes the f32 products, which are
    // most of a model's, the same line at info level (a warning in every process's output
    // would also land in the output programs parse).
    FERRY_LOG_AT(
        c.f32_onednn ? LogLevel::info : LogLevel::warn,
        "cpu: OpenBLAS runs its {} kernels on this CPU, which has AVX2{}, without its {}; {}. "
        "{} (Note [OpenBLAS's kernels] in runtime/cpu/cpu_blas.cpp)",
        c.kernels, __builtin_cpu_supports("avx512f") ? " and AVX-512" : "", c.narrow,
        forced ? fmt::format("OPENBLAS_CORETYPE={} asked for them", forced)
        : !is_one_of(c.kernels, kAvx2Kernels)
            ? std::string("it does not know the model, and OPENBLAS_CORETYPE=Haswell (any "
                          "value) set before the program starts makes it choose by the CPU's "
                          "features")
            : std::string("they are what this OpenBLAS has for the model"),
        c.f32_onednn ? "f32 products go to oneDNN's sgemm; f64 ones stay on those kernels."
                     : "Every product runs on those kernels (oneDNN, which would take f32, is "
                       "off).");
  });
}

}  // namespace ferry::cpu
