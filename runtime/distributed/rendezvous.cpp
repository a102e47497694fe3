// runtime/distributed/rendezvous.cpp — the job's place from the environment, and the
// rendezvous file (Note [Rendezvous file] in rendezvous.hpp).
#include "distributed/rendezvous.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

#include "ferry/kit/env.hpp"

namespace ferry::distributed {
namespace {

std::optional<int> env_int(const char* name) {
  const auto n = kit::env::whole_number(name, 0, 1 << 24, "a non-negative whole number");
  return n ? std::optional<int>(int(*n)) : std::nullopt;
}

// The first pair of variables that is set: a rank without its size (or the reverse) is an
// error, not a fallback to the next launcher's.
std::optional<std::pair<int, int>> env_pair(const char* rank, const char* size) {
  const auto r = env_int(rank), s = env_int(size);
  if (!r && !s) return std::nullopt;
  if (!r || !s)
    throw ValueError(
        fmt::format("distributed: {} is set without {}", r ? rank : size, r ? size : rank));
  return std::pair{*r, *s};
}

constexpr const char* kMagic = "ferry-rendezvous 1\n";

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << kMagic << bytes.size() << '\n' << bytes;
  f.flush();
  if (!f) throw DistributedError(fmt::format("distributed: cannot write {}", path));
}

// The value in a complete rendezvous file, or none where it is not one (yet).
std::optional<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::size_t magic = std::strlen(kMagic);
  if (all.compare(0, magic, kMagic) != 0) return std::nullopt;
  const std::size_t eol = all.find('\n', magic);
  if (eol == std::string::npos) return std::nullopt;
  const std::size_t n = std::strtoull(all.c_str() + magic, nullptr, 10);
  if (all.size() != eol + 1 + n) return std::nullopt;
  return all.substr(eol + 1);
}

std::string ack_path(const std::string& path, int rank) {
  return fmt::format("{}.{}.ack", path, rank);
}

}  // namespace

JobPlace job_place(int rank, int size) {
  JobPlace p;
  if (rank >= 0 || size >= 0) {
    if (rank < 0 || size < 0)
      throw ValueError(
          "distributed: InitOptions gives the rank without the world size, or the "
          "reverse; give both or neither");
    p.rank = rank;
    p.size = size;
  } else if (auto e = env_pair("FERRY_RANK", "FERRY_WORLD_SIZE")) {
    std::tie(p.rank, p.size) = *e;
  } else if (auto o = env_pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")) {
    std::tie(p.rank, p.size) = *o;
  } else if (auto m = env_pair("PMI_RANK", "PMI_SIZE")) {
    std::tie(p.rank, p.size) = *m;
  }
  if (p.size < 1 || p.rank >= p.size)
    throw ValueError(fmt::format("distributed: rank {} is not in a world of {}", p.rank, p.size));
  if (auto l = env_int("FERRY_LOCAL_RANK"))
    p.local_rank = *l;
  else if (auto o = env_int("OMPI_COMM_WORLD_LOCAL_RANK"))
    p.local_rank = *o;
  else
    p.local_rank = p.rank;
  return p;
}

std::string PlacedRendezvous::share(const std::string& value) {
  if (used_) throw Error("distributed: a rendezvous is shared once");
  used_ = true;
  return place_.size == 1 ? value : exchange(value);
}

std::string FileRendezvous::exchange(const std::string& value) {
  std::string path = where_;
  if (path.rfind("file:", 0) == 0) path = path.substr(5);
  if (path.empty())
    throw ValueError(fmt::format(
        "distributed: {} ranks need a rendezvous to connect: set InitOptions::rendezvous or "
        "FERRY_RENDEZVOUS to the path of a file that every rank sees (and none has yet)",
        place_.size));
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  const auto waited_too_long = [&](const std::string& what) {
    if (std::chrono::steady_clock::now() < deadline) return;
    throw DistributedError(fmt::format("distributed: rank {} waited {:.1f} s for {} ({})",
                                       place_.rank, double(timeout_.count()) / 1000.0, what, path));
  };
  const auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); };

  if (place_.rank != 0) {
    std::optional<std::string> got;
    while (!(got = read_file(path))) {
      waited_too_long("rank 0 to write the rendezvous file");
      pause();
    }
    write_file(ack_path(path, place_.rank), "");
    return *got;
  }
  // Acknowledgements of an earlier job that ended early: no rank reads `path` before the link.
  for (int r = 1; r < place_.size; ++r) std::filesystem::remove(ack_path(path, r));
  const std::string tmp = fmt::format("{}.{}.tmp", path, ::getpid());
  write_file(tmp, value);
  const int rc = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  std::filesystem::remove(tmp);
  if (rc != 0)
    throw DistributedError(fmt::format(
        "distributed: rank 0 cannot create the rendezvous file {}: {}{}", path, std::strerror(err),
        err == EEXIST ? " (left by an earlier job? remove it, or give each job its own path)"
                      : ""));
  for (int r = 1; r < place_.size; ++r) {
    while (!std::filesystem::exists(ack_path(path, r))) {
      try {
        waited_too_long(fmt::format("rank {} to read the rendezvous file", r));
      } catch (...) {
        std::filesystem::remove(path);
        throw;
      }
      pause();
    }
  }
  std::filesystem::remove(path);
  for (int r = 1; r < place_.size; ++r) std::filesystem::remove(ack_path(path, r));
  return value;
}

}  // namespace ferry::distributed
