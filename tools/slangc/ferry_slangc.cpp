// ferry_slangc: a minimal Slang -> SPIR-V compiler driver over slang.h's COM API.
//
// usage: ferry_slangc <input.slang> <entryPoint> <out.spv> [-o out.spvasm] [-DNAME[=VALUE]]...
//                     [-O0..3] [-g] [-cap spvCapabilityName]... [--require-capability N]...
//
// Compiles one compute entry point for a single SPIR-V target (profile spirv_1_6, SPIR-V emitted
// directly by Slang, not via GLSL). `-o x.spvasm` additionally writes Slang's SPIR-V assembly
// (useful because Debian's spirv-dis is too old for SPV_KHR_cooperative_matrix).
// `--require-capability N` fails unless the module declares OpCapability N: a kernel whose
// cooperative-matrix code a define or an edit switched off still compiles, and would only be
// found out on a GPU; the build asks for 6022 (CooperativeMatrixKHR) in those modules.
// Build-time only (shaders/coopmat.cmake builds it outside CMake's targets, without the
// sanitizer flags, and runs it); the Vulkan module embeds the SPIR-V it writes.
#include <slang.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

// Tiny COM smart pointer (the wheel ships slang.h but not slang-com-ptr.h).
template <class T> class ComPtr {
 public:
  ComPtr() = default;
  ComPtr(const ComPtr&) = delete;
  ComPtr& operator=(const ComPtr&) = delete;
  ~ComPtr() { reset(); }
  ComPtr& operator=(std::nullptr_t) {
    reset();
    return *this;
  }
  void reset() {
    if (p_) {
      p_->release();
      p_ = nullptr;
    }
  }
  void attach(T* p) {
    reset();
    p_ = p;
  }  // takes ownership of one reference
  T** writeRef() {
    reset();
    return &p_;
  }
  T* get() const { return p_; }
  T* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
};

static void printDiag(slang::IBlob* diag, const char* what) {
  if (diag && diag->getBufferSize() > 0)
    fprintf(stderr, "[slang %s diagnostics]\n%.*s\n", what, (int)diag->getBufferSize(),
            (const char*)diag->getBufferPointer());
}

static bool readFile(const char* path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return true;
}

static bool writeFile(const std::string& path, const void* data, size_t size) {
  FILE* f = fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = fwrite(data, 1, size, f) == size;
  ok = (fclose(f) == 0) && ok;
  return ok;
}

// Whether SPIR-V module `words` (header included) declares OpCapability `cap`: walks the
// instructions (word 0: word count << 16 | opcode) rather than searching the words, so that a
// literal that happens to hold the same bits does not count.
static bool hasCapability(const uint32_t* words, size_t count, uint32_t cap) {
  constexpr uint32_t kOpCapability = (2u << 16) | 17u;  // two words, opcode 17
  // The module's header is 5 words.
  for (size_t i = 5; i < count;) {
    const uint32_t wordCount = words[i] >> 16;
    if (wordCount == 0) return false;  // malformed: stop instead of looping
    if (words[i] == kOpCapability && i + 1 < count && words[i + 1] == cap) return true;
    i += wordCount;
  }
  return false;
}

// Marks the module's OpSource (opcode 3) language Unknown (0) where Slang wrote its own, Slang
// (11): the validation layer Debian 12 ships (1.3.239) predates that value and rejects the
// whole module for it. The operand is informational only.
static void hideSlangSourceLanguage(std::vector<uint32_t>& words) {
  constexpr uint32_t kOpSource = 3, kSlang = 11;
  for (size_t i = 5; i < words.size();) {
    const uint32_t wordCount = words[i] >> 16;
    if (wordCount == 0) return;
    if ((words[i] & 0xffffu) == kOpSource && i + 1 < words.size() && words[i + 1] == kSlang)
      words[i + 1] = 0;
    i += wordCount;
  }
}

#define CHECK(expr, msg)                                                             \
  do {                                                                               \
    SlangResult _r = (expr);                                                         \
    if (SLANG_FAILED(_r)) {                                                          \
      fprintf(stderr, "error: %s failed (SlangResult 0x%08x)\n", msg, (unsigned)_r); \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr,
            "usage: %s <input.slang> <entryPoint> <out.spv> [-o out.spvasm] [-DNAME[=VAL]]... "
            "[-O0|-O1|-O2|-O3] [-g] [-cap spvCapabilityName]... [--require-capability N]...\n",
            argv[0]);
    return 2;
  }
  const char* inPath = argv[1];
  const char* entryName = argv[2];
  const std::string outPath = argv[3];
  std::string asmPath;
  std::vector<std::string> macroStore;  // "NAME" / "VALUE" pairs
  int optLevel = SLANG_OPTIMIZATION_LEVEL_HIGH;
  bool debugInfo = false;
  // Extra capabilities (e.g. spvCooperativeMatrixKHR) for the profile.
  std::vector<std::string> caps;
  std::vector<uint32_t> required;  // OpCapability operands the output must declare
  for (int i = 4; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-o" && i + 1 < argc) {
      asmPath = argv[++i];
    } else if (a.rfind("-D", 0) == 0 && a.size() > 2) {
      std::string d = a.substr(2);
      size_t eq = d.find('=');
      macroStore.push_back(eq == std::string::npos ? d : d.substr(0, eq));
      macroStore.push_back(eq == std::string::npos ? "1" : d.substr(eq + 1));
    } else if (a.size() == 3 && a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3') {
      optLevel = a[2] - '0';
    } else if (a == "-cap" && i + 1 < argc) {
      caps.push_back(argv[++i]);
    } else if (a == "--require-capability" && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long cap = strtoul(argv[++i], &end, 10);
      if (*argv[i] == '\0' || *end != '\0' || cap > UINT32_MAX) {
        fprintf(stderr, "error: --require-capability takes a number, not '%s'\n", argv[i]);
        return 2;
      }
      required.push_back(uint32_t(cap));
    } else if (a == "-g") {
      debugInfo = true;
    } else {
      fprintf(stderr, "error: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  std::vector<slang::PreprocessorMacroDesc> macros;
  for (size_t i = 0; i + 1 < macroStore.size(); i += 2)
    macros.push_back({macroStore[i].c_str(), macroStore[i + 1].c_str()});

  std::string source;
  if (!readFile(inPath, source)) {
    fprintf(stderr, "error: cannot read '%s'\n", inPath);
    return 1;
  }

  ComPtr<slang::IGlobalSession> global;
  CHECK(slang::createGlobalSession(global.writeRef()), "slang::createGlobalSession");

  const SlangProfileID profile = global->findProfile("spirv_1_6");
  if (profile == SLANG_PROFILE_UNKNOWN) {
    fprintf(stderr, "error: Slang does not know profile spirv_1_6\n");
    return 1;
  }

  // Target 0: SPIR-V binary. Target 1 (optional): SPIR-V assembly text.
  std::vector<slang::CompilerOptionEntry> targetOpts;
  {
    slang::CompilerOptionEntry e;
    e.name = slang::CompilerOptionName::EmitSpirvDirectly;
    e.value.kind = slang::CompilerOptionValueKind::Int;
    e.value.intValue0 = 1;
    targetOpts.push_back(e);
    for (const std::string& c : caps) {
      SlangCapabilityID id = global->findCapability(c.c_str());
      if (id == SLANG_CAPABILITY_UNKNOWN) {
        fprintf(stderr, "error: Slang does not know capability '%s'\n", c.c_str());
        return 1;
      }
      e.name = slang::CompilerOptionName::Capability;
      e.value.intValue0 = (int32_t)id;
      targetOpts.push_back(e);
    }
  }
  slang::TargetDesc targets[2];
  for (int t = 0; t < 2; ++t) {
    targets[t].format = t == 0 ? SLANG_SPIRV : SLANG_SPIRV_ASM;
    targets[t].profile = profile;
    targets[t].compilerOptionEntries = targetOpts.data();
    targets[t].compilerOptionEntryCount = (uint32_t)targetOpts.size();
  }

  std::vector<slang::CompilerOptionEntry> sessionOpts;
  {
    slang::CompilerOptionEntry e;
    e.name = slang::CompilerOptionName::Optimization;
    e.value.kind = slang::CompilerOptionValueKind::Int;
    e.value.intValue0 = optLevel;
    sessionOpts.push_back(e);
    // Keep the entry point's own name in the SPIR-V (OpEntryPoint "<entryName>") instead of "main".
    e.name = slang::CompilerOptionName::VulkanUseEntryPointName;
    e.value.intValue0 = 1;
    sessionOpts.push_back(e);
    if (debugInfo) {
      e.name = slang::CompilerOptionName::DebugInformation;
      e.value.intValue0 = SLANG_DEBUG_INFO_LEVEL_STANDARD;
      sessionOpts.push_back(e);
    }
  }

  // Search path: the directory of the input file (for `import`s next to it).
  std::string dir = inPath;
  size_t slash = dir.find_last_of('/');
  dir = (slash == std::string::npos) ? std::string(".") : dir.substr(0, slash);
  const char* searchPaths[] = {dir.c_str()};

  slang::SessionDesc sd;
  sd.targets = targets;
  sd.targetCount = asmPath.empty() ? 1 : 2;
  sd.searchPaths = searchPaths;
  sd.searchPathCount = 1;
  sd.preprocessorMacros = macros.empty() ? nullptr : macros.data();
  sd.preprocessorMacroCount = (SlangInt)macros.size();
  sd.compilerOptionEntries = sessionOpts.data();
  sd.compilerOptionEntryCount = (uint32_t)sessionOpts.size();

  ComPtr<slang::ISession> session;
  CHECK(global->createSession(sd, session.writeRef()), "IGlobalSession::createSession");

  // Module name: file stem.
  std::string stem = inPath;
  if (slash != std::string::npos) stem = stem.substr(slash + 1);
  if (stem.size() > 6 && stem.compare(stem.size() - 6, 6, ".slang") == 0)
    stem.resize(stem.size() - 6);

  ComPtr<slang::IBlob> diag;
  ComPtr<slang::IBlob> srcBlob;
  srcBlob.attach(slang_createBlob(source.data(), source.size()));
  slang::IModule* module =
      session->loadModuleFromSource(stem.c_str(), inPath, srcBlob.get(), diag.writeRef());
  printDiag(diag.get(), "loadModule");
  if (!module) {
    fprintf(stderr, "error: failed to load/compile module '%s'\n", inPath);
    return 1;
  }

  ComPtr<slang::IEntryPoint> entry;
  CHECK(module->findEntryPointByName(entryName, entry.writeRef()),
        "IModule::findEntryPointByName (does the function carry [shader(\"compute\")]?)");

  slang::IComponentType* parts[] = {module, entry.get()};
  ComPtr<slang::IComponentType> composite;
  diag = nullptr;
  SlangResult r =
      session->createCompositeComponentType(parts, 2, composite.writeRef(), diag.writeRef());
  printDiag(diag.get(), "createCompositeComponentType");
  CHECK(r, "ISession::createCompositeComponentType");

  ComPtr<slang::IComponentType> linked;
  diag = nullptr;
  r = composite->link(linked.writeRef(), diag.writeRef());
  printDiag(diag.get(), "link");
  CHECK(r, "IComponentType::link");

  ComPtr<slang::IBlob> code;
  diag = nullptr;
  r = linked->getEntryPointCode(0, 0, code.writeRef(), diag.writeRef());
  printDiag(diag.get(), "getEntryPointCode(SPIR-V)");
  CHECK(r, "IComponentType::getEntryPointCode (SPIR-V)");
  if (!code || code->getBufferSize() < 20 || code->getBufferSize() % 4 != 0 ||
      *(const uint32_t*)code->getBufferPointer() != 0x07230203u) {
    fprintf(stderr, "error: Slang returned something that is not a SPIR-V module\n");
    return 1;
  }
  const uint32_t* first = (const uint32_t*)code->getBufferPointer();
  std::vector<uint32_t> words(first, first + code->getBufferSize() / 4);
  hideSlangSourceLanguage(words);
  for (uint32_t cap : required)
    if (!hasCapability(words.data(), words.size(), cap)) {
      fprintf(stderr, "error: %s: the SPIR-V declares no OpCapability %u (--require-capability)\n",
              inPath, cap);
      return 1;
    }
  if (!writeFile(outPath, words.data(), words.size() * 4)) {
    fprintf(stderr, "error: cannot write '%s'\n", outPath.c_str());
    return 1;
  }
  printf("wrote %s (%zu bytes, entry '%s')\n", outPath.c_str(), (size_t)code->getBufferSize(),
         entryName);

  if (!asmPath.empty()) {
    ComPtr<slang::IBlob> text;
    diag = nullptr;
    r = linked->getEntryPointCode(0, 1, text.writeRef(), diag.writeRef());
    printDiag(diag.get(), "getEntryPointCode(SPIR-V asm)");
    CHECK(r, "IComponentType::getEntryPointCode (SPIR-V asm)");
    if (!writeFile(asmPath, text->getBufferPointer(), text->getBufferSize())) {
      fprintf(stderr, "error: cannot write '%s'\n", asmPath.c_str());
      return 1;
    }
    printf("wrote %s (%zu bytes)\n", asmPath.c_str(), (size_t)text->getBufferSize());
  }
  return 0;
}
