// tests/test_lr_scheduler.cpp — ferry/lr_scheduler.hpp against PyTorch 1.13's
// learning rates: each sequence below is what torch.optim.lr_scheduler gives
// for an SGD at lr 0.1 over 12 steps (printed by the python in each
// comment's first line, /usr/bin/python3 with python3-torch 1.13.1).
#include <gtest/gtest.h>

#include <cmath>

#include "ferry/ferry.hpp"

namespace {

using namespace ferry::optim;

struct Model {
  ferry::Tensor w = ferry::zeros({2}).requires_grad_();
  SGD sgd{{w}, SGDOptions{.lr = 0.1}};
};

// The rate after construction, then after each step (metrics: ReduceLROnPlateau's).
template <typename S> std::vector<double> rates(Model& m, S& s, int steps) {
  std::vector<double> out = {m.sgd.lr()};
  for (int i = 0; i < steps; ++i) {
    s.step();
    out.push_back(m.sgd.lr());
  }
  return out;
}

void expect_rates(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << "step " << i;
}

TEST(LRScheduler, MatchesPyTorch) {
  {  // L.StepLR(o, 3, 0.5)
    Model m;
    StepLR s(m.sgd, 3, 0.5);
    expect_rates(rates(m, s, 12), {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125,
                                   0.0125, 0.0125, 0.00625});
  }
  {  // L.MultiStepLR(o, [2, 5, 5, 9], 0.1)
    Model m;
    MultiStepLR s(m.sgd, {2, 5, 5, 9}, 0.1);
    expect_rates(rates(m, s, 12),
                 {0.1, 0.1, 0.010000000000000002, 0.010000000000000002, 0.010000000000000002,
                  0.00010000000000000005, 0.00010000000000000005, 0.00010000000000000005,
                  0.00010000000000000005, 1.0000000000000006e-05, 1.0000000000000006e-05,
                  1.0000000000000006e-05, 1.0000000000000006e-05});
  }
  {  // L.ExponentialLR(o, 0.9)
    Model m;
    ExponentialLR s(m.sgd, 0.9);
    expect_rates(
        rates(m, s, 12),
        {0.1, 0.09000000000000001, 0.08100000000000002, 0.07290000000000002, 0.06561000000000002,
         0.05904900000000002, 0.05314410000000002, 0.04782969000000002, 0.043046721000000024,
         0.03874204890000002, 0.03486784401000002, 0.03138105960900001, 0.028242953648100012});
  }
  {  // L.CosineAnnealingLR(o, 5, 0.01), 14 steps
    Model m;
    CosineAnnealingLR s(m.sgd, 5, 0.01);
    expect_rates(rates(m, s, 14), {0.1, 0.09140576474687263, 0.06890576474687263,
                                   0.04109423525312736, 0.018594235253127367, 0.01,
                                   0.018594235253127367, 0.04109423525312739, 0.06890576474687267,
                                   0.09140576474687269, 0.10000000000000006, 0.09140576474687272,
                                   0.06890576474687268, 0.0410942352531274, 0.01859423525312738});
  }
  {  // L.LinearLR(o, 0.25, 1.0, 4)
    Model m;
    LinearLR s(m.sgd, 0.25, 1.0, 4);
    expect_rates(
        rates(m, s, 12),
        {0.025, 0.043750000000000004, 0.06250000000000001, 0.08125000000000002, 0.10000000000000002,
         0.10000000000000002, 0.10000000000000002, 0.10000000000000002, 0.10000000000000002,
         0.10000000000000002, 0.10000000000000002, 0.10000000000000002, 0.10000000000000002});
  }
  {  // L.LambdaLR(o, lambda e: 1.0 / (e + 1))
    Model m;
    LambdaLR s(m.sgd, [](std::int64_t e) { return 1.0 / double(e + 1); });
    expect_rates(rates(m, s, 12),
                 {0.1, 0.05, 0.03333333333333333, 0.025, 0.020000000000000004, 0.016666666666666666,
                  0.014285714285714285, 0.0125, 0.011111111111111112, 0.010000000000000002,
                  0.009090909090909092, 0.008333333333333333, 0.007692307692307693});
  }
  {  // L.OneCycleLR(o, max_lr=1.0, total_steps=10, cycle_momentum=False), 9 steps
    Model m;
    OneCycleLR s(m.sgd, 1.0, 10);
    expect_rates(rates(m, s, 9), {0.040000000000000036, 0.52, 1.0, 0.9504846320134737,
                                  0.8117456539497631, 0.6112620219362893, 0.38874197806371075,
                                  0.18825834605023697, 0.049519367986526286, 4e-06});
  }
  {  // L.SequentialLR(o, [L.LinearLR(o, 0.5, 1.0, 2), L.ExponentialLR(o, 0.5)], [3])
    Model m;
    auto first = std::make_shared<LinearLR>(m.sgd, 0.5, 1.0, 2);
    auto second = std::make_shared<ExponentialLR>(m.sgd, 0.5);
    SequentialLR s(m.sgd, {first, second}, {3});
    expect_rates(rates(m, s, 12),
                 {0.05, 0.07500000000000001, 0.1, 0.1, 0.05, 0.025, 0.0125, 0.00625, 0.003125,
                  0.0015625, 0.00078125, 0.000390625, 0.0001953125});
  }
  {  // L.ReduceLROnPlateau(o, factor=0.5, patience=2, cooldown=1) on these metrics
    Model m;
    ReduceLROnPlateau s(m.sgd, "min", 0.5, 2, 1e-4, "rel", 1);
    const double metrics[] = {1.0, 0.9, 0.95, 0.95, 0.96, 0.97, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
    std::vector<double> got = {m.sgd.lr()};
    for (double x : metrics) {
      s.step(x);
      got.push_back(m.sgd.lr());
    }
    expect_rates(got, {0.1, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025});
  }
}

TEST(LRScheduler, StateDictResumesTheSchedule) {
  Model a, b;
  CosineAnnealingLR sa(a.sgd, 7, 0.001);
  for (int i = 0; i < 4; ++i) sa.step();
  CosineAnnealingLR sb(b.sgd, 7, 0.001);
  sb.load_state_dict(sa.state_dict());
  b.sgd.set_lr(sa.get_last_lr()[0]);  // as the optimizer's own state would
  for (int i = 0; i < 5; ++i) {
    sa.step();
    sb.step();
    EXPECT_DOUBLE_EQ(a.sgd.lr(), b.sgd.lr()) << i;
  }
  EXPECT_EQ(sb.last_epoch(), 9);
  ReduceLROnPlateau pa(a.sgd, "max", 0.5, 0), pb(b.sgd, "max", 0.5, 0);
  pa.step(3.0);
  pb.load_state_dict(pa.state_dict());
  pb.step(2.0);  // worse than the best it restored: one bad epoch is past the patience of 0
  EXPECT_DOUBLE_EQ(b.sgd.lr(), a.sgd.lr() * 0.5);
}

TEST(LRScheduler, BadArgumentsAreTyped) {
  Model m;
  EXPECT_THROW(StepLR(m.sgd, 0), ferry::ValueError);
  EXPECT_THROW(CosineAnnealingLR(m.sgd, 0), ferry::ValueError);
  EXPECT_THROW(LinearLR(m.sgd, 0.0), ferry::ValueError);
  EXPECT_THROW(ReduceLROnPlateau(m.sgd, "mid"), ferry::ValueError);
  EXPECT_THROW(ReduceLROnPlateau(m.sgd, "min", 1.5), ferry::ValueError);
  OneCycleLR s(m.sgd, 1.0, 3);
  s.step();
  s.step();
  s.step();
  EXPECT_THROW(s.step(), ferry::ValueError);  // past total_steps
}

}  // namespace
