// ferry/nn/padding.hpp — PyTorch's padding modules: nn.ZeroPad1d/2d/3d, ConstantPad1d/2d/3d,
// ReflectionPad1d/2d/3d, ReplicationPad1d/2d/3d and CircularPad1d/2d/3d. Each is ferry::pad
// (F.pad, ferry/ops_shape.hpp, where the modes are defined) of the last N dims: padding is one
// size for every side, or 2N sizes from the last dim backwards (left, right, top, bottom, front,
// back), as PyTorch's modules take them. No parameters or buffers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/nn/module.hpp"
#include "ferry/tensor.hpp"

namespace ferry::nn {

class PadNd : public Module {
 public:
  // ShapeError (naming `type`, the module's class) unless padding has 1 or 2 * dims sizes.
  PadNd(const char* type, int dims, std::string mode, std::vector<std::int64_t> padding,
        double value = 0);
  Tensor forward(const Tensor& x) override;
  // "(1, 1, 2, 0)", and the value for a constant other than zero, as PyTorch prints them.
  std::string extra_repr() const override;

  int dims;
  std::string mode;                   // constant, reflect, replicate or circular
  std::vector<std::int64_t> padding;  // 2 * dims sizes
  double value;                       // constant mode's fill
};

#define FERRY_NN_PAD(Name, Dims, Mode)                                           \
  class Name : public PadNd {                                                    \
   public:                                                                       \
    explicit Name(std::int64_t padding) : PadNd(#Name, Dims, Mode, {padding}) {} \
    explicit Name(std::vector<std::int64_t> padding)                             \
        : PadNd(#Name, Dims, Mode, std::move(padding)) {}                        \
  };
FERRY_NN_PAD(ZeroPad1d, 1, "constant")
FERRY_NN_PAD(ZeroPad2d, 2, "constant")
FERRY_NN_PAD(ZeroPad3d, 3, "constant")
FERRY_NN_PAD(ReflectionPad1d, 1, "reflect")
FERRY_NN_PAD(ReflectionPad2d, 2, "reflect")
FERRY_NN_PAD(ReflectionPad3d, 3, "reflect")
FERRY_NN_PAD(ReplicationPad1d, 1, "replicate")
FERRY_NN_PAD(ReplicationPad2d, 2, "replicate")
FERRY_NN_PAD(ReplicationPad3d, 3, "replicate")
FERRY_NN_PAD(CircularPad1d, 1, "circular")
FERRY_NN_PAD(CircularPad2d, 2, "circular")
FERRY_NN_PAD(CircularPad3d, 3, "circular")
#undef FERRY_NN_PAD

#define FERRY_NN_CONSTANT_PAD(Name, Dims)                                                          \
  class Name : public PadNd {                                                                      \
   public:                                                                                         \
    Name(std::int64_t padding, double value) : PadNd(#Name, Dims, "constant", {padding}, value) {} \
    Name(std::vector<std::int64_t> padding, double value)                                          \
        : PadNd(#Name, Dims, "constant", std::move(padding), value) {}                             \
  };
FERRY_NN_CONSTANT_PAD(ConstantPad1d, 1)
FERRY_NN_CONSTANT_PAD(ConstantPad2d, 2)
FERRY_NN_CONSTANT_PAD(ConstantPad3d, 3)
#undef FERRY_NN_CONSTANT_PAD

}  // namespace ferry::nn
