// An application that only knows the installed ferry package.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <vector>

#include <ferry/ferry.hpp>
#include <ferry/kit/coalesce.hpp>  // the backend kit: installed with the API

int main() {
  try {
    ferry::Tensor t = ferry::tensor(std::vector<float>{1, 2, 3, 4}, {2, 2});
    float s = ferry::sum(t * 2.0f).item<float>();
    std::printf("ferry %s: sum(tensor([[1, 2], [3, 4]]) * 2) = %g\n", ferry::version(), double(s));
    if (s != 20.0f) {
      std::fprintf(stderr, "FAIL: expected 20, got %g\n", double(s));
      return 1;
    }

    // The backend kit's headers are installed and its functions exported.
    const std::int64_t sizes[] = {2, 3};
    ferry::detail::Coalesced merged = ferry::detail::coalesce(sizes, {{3, 1}});
    if (merged.sizes != std::vector<std::int64_t>{6}) {
      std::fprintf(stderr, "FAIL: the kit's coalesce did not merge a contiguous [2, 3]\n");
      return 1;
    }

    // Training through the installed headers, as the README shows it.
    namespace nn = ferry::nn;
    ferry::manual_seed(0);
    const ferry::Device dev = ferry::Device::cpu();
    ferry::Tensor x = ferry::randn({32, 8}, {.device = dev});
    // A learnable rule: the class is the largest of the first three features.
    ferry::Tensor labels = ferry::argmax(x.narrow(1, 0, 3), 1);
    auto model = std::make_shared<nn::Sequential>(
        std::make_shared<nn::Linear>(8, 16, true, ferry::TensorOptions{.device = dev}),
        std::make_shared<nn::GELU>(),
        std::make_shared<nn::Linear>(16, 3, true, ferry::TensorOptions{.device = dev}));
    ferry::optim::Adam opt(model->parameters(), {.lr = 3e-2});
    float first = 0, last = 0;
    for (int step = 0; step < 30; ++step) {
      opt.zero_grad();
      ferry::Tensor loss = nn::functional::cross_entropy(model->forward(x), labels);
      loss.backward();
      opt.step();
      (step == 0 ? first : last) = loss.item<float>();
    }
    std::printf("training: loss %g -> %g after 30 Adam steps\n", double(first), double(last));
    if (!(last < 0.5f * first)) {
      std::fprintf(stderr, "FAIL: the loss did not halve\n");
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
}
