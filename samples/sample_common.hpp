// samples/sample_common.hpp — what the samples share: a small command-line
// parser (every sample takes --help), a device list, a progress bar, and the
// synthetic classification data the training samples learn. Plain C++ on
// ferry's public API: copy it into your own program if it helps.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ferry/ferry.hpp"

namespace sample {

// --name value options and --flag switches; --help prints the usage and
// exits 0, an unknown option or a bad value prints it and exits 2.
class Args {
 public:
  // `options` maps each option to its help line; a name ending in '!' is a
  // switch without a value ("small!").
  Args(int argc, char** argv, std::string usage, std::map<std::string, std::string> options)
      : usage_(std::move(usage)), options_(std::move(options)) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--help" || a == "-h") help(0);
      if (a.rfind("--", 0) != 0) fail("unexpected argument '" + a + "'");
      a = a.substr(2);
      if (options_.count(a + "!")) {
        values_[a] = "1";
      } else if (options_.count(a)) {
        if (i + 1 >= argc) fail("--" + a + " needs a value");
        values_[a] = argv[++i];
      } else {
        fail("unknown option --" + a);
      }
    }
  }
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  long number(const std::string& name, long fallback) const {
    if (!has(name)) return fallback;
    char* end = nullptr;
    const long v = std::strtol(values_.at(name).c_str(), &end, 10);
    if (!end || *end || v <= 0) fail("--" + name + " needs a positive whole number");
    return v;
  }
  // --device, or ferry::default_device(); DeviceError (caught in main) names
  // the devices there are.
  ferry::Device device(const std::string& name = "device") const {
    return has(name) ? ferry::Device(get(name, "")) : ferry::default_device();
  }

  [[noreturn]] void help(int code) const {
    std::printf("%s\n\noptions:\n", usage_.c_str());
    for (const auto& [name, text] : options_) {
      const bool flag = name.back() == '!';
      const std::string shown = flag ? name.substr(0, name.size() - 1) : name + " VALUE";
      std::printf("  --%-22s %s\n", shown.c_str(), text.c_str());
    }
    std::printf("  --%-22s %s\n", "help", "print this and exit");
    std::exit(code);
  }
  [[noreturn]] void fail(const std::string& why) const {
    std::fprintf(stderr, "error: %s\n\n", why.c_str());
    help(2);
  }

 private:
  std::string usage_;
  std::map<std::string, std::string> options_;
  std::map<std::string, std::string> values_;
};

// --profile PATH (every training sample): records the run with
// ferry::profiler from construction to finish() and writes a Chrome trace to
// PATH (open it in ui.perfetto.dev or chrome://tracing), with the busiest ops
// on stdout. docs/profiling.md reads one.
class Profiling {
 public:
  inline static const char* kOption = "profile";
  inline static const char* kHelp = "write a trace of the run to PATH (ui.perfetto.dev reads it)";
  explicit Profiling(const Args& args) : path_(args.get(kOption, "")) {
    if (!path_.empty()) ferry::profiler::start();
  }
  ~Profiling() {
    try {
      finish();
    } catch (const ferry::Error& e) {
      std::fprintf(stderr, "profile: %s\n", e.what());
    }
  }
  void finish() {
    if (path_.empty()) return;
    const std::string path = std::exchange(path_, {});
    const ferry::profiler::Profile p = ferry::profiler::stop();
    p.save(path);
    std::printf("profile: %zu events written to %s (open it in ui.perfetto.dev)\n%s",
                p.events().size(), path.c_str(), p.table(12).c_str());
  }

 private:
  std::string path_;
};

// The available devices, the CPU first.
inline std::vector<ferry::Device> available_devices() {
  std::vector<ferry::Device> out;
  for (const ferry::DeviceInfo& d : ferry::devices())
    if (d.available) out.emplace_back(d.device);
  return out;
}

inline std::string mib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", double(bytes) / (1 << 20));
  return buf;
}

// "[#######.......] 12/32" redrawn in place on a terminal, printed once at the
// end otherwise (so logs stay readable).
class Progress {
 public:
  Progress(std::string label, std::size_t total) : label_(std::move(label)), total_(total) {}
  void step(std::size_t done, double loss) {
    done_ = done;
    if (tty()) draw(loss, '\r');
  }
  void finish(double loss) {
    done_ = total_;
    draw(loss, '\n');
  }

 private:
  static bool tty() {
    static const bool t = std::getenv("TERM") && std::getenv("CI") == nullptr && isatty_stdout();
    return t;
  }
  static bool isatty_stdout();
  void draw(double loss, char end) const {
    const int width = 24;
    const int filled = total_ ? int(double(done_) / double(total_) * width) : width;
    std::printf("  %-10s [%s%s] %3zu/%-3zu loss %.4f%c", label_.c_str(),
                std::string(std::size_t(filled), '#').c_str(),
                std::string(std::size_t(width - filled), '.').c_str(), done_, total_, loss, end);
    std::fflush(stdout);
  }
  std::string label_;
  std::size_t total_, done_ = 0;
};

// Gaussian blobs: `classes` clusters of `features`-dim points, one per class,
// their centres and the noise drawn from seed `seed`. Returns x [n, features]
// (f32) and y [n] (i64), on the CPU.
inline std::pair<ferry::Tensor, ferry::Tensor> blobs(std::int64_t n, std::int64_t features,
                                                     std::int64_t classes, std::uint64_t seed,
                                                     double noise = 1.0) {
  ferry::manual_seed(seed);
  ferry::Tensor centres = ferry::randn({classes, features}) * 2.0;
  ferry::Tensor y = ferry::randint(0, classes, {n});
  ferry::Tensor x = ferry::index_select(centres, 0, y) + ferry::randn({n, features}) * noise;
  return {x, y};
}

// The MLP classifier ferry-train-mlp and ferry-train-ddp train: three Linear layers with GELU
// between them, on `dev`.
inline std::shared_ptr<ferry::nn::Sequential> make_mlp(std::int64_t in, std::int64_t hidden,
                                                       std::int64_t out, const ferry::Device& dev) {
  namespace nn = ferry::nn;
  const ferry::TensorOptions on{.device = dev};
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(in, hidden, true, on), std::make_shared<nn::GELU>(),
      std::make_shared<nn::Linear>(hidden, hidden, true, on), std::make_shared<nn::GELU>(),
      std::make_shared<nn::Linear>(hidden, out, true, on));
}

}  // namespace sample

#include <unistd.h>

inline bool sample::Progress::isatty_stdout() { return ::isatty(1) != 0; }
