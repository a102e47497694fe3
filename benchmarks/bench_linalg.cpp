// benchmarks/bench_linalg.cpp — the factorizations and solvers (bench_linalg.hpp): ferry on the
// CPU (LAPACK for cholesky, lu_factor, solve, qr, eigh and svd, BLAS's trsm for solve_triangular)
// beside PyTorch's LAPACK calls (libtorch) in this process and beside ferry's own composition
// (debug::CompositesOnly: what every other device runs); and on vulkan:0 beside ferry's CPU. Inputs
// made once; a step ends when the result is on the host side of the device (vulkan:0 synchronized).
#include "bench_linalg.hpp"

#include <fmt/format.h>

#include <functional>
#include <string>

#include "bench_common.hpp"
#include "ferry/ferry.hpp"

namespace bench {
namespace {

using linalg::Case;

// The step for `c` on `device`, its inputs made as bench_linalg.hpp says.
std::function<void()> linalg_step(const ferry::Device& device, const Case& c) {
  ferry::manual_seed(0);
  const ferry::TensorOptions on{.device = device};
  ferry::Shape shape = {c.n, c.n};
  if (c.batch > 0) shape.insert(shape.begin(), c.batch);
  const ferry::Tensor x = ferry::uniform(shape, -1, 1, on);
  const ferry::Tensor eye = ferry::eye(c.n, std::nullopt, on);
  ferry::Shape bs = shape;
  bs.back() = c.rhs;
  const ferry::Tensor b = ferry::uniform(bs, -1, 1, on);
  const std::string op = c.op;
  std::function<ferry::Tensor()> call;
  if (op == "solve") {
    const ferry::Tensor a = x + eye * double(c.n);
    call = [a, b] { return ferry::linalg::solve(a, b); };
  } else if (op == "solve+backward") {
    const ferry::Tensor a = (x + eye * double(c.n)).requires_grad_();
    const ferry::Tensor bg = b.detach().requires_grad_();
    call = [a, bg] {
      const ferry::Tensor y = ferry::sum(ferry::linalg::solve(a, bg));
      y.backward();
      return y;
    };
  } else if (op == "det+backward" || op == "slogdet+backward") {
    const ferry::Tensor a = (x + eye * double(c.n)).requires_grad_();
    const bool det = op == "det+backward";
    call = [a, det] {
      const ferry::Tensor y =
          ferry::sum(det ? ferry::linalg::det(a) : ferry::linalg::slogdet(a).second);
      y.backward();
      return y;
    };
  } else if (op == "solve_triangular") {
    const ferry::Tensor a = x + eye * double(c.n);
    call = [a, b] { return ferry::linalg::solve_triangular(a, b, false); };
  } else if (op == "cholesky") {
    const ferry::Tensor a = ferry::matmul(x, x.transpose(-2, -1)) + eye;
    call = [a] { return ferry::linalg::cholesky(a); };
  } else if (op == "cholesky+backward") {
    const ferry::Tensor a = (ferry::matmul(x, x.transpose(-2, -1)) + eye).requires_grad_();
    call = [a] {
      const ferry::Tensor y = ferry::sum(ferry::linalg::cholesky(a));
      y.backward();
      return y;
    };
  } else if (op == "lu_factor") {
    const ferry::Tensor a = x + eye * double(c.n);
    call = [a] { return ferry::linalg::lu_factor(a).first; };
  } else if (op == "qr+backward") {
    const ferry::Tensor a = x.detach().requires_grad_();
    call = [a] {
      const auto [q, r] = ferry::linalg::qr(a);
      const ferry::Tensor y = ferry::sum(q) + ferry::sum(r);
      y.backward();
      return y;
    };
  } else if (op == "qr") {
    call = [x] { return ferry::linalg::qr(x).second; };
  } else if (op == "svd") {
    call = [x] { return ferry::linalg::svd(x).S; };
  } else if (op == "svd+backward") {
    const ferry::Tensor a = x.detach().requires_grad_();
    call = [a] {
      const ferry::linalg::SVD f = ferry::linalg::svd(a, false);
      const ferry::Tensor y = ferry::sum(f.S) + ferry::sum(ferry::matmul(f.U, f.Vh));
      y.backward();
      return y;
    };
  } else if (op == "pinv") {
    call = [x] { return ferry::linalg::pinv(x); };
  } else if (op == "svdvals") {
    call = [x] { return ferry::linalg::svdvals(x); };
  } else if (op == "matrix_exp") {
    call = [x] { return ferry::linalg::matrix_exp(x); };
  } else if (op == "lstsq") {
    const ferry::Tensor a = x + eye * double(c.n);
    call = [a, b] { return ferry::linalg::lstsq(a, b).solution; };
  } else {
    const ferry::Tensor a = x + x.transpose(-2, -1);
    call = [a] { return ferry::linalg::eigh(a).second; };
  }
  return [call, device] {
    call();
    if (!device.is_cpu()) ferry::synchronize(device);
  };
}

}  // namespace

void register_linalg() {
  for (const Case& full : linalg::kCases) {
    const Case c = linalg::sized(full, quick());
    const std::string shape = c.batch > 0 ? fmt::format("[{}, {}, {}]", c.batch, c.n, c.n)
                                          : fmt::format("[{}, {}]", c.n, c.n);
    const std::string base = c.rhs > 1 ? fmt::format("linalg {} {}, {} columns", c.op, shape, c.rhs)
                                       : fmt::format("linalg {} {}", c.op, shape);
    std::function<void()> torch_step;
#ifdef FERRY_BENCH_HAVE_TORCH
    linalg::torch_setup(c);
    torch_step = [c] { linalg::torch_step(c); };
#endif
    auto run = [c](benchmark::State& s, const std::string& device) {
      time_steps(s, device, [c](const ferry::Device& d) { return linalg_step(d, c); });
    };
    register_step_rows(base, base, quick() ? 3 : 20, run, torch_step);
    // The CPU runs every case through LAPACK or BLAS (Note [LAPACK through OpenBLAS]): the
    // composition too, what every other device runs.
    const std::string op = c.op;
    register_composition_row(base, base, quick() ? 3 : 20, run,
                             op == "solve_triangular" ? "BLAS trsm" : "LAPACK");
    // Vulkan's kernels (lu_factor_ex, cholesky, solve_triangular, and LU's pivots as a
    // permutation) serve these; the rest of each runs as the composition either way.
    for (const char* served :
         {"solve", "lu_factor", "solve_triangular", "cholesky", "cholesky+backward",
          "solve+backward", "det+backward", "slogdet+backward"})
      if (op == served) register_composition_row(base, base, 1, run, "Vulkan kernels", "vulkan:0");
  }
}

}  // namespace bench
