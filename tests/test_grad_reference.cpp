// Gradients of composite computations against PyTorch's:
// tests/data/pytorch_grad_reference.json, written by tools/gen_grad_reference.py
// (its header says how to regenerate it and what each case computes). Each case
// is rebuilt here with ferry's ops, run on the CPU and on the first Vulkan
// device when there is one, and its output and every input's gradient of
// sum(output * upstream) are held to PyTorch's within the case's tolerance.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "ferry/ferry.hpp"
#include "grad_reference_cases.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding pytorch_grad_reference.json"
#endif

namespace {

using ferry::Tensor;
using nlohmann::json;
using In = std::vector<Tensor>;

Tensor from_json(const json& j) {
  // (tensor() reads an empty shape as [n], so 0-d tensors are reshaped after.)
  const ferry::Shape shape = j["shape"].get<ferry::Shape>();
  const std::string dt = j["dtype"];
  if (dt == "i64") return ferry::tensor(j["data"].get<std::vector<std::int64_t>>()).reshape(shape);
  EXPECT_EQ(dt, "f32");
  std::vector<float> v;
  for (const json& x : j["data"]) v.push_back(x.get<float>());
  return ferry::tensor(v).reshape(shape);
}

void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol,
                  const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << ": no gradient";
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  auto g = got.to_vector<float>(), w = want.to_vector<float>();
  for (std::size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], w[i], atol + rtol * std::fabs(w[i])) << what << " element " << i;
}

void run(const ferry::Device& dev) {
  std::ifstream f(std::string(FERRY_TEST_DATA_DIR) + "/pytorch_grad_reference.json");
  ASSERT_TRUE(f) << "missing tests/data/pytorch_grad_reference.json (tools/gen_grad_reference.py)";
  const json doc = json::parse(f);
  ASSERT_EQ(doc["cases"].size(), ferry_test::grad_reference_cases().size())
      << "the file and the test list different cases";
  for (const json& c : doc["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name + " on " + dev.str());
    auto fn = ferry_test::grad_reference_cases().find(name);
    ASSERT_NE(fn, ferry_test::grad_reference_cases().end())
        << "no ferry definition for case " << name;
    In in;
    for (const json& t : c["inputs"]) {
      Tensor x = from_json(t).to(dev);
      in.push_back(ferry::is_floating(x.dtype()) ? x.requires_grad_() : x);
    }
    Tensor out = fn->second(in);
    const double rtol = c["tol"]["rtol"], atol = c["tol"]["atol"];
    expect_close(out, from_json(c["output"]), rtol, atol, "output");
    out.backward(from_json(c["upstream"]).to(dev));
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (c["grads"][i].is_null()) continue;
      ASSERT_EQ(in[i].grad().device(), dev);
      expect_close(in[i].grad(), from_json(c["grads"][i]), rtol, atol,
                   "grad of input " + std::to_string(i));
    }
  }
}

TEST(PyTorchGradReference, Cpu) { run(ferry::Device::cpu()); }

TEST(PyTorchGradReference, Vulkan) {
  if (!ferry::is_available("vulkan"))
    GTEST_SKIP() << "no Vulkan device: " << ferry::describe_devices();
  run(ferry::Device("vulkan:0"));
}

TEST(PyTorchGradReference, Cuda) {
  if (!ferry::is_available("cuda:0"))
    GTEST_SKIP() << "no CUDA device: " << ferry::describe_devices();
  run(ferry::Device("cuda:0"));
}

}  // namespace
