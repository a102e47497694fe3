// tests/conformance/cases_conv.cpp — convolution, unfold and fold (ferry/ops_conv.hpp): each
// in every float dtype over strided, padded, dilated, grouped, depthwise, 'same', unbatched
// and empty-batch geometries, in forward and gradient modes.
#include "catalog.hpp"

namespace ferry::conformance {
namespace {

struct ConvOp {
  const char* op;
  std::string label;
  std::vector<Shape> shapes;
  std::function<Tensor(const Inputs&)> run;
};

std::vector<ConvOp> conv_ops() {
  return {
      {"conv1d",
       "[2, 3, 11] w [4, 3, 3] b stride=2 padding=1",
       {{2, 3, 11}, {4, 3, 3}, {4}},
       [](const Inputs& in) { return conv1d(in[0], in[1], in[2], {2}, 1); }},
      {"conv1d",
       "[2, 4, 9] w [8, 1, 4] depthwise 'same' dilation=2",
       {{2, 4, 9}, {8, 1, 4}},
       [](const Inputs& in) { return conv1d(in[0], in[1], {}, {1}, "same", {2}, 4); }},
      {"conv2d",
       "[2, 3, 9, 8] w [5, 3, 3, 2] b stride=(2, 1) padding=(1, 0) dilation=(1, 2)",
       {{2, 3, 9, 8}, {5, 3, 3, 2}, {5}},
       [](const Inputs& in) {
         return conv2d(in[0], in[1], in[2], {2, 1}, {1, 0}, {1, 2});
       }},
      {"conv2d",
       "[1, 4, 7, 7] w [6, 2, 3, 3] groups=2 padding=1",
       {{1, 4, 7, 7}, {6, 2, 3, 3}},
       [](const Inputs& in) { return conv2d(in[0], in[1], {}, {1}, 1, {1}, 2); }},
      {"conv2d",
       "[3, 5, 5] unbatched w [2, 3, 5, 5] b (kernel = input)",
       {{3, 5, 5}, {2, 3, 5, 5}, {2}},
       [](const Inputs& in) { return conv2d(in[0], in[1], in[2]); }},
      {"conv2d",
       "[0, 2, 4, 4] empty batch w [3, 2, 3, 3]",
       {{0, 2, 4, 4}, {3, 2, 3, 3}},
       [](const Inputs& in) { return conv2d(in[0], in[1]); }},
      {"conv3d",
       "[1, 2, 4, 5, 4] w [3, 2, 2, 3, 2] b stride=(1, 2, 1) padding=(1, 0, 1)",
       {{1, 2, 4, 5, 4}, {3, 2, 2, 3, 2}, {3}},
       [](const Inputs& in) {
         return conv3d(in[0], in[1], in[2], {1, 2, 1}, {1, 0, 1});
       }},
      {"unfold",
       "[2, 3, 5, 6] kernel=(2, 3) dilation=(1, 2) padding=1 stride=(2, 1)",
       {{2, 3, 5, 6}},
       [](const Inputs& in) {
         return unfold(in[0], {2, 3}, {1, 2}, {1}, {2, 1});
       }},
      {"fold",
       "[2, 18, 12] onto 5 x 6, kernel=(2, 3) dilation=(1, 2) padding=1 stride=(2, 1)",
       {{2, 18, 12}},
       [](const Inputs& in) {
         return fold(in[0], {5, 6}, {2, 3}, {1, 2}, {1}, {2, 1});
       }},
  };
}

}  // namespace

void add_conv_cases(std::vector<Case>& out) {
  for (const ConvOp& c : conv_ops())
    for (DType dt : kFloat)
      out.push_back({c.op,
                     dt,
                     c.label,
                     "conv",
                     threshold(dt, 1e-10),
                     inputs_of({c.shapes, -1, 1}, dt),
                     {},
                     c.run});
}

void add_conv_grad_cases(std::vector<Case>& out) {
  for (const ConvOp& c : conv_ops())
    for (DType dt : kFloat)
      out.push_back({std::string(c.op) + ".grad",
                     dt,
                     c.label,
                     "conv",
                     threshold(dt, 1e-10),
                     inputs_of({c.shapes, -1, 1}, dt),
                     {},
                     [run = c.run](const Inputs& in) { return gradients_of(run, in); }});
}

}  // namespace ferry::conformance
