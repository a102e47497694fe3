// Index and target checks deferred to the thread's next read of the device (Note [Deferred
// checks] in runtime/deferred_checks.hpp), on every accelerator; the CPU raises at the call.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "ferry/debug.hpp"
#include "ferry/ferry.hpp"
#include "op_test_util.hpp"
#include "test_devices.hpp"

namespace {

using ferry::Tensor;

// EXPECT_FERRY_ERROR runs its statement twice; a deferred error is raised once, so these run it
// once.
#define EXPECT_ERROR_ONCE(type, stmt, ...) \
  ferry_test::expect_error<type>([&] { (void)(stmt); }, {__VA_ARGS__}, #stmt)
#define EXPECT_SHAPE_ERROR_ONCE(stmt, ...) EXPECT_ERROR_ONCE(ferry::ShapeError, stmt, __VA_ARGS__)

class DeferredChecks : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { FERRY_SKIP_UNLESS_DEVICE(GetParam()); }
  ferry::Device dev() const { return ferry::Device(GetParam()); }
  Tensor index(std::vector<std::int64_t> v) const {
    return ferry::tensor<std::int64_t>(v).to(dev());
  }
  Tensor rows() const { return ferry::arange(12).reshape({4, 3}).to(dev()); }
};

// The bad call returns; the next read of the device raises the error the CPU raises at the
// call, and says where it comes from. The read after that is clean.
TEST_P(DeferredChecks, IndexSelectRaisesAtTheNextRead) {
  Tensor y = ferry::index_select(rows(), 0, index({0, 4}));
  EXPECT_SHAPE_ERROR_ONCE(y.to_vector<float>(), "index_select", "index 4", "size 4", "[4, 3]",
                          GetParam(), "FERRY_SYNC_CHECKS");
  // Raised once: the same read again succeeds, with 0 where the index was out of range.
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 1, 2, 0, 0, 0}));
  EXPECT_EQ(ferry::index_select(rows(), 0, index({3})).to_vector<float>(),
            (std::vector<float>{9, 10, 11}));
}

TEST_P(DeferredChecks, SynchronizeRaises) {
  Tensor y = ferry::gather(rows(), 1, index({0, 1, 2, -1}).reshape({4, 1}));
  EXPECT_SHAPE_ERROR_ONCE(ferry::synchronize(dev()), "gather", "index -1");
  ferry::synchronize(dev());
  // take wraps negative indices first, so its range is [-12, 12).
  Tensor t = ferry::take(rows(), index({-12, 11, 12}));
  EXPECT_SHAPE_ERROR_ONCE(ferry::synchronize(dev()), "take", "index 12", "-12 to 11");
  EXPECT_EQ(ferry::take(rows(), index({-12, 11})).to_vector<float>(), (std::vector<float>{0, 11}));
}

TEST_P(DeferredChecks, EmbeddingAndCrossEntropy) {
  Tensor w = rows();
  Tensor e = ferry::embedding(w, index({1, 7}));
  EXPECT_SHAPE_ERROR_ONCE(ferry::sum(e).item<float>(), "embedding", "index 7");

  Tensor logits = rows();
  Tensor loss = ferry::nn::functional::cross_entropy(logits, index({0, 1, 3, 2}));
  EXPECT_SHAPE_ERROR_ONCE(loss.item<float>(), "cross_entropy", "target 3", "3 classes");
  // With the targets in range, the loss matches the CPU's.
  const Tensor good = index({0, 1, 2, 2});
  EXPECT_NEAR(ferry::nn::functional::cross_entropy(logits, good).item<float>(),
              ferry::nn::functional::cross_entropy(logits.cpu(), good.cpu()).item<float>(), 1e-5);
}

// The losses' checks of values raise ValueError, deferred alike.
TEST_P(DeferredChecks, LossValueChecks) {
  namespace F = ferry::nn::functional;
  const Tensor p = ferry::tensor<float>({0.25f, 1.5f}).to(dev());
  const Tensor t = ferry::tensor<float>({0, 1}).to(dev());
  Tensor bce = F::binary_cross_entropy(p, t);
  EXPECT_ERROR_ONCE(ferry::ValueError, bce.item<float>(), "binary_cross_entropy", "[0, 1]",
                    GetParam());
  Tensor nll = F::gaussian_nll_loss(t, t, ferry::tensor<float>({1, -1}).to(dev()));
  EXPECT_ERROR_ONCE(ferry::ValueError, nll.item<float>(), "gaussian_nll_loss", "negative");
  const Tensor q = ferry::tensor<float>({0.25f, 0.5f});
  EXPECT_NEAR(F::binary_cross_entropy(q.to(dev()), t).item<float>(),
              F::binary_cross_entropy(q, t.cpu()).item<float>(), 1e-6);
}

// A loop that never reads still sees its error: the check past the limit reads the pending ones.
TEST_P(DeferredChecks, PendingChecksAreBounded) {
  const Tensor x = rows();
  Tensor y = ferry::index_select(x, 0, index({5}));
  const Tensor ok = index({1});
  for (std::size_t i = 1; i < ferry::debug::kMaxDeferredChecks; ++i)
    (void)ferry::index_select(x, 0, ok);
  EXPECT_SHAPE_ERROR_ONCE(ferry::index_select(x, 0, ok), "index 5");
}

// Each thread's checks are its own: another thread's read does not raise them.
TEST_P(DeferredChecks, ChecksBelongToTheirThread) {
  Tensor y = ferry::index_select(rows(), 0, index({9}));
  std::string other;
  std::thread t([&] {
    try {
      other = std::to_string(ferry::index_select(rows(), 0, index({2})).to_vector<float>()[0]);
    } catch (const std::exception& e) {
      other = e.what();
    }
  });
  t.join();
  EXPECT_EQ(other, "6.000000");
  EXPECT_SHAPE_ERROR_ONCE(y.to_vector<float>(), "index 9");
}

// With sync checks on, at the call, as on the CPU; ops that write into the caller's tensor
// always check at the call, and leave it as it was.
TEST_P(DeferredChecks, SyncChecksAndInPlaceOpsRaiseAtTheCall) {
  {
    struct SyncChecks {
      bool before = ferry::debug::sync_checks();
      SyncChecks() { ferry::debug::set_sync_checks(true); }
      ~SyncChecks() { ferry::debug::set_sync_checks(before); }
    } on;
    EXPECT_SHAPE_ERROR_ONCE(ferry::index_select(rows(), 0, index({4})), "index 4");
  }

  Tensor w = rows();
  EXPECT_SHAPE_ERROR_ONCE(ferry::embedding_renorm_(w, index({0, 6}), 1.0), "embedding_renorm_",
                          "index 6");
  EXPECT_EQ(w.to_vector<float>(), rows().to_vector<float>());
}

// A migration reads its sources: a pending error is raised before anything moves.
TEST_P(DeferredChecks, MigrateRaisesBeforeMoving) {
  ferry::nn::Linear model(3, 2);
  ferry::migrate(model, dev());
  Tensor y = ferry::index_select(rows(), 0, index({8}));
  EXPECT_SHAPE_ERROR_ONCE(ferry::migrate(model, ferry::Device::cpu()), "index 8");
  for (const Tensor& p : model.parameters()) EXPECT_EQ(p.device(), dev());
  ferry::migrate(model, ferry::Device::cpu());
  for (const Tensor& p : model.parameters()) EXPECT_EQ(p.device(), ferry::Device::cpu());
}

// The point of deferring: a forward and loss with indices in range make the host wait for the
// device nowhere (before, embedding and cross_entropy each waited once).
TEST_P(DeferredChecks, NoHostWaitAtTheCall) {
  const Tensor w = rows();
  const Tensor i = index({0, 3, 1, 2});
  ferry::synchronize(dev());
  ferry::profiler::start();
  Tensor logits = ferry::embedding(w, i);
  Tensor loss = ferry::nn::functional::cross_entropy(logits, index({0, 1, 2, 1}));
  const ferry::profiler::Profile p = ferry::profiler::stop();
  int waits = 0;
  for (const auto& e : p.events()) waits += e.kind == ferry::profiler::EventKind::wait;
  EXPECT_EQ(waits, 0);
  EXPECT_TRUE(std::isfinite(loss.item<float>()));
}

INSTANTIATE_TEST_SUITE_P(Accelerators, DeferredChecks,
                         ::testing::ValuesIn(ferry_test::accelerator_names()),
                         [](const auto& info) { return ferry_test::backend_of(info.param); });

TEST(DeferredChecksCpu, RaiseAtTheCall) {
  const Tensor x = ferry::ones({4, 3});
  EXPECT_FERRY_ERROR(ferry::index_select(x, 0, ferry::tensor<std::int64_t>({4})), ferry::ShapeError,
                     "index_select", "index 4");
  EXPECT_FERRY_ERROR(
      ferry::nn::functional::binary_cross_entropy(ferry::full({2}, -0.5), ferry::zeros({2})),
      ferry::ValueError, "binary_cross_entropy", "[0, 1]");
}

}  // namespace
