// coopmat_options.cpp — the command line (coopmat.hpp).
#include "coopmat.hpp"

void usage(const char* argv0) {
  printf(
      "usage: %s [--dir DIR] [--device IDX] [--only SUBSTR] [--size S] [--iters N] [--reps R]\n"
      "          [--warmup W] [--timeout-s T] [--no-perf] [--emulate]\n",
      argv0);
}

Options parseOptions(int argc, char** argv) {
  Options opt;
  opt.dir = exeDir();
  bool sizeSet = false, itersSet = false, repsSet = false, warmSet = false, timeoutSet = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        usage(argv[0]);
        die("missing value for %s", a.c_str());
      }
      return argv[++i];
    };
    if (a == "--dir")
      opt.dir = next();
    else if (a == "--device")
      opt.device = atoi(next());
    else if (a == "--only")
      opt.only = next();
    else if (a == "--size") {
      opt.size = (uint32_t)atoi(next());
      sizeSet = true;
    } else if (a == "--iters") {
      opt.iters = (uint32_t)atoi(next());
      itersSet = true;
    } else if (a == "--reps") {
      opt.reps = (uint32_t)atoi(next());
      repsSet = true;
    } else if (a == "--warmup") {
      opt.warmup = (uint32_t)atoi(next());
      warmSet = true;
    } else if (a == "--timeout-s") {
      opt.timeoutS = atof(next());
      timeoutSet = true;
    } else if (a == "--no-perf")
      opt.perf = false;
    else if (a == "--emulate")
      opt.emulate = true;
    else if (a == "-h" || a == "--help") {
      usage(argv[0]);
      exit(0);
    } else {
      usage(argv[0]);
      die("unknown argument '%s'", a.c_str());
    }
  }
  if (opt.emulate) {  // scalar emulation on a CPU device: keep it small
    if (!sizeSet) opt.size = 256;
    if (!itersSet) opt.iters = 2;
    if (!repsSet) opt.reps = 1;
    if (!warmSet) opt.warmup = 1;
    if (!timeoutSet) opt.timeoutS = 120;
  }
  if (opt.iters == 0 || opt.reps == 0 || opt.size == 0 || opt.timeoutS <= 0)
    die("invalid numeric option");
  return opt;
}
