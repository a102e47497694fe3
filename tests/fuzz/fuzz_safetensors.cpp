// tests/fuzz/fuzz_safetensors.cpp — libFuzzer target for the safetensors
// reader: the code that parses untrusted bytes (runtime/io/safetensors_format.cpp,
// Note [Untrusted bytes in one place]) is compiled into this binary with
// coverage, AddressSanitizer and UBSan; the tensors it makes come from libferry.
//
// Each input is parsed as a whole file. A FormatError must name the input and
// point inside it. An accepted file must be consistent (its tensors tile the
// data section), every tensor of a ferry dtype must load with exactly the
// input's bytes, and what the writer makes of the loaded tensors must parse
// back to the same names, dtypes, shapes, bytes and metadata. Anything else —
// another exception, a crash, a sanitizer report, a failed check — is a
// finding. Build and run: tests/fuzz/CMakeLists.txt, docs/checkpoints.md.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "io/safetensors_format.hpp"

namespace {

using ferry::SafetensorsInfo;
using ferry::SafetensorsTensorInfo;
using ferry::StateDict;
using ferry::Tensor;
namespace detail = ferry::detail;

constexpr const char* kName = "fuzz-input.safetensors";

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz_safetensors finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

void check(bool ok, const std::string& what) {
  if (!ok) finding(what);
}

const std::uint8_t* bytes_of(const Tensor& t) {
  return static_cast<const std::uint8_t*>(t.storage()->buffer().host_ptr());
}

void run(const std::uint8_t* data, std::size_t size) {
  SafetensorsInfo info;
  try {
    info = detail::parse_safetensors(data, size, kName);
  } catch (const ferry::FormatError& e) {
    check(e.file() == kName, "a FormatError names another file");
    check(e.offset() <= size, "a FormatError points past the end of the input");
    return;
  }

  // An accepted file: the tensors tile the data section, in order.
  check(info.data_offset == 8 + info.header_size && info.data_offset <= size,
        "the data section does not follow the header");
  std::uint64_t cursor = 0;
  for (const SafetensorsTensorInfo& t : info.tensors) {
    check(t.data_begin == cursor && t.data_end >= t.data_begin, "tensors do not tile the data");
    cursor = t.data_end;
  }
  check(info.data_offset + cursor == size, "the tensors do not end at the end of the input");

  // The read path, as load_safetensors runs it, from memory.
  auto read = [&](std::uint64_t offset, void* dst, std::size_t count) {
    check(offset <= size && count <= size - offset, "a read outside the input");
    std::memcpy(dst, data + offset, count);
  };
  StateDict loaded;
  for (const SafetensorsTensorInfo& t : info.tensors) {
    Tensor x;
    try {
      x = detail::read_safetensors_tensor(info, t, read);
    } catch (const ferry::DTypeError&) {
      check(!t.dtype.has_value(), "a DTypeError for a dtype ferry has");
      continue;
    }
    check(x.defined() && x.dtype() == *t.dtype && x.sizes() == t.shape, "wrong dtype or shape");
    const std::uint8_t* src = data + info.data_offset + t.data_begin;
    const std::uint8_t* got = bytes_of(x);
    for (std::uint64_t i = 0; i < t.nbytes(); ++i) {
      std::uint8_t want = x.dtype() == ferry::DType::boolean ? src[i] != 0 : src[i];
      check(got[i] == want, "a loaded byte differs from the file's");
    }
    loaded.insert(t.name, x);
  }
  loaded.metadata = info.metadata;

  // Write what was loaded and read it back: the writer's output must parse
  // (its JSON escaping included) to the same table.
  std::vector<std::uint8_t> again = detail::serialize_safetensors(loaded);
  SafetensorsInfo back = detail::parse_safetensors(again.data(), again.size(), "round-trip");
  check(back.metadata == info.metadata, "metadata changed in a round trip");
  check(back.tensors.size() == loaded.size(), "tensor count changed in a round trip");
  for (const SafetensorsTensorInfo& t : back.tensors) {
    const Tensor* x = loaded.find(t.name);
    check(x != nullptr, "a name changed in a round trip");
    check(t.dtype == x->dtype() && t.shape == x->sizes(),
          "a dtype or shape changed in a round trip");
    check(t.nbytes() == 0 || std::memcmp(again.data() + back.data_offset + t.data_begin,
                                         bytes_of(*x), t.nbytes()) == 0,
          "bytes changed in a round trip");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    run(data, size);
  } catch (const std::exception& e) {
    finding(std::string("unexpected exception: ") + e.what());
  } catch (...) {
    finding("an exception that is not a std::exception");
  }
  return 0;
}
