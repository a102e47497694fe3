// runtime/io/safetensors.cpp — safetensors files: load, inspect, and the
// atomic save. The bytes themselves are parsed and checked in
// safetensors_format.cpp (Note [Untrusted bytes in one place]).
#include "ferry/safetensors.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ferry/backend.hpp"
#include "ferry/error.hpp"
#include "io/safetensors_format.hpp"

namespace ferry {
namespace {

namespace fs = std::filesystem;

std::string system_error(int err) { return std::strerror(err); }

// A file opened for reading; closes itself.
class InputFile {
 public:
  InputFile(const std::string& path, std::string_view caller) : path_(path) {
    do fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0)
      throw Error(fmt::format("{}: cannot open '{}': {}", caller, path, system_error(errno)));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      int err = errno;
      ::close(fd_);
      throw Error(fmt::format("{}: cannot stat '{}': {}", caller, path, system_error(err)));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw Error(fmt::format("{}: '{}' is {}, not a safetensors file", caller, path,
                              S_ISDIR(st.st_mode) ? "a folder" : "not a regular file"));
    }
    size_ = std::uint64_t(st.st_size);
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  std::uint64_t size() const { return size_; }

  // Reads exactly `count` bytes at `offset`. The offsets were checked against
  // the size fstat gave; a file that shrinks meanwhile is a FormatError.
  void read_at(std::uint64_t offset, void* dst, std::size_t count) const {
    auto* p = static_cast<std::uint8_t*>(dst);
    while (count > 0) {
      ssize_t got = ::pread(fd_, p, count, off_t(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0)
        throw Error(
            fmt::format("cannot read '{}' at byte {}: {}", path_, offset, system_error(errno)));
      if (got == 0)
        throw FormatError(fmt::format("{}: the file ended at byte {} while {} more bytes were "
                                      "read from it; was it changed while it was being read?",
                                      path_, offset, count),
                          path_, offset);
      p += got;
      offset += std::uint64_t(got);
      count -= std::size_t(got);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

SafetensorsInfo read_info(const InputFile& f, const std::string& path) {
  std::uint8_t prefix[8] = {};
  std::size_t got = std::size_t(std::min<std::uint64_t>(8, f.size()));
  f.read_at(0, prefix, got);
  std::uint64_t n = detail::parse_safetensors_header_length(prefix, got, f.size(), path);
  // n is at most kSafetensorsMaxHeaderSize and fits the file.
  std::vector<std::uint8_t> header(static_cast<std::size_t>(n));
  f.read_at(8, header.data(), header.size());
  return detail::parse_safetensors_header(header.data(), n, f.size(), path);
}

// JSON text for a string, escaped as the reference writer (serde_json) does.
void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20)
          out += fmt::format("\\u{:04x}", c);
        else
          out += ch;
    }
  }
  out += '"';
}

// The bytes of a tensor as the file stores them: contiguous, on the host.
// `holder` keeps the copy (if one was made) alive while the bytes are used.
std::pair<const std::uint8_t*, std::size_t> host_bytes(const Tensor& t, Tensor& holder) {
  holder = t.to(Device::cpu()).contiguous();
  std::size_t nbytes = std::size_t(holder.numel()) * holder.element_size();
  if (nbytes == 0) return {nullptr, 0};
  const auto* base = static_cast<const std::uint8_t*>(holder.storage()->buffer().host_ptr());
  return {base + std::size_t(holder.storage_offset()) * holder.element_size(), nbytes};
}

// Writes every byte or throws; `what` names the file in the error.
void write_all(int fd, const void* data, std::size_t count, const std::string& what) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  while (count > 0) {
    ssize_t put = ::write(fd, p, count);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) throw Error(fmt::format("cannot write {}: {}", what, system_error(errno)));
    p += put;
    count -= std::size_t(put);
  }
}

// The temporary file a save writes before renaming it into place: removed
// by the destructor unless committed.
class TempFile {
 public:
  explicit TempFile(const fs::path& target) {
    static std::atomic<unsigned> counter{0};
    fs::path dir = target.parent_path();
    for (int attempt = 0; fd_ < 0; ++attempt) {
      // Hidden, and named after the target, so a leftover (a killed process) is recognisable.
      path_ = (dir / fmt::format(".{}.tmp-{}-{}", target.filename().string(), ::getpid(),
                                 counter.fetch_add(1)))
                  .string();
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ < 0 && errno != EEXIST && errno != EINTR) {
        throw Error(fmt::format("save_safetensors: cannot create a file in '{}' to write '{}': {}",
                                dir.empty() ? std::string(".") : dir.string(), target.string(),
                                system_error(errno)));
      }
      if (fd_ < 0 && attempt > 100)
        throw Error(fmt::format("save_safetensors: cannot find a free temporary name next to '{}'",
                                target.string()));
    }
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

  // Flushes to disk and renames over `target`: readers see the old file or
  // the complete new one, never a part.
  void commit(const fs::path& target) {
    if (::fsync(fd_) != 0)
      throw Error(fmt::format("save_safetensors: cannot flush '{}' to disk: {}", path_,
                              system_error(errno)));
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0)
      throw Error(
          fmt::format("save_safetensors: cannot write '{}': {}", path_, system_error(errno)));
    if (::rename(path_.c_str(), target.c_str()) != 0)
      throw Error(fmt::format("save_safetensors: cannot replace '{}': {}", target.string(),
                              system_error(errno)));
    committed_ = true;
    // The rename itself reaches the disk with the folder's metadata; a
    // failure here loses nothing that was asked for, so it is not an error.
    fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

const SafetensorsTensorInfo* SafetensorsInfo::find(std::string_view name) const {
  for (const SafetensorsTensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

StateDict load_safetensors(const std::string& path, const Device& map_location) {
  InputFile f(path, "load_safetensors");
  SafetensorsInfo info = read_info(f, path);
  return detail::read_safetensors_tensors(
      info,
      [&](std::uint64_t offset, void* dst, std::size_t count) { f.read_at(offset, dst, count); },
      map_location);
}

SafetensorsInfo inspect_safetensors(const std::string& path) {
  InputFile f(path, "inspect_safetensors");
  return read_info(f, path);
}

void save_safetensors(const std::string& path, const StateDict& tensors) {
  // Everything that can be refused is refused before the disk is touched.
  detail::SafetensorsWritePlan plan = detail::plan_safetensors(tensors);
  const fs::path target(path);
  std::error_code ec;
  if (fs::is_directory(target, ec))
    throw Error(fmt::format("save_safetensors: '{}' is a folder; give a file name", path));

  TempFile tmp(target);
  const std::string what = fmt::format("'{}' (while saving '{}')", tmp.path(), path);
  std::uint8_t prefix[8];
  std::uint64_t n = plan.header.size();
  std::memcpy(prefix, &n, 8);  // little-endian host (safetensors_format.cpp)
  write_all(tmp.fd(), prefix, 8, what);
  write_all(tmp.fd(), plan.header.data(), plan.header.size(), what);
  for (const detail::SafetensorsPlannedTensor& p : plan.tensors) {
    Tensor holder;  // one tensor's host copy at a time
    auto [data, nbytes] = host_bytes(p.tensor, holder);
    write_all(tmp.fd(), data, nbytes, what);
  }
  tmp.commit(target);
}

namespace detail {

SafetensorsWritePlan plan_safetensors(const StateDict& tensors) {
  SafetensorsWritePlan plan;
  for (const auto& [name, t] : tensors) {
    if (!t.defined())
      throw Error(
          fmt::format("save_safetensors: tensor '{}' is undefined (a default-constructed "
                      "Tensor); give it a value or leave it out",
                      name));
    if (name == "__metadata__")
      throw Error(
          "save_safetensors: '__metadata__' cannot name a tensor (the format reserves it "
          "for the metadata); rename the tensor");
    if (!is_valid_utf8(name))
      throw Error(
          fmt::format("save_safetensors: the tensor name '{}' is not valid UTF-8, which "
                      "the format's JSON header requires",
                      name));
    plan.tensors.push_back({name, t, 0, 0});
  }
  for (const auto& [key, value] : tensors.metadata)
    if (!is_valid_utf8(key) || !is_valid_utf8(value))
      throw Error(
          fmt::format("save_safetensors: the metadata key '{}' or its value is not valid "
                      "UTF-8, which the format's JSON header requires",
                      key));

  // The reference writer's order: dtype (widest first, by the reference's
  // dtype order), then name; then each tensor's bytes follow the previous.
  auto rank = [](const Tensor& t) {
    return safetensors_dtype_rank(safetensors_dtype_name(t.dtype()));
  };
  std::stable_sort(plan.tensors.begin(), plan.tensors.end(),
                   [&](const SafetensorsPlannedTensor& a, const SafetensorsPlannedTensor& b) {
                     int ra = rank(a.tensor), rb = rank(b.tensor);
                     return ra != rb ? ra > rb : a.name < b.name;
                   });
  for (SafetensorsPlannedTensor& p : plan.tensors) {
    p.data_begin = plan.data_size;
    plan.data_size += std::uint64_t(p.tensor.numel()) * p.tensor.element_size();
    p.data_end = plan.data_size;
  }

  std::string& h = plan.header;
  h += '{';
  if (!tensors.metadata.empty()) {
    h += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : tensors.metadata) {
      if (!first) h += ',';
      first = false;
      append_json_string(h, key);
      h += ':';
      append_json_string(h, value);
    }
    h += '}';
    if (!plan.tensors.empty()) h += ',';
  }
  for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
    const SafetensorsPlannedTensor& p = plan.tensors[i];
    if (i) h += ',';
    append_json_string(h, p.name);
    h += fmt::format(":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                     safetensors_dtype_name(p.tensor.dtype()), fmt::join(p.tensor.sizes(), ","),
                     p.data_begin, p.data_end);
  }
  h += '}';
  // Spaces up to a multiple of 8, so the data section starts 8-byte aligned
  // (as the reference pads), and every element of a mapped file is aligned.
  h.append((8 - h.size() % 8) % 8, ' ');
  if (h.size() > kSafetensorsMaxHeaderSize)
    throw Error(
        fmt::format("save_safetensors: the header would take {} bytes, beyond the "
                    "format's limit of {} (too many tensors or too much metadata)",
                    h.size(), kSafetensorsMaxHeaderSize));
  return plan;
}

std::vector<std::uint8_t> serialize_safetensors(const StateDict& tensors) {
  SafetensorsWritePlan plan = plan_safetensors(tensors);
  std::uint64_t n = plan.header.size();
  std::vector<std::uint8_t> out(std::size_t(8 + n + plan.data_size));
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, plan.header.data(), plan.header.size());
  for (const SafetensorsPlannedTensor& p : plan.tensors) {
    Tensor holder;
    auto [data, nbytes] = host_bytes(p.tensor, holder);
    if (nbytes) std::memcpy(out.data() + 8 + n + p.data_begin, data, nbytes);
  }
  return out;
}

}  // namespace detail
}  // namespace ferry
