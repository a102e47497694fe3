// tests/conformance/cases_conv.cpp — the CNN ops: convolution, unfold and fold, transposed
// convolution, pooling, batch/group/instance/local response normalisation, interpolate,
// grid_sample, affine_grid and pixel_shuffle: each in every float dtype over strided, padded,
// dilated, grouped, depthwise, 'same', unbatched, empty-batch and channels-last geometries, in
// forward and gradient modes.
#include "catalog.hpp"
#include "ferry/nn/functional.hpp"

namespace ferry::conformance {
namespace {

std::vector<FloatOpCase> conv_ops() {
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
      // Channels-last activations and weights: a device whose CNN kernels take them as they
      // are (DeviceCapabilities::channels_last_cnn) runs them in that layout.
      {"conv2d",
       "[2, 6, 9, 8] channels-last, w [4, 3, 3, 3] channels-last, b stride=2 padding=1 groups=2",
       {{2, 6, 9, 8}, {4, 3, 3, 3}, {4}},
       [](const Inputs& in) {
         const MemoryFormat cl = MemoryFormat::channels_last;
         return conv2d(in[0].contiguous(cl), in[1].contiguous(cl), in[2], {2}, 1, {1}, 2);
       }},
      {"conv3d",
       "[2, 3, 4, 5, 3] channels_last_3d, w [2, 3, 3, 2, 3] padding=1",
       {{2, 3, 4, 5, 3}, {2, 3, 3, 2, 3}},
       [](const Inputs& in) {
         return conv3d(in[0].contiguous(MemoryFormat::channels_last_3d), in[1], {}, {1}, 1);
       }},
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
      {"conv_transpose1d",
       "[2, 3, 5] w [3, 4, 3] b stride=2 padding=1 output_padding=1",
       {{2, 3, 5}, {3, 4, 3}, {4}},
       [](const Inputs& in) { return conv_transpose1d(in[0], in[1], in[2], {2}, {1}, {1}); }},
      {"conv_transpose2d",
       "[2, 4, 3, 4] w [4, 1, 3, 2] b stride=(2, 1) padding=(1, 0) groups=2 dilation=(1, 2)",
       {{2, 4, 3, 4}, {4, 1, 3, 2}, {2}},
       [](const Inputs& in) {
         return conv_transpose2d(in[0], in[1], in[2], {2, 1}, {1, 0}, {1, 0}, 2, {1, 2});
       }},
      {"conv_transpose3d",
       "[1, 2, 2, 3, 2] w [2, 3, 2, 2, 2] stride=2",
       {{1, 2, 2, 3, 2}, {2, 3, 2, 2, 2}},
       [](const Inputs& in) { return conv_transpose3d(in[0], in[1], {}, {2}); }},
      {"max_pool1d",
       "[2, 3, 9] kernel=3 stride=2 padding=1",
       {{2, 3, 9}},
       [](const Inputs& in) { return max_pool1d(in[0], {3}, {2}, {1}); }},
      {"max_pool2d",
       "[2, 3, 8, 7] kernel=3 stride=2 padding=1 ceil_mode",
       {{2, 3, 8, 7}},
       [](const Inputs& in) { return max_pool2d(in[0], {3}, {2}, {1}, {1}, true); }},
      {"max_pool2d",
       "[3, 9, 10] unbatched kernel=(2, 3) stride=(1, 2) padding=(1, 0) dilation=(3, 2)",
       {{3, 9, 10}},
       [](const Inputs& in) {
         return max_pool2d(in[0], {2, 3}, {1, 2}, {1, 0}, {3, 2});
       }},
      {"max_pool2d",
       "[2, 5, 9, 8] channels-last kernel=3 stride=2 padding=1",
       {{2, 5, 9, 8}},
       [](const Inputs& in) {
         return max_pool2d(in[0].contiguous(MemoryFormat::channels_last), {3}, {2}, {1});
       }},
      {"avg_pool1d",
       "[2, 3, 8] kernel=3 stride=2 padding=1 count_include_pad=false",
       {{2, 3, 8}},
       [](const Inputs& in) { return avg_pool1d(in[0], {3}, {2}, {1}, false, false); }},
      {"avg_pool2d",
       "[2, 3, 7, 6] kernel=3 stride=2 padding=1 ceil_mode",
       {{2, 3, 7, 6}},
       [](const Inputs& in) { return avg_pool2d(in[0], {3}, {2}, {1}, true); }},
      {"avg_pool2d",
       "[2, 5, 9, 8] channels-last kernel=3 stride=1 padding=1 count_include_pad=false",
       {{2, 5, 9, 8}},
       [](const Inputs& in) {
         return avg_pool2d(in[0].contiguous(MemoryFormat::channels_last), {3}, {1}, {1}, false,
                           false);
       }},
      {"avg_pool2d",
       "[3, 6, 7] unbatched kernel=(2, 3) stride=(2, 1) divisor_override=4",
       {{3, 6, 7}},
       [](const Inputs& in) {
         return avg_pool2d(in[0], {2, 3}, {2, 1}, {0}, false, true, 4);
       }},
      {"adaptive_avg_pool1d",
       "[2, 3, 10] -> 4",
       {{2, 3, 10}},
       [](const Inputs& in) { return adaptive_avg_pool1d(in[0], {4}); }},
      {"adaptive_avg_pool2d",
       "[2, 3, 7, 5] -> (3, 4)",
       {{2, 3, 7, 5}},
       [](const Inputs& in) {
         return adaptive_avg_pool2d(in[0], {3, 4});
       }},
      {"adaptive_max_pool1d",
       "[2, 3, 11] -> 3",
       {{2, 3, 11}},
       [](const Inputs& in) { return adaptive_max_pool1d(in[0], {3}); }},
      {"adaptive_max_pool2d",
       "[2, 3, 7, 6] -> (3, 4)",
       {{2, 3, 7, 6}},
       [](const Inputs& in) {
         return adaptive_max_pool2d(in[0], {3, 4});
       }},
      {"max_pool3d",
       "[2, 2, 5, 6, 5] kernel=3 stride=2 padding=1 ceil_mode",
       {{2, 2, 5, 6, 5}},
       [](const Inputs& in) { return max_pool3d(in[0], {3}, {2}, {1}, {1}, true); }},
      {"avg_pool3d",
       "[1, 2, 5, 4, 6] channels_last_3d kernel=(2, 3, 2) padding=1 "
       "count_include_pad=false",
       {{1, 2, 5, 4, 6}},
       [](const Inputs& in) {
         return avg_pool3d(in[0].contiguous(MemoryFormat::channels_last_3d), {2, 3, 2}, {}, {1},
                           false, false);
       }},
      {"adaptive_avg_pool3d",
       "[2, 2, 5, 4, 7] -> (2, 3, 4)",
       {{2, 2, 5, 4, 7}},
       [](const Inputs& in) {
         return adaptive_avg_pool3d(in[0], {2, 3, 4});
       }},
      {"adaptive_max_pool3d",
       "[1, 3, 4, 5, 6] -> (3, 2, 4)",
       {{1, 3, 4, 5, 6}},
       [](const Inputs& in) {
         return adaptive_max_pool3d(in[0], {3, 2, 4});
       }},
      {"max_unpool1d",
       "[2, 3, 9] of max_pool1d kernel=3 stride=2 padding=1 (repeated indices)",
       {{2, 3, 9}},
       [](const Inputs& in) {
         const auto [v, i] = max_pool1d_with_indices(in[0], {3}, {2}, {1});
         return max_unpool1d(v, i, {3}, {2}, {1});
       }},
      {"max_unpool2d",
       "[2, 3, 7, 6] of max_pool2d kernel=2, output_size=(7, 6)",
       {{2, 3, 7, 6}},
       [](const Inputs& in) {
         const auto [v, i] = max_pool2d_with_indices(in[0], {2});
         return max_unpool2d(v, i, {2}, {}, {0}, {7, 6});
       }},
      {"max_unpool3d",
       "[1, 2, 4, 6, 4] of max_pool3d kernel=2",
       {{1, 2, 4, 6, 4}},
       [](const Inputs& in) {
         const auto [v, i] = max_pool3d_with_indices(in[0], {2});
         return max_unpool3d(v, i, {2});
       }},
      {"batch_norm",
       "[3, 4, 3, 2] training, weight, bias",
       {{3, 4, 3, 2}, {4}, {4}},
       [](const Inputs& in) {
         return nn::functional::batch_norm(in[0], {}, {}, in[1], in[2], true);
       }},
      {"batch_norm",
       "[3, 5, 4, 3] channels-last training, weight, bias",
       {{3, 5, 4, 3}, {5}, {5}},
       [](const Inputs& in) {
         return nn::functional::batch_norm(in[0].contiguous(MemoryFormat::channels_last), {}, {},
                                           in[1], in[2], true);
       }},
      {"batch_norm",
       "[2, 3, 3, 4, 2] channels_last_3d eval, running statistics (var = v^2 + 0.5)",
       {{2, 3, 3, 4, 2}, {3}, {3}},
       [](const Inputs& in) {
         const Tensor var = (in[2] * in[2] + 0.5).detach(), mean = in[1].detach();
         return nn::functional::batch_norm(in[0].contiguous(MemoryFormat::channels_last_3d), mean,
                                           var, {}, {}, false);
       }},
      {"batch_norm",
       "[5, 3] training, no affine",
       {{5, 3}},
       [](const Inputs& in) { return nn::functional::batch_norm(in[0], {}, {}, {}, {}, true); }},
      {"batch_norm",
       "[2, 3, 7] eval, running statistics (var = v^2 + 0.5), weight",
       {{2, 3, 7}, {3}, {3}, {3}},
       [](const Inputs& in) {
         const Tensor var = (in[2] * in[2] + 0.5).detach(), mean = in[1].detach();
         return nn::functional::batch_norm(in[0], mean, var, in[3], {}, false);
       }},
      {"group_norm",
       "[2, 6, 3, 2] groups=3, weight, bias",
       {{2, 6, 3, 2}, {6}, {6}},
       [](const Inputs& in) { return nn::functional::group_norm(in[0], 3, in[1], in[2]); }},
      {"instance_norm",
       "[2, 3, 4, 3] input statistics, weight, bias",
       {{2, 3, 4, 3}, {3}, {3}},
       [](const Inputs& in) { return nn::functional::instance_norm(in[0], {}, {}, in[1], in[2]); }},
      {"rms_norm",
       "[2, 3, 6] over [6], weight",
       {{2, 3, 6}, {6}},
       [](const Inputs& in) { return nn::functional::rms_norm(in[0], {6}, in[1]); }},
      {"rms_norm",
       "[4, 2, 3] over [2, 3], eps=1e-3",
       {{4, 2, 3}},
       [](const Inputs& in) {
         return nn::functional::rms_norm(in[0], {2, 3}, {}, 1e-3);
       }},
      {"local_response_norm",
       "[2, 5, 3, 2] size=3 alpha=0.5 beta=0.75 k=1",
       {{2, 5, 3, 2}},
       [](const Inputs& in) {
         return nn::functional::local_response_norm(in[0], 3, 0.5, 0.75, 1.0);
       }},
      {"interpolate",
       "[2, 3, 4, 5] -> (7, 3) bilinear",
       {{2, 3, 4, 5}},
       [](const Inputs& in) {
         return interpolate(in[0], {.size = {7, 3}, .mode = "bilinear"});
       }},
      {"interpolate",
       "[1, 2, 4, 5] -> (6, 8) bicubic align_corners",
       {{1, 2, 4, 5}},
       [](const Inputs& in) {
         return interpolate(in[0], {.size = {6, 8}, .mode = "bicubic", .align_corners = true});
       }},
      {"interpolate",
       "[2, 3, 5] x 2.5 nearest",
       {{2, 3, 5}},
       [](const Inputs& in) {
         return interpolate(in[0], {.scale_factor = {2.5}, .mode = "nearest"});
       }},
      {"interpolate",
       "[2, 3, 5, 4] channels-last -> scale 2 bilinear align_corners",
       {{2, 3, 5, 4}},
       [](const Inputs& in) {
         return interpolate(in[0].contiguous(MemoryFormat::channels_last),
                            {.scale_factor = {2.0}, .mode = "bilinear", .align_corners = true});
       }},
      {"grid_sample",
       "[2, 3, 5, 6] at [2, 4, 3, 2] bilinear zeros",
       {{2, 3, 5, 6}, {2, 4, 3, 2}},
       [](const Inputs& in) { return grid_sample(in[0], in[1]); }},
      {"grid_sample",
       "[1, 2, 4, 5] at [1, 3, 3, 2] bicubic reflection align_corners",
       {{1, 2, 4, 5}, {1, 3, 3, 2}},
       [](const Inputs& in) { return grid_sample(in[0], in[1], "bicubic", "reflection", true); }},
      {"grid_sample",
       "[1, 2, 3, 4, 5] at [1, 2, 3, 2, 3] trilinear border",
       {{1, 2, 3, 4, 5}, {1, 2, 3, 2, 3}},
       [](const Inputs& in) { return grid_sample(in[0], in[1], "bilinear", "border"); }},
      {"affine_grid",
       "[2, 2, 3] -> [2, 3, 4, 5]",
       {{2, 2, 3}},
       [](const Inputs& in) {
         return affine_grid(in[0], {2, 3, 4, 5});
       }},
      {"affine_grid",
       "[1, 3, 4] -> [1, 1, 2, 3, 4] align_corners",
       {{1, 3, 4}},
       [](const Inputs& in) {
         return affine_grid(in[0], {1, 1, 2, 3, 4}, true);
       }},
      {"pixel_shuffle",
       "[2, 8, 3, 2] r=2",
       {{2, 8, 3, 2}},
       [](const Inputs& in) { return pixel_shuffle(in[0], 2); }},
      {"pixel_unshuffle",
       "[1, 2, 6, 9] r=3",
       {{1, 2, 6, 9}},
       [](const Inputs& in) { return pixel_unshuffle(in[0], 3); }},
  };
}

// The kernels a fused op runs, its backward rows with it (the op table's column backward: Note
// [Composite ops]); none for the ops that only compose.
std::vector<OpId> fused_kernels(OpId id) {
  const auto backward = op_info(id).backward_kernels();
  if (backward.empty()) return {};
  std::vector<OpId> kernels{id};
  kernels.insert(kernels.end(), backward.begin(), backward.end());
  return kernels;
}

}  // namespace

void add_conv_cases(std::vector<Case>& out) {
  const std::size_t first = out.size();
  add_float_cases(out, conv_ops(), "conv");
  // The CPU's fused convolutions, pools and batch_norm are held to the composition (Note
  // [Composite ops]).
  for (std::size_t i = first; i < out.size(); ++i) hold_to_composition(out[i]);
}

void add_conv_grad_cases(std::vector<Case>& out) {
  for (const FloatOpCase& c : conv_ops())
    for (DType dt : kFloat) {
      out.push_back({c.op + ".grad",
                     dt,
                     c.label,
                     "conv",
                     threshold(dt, 1e-10),
                     inputs_of({c.shapes, -1, 1}, dt),
                     {},
                     [run = c.run](const Inputs& in) { return gradients_of(run, in); }});
      // An op a device runs as a kernel (the CPU's) differentiates through its backward
      // kernels, held to the composition's gradients; so does one that calls another's kernels
      // (adaptive pooling, the pool kernels').
      out.back().reference = [run = c.run](const Inputs& in) {
        debug::CompositesOnly composition;
        return gradients_of(run, in);
      };
      if (const auto id = op_from_name(c.op); id && !fused_kernels(*id).empty())
        out.back().kernels = fused_kernels(*id);
    }
}

}  // namespace ferry::conformance
