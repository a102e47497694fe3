// An application that only knows the installed ferry package.
#include <cstdio>
#include <exception>
#include <vector>

#include <ferry/ferry.hpp>

int main() {
  try {
    ferry::Tensor t = ferry::tensor(std::vector<float>{1, 2, 3, 4}, {2, 2});
    float s = ferry::sum(t * 2.0f).item<float>();
    std::printf("ferry %s: sum(tensor([[1, 2], [3, 4]]) * 2) = %g\n", ferry::version(), double(s));
    if (s != 20.0f) {
      std::fprintf(stderr, "FAIL: expected 20, got %g\n", double(s));
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
}
