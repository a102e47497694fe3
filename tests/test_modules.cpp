// tests/test_modules.cpp — every backend module this tree built loads with
// every symbol resolved. A module that fails to load is listed as an
// unavailable backend like one whose driver is missing, so without this test
// a link mistake (an undefined symbol that only the dynamic loader notices)
// would turn every test of that backend into a skip instead of a failure.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

std::vector<std::string> built_modules() {
  std::vector<std::string> paths;
#ifdef FERRY_VULKAN_MODULE_PATH
  paths.emplace_back(FERRY_VULKAN_MODULE_PATH);
#endif
#ifdef FERRY_CUDA_MODULE_PATH
  // The CUDA module must load on a machine without an NVIDIA driver too: it
  // reports cuda as unavailable from inside, once loaded.
  paths.emplace_back(FERRY_CUDA_MODULE_PATH);
#endif
  return paths;
}

TEST(BackendModules, EveryBuiltModuleLoadsAndExportsItsEntryPoint) {
  const std::vector<std::string> paths = built_modules();
  if (paths.empty()) GTEST_SKIP() << "this build has no backend modules (no Vulkan, no CUDA)";
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    dlerror();
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    const char* err = handle ? nullptr : dlerror();
    ASSERT_NE(handle, nullptr) << (err ? err : "dlopen failed");
    EXPECT_NE(dlsym(handle, "ferry_create_backend"), nullptr);
    dlclose(handle);
  }
}

}  // namespace
