// runtime/io/safetensors_format.cpp — parsing and checking safetensors bytes
// (Note [Untrusted bytes in one place] in safetensors_format.hpp).
//
// The header is read by a small strict JSON parser written for this schema
// rather than a general JSON library: it knows the position of every token
// (a FormatError points at the byte), rejects duplicate keys (which general
// parsers resolve silently, so two readers could see two different files),
// reads integers without a detour through double, bounds its recursion, and
// never allocates more than the header's own size.
#include "io/safetensors_format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>

#include "ferry/backend.hpp"
#include "ferry/error.hpp"

namespace ferry::detail {

// The format is little-endian, and ferry copies tensor bytes as they are.
static_assert(std::endian::native == std::endian::little,
              "the safetensors reader and writer assume a little-endian host");

namespace {

struct FileDType {
  std::string_view name;
  unsigned bits;
  std::optional<DType> dtype;
};

// Every dtype of the format, in the reference implementation's Dtype order
// (its writer sorts tensors by it, widest first), with its size in bits.
constexpr FileDType kFileDTypes[] = {
    {"BOOL", 8, DType::boolean},  {"F4", 4, std::nullopt},      {"F6_E2M3", 6, std::nullopt},
    {"F6_E3M2", 6, std::nullopt}, {"U8", 8, DType::u8},         {"I8", 8, DType::i8},
    {"F8_E5M2", 8, std::nullopt}, {"F8_E4M3", 8, std::nullopt}, {"F8_E8M0", 8, std::nullopt},
    {"I16", 16, DType::i16},      {"U16", 16, std::nullopt},    {"F16", 16, DType::f16},
    {"BF16", 16, DType::bf16},    {"I32", 32, DType::i32},      {"U32", 32, std::nullopt},
    {"F32", 32, DType::f32},      {"C64", 64, std::nullopt},    {"F64", 64, DType::f64},
    {"I64", 64, DType::i64},      {"U64", 64, std::nullopt},
};

const FileDType* find_file_dtype(std::string_view name) {
  for (const FileDType& d : kFileDTypes)
    if (d.name == name) return &d;
  return nullptr;
}

std::string loadable_dtype_names() {
  std::string out;
  for (const FileDType& d : kFileDTypes)
    if (d.dtype) out += fmt::format("{}{}", out.empty() ? "" : ", ", d.name);
  return out;
}

std::string all_dtype_names() {
  std::string out;
  for (const FileDType& d : kFileDTypes)
    out += fmt::format("{}{}", out.empty() ? "" : ", ", d.name);
  return out;
}

[[noreturn]] void fail(std::string_view file, std::uint64_t offset, std::string_view what) {
  throw FormatError(fmt::format("{}: not a valid safetensors file: {} (at byte {}); the file is "
                                "truncated, damaged or not a safetensors file",
                                file, what, offset),
                    std::string(file), offset);
}

// Text from the file, quoted and shortened for an error message.
std::string quoted(std::string_view s) {
  constexpr std::size_t kMax = 60;
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < kMax; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    out += c < 0x20 || c == 0x7f ? fmt::format("\\x{:02x}", c) : std::string(1, char(c));
  }
  return out + (s.size() > kMax ? "...'" : "'");
}

// The number of bytes of the UTF-8 sequence starting at s[0] (s holds n > 0
// bytes), or 0 when it is not valid UTF-8 (overlong forms, surrogates and
// code points beyond U+10FFFF are not).
std::size_t utf8_sequence_length(const unsigned char* s, std::size_t n) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  std::size_t len;
  unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // UTF-16 surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (n < len || s[1] < lo || s[1] > hi) return 0;
  for (std::size_t i = 2; i < len; ++i)
    if (s[i] < 0x80 || s[i] > 0xbf) return 0;
  return len;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

// One parsed tensor entry and where its parts were in the header.
struct Entry {
  SafetensorsTensorInfo info;
  unsigned bits = 0;
  std::size_t value_pos = 0;    // the entry's '{'
  std::size_t offsets_pos = 0;  // its "data_offsets" array
};

// A recursive-descent parser for the header's JSON (RFC 8259), reading the
// safetensors schema as it goes. Positions are indexes into the header; a
// FormatError reports 8 + position, the byte in the file.
class HeaderParser {
 public:
  HeaderParser(const std::uint8_t* text, std::size_t size, std::string_view file)
      : s_(text), n_(size), file_(file) {}

  // Parses the whole header into `entries` (header order) and `metadata`.
  void parse(std::vector<Entry>& entries, std::map<std::string, std::string>& metadata) {
    if (n_ == 0 || s_[0] != '{')
      fail_at(0, fmt::format("the header must be a JSON object starting with '{{', found {}",
                             describe_next()));
    parse_object("the header", [&](const std::string& key) {
      if (key == "__metadata__")
        parse_metadata(metadata);
      else
        entries.push_back(parse_entry(key));
    });
    while (pos_ < n_ && is_space(s_[pos_])) ++pos_;  // the writer's padding
    if (pos_ != n_)
      fail_at(pos_, fmt::format("unexpected {} after the header's JSON object (only spaces may "
                                "follow it)",
                                describe_next()));
  }

 private:
  [[noreturn]] void fail_at(std::size_t pos, std::string_view what) const {
    fail(file_, 8 + std::uint64_t(pos), what);
  }

  static bool is_space(std::uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  void skip_space() {
    while (pos_ < n_ && is_space(s_[pos_])) ++pos_;
  }
  bool next_is(char c) const { return pos_ < n_ && s_[pos_] == std::uint8_t(c); }

  // What the next token looks like, for "expected X, found Y" messages.
  std::string describe_next() const {
    if (pos_ >= n_) return "the end of the header";
    std::uint8_t c = s_[pos_];
    switch (c) {
      case '{':
        return "an object";
      case '[':
        return "an array";
      case '"':
        return "a string";
      case 't':
      case 'f':
        return "a boolean";
      case 'n':
        return "null";
      default:
        break;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return "a number";
    if (c >= 0x20 && c < 0x7f) return fmt::format("the character '{}'", char(c));
    return fmt::format("the byte 0x{:02x}", c);
  }

  void expect(char c, std::string_view context) {
    skip_space();
    if (!next_is(c))
      fail_at(pos_, fmt::format("expected '{}' {}, found {}", c, context, describe_next()));
    ++pos_;
  }

  // An object; `on_member(key)` must consume the member's value.
  // Duplicate keys are an error: a general parser would keep the last one.
  template <typename OnMember> void parse_object(std::string_view what, OnMember&& on_member) {
    skip_space();
    if (!next_is('{'))
      fail_at(pos_, fmt::format("{} must be a JSON object, found {}", what, describe_next()));
    ++pos_;
    std::set<std::string, std::less<>> keys;
    skip_space();
    if (next_is('}')) {
      ++pos_;
      return;
    }
    for (;;) {
      skip_space();
      std::size_t key_pos = pos_;
      if (!next_is('"'))
        fail_at(pos_,
                fmt::format("expected a key (a string) in {}, found {}", what, describe_next()));
      std::string key = parse_string();
      if (!keys.insert(key).second)
        fail_at(key_pos, fmt::format("duplicate key {} in {}", quoted(key), what));
      expect(':', fmt::format("after the key {}", quoted(key)));
      skip_space();
      on_member(key);
      skip_space();
      if (next_is(',')) {
        ++pos_;
      } else if (next_is('}')) {
        ++pos_;
        return;
      } else {
        fail_at(pos_, fmt::format("expected ',' or '}}' in {}, found {}", what, describe_next()));
      }
    }
  }

  // A string at pos_ (which holds '"'), unescaped; UTF-8 checked.
  std::string parse_string() {
    std::size_t start = pos_++;
    std::string out;
    for (;;) {
      if (pos_ >= n_) fail_at(start, "unterminated string");
      std::uint8_t c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail_at(pos_, fmt::format("control byte 0x{:02x} in a string", c));
      if (c == '\\') {
        parse_escape(out);
        continue;
      }
      std::size_t len = utf8_sequence_length(s_ + pos_, n_ - pos_);
      if (len == 0) fail_at(pos_, "a string is not valid UTF-8");
      out.append(reinterpret_cast<const char*>(s_ + pos_), len);
      pos_ += len;
    }
  }

  std::uint32_t parse_hex4(std::size_t escape_pos) {
    if (n_ - pos_ < 4) fail_at(escape_pos, "incomplete \\u escape");
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      std::uint8_t c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= std::uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= std::uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= std::uint32_t(c - 'A' + 10);
      else
        fail_at(pos_ - 1, "invalid hex digit in a \\u escape");
    }
    return v;
  }

  void parse_escape(std::string& out) {
    std::size_t escape_pos = pos_++;
    if (pos_ >= n_) fail_at(escape_pos, "unterminated string");
    std::uint8_t c = s_[pos_++];
    switch (c) {
      case '"':
        out += '"';
        return;
      case '\\':
        out += '\\';
        return;
      case '/':
        out += '/';
        return;
      case 'b':
        out += '\b';
        return;
      case 'f':
        out += '\f';
        return;
      case 'n':
        out += '\n';
        return;
      case 'r':
        out += '\r';
        return;
      case 't':
        out += '\t';
        return;
      case 'u':
        break;
      default:
        fail_at(escape_pos, "invalid escape in a string");
    }
    std::uint32_t cp = parse_hex4(escape_pos);
    if (cp >= 0xdc00 && cp <= 0xdfff) fail_at(escape_pos, "lone UTF-16 low surrogate escape");
    if (cp >= 0xd800 && cp <= 0xdbff) {  // must pair with a low surrogate
      if (n_ - pos_ < 2 || s_[pos_] != '\\' || s_[pos_ + 1] != 'u')
        fail_at(escape_pos, "lone UTF-16 high surrogate escape");
      pos_ += 2;
      std::uint32_t low = parse_hex4(escape_pos);
      if (low < 0xdc00 || low > 0xdfff) fail_at(escape_pos, "lone UTF-16 high surrogate escape");
      cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    append_utf8(out, cp);
  }

  // A non-negative integer without fraction or exponent, as the reference's
  // usize fields require. `what` names the field in messages.
  std::uint64_t parse_uint(std::string_view what) {
    skip_space();
    std::size_t start = pos_;
    if (next_is('-'))
      fail_at(start,
              fmt::format("{} must be a non-negative integer, found a negative number", what));
    if (pos_ >= n_ || s_[pos_] < '0' || s_[pos_] > '9')
      fail_at(start,
              fmt::format("{} must be a non-negative integer, found {}", what, describe_next()));
    if (s_[pos_] == '0' && pos_ + 1 < n_ && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9')
      fail_at(start, fmt::format("{}: a JSON number has no leading zeros", what));
    std::uint64_t v = 0;
    while (pos_ < n_ && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, s_[pos_] - '0', &v))
        fail_at(start, fmt::format("{} does not fit in 64 bits", what));
      ++pos_;
    }
    if (next_is('.') || next_is('e') || next_is('E'))
      fail_at(start, fmt::format("{} must be an integer, found a number with a fraction or "
                                 "exponent",
                                 what));
    return v;
  }

  // Any JSON value (unknown fields are skipped, as the reference skips them),
  // checked for syntax; nesting beyond kSafetensorsMaxDepth is an error.
  void skip_value(int depth) {
    skip_space();
    if (depth > kSafetensorsMaxDepth)
      fail_at(pos_, fmt::format("JSON nested deeper than {} levels", kSafetensorsMaxDepth));
    if (pos_ >= n_) fail_at(pos_, "expected a value, found the end of the header");
    std::uint8_t c = s_[pos_];
    if (c == '{') {
      parse_object("a nested object", [&](const std::string&) { skip_value(depth + 1); });
    } else if (c == '[') {
      ++pos_;
      skip_space();
      if (next_is(']')) {
        ++pos_;
        return;
      }
      for (;;) {
        skip_value(depth + 1);
        skip_space();
        if (next_is(',')) {
          ++pos_;
        } else if (next_is(']')) {
          ++pos_;
          return;
        } else {
          fail_at(pos_, fmt::format("expected ',' or ']' in an array, found {}", describe_next()));
        }
      }
    } else if (c == '"') {
      parse_string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      skip_number();
    } else if (!skip_literal("true") && !skip_literal("false") && !skip_literal("null")) {
      fail_at(pos_, fmt::format("expected a JSON value, found {}", describe_next()));
    }
  }

  bool skip_literal(std::string_view word) {
    if (n_ - pos_ < word.size() || std::memcmp(s_ + pos_, word.data(), word.size()) != 0)
      return false;
    pos_ += word.size();
    return true;
  }

  void skip_digits(std::size_t start) {
    if (pos_ >= n_ || s_[pos_] < '0' || s_[pos_] > '9') fail_at(start, "malformed number");
    while (pos_ < n_ && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
  }

  void skip_number() {
    std::size_t start = pos_;
    if (next_is('-')) ++pos_;
    if (next_is('0')) {
      ++pos_;
    } else {
      skip_digits(start);
    }
    if (next_is('.')) {
      ++pos_;
      skip_digits(start);
    }
    if (next_is('e') || next_is('E')) {
      ++pos_;
      if (next_is('+') || next_is('-')) ++pos_;
      skip_digits(start);
    }
  }

  void parse_metadata(std::map<std::string, std::string>& metadata) {
    if (skip_literal("null")) return;  // serde reads null as "no metadata"
    parse_object("\"__metadata__\"", [&](const std::string& key) {
      if (!next_is('"'))
        fail_at(pos_, fmt::format("\"__metadata__\" values must be strings; the value of {} is {}",
                                  quoted(key), describe_next()));
      metadata.emplace(key, parse_string());
    });
  }

  Entry parse_entry(const std::string& name) {
    Entry e;
    e.info.name = name;
    e.value_pos = pos_;
    std::string what = fmt::format("tensor {}", quoted(name));
    bool has_dtype = false, has_shape = false, has_offsets = false;
    parse_object(what, [&](const std::string& key) {
      if (key == "dtype") {
        has_dtype = true;
        std::size_t at = pos_;
        if (!next_is('"'))
          fail_at(at,
                  fmt::format("{}: \"dtype\" must be a string, found {}", what, describe_next()));
        e.info.file_dtype = parse_string();
        const FileDType* d = find_file_dtype(e.info.file_dtype);
        if (!d)
          fail_at(at, fmt::format("{} has the unknown dtype {} (the format's dtypes: {})", what,
                                  quoted(e.info.file_dtype), all_dtype_names()));
        e.bits = d->bits;
        e.info.dtype = d->dtype;
      } else if (key == "shape") {
        has_shape = true;
        parse_shape(what, e.info.shape);
      } else if (key == "data_offsets") {
        has_offsets = true;
        e.offsets_pos = pos_;
        expect('[', fmt::format("to open the \"data_offsets\" of {}", what));
        e.info.data_begin = parse_uint(fmt::format("the data_offsets of {}", what));
        expect(',', fmt::format("in the \"data_offsets\" of {} (it holds [begin, end])", what));
        e.info.data_end = parse_uint(fmt::format("the data_offsets of {}", what));
        expect(']', fmt::format("after the \"data_offsets\" of {} (it holds [begin, end])", what));
      } else {
        skip_value(2);
      }
    });
    if (!has_dtype || !has_shape || !has_offsets)
      fail_at(e.value_pos, fmt::format("{} has no \"{}\"", what,
                                       !has_dtype   ? "dtype"
                                       : !has_shape ? "shape"
                                                    : "data_offsets"));
    return e;
  }

  void parse_shape(const std::string& what, Shape& shape) {
    std::size_t at = pos_;
    if (!next_is('['))
      fail_at(at, fmt::format("{}: \"shape\" must be an array, found {}", what, describe_next()));
    ++pos_;
    skip_space();
    if (next_is(']')) {
      ++pos_;
      return;
    }
    for (;;) {
      std::size_t dim_pos = pos_;
      std::uint64_t d = parse_uint(fmt::format("a size in the shape of {}", what));
      if (d > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
        fail_at(dim_pos, fmt::format("{}: the size {} does not fit in 63 bits", what, d));
      if (shape.size() == kSafetensorsMaxRank)
        fail_at(dim_pos, fmt::format("{} has more than {} dims", what, kSafetensorsMaxRank));
      shape.push_back(std::int64_t(d));
      skip_space();
      if (next_is(',')) {
        ++pos_;
      } else if (next_is(']')) {
        ++pos_;
        return;
      } else {
        fail_at(pos_, fmt::format("expected ',' or ']' in the shape of {}, found {}", what,
                                  describe_next()));
      }
    }
  }

  const std::uint8_t* s_;
  std::size_t n_;
  std::size_t pos_ = 0;
  std::string_view file_;
};

// The entry's own consistency: offsets in order, size = numel * dtype size,
// inside the data section.
void check_entry(const Entry& e, std::uint64_t data_offset, std::uint64_t data_size,
                 std::string_view file) {
  const SafetensorsTensorInfo& t = e.info;
  std::uint64_t at = 8 + std::uint64_t(e.offsets_pos);
  std::string what = fmt::format("tensor {}", quoted(t.name));
  if (t.data_begin > t.data_end)
    fail(file, at,
         fmt::format("{}: data_offsets [{}, {}] end before they begin", what, t.data_begin,
                     t.data_end));
  // Elements and bits, overflow-checked. Zero sizes count as one for the
  // "fits in 63 bits" check, so that every stride of the tensor fits too.
  std::uint64_t numel = 1, extent = 1, bits = 0;
  bool overflow = false;
  for (std::int64_t d : t.shape) {
    overflow |= __builtin_mul_overflow(numel, std::uint64_t(d), &numel);
    overflow |=
        __builtin_mul_overflow(extent, std::uint64_t(std::max<std::int64_t>(d, 1)), &extent);
  }
  overflow |= extent > std::uint64_t(std::numeric_limits<std::int64_t>::max());
  overflow |= __builtin_mul_overflow(numel, std::uint64_t(e.bits), &bits);
  if (overflow)
    fail(file, 8 + std::uint64_t(e.value_pos),
         fmt::format("{}: shape {} has more elements than 63 bits can count", what,
                     shape_str(t.shape)));
  if (bits % 8 != 0)
    fail(file, at,
         fmt::format("{}: {} elements of {} fill {} bits, not a whole number of bytes", what, numel,
                     t.file_dtype, bits));
  if (t.data_end - t.data_begin != bits / 8)
    fail(file, at,
         fmt::format("{}: dtype {} and shape {} need {} bytes, but data_offsets [{}, {}] "
                     "hold {}",
                     what, t.file_dtype, shape_str(t.shape), bits / 8, t.data_begin, t.data_end,
                     t.data_end - t.data_begin));
  if (t.data_end > data_size)
    fail(file, data_offset + data_size,
         fmt::format("{}: data_offsets [{}, {}] run past the end of the data section, which "
                     "holds {} bytes",
                     what, t.data_begin, t.data_end, data_size));
}

}  // namespace

std::uint64_t parse_safetensors_header_length(const std::uint8_t* prefix, std::size_t prefix_size,
                                              std::uint64_t file_size, std::string_view file) {
  if (file_size < 8 || prefix_size < 8)
    fail(file, std::min<std::uint64_t>(file_size, prefix_size),
         fmt::format("the file has {} bytes; a safetensors file starts with an 8-byte header "
                     "length",
                     file_size));
  std::uint64_t n = 0;
  std::memcpy(&n, prefix, 8);  // little-endian (static_assert above)
  if (n > kSafetensorsMaxHeaderSize)
    fail(file, 0,
         fmt::format("the header length {} exceeds the limit of {} bytes", n,
                     kSafetensorsMaxHeaderSize));
  if (n > file_size - 8)
    fail(
        file, 0,
        fmt::format("the header length {} runs past the end of the file ({} bytes)", n, file_size));
  return n;
}

SafetensorsInfo parse_safetensors_header(const std::uint8_t* header, std::uint64_t header_size,
                                         std::uint64_t file_size, std::string_view file) {
  if (header_size > kSafetensorsMaxHeaderSize || file_size < 8 || header_size > file_size - 8)
    fail(file, 0,
         fmt::format("the header length {} does not fit a file of {} bytes", header_size,
                     file_size));
  SafetensorsInfo info;
  info.path = std::string(file);
  info.file_size = file_size;
  info.header_size = header_size;
  info.data_offset = 8 + header_size;
  const std::uint64_t data_size = file_size - info.data_offset;

  std::vector<Entry> entries;
  HeaderParser(header, std::size_t(header_size), file).parse(entries, info.metadata);
  for (const Entry& e : entries) check_entry(e, info.data_offset, data_size, file);

  // The entries' data must tile the data section: sorted by offsets (the
  // reference sorts the same way; empty tensors keep their header order),
  // each begins where the previous one ended, the last ends at the file's end.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::pair(a.info.data_begin, a.info.data_end) <
           std::pair(b.info.data_begin, b.info.data_end);
  });
  std::uint64_t cursor = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    const SafetensorsTensorInfo& t = e.info;
    if (t.data_begin > cursor)
      fail(file, info.data_offset + cursor,
           fmt::format("bytes [{}, {}) of the data section belong to no tensor (a gap before "
                       "tensor {})",
                       cursor, t.data_begin, quoted(t.name)));
    if (t.data_begin < cursor)
      fail(file, info.data_offset + t.data_begin,
           fmt::format("tensor {} (data_offsets [{}, {}]) overlaps tensor {} (data_offsets [{}, "
                       "{}])",
                       quoted(t.name), t.data_begin, t.data_end, quoted(previous->info.name),
                       previous->info.data_begin, previous->info.data_end));
    cursor = t.data_end;
    previous = &e;
  }
  if (cursor != data_size)
    fail(file, info.data_offset + cursor,
         fmt::format("the tensors' data ends at byte {} of the data section, but the data section "
                     "holds {} bytes; the rest belongs to no tensor",
                     cursor, data_size));
  info.tensors.reserve(entries.size());
  for (Entry& e : entries) info.tensors.push_back(std::move(e.info));
  return info;
}

SafetensorsInfo parse_safetensors(const std::uint8_t* data, std::size_t size,
                                  std::string_view file) {
  std::uint64_t n = parse_safetensors_header_length(data, size, size, file);
  return parse_safetensors_header(data + 8, n, size, file);
}

Tensor read_safetensors_tensor(const SafetensorsInfo& info, const SafetensorsTensorInfo& entry,
                               const SafetensorsByteSource& read) {
  if (!entry.dtype)
    throw DTypeError(
        fmt::format("{}: tensor {} has dtype {}, which ferry has no dtype for; ferry "
                    "loads {}. Convert the tensor (in PyTorch, e.g. "
                    "t.to(torch.float32)) and save the file again",
                    info.path, quoted(entry.name), entry.file_dtype, loadable_dtype_names()));
  // `info` normally comes from parse_safetensors_header; checked again since
  // the copy below trusts these numbers.
  const DType dtype = *entry.dtype;
  std::uint64_t numel = 1, extent = 1, nbytes = 0;
  bool bad = info.data_offset > info.file_size || entry.data_begin > entry.data_end ||
             entry.data_end > info.file_size - info.data_offset ||
             entry.shape.size() > kSafetensorsMaxRank;
  for (std::int64_t d : entry.shape) {
    bad |= d < 0 || __builtin_mul_overflow(numel, std::uint64_t(d), &numel) ||
           __builtin_mul_overflow(extent, std::uint64_t(std::max<std::int64_t>(d, 1)), &extent);
  }
  bad |= extent > std::uint64_t(std::numeric_limits<std::int64_t>::max()) ||
         __builtin_mul_overflow(numel, std::uint64_t(dtype_size(dtype)), &nbytes) ||
         nbytes != entry.data_end - entry.data_begin;
  if (bad)
    fail(info.path, info.data_offset,
         fmt::format("tensor {}: its shape, dtype and data_offsets do not describe bytes inside "
                     "the data section",
                     quoted(entry.name)));
  Tensor t = empty(entry.shape, {.dtype = dtype, .device = Device::cpu()});
  if (nbytes != 0) {
    auto* dst = static_cast<std::uint8_t*>(t.storage()->buffer().host_ptr());
    read(info.data_offset + entry.data_begin, dst, std::size_t(nbytes));
    // A bool element must be 0 or 1 (anything else is undefined behaviour
    // in C++ kernels); the format does not promise it, so normalise.
    if (dtype == DType::boolean)
      for (std::uint64_t i = 0; i < nbytes; ++i) dst[i] = dst[i] != 0;
  }
  return t;
}

StateDict read_safetensors_tensors(const SafetensorsInfo& info, const SafetensorsByteSource& read,
                                   const Device& device) {
  StateDict sd;
  for (const SafetensorsTensorInfo& entry : info.tensors)
    sd.insert(entry.name, read_safetensors_tensor(info, entry, read).to(device));
  sd.metadata = info.metadata;
  return sd;
}

std::string_view safetensors_dtype_name(DType dtype) {
  for (const FileDType& d : kFileDTypes)
    if (d.dtype == dtype) return d.name;
  throw DTypeError(fmt::format("safetensors: no file dtype for {}", dtype_name(dtype)));
}

std::optional<DType> dtype_from_safetensors_name(std::string_view name) {
  const FileDType* d = find_file_dtype(name);
  return d ? d->dtype : std::nullopt;
}

int safetensors_dtype_rank(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kFileDTypes); ++i)
    if (kFileDTypes[i].name == name) return int(i);
  return -1;
}

bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t len = utf8_sequence_length(p + i, s.size() - i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace ferry::detail
