// tests/torch_reference.hpp — reading the PyTorch reference files the tools/gen_*_reference.py
// scripts write (tensors as {"shape", "dtype", "data"}) and comparing ferry's results with
// them. Needs FERRY_TEST_DATA_DIR (tests/data).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"

namespace ferry_test {

// An f32, i64 or i32 tensor on the CPU ("inf", "-inf" and "nan" written as strings).
inline ferry::Tensor from_json(const nlohmann::json& j) {
  const ferry::Shape shape = j["shape"].get<ferry::Shape>();
  const std::string dtype = j.value("dtype", std::string("f32"));
  if (dtype == "i64" || dtype == "i32") {
    const ferry::Tensor t =
        ferry::tensor(j["data"].get<std::vector<std::int64_t>>()).reshape(shape);
    return dtype == "i32" ? t.to(ferry::DType::i32) : t;
  }
  std::vector<float> v;
  for (const nlohmann::json& x : j["data"]) {
    if (!x.is_string()) {
      v.push_back(x.get<float>());
      continue;
    }
    // tools/reference_common.py's fmt_float writes the non-finite values as strings.
    const std::string s = x.get<std::string>();
    v.push_back(s == "nan" ? std::numeric_limits<float>::quiet_NaN()
                           : (s[0] == '-' ? -1.0f : 1.0f) * std::numeric_limits<float>::infinity());
  }
  return ferry::tensor(v).reshape(shape);
}

// An int or a list of ints (PyTorch's size arguments) named `name` in `attrs`.
inline std::vector<std::int64_t> sizes(const nlohmann::json& attrs, const char* name,
                                       std::int64_t fallback) {
  if (!attrs.contains(name) || attrs[name].is_null()) return {fallback};
  const nlohmann::json& v = attrs[name];
  if (v.is_number_integer()) return {v.get<std::int64_t>()};
  return v.get<std::vector<std::int64_t>>();
}

// got within atol + rtol |want| of want, element by element, or a failure naming `what`.
inline void expect_close(const ferry::Tensor& got, const ferry::Tensor& want, double rtol,
                         double atol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << ": undefined (no gradient?)";
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const auto g = got.to(ferry::DType::f32).to_vector<float>(),
             w = want.to(ferry::DType::f32).to_vector<float>();
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) || std::isinf(w[i])) {  // NaN where NaN, the same infinity
      ASSERT_TRUE(std::isnan(w[i]) ? std::isnan(g[i]) : g[i] == w[i])
          << what << " element " << i << ": got " << g[i] << ", want " << w[i];
      continue;
    }
    ASSERT_NEAR(g[i], w[i], atol + rtol * std::fabs(w[i])) << what << " element " << i;
  }
}

// Every parameter's gradient of `module` against PyTorch's, by PyTorch's parameter names
// (`want`: {name: tensor}); each name must be PyTorch's, and PyTorch must have no more.
inline void expect_param_grads(const ferry::nn::Module& module, const nlohmann::json& want,
                               double rtol, double atol) {
  std::size_t checked = 0;
  for (const auto& [name, p] : module.named_parameters()) {
    ASSERT_TRUE(want.contains(name)) << name << " is not PyTorch's name";
    expect_close(p.grad(), from_json(want[name]), rtol, atol, "grad of " + name);
    ++checked;
  }
  EXPECT_EQ(checked, want.size()) << "PyTorch has parameters ferry lacks";
}

// What an op of a reference file gives: its output and, for the max pools, the indices.
struct ReferenceResult {
  ferry::Tensor output, indices;
};
// Runs the op of one case: its name, PyTorch's keyword arguments, the differentiable inputs
// and the buffers (running statistics), on the device under test.
using ReferenceCall = std::function<ReferenceResult(
    const std::string& op, const nlohmann::json& attrs, const std::vector<ferry::Tensor>& inputs,
    const std::vector<ferry::Tensor>& buffers)>;

// Every case of tests/data/`file` (the format of tools/gen_conv_reference.py and
// tools/gen_cnn_reference.py) on `dev`: the output, the indices and the buffers after the call
// where the case has them, and the inputs' gradients of sum(output * upstream).
inline void run_reference_file(const std::string& file, const ferry::Device& dev,
                               std::size_t min_cases, const ReferenceCall& call) {
  std::ifstream f(std::string(FERRY_TEST_DATA_DIR) + "/" + file);
  ASSERT_TRUE(f) << "missing tests/data/" << file << " (its tools/gen_*_reference.py)";
  const nlohmann::json doc = nlohmann::json::parse(f);
  ASSERT_GE(doc["cases"].size(), min_cases);
  for (const nlohmann::json& c : doc["cases"]) {
    const std::string name = c["name"], op = c["op"];
    SCOPED_TRACE(name + " on " + dev.str());
    std::vector<ferry::Tensor> in, buf;
    // The floating inputs require grad; index inputs (i64) do not.
    for (const nlohmann::json& t : c["inputs"]) {
      ferry::Tensor x = from_json(t).to(dev);
      in.push_back(ferry::is_floating(x.dtype()) ? x.requires_grad_() : x);
    }
    for (const nlohmann::json& t : c.value("buffers", nlohmann::json::array()))
      buf.push_back(from_json(t).to(dev));
    const ReferenceResult r = call(op, c["attrs"], in, buf);
    ASSERT_EQ(r.output.device(), dev);
    const double rtol = c["tol"]["rtol"], atol = c["tol"]["atol"];
    expect_close(r.output, from_json(c["output"]), rtol, atol, "output");
    if (c.contains("indices")) {
      ASSERT_TRUE(r.indices.defined());
      EXPECT_EQ(r.indices.dtype(), ferry::DType::i64);
      EXPECT_EQ(r.indices.to_vector<std::int64_t>(),
                from_json(c["indices"]).to_vector<std::int64_t>());
    }
    for (std::size_t i = 0; i < buf.size(); ++i)
      expect_close(buf[i], from_json(c["buffers_after"][i]), rtol, atol,
                   "running statistic " + std::to_string(i));
    // An empty batch: nothing flows back; no gradients in the case: the op has none.
    if (r.output.numel() == 0 || !c.contains("grads")) continue;
    r.output.backward(from_json(c["upstream"]).to(dev));
    for (std::size_t i = 0; i < in.size(); ++i)
      if (in[i].requires_grad())
        expect_close(in[i].grad(), from_json(c["grads"][i]), rtol, atol,
                     "grad of input " + std::to_string(i));
  }
}

// run_reference_file for ops of one output and no buffers: `call` (op name, attrs, inputs)
// gives the output.
using OutputCall = std::function<ferry::Tensor(const std::string& op, const nlohmann::json& attrs,
                                               const std::vector<ferry::Tensor>& inputs)>;
inline void run_output_reference_file(const std::string& file, const ferry::Device& dev,
                                      std::size_t min_cases, const OutputCall& call) {
  run_reference_file(
      file, dev, min_cases,
      [&](const std::string& op, const nlohmann::json& attrs, const std::vector<ferry::Tensor>& in,
          const std::vector<ferry::Tensor>&) -> ReferenceResult { return {call(op, attrs, in)}; });
}

}  // namespace ferry_test
