// Checks ferry's ops against numbers PyTorch computed: tests/data/pytorch_reference.json,
// written by tools/gen_reference.py (see its header for the format, the torch version and
// how to regenerate it). Every case in the file is its own test,
// PyTorchReference/Matches/<case name>; PyTorchReferenceData.Loads fails when the file is
// missing, unreadable or empty, so a lost file never passes silently.
//
// A case builds its inputs (f16/bf16 as f32 tensors converted with .to()), moves them to
// the device named by the environment variable FERRY_REFERENCE_DEVICE (default "cpu"),
// runs the op through the public API and checks the result's dtype and shape exactly and
// its values within the case's tolerance: |actual - expected| <= atol + rtol * |expected|,
// NaN only where PyTorch has NaN, an infinity only where PyTorch has the same infinity.
// Integer and bool results must be exact. On a device other than the CPU an op the device
// lacks (UnsupportedError) skips the case; on the CPU it fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding pytorch_reference.json"
#endif

namespace {

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;
using nlohmann::json;

const char* const kReferenceFile = "pytorch_reference.json";

std::string reference_path() { return std::string(FERRY_TEST_DATA_DIR) + "/" + kReferenceFile; }

// ------------------------------------------------------------------ loading

struct Loaded {
  json doc;
  std::string error;  // empty when the file loaded and holds at least one case
};

const Loaded& loaded() {
  static const Loaded result = [] {
    Loaded l;
    const std::string path = reference_path();
    std::ifstream in(path);
    if (!in) {
      l.error =
          "cannot open " + path + " (regenerate with /usr/bin/python3 tools/gen_reference.py)";
      return l;
    }
    try {
      l.doc = json::parse(in);
    } catch (const std::exception& e) {
      l.error = path + " is not valid JSON: " + e.what();
      return l;
    }
    if (!l.doc.is_object() || !l.doc.contains("cases") || !l.doc["cases"].is_array()) {
      l.error = path + " has no \"cases\" array";
    } else if (l.doc["cases"].empty()) {
      l.error = path + " holds no cases";
    }
    return l;
  }();
  return result;
}

// One test parameter: the case's index in the file, and its name for the test's name.
struct CaseRef {
  std::size_t index;
  std::string name;
};

void PrintTo(const CaseRef& c, std::ostream* os) { *os << c.name; }

std::vector<CaseRef> case_refs() {
  std::vector<CaseRef> refs;
  const Loaded& l = loaded();
  if (!l.error.empty()) return refs;
  const json& cases = l.doc["cases"];
  for (std::size_t i = 0; i < cases.size(); ++i)
    refs.push_back({i, cases[i].value("name", "case_" + std::to_string(i))});
  return refs;
}

std::string sanitize(const std::string& name) {
  std::string out;
  for (char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    out += ok ? c : '_';
  }
  return out.empty() ? "unnamed" : out;
}

// ------------------------------------------------------------------ values

// A JSON number, or "nan" / "inf" / "-inf", or a bool.
double to_double(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    throw std::runtime_error("bad number string \"" + s + "\"");
  }
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  return v.get<double>();
}

std::int64_t to_int64(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (v.is_number_integer()) return v.get<std::int64_t>();
  double d = to_double(v);
  if (d != std::floor(d)) throw std::runtime_error("non-integer value for an integer dtype");
  return std::int64_t(d);
}

Shape shape_of(const json& t) { return t.at("shape").get<Shape>(); }

std::int64_t numel_of(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

template <typename T, typename Conv> std::vector<T> data_as(const json& data, Conv conv) {
  std::vector<T> out;
  out.reserve(data.size());
  for (const json& v : data) out.push_back(T(conv(v)));
  return out;
}

// Builds a host tensor of the JSON description, then moves it to `device`. A 0-d shape is
// built as [1] and reshaped, since tensor() reads an empty shape as "1-D, data.size()".
Tensor make_tensor(const json& t, const ferry::Device& device) {
  const Shape shape = shape_of(t);
  const Shape build_shape = shape.empty() ? Shape{1} : shape;
  const json& data = t.at("data");
  if (std::int64_t(data.size()) != numel_of(shape))
    throw std::runtime_error("input data has " + std::to_string(data.size()) +
                             " values for shape " + ferry::shape_str(shape));
  const DType dt = ferry::dtype_from_name(t.at("dtype").get<std::string>());
  Tensor x;
  switch (dt) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
      x = ferry::tensor(data_as<float>(data, to_double), build_shape);
      if (dt != DType::f32) x = x.to(dt);  // the values are exact in dt
      break;
    case DType::i32:
    case DType::i64:
    case DType::u8:
    case DType::i8:
    case DType::i16:
      x = ferry::tensor(data_as<std::int64_t>(data, to_int64), build_shape);
      if (dt != DType::i64) x = x.to(dt);  // the values are exact in dt
      break;
    case DType::boolean:
      x = ferry::tensor(data_as<bool>(data, to_int64), build_shape);
      break;
    case DType::f64:
      x = ferry::tensor(data_as<double>(data, to_double), build_shape);
      break;
  }
  if (shape.empty()) x = x.reshape(Shape{});
  return device.is_cpu() ? x : x.to(device);
}

// ------------------------------------------------------------------ ops

struct Call {
  const std::vector<Tensor>& in;
  const json& attrs;
  const Tensor& at(std::size_t i) const {
    if (i >= in.size())
      throw std::runtime_error("case has " + std::to_string(in.size()) + " inputs, op needs " +
                               std::to_string(i + 1));
    return in[i];
  }
  std::vector<std::int64_t> dims() const {
    return attrs.value("dims", std::vector<std::int64_t>{});
  }
  bool keepdim() const { return attrs.value("keepdim", false); }
  std::int64_t dim() const { return attrs.at("dim").get<std::int64_t>(); }
  // The output a case of a (values, indices) op names.
  Tensor output(const ferry::ValuesIndices& r) const {
    return attrs.at("output").get<std::string>() == "values" ? r.values : r.indices;
  }
};

using OpFn = std::function<Tensor(const Call&)>;

const std::map<std::string, OpFn>& api_table() {
  static const std::map<std::string, OpFn> table = {
      // The op table's unary, binary and compare rows are called by id
      // (reference_op below); these are the ops with their own signatures.
      {"gelu",
       [](const Call& c) {
         return ferry::gelu(c.at(0), c.attrs.value("approximate", std::string("none")));
       }},
      {"where", [](const Call& c) { return ferry::where(c.at(0), c.at(1), c.at(2)); }},
      {"cast",
       [](const Call& c) {
         return ferry::cast(c.at(0),
                            ferry::dtype_from_name(c.attrs.at("dtype").get<std::string>()));
       }},
      // Reductions.
      {"sum", [](const Call& c) { return ferry::sum(c.at(0), c.dims(), c.keepdim()); }},
      {"mean", [](const Call& c) { return ferry::mean(c.at(0), c.dims(), c.keepdim()); }},
      {"max", [](const Call& c) { return ferry::max(c.at(0), c.dims(), c.keepdim()); }},
      {"min", [](const Call& c) { return ferry::min(c.at(0), c.dims(), c.keepdim()); }},
      {"var",
       [](const Call& c) {
         return ferry::var(c.at(0), c.dims(), c.attrs.value("correction", 1.0), c.keepdim());
       }},
      {"argmax",
       [](const Call& c) {
         std::optional<std::int64_t> dim;
         if (c.attrs.contains("dim") && !c.attrs["dim"].is_null())
           dim = c.attrs["dim"].get<std::int64_t>();
         return ferry::argmax(c.at(0), dim, c.keepdim());
       }},
      {"logsumexp", [](const Call& c) { return ferry::logsumexp(c.at(0), c.dims(), c.keepdim()); }},
      {"argmin",
       [](const Call& c) {
         std::optional<std::int64_t> dim;
         if (c.attrs.contains("dim") && !c.attrs["dim"].is_null())
           dim = c.attrs["dim"].get<std::int64_t>();
         return ferry::argmin(c.at(0), dim, c.keepdim());
       }},
      {"all", [](const Call& c) { return ferry::all(c.at(0), c.dims(), c.keepdim()); }},
      {"any", [](const Call& c) { return ferry::any(c.at(0), c.dims(), c.keepdim()); }},
      {"count_nonzero", [](const Call& c) { return ferry::count_nonzero(c.at(0), c.dims()); }},
      {"std",
       [](const Call& c) {
         return ferry::std(c.at(0), c.dims(), c.attrs.value("correction", 1.0), c.keepdim());
       }},
      {"var_mean",
       [](const Call& c) {
         auto [v, m] =
             ferry::var_mean(c.at(0), c.dims(), c.attrs.value("correction", 1.0), c.keepdim());
         return ferry::cat({v.reshape({-1}), m.reshape({-1})});
       }},
      {"std_mean",
       [](const Call& c) {
         auto [s, m] =
             ferry::std_mean(c.at(0), c.dims(), c.attrs.value("correction", 1.0), c.keepdim());
         return ferry::cat({s.reshape({-1}), m.reshape({-1})});
       }},
      {"norm",
       [](const Call& c) {
         const json& p = c.attrs.at("p");
         const double pv = p.is_string() ? (p.get<std::string>() == "inf"    ? INFINITY
                                            : p.get<std::string>() == "-inf" ? -INFINITY
                                                                             : NAN)
                                         : p.get<double>();
         return ferry::norm(c.at(0), pv, c.dims(), c.keepdim());
       }},
      // Composite ops with their own signatures.
      {"clamp",
       [](const Call& c) {
         if (c.in.size() > 1)
           return ferry::clamp(c.at(0), c.in[1], c.in.size() > 2 ? c.in[2] : Tensor());
         auto bound = [&](const char* k) -> std::optional<ferry::Scalar> {
           if (!c.attrs.contains(k) || c.attrs[k].is_null()) return std::nullopt;
           const json& v = c.attrs[k];
           if (v.is_number_integer()) return ferry::Scalar(v.get<std::int64_t>());
           return ferry::Scalar(v.get<double>());
         };
         return ferry::clamp(c.at(0), bound("min"), bound("max"));
       }},
      // Unary rows with parameters (called by id, they take PyTorch's defaults).
      {"softplus",
       [](const Call& c) {
         return ferry::softplus(c.at(0), c.attrs.at("beta"), c.attrs.at("threshold"));
       }},
      {"elu", [](const Call& c) { return ferry::elu(c.at(0), c.attrs.at("alpha")); }},
      {"celu", [](const Call& c) { return ferry::celu(c.at(0), c.attrs.at("alpha")); }},
      {"leaky_relu",
       [](const Call& c) { return ferry::leaky_relu(c.at(0), c.attrs.at("negative_slope")); }},
      {"hardtanh",
       [](const Call& c) {
         return ferry::hardtanh(c.at(0), c.attrs.at("min_val"), c.attrs.at("max_val"));
       }},
      {"nan_to_num",
       [](const Call& c) {
         auto opt = [&](const char* k) -> std::optional<double> {
           if (!c.attrs.contains(k)) return std::nullopt;
           return c.attrs[k].get<double>();
         };
         return ferry::nan_to_num(c.at(0), c.attrs.value("nan", 0.0), opt("posinf"), opt("neginf"));
       }},
      {"round_decimals",
       [](const Call& c) {
         return ferry::round(c.at(0), c.attrs.at("decimals").get<std::int64_t>());
       }},
      // Ternary ops and closeness.
      {"lerp",
       [](const Call& c) {
         if (c.in.size() > 2) return ferry::lerp(c.at(0), c.at(1), c.at(2));
         return ferry::lerp(c.at(0), c.at(1), c.attrs.at("weight").get<double>());
       }},
      {"addcmul",
       [](const Call& c) {
         const json& v = c.attrs.at("value");
         return ferry::addcmul(c.at(0), c.at(1), c.at(2),
                               v.is_number_integer() ? ferry::Scalar(v.get<std::int64_t>())
                                                     : ferry::Scalar(v.get<double>()));
       }},
      {"addcdiv",
       [](const Call& c) {
         return ferry::addcdiv(c.at(0), c.at(1), c.at(2), c.attrs.at("value").get<double>());
       }},
      {"isclose",
       [](const Call& c) {
         return ferry::isclose(c.at(0), c.at(1), c.attrs.at("rtol"), c.attrs.at("atol"),
                               c.attrs.at("equal_nan"));
       }},
      // Indexing and shape ops.
      {"flip", [](const Call& c) { return ferry::flip(c.at(0), c.attrs.at("dims")); }},
      {"roll",
       [](const Call& c) {
         return ferry::roll(c.at(0), c.attrs.at("shifts"), c.attrs.at("dims"));
       }},
      {"repeat", [](const Call& c) { return ferry::repeat(c.at(0), c.attrs.at("sizes")); }},
      {"tile", [](const Call& c) { return ferry::tile(c.at(0), c.attrs.at("reps")); }},
      {"repeat_interleave",
       [](const Call& c) {
         std::optional<std::int64_t> dim;
         if (!c.attrs.at("dim").is_null()) dim = c.attrs.at("dim").get<std::int64_t>();
         if (c.in.size() > 1) return ferry::repeat_interleave(c.at(0), c.at(1), dim);
         return ferry::repeat_interleave(c.at(0), c.attrs.at("repeats").get<std::int64_t>(), dim);
       }},
      {"triu", [](const Call& c) { return ferry::triu(c.at(0), c.attrs.at("diagonal")); }},
      {"tril", [](const Call& c) { return ferry::tril(c.at(0), c.attrs.at("diagonal")); }},
      {"diagonal",
       [](const Call& c) {
         return ferry::diagonal(c.at(0), c.attrs.at("offset"), c.attrs.at("dim1"),
                                c.attrs.at("dim2"));
       }},
      {"diag", [](const Call& c) { return ferry::diag(c.at(0), c.attrs.at("diagonal")); }},
      {"trace", [](const Call& c) { return ferry::trace(c.at(0)); }},
      {"pad",
       [](const Call& c) {
         return ferry::pad(c.at(0), c.attrs.at("pads"), c.attrs.at("mode").get<std::string>(),
                           c.attrs.at("value"));
       }},
      {"one_hot", [](const Call& c) { return ferry::one_hot(c.at(0), c.attrs.at("num_classes")); }},
      {"masked_fill",
       [](const Call& c) {
         const json& v = c.attrs.at("value");
         return ferry::masked_fill(c.at(0), c.at(1),
                                   v.is_number_integer() ? ferry::Scalar(v.get<std::int64_t>())
                                                         : ferry::Scalar(v.get<double>()));
       }},
      {"index_fill",
       [](const Call& c) {
         return ferry::index_fill(c.at(0), c.attrs.at("dim"), c.at(1),
                                  c.attrs.at("value").get<double>());
       }},
      {"take_along_dim",
       [](const Call& c) {
         return ferry::take_along_dim(c.at(0), c.at(1), c.attrs.at("dim").get<std::int64_t>());
       }},
      // The rest.
      {"matmul", [](const Call& c) { return ferry::matmul(c.at(0), c.at(1)); }},
      {"softmax", [](const Call& c) { return ferry::softmax(c.at(0), c.dim()); }},
      {"log_softmax", [](const Call& c) { return ferry::log_softmax(c.at(0), c.dim()); }},
      {"layer_norm",
       [](const Call& c) {
         Tensor weight = c.in.size() > 1 ? c.in[1] : Tensor();
         Tensor bias = c.in.size() > 2 ? c.in[2] : Tensor();
         return ferry::layer_norm(c.at(0), c.attrs.at("normalized_shape").get<Shape>(), weight,
                                  bias, c.attrs.value("eps", 1e-5));
       }},
      // Scans, the sort and the selections; a (values, indices) op names its output.
      {"prod", [](const Call& c) { return ferry::prod(c.at(0), c.dims(), c.keepdim()); }},
      {"cumsum",
       [](const Call& c) {
         std::optional<DType> dt;
         if (c.attrs.contains("dtype"))
           dt = ferry::dtype_from_name(c.attrs.at("dtype").get<std::string>());
         Tensor out = ferry::cumsum(c.at(0), c.dim(), dt);
         return dt == DType::f64 ? out.to(DType::f32) : out;  // the file holds f32
       }},
      {"cumprod", [](const Call& c) { return ferry::cumprod(c.at(0), c.dim()); }},
      {"cummax", [](const Call& c) { return c.output(ferry::cummax(c.at(0), c.dim())); }},
      {"cummin", [](const Call& c) { return c.output(ferry::cummin(c.at(0), c.dim())); }},
      {"sort",
       [](const Call& c) {
         return c.output(ferry::sort(c.at(0), c.dim(), c.attrs.at("descending").get<bool>()));
       }},
      {"argsort",
       [](const Call& c) {
         return ferry::argsort(c.at(0), c.dim(), c.attrs.at("descending").get<bool>());
       }},
      {"topk",
       [](const Call& c) {
         return c.output(ferry::topk(c.at(0), c.attrs.at("k").get<std::int64_t>(), c.dim(),
                                     c.attrs.at("largest").get<bool>()));
       }},
      {"kthvalue",
       [](const Call& c) {
         return c.output(
             ferry::kthvalue(c.at(0), c.attrs.at("k").get<std::int64_t>(), c.dim(), c.keepdim()));
       }},
      {"median",
       [](const Call& c) {
         if (c.attrs.at("dim").is_null()) return ferry::median(c.at(0));
         return c.output(ferry::median(c.at(0), c.dim(), c.keepdim()));
       }},
      {"mode", [](const Call& c) { return c.output(ferry::mode(c.at(0), c.dim(), c.keepdim())); }},
      // Scatters and searches.
      {"scatter_reduce",
       [](const Call& c) {
         return ferry::scatter_reduce(c.at(0), c.dim(), c.at(1), c.at(2),
                                      c.attrs.at("reduce").get<std::string>(),
                                      c.attrs.at("include_self").get<bool>());
       }},
      {"scatter",
       [](const Call& c) {
         return ferry::scatter(c.at(0), c.dim(), c.at(1), c.at(2),
                               c.attrs.at("reduce").get<std::string>());
       }},
      {"index_put",
       [](const Call& c) {
         return ferry::index_put(c.at(0), std::vector<Tensor>(c.in.begin() + 2, c.in.end()),
                                 c.at(1), c.attrs.at("accumulate").get<bool>());
       }},
      {"masked_select", [](const Call& c) { return ferry::masked_select(c.at(0), c.at(1)); }},
      {"masked_scatter",
       [](const Call& c) { return ferry::masked_scatter(c.at(0), c.at(1), c.at(2)); }},
      {"nonzero", [](const Call& c) { return ferry::nonzero(c.at(0)); }},
      {"searchsorted",
       [](const Call& c) {
         return ferry::searchsorted(c.at(0), c.at(1), c.attrs.at("right").get<bool>());
       }},
      {"bucketize",
       [](const Call& c) {
         return ferry::bucketize(c.at(0), c.at(1), c.attrs.at("right").get<bool>());
       }},
      {"unique",
       [](const Call& c) {
         ferry::UniqueResult u = ferry::unique(c.at(0), true, true, true);
         const std::string out = c.attrs.at("output").get<std::string>();
         return out == "values" ? u.values : out == "inverse" ? u.inverse : u.counts;
       }},
      {"rot90",
       [](const Call& c) {
         return ferry::rot90(c.at(0), c.attrs.at("k").get<std::int64_t>(),
                             c.attrs.at("dims").get<std::vector<std::int64_t>>());
       }},
      {"embedding", [](const Call& c) { return ferry::embedding(c.at(0), c.at(1)); }},
      {"index_select",
       [](const Call& c) { return ferry::index_select(c.at(0), c.dim(), c.at(1)); }},
      {"gather", [](const Call& c) { return ferry::gather(c.at(0), c.dim(), c.at(1)); }},
      {"cat",
       [](const Call& c) { return ferry::cat(c.in, c.attrs.value("dim", std::int64_t(0))); }},
      {"stack",
       [](const Call& c) { return ferry::stack(c.in, c.attrs.value("dim", std::int64_t(0))); }},
  };
  return table;
}

// The function that runs reference op `op`: a unary, binary or compare row of
// the op table by its id, else the API table; empty when neither has it.
OpFn reference_op(const std::string& op) {
  if (auto it = api_table().find(op); it != api_table().end()) return it->second;
  if (std::optional<ferry::OpId> id = ferry::op_from_name(op)) {
    const ferry::OpKind kind = ferry::op_info(*id).kind;
    if (kind == ferry::OpKind::unary)
      return [id = *id](const Call& c) { return ferry::unary_op(id, c.at(0)); };
    if (kind == ferry::OpKind::binary || kind == ferry::OpKind::compare)
      return [id = *id](const Call& c) { return ferry::binary_op(id, c.at(0), c.at(1)); };
  }
  return {};
}

// ------------------------------------------------------------------ comparison

std::string fmt_value(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

std::string shape_json(const Shape& s) { return ferry::shape_str(s); }

// Compares values; returns an empty string when all match, else a report.
std::string compare_values(const Tensor& out, const json& expected, DType dt, double rtol,
                           double atol) {
  const json& data = expected.at("data");
  std::vector<double> actual;
  if (ferry::is_floating(dt)) {
    for (float v : out.to_vector<float>()) actual.push_back(v);
  } else if (dt == DType::boolean) {
    for (bool v : out.to_vector<bool>()) actual.push_back(v ? 1.0 : 0.0);
  } else {
    for (std::int64_t v : out.to_vector<std::int64_t>()) actual.push_back(double(v));
  }
  if (actual.size() != data.size())
    return "got " + std::to_string(actual.size()) + " values, expected " +
           std::to_string(data.size());

  std::ostringstream report;
  std::size_t bad = 0;
  double worst_excess = 0;  // the largest |a - e| / (atol + rtol |e|) among finite mismatches
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i];
    bool ok;
    double e;
    if (ferry::is_floating(dt)) {
      // The file holds f32 values as the shortest decimal that reads back to them; the
      // nearest double is not the f32 itself, so round it to f32 first.
      e = double(float(to_double(data[i])));
      if (std::isnan(e)) {
        ok = std::isnan(a);
      } else if (std::isinf(e) || std::isnan(a) || std::isinf(a)) {
        ok = a == e;
      } else {
        const double allowed = atol + rtol * std::fabs(e);
        ok = std::fabs(a - e) <= allowed;
        if (!ok && allowed > 0) worst_excess = std::max(worst_excess, std::fabs(a - e) / allowed);
      }
    } else {
      // Exact: integers up to 2^53 are exact in a double, and the reference holds no more.
      e = double(to_int64(data[i]));
      ok = a == e;
    }
    if (!ok) {
      if (bad < 12)
        report << "\n  [" << i << "] expected " << fmt_value(e) << ", got " << fmt_value(a)
               << " (diff " << fmt_value(a - e) << ")";
      ++bad;
    }
  }
  if (bad == 0) return "";
  std::ostringstream head;
  head << bad << " of " << actual.size() << " values differ (rtol " << rtol << ", atol " << atol;
  if (worst_excess > 0)
    head << ", worst finite miss " << fmt_value(worst_excess) << "x the tolerance";
  head << "):" << report.str();
  if (bad > 12) head << "\n  ...";
  return head.str();
}

std::string describe_inputs(const std::vector<Tensor>& in) {
  std::string s;
  for (const Tensor& t : in) {
    if (!s.empty()) s += ", ";
    s += std::string(ferry::dtype_name(t.dtype())) + shape_json(t.shape());
  }
  return s;
}

// FERRY_REFERENCE_DEVICE names the device (CTest's pytorch_reference_<backend>
// entries); the CPU by default.
std::string test_device_name() {
  const char* env = std::getenv("FERRY_REFERENCE_DEVICE");
  return env && *env ? std::string(env) : std::string("cpu");
}

// ------------------------------------------------------------------ tests

TEST(PyTorchReferenceData, Loads) {
  const Loaded& l = loaded();
  ASSERT_TRUE(l.error.empty()) << l.error;
  EXPECT_TRUE(l.doc.contains("torch_version"));
  EXPECT_GT(l.doc["cases"].size(), 100u) << "the reference file looks truncated";
  // Names must be unique after sanitising, or two cases would share one test name.
  std::map<std::string, std::string> seen;
  for (const json& c : l.doc["cases"]) {
    const std::string name = c.value("name", "");
    auto [it, inserted] = seen.emplace(sanitize(name), name);
    EXPECT_TRUE(inserted) << "cases \"" << it->second << "\" and \"" << name
                          << "\" have the same test name";
    EXPECT_TRUE(bool(reference_op(c.value("op", ""))))
        << name << ": no ferry op \"" << c.value("op", "") << "\" in the dispatch table";
  }
}

class PyTorchReference : public ::testing::TestWithParam<CaseRef> {};

TEST_P(PyTorchReference, Matches) {
  const Loaded& l = loaded();
  ASSERT_TRUE(l.error.empty()) << l.error;
  const json& c = l.doc["cases"].at(GetParam().index);
  const std::string op = c.at("op").get<std::string>();
  const json attrs = c.value("attrs", json::object());
  const json& expected = c.at("output");
  const double rtol = c.at("tol").at("rtol").get<double>();
  const double atol = c.at("tol").at("atol").get<double>();

  const OpFn run = reference_op(op);
  ASSERT_TRUE(bool(run)) << "no ferry op \"" << op << "\" in the dispatch table";

  if (!ferry::is_available(test_device_name()))
    GTEST_SKIP() << test_device_name() << " is not available here: " << ferry::describe_devices();
  const ferry::Device device(test_device_name());
  std::vector<Tensor> inputs;
  for (const json& t : c.at("inputs")) inputs.push_back(make_tensor(t, device));
  SCOPED_TRACE(op + "(" + describe_inputs(inputs) + ") attrs " + attrs.dump() + " on " +
               device.str());

  Tensor out;
  try {
    out = run(Call{inputs, attrs});
  } catch (const ferry::UnsupportedError& e) {
    if (!device.is_cpu()) GTEST_SKIP() << device.str() << " lacks this op: " << e.what();
    FAIL() << "UnsupportedError: " << e.what();
  } catch (const std::exception& e) {
    FAIL() << "threw: " << e.what();
  }
  ASSERT_TRUE(out.defined()) << "the op returned an undefined tensor";

  const std::string want_dtype = expected.at("dtype").get<std::string>();
  const Shape want_shape = shape_of(expected);
  ASSERT_EQ(std::string(ferry::dtype_name(out.dtype())), want_dtype) << "result dtype";
  ASSERT_EQ(shape_json(out.shape()), shape_json(want_shape)) << "result shape";
  EXPECT_EQ(out.device(), device) << "result device";

  const std::string mismatch =
      compare_values(out, expected, ferry::dtype_from_name(want_dtype), rtol, atol);
  EXPECT_TRUE(mismatch.empty()) << mismatch;
}

INSTANTIATE_TEST_SUITE_P(PyTorch, PyTorchReference, ::testing::ValuesIn(case_refs()),
                         [](const ::testing::TestParamInfo<CaseRef>& info) {
                           return sanitize(info.param.name);
                         });
// With no file there are no parameters; PyTorchReferenceData.Loads reports why.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PyTorchReference);

}  // namespace
