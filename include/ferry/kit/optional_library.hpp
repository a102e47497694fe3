// include/ferry/kit/optional_library.hpp — a vendor library opened with dlopen at run time, so
// that a machine without it still runs ferry and says why the path it serves is off: the one
// loader behind oneDNN (runtime/cpu/onednn.cpp) and cuDNN (cuda/cuda_cudnn.cpp).
//
// Usage, with an X-macro listing the functions a path calls:
//   auto lib = kit::OptionalLibrary::open("oneDNN", "FERRY_ONEDNN", "libdnnl.so.2",
//                                         "install libdnnl2");
//   #define BIND(name) lib.bind(api.name, #name) &&
//   if (!lib.ok() || !(FUNCTIONS(BIND) true)) return lib.why_not();
// Each failure says "<what> off: ..." with the reason: the switch, dlerror()'s text and the
// remedy, or the first function the library lacks. The handle is never closed: the functions
// bound from it live as long as the process.
#pragma once

#include <dlfcn.h>
#include <fmt/format.h>

#include <string>
#include <string_view>

#include "ferry/kit/env.hpp"

namespace ferry::kit {

class OptionalLibrary {
 public:
  // Opens `soname` unless the environment variable `env_switch` is "0" (it takes 0 or 1: Note
  // [Environment variables] in ferry/kit/env.hpp). `what` names the library in messages;
  // `remedy` is said when the library does not load ("install libdnnl2").
  static OptionalLibrary open(std::string_view what, const char* env_switch, const char* soname,
                              std::string_view remedy) {
    OptionalLibrary lib;
    lib.what_ = what;
    lib.soname_ = soname;
    if (env::choice(env_switch, {"0", "1"}, "1") == "0") {
      lib.why_not_ = fmt::format("{} off: {}=0", what, env_switch);
      return lib;
    }
    lib.handle_ = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib.handle_) {
      const char* err = dlerror();
      lib.why_not_ = fmt::format("{} off: {} did not load ({}); {}", what, soname,
                                 err ? err : "not found", remedy);
    }
    return lib;
  }

  // Whether the library is open and every bind() so far found its function.
  bool ok() const { return handle_ && why_not_.empty(); }
  // Why not, once ok() is false: "<what> off: ...".
  const std::string& why_not() const { return why_not_; }

  // Points `fn` at the library's function `name`; false (and why_not() says which) if the
  // library is not open or lacks it.
  template <class Fn> bool bind(Fn& fn, const char* name) {
    if (!ok()) return false;
    fn = reinterpret_cast<Fn>(dlsym(handle_, name));
    if (!fn) why_not_ = fmt::format("{} off: {} lacks {}", what_, soname_, name);
    return fn != nullptr;
  }

 private:
  void* handle_ = nullptr;
  std::string what_, soname_, why_not_;
};

}  // namespace ferry::kit
