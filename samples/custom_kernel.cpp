// ferry-custom-kernel — your own GPU code on ferry tensors: swish
// (y = x * sigmoid(beta * x)) and its derivative written as a GLSL compute
// shader for Vulkan devices and as a CUDA kernel for CUDA devices, compiled
// at run time (glslang, NVRTC), registered as the op "sample.swish" with its
// own backward, and checked against ferry's built-in ops and autograd. It
// also shows what a kernel that does not compile reports.
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "sample_common.hpp"

namespace {

using ferry::CustomKernel;
using ferry::Device;
using ferry::KernelLanguage;
using ferry::Tensor;

// Binding 0: x; binding 1 (forward): y, or (backward) the incoming gradient,
// then binding 2 the input's gradient. Push constants: beta, n.
const char* kSwishGlsl = R"(#version 450
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params { float beta; uint n; } p;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= p.n) return;
  float s = 1.0 / (1.0 + exp(-p.beta * x[i]));
  y[i] = x[i] * s;
}
)";
const char* kSwishGradGlsl = R"(#version 450
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer G { float g[]; };
layout(set = 0, binding = 2) writeonly buffer GX { float gx[]; };
layout(push_constant) uniform Params { float beta; uint n; } p;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= p.n) return;
  float s = 1.0 / (1.0 + exp(-p.beta * x[i]));
  gx[i] = g[i] * (s + p.beta * x[i] * s * (1.0 - s));
}
)";
const char* kSwishCuda = R"(
extern "C" __global__ void swish(const float* x, float* y, float beta, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 1.0f / (1.0f + expf(-beta * x[i]));
  y[i] = x[i] * s;
}
extern "C" __global__ void swish_grad(const float* x, const float* g, float* gx, float beta,
                                      unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 1.0f / (1.0f + expf(-beta * x[i]));
  gx[i] = g[i] * (s + beta * x[i] * s * (1.0f - s));
}
)";

constexpr float kBeta = 1.5f;

struct Kernels {
  std::shared_ptr<CustomKernel> forward, backward;
};

// The two kernels for `dev`, compiled once.
const Kernels& kernels_for(const Device& dev) {
  static std::map<std::string, Kernels> cache;
  auto it = cache.find(dev.str());
  if (it != cache.end()) return it->second;
  Kernels k;
  if (dev.str().rfind("cuda", 0) == 0) {
    auto src = [](const char* entry) {
      return ferry::KernelSource{
          .language = KernelLanguage::cuda, .code = kSwishCuda, .entry = entry, .name = entry};
    };
    k.forward = std::make_shared<CustomKernel>(dev, src("swish"));
    k.backward = std::make_shared<CustomKernel>(dev, src("swish_grad"));
  } else {
    k.forward = std::make_shared<CustomKernel>(
        dev, ferry::KernelSource{.code = kSwishGlsl, .name = "swish"});
    k.backward = std::make_shared<CustomKernel>(
        dev, ferry::KernelSource{.code = kSwishGradGlsl, .name = "swish_grad"});
  }
  return cache.emplace(dev.str(), k).first->second;
}

// The same function in ferry's own ops: the CPU path of the op, and the reference.
Tensor swish_reference(const Tensor& x) { return x * ferry::sigmoid(x * double(kBeta)); }

void register_swish() {
  ferry::register_op(
      {.name = "sample.swish",
       .forward =
           [](const std::vector<Tensor>& in) {
             const Tensor& x = in.at(0);
             if (x.device().is_cpu()) return swish_reference(x);
             Tensor y = ferry::empty(x.shape(), {.device = x.device()});
             kernels_for(x.device()).forward->launch({x}, {y}, {kBeta, std::uint32_t(x.numel())});
             return y;
           },
       .backward = [](const std::vector<Tensor>& in, const Tensor&,
                      const Tensor& grad) -> std::vector<Tensor> {
         const Tensor& x = in.at(0);
         if (x.device().is_cpu()) {
           Tensor s = ferry::sigmoid(x * double(kBeta));
           return {grad * (s + x * s * (1.0 - s) * double(kBeta))};
         }
         Tensor gx = ferry::empty(x.shape(), {.device = x.device()});
         kernels_for(x.device())
             .backward->launch({x, grad}, {gx}, {kBeta, std::uint32_t(x.numel())});
         return {gx};
       }});
}

// Runs the op on `dev`: its result and gradient against ferry's ops and autograd.
bool check_on(const Device& dev, std::int64_t n) {
  ferry::manual_seed(8);
  Tensor x_cpu = ferry::randn({n}) * 3.0;
  // Two leaves of the same values: x on `dev` (detach: on the CPU, to() is x_cpu itself).
  Tensor x = x_cpu.to(dev).detach().requires_grad_();
  Tensor xr = x_cpu.clone().requires_grad_();
  Tensor y = ferry::call_op("sample.swish", {x});
  ferry::sum(y * y).backward();  // d/dx sum(y^2) = 2 y y'
  Tensor yr = swish_reference(xr);
  ferry::sum(yr * yr).backward();
  auto max_rel = [](const Tensor& a, const Tensor& b) {
    const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
    double worst = 0;
    for (std::size_t i = 0; i < va.size(); ++i)
      worst = std::max(worst, std::fabs(va[i] - vb[i]) / (std::fabs(vb[i]) + 1e-3));
    return worst;
  };
  const double ey = max_rel(y, yr), eg = max_rel(x.grad(), xr.grad());
  const bool ok = ey < 1e-4 && eg < 1e-4;
  std::printf(
      "  %-9s swish of %lld values: worst relative error %.2g (forward), %.2g (gradient)"
      " against ferry's ops: %s\n",
      dev.str().c_str(), (long long)n, ey, eg, ok ? "ok" : "MISMATCH");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  sample::Args args(
      argc, argv,
      "usage: ferry-custom-kernel [--device DEV] [--n N]\n\n"
      "Compiles a GLSL and a CUDA kernel at run time (for Vulkan and CUDA devices),\n"
      "registers them as the op \"sample.swish\" with its own backward, checks result\n"
      "and gradient against ferry's ops on every device (or --device), and shows the\n"
      "error a kernel that does not compile gives.",
      {{"device", "one device to run on (default: every available device)"},
       {"n", "elements (default 1000000)"},
       {"small!", "10000 elements"}});
  try {
    const std::int64_t n = args.number("n", args.has("small") ? 10000 : 1000000);
    std::vector<Device> devices =
        args.has("device") ? std::vector<Device>{args.device()} : sample::available_devices();
    register_swish();
    bool ok = true;
    for (const Device& d : devices) ok = check_on(d, n) && ok;

    // A kernel with a mistake in it, on the first GPU there is.
    for (const Device& d : devices) {
      if (d.is_cpu()) continue;
      const bool cuda = d.str().rfind("cuda", 0) == 0;
      const ferry::KernelSource broken =
          cuda ? ferry::KernelSource{.language = KernelLanguage::cuda,
                                     .code =
                                         "extern \"C\" __global__ void f(float* x) {\n"
                                         "  x[threadIdx.x] = 2 * y;\n}\n",
                                     .entry = "f",
                                     .name = "broken"}
               : ferry::KernelSource{.code =
                                         "#version 450\nlayout(local_size_x = 64) in;\n"
                                         "layout(binding = 0) buffer X { float x[]; };\n"
                                         "void main() { x[gl_LocalInvocationID.x] = 2 * y; }\n",
                                     .name = "broken"};
      try {
        CustomKernel k(d, broken);
        std::printf("the broken kernel compiled on %s?\n", d.str().c_str());
        ok = false;
      } catch (const ferry::CompileError& e) {
        std::printf("\na kernel that does not compile, on %s, says:\n%s\n", d.str().c_str(),
                    e.what());
      }
      break;
    }
    std::printf("\n%s\n", ok ? "the custom kernels match ferry's ops" : "FAILED");
    return ok ? 0 : 1;
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-custom-kernel: %s\n", e.what());
    return 1;
  }
}
