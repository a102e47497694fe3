// benchmarks/bench_linalg_torch.cpp — PyTorch's side of the linalg benchmark (bench_linalg.cpp):
// torch.linalg through libtorch in ferry-bench's process, on the CPU (LAPACK), with libtorch's
// own threads.
#include <torch/torch.h>

#include <map>
#include <string>

#include "bench_linalg.hpp"

namespace bench::linalg {
namespace {

struct Inputs {
  torch::Tensor a, b;
};

std::map<std::string, Inputs>& inputs() {
  static std::map<std::string, Inputs> in;
  return in;
}

// Cases of one op differ in their sizes.
std::string key(const Case& c) {
  return std::string(c.op) + " " + std::to_string(c.batch) + " " + std::to_string(c.n) + " " +
         std::to_string(c.rhs);
}

}  // namespace

void torch_setup(const Case& c) {
  torch::manual_seed(0);
  std::vector<std::int64_t> shape = {c.n, c.n};
  if (c.batch > 0) shape.insert(shape.begin(), c.batch);
  const torch::Tensor x = torch::rand(shape) * 2 - 1;
  const torch::Tensor eye = torch::eye(c.n);
  const std::string op = c.op;
  Inputs in;
  if (op == "cholesky" || op == "cholesky+backward")
    in.a = torch::matmul(x, x.transpose(-2, -1)) + eye;
  else if (op == "eigh")
    in.a = x + x.transpose(-2, -1);
  else if (op == "qr" || op == "qr+backward" || op == "svd" || op == "svd+backward" ||
           op == "pinv" || op == "svdvals" || op == "matrix_exp")
    in.a = x;
  else
    in.a = x + eye * double(c.n);
  std::vector<std::int64_t> bs = shape;
  bs.back() = c.rhs;
  in.b = torch::rand(bs) * 2 - 1;
  if (op.ends_with("+backward")) {
    in.a.requires_grad_();
    in.b.requires_grad_();
  }
  inputs()[key(c)] = in;
}

void torch_step(const Case& c) {
  const Inputs& in = inputs().at(key(c));
  const std::string op = c.op;
  if (op == "solve")
    torch::linalg_solve(in.a, in.b);
  else if (op == "solve+backward")
    torch::linalg_solve(in.a, in.b).sum().backward();
  else if (op == "solve_triangular")
    torch::linalg_solve_triangular(in.a, in.b, /*upper=*/false);
  else if (op == "cholesky+backward")
    torch::linalg_cholesky(in.a).sum().backward();
  else if (op == "det+backward")
    torch::linalg_det(in.a).sum().backward();
  else if (op == "slogdet+backward")
    std::get<1>(torch::linalg_slogdet(in.a)).sum().backward();
  else if (op == "cholesky")
    torch::linalg_cholesky(in.a);
  else if (op == "lu_factor")
    torch::linalg_lu_factor(in.a);
  else if (op == "qr")
    torch::linalg_qr(in.a);
  else if (op == "qr+backward") {
    const auto [q, r] = torch::linalg_qr(in.a);
    (q.sum() + r.sum()).backward();
  } else if (op == "svd")
    torch::linalg_svd(in.a);
  else if (op == "svd+backward") {
    const auto [u, s, vh] = torch::linalg_svd(in.a, /*full_matrices=*/false);
    (s.sum() + torch::matmul(u, vh).sum()).backward();
  } else if (op == "pinv")
    torch::linalg_pinv(in.a);
  else if (op == "lstsq")
    torch::linalg_lstsq(in.a, in.b, c10::nullopt, c10::nullopt);
  else if (op == "svdvals")
    torch::linalg_svdvals(in.a);
  else if (op == "matrix_exp")
    torch::linalg_matrix_exp(in.a);
  else
    torch::linalg_eigh(in.a);
}

}  // namespace bench::linalg
