// runtime/nn/activation.cpp — ferry/nn/activation.hpp: each module calls its op.
#include "ferry/nn/activation.hpp"

#include <fmt/format.h>

#include "ferry/error.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/ops.hpp"
#include "nn_internal.hpp"

namespace ferry::nn {

Tensor Flatten::forward(const Tensor& x) { return x.flatten(start_dim, end_dim); }
std::string Flatten::extra_repr() const {
  return fmt::format("start_dim={}, end_dim={}", start_dim, end_dim);
}

Tensor Unflatten::forward(const Tensor& x) { return unflatten(x, dim, sizes); }
std::string Unflatten::extra_repr() const {
  return fmt::format("dim={}, unflattened_size={}", dim, shape_str(sizes));
}

Tensor Softmax::forward(const Tensor& x) { return softmax(x, dim); }
std::string Softmax::extra_repr() const { return fmt::format("dim={}", dim); }
Tensor LogSoftmax::forward(const Tensor& x) { return log_softmax(x, dim); }
std::string LogSoftmax::extra_repr() const { return fmt::format("dim={}", dim); }
Tensor Softmin::forward(const Tensor& x) { return functional::softmin(x, dim); }
std::string Softmin::extra_repr() const { return fmt::format("dim={}", dim); }

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor SiLU::forward(const Tensor& x) { return silu(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }
Tensor SELU::forward(const Tensor& x) { return selu(x); }
Tensor ReLU6::forward(const Tensor& x) { return relu6(x); }
Tensor Hardsigmoid::forward(const Tensor& x) { return hardsigmoid(x); }
Tensor Hardswish::forward(const Tensor& x) { return hardswish(x); }
Tensor Mish::forward(const Tensor& x) { return mish(x); }
Tensor LogSigmoid::forward(const Tensor& x) { return logsigmoid(x); }
Tensor Tanhshrink::forward(const Tensor& x) { return functional::tanhshrink(x); }
Tensor Softsign::forward(const Tensor& x) { return functional::softsign(x); }

Tensor Hardshrink::forward(const Tensor& x) { return functional::hardshrink(x, lambd); }
std::string Hardshrink::extra_repr() const { return fmt::format("{}", lambd); }
Softshrink::Softshrink(double l) : lambd(l) {
  if (!(lambd >= 0)) throw ValueError(fmt::format("Softshrink: lambd must be >= 0, got {}", l));
}
Tensor Softshrink::forward(const Tensor& x) { return functional::softshrink(x, lambd); }
std::string Softshrink::extra_repr() const { return fmt::format("{}", lambd); }
Tensor Threshold::forward(const Tensor& x) { return functional::threshold(x, threshold, value); }
std::string Threshold::extra_repr() const {
  return fmt::format("threshold={}, value={}", threshold, value);
}

GELU::GELU(std::string approx) : approximate(std::move(approx)) {
  if (approximate != "none" && approximate != "tanh")
    throw Error(
        fmt::format("GELU: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate));
}
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }
std::string GELU::extra_repr() const { return fmt::format("approximate='{}'", approximate); }

Tensor ELU::forward(const Tensor& x) { return elu(x, alpha); }
std::string ELU::extra_repr() const { return fmt::format("alpha={}", alpha); }
Tensor CELU::forward(const Tensor& x) { return celu(x, alpha); }
std::string CELU::extra_repr() const { return fmt::format("alpha={}", alpha); }
Tensor LeakyReLU::forward(const Tensor& x) { return leaky_relu(x, negative_slope); }
std::string LeakyReLU::extra_repr() const {
  return fmt::format("negative_slope={}", negative_slope);
}
RReLU::RReLU(double lower_, double upper_) : lower(lower_), upper(upper_) {
  if (!(lower <= upper))
    throw ValueError(fmt::format("RReLU: lower ({}) must not exceed upper ({})", lower, upper));
}
Tensor RReLU::forward(const Tensor& x) { return functional::rrelu(x, lower, upper, is_training()); }
std::string RReLU::extra_repr() const { return fmt::format("lower={}, upper={}", lower, upper); }
Tensor Hardtanh::forward(const Tensor& x) { return hardtanh(x, min_val, max_val); }
std::string Hardtanh::extra_repr() const {
  return fmt::format("min_val={}, max_val={}", min_val, max_val);
}
Tensor Softplus::forward(const Tensor& x) { return softplus(x, beta, threshold); }
std::string Softplus::extra_repr() const {
  return fmt::format("beta={}, threshold={}", beta, threshold);
}
Tensor GLU::forward(const Tensor& x) { return functional::glu(x, dim); }

PReLU::PReLU(std::int64_t n, double init, const TensorOptions& options) : num_parameters(n) {
  if (n < 1) throw ShapeError(fmt::format("PReLU: num_parameters must be >= 1, got {}", n));
  weight = register_parameter("weight", full({n}, init, detail::param_options("PReLU", options)));
}
Tensor PReLU::forward(const Tensor& x) { return functional::prelu(x, weight); }
std::string PReLU::extra_repr() const { return fmt::format("num_parameters={}", num_parameters); }
std::string GLU::extra_repr() const { return fmt::format("dim={}", dim); }

}  // namespace ferry::nn
