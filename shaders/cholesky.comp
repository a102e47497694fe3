// shaders/cholesky.comp — cholesky: L with A = L L^T of each n x n matrix, from A's lower
// triangle, step by step as LAPACK's potf2 takes them (the CPU calls potrf; the composition,
// runtime/ops_factorize.cpp's cholesky_lower, costs several dispatches a column). Step j takes
// the root of the diagonal entry (NaN where it is not positive: the core's check names the
// order, and the NaN runs through the rest), divides the rows below j of column j by it (L's
// column j) and takes each row's multiple of row j off the columns right of j.
//
// A workgroup factors one matrix, as shaders/lu_factor.comp does: column c belongs to thread
// c % WG, and only its owner reads or writes it, so L needs no coherence between threads. Column
// j's owner passes the root through a shared value and the multipliers (L's column j) through a
// shared array, FERRY_CHOLESKY_CHUNK rows at a time, each between two barriers. The update of
// column c, rows c on, needs L[c][j] too, which comes in the chunk that holds row c: the owner
// keeps it for the step's later chunks in row j of column c, above the diagonal, which nothing
// else reads, and zeroes it when the step ends (the upper triangle ends zero). PER_THREAD
// (small n): each thread factors a matrix alone, owning every column, with no barrier. The host
// copied A into L and cuts the steps, and a step's rows, into dispatches within the loop budget
// (shaders/abi/cholesky.h). Binding 1 is L's range again, bound for reading so that the host's
// barriers see one dispatch's reads of what the last one wrote; the shader reads it through
// binding 0.
// ferry-f64-ops: cholesky
//
// Specialization and push constants: shaders/abi/cholesky.h.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/cholesky.h"  // spec and push constants: shared with the host

FERRY_TENSOR(0, l)
FERRY_TENSOR(1, l_read)  // unused: binding 0's range, declared read (above)

#ifdef FERRY_F64
#define F(N) N##_f64
#else
#define F(N) N##_f32
#endif

#define CHUNK uint(FERRY_CHOLESKY_CHUNK)
shared FTYPE s_mult[FERRY_CHOLESKY_CHUNK];  // L's column j in a chunk of rows
shared FTYPE s_root;                        // L[j][j]

void main() {
  const uint lane = PER_THREAD ? 0u : gl_LocalInvocationID.x;
  const uint lanes = PER_THREAD ? 1u : gl_WorkGroupSize.x;  // the threads that share a matrix
  const uint g = PER_THREAD ? gl_GlobalInvocationID.x : gl_WorkGroupID.x;
  // A whole workgroup leaves together (g is the workgroup's), or a spare thread (PER_THREAD).
  if (g >= p.matrices) return;
  const uint n = p.n, base = p.off_l + g * n * n;
#define AT(r, c) F(l)[base + (r) * n + (c)]
#define MULT(r) (PER_THREAD ? AT(r, j) : s_mult[(r) - r0])
  for (uint j = p.j0; j < p.j1; ++j) {
    const uint rb = j == p.j0 ? p.r0 : j + 1u;  // this dispatch's rows of the step
    const uint re = j + 1u == p.j1 ? p.r1 : n;
    const uint owner = j % lanes;
    FTYPE root = FTYPE(0);
    if (lane == owner) {
      if (rb == j + 1u) {  // the step begins: the diagonal entry's root
        const FTYPE d = AT(j, j);
        AT(j, j) = d > FTYPE(0) ? sqrt(d) : FTYPE(F_NAN);
      }
      root = AT(j, j);
      if (!PER_THREAD) s_root = root;
    }
    if (!PER_THREAD) {
      barrier();
      root = s_root;
    }
    // The columns right of j that this thread owns, from the first.
    const uint c0 = j + 1u + (lane + lanes - (j + 1u) % lanes) % lanes;
    for (uint r0 = rb; r0 < re; r0 += CHUNK) {
      const uint r1 = min(r0 + CHUNK, re);
      if (lane == owner)
        for (uint r = r0; r < r1; ++r) {
          const FTYPE x = AT(r, j) / root;
          AT(r, j) = x;
          if (!PER_THREAD) s_mult[r - r0] = x;
        }
      if (!PER_THREAD) barrier();
      for (uint c = c0; c < r1; c += lanes) {  // the columns with rows in the chunk
        if (c >= r0) AT(j, c) = MULT(c);        // L[c][j], kept for the step (above)
        const FTYPE u = AT(j, c);
        for (uint r = max(r0, c); r < r1; ++r) AT(r, c) -= MULT(r) * u;
      }
      if (!PER_THREAD) barrier();  // s_mult is read before the owner writes the next chunk
    }
    if (re == n)  // the step ends: its entries above the diagonal are L's zeros again
      for (uint c = c0; c < n; c += lanes) AT(j, c) = FTYPE(0);
    if (!PER_THREAD) barrier();  // s_root is read before the next step's owner writes it
  }
}
