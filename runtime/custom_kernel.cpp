// runtime/custom_kernel.cpp — the device-independent half of custom kernels
// (Note [Custom kernels] in ferry/custom_kernel.hpp): argument checks, the
// grid, and the hand-off to the backend's CompiledKernel. Compiling and
// launching are the backends' (runtime/vulkan/vk_custom_kernel.cpp,
// cuda/cuda_custom_kernel.cpp).
#include "ferry/custom_kernel.hpp"

#include <fmt/format.h>

#include "dispatch.hpp"
#include "ferry/backend.hpp"
#include "ferry/error.hpp"
#include "ferry/registry.hpp"
#include "log_internal.hpp"

namespace ferry {
namespace {

const char* language_name(KernelLanguage l) {
  return l == KernelLanguage::glsl ? "GLSL" : "CUDA C++";
}

// Whether the kernel can index `t` as a plain array from element 0.
bool bound_whole(const Tensor& t) { return t.is_contiguous() && t.storage_offset() == 0; }

}  // namespace

std::unique_ptr<CompiledKernel> DeviceImpl::compile_kernel(const KernelSource& source) {
  throw UnsupportedError(fmt::format(
      "{}: this device takes no custom kernels ({} given); GLSL kernels run on Vulkan devices, "
      "CUDA C++ kernels on CUDA devices",
      device().str(), language_name(source.language)));
}

CustomKernel::CustomKernel(const Device& device, const KernelSource& source)
    : device_(device), name_(source.name) {
  if (source.language == KernelLanguage::cuda && source.entry.empty())
    throw Error(
        fmt::format("custom kernel '{}': a CUDA kernel needs the name of its extern \"C\" "
                    "__global__ function in KernelSource::entry",
                    source.name));
  compiled_ = std::shared_ptr<CompiledKernel>(device_impl(device).compile_kernel(source));
  FERRY_DEBUG("custom kernel '{}' ({}) compiled for {}", name_, language_name(source.language),
              device.str());
}

CustomKernel::~CustomKernel() = default;

std::array<std::uint32_t, 3> CustomKernel::group_size(const LaunchGrid& grid) const {
  return compiled_->group_size(grid);
}

void CustomKernel::launch(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                          const std::vector<KernelScalar>& scalars, const LaunchGrid& grid) const {
  const std::string what = fmt::format("custom kernel '{}'", name_);
  auto check_device = [&](const Tensor& t, const char* role, std::size_t i) {
    if (!t.defined()) throw Error(fmt::format("{}: {} {} is an undefined tensor", what, role, i));
    if (t.device() != device_)
      throw DeviceMismatchError(fmt::format("{}: {} {} is on {} but the kernel was compiled for {}",
                                            what, role, i, t.device().str(), device_.str()));
  };
  std::vector<Tensor> bound;
  bound.reserve(inputs.size() + outputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_device(inputs[i], "input", i);
    // A strided or offset view is read from a contiguous copy.
    bound.push_back(bound_whole(inputs[i]) ? inputs[i] : inputs[i].clone());
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    check_device(outputs[i], "output", i);
    if (!bound_whole(outputs[i]))
      throw ShapeError(fmt::format(
          "{}: output {} is a strided or offset view; the kernel writes its outputs as arrays "
          "from element 0, so pass a contiguous tensor of its own (ferry::empty) and copy it "
          "into the view after",
          what, i));
    bound.push_back(outputs[i]);
  }
  LaunchGrid g = grid;
  if (g.items[0] == 0) {
    if (outputs.empty())
      throw ShapeError(fmt::format(
          "{}: the grid (LaunchGrid::items) is not given and there is no output to derive it from",
          what));
    g.items[0] = std::uint64_t(outputs[0].numel());
    g.items[1] = g.items[2] = 1;
  }
  const std::array<std::uint32_t, 3> size = compiled_->group_size(g);
  std::array<std::uint32_t, 3> groups{};
  for (int d = 0; d < 3; ++d) {
    if (g.items[d] == 0) return;  // no work
    const std::uint64_t n = (g.items[d] + size[d] - 1) / size[d];
    if (n > 0xffffffffull)
      throw ShapeError(
          fmt::format("{}: {} workgroups along dim {} is more than a launch takes", what, n, d));
    groups[d] = std::uint32_t(n);
  }
  std::vector<TensorArg> args;
  args.reserve(bound.size());
  for (const Tensor& t : bound) args.push_back(tensor_arg(t));
  FERRY_DEBUG("{} on {}: {} inputs, {} outputs, {} scalars, {}x{}x{} groups of {}x{}x{}", what,
              device_.str(), inputs.size(), outputs.size(), scalars.size(), groups[0], groups[1],
              groups[2], size[0], size[1], size[2]);
  compiled_->launch(args, inputs.size(), scalars, g, groups);
  // The outputs were written in place (Note [Autograd]: saved tensors check versions).
  for (const Tensor& t : outputs) t.storage()->bump_version();
}

}  // namespace ferry
