// tests/test_inplace.cpp — the in-place `_` ops (ferry/ops_inplace.hpp, Note
// [In-place ops]): every generated one gives its out-of-place op's values on
// every device, views see the write, autograd records it (gradients against
// the out-of-place program and finite differences), and PyTorch's refusals.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"
#include "gradcheck.hpp"
#include "op_test_util.hpp"
#include "test_devices.hpp"

namespace {

using ferry::DType;
using ferry::Tensor;

struct Unary {
  const char* name;
  ferry::OpId id;
  Tensor& (*fn)(Tensor&);
};
struct Binary {
  const char* name;
  ferry::OpId id;
  Tensor& (*fn)(Tensor&, const Tensor&);
};

std::vector<Unary> unary_ops() {
  std::vector<Unary> v;
#define X(name, Functor, dtypes) v.push_back({#name, ferry::OpId::name, &ferry::name##_});
  FERRY_UNARY_OPS(X)
#undef X
  return v;
}
std::vector<Binary> binary_ops() {
  std::vector<Binary> v;
#define X(name, Functor, dtypes)         \
  v.push_back({#name, ferry::OpId::name, \
               static_cast<Tensor& (*)(Tensor&, const Tensor&)>(&ferry::name##_)});
  FERRY_BINARY_OPS(X)
  FERRY_COMPARE_OPS(X)
#undef X
  return v;
}

// f32 inputs in the op's domain (the op table's range), or i32 for integer-only ops.
Tensor input_for(ferry::OpId id, std::uint64_t seed, const ferry::Device& dev) {
  const ferry::OpInfo& info = ferry::op_info(id);
  ferry::manual_seed(seed);
  if (!info.dtypes.has(DType::f32))
    return ferry::randint(1, 7, {3, 5}, {.dtype = DType::i32}).to(dev);
  return ferry::uniform({3, 5}, info.test_lo, info.test_hi).to(dev);
}

TEST(InPlace, EveryGeneratedOpIsItsOutOfPlaceOp) {
  for (const std::string& name : ferry_test::available_device_names()) {
    const ferry::Device dev(name);
    for (const Unary& op : unary_ops()) {
      Tensor x = input_for(op.id, 1, dev);
      Tensor want = ferry::unary_op(op.id, x);
      if (want.dtype() != x.dtype()) continue;  // an integer x of a float op: refused, tested below
      Tensor& same = op.fn(x);
      EXPECT_EQ(&same, &x);
      EXPECT_TRUE(ferry::equal(x.cpu(), want.cpu())) << op.name << "_ on " << name;
    }
    for (const Binary& op : binary_ops()) {
      Tensor x = input_for(op.id, 2, dev), y = input_for(op.id, 3, dev).narrow(0, 0, 1);
      Tensor want = ferry::binary_op(op.id, x, y).to(x.dtype());
      op.fn(x, y);  // y broadcasts over x's rows
      EXPECT_TRUE(ferry::equal(x.cpu(), want.cpu())) << op.name << "_ on " << name;
    }
  }
}

TEST(InPlace, ViewsSeeTheWrite) {
  Tensor x = ferry::zeros({3, 4});
  Tensor row = x.select(0, 1);
  ferry::add_(row, 2.0);
  x.narrow(1, 0, 2).mul_(ferry::full({3, 2}, 3.0));
  ferry::masked_fill_(x, ferry::gt(ferry::arange(4), 2), -1.0);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 0, 0, -1, 6, 6, 2, -1, 0, 0, 0, -1}));
}

// The in-place program and its out-of-place twin give the same gradients.
TEST(InPlace, AutogradRecordsTheWrite) {
  auto program = [](const Tensor& a, const Tensor& c, bool in_place) {
    Tensor b = a * 2.0;
    if (!in_place) return ferry::clamp(ferry::exp(b * c) + c, -5, 50.0);
    b.mul_(c);
    ferry::exp_(b);
    b.add_(c);
    ferry::clamp_(b, -5, 50.0);
    return b;
  };
  ferry::manual_seed(4);
  Tensor a0 = ferry::uniform({6}, -1, 1, {.dtype = DType::f64});
  Tensor c0 = ferry::uniform({6}, -1, 1, {.dtype = DType::f64});
  std::vector<std::vector<double>> grads;
  for (bool in_place : {false, true}) {
    Tensor a = a0.clone().requires_grad_(), c = c0.clone().requires_grad_();
    Tensor y = program(a, c, in_place);
    EXPECT_EQ(y.is_leaf(), false);
    ferry::sum(y * y).backward();
    grads.push_back(a.grad().to_vector<double>());
    grads.push_back(c.grad().to_vector<double>());
  }
  EXPECT_EQ(grads[0], grads[2]);
  EXPECT_EQ(grads[1], grads[3]);
  // The indexing writes, against finite differences.
  Tensor x = ferry_test::grad_input({4, 3}, -1, 1, 8), s = ferry_test::grad_input({2, 3}, -1, 1, 9);
  Tensor idx = ferry::tensor(std::vector<std::int64_t>{3, 1});
  EXPECT_TRUE(ferry_test::gradcheck(
      [&](const std::vector<Tensor>& in) {
        Tensor t = in[0] * 1.0;
        ferry::index_add_(t, 0, idx, in[1], 0.5);
        return t;
      },
      {x, s}));
  EXPECT_TRUE(ferry_test::gradcheck(
      [&](const std::vector<Tensor>& in) {
        Tensor t = in[0] + 0.0;
        ferry::scatter_(t, 0, idx.view({2, 1}).expand({2, 3}), in[1]);
        return t;
      },
      {x, s}));
}

TEST(InPlace, RefusesWhatPyTorchRefuses) {
  Tensor leaf = ferry::ones({3}).requires_grad_();
  EXPECT_THROW(leaf.add_(1.0), ferry::Error);
  Tensor view = leaf.narrow(0, 0, 2);
  EXPECT_THROW(ferry::exp_(view), ferry::Error);
  {
    ferry::NoGradGuard no_grad;  // the optimizers' way
    leaf.mul_(3.0);
  }
  EXPECT_EQ(leaf.to_vector<float>(), (std::vector<float>{3, 3, 3}));
  // A saved tensor changed in place: backward raises instead of a wrong gradient.
  Tensor y = ferry::exp(leaf * 1.0);  // exp saves its output
  y.add_(1.0);
  EXPECT_THROW(ferry::sum(y).backward(), ferry::Error);
  // A result no gradient flows through cuts x from the graph (PyTorch's zero gradient).
  Tensor z = leaf * 1.0;
  ferry::eq_(z, 3.0);
  EXPECT_FALSE(z.requires_grad());
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{1, 1, 1}));
  // Dtype and shape: nothing is written.
  Tensor i = ferry::ones({3}, {.dtype = DType::i32});
  EXPECT_THROW(i.div_(2), ferry::DTypeError);
  EXPECT_THROW(i.add_(1.5), ferry::DTypeError);
  EXPECT_THROW(ferry::exp_(i), ferry::DTypeError);
  Tensor small = ferry::ones({1, 3});
  EXPECT_THROW(small.add_(ferry::ones({2, 3})), ferry::ShapeError);
  EXPECT_EQ(small.to_vector<float>(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(i.to_vector<std::int32_t>(), (std::vector<std::int32_t>{1, 1, 1}));
  Tensor expanded = ferry::zeros({3}).expand({2, 3});
  EXPECT_THROW(expanded.add_(ferry::ones({2, 3})), ferry::ValueError);
  Tensor b = ferry::ones({2}, {.dtype = DType::boolean});
  EXPECT_THROW(b.add_(1), ferry::DTypeError);
  ferry::logical_and_(b, ferry::zeros({2}, {.dtype = DType::boolean}));
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{false, false}));
}

TEST(InPlace, IndexAddIsPyTorchs) {
  Tensor x = ferry::ones({5, 2});
  Tensor idx = ferry::tensor(std::vector<std::int64_t>{0, 4, 0});
  Tensor src = ferry::arange(6).view({3, 2});
  x.copy_(ferry::index_add(x, 0, idx, src, 2));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{9, 13, 1, 1, 1, 1, 1, 1, 5, 7}));
  EXPECT_THROW(ferry::index_add(x, 0, idx, ferry::ones({2, 2})), ferry::ShapeError);
}

// Writes through a view of a non-leaf (Note [In-place through a view], PyTorch's
// CopySlices): the base's history is rewritten, so gradients reach the base's
// inputs with the written elements replaced, and the written values' inputs,
// through chains of views, repeated writes, and the view used afterwards;
// against finite differences and against the same program written out of place.
TEST(InPlace, WritesThroughViewsOfNonLeavesRewriteTheBase) {
  Tensor w = ferry_test::grad_input({4, 3}, -1, 1, 11), v = ferry_test::grad_input({3}, -1, 1, 12);
  // y = 2w; rows 1-2 of y times 3; column 1 of y.t() (row 1 of y) plus v; then the view used.
  auto program = [](const std::vector<Tensor>& in) {
    Tensor y = in[0] * 2.0;
    Tensor rows = y.narrow(0, 1, 2);
    rows.mul_(3.0);
    Tensor row1 = y.t().select(1, 1);
    row1.add_(in[1]);
    ferry::sigmoid_(row1);
    return ferry::cat({y.reshape({-1}), rows.reshape({-1}) * 0.5, row1});
  };
  EXPECT_TRUE(ferry_test::gradcheck(program, {w, v}));
  auto out_of_place = [](const std::vector<Tensor>& in) {
    Tensor y = in[0] * 2.0;
    Tensor r0 = y.narrow(0, 0, 1), r1 = y.narrow(0, 1, 1) * 3.0, r2 = y.narrow(0, 2, 1) * 3.0;
    Tensor r3 = y.narrow(0, 3, 1);
    r1 = ferry::sigmoid(r1 + in[1].view({1, 3}));
    Tensor y2 = ferry::cat({r0, r1, r2, r3});
    return ferry::cat({y2.reshape({-1}), y2.narrow(0, 1, 2).reshape({-1}) * 0.5, r1.reshape({-1})});
  };
  std::vector<std::vector<double>> grads;
  for (const auto& fn : {std::function<Tensor(const std::vector<Tensor>&)>(program),
                         std::function<Tensor(const std::vector<Tensor>&)>(out_of_place)}) {
    Tensor a = w.clone().requires_grad_(), b = v.clone().requires_grad_();
    Tensor y = fn({a, b});
    ferry::sum(y * y).backward();
    grads.push_back(a.grad().to_vector<double>());
    grads.push_back(b.grad().to_vector<double>());
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(grads[std::size_t(i)].size(), grads[std::size_t(i + 2)].size());
    for (std::size_t k = 0; k < grads[std::size_t(i)].size(); ++k)
      EXPECT_NEAR(grads[std::size_t(i)][k], grads[std::size_t(i + 2)][k], 1e-12) << i << " " << k;
  }
  // A write of values that need no gradient (fill-like): the written elements get none.
  Tensor a = ferry::ones({2, 3}, {.dtype = DType::f64}).requires_grad_();
  Tensor y = a * 5.0;
  Tensor first = y.select(0, 0);
  ferry::mul_(first, 0.0);
  ferry::sum(y).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 0, 0, 5, 5, 5}));
  // The base's own saved value was overwritten: backward raises, as in PyTorch.
  Tensor b = ferry::ones({3}, {.dtype = DType::f64}).requires_grad_();
  Tensor e = ferry::exp(b);  // exp saves its output
  Tensor part = e.narrow(0, 0, 1);
  part.add_(1.0);
  EXPECT_THROW(ferry::sum(e).backward(), ferry::Error);
}

// copy_ and fill_ through views, the way models fill a buffer row by row:
// the buffer (no grad of its own) takes each row's history, so gradients reach
// what was copied in; an overwritten region passes none to what it held.
TEST(InPlace, CopyAndFillThroughViewsAreRecorded) {
  Tensor h = ferry::tensor(std::vector<double>{1, 2}).requires_grad_();
  Tensor out = ferry::zeros({3, 2}, {.dtype = DType::f64});
  for (std::int64_t t = 0; t < 3; ++t) {
    Tensor row = out.select(0, t);
    row.copy_(h * double(t + 1));
  }
  EXPECT_TRUE(out.requires_grad());
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{1, 2, 2, 4, 3, 6}));
  Tensor c = ferry::tensor(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2});
  ferry::sum(out * c).backward();
  // d/dh of sum_t (t+1) h . c[t] = sum_t (t+1) c[t]
  EXPECT_EQ(h.grad().to_vector<double>(), (std::vector<double>{1 + 6 + 15, 2 + 8 + 18}));
  // fill_ and zero-ing of a view of a non-leaf: no gradient through the filled part.
  Tensor w = ferry::tensor(std::vector<double>{1, 2, 3, 4}).requires_grad_();
  Tensor y = w * 3.0;
  y.narrow(0, 1, 2).fill_(7);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{3, 7, 7, 12}));
  ferry::sum(y * y).backward();
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{18, 0, 0, 72}));
  // Against finite differences: a copy of a function of one input into a slice of another.
  Tensor a = ferry_test::grad_input({3, 4}, -1, 1, 21),
         b = ferry_test::grad_input({2, 4}, -1, 1, 22);
  EXPECT_TRUE(ferry_test::gradcheck(
      [](const std::vector<Tensor>& in) {
        Tensor t = in[0] * 2.0 + 1.0;  // (tanh would save its output, which the copy overwrites)
        t.narrow(0, 1, 2).copy_(in[1] * in[1]);
        return ferry::exp(t);
      },
      {a, b}));
}

}  // namespace

// A view made under NoGradGuard and written in place with grad mode on, where the write
// would be tracked, is refused (PyTorch's "a view was created in no_grad mode"), with
// nothing written; under NoGradGuard, or where no gradient is involved, it writes.
TEST(InPlace, RefusesWritesThroughViewsMadeWithoutGrad) {
  Tensor w = ferry::ones({2, 3}).requires_grad_();
  Tensor nonleaf = w * 2.0;
  Tensor plain = ferry::ones({2, 3});
  Tensor of_w, of_nonleaf, of_plain;
  {
    ferry::NoGradGuard no_grad;
    of_w = w.narrow(1, 0, 2);
    of_nonleaf = nonleaf.select(0, 1);
    of_plain = plain.narrow(1, 0, 2);
  }
  Tensor view_of_view = of_nonleaf.narrow(0, 0, 2);  // made with grad mode on: still one
  EXPECT_FERRY_ERROR(of_w.mul_(3.0), ferry::Error, "mul_", "grad mode off");
  EXPECT_FERRY_ERROR(ferry::exp_(of_nonleaf), ferry::Error, "exp_", "NoGradGuard");
  EXPECT_FERRY_ERROR(view_of_view.fill_(0.0), ferry::Error, "fill_", "grad mode off");
  EXPECT_FERRY_ERROR(of_plain.add_(ferry::ones({2, 2}).requires_grad_()), ferry::Error, "add_");
  EXPECT_EQ(w.to_vector<float>(), std::vector<float>(6, 1.0f));
  EXPECT_EQ(nonleaf.to_vector<float>(), std::vector<float>(6, 2.0f));
  of_plain.add_(1.0);  // nothing to track: written
  EXPECT_EQ(plain.to_vector<float>(), (std::vector<float>{2, 2, 1, 2, 2, 1}));
  {
    ferry::NoGradGuard no_grad;  // both under the guard: written, untracked
    of_w.mul_(3.0);
  }
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{3, 3, 1, 3, 3, 1}));
}
