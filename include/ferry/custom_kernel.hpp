// ferry/custom_kernel.hpp — a user's own GPU kernel, compiled at run time and
// run on ferry tensors.
//
// Note [Custom kernels]
// A CustomKernel is source code compiled for one device when it is made:
// GLSL compute shaders through glslang's library to SPIR-V for a Vulkan
// device, CUDA C++ through NVRTC for a CUDA device. launch() binds tensors as
// buffers (GLSL: `layout(set = 0, binding = i) buffer`; CUDA: pointer
// parameter i), the inputs first and the outputs after them, then passes the
// scalars (GLSL: one push-constant block, std430 scalars in declaration order;
// CUDA: by value, the parameters after the pointers), and enqueues the kernel
// on the device's stream like any op, ordered after the work that wrote its
// inputs and before any later reader of its outputs.
//
// The kernel sees each tensor as a plain array from element 0, in row-major
// order: an input that is a strided or offset view is copied to a contiguous
// tensor first; an output must be contiguous and start its storage (a fresh
// tensor, as ferry::empty makes), since the kernel writes it in place. Outputs
// are written, never read, by the kernel (the Vulkan backend places its
// barriers by that rule). A kernel that fails to compile raises CompileError
// with the compiler's line number and message.
//
// Thread-safety: a CustomKernel may be launched from any thread that may use
// its device.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "ferry/device.hpp"
#include "ferry/tensor.hpp"

namespace ferry {

enum class KernelLanguage {
  glsl,  // a GLSL 4.50 compute shader, entry point main, for Vulkan devices
  cuda,  // CUDA C++ with an extern "C" __global__ entry function, for CUDA devices
};

struct KernelSource {
  KernelLanguage language = KernelLanguage::glsl;
  std::string code;
  // CUDA: the extern "C" __global__ function to launch. GLSL: ignored (main).
  std::string entry;
  // Shown in compile errors in place of the file name.
  std::string name = "kernel";
};

// A scalar argument, passed after the tensors.
using KernelScalar = std::variant<float, std::int32_t, std::uint32_t, std::int64_t>;

struct LaunchGrid {
  // Work items (threads) along x, y and z; the kernel runs ceil(items / group
  // size) workgroups (blocks) along each. items[0] == 0 means one work item
  // per element of the first output.
  std::array<std::uint64_t, 3> items{0, 1, 1};
  // Threads per block of a CUDA kernel. A GLSL kernel's workgroup size is its
  // own local_size_x/y/z, and this is ignored.
  std::array<std::uint32_t, 3> block{256, 1, 1};
};

class CompiledKernel;  // the backend's side (ferry/backend.hpp)

class CustomKernel {
 public:
  // Compiles `source` for `device`. CompileError when the code does not
  // compile; UnsupportedError when the device's backend takes no kernels in
  // that language (GLSL runs on Vulkan devices, CUDA C++ on CUDA devices);
  // DeviceError for an unavailable device.
  CustomKernel(const Device& device, const KernelSource& source);
  ~CustomKernel();
  CustomKernel(const CustomKernel&) = default;
  CustomKernel& operator=(const CustomKernel&) = default;

  const Device& device() const { return device_; }
  const std::string& name() const { return name_; }
  // The workgroup (block) size a launch with `grid` uses.
  std::array<std::uint32_t, 3> group_size(const LaunchGrid& grid = {}) const;

  // Enqueues the kernel on `inputs` (bound first) and `outputs` (after them)
  // with `scalars` (Note [Custom kernels]); returns without waiting. A grid
  // with no work item launches nothing. Errors: DeviceMismatchError for a
  // tensor on another device; ShapeError for an output that is a view, or no
  // output to derive the grid from; Error when the tensors or scalars do not
  // match what the kernel declares (where the backend can tell: GLSL);
  // BackendError from the driver.
  void launch(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
              const std::vector<KernelScalar>& scalars = {}, const LaunchGrid& grid = {}) const;

 private:
  Device device_;
  std::string name_;
  std::shared_ptr<CompiledKernel> compiled_;
};

}  // namespace ferry
