// benchmarks/bench_conv.hpp — issue 22's convolution benchmark's sides: ferry's in
// bench_conv.cpp, PyTorch's (libtorch, in this process) in bench_conv_torch.cpp, cuDNN's
// (called directly) in bench_cudnn.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bench::conv {

// A convolution of ResNet-18 at batch 32 on 224 x 224 images (batch 2 and a quarter of the
// spatial size with --quick): x [n, c, h, w], weight [oc, c, k, k], no bias.
struct ConvCase {
  const char* name;
  std::int64_t c, h, oc, k, stride, pad;
};
inline const std::vector<ConvCase>& cases() {
  static const std::vector<ConvCase> c = {
      {"conv1 7x7/2", 3, 224, 64, 7, 2, 3},   {"layer1 3x3", 64, 56, 64, 3, 1, 1},
      {"layer2 3x3/2", 64, 56, 128, 3, 2, 1}, {"layer2 downsample 1x1/2", 64, 56, 128, 1, 2, 0},
      {"layer3 3x3", 256, 14, 256, 3, 1, 1},  {"layer4 3x3", 512, 7, 512, 3, 1, 1},
  };
  return c;
}
inline std::int64_t batch(bool quick) { return quick ? 2 : 32; }
inline std::int64_t size(const ConvCase& c, bool quick) { return quick ? c.h / 4 : c.h; }
inline std::int64_t out_size(const ConvCase& c, bool quick) {
  return (size(c, quick) + 2 * c.pad - c.k) / c.stride + 1;
}
// Multiply-adds x 2 of the forward pass (backward: twice as many again).
inline double flops(const ConvCase& c, bool quick) {
  const double o = double(out_size(c, quick));
  return 2.0 * double(batch(quick)) * double(c.oc) * o * o * double(c.c * c.k * c.k);
}
inline std::int64_t resnet_image(bool quick) { return quick ? 32 : 224; }

// ResNet-18's layers after its first convolution, on that convolution's output ([32, 64, 112,
// 112]; [2, 64, 28, 28] with --quick), forward and the input's gradient: batch_norm in
// training (weight and bias), max_pool2d 3x3/2 padding 1, adaptive_avg_pool2d to 1x1 (its
// global pool, there over [32, 512, 7, 7]); and, on the same input, layers ResNet-18 has not:
// avg_pool2d 3x3/2 padding 1 (Inception's and DenseNet's pools), interpolate bilinear x2 (a
// U-Net's or an FPN's upsampling), and adaptive average and max pooling to 6x6 (AlexNet's
// pool; 112 to 6 is uneven: windows of 19 and 20 that overlap).
inline const std::vector<const char*>& layers() {
  static const std::vector<const char*> l = {"batch_norm",
                                             "max_pool2d 3x3/2",
                                             "adaptive_avg_pool2d 1x1",
                                             "avg_pool2d 3x3/2",
                                             "interpolate bilinear x2",
                                             "adaptive_avg_pool2d 6x6",
                                             "adaptive_max_pool2d 6x6"};
  return l;
}
inline std::int64_t layer_size(bool quick) { return quick ? 28 : 112; }

#ifdef FERRY_BENCH_HAVE_CUDA
// cuDNN called directly on cuda:0 (bench_cudnn.cpp): the same convolution in f32, forward, or
// forward and the input's and weight's gradients, synchronized. Throws std::runtime_error
// where cuDNN or the GPU is missing.
void cudnn_conv(const ConvCase& c, bool quick, bool backward);
#endif

#ifdef FERRY_BENCH_HAVE_TORCH
// PyTorch's side: the same convolution (inputs made once per case), forward, or forward and
// backward (the input's and the weight's gradients); and one ResNet-18 training step (SGD).
// `channels_last`: the input and weight (the model and its input) in
// torch::MemoryFormat::ChannelsLast.
void torch_setup(bool quick);
void torch_conv(const std::string& name, bool backward, bool channels_last = false);
void torch_resnet_step(bool channels_last = false);
// One of layers(), forward and the input's gradient, its input (and the gradient flowing in)
// channels-last or contiguous.
void torch_layer(const std::string& layer, bool channels_last);
#endif

}  // namespace bench::conv
