// benchmarks/bench_linalg.hpp — the factorizations and solvers of ferry/ops_linalg.hpp at the
// sizes models use them at, ferry's (compositions of batched element-wise ops, Note [Linear
// algebra as compositions]) in bench_linalg.cpp, PyTorch's (LAPACK through libtorch, in this
// process) in bench_linalg_torch.cpp: the same inputs and the same work.
#pragma once

#include <cstdint>
#include <string>

namespace bench::linalg {

// One case: `op` on a [batch, n, n] input (batch 0: a single [n, n] matrix); solve's and
// solve_triangular's B is [batch, n, rhs] (rhs columns: 1, or n as a gradient's or an inverse's
// right-hand sides are). The inputs are made well-posed the same way on both
// sides: a random matrix plus n I (solve, lu_factor, det, slogdet, solve_triangular, which
// reads its lower triangle, lstsq), X X^T + I (cholesky), X + X^T (eigh), X (qr, svd, pinv,
// svdvals, matrix_exp).
// "+backward": the op, then the backward of its result's sum to A (and B), the inputs leaves
// that require grad (slogdet's: logabsdet's sum; svd's: sum(S) + sum(U Vh), reduced, which the
// singular vectors' signs do not change).
struct Case {
  const char* op;
  std::int64_t batch, n;
  std::int64_t rhs = 1;
};
inline constexpr Case kCases[] = {{"solve", 4096, 4},
                                  {"cholesky", 0, 64},
                                  {"cholesky", 0, 256},
                                  {"lu_factor", 0, 64},
                                  {"lu_factor", 0, 256},
                                  {"qr", 0, 64},
                                  {"eigh", 0, 32},
                                  {"solve_triangular", 0, 64},
                                  {"solve_triangular", 0, 256, 256},
                                  {"cholesky+backward", 0, 64},
                                  {"solve+backward", 4096, 4},
                                  {"det+backward", 4096, 4},
                                  {"slogdet+backward", 0, 64},
                                  {"qr+backward", 0, 64},
                                  {"svd", 0, 64},
                                  {"svd", 4096, 4},
                                  {"svd+backward", 0, 32},
                                  {"pinv", 0, 64},
                                  {"lstsq", 0, 64, 8},
                                  {"svdvals", 0, 64},
                                  {"matrix_exp", 0, 64},
                                  {"matrix_exp", 4096, 3}};
// --quick: every case on a [4, 6, 6] batch (and a [4, 6, 6] B where B has more than a column).
inline Case sized(const Case& c, bool quick) {
  return quick ? Case{c.op, 4, 6, c.rhs > 1 ? 6 : 1} : c;
}

#ifdef FERRY_BENCH_HAVE_TORCH
// PyTorch's side: torch.linalg's call for `c` on inputs made once (setup) per case.
void torch_setup(const Case& c);
void torch_step(const Case& c);
#endif

}  // namespace bench::linalg
