// cuda/cuda_cudnn.cpp — opening cuDNN with dlopen (cuda_cudnn.hpp).
#include "cuda_cudnn.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "ferry/kit/optional_library.hpp"

namespace ferry::cuda::cudnn {

#ifndef FERRY_HAVE_CUDNN_HEADERS

std::string status() { return "cuDNN off: cudnn.h was not found when ferry was built"; }
bool takes(int, DType) { return false; }

#else

const Api& api() {
  static const Api a = [] {
    Api a;
    auto lib = kit::OptionalLibrary::open("cuDNN", "FERRY_CUDNN", "libcudnn.so.9",
                                          "convolutions run as unfold + matmul");
#define FERRY_CUDNN_BIND(name) lib.bind(a.name, #name)&&
    if (!(FERRY_CUDNN_FUNCTIONS(FERRY_CUDNN_BIND) true)) {
      a.status = lib.why_not();
      return a;
    }
#undef FERRY_CUDNN_BIND
    const std::size_t v = a.cudnnGetVersion();  // 91900 for 9.19.0
    if (v / 10000 != 9) {
      a.status = fmt::format("cuDNN off: libcudnn.so.9 reports version {}, not 9.x", v);
      return a;
    }
    a.status = fmt::format("cuDNN {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
    a.ok = true;
    return a;
  }();
  return a;
}

std::string status() { return api().status; }

bool takes(int cc, DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::f16:
    case DType::f64:
      return api().ok;
    case DType::bf16:
      return api().ok && cc >= 80;
    default:
      return false;
  }
}

#endif

}  // namespace ferry::cuda::cudnn
