// Reductions, softmax and layer_norm on each accelerator against the CPU, at the row
// lengths and layouts that pick each way a row's threads meet (Note [Subgroup row
// reductions] in shaders/subgroup.glsl): rows short enough for one subgroup, rows that span
// subgroups (a butterfly, then a shared-memory tree), rows cut into pieces, rows strided
// while their neighbours are contiguous (ROW_FAST), 64-bit integers whose high words matter,
// and argmax ties. On Vulkan it also checks which modules ran: the subgroup ones exactly
// where the device reports subgroup_reductions (FERRY_VULKAN_SUBGROUPS=0 turns them off,
// which tests/conformance runs as a mode of its own).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "test_devices.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry_test::as_double;
using ferry_test::expect_close;

// Row lengths: with a GPU's threads per row (a lane per element up to 256), 1 lane, lanes in
// one subgroup (8: lavapipe's, 32: NVIDIA's), several subgroups, a whole workgroup; with
// lavapipe's (a lane per 1024 elements, Note [Row kernel geometry]), 1 lane up to 1024, 4
// lanes (3000) and 16 (9000); and rows long enough to be cut into pieces.
const std::vector<std::int64_t> kLengths{1, 3, 8, 13, 32, 100, 256, 1000, 3000, 9000, 70000};

std::vector<std::string> accelerators() {
  std::vector<std::string> d;
  for (const std::string& n : ferry_test::available_device_names())
    if (n != "cpu") d.push_back(n);
  return d;
}

bool supported(const std::string& dev, ferry::OpId op, DType dt) {
  return ferry::device_impl(ferry::Device(dev)).supports(op, dt);
}

TEST(RowReductions, FloatRowsOfEveryLengthMatchTheCpu) {
  for (const std::string& dev : accelerators()) {
    for (const DType dt : {DType::f32, DType::f16, DType::f64}) {
      if (!supported(dev, ferry::OpId::sum, dt)) continue;
      const double tol = dt == DType::f16 ? 2e-3 : 1e-5;
      for (const std::int64_t n : kLengths) {
        const std::int64_t rows = n >= 1000 ? 3 : 37;
        ferry::manual_seed(std::uint64_t(n));
        const Tensor x = ferry::randn({rows, n}).to(dt);
        const Tensor xd = x.to(ferry::Device(dev));
        const std::string tag = fmt::format("{} {} [{}, {}]", dev, ferry::dtype_name(dt), rows, n);
        expect_close(as_double(ferry::sum(xd, {1})), as_double(ferry::sum(x, {1})), tol, tol,
                     "sum " + tag);
        expect_close(as_double(ferry::max(xd, {1})), as_double(ferry::max(x, {1})), 0, 0,
                     "max " + tag);
        expect_close(as_double(ferry::min(xd, {1})), as_double(ferry::min(x, {1})), 0, 0,
                     "min " + tag);
        EXPECT_EQ(ferry::argmax(xd, 1).to_vector<std::int64_t>(),
                  ferry::argmax(x, 1).to_vector<std::int64_t>())
            << "argmax " << tag;
        expect_close(as_double(ferry::softmax(xd, 1)), as_double(ferry::softmax(x, 1)), tol,
                     1e-7, "softmax " + tag);
        expect_close(as_double(ferry::log_softmax(xd, 1)), as_double(ferry::log_softmax(x, 1)),
                     tol, tol, "log_softmax " + tag);
        // A mean far from zero: Welford's triples merged across lanes keep the variance.
        const Tensor shifted = ferry::add(x, ferry::Scalar(100.0));
        expect_close(as_double(ferry::layer_norm(shifted.to(ferry::Device(dev)), {n})),
                     as_double(ferry::layer_norm(shifted, {n})), dt == DType::f16 ? 0.3 : 1e-3,
                     dt == DType::f16 ? 0.3 : 1e-3, "layer_norm " + tag);
      }
    }
  }
}

TEST(RowReductions, StridedRowsBesideContiguousNeighbours) {
  // Reducing dim 0 of a row-major matrix: each row is strided, the outputs are contiguous.
  for (const std::string& dev : accelerators()) {
    for (const std::int64_t cols : {8, 24, 300}) {
      for (const std::int64_t n : {3, 64, 1000}) {
        ferry::manual_seed(std::uint64_t(cols * n));
        const Tensor x = ferry::randn({n, cols});
        const Tensor xd = x.to(ferry::Device(dev));
        const std::string tag = fmt::format("{} [{}, {}] over dim 0", dev, n, cols);
        expect_close(as_double(ferry::sum(xd, {0})), as_double(ferry::sum(x, {0})), 1e-5, 1e-5,
                     "sum " + tag);
        EXPECT_EQ(ferry::argmax(xd, 0).to_vector<std::int64_t>(),
                  ferry::argmax(x, 0).to_vector<std::int64_t>())
            << "argmax " << tag;
        expect_close(as_double(ferry::softmax(xd, 0)), as_double(ferry::softmax(x, 0)), 1e-5,
                     1e-7, "softmax " + tag);
      }
    }
  }
}

TEST(RowReductions, SixtyFourBitIntegersAndTies) {
  for (const std::string& dev : accelerators()) {
    if (!supported(dev, ferry::OpId::sum, DType::i64)) continue;
    for (const std::int64_t n : kLengths) {
      // Values past 2^32, some negative: a lost high word changes every result.
      std::vector<std::int64_t> v(std::size_t(5 * n));
      for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = (std::int64_t(i * 2654435761u % 1000003) - 500000) * (std::int64_t(1) << 33);
      const Tensor x = ferry::tensor(v, {5, n});
      const Tensor xd = x.to(ferry::Device(dev));
      const std::string tag = fmt::format("{} i64 [5, {}]", dev, n);
      for (const auto& [name, fn] :
           std::vector<std::pair<std::string, Tensor (*)(const Tensor&)>>{
               {"sum", [](const Tensor& t) { return ferry::sum(t, {1}); }},
               {"max", [](const Tensor& t) { return ferry::max(t, {1}); }},
               {"min", [](const Tensor& t) { return ferry::min(t, {1}); }},
               {"argmax", [](const Tensor& t) { return ferry::argmax(t, 1); }}})
        EXPECT_EQ(fn(xd).to_vector<std::int64_t>(), fn(x).to_vector<std::int64_t>())
            << name << " " << tag;
      // Ties: the first maximum wins, wherever the lanes that hold it meet.
      std::vector<float> tied(std::size_t(3 * n), 1.0f);
      for (std::int64_t r = 0; r < 3; ++r)
        for (std::int64_t k = n / 3 + r; k < n; k += 5) tied[std::size_t(r * n + k)] = 7.0f;
      const Tensor t = ferry::tensor(tied, {3, n});
      EXPECT_EQ(ferry::argmax(t.to(ferry::Device(dev)), 1).to_vector<std::int64_t>(),
                ferry::argmax(t, 1).to_vector<std::int64_t>())
          << "argmax ties " << tag;
    }
  }
}

// layer_norm's backward: dx over the rows as the row kernels do; the weight's and bias's
// gradients down the columns, in chunks of rows whose sums a second pass combines where the
// columns alone are few (tall, narrow inputs), and in one pass where they are many.
TEST(RowReductions, LayerNormBackwardMatchesTheCpu) {
  for (const std::string& dev : accelerators()) {
    for (const DType dt : {DType::f32, DType::f64}) {
      if (!supported(dev, ferry::OpId::layer_norm_backward, dt)) continue;
      for (const auto& [rows, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{
               {3000, 40}, {1000, 16}, {600, 300}, {37, 1000}, {1, 5}, {4, 0}}) {
        ferry::manual_seed(std::uint64_t(rows * n));
        const Tensor x = ferry::add(ferry::randn({rows, n}), ferry::Scalar(3.0)).to(dt);
        const Tensor w = ferry::randn({n}).to(dt), b = ferry::randn({n}).to(dt);
        const Tensor g = ferry::randn({rows, n}).to(dt);
        auto grads = [&](const ferry::Device& d) {
          // Leaves of their own: on the CPU, to() would hand back x itself.
          const Tensor xd = x.detach().to(d).requires_grad_(),
                       wd = w.detach().to(d).requires_grad_(),
                       bd = b.detach().to(d).requires_grad_();
          ferry::sum(ferry::mul(ferry::layer_norm(xd, {n}, wd, bd), g.to(d))).backward();
          return std::vector<Tensor>{xd.grad(), wd.grad(), bd.grad()};
        };
        const std::vector<Tensor> want = grads(ferry::Device::cpu());
        const std::vector<Tensor> got = grads(ferry::Device(dev));
        const std::string tag = fmt::format("{} {} [{}, {}]", dev, ferry::dtype_name(dt), rows, n);
        const double tol = dt == DType::f64 ? 1e-10 : 1e-4;
        const char* names[] = {"dx ", "dweight ", "dbias "};
        for (std::size_t k = 0; k < 3; ++k)
          expect_close(as_double(got[k]), as_double(want[k]), tol, tol, names[k] + tag);
      }
    }
  }
}

TEST(RowReductions, VulkanRunsTheSubgroupModulesWhereItSaysSo) {
  for (const std::string& dev : accelerators()) {
    if (ferry::Device(dev).type() != "vulkan") continue;
    const Tensor x = ferry::randn({4, 300}).to(ferry::Device(dev));
    (void)ferry::sum(x, {1}).to(ferry::Device::cpu());
    (void)ferry::softmax(x, 1).to(ferry::Device::cpu());
    const Tensor xg = x.detach().requires_grad_();
    ferry::sum(ferry::layer_norm(xg, {300})).backward();
    (void)xg.grad().to(ferry::Device::cpu());
    const auto props = ferry::device_impl(ferry::Device(dev)).info().properties;
    const std::string used = props.at("shaders_used");
    const bool on = props.at("subgroup_reductions") == "yes";
    for (const char* shader : {"reduce_subgroup", "softmax_subgroup", "layer_norm_subgroup",
                               "layer_norm_backward_subgroup"})
      EXPECT_EQ(used.find(shader) != std::string::npos, on) << dev << ": " << used;
  }
}

}  // namespace
