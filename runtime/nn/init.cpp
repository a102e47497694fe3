// runtime/nn/init.cpp — nn::init: in-place parameter initialisation
// (ferry/nn/init.hpp).
#include "ferry/nn/init.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <numbers>
#include <utility>
#include <vector>

#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ferry/random.hpp"

// LAPACK's Householder QR (OpenBLAS carries LAPACK; ferry links it, Note [One thread pool]).
extern "C" {
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
             double* work, const int* lwork, int* info);
}

namespace ferry::nn::init {
namespace {

void check_floating(std::string_view fn, const Tensor& t) {
  if (!t.defined()) throw Error(fmt::format("nn::init::{}: the tensor is undefined", fn));
  if (!is_floating(t.dtype()))
    throw DTypeError(fmt::format("nn::init::{}: needs a floating tensor, got {} (shape {})", fn,
                                 dtype_name(t.dtype()), shape_str(t.sizes())));
}

// He et al.'s gain and fan, shared by kaiming_uniform_ and kaiming_normal_: the standard
// deviation is gain / √fan.
std::pair<double, double> kaiming_gain_fan(std::string_view fn, const Tensor& t, double a,
                                           std::string_view mode, std::string_view nonlinearity) {
  if (mode != "fan_in" && mode != "fan_out")
    throw Error(
        fmt::format("nn::init::{}: mode must be \"fan_in\" or \"fan_out\", got \"{}\"", fn, mode));
  const Fans fans = calculate_fans(t);
  return {calculate_gain(nonlinearity, a), double(mode == "fan_in" ? fans.fan_in : fans.fan_out)};
}

void check_defined(std::string_view fn, const Tensor& t) {
  if (!t.defined()) throw Error(fmt::format("nn::init::{}: the tensor is undefined", fn));
}

// The Q, n orthonormal columns, of the thin QR decomposition of the column-major m x n
// matrix `a` (m >= n), with each column's sign chosen so that R's diagonal is positive:
// the unique such factor of a matrix of full rank. Overwrites `a` with Q.
void orthonormal_columns(std::vector<double>& a, int m, int n) {
  std::vector<double> tau(static_cast<std::size_t>(n));
  int info = 0, query = -1;
  double best = 0;
  dgeqrf_(&m, &n, a.data(), &m, tau.data(), &best, &query, &info);
  std::vector<double> work(std::size_t(std::max(1.0, best)));
  int lwork = int(work.size());
  dgeqrf_(&m, &n, a.data(), &m, tau.data(), work.data(), &lwork, &info);
  if (info != 0) throw Error(fmt::format("nn::init::orthogonal_: LAPACK dgeqrf failed ({})", info));
  // R's diagonal, before dorgqr overwrites it. PyTorch multiplies by sign(R_jj), which is 0
  // for a column of a rank-deficient draw (probability 0); that column keeps its sign here.
  std::vector<double> flip(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j)
    flip[std::size_t(j)] = a[std::size_t(j) * std::size_t(m + 1)] < 0 ? -1.0 : 1.0;
  dorgqr_(&m, &n, &n, a.data(), &m, tau.data(), &best, &query, &info);
  work.resize(std::size_t(std::max(1.0, best)));
  lwork = int(work.size());
  dorgqr_(&m, &n, &n, a.data(), &m, tau.data(), work.data(), &lwork, &info);
  if (info != 0) throw Error(fmt::format("nn::init::orthogonal_: LAPACK dorgqr failed ({})", info));
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i)
      a[std::size_t(j) * std::size_t(m) + std::size_t(i)] *= flip[std::size_t(j)];
}

}  // namespace

// Tensor's in-place draws (ferry/random.hpp), under NoGradGuard: PyTorch's
// nn.init writes parameters that require grad.
Tensor& uniform_(Tensor& t, double low, double high) {
  check_floating("uniform_", t);
  NoGradGuard no_grad;
  return ferry::uniform_(t, low, high);
}

Tensor& normal_(Tensor& t, double mean, double std) {
  check_floating("normal_", t);
  NoGradGuard no_grad;
  return ferry::normal_(t, mean, std);
}

Tensor& constant_(Tensor& t, double value) {
  if (!t.defined()) throw Error("nn::init::constant_: the tensor is undefined");
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}

Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

double calculate_gain(std::string_view nonlinearity, double param) {
  for (std::string_view linear : {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                                  "conv_transpose2d", "conv_transpose3d", "sigmoid"})
    if (nonlinearity == linear) return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nonlinearity == "selu") return 3.0 / 4.0;
  throw Error(
      fmt::format("nn::init::calculate_gain: unknown nonlinearity '{}' (known: linear, conv1d..3d, "
                  "conv_transpose1d..3d, sigmoid, tanh, relu, leaky_relu, selu)",
                  nonlinearity));
}

Fans calculate_fans(const Tensor& t) {
  if (!t.defined()) throw Error("nn::init: the tensor is undefined");
  if (t.dim() < 2)
    throw ShapeError(
        fmt::format("nn::init: fan in and fan out need a tensor of at least 2 dims, got shape {}",
                    shape_str(t.sizes())));
  std::int64_t receptive = 1;
  for (std::int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& kaiming_uniform_(Tensor& t, double a, std::string_view mode,
                         std::string_view nonlinearity) {
  check_floating("kaiming_uniform_", t);
  const auto [gain, fan] = kaiming_gain_fan("kaiming_uniform_", t, a, mode, nonlinearity);
  if (t.numel() == 0) return t;  // PyTorch: initialising zero elements is a no-op
  const double bound = gain * std::sqrt(3.0 / fan);  // U(-b, b) has standard deviation b / √3
  return init::uniform_(t, -bound, bound);
}

Tensor& kaiming_normal_(Tensor& t, double a, std::string_view mode, std::string_view nonlinearity) {
  check_floating("kaiming_normal_", t);
  const auto [gain, fan] = kaiming_gain_fan("kaiming_normal_", t, a, mode, nonlinearity);
  if (t.numel() == 0) return t;
  return init::normal_(t, 0.0, gain / std::sqrt(fan));
}

Tensor& xavier_uniform_(Tensor& t, double gain) {
  check_floating("xavier_uniform_", t);
  const Fans fans = calculate_fans(t);
  if (t.numel() == 0) return t;
  const double bound = gain * std::sqrt(6.0 / double(fans.fan_in + fans.fan_out));
  return init::uniform_(t, -bound, bound);
}

Tensor& xavier_normal_(Tensor& t, double gain) {
  check_floating("xavier_normal_", t);
  const Fans fans = calculate_fans(t);
  if (t.numel() == 0) return t;
  return init::normal_(t, 0.0, gain * std::sqrt(2.0 / double(fans.fan_in + fans.fan_out)));
}

Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b) {
  check_floating("trunc_normal_", t);
  if (!(std > 0))
    throw ValueError(fmt::format("nn::init::trunc_normal_: std must be positive, got {}", std));
  if (!(a < b))
    throw ValueError(
        fmt::format("nn::init::trunc_normal_: needs a < b, got a = {} and b = {}", a, b));
  if (t.numel() == 0) return t;
  const auto cdf = [](double x) { return (1.0 + std::erf(x / std::numbers::sqrt2)) / 2.0; };
  const double lo = 2.0 * cdf((a - mean) / std) - 1.0, hi = 2.0 * cdf((b - mean) / std) - 1.0;
  NoGradGuard no_grad;
  // 16-bit tensors are drawn in f32: erfinv near ±1 needs the bits.
  const DType work = dtype_size(t.dtype()) < 4 ? DType::f32 : t.dtype();
  Tensor u = ferry::empty(t.sizes(), {.dtype = work, .device = t.device()});
  ferry::uniform_(u, lo, hi);
  t.copy_(clamp(erfinv(u) * (std * std::numbers::sqrt2) + mean, Scalar(a), Scalar(b)));
  return t;
}

Tensor& orthogonal_(Tensor& t, double gain) {
  check_floating("orthogonal_", t);
  if (t.dim() < 2)
    throw ShapeError(fmt::format(
        "nn::init::orthogonal_: only tensors with 2 or more dimensions are supported, got shape {}",
        shape_str(t.sizes())));
  if (t.numel() == 0) return t;
  const std::int64_t rows = t.size(0), cols = t.numel() / rows;
  const bool wide = rows < cols;
  const std::int64_t m = wide ? cols : rows, n = wide ? rows : cols;
  if (m > INT_MAX)
    throw ShapeError(
        fmt::format("nn::init::orthogonal_: {} x {} is beyond LAPACK's 32-bit sizes", rows, cols));
  NoGradGuard no_grad;
  Tensor draw = ferry::empty({rows, cols}, {.dtype = t.dtype(), .device = t.device()});
  ferry::normal_(draw);
  // The draw, row-major rows x cols, is column-major cols x rows: the transposed matrix a
  // wide draw is decomposed as. A tall one is transposed into column-major order.
  std::vector<double> a = draw.to_vector<double>();
  const auto transpose = [](const std::vector<double>& x, std::int64_t r, std::int64_t c) {
    std::vector<double> y(x.size());
    for (std::int64_t i = 0; i < r; ++i)
      for (std::int64_t j = 0; j < c; ++j) y[std::size_t(j * r + i)] = x[std::size_t(i * c + j)];
    return y;
  };
  if (!wide) a = transpose(a, rows, cols);
  orthonormal_columns(a, int(m), int(n));
  // Q (column-major m x n) back to t's rows x cols: for a wide t, Q's transpose, which is
  // Q's buffer read row-major.
  if (!wide) a = transpose(a, cols, rows);
  for (double& v : a) v *= gain;
  t.copy_(ferry::tensor(a, t.sizes(), {.dtype = DType::f64}));
  return t;
}

Tensor& eye_(Tensor& t) {
  check_defined("eye_", t);
  if (t.dim() != 2)
    throw ShapeError(
        fmt::format("nn::init::eye_: only tensors with 2 dimensions are supported, got shape {}",
                    shape_str(t.sizes())));
  NoGradGuard no_grad;
  t.copy_(ferry::eye(t.size(0), t.size(1), {.dtype = t.dtype(), .device = t.device()}));
  return t;
}

Tensor& dirac_(Tensor& t, std::int64_t groups) {
  check_defined("dirac_", t);
  if (t.dim() < 3 || t.dim() > 5)
    throw ShapeError(fmt::format(
        "nn::init::dirac_: only tensors with 3, 4, or 5 dimensions are supported, got shape {}",
        shape_str(t.sizes())));
  if (groups < 1 || t.size(0) % groups != 0)
    throw ValueError(fmt::format(
        "nn::init::dirac_: dim 0 must be divisible by groups, got size {} and groups = {}",
        t.size(0), groups));
  const std::int64_t out_per_group = t.size(0) / groups, in = t.size(1);
  const std::int64_t linked = std::min(out_per_group, in);
  // The kernel's centre as an offset into one [k...] block, row-major.
  std::int64_t window = 1, centre = 0;
  for (std::int64_t d = t.dim() - 1; d >= 2; --d) {
    centre += (t.size(d) / 2) * window;
    window *= t.size(d);
  }
  std::vector<double> w(std::size_t(t.numel()), 0.0);
  for (std::int64_t g = 0; g < groups; ++g)
    for (std::int64_t d = 0; d < linked; ++d)
      w[std::size_t(((g * out_per_group + d) * in + d) * window + centre)] = 1.0;
  NoGradGuard no_grad;
  t.copy_(ferry::tensor(w, t.sizes(), {.dtype = DType::f64}));
  return t;
}

Tensor& sparse_(Tensor& t, double sparsity, double std) {
  check_floating("sparse_", t);
  if (t.dim() != 2)
    throw ShapeError(
        fmt::format("nn::init::sparse_: only tensors with 2 dimensions are supported, got shape {}",
                    shape_str(t.sizes())));
  if (!(sparsity >= 0 && sparsity <= 1))
    throw ValueError(
        fmt::format("nn::init::sparse_: sparsity must be in [0, 1], got {}", sparsity));
  if (t.numel() == 0) return t;
  const std::int64_t rows = t.size(0);
  const auto zeros_per_column = std::int64_t(std::ceil(sparsity * double(rows)));
  NoGradGuard no_grad;
  Tensor values = ferry::empty(t.sizes(), {.dtype = t.dtype(), .device = t.device()});
  ferry::normal_(values, 0.0, std);
  if (zeros_per_column > 0) {
    // Each entry's rank in a random permutation of its column; the lowest ranks are zeroed.
    const Tensor keys = ferry::rand(t.sizes(), {.device = t.device()});
    const Tensor rank = argsort(argsort(keys, 0), 0);
    values = masked_fill(values, lt(rank, Scalar(zeros_per_column)), Scalar(0.0));
  }
  t.copy_(values);
  return t;
}

void reset_weight_and_bias_(Tensor& weight, Tensor& bias) {
  kaiming_uniform_(weight, std::sqrt(5.0));
  if (!bias.defined()) return;
  const std::int64_t fan_in = weight.numel() > 0 ? calculate_fans(weight).fan_in : 0;
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
  init::uniform_(bias, -bound, bound);
}

}  // namespace ferry::nn::init
