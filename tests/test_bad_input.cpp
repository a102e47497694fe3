// Bad input across the public API: every call below must throw a typed
// ferry::Error (never crash, never a std:: exception leaking through), and the
// tensors involved must be unchanged afterwards.
#include <gtest/gtest.h>

#include <functional>

#include "ferry/ferry.hpp"

using ferry::DType;
using ferry::Tensor;

namespace {

template <typename E> void expect_typed(const char* what, const std::function<void()>& f) {
  try {
    f();
    ADD_FAILURE() << what << ": no error";
  } catch (const ferry::Error& e) {
    // One handler for every ferry::Error (E may be ferry::Error itself).
    if (dynamic_cast<const E*>(&e)) {
      EXPECT_GT(std::string(e.what()).size(), 20u)
          << what << ": the message says too little: " << e.what();
    } else {
      ADD_FAILURE() << what << ": a ferry::Error of the wrong kind: " << e.what();
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": a non-ferry exception: " << e.what();
  }
}

}  // namespace

TEST(BadInput, ShapesAreShapeErrors) {
  Tensor a = ferry::ones({2, 3}), b = ferry::ones({4, 5}), s = ferry::scalar_tensor(1.0);
  Tensor before = a.clone();
  expect_typed<ferry::ShapeError>("matmul K mismatch", [&] { ferry::matmul(a, b); });
  expect_typed<ferry::ShapeError>("matmul of a 0-d tensor", [&] { ferry::matmul(s, a); });
  expect_typed<ferry::ShapeError>("broadcast", [&] { (void)(a + b); });
  expect_typed<ferry::ShapeError>("where broadcast", [&] { ferry::where(ferry::gt(a, 0), a, b); });
  expect_typed<ferry::ShapeError>("softmax dim", [&] { ferry::softmax(a, 2); });
  expect_typed<ferry::ShapeError>("sum dim", [&] { ferry::sum(a, {-3}); });
  expect_typed<ferry::ShapeError>("sum repeated dim", [&] { ferry::sum(a, {0, -2}); });
  expect_typed<ferry::ShapeError>("max of empty", [&] { ferry::max(ferry::empty({0, 3}), {0}); });
  expect_typed<ferry::ShapeError>("argmax of empty", [&] { ferry::argmax(ferry::empty({0})); });
  expect_typed<ferry::ShapeError>("layer_norm shape", [&] { ferry::layer_norm(a, {4}); });
  expect_typed<ferry::ShapeError>("layer_norm weight",
                                  [&] { ferry::layer_norm(a, {3}, ferry::ones({4})); });
  expect_typed<ferry::ShapeError>("cat ranks", [&] { ferry::cat({a, ferry::ones({3})}, 0); });
  expect_typed<ferry::ShapeError>("cat sizes", [&] { ferry::cat({a, ferry::ones({2, 4})}, 0); });
  expect_typed<ferry::ShapeError>("cat of nothing", [&] { ferry::cat({}, 0); });
  expect_typed<ferry::ShapeError>("stack shapes", [&] { ferry::stack({a, b}); });
  expect_typed<ferry::ShapeError>("index_select range", [&] {
    ferry::index_select(a, 1, ferry::tensor(std::vector<std::int64_t>{0, 3}));
  });
  expect_typed<ferry::ShapeError>("index_select negative", [&] {
    ferry::index_select(a, 0, ferry::tensor(std::vector<std::int64_t>{-1}));
  });
  expect_typed<ferry::ShapeError>("gather range", [&] {
    ferry::gather(a, 1, ferry::tensor(std::vector<std::int64_t>{0, 1, 7, 0, 0, 0}, {2, 3}));
  });
  expect_typed<ferry::ShapeError>("embedding range", [&] {
    ferry::embedding(ferry::ones({5, 2}), ferry::tensor(std::vector<std::int64_t>{5}));
  });
  expect_typed<ferry::ShapeError>("embedding weight rank", [&] {
    ferry::embedding(ferry::ones({5}), ferry::tensor(std::vector<std::int64_t>{1}));
  });
  expect_typed<ferry::ShapeError>("negative size", [&] { ferry::zeros({2, -1}); });
  expect_typed<ferry::ShapeError>("arange range", [&] { ferry::arange(0, 1, 0); });
  expect_typed<ferry::ShapeError>("copy_ broadcast", [&] { a.copy_(b); });
  expect_typed<ferry::ShapeError>("flatten", [&] { a.flatten(1, 0); });
  EXPECT_EQ(a.to_vector<float>(), before.to_vector<float>());
}

TEST(BadInput, DtypesAreDTypeErrors) {
  Tensor i = ferry::ones({3}, {.dtype = DType::i32}), f = ferry::ones({3});
  Tensor bl = ferry::ones({3}, {.dtype = DType::boolean});
  expect_typed<ferry::DTypeError>("mean of ints", [&] { ferry::mean(i); });
  expect_typed<ferry::DTypeError>("var of ints", [&] { ferry::var(i); });
  expect_typed<ferry::DTypeError>("where cond", [&] { ferry::where(f, f, f); });
  expect_typed<ferry::DTypeError>("index dtype", [&] { ferry::index_select(f, 0, f); });
  expect_typed<ferry::DTypeError>("bool matmul", [&] {
    ferry::matmul(bl.reshape({1, 3}), bl.reshape({3, 1}));
  });
  expect_typed<ferry::DTypeError>("bool sub", [&] { (void)(bl - bl); });
  expect_typed<ferry::DTypeError>("randn ints", [&] { ferry::randn({2}, {.dtype = DType::i64}); });
  expect_typed<ferry::DTypeError>("dtype name", [&] { ferry::dtype_from_name("f128"); });
}

TEST(BadInput, DevicesAreDeviceErrors) {
  expect_typed<ferry::DeviceError>("device string", [&] { ferry::Device("gpu:0:1"); });
  expect_typed<ferry::DeviceError>("unknown backend", [&] {
    ferry::zeros({2}, {.device = ferry::Device::parse_syntax("tpu:0")});
  });
  expect_typed<ferry::DeviceError>(
      "to unknown", [&] { ferry::ones({2}).to(ferry::Device::parse_syntax("vulkan:7")); });
}

TEST(BadInput, ItemAndUndefinedTensors) {
  expect_typed<ferry::ShapeError>("item of many", [&] { ferry::ones({2}).item<float>(); });
  expect_typed<ferry::ShapeError>("item of none", [&] { ferry::ones({0}).item<float>(); });
  expect_typed<ferry::Error>("undefined", [&] { (void)(Tensor() + ferry::ones({1})); });
  expect_typed<ferry::OutOfMemoryError>("huge", [&] {
    ferry::ones({std::int64_t(1) << 40, 1 << 20});
  });
  expect_typed<ferry::ShapeError>("overflowing", [&] {
    ferry::ones({std::int64_t(1) << 40, std::int64_t(1) << 40});
  });
  expect_typed<ferry::ShapeError>("overflowing expand", [&] {
    ferry::ones({1}).expand({std::int64_t(1) << 40, std::int64_t(1) << 40});
  });
  expect_typed<ferry::ShapeError>("overflowing view", [&] {
    ferry::ones({0}).view({std::int64_t(1) << 40, std::int64_t(1) << 40, 0});
  });
}
