// tests/test_copy_routes.cpp — Note [Copy routes] (runtime/copy_route.hpp):
// the route is chosen once, from the devices' capabilities, and the plan's
// explain() and peak_bytes() report the route that Tensor::to and the
// planner's execution take. Two "peer" devices that copy between each other
// stand in for two GPUs with peer access.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "copy_route.hpp"
#include "ferry/backend.hpp"
#include "ferry/ferry.hpp"
#include "ferry/transfer.hpp"
#include "host_test_device.hpp"

namespace {

using ferry::detail::CopyRoute;

struct Counts {
  std::atomic<int> peer{0}, to_host{0}, from_host{0};
};

// Claims peer copies; copies from a device of its own backend unless
// `refuse_peer`, like a GPU without peer access to the other.
class PeerDevice final : public ferry_test::HostTestDevice {
 public:
  PeerDevice(std::string type, int index, bool refuse_peer)
      : HostTestDevice(type, index, /*host_visible=*/false), refuse_peer_(refuse_peer) {}
  Counts counts;

  ferry::DeviceCapabilities capabilities() const override { return {.peer_copy = true}; }
  void copy_from_host(ferry::Buffer& d, std::size_t o, const void* s, std::size_t n) override {
    ++counts.from_host;
    HostTestDevice::copy_from_host(d, o, s, n);
  }
  void copy_to_host(void* d, const ferry::Buffer& s, std::size_t o, std::size_t n) override {
    ++counts.to_host;
    HostTestDevice::copy_to_host(d, s, o, n);
  }
  bool copy_from_peer(ferry::Buffer& d, std::size_t doff, ferry::DeviceImpl& src,
                      const ferry::Buffer& s, std::size_t soff, std::size_t n) override {
    if (refuse_peer_ || !dynamic_cast<PeerDevice*>(&src)) return false;
    ++counts.peer;
    std::memcpy(ferry_test::bytes_of(d) + doff, ferry_test::bytes_of(s) + soff, n);
    return true;
  }

 private:
  bool refuse_peer_;
};

// peer:0 and peer:1 copy between each other; peer:2 refuses.
class PeerBackend final : public ferry::Backend {
 public:
  explicit PeerBackend(std::string name)
      : name_(name), d0_(name, 0, false), d1_(name, 1, false), d2_(name, 2, true) {}
  std::string name() const override { return name_; }
  std::vector<ferry::DeviceImpl*> devices() override { return {&d0_, &d1_, &d2_}; }

 private:
  std::string name_;
  PeerDevice d0_, d1_, d2_;
};

PeerDevice& device(const std::string& spec) {
  static bool registered = [] {
    ferry::register_backend(std::make_unique<PeerBackend>("peer"));
    ferry::register_backend(std::make_unique<PeerBackend>("otherpeer"));
    return true;
  }();
  (void)registered;
  return dynamic_cast<PeerDevice&>(ferry::device_impl(ferry::Device(spec)));
}

void reset(std::initializer_list<PeerDevice*> ds) {
  for (PeerDevice* d : ds) d->counts.peer = d->counts.to_host = d->counts.from_host = 0;
}

TEST(CopyRoutes, TheRouteFollowsTheCapabilities) {
  using ferry::detail::copy_route;
  ferry::DeviceImpl& cpu = ferry::device_impl(ferry::Device::cpu());
  PeerDevice &p0 = device("peer:0"), &p1 = device("peer:1"), &other = device("otherpeer:0");
  EXPECT_EQ(copy_route(cpu, cpu), CopyRoute::on_device);
  EXPECT_EQ(copy_route(p0, p0), CopyRoute::on_device);
  EXPECT_EQ(copy_route(cpu, p0), CopyRoute::upload);
  EXPECT_EQ(copy_route(p0, cpu), CopyRoute::host);  // straight into the CPU's memory
  EXPECT_EQ(copy_route(p0, p1), CopyRoute::peer);
  EXPECT_EQ(copy_route(p0, other), CopyRoute::staged);  // peers of one backend only
  // What the buffers say overrides the devices' defaults.
  EXPECT_EQ(copy_route(p0, true, p1, false), CopyRoute::upload);
  EXPECT_EQ(copy_route(p0, false, p1, true), CopyRoute::host);
}

TEST(CopyRoutes, TensorToTakesThePeerRoute) {
  PeerDevice &p0 = device("peer:0"), &p1 = device("peer:1"), &p2 = device("peer:2");
  const std::vector<float> v = {1, 2, 3, 4, 5};
  ferry::Tensor a = ferry::tensor(v).to(p0.device());
  reset({&p0, &p1, &p2});
  ferry::Tensor b = a.to(p1.device());
  EXPECT_EQ(p1.counts.peer, 1);
  EXPECT_EQ(p0.counts.to_host, 0);
  EXPECT_EQ(b.to(ferry::Device::cpu()).to_vector<float>(), v);
  // A refused peer copy goes through the host.
  reset({&p0, &p1, &p2});
  ferry::Tensor c = a.to(p2.device());
  EXPECT_EQ(p2.counts.peer, 0);
  EXPECT_EQ(p0.counts.to_host, 1);
  EXPECT_EQ(p2.counts.from_host, 1);
  EXPECT_EQ(c.to(ferry::Device::cpu()).to_vector<float>(), v);
}

TEST(CopyRoutes, ThePlanReportsTheRouteThatRuns) {
  PeerDevice &p0 = device("peer:0"), &p1 = device("peer:1");
  std::vector<std::pair<std::string, ferry::Tensor>> tensors;
  for (int i = 0; i < 3; ++i)
    tensors.push_back({"t" + std::to_string(i), ferry::full({100}, i).to(p0.device())});
  auto plan = ferry::plan_migration(tensors, p1.device());
  const std::string e = plan.explain();
  EXPECT_NE(e.find("peer:0 -> peer:1: 3 storages (0 converted), 1.2 KiB, 3 separate "
                   "allocations, peer copies"),
            std::string::npos)
      << e;
  EXPECT_EQ(plan.peak_bytes(ferry::Device::cpu()), 0u) << e;  // nothing staged in host memory
  reset({&p0, &p1});
  plan.execute();
  EXPECT_EQ(p1.counts.peer, 3);
  EXPECT_EQ(p0.counts.to_host, 0);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(tensors[std::size_t(i)].second.to(ferry::Device::cpu()).to_vector<float>(),
              std::vector<float>(100, float(i)));
}

TEST(CopyRoutes, AnUploadIsReportedAsStaged) {
  PeerDevice& p0 = device("peer:0");
  auto plan = ferry::plan_migration({{"x", ferry::zeros({256})}}, p0.device());
  const std::string e = plan.explain();
  EXPECT_NE(e.find("uploaded through staging memory, 1 chunk(s)"), std::string::npos) << e;
  EXPECT_GT(plan.peak_bytes(ferry::Device::cpu()), 0u) << e;
}

}  // namespace
