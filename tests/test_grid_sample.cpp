// grid_sample and affine_grid against PyTorch's (tests/data/pytorch_grid_sample_reference.json,
// written by tools/gen_grid_sample_reference.py) on every device: outputs and the gradients of
// the input, the grid and theta, over every mode, padding mode and align_corners in 2 and 3
// dims; closed forms; f64 gradchecks; autocast; the errors PyTorch raises.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "devices.hpp"
#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
#include "gradcheck.hpp"
#include "torch_reference.hpp"

#ifndef FERRY_TEST_DATA_DIR
#error "FERRY_TEST_DATA_DIR must name the folder holding pytorch_grid_sample_reference.json"
#endif

namespace {

using ferry::DType;
using ferry::Tensor;
using ferry_test::expect_close;
using nlohmann::json;

void run_reference(const ferry::Device& dev) {
  ferry_test::run_reference_file(
      "pytorch_grid_sample_reference.json", dev, 40,
      [](const std::string& op, const json& attrs, const std::vector<Tensor>& in,
         const std::vector<Tensor>&) -> ferry_test::ReferenceResult {
        const bool align = attrs["align_corners"];
        if (op == "grid_sample")
          return {ferry::grid_sample(in[0], in[1], attrs["mode"].get<std::string>(),
                                     attrs["padding_mode"].get<std::string>(), align)};
        const Tensor grid =
            ferry::affine_grid(in.back(), attrs["size"].get<std::vector<std::int64_t>>(), align);
        if (op == "affine_grid") return {grid};
        return {ferry::grid_sample(in[0], grid, "bilinear",
                                   attrs["padding_mode"].get<std::string>(), align)};
      });
}

FERRY_TEST_ON_EACH_DEVICE(GridSample, PyTorchReference, run_reference)

// The CPU runs its fused kernels (Note [Sampling at a grid on the CPU]); the composition every
// other device runs is held to PyTorch here too.
TEST(GridSample, PyTorchReferenceCpuComposition) {
  ferry::debug::CompositesOnly composition;
  run_reference(ferry::Device::cpu());
}

// The identity theta's grid, sampled with align_corners, gives the input back exactly, in
// every mode; without align_corners, bilinear at the pixel centres does too. A grid point on
// a pixel centre reads that pixel.
TEST(GridSample, ClosedForms) {
  for (const ferry::Device& dev : ferry_test::devices()) {
    SCOPED_TRACE(dev.str());
    ferry::manual_seed(5);
    const Tensor x = ferry::randn({2, 3, 4, 5}).to(dev);
    const Tensor eye =
        ferry::tensor(std::vector<float>{1, 0, 0, 0, 1, 0}, {1, 2, 3}).expand({2, 2, 3}).to(dev);
    for (bool align : {false, true}) {
      const Tensor grid = ferry::affine_grid(eye, {2, 3, 4, 5}, align);
      for (const char* mode : {"bilinear", "nearest", "bicubic"})
        for (const char* padding : {"zeros", "border", "reflection"})
          expect_close(ferry::grid_sample(x, grid, mode, padding, align), x.to("cpu"), 1e-5, 1e-5,
                       std::string(mode) + " " + padding);
    }
    // (x, y) = (-1, -1) and (1, 1) with align_corners: the corner pixels.
    const Tensor corners = ferry::tensor(std::vector<float>{-1, -1, 1, 1}, {1, 1, 2, 2}).to(dev);
    const Tensor y = ferry::grid_sample(x.narrow(0, 0, 1), corners, "bilinear", "zeros", true);
    expect_close(
        y.reshape({3, 2}),
        ferry::stack(
            {x.select(0, 0).select(1, 0).select(1, 0), x.select(0, 0).select(1, 3).select(1, 4)}, 1)
            .to("cpu"),
        0, 0, "corners");
    // x = -1 without align_corners is the left edge, half a pixel outside the first centre:
    // with zeros padding, the first column at half weight; y = 0 is between rows 1 and 2.
    const Tensor outside = ferry::tensor(std::vector<float>{-1, 0}, {1, 1, 1, 2});
    const Tensor row = x.select(0, 0).narrow(0, 0, 1).to("cpu");  // channel 0
    const Tensor mid = (row.select(1, 1).select(1, 0) + row.select(1, 2).select(1, 0)) * 0.5;
    expect_close(ferry::grid_sample(row.unsqueeze(0), outside).reshape({1}), mid * 0.5, 1e-6, 1e-6,
                 "half outside");
  }
}

// The kernels' gradients and the composition's, against finite differences.
void gradchecks() {
  const Tensor x = ferry_test::grad_input({1, 2, 4, 3}, -1, 1, 3);
  const Tensor grid = ferry_test::grad_input({1, 3, 2, 2}, -1.4, 1.4, 4);
  for (const char* mode : {"bilinear", "bicubic"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (bool align : {false, true})
        EXPECT_TRUE(ferry_test::gradcheck(
            [&](const std::vector<Tensor>& in) {
              return ferry::grid_sample(in[0], in[1], mode, padding, align);
            },
            {x, grid}))
            << mode << " " << padding << " align " << align;
  const Tensor v = ferry_test::grad_input({1, 2, 2, 3, 2}, -1, 1, 5);
  const Tensor g3 = ferry_test::grad_input({1, 2, 2, 1, 3}, -1.2, 1.2, 6);
  EXPECT_TRUE(ferry_test::gradcheck(
      [&](const std::vector<Tensor>& in) {
        return ferry::grid_sample(in[0], in[1], "bilinear", "reflection", false);
      },
      {v, g3}));
  const Tensor theta = ferry_test::grad_input({2, 2, 3}, -1, 1, 7);
  EXPECT_TRUE(ferry_test::gradcheck(
      [&](const std::vector<Tensor>& in) {
        return ferry::grid_sample(in[0], ferry::affine_grid(in[1], {2, 1, 3, 4}), "bilinear",
                                  "border");
      },
      {ferry_test::grad_input({2, 1, 3, 4}, -1, 1, 8), theta}));
}

TEST(GridSample, F64Gradcheck) { gradchecks(); }

TEST(GridSample, F64GradcheckComposition) {
  ferry::debug::CompositesOnly composition;
  gradchecks();
}

// Only the gradients autograd asks for are computed, and nearest gives the grid zeros; a
// point that is not finite reads nothing.
TEST(GridSample, GradientsAskedForAndNonFinitePoints) {
  for (bool composed : {false, true}) {
    std::optional<ferry::debug::CompositesOnly> composition;
    if (composed) composition.emplace();
    ferry::manual_seed(2);
    const Tensor x = ferry::randn({1, 2, 3, 4}).requires_grad_();
    const Tensor grid = ferry::uniform({1, 2, 2, 2}, -1, 1);
    ferry::sum(ferry::grid_sample(x, grid)).backward();
    EXPECT_TRUE(x.grad().defined());
    const Tensor g2 = grid.clone().requires_grad_();
    ferry::sum(ferry::grid_sample(x.detach(), g2, "bicubic")).backward();
    EXPECT_TRUE(g2.grad().defined());
    const Tensor g3 = grid.clone().requires_grad_();
    ferry::sum(ferry::grid_sample(x.detach(), g3, "nearest")).backward();
    ASSERT_TRUE(g3.grad().defined());
    EXPECT_EQ(ferry::count_nonzero(g3.grad()).item<std::int64_t>(), 0);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const Tensor odd = ferry::tensor(std::vector<float>{nan, 0, 0, 1e30f}, {1, 1, 2, 2});
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      const Tensor y = ferry::grid_sample(x.detach(), odd, mode, "zeros");
      EXPECT_EQ(ferry::count_nonzero(y).item<std::int64_t>(), 0)
          << mode << " composed " << composed;
    }
  }
}

// A channels-last input reads as its contiguous copy does; 16-bit inputs place their points
// in f32 and land within their rounding of the f32 result; an empty grid gives an empty
// output, through which autograd passes zeros; autocast promotes a mixed pair to the wider dtype
// (PyTorch's policy).
TEST(GridSample, LayoutsDtypesAndEmpty) {
  ferry::manual_seed(9);
  const Tensor x = ferry::randn({2, 3, 6, 7});
  const Tensor grid = ferry::uniform({2, 5, 4, 2}, -1.1, 1.1);
  const Tensor y = ferry::grid_sample(x, grid);
  expect_close(ferry::grid_sample(x.contiguous(ferry::MemoryFormat::channels_last), grid), y, 0, 0,
               "channels-last");
  EXPECT_TRUE(
      ferry::grid_sample(x.contiguous(ferry::MemoryFormat::channels_last), grid).is_contiguous());
  for (DType dt : {DType::f16, DType::bf16}) {
    const Tensor low = ferry::grid_sample(x.to(dt), grid.to(dt), "bicubic");
    EXPECT_EQ(low.dtype(), dt);
    expect_close(low.to(DType::f32),
                 ferry::grid_sample(x.to(dt).to(DType::f32), grid.to(dt).to(DType::f32), "bicubic"),
                 dt == DType::f16 ? 4e-3 : 3e-2, dt == DType::f16 ? 4e-3 : 3e-2, "16-bit");
  }
  EXPECT_EQ(ferry::grid_sample(x, ferry::zeros({2, 0, 4, 2})).sizes(), (ferry::Shape{2, 3, 0, 4}));
  EXPECT_EQ(ferry::grid_sample(ferry::zeros({0, 3, 6, 7}), ferry::zeros({0, 5, 4, 2})).sizes(),
            (ferry::Shape{0, 3, 5, 4}));
  // An empty output is still in the graph, as PyTorch's: backward gives zero gradients.
  const Tensor xl = x.clone().requires_grad_(), gl = ferry::zeros({2, 0, 4, 2}).requires_grad_();
  ferry::sum(ferry::grid_sample(xl, gl)).backward();
  ASSERT_TRUE(xl.grad().defined());
  EXPECT_EQ(ferry::count_nonzero(xl.grad()).item<std::int64_t>(), 0);
  EXPECT_EQ(gl.grad().sizes(), gl.sizes());
  ferry::Autocast amp("cpu", DType::f16);
  EXPECT_EQ(ferry::grid_sample(x.to(DType::f16), grid).dtype(), DType::f32);
}

TEST(GridSample, BadInputIsRefused) {
  const Tensor x = ferry::zeros({2, 3, 4, 5}), grid = ferry::zeros({2, 3, 3, 2});
  EXPECT_THROW(ferry::grid_sample(x, grid, "linear"), ferry::ValueError);
  EXPECT_THROW(ferry::grid_sample(x, grid, "bilinear", "circular"), ferry::ValueError);
  EXPECT_THROW(ferry::grid_sample(x, grid.to(DType::f64)), ferry::DTypeError);
  EXPECT_THROW(ferry::grid_sample(x.to(DType::i64), grid.to(DType::i64)), ferry::DTypeError);
  EXPECT_THROW(ferry::grid_sample(x, ferry::zeros({2, 3, 2})), ferry::ShapeError);
  EXPECT_THROW(ferry::grid_sample(x, ferry::zeros({1, 3, 3, 2})), ferry::ShapeError);
  EXPECT_THROW(ferry::grid_sample(x, ferry::zeros({2, 3, 3, 3})), ferry::ShapeError);
  EXPECT_THROW(ferry::grid_sample(ferry::zeros({2, 3, 0, 5}), grid), ferry::ShapeError);
  EXPECT_THROW(
      ferry::grid_sample(ferry::zeros({1, 1, 2, 2, 2}), ferry::zeros({1, 1, 1, 1, 3}), "bicubic"),
      ferry::ShapeError);
  const Tensor theta = ferry::zeros({2, 2, 3});
  EXPECT_THROW(ferry::affine_grid(theta, {2, 3, 4}), ferry::ShapeError);
  EXPECT_THROW(ferry::affine_grid(theta, {2, 3, 0, 4}), ferry::ShapeError);
  EXPECT_THROW(ferry::affine_grid(theta, {3, 1, 4, 4}), ferry::ShapeError);
  EXPECT_THROW(ferry::affine_grid(theta, {2, 1, 2, 4, 4}), ferry::ShapeError);
  EXPECT_THROW(ferry::affine_grid(theta.to(DType::i64), {2, 1, 4, 4}), ferry::DTypeError);
  try {
    ferry::grid_sample(x, ferry::zeros({1, 3, 3, 2}));
    ADD_FAILURE() << "no error";
  } catch (const ferry::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3, 4, 5]"), std::string::npos) << e.what();
  }
}

}  // namespace
