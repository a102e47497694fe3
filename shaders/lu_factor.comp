// shaders/lu_factor.comp — lu_factor_ex: LU with partial pivoting of each m x n matrix, in
// place in LU (the host copied A there), LAPACK's getf2 step by step (the CPU calls getrf; the
// composition, runtime/ops_factorize.cpp's eliminate, costs several dispatches a column). Step
// j takes the first row r >= j of largest |LU[r][j]| as the pivot (pivots[j] = r + 1), swaps
// rows j and r, divides the rows below j of column j by the pivot (the multipliers; a zero
// pivot leaves them as they are and, the first time, sets info = j + 1) and takes each row's
// multiple of row j off the columns right of j.
//
// A workgroup factors one matrix. Column c belongs to thread c % WG: only its owner reads or
// writes it, so LU needs no coherence between threads. Column j's owner searches for the pivot
// and makes the multipliers; the pivot row goes to the others through a shared value, the
// multipliers through a shared array, FERRY_LU_FACTOR_CHUNK rows at a time, each between two
// barriers. PER_THREAD (small n: a batch of 4 x 4 matrices would leave most of a workgroup
// idle, and pay the barriers for a few products): each thread factors a matrix alone, owning
// every column, with no barrier. The host cuts the steps, and a step's rows, into dispatches
// within the loop budget (shaders/abi/lu_factor.h). Bindings 3 and 4 are LU's and info's
// ranges again, bound for reading so that the host's barriers see one dispatch's reads of what
// the last one wrote; the shader reads them through bindings 0 and 2.
// ferry-f64-ops: lu_factor_ex
//
// Specialization and push constants: shaders/abi/lu_factor.h.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/lu_factor.h"  // spec and push constants: shared with the host

FERRY_TENSOR(0, lu)
FERRY_TENSOR(1, piv)
FERRY_TENSOR(2, info)
FERRY_TENSOR(3, lu_read)    // unused: binding 0's range, declared read (above)
FERRY_TENSOR(4, info_read)  // unused: binding 2's range, declared read

#ifdef FERRY_F64
#define F(N) N##_f64
#else
#define F(N) N##_f32
#endif

#define CHUNK uint(FERRY_LU_FACTOR_CHUNK)
shared FTYPE s_mult[FERRY_LU_FACTOR_CHUNK];  // the multipliers of a chunk of rows
shared uint s_pivot;                         // the pivot row of the step
shared uint s_zero;                          // info so far

void main() {
  const uint lane = PER_THREAD ? 0u : gl_LocalInvocationID.x;
  const uint lanes = PER_THREAD ? 1u : gl_WorkGroupSize.x;  // the threads that share a matrix
  const uint g = PER_THREAD ? gl_GlobalInvocationID.x : gl_WorkGroupID.x;
  // A whole workgroup leaves together (g is the workgroup's), or a spare thread (PER_THREAD).
  if (g >= p.matrices) return;
  const uint m = p.m, n = p.n, k = min(m, n);
  const uint base = p.off_lu + g * m * n;
#define AT(r, c) F(lu)[base + (r) * n + (c)]
  uint zero = 0u;  // info, in the thread that holds it: PER_THREAD's, or lane 0 into s_zero
  if (lane == 0u) {
    zero = p.first != 0u ? 0u : info_u32[p.off_info + g];
    if (!PER_THREAD) s_zero = zero;
  }
  if (!PER_THREAD) barrier();
  for (uint j = p.j0; j < p.j1; ++j) {
    const uint rb = j == p.j0 ? p.r0 : j + 1u;  // this dispatch's rows of the step
    const uint re = j + 1u == p.j1 ? p.r1 : m;
    const uint owner = j % lanes;
    if (rb == j + 1u) {  // the step begins: find the pivot, swap its row up
      uint q = j;
      if (lane == owner) {
        FTYPE best = FTYPE(-1);
        for (uint r = j; r < m; ++r) {
          const FTYPE v = abs(AT(r, j));
          if (v > best) {
            best = v;
            q = r;
          }
        }
        piv_u32[p.off_pivots + g * k + j] = q + 1u;
        if (AT(q, j) == FTYPE(0)) {
          if (PER_THREAD) {
            if (zero == 0u) zero = j + 1u;
          } else if (s_zero == 0u) {
            s_zero = j + 1u;
          }
        }
        if (!PER_THREAD) s_pivot = q;
      }
      if (!PER_THREAD) {
        barrier();
        q = s_pivot;
      }
      if (q != j)
        for (uint c = lane; c < n; c += lanes) {
          const FTYPE t = AT(j, c);
          AT(j, c) = AT(q, c);
          AT(q, c) = t;
        }
    }
    // The columns right of j that this thread owns, from the first.
    const uint c0 = j + 1u + (lane + lanes - (j + 1u) % lanes) % lanes;
    for (uint r0 = rb; r0 < re; r0 += CHUNK) {
      const uint r1 = min(r0 + CHUNK, re);
      if (lane == owner) {
        const FTYPE d = AT(j, j);
        for (uint r = r0; r < r1; ++r) {
          FTYPE l = AT(r, j);
          if (d != FTYPE(0)) l /= d;
          AT(r, j) = l;
          if (!PER_THREAD) s_mult[r - r0] = l;
        }
      }
      if (!PER_THREAD) barrier();
      for (uint c = c0; c < n; c += lanes) {
        const FTYPE u = AT(j, c);
        for (uint r = r0; r < r1; ++r) AT(r, c) -= (PER_THREAD ? AT(r, j) : s_mult[r - r0]) * u;
      }
      if (!PER_THREAD) barrier();  // s_mult is read before the owner writes the next chunk
    }
    if (!PER_THREAD) barrier();  // s_pivot is read before the next step's owner writes it
  }
  if (!PER_THREAD) {
    if (lane == 0u) zero = s_zero;  // written by owners before the last barrier
  }
  if (lane == 0u) info_u32[p.off_info + g] = zero;
}
