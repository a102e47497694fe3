// safetensors: round trips of every dtype, shapes, views, metadata and tied
// names; the reference writer's exact layout; loading onto Vulkan; inspect;
// atomic saves; PyTorch interop through the files in tests/data/safetensors
// (made by tools/gen_safetensors_reference.py, see its docstring).
// Malformed files are in test_safetensors_malformed.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "io/safetensors_format.hpp"
#include "safetensors_test_util.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding safetensors/"
#endif

using ferry::Device;
using ferry::DType;
using ferry::Shape;
using ferry::StateDict;
using ferry::Tensor;
using nlohmann::json;
using namespace st_test;

namespace {

const fs::path kDataDir = fs::path(FERRY_TEST_DATA_DIR) / "safetensors";
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A tensor's bytes as the file stores them: contiguous, on the host.
Bytes bytes_of(const Tensor& t) {
  Tensor c = t.cpu().contiguous();
  Bytes out(std::size_t(c.numel()) * c.element_size());
  if (!out.empty())
    std::memcpy(out.data(),
                static_cast<const std::uint8_t*>(c.storage()->buffer().host_ptr()) +
                    std::size_t(c.storage_offset()) * c.element_size(),
                out.size());
  return out;
}

void expect_same_tensor(const Tensor& actual, const Tensor& expected, const std::string& name) {
  SCOPED_TRACE(name);
  EXPECT_EQ(actual.dtype(), expected.dtype());
  EXPECT_EQ(actual.sizes(), expected.sizes());
  EXPECT_EQ(bytes_of(actual), bytes_of(expected));  // bit-exact: NaN payloads, -0.0
}

Tensor floats(const std::vector<float>& v, const Shape& shape, DType dtype = DType::f32) {
  return ferry::tensor(v, shape, {.dtype = dtype});
}

// One or more tensors of every dtype ferry has, with edge values.
StateDict every_dtype() {
  StateDict sd;
  sd.insert("f32", floats({0.0f, -0.0f, 1.5f, kNaN, kInf, -kInf, 1e-45f, 3.4e38f}, {2, 4}));
  sd.insert("f16", floats({0.0f, -2.0f, 65504.0f, 6.1035156e-05f, kInf, kNaN}, {6}, DType::f16));
  sd.insert("bf16", floats({1.0f, -3.0e38f, 0.0078125f, kNaN}, {2, 2}, DType::bf16));
  sd.insert("f64", ferry::tensor(std::vector<double>{0.1, -1e308, 5e-324, -0.0}, {4}));
  sd.insert("i32",
            ferry::tensor(std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::min(), -1, 0,
                                                    7, std::numeric_limits<std::int32_t>::max()}));
  sd.insert("i64",
            ferry::tensor(std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min(), 1,
                                                    std::numeric_limits<std::int64_t>::max(), -5},
                          {2, 2}));
  sd.insert("u8", ferry::tensor(std::vector<std::uint8_t>{0, 1, 127, 128, 255, 42}, {3, 2}));
  sd.insert("bool", ferry::tensor(std::vector<bool>{true, false, false, true, true}));
  sd.insert("i8", ferry::tensor(std::vector<std::int8_t>{-128, -1, 0, 127}));
  sd.insert("i16", ferry::tensor(std::vector<std::int16_t>{-32768, -300, 0, 32767}, {2, 2}));
  return sd;
}

class Safetensors : public ScratchDir {};

}  // namespace

TEST_F(Safetensors, RoundTripsEveryDtype) {
  StateDict sd = every_dtype();
  sd.metadata["format"] = "pt";
  ferry::save_safetensors(path("a.safetensors"), sd);
  StateDict back = ferry::load_safetensors(path("a.safetensors"));
  ASSERT_EQ(back.size(), sd.size());
  for (const auto& [name, t] : sd) {
    ASSERT_TRUE(back.contains(name)) << name;
    expect_same_tensor(back.at(name), t, name);
    EXPECT_EQ(back.at(name).device(), Device::cpu());
  }
  EXPECT_EQ(back.metadata, sd.metadata);
  // Loaded in file order: the reference writer's dtype order, widest first.
  EXPECT_EQ(back.keys(), (std::vector<std::string>{"i64", "f64", "f32", "i32", "bf16", "f16", "i16",
                                                   "i8", "u8", "bool"}));
}

TEST_F(Safetensors, RoundTripsShapes) {
  StateDict sd;
  sd.insert("scalar", ferry::scalar_tensor(2.5));
  sd.insert("scalar_i64", ferry::scalar_tensor(-7));
  sd.insert("empty", ferry::empty({0}));
  sd.insert("empty_rows", ferry::zeros({0, 3}, {.dtype = DType::bf16}));
  sd.insert("empty_middle", ferry::zeros({2, 0, 4}, {.dtype = DType::i32}));
  sd.insert("ones", ferry::ones({1, 1, 1, 1}, {.dtype = DType::f16}));
  sd.insert("cube", ferry::arange(24).reshape({2, 3, 4}));
  sd.insert("rank6", ferry::arange(64, {.dtype = DType::i64}).reshape({2, 2, 2, 2, 2, 2}));
  ferry::save_safetensors(path("shapes.safetensors"), sd);
  StateDict back = ferry::load_safetensors(path("shapes.safetensors"));
  ASSERT_EQ(back.size(), sd.size());
  for (const auto& [name, t] : sd) expect_same_tensor(back.at(name), t, name);
  EXPECT_EQ(back.at("scalar").dim(), 0);
  EXPECT_EQ(back.at("empty_middle").sizes(), (Shape{2, 0, 4}));
  EXPECT_TRUE(back.metadata.empty());
}

TEST_F(Safetensors, ViewsAreWrittenContiguous) {
  Tensor base = ferry::arange(24).reshape({2, 3, 4});
  StateDict sd;
  sd.insert("permuted", base.permute({2, 0, 1}));
  sd.insert("stepped", base.slice(2, 0, 4, 3));
  sd.insert("narrowed", base.narrow(0, 1, 1));                             // a storage offset
  sd.insert("expanded", ferry::arange(3).reshape({3, 1}).expand({3, 5}));  // stride 0
  sd.insert("selected", base.select(1, 2).select(0, 1).select(0, 3));      // 0-d view
  ferry::save_safetensors(path("views.safetensors"), sd);
  StateDict back = ferry::load_safetensors(path("views.safetensors"));
  for (const auto& [name, t] : sd) {
    SCOPED_TRACE(name);
    const Tensor& b = back.at(name);
    EXPECT_EQ(b.sizes(), t.sizes());
    EXPECT_EQ(b.to_vector<float>(), t.to_vector<float>());
    EXPECT_TRUE(b.is_contiguous());
    EXPECT_EQ(b.storage_offset(), 0);
  }
  EXPECT_EQ(back.at("selected").item<float>(), 23.0f);
  // The file holds exactly the views' elements, nothing of the rest of their storage.
  ferry::SafetensorsInfo info = ferry::inspect_safetensors(path("views.safetensors"));
  EXPECT_EQ(info.find("stepped")->nbytes(), 2u * 3 * 2 * 4);
  EXPECT_EQ(info.find("expanded")->nbytes(), 15u * 4);
}

TEST_F(Safetensors, MetadataRoundTripsWithEscapesAndUnicode) {
  StateDict sd;
  sd.insert("w\"eird\\name\n\u00e9", ferry::ones({2}));
  sd.metadata["quote"] = "say \"hi\"";
  sd.metadata["controls"] = "tab\tnl\ncr\rbs\bff\fone\x01 del\x7f";
  sd.metadata["unicode"] = "\u00e9\u4e2d\U0001F600";
  sd.metadata["slash"] = "a/b\\c";
  sd.metadata["empty"] = "";
  sd.metadata[""] = "empty key";
  ferry::save_safetensors(path("meta.safetensors"), sd);
  StateDict back = ferry::load_safetensors(path("meta.safetensors"));
  EXPECT_EQ(back.metadata, sd.metadata);
  EXPECT_EQ(back.keys(), sd.keys());
  // serde_json's escapes: the short forms, \u00XX for other control bytes, DEL and
  // non-ASCII as they are.
  std::string header = header_of(read_file(path("meta.safetensors")));
  EXPECT_NE(header.find(R"("tab\tnl\ncr\rbs\bff\fone\u0001 del)"), std::string::npos) << header;
  EXPECT_NE(header.find("\"unicode\":\"\u00e9\u4e2d\U0001F600\""), std::string::npos) << header;
}

TEST_F(Safetensors, TiedNamesAreWrittenAsCopies) {
  Tensor w = ferry::arange(6).reshape({2, 3});
  StateDict sd;
  sd.insert("encoder.embed.weight", w);
  sd.insert("decoder.head.weight", w);             // the same tensor (weight tying)
  sd.insert("decoder.first_row", w.select(0, 0));  // a view of the same storage
  ferry::save_safetensors(path("tied.safetensors"), sd);

  ferry::SafetensorsInfo info = ferry::inspect_safetensors(path("tied.safetensors"));
  ASSERT_EQ(info.tensors.size(), 3u);
  EXPECT_EQ(info.find("encoder.embed.weight")->nbytes(), 24u);
  EXPECT_EQ(info.find("decoder.head.weight")->nbytes(), 24u);
  EXPECT_EQ(info.find("decoder.first_row")->nbytes(), 12u);

  StateDict back = ferry::load_safetensors(path("tied.safetensors"));
  EXPECT_EQ(back.at("encoder.embed.weight").to_vector<float>(), w.to_vector<float>());
  EXPECT_EQ(back.at("decoder.head.weight").to_vector<float>(), w.to_vector<float>());
  EXPECT_EQ(back.at("decoder.first_row").to_vector<float>(), (std::vector<float>{0, 1, 2}));
  // Loaded, each name has storage of its own.
  EXPECT_NE(back.at("encoder.embed.weight").storage(), back.at("decoder.head.weight").storage());
}

TEST_F(Safetensors, LayoutIsTheReferenceWritersByteForByte) {
  // The reference implementation's own serialization tests, byte for byte.
  StateDict one;
  one.insert("attn.0", ferry::arange(6).reshape({1, 2, 3}));
  ferry::save_safetensors(path("one.safetensors"), one);
  EXPECT_EQ(read_file(path("one.safetensors")),
            make_file(R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})",
                      bytes_of(one.at("attn.0"))));

  StateDict aligned;  // a shorter name: 7 spaces make the data start 8-byte aligned
  aligned.insert("attn0", ferry::arange(6).reshape({1, 1, 2, 3}));
  ferry::save_safetensors(path("aligned.safetensors"), aligned);
  EXPECT_EQ(read_file(path("aligned.safetensors")),
            make_file(R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       )",
                      bytes_of(aligned.at("attn0"))));

  StateDict empty;
  ferry::save_safetensors(path("empty.safetensors"), empty);
  EXPECT_EQ(read_file(path("empty.safetensors")), make_file("{}      "));
  empty.metadata["framework"] = "pt";
  ferry::save_safetensors(path("meta.safetensors"), empty);
  EXPECT_EQ(read_file(path("meta.safetensors")),
            make_file(R"({"__metadata__":{"framework":"pt"}}     )"));
  EXPECT_TRUE(ferry::load_safetensors(path("meta.safetensors")).empty());

  // Mixed dtypes: widest first in the reference's dtype order, then by name.
  StateDict mixed = every_dtype();
  mixed.insert("a_f32", ferry::ones({1}));
  ferry::save_safetensors(path("mixed.safetensors"), mixed);
  ferry::SafetensorsInfo info = ferry::inspect_safetensors(path("mixed.safetensors"));
  std::vector<std::string> order;
  for (const auto& t : info.tensors) order.push_back(t.name);
  EXPECT_EQ(order, (std::vector<std::string>{"i64", "f64", "a_f32", "f32", "i32", "bf16", "f16",
                                             "i16", "i8", "u8", "bool"}));
  EXPECT_EQ(info.header_size % 8, 0u);
  std::string header = header_of(read_file(path("mixed.safetensors")));
  EXPECT_LT(header.find("\"i64\""), header.find("\"f64\""));  // the header lists them in that order
}

TEST_F(Safetensors, LoadsOntoVulkanAndSavesFromIt) {
  if (!ferry::is_available("vulkan")) GTEST_SKIP() << ferry::describe_devices();
  const Device gpu("vulkan:0");
  StateDict sd = every_dtype();
  ferry::save_safetensors(path("cpu.safetensors"), sd);
  StateDict on_gpu = ferry::load_safetensors(path("cpu.safetensors"), gpu);
  ASSERT_EQ(on_gpu.size(), sd.size());
  for (const auto& [name, t] : on_gpu) {
    EXPECT_EQ(t.device(), gpu) << name;
    expect_same_tensor(t, sd.at(name), name);  // compared on the host
  }
  // Saved from the GPU, with a non-contiguous view there too: the same bytes as from the CPU.
  StateDict from_gpu;
  for (const auto& [name, t] : sd) from_gpu.insert(name, t.to(gpu));
  from_gpu.insert("view", ferry::arange(6).reshape({2, 3}).to(gpu).t());
  StateDict from_cpu = sd;
  from_cpu.insert("view", ferry::arange(6).reshape({2, 3}).t());
  ferry::save_safetensors(path("gpu.safetensors"), from_gpu);
  ferry::save_safetensors(path("cpu2.safetensors"), from_cpu);
  EXPECT_EQ(read_file(path("gpu.safetensors")), read_file(path("cpu2.safetensors")));
}

TEST_F(Safetensors, InspectReadsTheHeader) {
  StateDict sd = every_dtype();
  sd.metadata["step"] = "100";
  ferry::save_safetensors(path("x.safetensors"), sd);
  Bytes file = read_file(path("x.safetensors"));
  ferry::SafetensorsInfo info = ferry::inspect_safetensors(path("x.safetensors"));
  EXPECT_EQ(info.path, path("x.safetensors"));
  EXPECT_EQ(info.file_size, file.size());
  EXPECT_EQ(info.header_size, header_of(file).size());
  EXPECT_EQ(info.data_offset, 8 + info.header_size);
  EXPECT_EQ(info.metadata, sd.metadata);
  ASSERT_EQ(info.tensors.size(), sd.size());
  const ferry::SafetensorsTensorInfo* i64 = info.find("i64");
  ASSERT_NE(i64, nullptr);
  EXPECT_EQ(i64->file_dtype, "I64");
  EXPECT_EQ(i64->dtype, DType::i64);
  EXPECT_EQ(i64->shape, (Shape{2, 2}));
  EXPECT_EQ(i64->data_begin, 0u);
  EXPECT_EQ(i64->data_end, 32u);
  EXPECT_EQ(info.find("nope"), nullptr);
  std::uint64_t end = 0;
  for (const auto& t : info.tensors) {
    EXPECT_EQ(t.data_begin, end) << t.name;  // in data order, back to back
    end = t.data_end;
    EXPECT_EQ(std::string(ferry::detail::safetensors_dtype_name(*t.dtype)), t.file_dtype);
  }
  EXPECT_EQ(info.data_offset + end, info.file_size);

  // Dtypes ferry cannot load are listed, without a ferry dtype; loading names them.
  Bytes u16 = make_file(R"({"q":{"dtype":"U16","shape":[2],"data_offsets":[0,4]},)"
                        R"("s":{"dtype":"F32","shape":[],"data_offsets":[4,8]}})",
                        {1, 0, 2, 0, 0, 0, 128, 63});
  write_file(path("u16.safetensors"), u16);
  info = ferry::inspect_safetensors(path("u16.safetensors"));
  ASSERT_EQ(info.tensors.size(), 2u);
  EXPECT_EQ(info.tensors[0].file_dtype, "U16");
  EXPECT_FALSE(info.tensors[0].dtype.has_value());
  try {
    ferry::load_safetensors(path("u16.safetensors"));
    FAIL() << "a U16 tensor must not load";
  } catch (const ferry::DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("'q'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("U16"), std::string::npos) << e.what();
  }
}

// I8 and I16 load as i8 and i16 (two's complement, little-endian), and save back as the same.
TEST_F(Safetensors, SmallSignedIntegersLoadAndSave) {
  Bytes f = make_file(R"({"a":{"dtype":"I8","shape":[3],"data_offsets":[0,3]},)"
                      R"("b":{"dtype":"I16","shape":[2],"data_offsets":[3,7]}})",
                      {0xff, 0x80, 0x7f, 0x00, 0x80, 0x2c, 0x01});
  write_file(path("small.safetensors"), f);
  auto sd = ferry::load_safetensors(path("small.safetensors"));
  ASSERT_EQ(sd.at("a").dtype(), DType::i8);
  ASSERT_EQ(sd.at("b").dtype(), DType::i16);
  EXPECT_EQ(sd.at("a").to_vector<std::int8_t>(), (std::vector<std::int8_t>{-1, -128, 127}));
  EXPECT_EQ(sd.at("b").to_vector<std::int16_t>(), (std::vector<std::int16_t>{-32768, 300}));
  ferry::save_safetensors(path("small_again.safetensors"), sd);
  auto again = ferry::inspect_safetensors(path("small_again.safetensors"));
  for (const auto& t : again.tensors)
    EXPECT_EQ(t.file_dtype, t.name == "a" ? "I8" : "I16") << t.name;
  auto back = ferry::load_safetensors(path("small_again.safetensors"));
  EXPECT_TRUE(ferry::equal(back.at("a"), sd.at("a")));
  EXPECT_TRUE(ferry::equal(back.at("b"), sd.at("b")));
}

TEST_F(Safetensors, OpeningFailuresAreErrorsNotFormatErrors) {
  for (const std::string& p : {path("missing.safetensors"), dir_.string()}) {
    SCOPED_TRACE(p);
    try {
      ferry::load_safetensors(p);
      FAIL() << "loading must fail";
    } catch (const ferry::FormatError& e) {
      FAIL() << "not a format problem: " << e.what();
    } catch (const ferry::Error& e) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
    EXPECT_THROW(ferry::inspect_safetensors(p), ferry::Error);
  }
}

TEST_F(Safetensors, SaveRefusesBadInputBeforeTouchingTheDisk) {
  StateDict undefined;
  undefined.insert("w", Tensor());
  EXPECT_THROW(ferry::save_safetensors(path("a.safetensors"), undefined), ferry::Error);
  StateDict reserved;
  reserved.insert("__metadata__", ferry::ones({1}));
  EXPECT_THROW(ferry::save_safetensors(path("a.safetensors"), reserved), ferry::Error);
  StateDict bad_name;
  bad_name.insert("bad\xff", ferry::ones({1}));
  EXPECT_THROW(ferry::save_safetensors(path("a.safetensors"), bad_name), ferry::Error);
  StateDict bad_meta;
  bad_meta.metadata["k"] = "\xc3";
  EXPECT_THROW(ferry::save_safetensors(path("a.safetensors"), bad_meta), ferry::Error);
  EXPECT_TRUE(listing().empty());
}

TEST_F(Safetensors, SaveIsAtomic) {
  StateDict old_sd;
  old_sd.insert("w", ferry::ones({4}));
  const std::string ckpt = path("ckpt.safetensors");
  ferry::save_safetensors(ckpt, old_sd);
  const Bytes old_bytes = read_file(ckpt);

  // A missing folder, and a folder where the file should be.
  EXPECT_THROW(ferry::save_safetensors(path("missing/ckpt.safetensors"), old_sd), ferry::Error);
  fs::create_directory(path("folder.safetensors"));
  EXPECT_THROW(ferry::save_safetensors(path("folder.safetensors"), old_sd), ferry::Error);
  EXPECT_EQ(listing(), (std::vector<std::string>{"ckpt.safetensors", "folder.safetensors"}));
  fs::remove(path("folder.safetensors"));

  // A write that fails half-way (the file size limit, which binds root too)
  // leaves the old checkpoint as it was and no temporary file.
  StateDict big;
  big.insert("w", ferry::zeros({64 * 1024}));
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  try {
    ferry::save_safetensors(ckpt, big);
  } catch (const ferry::Error& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("ckpt.safetensors"), std::string::npos) << e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(threw);
  EXPECT_EQ(read_file(ckpt), old_bytes);
  EXPECT_EQ(listing(), (std::vector<std::string>{"ckpt.safetensors"}));

  // A read-only folder (root writes anyway, so only checked for other users).
  if (::geteuid() != 0) {
    fs::create_directory(path("ro"));
    fs::permissions(path("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROW(ferry::save_safetensors(path("ro/ckpt.safetensors"), old_sd), ferry::Error);
    fs::permissions(path("ro"), fs::perms::owner_all);
    EXPECT_TRUE(fs::is_empty(path("ro")));
    fs::remove(path("ro"));
  }

  // A successful save replaces the file whole.
  ferry::save_safetensors(ckpt, big);
  EXPECT_EQ(ferry::load_safetensors(ckpt).at("w").numel(), 64 * 1024);
  EXPECT_EQ(listing(), (std::vector<std::string>{"ckpt.safetensors"}));
}

// ------------------------------------------------------------------ PyTorch interop

namespace {

json load_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error("cannot open " + p.string());
  return json::parse(in);
}

json value_to_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// {"dtype", "shape", "data"} of a tensor, the sidecar format of tools/gen_safetensors_reference.py.
json tensor_to_json(const Tensor& t) {
  json j;
  j["dtype"] = std::string(ferry::dtype_name(t.dtype()));
  j["shape"] = t.sizes();
  json data = json::array();
  if (t.dtype() == DType::boolean) {
    for (bool b : t.to_vector<bool>()) data.push_back(b);
  } else if (t.dtype() == DType::i64 || t.dtype() == DType::i32 || t.dtype() == DType::u8) {
    for (std::int64_t v : t.to_vector<std::int64_t>()) data.push_back(v);
  } else if (t.dtype() == DType::f64) {
    for (double v : t.to_vector<double>()) data.push_back(value_to_json(v));
  } else {  // f32, f16, bf16: every value is exact as a float
    for (float v : t.to_vector<float>()) data.push_back(value_to_json(double(v)));
  }
  j["data"] = data;
  return j;
}

// Compares a loaded tensor with a sidecar entry: dtype and shape exactly, and
// every value exactly (the same NaN-ness, the sign of zeros).
void expect_matches_json(const Tensor& t, const json& expected, const std::string& name) {
  SCOPED_TRACE(name);
  json actual = tensor_to_json(t);
  ASSERT_EQ(actual["dtype"], expected["dtype"]);
  ASSERT_EQ(actual["shape"], expected["shape"]);
  ASSERT_EQ(actual["data"].size(), expected["data"].size());
  for (std::size_t i = 0; i < actual["data"].size(); ++i) {
    const json& a = actual["data"][i];
    const json& e = expected["data"][i];
    if (e.is_number_float() || (e.is_number() && a.is_number_float())) {
      double ev = e.get<double>(), av = a.get<double>();
      EXPECT_EQ(av, ev) << "element " << i;
      EXPECT_EQ(std::signbit(av), std::signbit(ev)) << "element " << i;
    } else {
      EXPECT_EQ(a, e) << "element " << i;
    }
  }
}

// The state dict behind tests/data/safetensors/ferry_written.safetensors: every
// dtype, 0-d, empty, a transposed view, tied names, metadata with escapes.
StateDict ferry_written_state_dict() {
  StateDict sd;
  sd.insert("layer.weight", floats({0.5f, -1.25f, 0.0f, -0.0f, 3.0e-3f, 1e-45f, kInf, -kInf, kNaN,
                                    1e30f, -7.0f, 123456.789f},
                                   {3, 4}));
  sd.insert("layer.bias", floats({1.0f, -0.5f, 65504.0f, 0.0009765625f}, {4}, DType::f16));
  Tensor emb = floats({0.1f, 0.2f, -3.0f, 100.0f, -0.0078125f, 2.5f}, {2, 3}, DType::bf16);
  sd.insert("emb.weight", emb);
  sd.insert("head.weight", emb);  // tied
  sd.insert("scale", ferry::scalar_tensor(0.1, {.dtype = DType::f64}));
  sd.insert("moments", ferry::tensor(std::vector<double>{1.0 / 3, -2e-300, 1e300}, {3}));
  sd.insert("counts",
            ferry::tensor(std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min(), -1,
                                                    9007199254740993, 0},
                          {2, 2}));
  sd.insert("index", ferry::tensor(std::vector<std::int32_t>{-2147483647 - 1, 0, 2147483647}));
  sd.insert("pixels", ferry::tensor(std::vector<std::uint8_t>{0, 17, 128, 255, 1, 2}, {2, 3}));
  sd.insert("mask", ferry::tensor(std::vector<bool>{true, false, true, true}, {2, 2}));
  sd.insert("empty", ferry::zeros({0, 3}));
  sd.insert("step", ferry::scalar_tensor(1000));
  sd.insert("transposed", ferry::arange(6).reshape({3, 2}).t());
  sd.metadata["format"] = "pt";
  sd.metadata["producer"] = "ferry tests/test_safetensors.cpp";
  sd.metadata["note"] = "tab\t \"quoted\" back\\slash \u00e9 \u2713";
  return sd;
}

json state_dict_to_json(const StateDict& sd) {
  json j;
  j["metadata"] = sd.metadata;
  json tensors = json::object();
  for (const auto& [name, t] : sd) tensors[name] = tensor_to_json(t);
  j["tensors"] = tensors;
  return j;
}

}  // namespace

TEST(SafetensorsPyTorch, LoadsFilesPyTorchWrote) {
  json expected = load_json(kDataDir / "pytorch_expected.json");
  ASSERT_FALSE(expected["files"].empty());
  for (const auto& [file, spec] : expected["files"].items()) {
    SCOPED_TRACE(file);
    StateDict sd = ferry::load_safetensors((kDataDir / file).string());
    EXPECT_EQ(json(sd.metadata), spec["metadata"]);
    ASSERT_EQ(sd.size(), spec["tensors"].size());
    for (const auto& [name, t] : spec["tensors"].items()) {
      ASSERT_TRUE(sd.contains(name)) << name;
      expect_matches_json(sd.at(name), t, name);
    }
  }
}

TEST(SafetensorsPyTorch, FerryWrittenFileIsUnchanged) {
  // tests/data/safetensors/ferry_written.safetensors was written by this
  // test and checked with PyTorch by tools/gen_safetensors_reference.py. If
  // the writer's bytes change, PyTorch compatibility must be re-verified:
  //   FERRY_REGENERATE=1 ./bin/ferry_tests --gtest_filter=SafetensorsPyTorch.FerryWritten*
  //   /tmp/stvenv/bin/python tools/gen_safetensors_reference.py --verify-only
  StateDict sd = ferry_written_state_dict();
  const fs::path file = kDataDir / "ferry_written.safetensors";
  const fs::path sidecar = kDataDir / "ferry_written.json";
  const char* regen = std::getenv("FERRY_REGENERATE");
  if (regen && std::string(regen) == "1") {
    fs::create_directories(kDataDir);
    ferry::save_safetensors(file.string(), sd);
    std::ofstream(sidecar) << state_dict_to_json(sd).dump(1) << "\n";
    std::cout << "wrote " << file << " and " << sidecar
              << "; verify them with tools/gen_safetensors_reference.py --verify-only\n";
  }
  Bytes now = ferry::detail::serialize_safetensors(sd);
  EXPECT_EQ(now, read_file(file))
      << "the writer no longer produces the bytes PyTorch was checked against; regenerate and "
         "re-verify (see this test's comment)";
  EXPECT_EQ(state_dict_to_json(sd), load_json(sidecar));
  // The committed file loads back to the same values.
  StateDict back = ferry::load_safetensors(file.string());
  for (const auto& [name, t] : sd) expect_same_tensor(back.at(name), t, name);
  EXPECT_EQ(back.metadata, sd.metadata);
}
