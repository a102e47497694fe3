// coopmat_gemm.cpp — GEMM buffers, dispatch, inputs and the CPU reference (coopmat.hpp).
#include "coopmat.hpp"

// ----------------------------------------------------------------------------------------------

void bindDescriptors(const Ctx& c, const GemmBuffers& g) {
  VkDescriptorBufferInfo infos[3] = {
      {g.A.buf, 0, VK_WHOLE_SIZE}, {g.B.buf, 0, VK_WHOLE_SIZE}, {g.C.buf, 0, VK_WHOLE_SIZE}};
  VkWriteDescriptorSet w[3];
  for (int i = 0; i < 3; ++i) {
    w[i] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w[i].dstSet = c.descSet;
    w[i].dstBinding = (uint32_t)i;
    w[i].descriptorCount = 1;
    w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(c.device, 3, w, 0, nullptr);
}

// Upload host f16 A and B (with their leading dimensions) into the device buffers.
void uploadInputs(const Ctx& c, GemmBuffers& g, const std::vector<uint16_t>& A,
                  const std::vector<uint16_t>& B) {
  const VkDeviceSize aBytes = A.size() * 2, bBytes = B.size() * 2;
  if (aBytes > g.A.size || bBytes > g.B.size || aBytes + bBytes > g.staging.size)
    die("internal: buffers too small");
  memcpy(g.staging.mapped, A.data(), aBytes);
  memcpy((char*)g.staging.mapped + aBytes, B.data(), bBytes);
  beginCmd(c);
  VkBufferCopy ca{0, 0, aBytes}, cb{aBytes, 0, bBytes};
  vkCmdCopyBuffer(c.cmd, g.staging.buf, g.A.buf, 1, &ca);
  vkCmdCopyBuffer(c.cmd, g.staging.buf, g.B.buf, 1, &cb);
  submitAndWait(c, "upload A/B");
}

void readbackC(const Ctx& c, GemmBuffers& g, VkDeviceSize bytes, std::vector<float>& out) {
  if (bytes > g.staging.size) die("internal: staging too small");
  beginCmd(c);
  VkBufferCopy cc{0, 0, bytes};
  vkCmdCopyBuffer(c.cmd, g.C.buf, g.staging.buf, 1, &cc);
  barrierAll(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
             VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  submitAndWait(c, "readback C");
  out.resize(bytes / 4);
  memcpy(out.data(), g.staging.mapped, bytes);
}

void recordGemm(const Ctx& c, const Variant& v, const Pipeline& p, const Problem& pr) {
  vkCmdBindPipeline(c.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  vkCmdBindDescriptorSets(c.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c.pipeLayout, 0, 1, &c.descSet, 0,
                          nullptr);
  PushConsts pc{pr.M, pr.N, pr.K, pr.lda, pr.ldb, pr.ldc};
  vkCmdPushConstants(c.cmd, c.pipeLayout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(pc), &pc);
  vkCmdDispatch(c.cmd, pr.N / v.bn(), pr.M / v.bm(), 1);
}

const char* problemUnsupported(const Ctx& c, const Variant& v, const Problem& p) {
  if (p.M % v.bm() || p.N % v.bn() || p.K % v.bk) return "M/N/K not multiples of the block tile";
  if (p.lda % 8 || p.ldb % 8 || p.ldc % 4) return "leading dimensions not 16-byte multiples";
  if (p.lda < p.K || p.ldb < p.N || p.ldc < p.N) return "leading dimension too small";
  if (p.N / v.bn() > c.props.limits.maxComputeWorkGroupCount[0] ||
      p.M / v.bm() > c.props.limits.maxComputeWorkGroupCount[1])
    return "too many workgroups";
  return nullptr;
}

void makeInputs(const Problem& p, uint32_t seed, std::vector<uint16_t>& A,
                std::vector<uint16_t>& B) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  A.assign((size_t)p.M * p.lda, 0);
  B.assign((size_t)p.K * p.ldb, 0);
  for (uint32_t i = 0; i < p.M; ++i)
    for (uint32_t k = 0; k < p.lda; ++k)  // padding columns get values too (must be ignored)
      A[(size_t)i * p.lda + k] = floatToHalf(k < p.K ? dist(rng) : 1000.0f);
  for (uint32_t k = 0; k < p.K; ++k)
    for (uint32_t j = 0; j < p.ldb; ++j)
      B[(size_t)k * p.ldb + j] = floatToHalf(j < p.N ? dist(rng) : 1000.0f);
}

double refElem(const Problem& p, const std::vector<float>& Af, const std::vector<float>& Bf,
               uint32_t i, uint32_t j) {
  double s = 0;
  const float* a = &Af[(size_t)i * p.lda];
  for (uint32_t k = 0; k < p.K; ++k) s += (double)a[k] * (double)Bf[(size_t)k * p.ldb + j];
  return s;
}

// Returns true on pass. sampleCount == 0 -> full comparison.
bool compareResult(const Problem& p, const std::vector<uint16_t>& A, const std::vector<uint16_t>& B,
                   const std::vector<float>& Cgpu, uint32_t sampleCount, const char* label) {
  std::vector<float> Af(A.size()), Bf(B.size());
  for (size_t i = 0; i < A.size(); ++i) Af[i] = halfToFloat(A[i]);
  for (size_t i = 0; i < B.size(); ++i) Bf[i] = halfToFloat(B[i]);
  double maxAbsErr = 0, maxAbsRef = 0, errSq = 0, refSq = 0;
  uint64_t nonFinite = 0, checked = 0, printed = 0;
  std::vector<double> refRow;
  auto check = [&](uint32_t i, uint32_t j, double ref) {
    float g = Cgpu[(size_t)i * p.ldc + j];
    ++checked;
    maxAbsRef = std::max(maxAbsRef, std::fabs(ref));
    refSq += ref * ref;
    if (!std::isfinite(g)) {
      if (nonFinite++ < 5)
        printf("    [%s] C[%u][%u] = %g (non-finite; expected %.6f)\n", label, i, j, g, ref);
      return;
    }
    double e = std::fabs((double)g - ref);
    errSq += e * e;
    if (e > maxAbsErr) maxAbsErr = e;
    if (e > 0.05 + 0.01 * std::fabs(ref) && printed < 8) {
      ++printed;
      printf("    [%s] mismatch C[%u][%u]: gpu %.6f  ref %.6f  (|diff| %.3g)\n", label, i, j, g,
             ref, e);
    }
  };
  if (sampleCount == 0) {
    // Full reference, i-k-j loop order in double.
    refRow.assign(p.N, 0.0);
    for (uint32_t i = 0; i < p.M; ++i) {
      std::fill(refRow.begin(), refRow.end(), 0.0);
      for (uint32_t k = 0; k < p.K; ++k) {
        double a = Af[(size_t)i * p.lda + k];
        const float* b = &Bf[(size_t)k * p.ldb];
        for (uint32_t j = 0; j < p.N; ++j) refRow[j] += a * (double)b[j];
      }
      for (uint32_t j = 0; j < p.N; ++j) check(i, j, refRow[j]);
    }
  } else {
    std::mt19937 rng(12345);
    for (uint32_t s = 0; s < sampleCount; ++s) {
      uint32_t i = rng() % p.M, j = rng() % p.N;
      if (s < 4) {
        i = s & 1 ? p.M - 1 : 0;
        j = s & 2 ? p.N - 1 : 0;
      }  // corners
      check(i, j, refElem(p, Af, Bf, i, j));
    }
  }
  const double relMax = maxAbsRef > 0 ? maxAbsErr / maxAbsRef : maxAbsErr;
  const double relFro = refSq > 0 ? std::sqrt(errSq / refSq) : std::sqrt(errSq);
  const bool pass = nonFinite == 0 && relMax <= 1e-2 && relFro <= 1e-2;
  printf("  [%s] %s: checked %" PRIu64
         " elements: max|err| = %.3e, max|ref| = %.3e, rel err (max) = %.3e, "
         "rel err (Frobenius) = %.3e, non-finite = %" PRIu64 "\n",
         label, pass ? "PASS" : "FAIL", checked, maxAbsErr, maxAbsRef, relMax, relFro, nonFinite);
  if (!pass)
    printf("  !!!!!!!! [%s] CORRECTNESS FAILURE (threshold rel err 1e-2) !!!!!!!!\n", label);
  fflush(stdout);
  return pass;
}
