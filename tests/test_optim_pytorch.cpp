// Replays tests/data/pytorch_optim_reference.json (written by
// tools/gen_optim_reference.py with PyTorch 1.13; see its docstring for the
// format and how to regenerate it): the same initial parameters, the same
// gradients (set with Tensor::set_grad, none where PyTorch had none), the same
// groups and options; after every step the parameters, every state tensor and
// every step count must match PyTorch's. Each case runs on the CPU and on
// vulkan:0 (skipped, with the reason, where there is none), with the default
// path (fused where the device has it) and the element-wise path.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "optim_test_util.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding pytorch_optim_reference.json"
#endif

namespace {

using ferry::Device;
using ferry::DType;
using ferry::Tensor;
using nlohmann::json;
namespace optim = ferry::optim;

// PyTorch's CPU kernels fuse some multiply-adds (add_ with alpha is an FMA in
// its vectorised loops) where ferry rounds twice, so a few ulps apart.
constexpr double kRtol = 2e-6;
constexpr double kAtol = 1e-7;

const json& reference() {
  static const json doc = [] {
    const std::string path = std::string(FERRY_TEST_DATA_DIR) + "/pytorch_optim_reference.json";
    std::ifstream in(path);
    if (!in) return json();
    return json::parse(in, nullptr, /*allow_exceptions=*/false);
  }();
  return doc;
}

TEST(PyTorchOptimReference, Loads) {
  const json& doc = reference();
  ASSERT_TRUE(doc.is_object() && doc.contains("cases"))
      << "cannot read tests/data/pytorch_optim_reference.json; regenerate it with "
         "/usr/bin/python3 tools/gen_optim_reference.py";
  EXPECT_GE(doc["cases"].size(), 10u);
}

std::vector<float> floats(const json& a) { return a.get<std::vector<float>>(); }

optim::SGDOptions sgd_options(const json& o, std::optional<bool> fused) {
  optim::SGDOptions s;
  s.lr = o.value("lr", s.lr);
  s.momentum = o.value("momentum", s.momentum);
  s.dampening = o.value("dampening", s.dampening);
  s.weight_decay = o.value("weight_decay", s.weight_decay);
  s.nesterov = o.value("nesterov", s.nesterov);
  s.maximize = o.value("maximize", s.maximize);
  s.fused = fused;
  return s;
}

template <typename Options> Options adam_options(const json& o, std::optional<bool> fused) {
  Options a;
  a.lr = o.value("lr", a.lr);
  a.beta1 = o.value("beta1", a.beta1);
  a.beta2 = o.value("beta2", a.beta2);
  a.eps = o.value("eps", a.eps);
  a.weight_decay = o.value("weight_decay", a.weight_decay);
  a.amsgrad = o.value("amsgrad", a.amsgrad);
  a.maximize = o.value("maximize", a.maximize);
  a.fused = fused;
  return a;
}

template <typename Opt, typename MakeOptions>
std::unique_ptr<optim::Optimizer> build(const json& groups, const std::vector<Tensor>& params,
                                        MakeOptions make_options) {
  std::vector<typename Opt::Group> gs;
  for (const json& g : groups) {
    typename Opt::Group group;
    for (const json& i : g["params"]) group.params.push_back(params[i.get<std::size_t>()]);
    group.options = make_options(g["options"]);
    gs.push_back(std::move(group));
  }
  return std::make_unique<Opt>(gs);
}

// The element-wise optimizers' options, by their names in the file (the rest default).
template <typename O> O named_options(const json& j) {
  O o;
  o.each([&](const char* key, auto& v) {
    if (j.contains(key)) v = j[key].get<std::decay_t<decltype(v)>>();
  });
  return o;
}

using Param = std::tuple<std::string /*case*/, std::string /*device*/, bool /*element-wise*/>;
class PyTorchOptimReference : public ::testing::TestWithParam<Param> {};

TEST_P(PyTorchOptimReference, Matches) {
  const auto& [name, device_name, elementwise] = GetParam();
  FERRY_SKIP_UNLESS_DEVICE(device_name);
  const json* found = nullptr;
  if (reference().contains("cases"))
    for (const json& c : reference()["cases"])
      if (c["name"] == name) found = &c;
  ASSERT_NE(found, nullptr) << "case " << name << " is not in pytorch_optim_reference.json";
  const json& c = *found;
  const Device dev(device_name);
  const std::optional<bool> fused = elementwise ? std::optional<bool>(false) : std::nullopt;

  std::vector<Tensor> params;
  std::vector<ferry::Shape> shapes;
  for (const json& p : c["params"]) {
    shapes.push_back(p["shape"].get<ferry::Shape>());
    params.push_back(
        ferry_optim_test::make_param(floats(p["data"]), shapes.back(), DType::f32, dev));
  }
  std::unique_ptr<optim::Optimizer> opt;
  const std::string kind = c["optimizer"];
  if (kind == "sgd")
    opt = build<optim::SGD>(c["groups"], params,
                            [&](const json& o) { return sgd_options(o, fused); });
  else if (kind == "adam")
    opt = build<optim::Adam>(c["groups"], params, [&](const json& o) {
      return adam_options<optim::AdamOptions>(o, fused);
    });
  else if (kind == "adamw")
    opt = build<optim::AdamW>(c["groups"], params, [&](const json& o) {
      return adam_options<optim::AdamWOptions>(o, fused);
    });
  else if (kind == "rmsprop")
    opt = build<optim::RMSprop>(c["groups"], params, named_options<optim::RMSpropOptions>);
  else if (kind == "adagrad")
    opt = build<optim::Adagrad>(c["groups"], params, named_options<optim::AdagradOptions>);
  else if (kind == "adamax")
    opt = build<optim::Adamax>(c["groups"], params, named_options<optim::AdamaxOptions>);
  else if (kind == "nadam")
    opt = build<optim::NAdam>(c["groups"], params, named_options<optim::NAdamOptions>);
  else
    opt = build<optim::RAdam>(c["groups"], params, named_options<optim::RAdamOptions>);
  ASSERT_EQ(opt->kind(), kind);

  int s = 0;
  for (const json& step : c["steps"]) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      const json& g = step["grads"][i];
      params[i].set_grad(g.is_null()
                             ? Tensor()
                             : ferry_optim_test::make_grad(floats(g), shapes[i], DType::f32, dev));
    }
    opt->step();
    const std::string at = name + " step " + std::to_string(s++);
    for (std::size_t i = 0; i < params.size(); ++i) {
      ferry_test::expect_close(ferry_optim_test::values(params[i]),
                               {step["params"][i].begin(), step["params"][i].end()}, kRtol, kAtol,
                               at + " param " + std::to_string(i));
      const std::string key = std::to_string(i);
      const json& st = step["state"].contains(key) ? step["state"][key] : json::object();
      if (st.contains("step")) EXPECT_EQ(opt->step_count(i), st["step"].get<std::int64_t>()) << at;
      for (const char* n : {"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer",
                            "square_avg", "grad_avg", "sum", "exp_inf"}) {
        std::vector<double> want;
        if (st.contains(n)) want = st[n].get<std::vector<double>>();
        ferry_test::expect_close(ferry_optim_test::state_values(*opt, i, n), want, kRtol, kAtol,
                                 at + " param " + key + " " + n);
      }
    }
    if (HasFatalFailure()) return;
  }
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  if (reference().contains("cases"))
    for (const json& c : reference()["cases"]) names.push_back(c["name"]);
  return names;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [name, device, elementwise] = info.param;
  return name + "_" + ferry_test::backend_of(device) + (elementwise ? "_elementwise" : "_default");
}

INSTANTIATE_TEST_SUITE_P(Cases, PyTorchOptimReference,
                         ::testing::Combine(::testing::ValuesIn(case_names()),
                                            ::testing::ValuesIn(ferry_test::all_device_names()),
                                            ::testing::Bool()),
                         param_name);

}  // namespace
