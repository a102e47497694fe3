// shaders/triangular_solve.comp — solve_triangular: X with T X = B, T triangular, by
// substitution (the CPU calls BLAS's trsm; the composition, runtime/ops_factorize.cpp's
// substitute, costs several dispatches a row). A workgroup solves one column of one matrix:
// step s finishes row i (s for lower T, n - 1 - s for upper), x_i = X_i / T_ii, and every row
// still unsolved takes x_i's term off, X_k -= T_ki x_i, in parallel.
//
// Row k of X belongs to thread k % WG: only its owner reads or writes it (B's copy included), so
// X needs no coherence between threads; x_i goes from its owner to the others through one shared
// value, between two barriers a step. PER_THREAD (small n: a batch of 4 x 4 systems would leave
// most of a workgroup idle, and pay two barriers a row for a few products; and columns enough to
// fill a workgroup, which then keep the threads busy without the barriers): each thread solves
// a column alone, owning every row, with no barrier. A dispatch takes the steps [s0, s1) that fit
// the loop budget (Note [Loop budget] in runtime/vulkan/vk_kernels.hpp); the next goes on from
// what X holds. Binding 3 is X's range again, bound for reading so that the host's barriers see
// the reads of one range's X by the next; the shader reads X through binding 0.
// ferry-f64-ops: solve_triangular
//
// Specialization and push constants: shaders/abi/triangular_solve.h.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "abi/triangular_solve.h"  // spec and push constants: shared with the host

FERRY_TENSOR(0, x)
FERRY_TENSOR(1, t)
FERRY_TENSOR(2, b)
FERRY_TENSOR(3, x_read)  // unused: binding 0's range, declared read (above)

#ifdef FERRY_F64
#define F(N) N##_f64
#else
#define F(N) N##_f32
#endif

shared FTYPE s_xi;  // the row just solved
#define WG gl_WorkGroupSize.x

void main() {
  const uint lane = PER_THREAD ? 0u : gl_LocalInvocationID.x;
  const uint lanes = PER_THREAD ? 1u : WG;  // the threads that share a column
  const uint g = p.g0 + (PER_THREAD ? gl_GlobalInvocationID.x : gl_WorkGroupID.x);
  // A whole workgroup leaves together (g is the workgroup's), or a spare thread (PER_THREAD).
  if (g >= p.pairs) return;
  const uint matrix = g / p.cols, col = g % p.cols;
  const uint xb = p.off_x + matrix * p.x_batch + col * p.x_col;
  const uint tb = p.off_t + matrix * p.t_batch;
  const uint n = p.n;
  if (p.copy != 0u) {
    const uint bb = p.off_b + matrix * p.x_batch + col * p.x_col;
    for (uint r = lane; r < n; r += lanes) F(x)[xb + r * p.x_row] = F(b)[bb + r * p.x_row];
  }
  for (uint s = p.s0; s < p.s1; ++s) {
    const uint i = UPPER ? n - 1u - s : s;
    FTYPE v = FTYPE(0);
    if (i % lanes == lane) {
      v = F(x)[xb + i * p.x_row];
      if (!UNIT) v /= F(t)[tb + i * (p.t_row + p.t_col)];
      F(x)[xb + i * p.x_row] = v;
      if (!PER_THREAD) s_xi = v;
    }
    if (!PER_THREAD) {
      barrier();
      v = s_xi;
    }
    // The rows not yet solved that this thread owns: above i (upper T) or below it (lower).
    uint k = UPPER ? lane : i + 1u + (lane + lanes - (i + 1u) % lanes) % lanes;
    const uint end = UPPER ? i : n;
    for (; k < end; k += lanes) F(x)[xb + k * p.x_row] -= F(t)[tb + k * p.t_row + i * p.t_col] * v;
    if (!PER_THREAD) barrier();  // s_xi is read before the next step's owner writes it
  }
}
