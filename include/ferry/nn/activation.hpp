// ferry/nn/activation.hpp — the activation and shape modules: each the
// module form of one op (ferry/ops.hpp, ferry/nn/functional.hpp), with
// PyTorch's names, defaults and extra_repr, and no parameters.
#pragma once

#include <cstdint>
#include <string>

#include "ferry/nn/module.hpp"
#include "ferry/tensor.hpp"

namespace ferry::nn {

class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
};

// x.flatten(start_dim, end_dim): by default every dim but the batch's.
class Flatten : public Module {
 public:
  explicit Flatten(std::int64_t start_dim = 1, std::int64_t end_dim = -1)
      : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::int64_t start_dim, end_dim;
};

class Unflatten : public Module {
 public:
  Unflatten(std::int64_t dim, Shape sizes) : dim(dim), sizes(std::move(sizes)) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::int64_t dim;
  Shape sizes;
};

// softmax, log_softmax and softmin over dim.
class Softmax : public Module {
 public:
  explicit Softmax(std::int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::int64_t dim;
};
class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(std::int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::int64_t dim;
};
class Softmin : public Module {
 public:
  explicit Softmin(std::int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::int64_t dim;
};

// The activations without parameters.
#define FERRY_NN_ACTIVATION(Name)             \
  class Name : public Module {                \
   public:                                    \
    Tensor forward(const Tensor& x) override; \
  };
FERRY_NN_ACTIVATION(ReLU)
FERRY_NN_ACTIVATION(SiLU)
FERRY_NN_ACTIVATION(Tanh)
FERRY_NN_ACTIVATION(Sigmoid)
FERRY_NN_ACTIVATION(SELU)
FERRY_NN_ACTIVATION(ReLU6)
FERRY_NN_ACTIVATION(Hardsigmoid)
FERRY_NN_ACTIVATION(Hardswish)
FERRY_NN_ACTIVATION(Mish)
FERRY_NN_ACTIVATION(LogSigmoid)
FERRY_NN_ACTIVATION(Tanhshrink)
FERRY_NN_ACTIVATION(Softsign)
#undef FERRY_NN_ACTIVATION

// approximate: "none" (exact, erf) or "tanh"; Error for anything else.
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::string approximate;
};

class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0) : alpha(alpha) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double alpha;
};
class CELU : public Module {
 public:
  explicit CELU(double alpha = 1.0) : alpha(alpha) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double alpha;
};
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : negative_slope(negative_slope) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double negative_slope;
};
// functional::rrelu(x, lower, upper, is_training()).
class RReLU : public Module {
 public:
  explicit RReLU(double lower = 1.0 / 8, double upper = 1.0 / 3);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double lower, upper;
};
class Hardtanh : public Module {
 public:
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0)
      : min_val(min_val), max_val(max_val) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double min_val, max_val;
};
class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0)
      : beta(beta), threshold(threshold) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double beta, threshold;
};
// x where |x| > lambd, else 0.
class Hardshrink : public Module {
 public:
  explicit Hardshrink(double lambd = 0.5) : lambd(lambd) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double lambd;
};

// x ∓ lambd outside [-lambd, lambd], else 0. ValueError for lambd < 0.
class Softshrink : public Module {
 public:
  explicit Softshrink(double lambd = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double lambd;
};

// x where x > threshold, else value.
class Threshold : public Module {
 public:
  Threshold(double threshold, double value) : threshold(threshold), value(value) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double threshold, value;
};

// nn.PReLU: a learnable slope for the negative part, num_parameters of them (1, or the
// input's channels), each starting at init; the parameter "weight".
class PReLU : public Module {
 public:
  explicit PReLU(std::int64_t num_parameters = 1, double init = 0.25,
                 const TensorOptions& options = {});
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::int64_t num_parameters;
  Tensor weight;
};
class GLU : public Module {
 public:
  explicit GLU(std::int64_t dim = -1) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::int64_t dim;
};

}  // namespace ferry::nn
