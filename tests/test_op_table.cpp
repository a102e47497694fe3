// tests/test_op_table.cpp — the op table (Note [The op table] in
// ferry/op.hpp) and what is generated from it: the rows op_info() returns
// against ops/ops.table itself, the Vulkan shaders' op codes
// (ferry_ops.glsl), and every device's supports() against its row.
// test_kernel_coverage.cpp holds the registered kernels to the table.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "ferry/backend.hpp"
#include "ferry/error.hpp"
#include "ferry/op.hpp"
#include "ferry/ops.hpp"
#include "ferry/registry.hpp"

namespace {

std::string read_file(const char* path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(OpTable, RowsAreTheTableFileInOrder) {
  std::istringstream in(read_file(FERRY_OP_TABLE));
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string name;
    if (!(words >> name) || name[0] == '#') continue;
    names.push_back(name);
  }
  ASSERT_EQ(names.size(), ferry::kOpCount);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const ferry::OpInfo& info = ferry::op_info(ferry::OpId(i));
    EXPECT_EQ(info.name, names[i]);
    EXPECT_EQ(std::size_t(info.id), i);
    EXPECT_EQ(ferry::op_from_name(names[i]), ferry::OpId(i));
    EXPECT_EQ(info.backward_name, names[i] + "Backward");
    EXPECT_FALSE(info.kernel_dtypes().empty()) << info.name;
  }
  EXPECT_EQ(ferry::op_from_name("no_such_op"), std::nullopt);
  EXPECT_THROW((void)ferry::op_info(ferry::OpId(ferry::kOpCount)), ferry::Error);
}

// The shaders' OP_<NAME> codes and op_is_<kind>() lists equal the rows.
TEST(OpTable, ShaderCodesAreTheOpIds) {
  const std::string glsl = read_file(FERRY_OPS_GLSL);
  ASSERT_FALSE(glsl.empty()) << FERRY_OPS_GLSL;
  std::map<std::string, unsigned> codes;
  const std::regex def(R"(#define OP_([A-Z0-9_]+) ([0-9]+)u)");
  for (auto it = std::sregex_iterator(glsl.begin(), glsl.end(), def); it != std::sregex_iterator();
       ++it)
    codes[(*it)[1]] = unsigned(std::stoul((*it)[2]));
  EXPECT_EQ(codes.size(), ferry::kOpCount);
  for (const ferry::OpInfo& info : ferry::op_table()) {
    std::string upper(info.name);
    for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
    ASSERT_TRUE(codes.count(upper)) << "ferry_ops.glsl lacks OP_" << upper;
    EXPECT_EQ(codes[upper], unsigned(info.id)) << upper;
    const std::string kind(ferry::op_kind_name(info.kind));
    const std::regex kind_fn("bool op_is_" + kind + R"(\(uint op\) \{[^}]*op == OP_)" + upper +
                             "[ ;]");
    EXPECT_TRUE(std::regex_search(glsl, kind_fn)) << upper << " is not in op_is_" << kind << "()";
  }
}

// A device never claims a dtype its op's row does not take, and claims every
// op its kernels cover in f32 (every backend computes f32).
TEST(OpTable, SupportsAgreesWithTheRows) {
  for (const ferry::DeviceInfo& d : ferry::devices()) {
    if (!d.available) continue;
    const ferry::DeviceImpl& impl = ferry::device_impl(ferry::Device(d.device));
    for (const ferry::OpInfo& info : ferry::op_table()) {
      const bool has = impl.find_kernel(info.id) != nullptr;
      for (ferry::DType dt : ferry::kAllDTypes)
        if (impl.supports(info.id, dt)) {
          EXPECT_TRUE(has) << d.device << " supports " << info.name << " without a kernel";
          EXPECT_TRUE(info.kernel_dtypes().has(dt))
              << d.device << " supports " << info.name << " in " << ferry::dtype_name(dt)
              << ", which its row does not take";
        }
      if (has && info.kernel_dtypes().has(ferry::DType::f32))
        EXPECT_TRUE(impl.supports(info.id, ferry::DType::f32)) << d.device << " " << info.name;
    }
  }
}

// supports() is exact for the functor kinds: on every device (the testdev
// plugin included), each unary, binary and compare op in each dtype its row
// takes runs where supports() says yes and raises UnsupportedError where it
// says no.
TEST(OpTable, SupportsIsWhatTheKernelsDo) {
  for (const ferry::DeviceInfo& d : ferry::devices()) {
    if (!d.available) continue;
    const ferry::Device dev(d.device);
    // The built-in backends only: other tests of this process register
    // devices that misbehave on purpose (test_guard.cpp's out-of-bounds writer).
    const std::string name = dev.str();
    if (name.rfind("cpu", 0) != 0 && name.rfind("vulkan", 0) != 0 && name.rfind("cuda", 0) != 0)
      continue;
    const ferry::DeviceImpl& impl = ferry::device_impl(dev);
    for (const ferry::OpInfo& info : ferry::op_table()) {
      const bool binary = info.kind == ferry::OpKind::binary || info.kind == ferry::OpKind::compare;
      if (info.kind != ferry::OpKind::unary && !binary) continue;
      for (ferry::DType dt : ferry::kAllDTypes) {
        if (!info.dtypes.has(dt)) continue;
        // Made on the CPU and moved as bytes (every device holds every dtype).
        const ferry::Tensor x = ferry::ones({2}, {.dtype = dt}).to(dev);
        const ferry::DType compute = ferry::op_compute_dtype(info.id, dt);
        const bool says = impl.supports(info.id, compute) &&
                          (compute == dt || impl.supports(ferry::OpId::copy, dt));
        // A composite op runs by its composition where there is no fused kernel.
        if (info.impl == ferry::OpImpl::composite && !says) continue;
        bool ran = true;
        std::string why;
        try {
          (void)(binary ? ferry::binary_op(info.id, x, x) : ferry::unary_op(info.id, x));
        } catch (const ferry::UnsupportedError& e) {
          ran = false;
          why = e.what();
        }
        EXPECT_EQ(ran, says) << d.device << " " << info.name << " on " << ferry::dtype_name(dt)
                             << ": supports() says " << says << " " << why;
      }
    }
  }
}

// The dtype rule front-ends take from the rows.
TEST(OpTable, DTypeRules) {
  using ferry::DType;
  using ferry::OpId;
  EXPECT_EQ(ferry::op_compute_dtype(OpId::exp, DType::i32), DType::f32);
  EXPECT_EQ(ferry::op_compute_dtype(OpId::exp, DType::f16), DType::f16);
  EXPECT_EQ(ferry::op_compute_dtype(OpId::neg, DType::i64), DType::i64);
  EXPECT_EQ(ferry::op_compute_dtype(OpId::div, DType::u8), DType::f32);
  EXPECT_EQ(ferry::op_result_dtype(OpId::eq, DType::f32), DType::boolean);
  EXPECT_EQ(ferry::op_result_dtype(OpId::sum, DType::i32), DType::i64);
  EXPECT_EQ(ferry::op_result_dtype(OpId::sum, DType::bf16), DType::bf16);
  EXPECT_EQ(ferry::op_result_dtype(OpId::argmax, DType::f32), DType::i64);
  EXPECT_NO_THROW(ferry::check_op_dtype(OpId::add, DType::boolean, "x"));
  try {
    ferry::check_op_dtype(OpId::sub, DType::boolean, "operands of shapes [2] and [2]");
    FAIL() << "sub takes no bool";
  } catch (const ferry::DTypeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("sub"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bool"), std::string::npos) << msg;
  }
}

// docs/ops.md: every row of ops/ops.table as a table of what each built-in
// backend does with it, made from the table file and op_info(). The test
// fails when the committed file differs; FERRY_UPDATE_DOCS=1 rewrites it.
std::string ops_markdown() {
  std::ostringstream md;
  md << "# ferry's ops\n\n"
     << "Generated from `ops/ops.table` (Note [The op table] in `include/ferry/op.hpp`) by the "
        "test `OpTable.DocsTableIsCurrent`\n(tests/test_op_table.cpp), which fails when this "
        "file is stale. After changing the table, rewrite it with\n\n"
     << "    FERRY_UPDATE_DOCS=1 build/release/bin/ferry_tests "
        "--gtest_filter=OpTable.DocsTableIsCurrent\n\n"
     << "Per backend: **kernel**: the backend's own kernel; **composite**: made of other ops, so "
        "it runs wherever\nthey do and is differentiable through them; **fused**: composite, "
        "with a fused kernel of the backend's\nthat runs where no gradient is recorded (or under "
        "autograd too, where the grad cell names backward\nkernels the backend has); **-**: "
        "not supported. A device can take fewer dtypes than\nthe row lists (`supports()`: "
        "Vulkan's 16-bit and 64-bit types, f64 included, need the device's features);\n"
        "`ferry-conformance --list --device DEV` prints what one device takes.\n\n"
     << "Grad: **formula**, a backward formula (runtime/autograd/); **parts**, through the ops "
        "it is made of;\n**none**, not differentiable; **backward**, a backward kernel itself; in "
        "parentheses, the backward\nkernels its gradient runs where the device has them (the "
        "column backward). "
        "Result: **same** (the compute\ndtype), **bool**, **i64**, **widen** (integers give "
        "i64), **given** (the caller's dtype). Autocast: what a `ferry::Autocast` scope does to "
        "the\nfloating inputs (Note [Autocast] in `include/ferry/autocast.hpp`): **low** (its "
        "f16 or bf16), **f32**,\n**promote** (the widest), **banned**, **-** (nothing).\n\n"
     << "| op | kind | dtypes | result | grad | autocast | cpu | cuda | vulkan |\n"
     << "|---|---|---|---|---|---|---|---|---|\n";
  std::istringstream in(read_file(FERRY_OP_TABLE));
  std::size_t count = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::vector<std::string> col;
    for (std::string w; words >> w;) col.push_back(w);
    if (col.empty() || col[0][0] == '#') continue;
    // name kind inputs outputs dtypes compute result promote grad impl backends attrs range
    // autocast backward
    const ferry::OpInfo& info = ferry::op_info(*ferry::op_from_name(col[0]));
    std::string dtypes;
    for (ferry::DType dt : ferry::kAllDTypes)
      if (info.dtypes.has(dt))
        dtypes += std::string(dtypes.empty() ? "" : " ") + std::string(ferry::dtype_name(dt));
    if (col[5] == "float") dtypes += " (integers and bool as f32)";
    std::string grad = col[8];
    for (std::size_t i = 0; i < info.backward_kernels().size(); ++i)
      grad += std::string(i == 0 ? " (" : ", ") +
              std::string(ferry::op_name(info.backward_kernels()[i])) +
              (i + 1 == info.backward_kernels().size() ? ")" : "");
    md << "| " << col[0] << " | " << col[1] << " | " << dtypes << " | " << col[6] << " | " << grad
       << " | " << col[13];
    for (const char* backend : {"cpu", "cuda", "vulkan"}) {
      const bool has = info.builtin_kernel(backend);
      const char* cell = info.impl == ferry::OpImpl::composite ? (has ? "fused" : "composite")
                                                               : (has ? "kernel" : "-");
      md << " | " << cell;
    }
    md << " |\n";
    ++count;
  }
  md << "\n" << count << " ops.\n";
  return md.str();
}

TEST(OpTable, DocsTableIsCurrent) {
  const std::string want = ops_markdown();
  if (const char* update = std::getenv("FERRY_UPDATE_DOCS"); update && std::string(update) == "1") {
    std::ofstream(FERRY_OPS_DOC) << want;
    GTEST_SKIP() << "wrote " << FERRY_OPS_DOC;
  }
  EXPECT_EQ(read_file(FERRY_OPS_DOC), want)
      << FERRY_OPS_DOC
      << " is not the op table's: rewrite it with FERRY_UPDATE_DOCS=1 (see its "
         "first lines)";
}

}  // namespace
