// runtime/vulkan/vk_custom_kernel.cpp — users' GLSL kernels on a Vulkan device
// (Note [Custom kernels] in ferry/custom_kernel.hpp): compiled with glslang's
// library to SPIR-V when the CustomKernel is made, checked against what the
// shader declares (glslang's reflection), and dispatched through the same
// recorder, barriers and pipeline cache as ferry's own shaders.
//
// Note [Custom GLSL kernels]
// The shader must be a compute shader (#version 450) whose tensors are
// storage buffers `layout(set = 0, binding = i) buffer`, i counting the
// inputs first, then the outputs; its scalars are one push-constant block of
// at most 128 bytes. The launch binds exactly the tensors given: a shader
// that uses a binding past them, a descriptor set other than 0, a uniform
// buffer or an image, or a push-constant block whose size is not the
// scalars' (std430: each scalar at its own size's alignment) is refused with
// Error before anything is recorded, rather than left to the driver.
#include <fmt/format.h>
#include <glslang/Include/Types.h>
#include <glslang/Public/ResourceLimits.h>
#include <glslang/Public/ShaderLang.h>
#include <glslang/SPIRV/GlslangToSpv.h>

#include <cstring>
#include <mutex>

#include "ferry/error.hpp"
#include "ferry/kit/compile_error.hpp"
#include "vulkan/vk_device.hpp"

namespace ferry::vulkan {
namespace {

// The first "ERROR: <file>:<line>: <message>" of glslang's log, and its line.
std::pair<int, std::string> first_error(const std::string& log) {
  constexpr std::string_view kTag = "ERROR: ";
  for (std::string_view l : detail::log_lines(log)) {
    if (!l.starts_with(kTag)) continue;
    const std::size_t colon = l.find(':', kTag.size());
    const std::size_t end = l.find(": ", colon + 1);
    if (colon == std::string_view::npos || end == std::string_view::npos) continue;
    if (auto line = detail::parse_line_number(l.substr(colon + 1, end - colon - 1)))
      return {*line, std::string(l.substr(end + 2))};
  }
  return {0, log.substr(0, log.find('\n'))};
}

[[noreturn]] void throw_compile_error(const KernelSource& src, const std::string& log) {
  auto [line, message] = first_error(log);
  detail::throw_kernel_compile_error(src.name, "GLSL", src.code, line, message, log);
}

struct Reflected {
  std::vector<std::uint32_t> spirv;
  std::array<std::uint32_t, 3> local_size{1, 1, 1};
  int max_binding = -1;         // the highest storage-buffer binding the shader uses
  std::uint32_t push_size = 0;  // bytes of its push-constant block
};

Reflected compile_glsl(const KernelSource& src) {
  static std::once_flag once;
  std::call_once(once, [] { glslang::InitializeProcess(); });
  const char* code = src.code.c_str();
  const char* name = src.name.c_str();
  const auto messages = EShMessages(EShMsgSpvRules | EShMsgVulkanRules);
  glslang::TShader shader(EShLangCompute);
  shader.setStringsWithLengthsAndNames(&code, nullptr, &name, 1);
  shader.setEnvInput(glslang::EShSourceGlsl, EShLangCompute, glslang::EShClientVulkan, 100);
  shader.setEnvClient(glslang::EShClientVulkan, glslang::EShTargetVulkan_1_1);
  shader.setEnvTarget(glslang::EShTargetSpv, glslang::EShTargetSpv_1_3);
  if (!shader.parse(GetDefaultResources(), 450, false, messages))
    throw_compile_error(src, shader.getInfoLog());
  glslang::TProgram program;
  program.addShader(&shader);
  if (!program.link(messages)) throw_compile_error(src, program.getInfoLog());
  program.buildReflection();

  Reflected r;
  for (int d = 0; d < 3; ++d) r.local_size[std::size_t(d)] = std::uint32_t(program.getLocalSize(d));
  const std::string what = fmt::format("custom kernel '{}'", src.name);
  // glslang's reflection lists some storage buffers among the uniform blocks
  // (a writeonly one, for instance): tell the blocks apart by their qualifiers.
  auto block = [&](const glslang::TObjectReflection& b) {
    const glslang::TQualifier& q = b.getType()->getQualifier();
    if (q.isPushConstant()) {
      r.push_size = std::uint32_t(b.size);
      return;
    }
    if (q.storage != glslang::EvqBuffer)
      throw Error(
          fmt::format("{}: uniform block '{}' is not a push-constant block; pass tensors "
                      "as storage buffers and scalars as push constants",
                      what, b.name));
    if (q.hasSet() && q.layoutSet != 0)
      throw Error(fmt::format("{}: buffer '{}' is in descriptor set {}; tensors are bound in set 0",
                              what, b.name, q.layoutSet));
    r.max_binding = std::max(r.max_binding, b.getBinding());
  };
  for (int i = 0; i < program.getNumBufferBlocks(); ++i) block(program.getBufferBlock(i));
  for (int i = 0; i < program.getNumUniformBlocks(); ++i) block(program.getUniformBlock(i));
  for (int i = 0; i < program.getNumUniformVariables(); ++i) {
    const glslang::TType* t = program.getUniform(i).getType();
    if (t && (t->getBasicType() == glslang::EbtSampler))
      throw Error(
          fmt::format("{}: '{}' is an image or sampler; custom kernels bind storage "
                      "buffers only",
                      what, program.getUniform(i).name));
  }
  glslang::SpvOptions options;
  options.validate = true;
  glslang::GlslangToSpv(*program.getIntermediate(EShLangCompute), r.spirv, &options);
  return r;
}

// The scalars as one std430 push-constant block: each at its own size's alignment.
std::vector<std::uint8_t> pack_scalars(const std::vector<KernelScalar>& scalars) {
  std::vector<std::uint8_t> bytes;
  for (const KernelScalar& s : scalars)
    std::visit(
        [&](auto v) {
          const std::size_t size = sizeof(v);
          bytes.resize((bytes.size() + size - 1) / size * size);
          const std::size_t at = bytes.size();
          bytes.resize(at + size);
          std::memcpy(bytes.data() + at, &v, size);
        },
        s);
  return bytes;
}

class VulkanCompiledKernel final : public CompiledKernel {
 public:
  VulkanCompiledKernel(VulkanDevice& dev, std::string kernel_name, Reflected r)
      : dev_(dev), name_(std::move(kernel_name)), r_(std::move(r)) {
    // One module per distinct SPIR-V: the same source compiled twice shares it.
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (std::uint32_t w : r_.spirv) h = (h ^ w) * 0x100000001b3ull;
    shader_ = fmt::format("user/{:016x}", h);
    dev_.add_shader(shader_, r_.spirv);
  }

  std::array<std::uint32_t, 3> group_size(const LaunchGrid&) const override {
    return r_.local_size;
  }

  void launch(const std::vector<TensorArg>& tensors, std::size_t first_output,
              const std::vector<KernelScalar>& scalars, const LaunchGrid&,
              const std::array<std::uint32_t, 3>& groups) override {
    const std::string what = fmt::format("custom kernel '{}'", name_);
    if (r_.max_binding >= int(tensors.size()))
      throw Error(
          fmt::format("{}: the shader uses binding {} but {} tensors were given (inputs "
                      "take bindings 0, 1, ..., then the outputs)",
                      what, r_.max_binding, tensors.size()));
    if (tensors.size() > kMaxBindings)
      throw Error(fmt::format("{}: {} tensors; a dispatch binds at most {}", what, tensors.size(),
                              kMaxBindings));
    const std::vector<std::uint8_t> push = pack_scalars(scalars);
    if (push.size() != r_.push_size)
      throw Error(
          fmt::format("{}: the scalars take {} bytes of push constants but the shader's "
                      "push-constant block has {}",
                      what, push.size(), r_.push_size));
    if (push.size() > kMaxPushBytes)
      throw Error(fmt::format("{}: {} bytes of scalars; push constants hold at most {}", what,
                              push.size(), kMaxPushBytes));
    const KernelLimits& lim = dev_.limits();
    for (std::uint32_t g : groups)
      if (g > lim.max_groups_x)
        throw UnsupportedError(fmt::format(
            "{}: {} workgroups along one dim; this device takes at most {} (launch fewer work "
            "items, or give the shader a larger local_size)",
            what, g, lim.max_groups_x));
    DispatchDesc d;
    d.shader = shader_;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      Binding b = dev_.bind(tensors[i], i < first_output ? Access::read : Access::write);
      if (b.element_offset != 0)
        throw Error(fmt::format("{}: tensor {} does not start at a bindable offset", what, i));
      d.bindings.push_back(b);
    }
    d.push = push.empty() ? nullptr : push.data();
    d.push_size = std::uint32_t(push.size());
    d.groups = groups;
    dev_.dispatch(d);
  }

 private:
  VulkanDevice& dev_;
  std::string name_;
  Reflected r_;
  std::string shader_;
};

}  // namespace

std::unique_ptr<CompiledKernel> VulkanDevice::compile_kernel(const KernelSource& source) {
  if (source.language != KernelLanguage::glsl)
    return DeviceImpl::compile_kernel(source);  // UnsupportedError naming both
  return std::make_unique<VulkanCompiledKernel>(*this, source.name, compile_glsl(source));
}

void VulkanDevice::add_shader(const std::string& name, const std::vector<std::uint32_t>& spirv) {
  std::lock_guard lock(mutex_);
  pipelines_->add_shader(name, spirv);
}

}  // namespace ferry::vulkan
