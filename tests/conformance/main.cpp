// ferry-conformance — runs the conformance suite against every available
// device (or the ones named) and prints a table per device, ending with
// "N passed, N failed, N skipped". Exit status 1 when anything failed.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "conformance.hpp"

namespace fc = ferry::conformance;

namespace {

struct Options {
  std::vector<std::string> devices;
  std::string op_filter = ".*";
  std::vector<ferry::DType> dtypes;  // empty: every dtype
  std::string json;
  std::string mode = "all";  // forward, grad or all
  bool list = false, perf = false, verbose = false, transfers = true;
  bool skip_unavailable = false;
  int threads = 1;
};

// Exit status for "nothing to test here" (CTest's SKIP_RETURN_CODE).
constexpr int kSkippedExit = 77;

void usage() {
  std::puts(
      "usage: ferry-conformance [--device DEV]... [--op REGEX] [--list] [--json FILE] [--perf] "
      "[--verbose]\n"
      "                         [--dtype LIST] [--mode forward|grad|all] [--threads N]\n"
      "                         [--no-transfers]\n"
      "                         [--skip-unavailable]\n"
      "  --device DEV   a device to test, e.g. vulkan:0 (repeatable; default: every available "
      "device)\n"
      "  --op REGEX     only ops whose name matches (std::regex_search), e.g. 'matmul|softmax'\n"
      "  --dtype LIST   only cases in these dtypes, comma-separated, e.g. f32,i64\n"
      "  --mode MODE    forward: the ops' results; grad: their gradients (cases named\n"
      "                 '<op>.grad': each op's backward on the device, held to the CPU's);\n"
      "                 all (default): both\n"
      "  --threads N    also run each case that passed from N threads at once, each on its\n"
      "                 own inputs, and require every result to equal the serial run's bit\n"
      "                 for bit (the thread-safety contract, docs/backend-guide.md)\n"
      "  --list         list the cases and exit; with --device, the op table as that\n"
      "                 device supports it (dtypes per op) and each op's case count\n"
      "  --json FILE    write every result (and device info) to FILE, with each case's wall\n"
      "                 time in seconds (where the suite's time goes)\n"
      "  --perf         time each op on the device (us per call, GB/s, GFLOP/s) beside the CPU\n"
      "  --verbose      print every case, not only failures and skips\n"
      "  --skip-unavailable  when a --device's backend is unavailable here, print the\n"
      "                 reason and exit with status 77 (skipped) instead of failing\n"
      "Backends in third-party modules are found through FERRY_BACKEND_PATH.");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw ferry::Error("ferry-conformance: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--device")
      o.devices.push_back(value());
    else if (a == "--op")
      o.op_filter = value();
    else if (a == "--dtype") {
      const std::string v = value();
      for (std::size_t at = 0; at <= v.size();) {
        const std::size_t comma = std::min(v.find(',', at), v.size());
        o.dtypes.push_back(ferry::dtype_from_name(std::string_view(v).substr(at, comma - at)));
        at = comma + 1;
      }
    } else if (a == "--json")
      o.json = value();
    else if (a == "--mode") {
      o.mode = value();
      if (o.mode != "forward" && o.mode != "grad" && o.mode != "all")
        throw ferry::Error("ferry-conformance: --mode takes forward, grad or all, not " + o.mode);
    } else if (a == "--threads") {
      const std::string v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 1 || n > 64)
        throw ferry::Error("ferry-conformance: --threads takes a number from 1 to 64, not " + v);
      o.threads = int(n);
    } else if (a == "--list")
      o.list = true;
    else if (a == "--perf")
      o.perf = true;
    else if (a == "--verbose")
      o.verbose = true;
    else if (a == "--no-transfers")
      o.transfers = false;
    else if (a == "--skip-unavailable")
      o.skip_unavailable = true;
    else if (a == "--help" || a == "-h") {
      usage();
      std::exit(0);
    } else {
      usage();
      throw ferry::Error("ferry-conformance: unknown argument " + a);
    }
  }
  return o;
}

// One row per op and dtype: how many cases passed, failed, skipped; worst NMSE.
void print_table(const std::string& device, const std::vector<fc::Result>& results, bool perf) {
  struct Row {
    int passed = 0, failed = 0, skipped = 0;
    double worst = 0;
    const fc::Result* timed = nullptr;  // the largest timed case
  };
  std::map<std::pair<std::string, std::string>, Row> rows;
  for (const auto& r : results) {
    Row& row = rows[{r.op, r.dtype}];
    if (r.status == fc::Status::passed) ++row.passed;
    if (r.status == fc::Status::failed) ++row.failed;
    if (r.status == fc::Status::skipped) ++row.skipped;
    if (r.status != fc::Status::skipped && std::isfinite(r.nmse))
      row.worst = std::max(row.worst, r.nmse);
    if (r.device_us > 0 && (!row.timed || r.bytes + r.flops > row.timed->bytes + row.timed->flops))
      row.timed = &r;
  }
  fmt::print("\n== {} ==\n", device);
  fmt::print("{:<14} {:<5} {:>6} {:>6} {:>7} {:>10}", "op", "dtype", "passed", "failed", "skipped",
             "worst NMSE");
  if (perf)
    fmt::print("  {:>10} {:>10} {:>9}  {}", "us/call", "cpu us", "GB/s",
               "GFLOP/s  (largest timed case)");
  fmt::print("\n");
  for (const auto& [key, row] : rows) {
    fmt::print("{:<14} {:<5} {:>6} {:>6} {:>7} {:>10.2g}", key.first, key.second, row.passed,
               row.failed, row.skipped, row.worst);
    if (perf && row.timed) {
      const fc::Result& t = *row.timed;
      fmt::print("  {:>10.1f} {:>10.1f} {:>9.2f}", t.device_us, t.cpu_us,
                 t.bytes / t.device_us / 1e3);
      if (t.flops > 0) fmt::print("  {:.2f}", t.flops / t.device_us / 1e3);
      fmt::print("  {}", t.shape);
    }
    fmt::print("\n");
  }
}

nlohmann::json to_json(const fc::Result& r) {
  nlohmann::json j = {{"device", r.device},     {"op", r.op},
                      {"dtype", r.dtype},       {"shape", r.shape},
                      {"class", r.shape_class}, {"status", fc::status_name(r.status)},
                      {"detail", r.detail}};
  if (std::isfinite(r.nmse)) j["nmse"] = r.nmse;
  j["seconds"] = r.seconds;
  if (r.device_us > 0) {
    j["device_us"] = r.device_us;
    j["cpu_us"] = r.cpu_us;
    j["bytes"] = r.bytes;
    j["flops"] = r.flops;
  }
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options opt = parse(argc, argv);
    std::regex filter(opt.op_filter);
    auto wanted = [&](const fc::Case& c) {
      return std::regex_search(c.op, filter) &&
             (opt.dtypes.empty() ||
              std::find(opt.dtypes.begin(), opt.dtypes.end(), c.dtype) != opt.dtypes.end());
    };
    std::vector<fc::Case> cases;
    if (opt.mode != "grad")
      for (auto& c : fc::all_cases())
        if (wanted(c)) cases.push_back(std::move(c));
    if (opt.mode != "forward")
      for (auto& c : fc::grad_cases())
        if (wanted(c)) cases.push_back(std::move(c));
    if (opt.list && !opt.devices.empty()) {
      // The op table as each device answers supports(op, dtype).
      for (const std::string& d : opt.devices) {
        const ferry::DeviceImpl& impl = ferry::device_impl(ferry::Device(d));
        fmt::print("{}: the ops of ops/ops.table it runs, and in which dtypes\n", d);
        for (const ferry::OpInfo& info : ferry::op_table()) {
          std::string dts;
          for (ferry::DType dt : ferry::kAllDTypes)
            if (impl.supports(info.id, dt)) dts += fmt::format(" {}", ferry::dtype_name(dt));
          std::size_t n = 0;
          for (const auto& c : cases)
            for (ferry::OpId k : c.kernel_ops()) n += k == info.id;
          // A composite op runs wherever its parts do; supports() says where it
          // has a fused kernel.
          const bool composite = info.impl == ferry::OpImpl::composite;
          const char* how = impl.find_kernel(info.id)
                                ? (composite ? "(composite; fused kernel)" : "")
                                : (composite ? "(composite)" : "(no kernel)");
          fmt::print("  {:<20} {:<20} {:>5} cases  {}\n", info.name, dts.empty() ? " -" : dts, n,
                     how);
        }
      }
      return 0;
    }
    if (opt.list) {
      for (const auto& c : cases)
        fmt::print("{:<14} {:<5} {:<16} {}\n", c.op, ferry::dtype_name(c.dtype), c.shape_class,
                   c.shape);
      fmt::print("{} cases\n", cases.size());
      return 0;
    }
    std::vector<ferry::Device> devices;
    if (opt.devices.empty()) {
      for (const auto& info : ferry::devices())
        if (info.available) devices.push_back(ferry::Device(info.device));
    } else {
      for (const auto& d : opt.devices) {
        if (opt.skip_unavailable) {
          // A backend this machine cannot run (no driver, no GPU) is a skip with its reason.
          const std::string backend = d.substr(0, d.find(':'));
          for (const auto& info : ferry::devices())
            if (info.backend == backend && !info.available) {
              fmt::print("SKIPPED: {}: {}\n", d, info.unavailable_reason);
              return kSkippedExit;
            }
        }
        devices.push_back(ferry::Device(d));
      }
    }
    nlohmann::json report = {{"devices", nlohmann::json::array()},
                             {"results", nlohmann::json::array()}};
    int passed = 0, failed = 0, skipped = 0;
    std::vector<const fc::Result*> listed;
    std::vector<fc::Result> all;
    all.reserve(cases.size() * devices.size() + 1024);
    for (const ferry::Device& dev : devices) {
      ferry::DeviceInfo info;
      for (const auto& i : ferry::devices())
        if (i.device == dev.str()) info = i;
      fmt::print("testing {} — {} ({}), {} cases\n", dev.str(), info.name,
                 ferry::device_kind_name(info.kind), cases.size());
      std::fflush(stdout);
      report["devices"].push_back({{"device", dev.str()},
                                   {"name", info.name},
                                   {"vendor", info.vendor},
                                   {"driver", info.driver},
                                   {"uuid", info.uuid_str()},
                                   {"kind", ferry::device_kind_name(info.kind)}});
      std::size_t first = all.size();
      for (const auto& c : cases) all.push_back(fc::run_case(c, dev, opt.perf, opt.threads));
      if (opt.transfers && opt.mode != "grad" && std::regex_search(std::string("transfer"), filter))
        for (auto& r : fc::run_round_trip_checks(dev)) all.push_back(std::move(r));
      std::vector<fc::Result> mine(all.begin() + std::ptrdiff_t(first), all.end());
      print_table(dev.str(), mine, opt.perf);
    }
    if (opt.transfers && opt.mode != "grad" && std::regex_search(std::string("transfer"), filter)) {
      std::vector<ferry::Device> available;
      for (const auto& info : ferry::devices())
        if (info.available) available.push_back(ferry::Device(info.device));
      std::vector<fc::Result> pairs = fc::run_pair_checks(devices, available);
      if (!pairs.empty()) print_table("device pairs", pairs, false);
      for (auto& r : pairs) all.push_back(std::move(r));
    }
    for (const auto& r : all) {
      if (r.status == fc::Status::passed) ++passed;
      if (r.status == fc::Status::failed) ++failed;
      if (r.status == fc::Status::skipped) ++skipped;
      if (r.status != fc::Status::passed || opt.verbose)
        fmt::print("{:<7} {:<10} {:<12} {:<5} {}: {}\n", fc::status_name(r.status), r.device, r.op,
                   r.dtype, r.shape, r.detail.empty() ? "ok" : r.detail);
      report["results"].push_back(to_json(r));
    }
    report["summary"] = {{"passed", passed}, {"failed", failed}, {"skipped", skipped}};
    if (!opt.json.empty()) {
      std::ofstream f(opt.json);
      if (!f) throw ferry::Error("ferry-conformance: cannot write " + opt.json);
      f << report.dump(1) << "\n";
    }
    fmt::print("\n{} passed, {} failed, {} skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-conformance: %s\n", e.what());
    return 2;
  }
}
