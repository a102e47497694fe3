// Checks ferry's nn layers and losses, forward and backward, against numbers PyTorch
// computed: tests/data/pytorch_nn_reference.json, written by tools/gen_nn_reference.py (see
// its docstring for the format, the torch version and how to regenerate it).
//
// Each case builds the ferry module on the device under test, loads the case's parameters
// into it with load_state_dict (from CPU tensors, so on Vulkan the load also converts
// devices), runs forward, then backward of sum(out * R), and compares the output, the
// gradients of the inputs and parameters and (BatchNorm1d) the running statistics. Every
// case runs twice: NnReference/Cpu/<case> on the CPU, the reference, with the file's
// tolerances (f32: rtol 1e-5); NnReference/Vulkan/<case> on vulkan:0 when there is one, with
// tolerances loosened to rtol 1e-4 / atol 1e-5 (other summation orders, GPU
// transcendentals). On Vulkan an op the device lacks (UnsupportedError) skips the case; on
// the CPU it fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"
#include "op_test_util.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding pytorch_nn_reference.json"
#endif

namespace {

namespace nn = ferry::nn;
using ferry::Device;
using ferry::DType;
using ferry::Shape;
using ferry::Tensor;
using nlohmann::json;

std::string reference_path() {
  return std::string(FERRY_TEST_DATA_DIR) + "/pytorch_nn_reference.json";
}

const json& doc() {
  static const json d = [] {
    std::ifstream in(reference_path());
    if (!in) return json();
    try {
      return json::parse(in);
    } catch (const std::exception&) {
      return json();
    }
  }();
  return d;
}

struct CaseRef {
  std::size_t index;
  std::string name;
};

void PrintTo(const CaseRef& c, std::ostream* os) { *os << c.name; }

std::vector<CaseRef> case_refs() {
  std::vector<CaseRef> refs;
  if (!doc().is_object() || !doc().contains("cases")) return refs;
  for (std::size_t i = 0; i < doc()["cases"].size(); ++i)
    refs.push_back({i, doc()["cases"][i].at("name").get<std::string>()});
  return refs;
}

// ------------------------------------------------------------------ values

double to_double(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    throw std::runtime_error("bad number string \"" + s + "\"");
  }
  return v.get<double>();
}

std::vector<double> values_of(const json& t) {
  std::vector<double> out;
  for (const json& v : t.at("data")) out.push_back(to_double(v));
  return out;
}

// A CPU tensor of the JSON description (f32, i64 or i32), moved to `device`.
Tensor make_tensor(const json& t, const Device& device = Device::cpu()) {
  const Shape shape = t.at("shape").get<Shape>();
  const Shape build = shape.empty() ? Shape{1} : shape;
  const std::string dt = t.at("dtype").get<std::string>();
  const std::vector<double> v = values_of(t);
  Tensor x;
  if (dt == "f32") {
    x = ferry::tensor(std::vector<float>(v.begin(), v.end()), build);
  } else if (dt == "i64") {
    std::vector<std::int64_t> iv;
    for (double d : v) iv.push_back(std::int64_t(d));
    x = ferry::tensor(iv, build);
  } else if (dt == "i32") {
    std::vector<std::int32_t> iv;
    for (double d : v) iv.push_back(std::int32_t(d));
    x = ferry::tensor(iv, build);
  } else {
    throw std::runtime_error("unexpected dtype " + dt);
  }
  if (shape.empty()) x = x.reshape(Shape{});
  return x.to(device);
}

struct Tol {
  double rtol, atol;
};

// One case on one device: tensors by name, and checks against them.
struct Case {
  const json& c;
  Device device;
  Tol tol;

  const json& tensors() const { return c.at("tensors"); }
  bool has(const std::string& name) const { return tensors().contains(name); }
  Tensor get(const std::string& name) const { return make_tensor(tensors().at(name), device); }
  Tensor input(const std::string& name) const { return get(name).requires_grad_(); }
  const json& attrs() const { return c.at("attrs"); }

  void expect(const std::string& name, const Tensor& got) const {
    SCOPED_TRACE(name);
    ASSERT_TRUE(got.defined()) << name << " is undefined (no gradient?)";
    const json& want = tensors().at(name);
    EXPECT_EQ(got.device(), device) << name;
    ASSERT_EQ(got.sizes(), want.at("shape").get<Shape>()) << name;
    ferry_test::expect_close(ferry_test::as_double(got.to(DType::f32)), values_of(want), tol.rtol,
                             tol.atol, name);
  }
  void expect_grad(const std::string& name, const Tensor& t, const std::string& suffix = "") const {
    if (has("grad_" + name + suffix)) expect("grad_" + name + suffix, t.grad());
  }
  // sum(out * R): its backward hands R to out, as the generator did.
  void backward(const Tensor& out, const std::string& r = "R") const {
    ferry::sum(out * get(r)).backward();
  }
  // The parameters under their state_dict names, as CPU tensors.
  ferry::StateDict params(const std::vector<std::string>& names) const {
    ferry::StateDict sd;
    for (const std::string& n : names)
      if (has(n)) sd.insert(n, make_tensor(tensors().at(n)));
    return sd;
  }
};

// ------------------------------------------------------------------ per kind

void run_linear(const Case& k) {
  const json& a = k.attrs();
  nn::Linear m(a.at("in_features"), a.at("out_features"), a.at("bias").get<bool>(),
               {.device = k.device});
  m.load_state_dict(k.params({"weight", "bias"}));
  Tensor x = k.input("x");
  Tensor out = m.forward(x);
  k.expect("out", out);
  k.backward(out);
  k.expect_grad("x", x);
  k.expect_grad("weight", m.weight);
  if (m.bias.defined()) k.expect_grad("bias", m.bias);
  EXPECT_TRUE(m.weight.grad().is_contiguous()) << "Linear's weight gradient should be contiguous";
}

void run_layer_norm(const Case& k) {
  const json& a = k.attrs();
  nn::LayerNorm m(a.at("normalized_shape").get<Shape>(), a.at("eps"),
                  a.at("elementwise_affine").get<bool>(), true, {.device = k.device});
  m.load_state_dict(k.params({"weight", "bias"}));
  Tensor x = k.input("x");
  Tensor out = m.forward(x);
  k.expect("out", out);
  k.backward(out);
  k.expect_grad("x", x);
  if (m.elementwise_affine) {
    k.expect_grad("weight", m.weight);
    k.expect_grad("bias", m.bias);
  }
}

void run_batch_norm(const Case& k) {
  const json& a = k.attrs();
  std::optional<double> momentum;
  if (!a.at("momentum").is_null()) momentum = a.at("momentum").get<double>();
  const bool train = a.at("train");
  nn::BatchNorm1d m(a.at("num_features"), a.at("eps"), momentum, a.at("affine").get<bool>(), true,
                    {.device = k.device});
  ferry::StateDict sd = k.params({"weight", "bias"});
  if (train) {
    // The running statistics start at their defaults: a non-strict load names them missing.
    nn::IncompatibleKeys r = m.load_state_dict(sd, /*strict=*/false);
    EXPECT_EQ(r.missing_keys,
              (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
    EXPECT_TRUE(r.unexpected_keys.empty());
  } else {
    sd.insert("running_mean", make_tensor(k.tensors().at("running_mean_in")));
    sd.insert("running_var", make_tensor(k.tensors().at("running_var_in")));
    sd.insert("num_batches_tracked", ferry::scalar_tensor(7, {.dtype = DType::i64}));
    m.load_state_dict(sd);
    m.eval();
  }
  const Tensor running_mean = m.running_mean;  // the buffers must keep their identity
  for (int step = 1; step <= (train ? 2 : 1); ++step) {
    const std::string s = std::to_string(step);
    m.zero_grad();
    Tensor x = k.input("x" + s);
    Tensor out = m.forward(x);
    k.expect("out" + s, out);
    k.backward(out, "R" + s);
    k.expect_grad("x", x, s);
    if (m.affine) {
      k.expect_grad("weight", m.weight, s);
      k.expect_grad("bias", m.bias, s);
    }
  }
  EXPECT_TRUE(m.running_mean.is_same(running_mean));
  EXPECT_TRUE(m.named_buffers()[0].second.is_same(running_mean));
  k.expect("running_mean", m.running_mean);
  k.expect("running_var", m.running_var);
  EXPECT_EQ(m.num_batches_tracked.dtype(), DType::i64);
  EXPECT_EQ(m.num_batches_tracked.item<std::int64_t>(),
            std::int64_t(values_of(k.tensors().at("num_batches_tracked"))[0]));
}

// max_norm, norm_type and scale_grad_by_freq as the case's attrs set them (F.embedding's and
// F.embedding_bag's shared options).
template <typename Options> void read_lookup_options(const json& a, Options& o) {
  if (a.contains("padding_idx")) o.padding_idx = a.at("padding_idx").get<std::int64_t>();
  if (a.contains("max_norm")) o.max_norm = a.at("max_norm").get<double>();
  o.norm_type = a.value("norm_type", 2.0);
  o.scale_grad_by_freq = a.value("scale_grad_by_freq", false);
}

void run_embedding(const Case& k) {
  const json& a = k.attrs();
  nn::functional::EmbeddingOptions o;
  read_lookup_options(a, o);
  nn::Embedding m(a.at("num_embeddings"), a.at("embedding_dim"), o, {.device = k.device});
  m.load_state_dict(k.params({"weight"}));
  Tensor out = m.forward(k.get("x"));
  k.expect("out", out);
  // max_norm renormalised the looked-up rows of the weight itself, in place.
  if (k.has("weight_after")) k.expect("weight_after", m.weight);
  k.backward(out);
  k.expect_grad("weight", m.weight);
}

void run_activation(const Case& k) {
  const std::string fn = k.attrs().at("fn");
  std::shared_ptr<nn::Module> m;
  if (fn == "gelu") m = std::make_shared<nn::GELU>(k.attrs().at("approximate").get<std::string>());
  if (fn == "silu") m = std::make_shared<nn::SiLU>();
  if (fn == "tanh") m = std::make_shared<nn::Tanh>();
  if (fn == "sigmoid") m = std::make_shared<nn::Sigmoid>();
  if (fn == "relu") m = std::make_shared<nn::ReLU>();
  if (fn == "hardshrink") m = std::make_shared<nn::Hardshrink>(k.attrs().at("lambd"));
  if (fn == "softshrink") m = std::make_shared<nn::Softshrink>(k.attrs().at("lambd"));
  if (fn == "tanhshrink") m = std::make_shared<nn::Tanhshrink>();
  if (fn == "softsign") m = std::make_shared<nn::Softsign>();
  if (fn == "threshold")
    m = std::make_shared<nn::Threshold>(k.attrs().at("threshold"), k.attrs().at("value"));
  ASSERT_TRUE(m) << "unknown activation " << fn;
  Tensor x = k.input("x");
  Tensor out = m->forward(x);
  k.expect("out", out);
  k.backward(out);
  k.expect_grad("x", x);
}

nn::Reduction reduction_of(const json& a) {
  const std::string r = a.at("reduction");
  return r == "none" ? nn::Reduction::none : r == "sum" ? nn::Reduction::sum : nn::Reduction::mean;
}

void run_cross_entropy(const Case& k) {
  const json& a = k.attrs();
  nn::functional::CrossEntropyOptions o{.ignore_index = a.at("ignore_index"),
                                        .reduction = reduction_of(a),
                                        .label_smoothing = a.at("label_smoothing")};
  if (k.has("weight")) o.weight = k.get("weight");
  nn::CrossEntropyLoss loss(o);
  Tensor x = k.input("x");
  Tensor out = loss.forward(x, k.get("target"));
  k.expect("out", out);
  k.backward(out);
  k.expect_grad("x", x);
}

void run_mse(const Case& k) {
  nn::MSELoss loss(reduction_of(k.attrs()));
  Tensor x = k.input("x"), t = k.input("target");
  Tensor out = loss.forward(x, t);
  k.expect("out", out);
  k.backward(out);
  k.expect_grad("x", x);
  k.expect_grad("target", t);
}

// A "loss" case: torch.nn.functional.<fn> and its gradients.
void run_loss(const Case& k) {
  namespace F = nn::functional;
  const json& a = k.attrs();
  const std::string fn = a.at("fn");
  Tensor x = k.input("x");
  Tensor x2 = k.has("x2") ? k.input("x2") : Tensor();
  Tensor x3 = k.has("x3") ? k.input("x3") : Tensor();
  Tensor var = k.has("var") ? k.input("var") : Tensor();
  Tensor t = k.has("target") ? k.get("target") : Tensor();
  Tensor w = k.has("weight") ? k.get("weight") : Tensor();
  Tensor pw = k.has("pos_weight") ? k.get("pos_weight") : Tensor();
  auto red = [&] { return reduction_of(a); };
  Tensor out;
  if (fn == "l1_loss") out = F::l1_loss(x, t, red());
  if (fn == "smooth_l1_loss") out = F::smooth_l1_loss(x, t, red(), a.at("beta"));
  if (fn == "huber_loss") out = F::huber_loss(x, t, red(), a.at("delta"));
  if (fn == "kl_div")
    out = F::kl_div(x, t, a.at("reduction").get<std::string>(), a.at("log_target"));
  if (fn == "binary_cross_entropy") out = F::binary_cross_entropy(x, t, w, red());
  if (fn == "binary_cross_entropy_with_logits")
    out = F::binary_cross_entropy_with_logits(x, t, w, pw, red());
  if (fn == "margin_ranking_loss") out = F::margin_ranking_loss(x, x2, t, a.at("margin"), red());
  if (fn == "cosine_embedding_loss")
    out = F::cosine_embedding_loss(x, x2, t, a.at("margin"), red());
  if (fn == "normalize") out = F::normalize(x, a.at("p"), a.at("dim"));
  if (fn == "cosine_similarity") out = F::cosine_similarity(x, x2, a.at("dim"));
  if (fn == "pairwise_distance")
    out = F::pairwise_distance(x, x2, a.at("p"), 1e-6, a.value("keepdim", false));
  if (fn == "nll_loss")
    out =
        F::nll_loss(x, t, {.weight = w, .ignore_index = a.at("ignore_index"), .reduction = red()});
  if (fn == "softmin") out = F::softmin(x, a.at("dim"));
  if (fn == "glu") out = F::glu(x, a.at("dim"));
  if (fn == "cdist")
    out = ferry::cdist(x, x2, to_double(a.at("p")),
                       a.value("compute_mode", std::string("use_mm_for_euclid_dist_if_necessary")));
  if (fn == "soft_margin_loss") out = nn::SoftMarginLoss(red()).forward(x, t);
  if (fn == "multilabel_soft_margin_loss")
    out = nn::MultiLabelSoftMarginLoss(w, red()).forward(x, t);
  if (fn == "hinge_embedding_loss")
    out = nn::HingeEmbeddingLoss(a.at("margin"), red()).forward(x, t);
  if (fn == "triplet_margin_loss")
    out = nn::TripletMarginLoss(a.at("margin"), a.at("p"), 1e-6, a.at("swap"), red())
              .forward(x, x2, x3);
  if (fn == "poisson_nll_loss")
    out = nn::PoissonNLLLoss(a.at("log_input"), a.at("full"), 1e-8, red()).forward(x, t);
  if (fn == "gaussian_nll_loss")
    out = nn::GaussianNLLLoss(a.at("full"), a.at("eps"), red()).forward(x, t, var);
  if (fn == "multi_margin_loss")
    out = nn::MultiMarginLoss(a.at("p"), a.at("margin"), w, red()).forward(x, t);
  ASSERT_TRUE(out.defined()) << "unknown function " << fn;
  k.expect("out", out);
  k.backward(out);
  k.expect_grad("x", x);
  if (x2.defined()) k.expect_grad("x2", x2);
  if (x3.defined()) k.expect_grad("x3", x3);
  if (var.defined()) k.expect_grad("var", var);
}

void run_embedding_bag(const Case& k) {
  const json& a = k.attrs();
  nn::functional::EmbeddingBagOptions o{
      .mode = a.at("mode"), .include_last_offset = a.value("include_last_offset", false)};
  read_lookup_options(a, o);
  nn::EmbeddingBag m(a.at("num_embeddings"), a.at("embedding_dim"), o, {.device = k.device});
  m.load_state_dict(k.params({"weight"}));
  Tensor psw = k.has("per_sample_weights") ? k.input("per_sample_weights") : Tensor();
  Tensor out = m.forward(k.get("x"), k.has("offsets") ? k.get("offsets") : Tensor(), psw);
  k.expect("out", out);
  if (k.has("weight_after")) k.expect("weight_after", m.weight);
  k.backward(out);
  k.expect_grad("weight", m.weight);
  if (psw.defined()) k.expect_grad("per_sample_weights", psw);
}

void run_bilinear(const Case& k) {
  const json& a = k.attrs();
  nn::Bilinear m(a.at("in1_features"), a.at("in2_features"), a.at("out_features"),
                 a.at("bias").get<bool>(), {.device = k.device});
  m.load_state_dict(k.params({"weight", "bias"}));
  Tensor x1 = k.input("x"), x2 = k.input("x2");
  Tensor out = m.forward(x1, x2);
  k.expect("out", out);
  k.backward(out);
  k.expect_grad("x", x1);
  k.expect_grad("x2", x2);
  k.expect_grad("weight", m.weight);
  if (m.bias.defined()) k.expect_grad("bias", m.bias);
}

void run_case(std::size_t index, const Device& device) {
  const json& c = doc()["cases"][index];
  Tol tol{c.at("tol").at("rtol"), c.at("tol").at("atol")};
  if (!device.is_cpu()) tol = {std::max(tol.rtol, 1e-4), std::max(tol.atol, 1e-5)};
  const Case k{c, device, tol};
  const std::string kind = c.at("kind");
  try {
    if (kind == "linear") return run_linear(k);
    if (kind == "layer_norm") return run_layer_norm(k);
    if (kind == "batch_norm") return run_batch_norm(k);
    if (kind == "embedding") return run_embedding(k);
    if (kind == "activation") return run_activation(k);
    if (kind == "cross_entropy") return run_cross_entropy(k);
    if (kind == "mse_loss") return run_mse(k);
    if (kind == "loss") return run_loss(k);
    if (kind == "bilinear") return run_bilinear(k);
    if (kind == "embedding_bag") return run_embedding_bag(k);
    FAIL() << "unknown kind " << kind;
  } catch (const ferry::UnsupportedError& e) {
    if (device.is_cpu()) FAIL() << "the CPU must run every case: " << e.what();
    GTEST_SKIP() << device.str() << " lacks an op: " << e.what();
  } catch (const ferry::Error& e) {
    FAIL() << e.what();
  }
}

// ------------------------------------------------------------------ tests

TEST(NnReferenceData, Loads) {
  ASSERT_TRUE(doc().is_object()) << "cannot read " << reference_path()
                                 << " (regenerate with /usr/bin/python3 tools/gen_nn_reference.py)";
  EXPECT_GT(case_refs().size(), 40u) << "the reference file looks truncated";
  std::set<std::string> kinds;
  for (const json& c : doc()["cases"]) kinds.insert(c.at("kind").get<std::string>());
  EXPECT_EQ(kinds, (std::set<std::string>{"activation", "batch_norm", "bilinear", "cross_entropy",
                                          "embedding", "embedding_bag", "layer_norm", "linear",
                                          "loss", "mse_loss"}));
}

class NnReference : public ::testing::TestWithParam<CaseRef> {};

TEST_P(NnReference, Cpu) { run_case(GetParam().index, Device::cpu()); }

TEST_P(NnReference, Vulkan) {
  if (!ferry::is_available("vulkan:0")) GTEST_SKIP() << "no Vulkan device";
  run_case(GetParam().index, Device("vulkan:0"));
}

TEST_P(NnReference, Cuda) {
  if (!ferry::is_available("cuda:0"))
    GTEST_SKIP() << "no CUDA device: " << ferry::describe_devices();
  run_case(GetParam().index, Device("cuda:0"));
}

INSTANTIATE_TEST_SUITE_P(Cases, NnReference, ::testing::ValuesIn(case_refs()),
                         [](const ::testing::TestParamInfo<CaseRef>& info) {
                           std::string out;
                           for (char c : info.param.name)
                             out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return out;
                         });

}  // namespace
