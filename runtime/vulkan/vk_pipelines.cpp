// runtime/vulkan/vk_pipelines.cpp — shader modules, pipeline layouts and
// compute pipelines, created once per (shader, specialization constants) and
// kept; the driver's pipeline cache persists on disk between runs.
//
// Note [Pipeline cache]
// Compiling SPIR-V to machine code is the slow part of a first run (tens of
// ms per pipeline on some drivers). The VkPipelineCache is saved at exit to
// $FERRY_CACHE_DIR (default $XDG_CACHE_HOME/ferry, else ~/.cache/ferry) in a
// file named after the device's vendor, device id, pipelineCacheUUID and
// driver version, wrapped with a hash (vk_policy.hpp). A missing, truncated,
// corrupt or foreign file is ignored and the cache starts empty. The
// cooperative-matrix tiles measured on the device (Note [Measured coopmat
// tiles] in vk_kernels_coopmat.cpp) are kept beside it, in <file>.tiles.
#include "vulkan/vk_pipelines.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>

#include "ferry/error.hpp"
#include "log_internal.hpp"
#include "vulkan/vk_coopmat_shaders.hpp"
#include "vulkan/vk_error.hpp"
#include "vulkan/vk_policy.hpp"
#include "vulkan/vk_shaders.hpp"

namespace ferry::vulkan {

Pipelines::Pipelines(VkDevice device, const VolkDeviceTable& vk, const PhysicalDevice& physical,
                     std::string device_name, bool full_variant, bool push_descriptors,
                     bool subgroups)
    : device_(device),
      vk_(vk),
      physical_(physical),
      device_name_(std::move(device_name)),
      full_variant_(full_variant),
      push_descriptors_(push_descriptors),
      subgroups_(subgroups) {
  load_cache();
}

Pipelines::~Pipelines() {
  for (auto& [h, bucket] : pipelines_)
    for (auto& c : bucket) vk_.vkDestroyPipeline(device_, c.pipeline, nullptr);
  for (auto& [k, m] : modules_) vk_.vkDestroyShaderModule(device_, m, nullptr);
  for (auto& [k, l] : layouts_) {
    vk_.vkDestroyPipelineLayout(device_, l.pipeline_layout, nullptr);
    vk_.vkDestroyDescriptorSetLayout(device_, l.set_layout, nullptr);
  }
  if (pipeline_cache_) vk_.vkDestroyPipelineCache(device_, pipeline_cache_, nullptr);
}

const Pipelines::Layout& Pipelines::layout_for(std::size_t bindings) {
  auto it = layouts_.find(bindings);
  if (it != layouts_.end()) return it->second;
  std::vector<VkDescriptorSetLayoutBinding> b(bindings);
  for (std::size_t i = 0; i < bindings; ++i)
    b[i] = {std::uint32_t(i), VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT,
            nullptr};
  VkDescriptorSetLayoutCreateInfo sli{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  if (push_descriptors_) sli.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  sli.bindingCount = std::uint32_t(bindings);
  sli.pBindings = b.data();
  Layout l;
  check(vk_.vkCreateDescriptorSetLayout(device_, &sli, nullptr, &l.set_layout),
        "vkCreateDescriptorSetLayout");
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kMaxPushBytes};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &l.set_layout;
  pli.pushConstantRangeCount = 1;
  pli.pPushConstantRanges = &range;
  check(vk_.vkCreatePipelineLayout(device_, &pli, nullptr, &l.pipeline_layout),
        "vkCreatePipelineLayout");
  return layouts_.emplace(bindings, l).first->second;
}

// Note [Per-op shader modules]
// A driver compiles a pipeline from the whole SPIR-V module and only then folds the
// specialization constants and drops the code they rule out, so its cost grows with the
// module, not with what the pipeline runs. elementwise.comp holds every element-wise op's
// code (205 KB of SPIR-V in the full variant) and each (op, dtypes, dims) pipeline paid for
// all of them: on lavapipe 0.15-0.35 s a pipeline, most of the Vulkan test time. So the build
// compiles such a shader, for the full variant, once per op it runs (shaders/shaders.cmake's
// FERRY_PER_OP_SHADERS) with OP a constant, and spirv-opt removes the other ops' code (24-29
// KB a module); a dispatch that names its op (DispatchDesc::op) is made from that op's module
// (the full variant has no module of all ops for such a shader; the base variant keeps it).
// Measured on lavapipe (Mesa's shader cache warm): the conformance suite on vulkan:0 with
// validation, 470 s -> 111 s; ferry_tests in one process, 4 min -> 29 s. ggml's Vulkan backend
// makes its shaders per op and type for the same reason.
//
// Note [f64 on Vulkan]
// PyTorch takes f64 for every op that takes a float, and GPUs that compute it (shaderFloat64:
// NVIDIA and AMD GPUs, at 1/64 (consumer) to 1/2 (data-centre) of their f32 rate, and lavapipe)
// are asked for it by code ported from PyTorch. So every shader that computes floats is also
// compiled with FERRY_F64 (shaders/common.glsl): f64 bound as doubles, the float dtypes loaded
// into and computed in FTYPE = double, the math written once over FTYPE. A dispatch that binds
// an f64 tensor (DispatchDesc::f64) takes that module: per op for the per-op shaders (Note
// [Per-op shader modules]), one for the whole shader otherwise; the ops each serves are the
// shader's `// ferry-f64-ops:` lines, which shaders/shaders.cmake reads. supports(op, f64) is
// true exactly where such a module exists and the device has shaderFloat64 and the full
// variant (VulkanDevice::supports); elsewhere the kernels refuse f64 with UnsupportedError, and
// f64 tensors still move to and from every Vulkan device byte for byte (index_select and
// gather, moves_element_bytes, take f64 on every device). GLSL has doubles for IEEE arithmetic
// (+ - * /, sqrt, floor, comparisons, conversions; lavapipe rounds each correctly, as the CPU
// does, while the Vulkan spec lets division and sqrt be as loose as float's, which the
// conformance suite's f64 threshold would catch) but no double exp, log, sin or pow:
// shaders/transcendentals_f64.glsl writes them from that arithmetic, within a few ulp of the C
// library (tests/test_f64_vulkan_math.cpp measures it). Accumulations (sums, scans, softmax,
// layer_norm's statistics, matmul) keep their float algorithms in double; the hyper-parameters
// of the optimizer steps and the bounds of the draws and of arange travel as doubles, so the
// results are the CPU's to the last bits or ulps.
bool has_f64_module(std::uint32_t op) {
  // Asked on every f64 supports() and kernel call: the table is read once.
  static const std::vector<bool> has = [] {
    std::vector<bool> v(kOpCount, false);
    for (std::size_t i = 0; i < kEmbeddedOpShaderCount; ++i)
      if (kEmbeddedOpShaders[i].f64 && kEmbeddedOpShaders[i].op < kOpCount)
        v[kEmbeddedOpShaders[i].op] = true;
    return v;
  }();
  return op < has.size() && has[op];
}

std::string Pipelines::shaders_used() const {
  std::set<std::string> names;
  for (const auto& [key, list] : pipelines_)
    for (const CachedPipeline& c : list) names.insert(c.module_shader);
  return fmt::format("{}", fmt::join(names, ","));
}

std::string Pipelines::module_shader(std::string_view name) const {
  if (subgroups_) {
    std::string variant = fmt::format("{}_subgroup", name);
    for (std::size_t i = 0; i < kEmbeddedShaderCount; ++i)
      if (variant == kEmbeddedShaders[i].name) return variant;
  }
  return std::string(name);
}

VkShaderModule Pipelines::shader_module(std::string_view name, std::uint32_t op, bool f64) {
  const std::uint32_t* words = nullptr;
  std::size_t word_count = 0;
  std::string key(name);
  if (full_variant_ && op != DispatchDesc::kAnyOp) {
    for (std::size_t i = 0; i < kEmbeddedOpShaderCount; ++i) {
      const EmbeddedOpShader& s = kEmbeddedOpShaders[i];
      if (s.op == op && s.f64 == f64 && name == s.name) {
        words = s.words;
        word_count = s.word_count;
        key = fmt::format("{}@{}{}", name, op, f64 ? "/f64" : "");
        break;
      }
    }
  }
  if (f64 && !words)  // supports() said no; a kernel that asks anyway is a bug
    throw UnsupportedError(
        fmt::format("vulkan: the '{}' shader has no f64 module for op {}", name, op));
  auto it = modules_.find(key);
  if (it != modules_.end()) return it->second;
  for (std::size_t i = 0; i < kEmbeddedShaderCount && !words; ++i)
    if (name == kEmbeddedShaders[i].name) {
      const EmbeddedShader& s = kEmbeddedShaders[i];
      words = full_variant_ ? s.full : s.base;
      word_count = full_variant_ ? s.full_words : s.base_words;
      if (!words)  // a per-op shader's dispatch that named no op, or an op the build left out
        throw Error(fmt::format("vulkan: the '{}' shader has no module for op {}", name, op));
    }
  // Slang's modules (Note [Cooperative-matrix GEMM] in vk_kernels_coopmat.cpp): one variant.
  for (std::size_t i = 0; i < kEmbeddedCoopmatShaderCount && !words; ++i)
    if (name == kEmbeddedCoopmatShaders[i].name) {
      words = kEmbeddedCoopmatShaders[i].words;
      word_count = kEmbeddedCoopmatShaders[i].word_count;
    }
  if (!words) throw Error(fmt::format("vulkan: no embedded shader named '{}'", name));
  VkShaderModuleCreateInfo ci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  ci.codeSize = word_count * 4;
  ci.pCode = words;
  VkShaderModule m;
  check(vk_.vkCreateShaderModule(device_, &ci, nullptr, &m), "vkCreateShaderModule");
  return modules_.emplace(std::move(key), m).first->second;
}

VkPipeline Pipelines::pipeline_for(const DispatchDesc& d, const Layout& layout) {
  // Looked up on every dispatch: hash the key's parts rather than format a string.
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 0x100000001b3ull; };
  for (char c : d.shader) mix(std::uint8_t(c));
  mix(d.bindings.size());
  for (std::uint32_t v : d.spec) mix(v);
  mix(d.op);
  mix(d.f64);
  mix(d.subgroup_size);
  std::vector<CachedPipeline>& bucket = pipelines_[h];
  for (const CachedPipeline& c : bucket)
    if (c.shader == d.shader && c.bindings == d.bindings.size() && c.spec == d.spec &&
        c.op == d.op && c.f64 == d.f64 && c.subgroup_size == d.subgroup_size)
      return c.pipeline;

  std::vector<VkSpecializationMapEntry> entries(d.spec.size());
  for (std::size_t i = 0; i < d.spec.size(); ++i)
    entries[i] = {std::uint32_t(i), std::uint32_t(i * 4), 4};
  VkSpecializationInfo si{std::uint32_t(entries.size()), entries.data(), d.spec.size() * 4,
                          d.spec.data()};
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  std::string module = module_shader(d.shader);
  ci.stage.module = shader_module(module, d.op, d.f64);
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = d.spec.empty() ? nullptr : &si;
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo size{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO};
  if (d.subgroup_size) {  // the device enabled subgroupSizeControl and computeFullSubgroups
    size.requiredSubgroupSize = d.subgroup_size;
    ci.stage.pNext = &size;
    ci.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  }
  ci.layout = layout.pipeline_layout;
  const std::string key =
      fmt::format("{}/{}/{}", d.shader, d.bindings.size(), fmt::join(d.spec, ","));
  VkPipeline p;
  const auto started = std::chrono::steady_clock::now();
  check(vk_.vkCreateComputePipelines(device_, pipeline_cache_, 1, &ci, nullptr, &p),
        fmt::format("creating the '{}' pipeline", key));
  // With its time: on a driver that compiles in software (lavapipe, with its shader cache
  // empty) pipelines are where a test run's time goes.
  FERRY_DEBUG("{}: pipeline {} ({:.0f} ms)", device_name_, key,
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                  .count());
  cache_dirty_ = true;
  bucket.push_back({std::string(d.shader), std::move(module), d.bindings.size(), d.spec, d.op,
                    d.f64, d.subgroup_size, p});
  return p;
}

std::string Pipelines::cache_path() const {
  std::filesystem::path dir;
  if (const char* d = std::getenv("FERRY_CACHE_DIR"); d && *d)
    dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    dir = std::filesystem::path(x) / "ferry";
  else if (const char* h = std::getenv("HOME"); h && *h)
    dir = std::filesystem::path(h) / ".cache" / "ferry";
  else
    return {};
  const auto& p = physical_.props;
  std::string uuid;
  for (std::uint8_t b : p.pipelineCacheUUID) uuid += fmt::format("{:02x}", b);
  return (dir / fmt::format("vulkan-{:04x}-{:04x}-{}-{}{}.bin", p.vendorID, p.deviceID, uuid,
                            p.driverVersion, full_variant_ ? "" : "-base"))
      .string();
}

void Pipelines::load_cache() {
  std::vector<std::uint8_t> data;
  std::string path = cache_path();
  if (!path.empty()) {
    std::ifstream f(path, std::ios::binary);
    std::vector<std::uint8_t> file((std::istreambuf_iterator<char>(f)), {});
    CacheIdentity id{physical_.props.vendorID, physical_.props.deviceID, {}};
    std::memcpy(id.uuid, physical_.props.pipelineCacheUUID, 16);
    if (auto d = unwrap_pipeline_cache(file, id))
      data = std::move(*d);
    else if (!file.empty())
      FERRY_WARN("{}: ignoring the pipeline cache {} (corrupt, or from another driver)",
                 device_name_, path);
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  ci.initialDataSize = data.size();
  ci.pInitialData = data.empty() ? nullptr : data.data();
  if (vk_.vkCreatePipelineCache(device_, &ci, nullptr, &pipeline_cache_) != VK_SUCCESS) {
    ci.initialDataSize = 0;  // the driver refused the data: start empty
    ci.pInitialData = nullptr;
    check(vk_.vkCreatePipelineCache(device_, &ci, nullptr, &pipeline_cache_),
          "vkCreatePipelineCache");
  }
  FERRY_DEBUG("{}: pipeline cache {} ({} bytes loaded)", device_name_, path, data.size());
  if (!path.empty()) {  // the measured tiles, beside it
    std::ifstream f(path + ".tiles");
    tiles_ = read_tile_table(std::string((std::istreambuf_iterator<char>(f)), {}));
  }
}

std::optional<std::string> Pipelines::tile(const TileKey& key) const {
  auto it = tiles_.find(key);
  if (it == tiles_.end()) return std::nullopt;
  return it->second;
}

void Pipelines::remember_tile(const TileKey& key, std::string name) {
  tiles_[key] = std::move(name);
  tiles_dirty_ = true;
}

namespace {
// Writes `bytes` to `path` through a temporary file and a rename, so a concurrent reader sees
// the old file or the new one, never half of one.
bool write_file(const std::string& path, const void* bytes, std::size_t size) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::string tmp = fmt::format("{}.{}.tmp", path, ::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(static_cast<const char*>(bytes), std::streamsize(size));
    if (!f) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::remove(tmp.c_str());
  return !ec;
}
}  // namespace

void Pipelines::save_cache() {
  const std::string path = cache_path();
  if (path.empty()) return;
  if (tiles_dirty_) {
    const std::string text = write_tile_table(tiles_);
    if (write_file(path + ".tiles", text.data(), text.size())) tiles_dirty_ = false;
  }
  if (!pipeline_cache_ || !cache_dirty_) return;
  std::size_t size = 0;
  if (vk_.vkGetPipelineCacheData(device_, pipeline_cache_, &size, nullptr) != VK_SUCCESS) return;
  std::vector<std::uint8_t> data(size);
  if (vk_.vkGetPipelineCacheData(device_, pipeline_cache_, &size, data.data()) != VK_SUCCESS)
    return;
  data.resize(size);
  const std::vector<std::uint8_t> file = wrap_pipeline_cache(data);
  if (write_file(path, file.data(), file.size())) cache_dirty_ = false;
}

void Pipelines::add_shader(const std::string& name, const std::vector<std::uint32_t>& spirv) {
  if (modules_.count(name)) return;
  VkShaderModuleCreateInfo ci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  ci.codeSize = spirv.size() * 4;
  ci.pCode = spirv.data();
  VkShaderModule m;
  check(vk_.vkCreateShaderModule(device_, &ci, nullptr, &m), "vkCreateShaderModule");
  modules_.emplace(name, m);
}

}  // namespace ferry::vulkan
