// runtime/cpu/cpu_blas.cpp — which library multiplies the CPU kernels' matrices (cpu_blas.hpp).
//
// Note [OpenBLAS's kernels]
// OpenBLAS picks its kernels by CPU model when it loads, and Debian 12's 0.3.21 does not know
// every newer model: on a VM naming itself "Intel(R) Xeon(R) Processor" it ran its generic
// Prescott (SSE3) kernels, three times slower than its AVX-512 ones on a convolution's GEMM
// (docs/benchmarks-cpu.md, 2026-11-27). OPENBLAS_CORETYPE, with any value, makes it choose by
// the CPU's features instead, but it is read before ferry's code runs, so ferry cannot set it
// for the process. oneDNN's sgemm, which ferry loads for the convolutions anyway (onednn.hpp),
// picks its kernels by features. So where OpenBLAS's kernels leave out the AVX2 the CPU has
// and oneDNN loads, f32 products go to oneDNN's sgemm; f64 (oneDNN has no dgemm) stays on
// OpenBLAS. The cpu device names the kernels in its driver string and says so once in the
// log: a warning where oneDNN is off, at info level where it takes the f32 products.
// Measured on a 2-core AMD EPYC with AVX2 (2026-11-29), OpenBLAS forced to Prescott with
// OPENBLAS_CORETYPE against oneDNN 2.6.3, GFLOP/s: [128, 64] x [64, 784] 24 against 108;
// 1024^3 21 against 130; [256, 576] x [576, 3136] 24 against 130. Where OpenBLAS knows the CPU
// it keeps every product: there oneDNN was 1.1 to 1.8x faster on most shapes but 0.68 on a
// 512^3 product with A transposed, too mixed to move every machine's matmuls on one VM's
// figures.
#include "cpu/cpu_blas.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <strings.h>

#include <cstdlib>
#include <mutex>

#include "cpu/onednn.hpp"
#include "ferry/error.hpp"
#include "log_internal.hpp"

namespace ferry::cpu {
namespace {

std::string openblas_kernels() {
  const char* core = openblas_get_corename();
  return core && *core ? core : "unknown";
}

bool leaves_out_avx2(const std::string& core) {
  if (!__builtin_cpu_supports("avx2")) return false;
  for (const char* k : {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids", "excavator"})
    if (strcasecmp(core.c_str(), k) == 0) return false;
  return true;
}

struct Choice {
  std::string kernels;
  bool generic = false;     // OpenBLAS's kernels leave out the CPU's AVX2
  bool f32_onednn = false;  // f32 products go to oneDNN's sgemm
};

// FERRY_CPU_SGEMM=auto (the rule above), openblas or onednn (to measure or test either; onednn
// falls back to OpenBLAS where oneDNN is off).
const Choice& choice() {
  static const Choice c = [] {
    Choice c;
    c.kernels = openblas_kernels();
    c.generic = leaves_out_avx2(c.kernels);
    const char* env = std::getenv("FERRY_CPU_SGEMM");
    const std::string how = env && *env ? env : "auto";
    if (how != "auto" && how != "openblas" && how != "onednn")
      throw ValueError(
          fmt::format("FERRY_CPU_SGEMM must be auto, openblas or onednn, got '{}'", how));
    c.f32_onednn = how != "openblas" && (c.generic || how == "onednn") && onednn::has_sgemm();
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
    if (!c.generic) return;
    const char* forced = std::getenv("OPENBLAS_CORETYPE");
    // A warning where nothing makes up for it; where oneDNN takes the f32 products, which are
    // most of a model's, the same line at info level (a warning in every process's output
    // would also land in the output programs parse).
    FERRY_LOG_AT(
        c.f32_onednn ? LogLevel::info : LogLevel::warn,
        "cpu: OpenBLAS runs its {} kernels on this CPU, which has AVX2{}; {}. {} (Note "
        "[OpenBLAS's kernels] in runtime/cpu/cpu_blas.cpp)",
        c.kernels, __builtin_cpu_supports("avx512f") ? " and AVX-512" : "",
        forced ? fmt::format("OPENBLAS_CORETYPE={} asked for them", forced)
               : std::string("it does not know the model, and OPENBLAS_CORETYPE=Haswell (any "
                             "value) set before the program starts makes it choose by the "
                             "CPU's features"),
        c.f32_onednn ? "f32 products go to oneDNN's sgemm; f64 ones stay on those kernels."
                     : "Every product runs on those kernels (oneDNN, which would take f32, is "
                       "off).");
  });
}

}  // namespace ferry::cpu
