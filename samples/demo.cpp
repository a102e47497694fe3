// ferry-demo — the README's first command: which devices this machine has, then
// a small computation on the default device, checked against the CPU.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "ferry/ferry.hpp"

namespace {

std::string mib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", double(bytes) / (1 << 20));
  return buf;
}

void list_devices() {
  std::printf("ferry %s — devices on this machine\n", ferry::version());
  for (const ferry::DeviceInfo& d : ferry::devices()) {
    if (d.available) {
      std::printf("  %-10s %-15s %s (%s), memory %s total, %s free\n", d.device.c_str(),
                  ferry::device_kind_name(d.kind), d.name.c_str(), d.vendor.c_str(),
                  mib(d.memory_total).c_str(), mib(d.memory_free).c_str());
    } else {
      std::printf("  %-10s unavailable: %s\n", d.device.c_str(), d.unavailable_reason.c_str());
    }
  }
}

// A two-layer MLP forward pass and a softmax, the kind of work a model does.
ferry::Tensor forward(const ferry::Tensor& x, const ferry::Tensor& w1, const ferry::Tensor& b1,
                      const ferry::Tensor& w2, const ferry::Tensor& b2) {
  ferry::Tensor h = ferry::gelu(ferry::matmul(x, w1) + b1);
  return ferry::softmax(ferry::matmul(h, w2) + b2, -1);
}

// Runs the MLP forward on `dev` and checks it against the CPU; true when it matches.
bool run_on(const ferry::Device& dev, const ferry::Tensor& x, const ferry::Tensor& w1,
            const ferry::Tensor& b1, const ferry::Tensor& w2, const ferry::Tensor& b2,
            const std::vector<float>& ref) {
  auto start = std::chrono::steady_clock::now();
  ferry::Tensor probs = forward(x.to(dev), w1.to(dev), b1.to(dev), w2.to(dev), b2.to(dev));
  std::vector<float> got = probs.to_vector<float>();  // synchronizes
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  double max_err = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    max_err = std::max(max_err, double(std::fabs(got[i] - ref[i])));
  ferry::Tensor predicted = ferry::argmax(probs, 1);

  std::printf("\nMLP forward 256x784 -> 512 -> 10 on %s: %.2f ms (first run includes setup)\n",
              dev.str().c_str(), ms);
  std::cout << "first rows of softmax output:\n" << probs.slice(0, 0, 3).slice(1, 0, 5) << "\n";
  std::cout << "predicted classes of the first 8 rows: " << predicted.slice(0, 0, 8) << "\n";
  std::printf("max |%s - cpu| = %.3g %s\n", dev.str().c_str(), max_err,
              max_err < 1e-4 ? "(match)" : "(MISMATCH)");
  return max_err < 1e-4;
}

}  // namespace

int main() {
  try {
    list_devices();
    ferry::Device dev = ferry::default_device();
    std::printf("\ndefault device: %s (set FERRY_DEVICE to choose another)\n", dev.str().c_str());

    ferry::manual_seed(42);
    ferry::Tensor x = ferry::randn({256, 784});
    ferry::Tensor w1 = ferry::randn({784, 512}) * (1.0 / std::sqrt(784.0));
    ferry::Tensor b1 = ferry::zeros({512});
    ferry::Tensor w2 = ferry::randn({512, 10}) * (1.0 / std::sqrt(512.0));
    ferry::Tensor b2 = ferry::zeros({10});
    std::vector<float> ref = forward(x, w1, b1, w2, b2).to_vector<float>();

    // The default device first, then every other available accelerator (on a
    // machine without a GPU: lavapipe's Vulkan device, when Mesa is installed).
    bool ok = run_on(dev, x, w1, b1, w2, b2, ref);
    for (const ferry::DeviceInfo& d : ferry::devices())
      if (d.available && d.backend != "cpu" && d.device != dev.str())
        ok = run_on(ferry::Device(d.device), x, w1, b1, w2, b2, ref) && ok;
    return ok ? 0 : 1;
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-demo: %s\n", e.what());
    return 1;
  }
}
