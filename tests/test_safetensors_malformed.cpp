// safetensors: every malformed file is a FormatError naming the file and the
// byte where the problem is, never a crash or another exception. Each case is
// checked three ways: the in-memory parser, load_safetensors and
// inspect_safetensors on a file. Offsets below are file offsets: 8 (the
// length prefix) + the position in the header, or data_offset + a position
// in the data section.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "io/safetensors_format.hpp"
#include "safetensors_test_util.hpp"

using ferry::DType;
using ferry::StateDict;
using ferry::Tensor;
using namespace st_test;

namespace {

const std::string kF32x1 = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";

// The file offset of the n-th (0-based) occurrence of `needle` in the header.
std::uint64_t at(const std::string& header, const std::string& needle, int n = 0) {
  std::size_t pos = header.find(needle);
  for (int i = 0; i < n && pos != std::string::npos; ++i) pos = header.find(needle, pos + 1);
  EXPECT_NE(pos, std::string::npos) << needle << " not in " << header;
  return 8 + pos;
}

Bytes zeros(std::size_t n) { return Bytes(n, 0); }

class SafetensorsMalformed : public ScratchDir {
 protected:
  // `file` must be refused with a FormatError at byte `offset` whose message
  // holds `fragment`: in memory, and by load_safetensors and
  // inspect_safetensors, whose errors name the path.
  void expect_format_error(const Bytes& file, std::uint64_t offset, const std::string& fragment) {
    SCOPED_TRACE(std::string(file.begin() + std::min<std::size_t>(file.size(), 8),
                             file.begin() + std::min<std::size_t>(file.size(), 200)));
    try {
      ferry::detail::parse_safetensors(file.data(), file.size(), "memory.safetensors");
      ADD_FAILURE() << "parsed without an error";
    } catch (const ferry::FormatError& e) {
      EXPECT_EQ(e.file(), "memory.safetensors");
      EXPECT_EQ(e.offset(), offset) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "'" << fragment << "' not in: " << e.what();
    }
    const std::string p = path("bad.safetensors");
    write_file(p, file);
    for (bool inspect : {false, true}) {
      try {
        if (inspect)
          ferry::inspect_safetensors(p);
        else
          ferry::load_safetensors(p);
        ADD_FAILURE() << (inspect ? "inspected" : "loaded") << " without an error";
      } catch (const ferry::FormatError& e) {
        EXPECT_EQ(e.file(), p);
        EXPECT_EQ(e.offset(), offset) << e.what();
        EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
      }
    }
  }
  // A header with one tensor entry `entry` named "t", and `data`.
  void expect_entry_error(const std::string& entry, const Bytes& data, const std::string& needle,
                          const std::string& fragment) {
    std::string header = R"({"t":)" + entry + "}";
    expect_format_error(make_file(header, data), at(header, needle), fragment);
  }
};

// A valid file with several dtypes, metadata, an empty and a 0-d tensor.
Bytes sample_file() {
  StateDict sd;
  sd.insert("w", ferry::arange(6).reshape({2, 3}));
  sd.insert("b", ferry::tensor(std::vector<std::int64_t>{-1, 1}));
  sd.insert("m", ferry::tensor(std::vector<bool>{true, false, true}));
  sd.insert("h", ferry::ones({2}, {.dtype = DType::f16}));
  sd.insert("e", ferry::zeros({0, 2}));
  sd.insert("s", ferry::scalar_tensor(3, {.dtype = DType::i32}));
  sd.metadata["format"] = "pt";
  return ferry::detail::serialize_safetensors(sd);
}

}  // namespace

TEST_F(SafetensorsMalformed, ShorterThanTheLengthPrefix) {
  for (std::size_t n = 0; n < 8; ++n) expect_format_error(zeros(n), n, "8-byte header length");
}

TEST_F(SafetensorsMalformed, HeaderLengthBeyondTheFileOrTheLimit) {
  Bytes f = make_file("{}      ");
  std::uint64_t n = 9;  // one byte more than there is
  std::memcpy(f.data(), &n, 8);
  expect_format_error(f, 0, "runs past the end of the file");
  n = 100'000'001;
  std::memcpy(f.data(), &n, 8);
  expect_format_error(f, 0, "exceeds the limit of 100000000");
  n = ~std::uint64_t(0);
  std::memcpy(f.data(), &n, 8);
  expect_format_error(f, 0, "exceeds the limit");
}

TEST_F(SafetensorsMalformed, HeaderIsNotAJsonObject) {
  for (const std::string h : {"", "[]", "\"x\"", " {}", "1", "null", "\n{}"})
    expect_format_error(make_file(h), 8, "must be a JSON object");
}

TEST_F(SafetensorsMalformed, InvalidJson) {
  struct Case {
    std::string header;
    std::string needle;  // where the error is
    std::string fragment;
  };
  const Case cases[] = {
      {R"({"a":})", "}", "tensor 'a' must be a JSON object"},
      {R"({"a" 1})", "1", "expected ':'"},
      {R"({"a":)" + kF32x1, "", "expected ',' or '}'"},  // unclosed: at the end
      {R"({} x)", "x", "after the header's JSON object"},
      {R"({}})", "}}", "after the header's JSON object"},
      {R"({"abc)", "\"abc", "unterminated string"},
      {"{\"a\x01\":" + kF32x1 + "}", "\x01", "control byte 0x01"},
      {"{\"\xff\":" + kF32x1 + "}", "\xff", "not valid UTF-8"},
      {"{\"\xc0\x80\":" + kF32x1 + "}", "\xc0", "not valid UTF-8"},      // overlong
      {"{\"\xed\xa0\x80\":" + kF32x1 + "}", "\xed", "not valid UTF-8"},  // surrogate
      {R"({"\q":)" + kF32x1 + "}", "\\q", "invalid escape"},
      {R"({"\u12":)" + kF32x1 + "}", "\":", "invalid hex digit"},
      {R"({"\ud800":)" + kF32x1 + "}", "\\ud800", "lone UTF-16 high surrogate"},
      {R"({"\udc00":)" + kF32x1 + "}", "\\udc00", "lone UTF-16 low surrogate"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],}})", ",}", "expected a key"},
      {R"({"a":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}})", "01", "leading zeros"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":tru}})", "tru", "JSON value"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":-}})", "-}", "malformed number"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1.}})", "1.}", "malformed"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":[1 2]}})", "2]", "',' or ']'"},
  };
  for (const Case& c : cases) {
    Bytes f = make_file(c.header, zeros(4));
    std::uint64_t offset = c.needle.empty() ? 8 + c.header.size() : at(c.header, c.needle);
    if (c.needle == "\\q" || c.needle == "\\ud800" || c.needle == "\\udc00")
      offset = at(c.header, "\\");
    if (c.needle == "\":") offset = at(c.header, "2\":") + 1;  // the first non-hex digit
    if (c.needle == ",}") offset = at(c.header, ",}") + 1;
    if (c.needle == "}}") offset = at(c.header, "}}") + 1;
    if (c.needle == "\"abc") offset = at(c.header, "\"abc");
    expect_format_error(f, offset, c.fragment);
  }
}

TEST_F(SafetensorsMalformed, DeepNestingIsRefusedWithoutRecursingDeep) {
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":)" + deep + "}}";
  Bytes f = make_file(header, zeros(4));
  // The limit is hit at the 31st bracket below "x" (the entry is level 1).
  expect_format_error(f, at(header, "[[") + 31, "nested deeper than 32 levels");
}

TEST_F(SafetensorsMalformed, BadlyTypedFields) {
  const Bytes four = zeros(4);
  expect_entry_error(R"({"dtype":1,"shape":[1],"data_offsets":[0,4]})", four, "1,",
                     "\"dtype\" must be a string, found a number");
  expect_entry_error(R"({"dtype":"F32","shape":"1","data_offsets":[0,4]})", four, "\"1\"",
                     "\"shape\" must be an array, found a string");
  expect_entry_error(R"({"dtype":"F32","shape":["1"],"data_offsets":[0,4]})", four, "\"1\"",
                     "non-negative integer, found a string");
  expect_entry_error(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})", four, "-1",
                     "found a negative number");
  expect_entry_error(R"({"dtype":"F32","shape":[1.0],"data_offsets":[0,4]})", four, "1.0",
                     "fraction or exponent");
  expect_entry_error(R"({"dtype":"F32","shape":[1e0],"data_offsets":[0,4]})", four, "1e0",
                     "fraction or exponent");
  expect_entry_error(R"({"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4]})", four,
                     "18446744073709551616", "does not fit in 64 bits");
  expect_entry_error(R"({"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,4]})", four,
                     "9223372036854775808", "does not fit in 63 bits");
  expect_entry_error(R"({"dtype":"F32","shape":[1],"data_offsets":4})", four, "4}", "expected '['");
  expect_entry_error(R"({"dtype":"F32","shape":[1],"data_offsets":[4]})", four, "]}",
                     "expected ','");
  expect_entry_error(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4,8]})", four, ",8",
                     "expected ']'");
  expect_entry_error(R"({"dtype":"F32","shape":[1],"data_offsets":[0,-4]})", four, "-4",
                     "negative number");
  expect_entry_error(R"({"dtype":"F32","shape":[1],"data_offsets":["0",4]})", four, "\"0\"",
                     "found a string");
  expect_entry_error(R"([1])", four, "[1]", "tensor 't' must be a JSON object, found an array");
  expect_entry_error(R"({"shape":[1],"data_offsets":[0,4]})", four, "{\"shape", "has no \"dtype\"");
  expect_entry_error(R"({"dtype":"F32","data_offsets":[0,4]})", four, "{\"dtype",
                     "has no \"shape\"");
  expect_entry_error(R"({"dtype":"F32","shape":[1]})", four, "{\"dtype", "has no \"data_offsets\"");
}

TEST_F(SafetensorsMalformed, UnknownDtypes) {
  for (const std::string d : {"F128", "f32", "", "FLOAT", "I4"})
    expect_entry_error(R"({"dtype":")" + d + R"(","shape":[1],"data_offsets":[0,4]})", zeros(4),
                       "\"" + d + "\"", "unknown dtype");
}

TEST_F(SafetensorsMalformed, SizesThatOverflowOrDisagree) {
  // numel * element size overflows 64 bits: at the entry.
  expect_entry_error(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]})", {},
                     "{\"dtype", "more elements than 63 bits");
  expect_entry_error(R"({"dtype":"F32","shape":[2305843009213693952],"data_offsets":[0,0]})", {},
                     "{\"dtype", "more elements than 63 bits");
  // No elements, but strides for these sizes would overflow.
  expect_entry_error(
      R"({"dtype":"U8","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]})",
      {}, "{\"dtype", "more elements than 63 bits");
  // Sizes that do not match the offsets: at "data_offsets".
  expect_entry_error(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})", zeros(4), "[0,4]",
                     "need 8 bytes, but data_offsets [0, 4] hold 4");
  expect_entry_error(R"({"dtype":"F4","shape":[3],"data_offsets":[0,1]})", zeros(1), "[0,1]",
                     "not a whole number of bytes");
  std::string dims = "1";
  for (int i = 0; i < 64; ++i) dims += ",1";  // 65 dims
  std::string entry = R"({"dtype":"U8","shape":[)" + dims + R"(],"data_offsets":[0,1]})";
  std::string header = R"({"t":)" + entry + "}";
  expect_format_error(make_file(header, zeros(1)), at(header, "[") + 1 + 2 * 64,
                      "more than 64 dims");
}

TEST_F(SafetensorsMalformed, OffsetsThatDoNotTileTheData) {
  auto entry = [](const std::string& name, int b, int e) {
    return "\"" + name + "\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(e - b) +
           "],\"data_offsets\":[" + std::to_string(b) + "," + std::to_string(e) + "]}";
  };
  // begin > end.
  std::string h = R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[8,4]}})";
  expect_format_error(make_file(h, zeros(8)), at(h, "[8,4]"), "end before they begin");
  // Past the end of the data: where the data runs out, the end of the file.
  h = "{" + entry("t", 0, 8) + "}";
  Bytes f = make_file(h, zeros(4));
  expect_format_error(f, f.size(), "run past the end of the data section");
  // Overlap: at the overlapping tensor's begin in the data section.
  h = "{" + entry("a", 0, 8) + "," + entry("b", 4, 12) + "}";
  expect_format_error(make_file(h, zeros(12)), 8 + h.size() + 4, "overlaps tensor 'a'");
  h = "{" + entry("a", 0, 8) + ",\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}";
  expect_format_error(make_file(h, zeros(8)), 8 + h.size() + 4, "tensor 'e'");
  // A gap: where it starts.
  h = "{" + entry("b", 8, 12) + "," + entry("a", 0, 4) + "}";
  expect_format_error(make_file(h, zeros(12)), 8 + h.size() + 4, "bytes [4, 8)");
  // Bytes after the last tensor: where they start.
  h = "{" + entry("a", 0, 4) + "}";
  expect_format_error(make_file(h, zeros(8)), 8 + h.size() + 4, "the rest belongs to no tensor");
  expect_format_error(make_file("{}", zeros(1)), 8 + 2, "the rest belongs to no tensor");
}

TEST_F(SafetensorsMalformed, DuplicateKeys) {
  std::string h = R"({"a":)" + kF32x1 + R"(,"a":)" + kF32x1 + "}";
  expect_format_error(make_file(h, zeros(8)), at(h, "\"a\"", 1), "duplicate key 'a'");
  h = R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  expect_format_error(make_file(h, zeros(4)), at(h, "\"dtype\"", 1), "duplicate key 'dtype'");
  h = R"({"__metadata__":{"k":"1","k":"2"}})";
  expect_format_error(make_file(h), at(h, "\"k\"", 1), "duplicate key 'k'");
  h = R"({"__metadata__":{},"__metadata__":{}})";
  expect_format_error(make_file(h), at(h, "\"__metadata__\"", 1), "duplicate key");
}

TEST_F(SafetensorsMalformed, MetadataMustMapStringsToStrings) {
  std::string h = R"({"__metadata__":{"k":1}})";
  expect_format_error(make_file(h), at(h, "1}"), "values must be strings");
  h = R"({"__metadata__":{"k":{"x":"y"}}})";
  expect_format_error(make_file(h), at(h, "{\"x"), "values must be strings");
  h = R"({"__metadata__":["k","v"]})";
  expect_format_error(make_file(h), at(h, "["), "\"__metadata__\" must be a JSON object");
  h = R"({"__metadata__":"k"})";
  expect_format_error(make_file(h), at(h, "\"k\""), "must be a JSON object");
}

TEST_F(SafetensorsMalformed, WellFormedVariantsLoad) {
  // What the reference accepts too: entries in any order, fields in any
  // order, unknown fields, JSON whitespace, null metadata, escaped names,
  // empty tensors sharing an offset, trailing newlines.
  std::string h =
      "{ \"b\" : { \"shape\" : [ 2 ] , \"data_offsets\" : [ 4 , 12 ], \"dtype\" : \"F32\" ,"
      " \"extra\": {\"nested\": [1, -2.5e3, true, null, \"s\"]} },\n"
      "\"\\u00e9\\n\\\"q\\\"\\ud83d\\ude00\": "
      "{\"dtype\":\"BOOL\",\"shape\":[4],\"data_offsets\":[0,4]},"
      "\"__metadata__\": null, \"e1\": "
      "{\"dtype\":\"F16\",\"shape\":[0,3],\"data_offsets\":[12,12]},"
      "\"e0\": {\"dtype\":\"I64\",\"shape\":[5,0],\"data_offsets\":[12,12]}}\n\t \r";
  Bytes data = {0, 1, 2, 255, 0, 0, 128, 63, 0, 0, 0, 64};
  write_file(path("ok.safetensors"), make_file(h, data));
  StateDict sd = ferry::load_safetensors(path("ok.safetensors"));
  EXPECT_EQ(sd.keys(),
            (std::vector<std::string>{"\u00e9\n\"q\"\U0001F600", "b", "e1", "e0"}));  // data order
  EXPECT_EQ(sd.at("b").to_vector<float>(), (std::vector<float>{1, 2}));
  // BOOL bytes other than 0 and 1 load as true (and as 1 in storage).
  EXPECT_EQ(sd.at("\u00e9\n\"q\"\U0001F600").to_vector<bool>(),
            (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(sd.at("\u00e9\n\"q\"\U0001F600").to(DType::u8).to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(sd.at("e0").sizes(), (ferry::Shape{5, 0}));
  EXPECT_TRUE(sd.metadata.empty());
}

TEST_F(SafetensorsMalformed, TruncatedAtEveryByte) {
  const Bytes file = sample_file();
  for (std::size_t n = 0; n < file.size(); ++n) {
    SCOPED_TRACE("truncated to " + std::to_string(n) + " of " + std::to_string(file.size()));
    Bytes cut(file.begin(), file.begin() + std::ptrdiff_t(n));
    try {
      ferry::detail::parse_safetensors(cut.data(), cut.size(), "cut");
      ADD_FAILURE() << "parsed";
    } catch (const ferry::FormatError& e) {
      EXPECT_LE(e.offset(), n) << e.what();
    }
    write_file(path("cut.safetensors"), cut);
    try {
      ferry::load_safetensors(path("cut.safetensors"));
      ADD_FAILURE() << "loaded";
    } catch (const ferry::FormatError& e) {
      EXPECT_EQ(e.file(), path("cut.safetensors"));
      EXPECT_LE(e.offset(), n) << e.what();
    }
  }
  Bytes longer = file;
  longer.push_back(0);
  expect_format_error(longer, file.size(), "the rest belongs to no tensor");
}

TEST_F(SafetensorsMalformed, EveryChangeOfOneHeaderByteLoadsTheSameDataOrIsAFormatError) {
  const Bytes file = sample_file();
  const ferry::SafetensorsInfo original =
      ferry::detail::parse_safetensors(file.data(), file.size(), "original");
  int loaded = 0, refused = 0, unsupported = 0;
  for (std::size_t i = 0; i < original.data_offset; ++i) {
    for (int x = 1; x < 256; ++x) {
      Bytes f = file;
      f[i] ^= std::uint8_t(x);
      try {
        ferry::SafetensorsInfo info = ferry::detail::parse_safetensors(f.data(), f.size(), "f");
        StateDict sd = ferry::detail::read_safetensors_tensors(
            info,
            [&](std::uint64_t off, void* dst, std::size_t n) {
              ASSERT_LE(off + n, f.size());
              std::memcpy(dst, f.data() + off, n);
            },
            ferry::Device::cpu());
        // It loads: then the same bytes, in the same place, as tensors of the same sizes.
        ASSERT_EQ(info.data_offset, original.data_offset) << "byte " << i << " ^ " << x;
        ASSERT_EQ(sd.size(), original.tensors.size()) << "byte " << i << " ^ " << x;
        for (const ferry::SafetensorsTensorInfo& t : info.tensors) {
          Tensor v = sd.at(t.name);
          Bytes expected(f.begin() + std::ptrdiff_t(info.data_offset + t.data_begin),
                         f.begin() + std::ptrdiff_t(info.data_offset + t.data_end));
          if (v.dtype() == DType::boolean)
            for (auto& b : expected) b = b != 0;
          Bytes got(expected.size());
          if (!got.empty()) std::memcpy(got.data(), v.storage()->buffer().host_ptr(), got.size());
          ASSERT_EQ(got, expected) << "byte " << i << " ^ " << x << ", tensor " << t.name;
        }
        ++loaded;
      } catch (const ferry::FormatError& e) {
        ASSERT_LE(e.offset(), f.size()) << e.what();
        ++refused;
      } catch (const ferry::DTypeError&) {
        ++unsupported;  // a well-formed file with a dtype ferry does not load ("U8" -> "U16")
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(loaded, 0);  // changed names and metadata values still load
  std::cout << "header byte changes: " << loaded << " loaded, " << refused << " refused, "
            << unsupported << " unsupported dtypes\n";
  // The same through the file API, one change per byte.
  for (std::size_t i = 0; i < original.data_offset; ++i) {
    Bytes f = file;
    f[i] ^= 0xff;
    write_file(path("flip.safetensors"), f);
    try {
      ferry::load_safetensors(path("flip.safetensors"));
    } catch (const ferry::FormatError& e) {
      EXPECT_EQ(e.file(), path("flip.safetensors"));
    } catch (const ferry::DTypeError&) {
    }
  }
}
