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

Tensor cross_entropy_by_ops(const Tensor& logits, const Tensor& target) {
  return -ferry::mean(ferry::gather(ferry::log_softmax(logits, 1), 1, target.unsqueeze(1)));
}

// The same functions as in tools/gen_grad_reference.py.
const std::map<std::string, std::function<Tensor(const In&)>>& cases() {
  static const std::map<std::string, std::function<Tensor(const In&)>> m = {
      {"mlp_gelu_cross_entropy",
       [](const In& in) {
         Tensor h = ferry::gelu(ferry::matmul(in[0], in[1].t()) + in[2]);
         return cross_entropy_by_ops(ferry::matmul(h, in[3].t()) + in[4], in[5]);
       }},
      {"attention",
       [](const In& in) {
         Tensor s =
             ferry::softmax(ferry::matmul(in[0], in[1].transpose(-1, -2)) / std::sqrt(8.0), -1);
         return ferry::matmul(s, in[2]);
       }},
      {"layer_norm_residual",
       [](const In& in) { return in[0] + ferry::layer_norm(in[0] * 2.0, {6}, in[1], in[2]); }},
      {"embedding_pool",
       [](const In& in) {
         return ferry::tanh(ferry::matmul(ferry::sum(ferry::embedding(in[0], in[1]), {1}), in[2]));
       }},
      {"standardize",
       [](const In& in) {
         Tensor m = ferry::mean(in[0], {1}, true);
         return (in[0] - m) / ferry::sqrt(ferry::var(in[0], {1}, 1, true) + 1e-5);
       }},
      {"pow_where_max",
       [](const In& in) {
         const Tensor &a = in[0], &b = in[1];
         return ferry::where(ferry::gt(a, 0), ferry::pow(ferry::abs(a) + 1.0, b),
                             ferry::maximum(a, b)) +
                ferry::max(a * b, {1}, true);
       }},
      {"gather_cat_stack",
       [](const In& in) {
         Tensor g = ferry::gather(in[0], 1, in[1]);
         return ferry::stack({ferry::cat({g, in[0].slice(1, 1, 3)}, 1),
                              ferry::cat({in[0].slice(1, 0, 4, 2), g * 2.0}, 1)},
                             0);
       }},
      {"matmul_broadcast",
       [](const In& in) { return ferry::matmul(ferry::matmul(in[0], in[1]), in[2]); }},
      {"activations",
       [](const In& in) {
         const Tensor& x = in[0];
         return ferry::silu(x) * ferry::sigmoid(x) + ferry::relu(x - 0.5) + ferry::gelu(x, "tanh");
       }},
      {"transcendental",
       [](const In& in) {
         const Tensor& x = in[0];
         return ferry::log(ferry::exp(x) + 1.0) * ferry::rsqrt(x * x + 1.0) +
                ferry::sin(x) * ferry::cos(x) + ferry::sqrt(x * x + 2.0) - ferry::min(x);
       }},
      {"kinks_and_zeros",
       [](const In& in) {
         namespace F = ferry::nn::functional;
         const ferry::Device dev = in[0].device();
         const auto on = [&](std::vector<float> v) { return ferry::tensor(v).to(dev); };
         const auto none = ferry::nn::Reduction::none;
         return ferry::cat(
             {ferry::std(in[0], {1}), F::cosine_similarity(in[1], in[0], 1),
              ferry::xlogy(in[2], in[3]),
              F::binary_cross_entropy_with_logits(in[4], on({0.5f, 1, 0, 0.3f}), {}, {}, none),
              F::binary_cross_entropy(in[5], on({1, 0.6f, 0.5f, 0.2f}), {}, none)},
             0);
       }},
      {"logits_through_embedding",
       [](const In& in) {
         const Tensor& e = in[0];
         const std::int64_t d = e.size(1);
         Tensor h = ferry::layer_norm(ferry::embedding(e, in[1]), {d}, in[2], in[3]);
         return cross_entropy_by_ops(ferry::matmul(h.reshape({-1, d}), e.t()), in[1].reshape({-1}));
       }},
  };
  return m;
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
  ASSERT_EQ(doc["cases"].size(), cases().size()) << "the file and the test list different cases";
  for (const json& c : doc["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name + " on " + dev.str());
    auto fn = cases().find(name);
    ASSERT_NE(fn, cases().end()) << "no ferry definition for case " << name;
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
