// tests/test_pinned_memory.cpp — Note [Pinned host memory]
// (runtime/pinned_memory.hpp): Tensor::pin_memory, the copy route `dma` in
// Tensor::to, copy_ and the transfer planner, the pinned cache, the data
// loader's pin_memory, and failures. A test device "pin" (memory the host
// cannot reach, a DMA engine that counts its copies) stands in for a GPU; the
// PinnedTransfer tests do the same on vulkan:0 through the real
// VK_EXT_external_memory_host import, with its memory mapped and, under
// FERRY_VULKAN_FORCE_STAGING=1 (the transfer_vulkan_staging CTest entry), not.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/data.hpp"
#include "ferry/ferry.hpp"
#include "ferry/transfer.hpp"
#include "host_test_device.hpp"

namespace {

// A caller's host memory seen as a buffer of the pin device.
class Registered final : public ferry::Buffer {
 public:
  Registered(void* p, std::size_t n) : Buffer(n), p_(static_cast<std::byte*>(p)) {}
  void* host_ptr() const override { return p_; }
  std::byte* bytes() const { return p_; }

 private:
  std::byte* p_;
};

// The bytes of a pin-device buffer: its own memory, or the host memory it registered.
std::byte* raw(const ferry::Buffer& b) {
  if (void* p = b.host_ptr()) return static_cast<std::byte*>(p);
  return ferry_test::bytes_of(b);
}

class PinDevice final : public ferry_test::HostTestDevice {
 public:
  PinDevice() : HostTestDevice("pin", 0, /*host_visible=*/false) {}
  std::atomic<int> dma{0}, staged{0}, registered{0}, live_registrations{0};
  bool refuse = false;

  ferry::DeviceCapabilities capabilities() const override {
    return {.sub_buffers = false, .host_registration = true};
  }
  std::unique_ptr<ferry::Buffer> register_host_memory(void* p, std::size_t n) override {
    ferry::failure_point(*this, "register_host_memory");
    EXPECT_EQ(std::uintptr_t(p) % ferry::kPinnedAlignment, 0u);
    EXPECT_EQ(n % ferry::kPinnedAlignment, 0u);
    if (refuse) return nullptr;
    ++registered;
    ++live_registrations;
    struct Counted final : ferry::Buffer {
      Counted(void* p, std::size_t n, std::atomic<int>& live)
          : Buffer(n), inner(p, n), live(live) {}
      ~Counted() override { --live; }
      void* host_ptr() const override { return inner.host_ptr(); }
      Registered inner;
      std::atomic<int>& live;
    };
    return std::make_unique<Counted>(p, n, live_registrations);
  }
  void copy_from_host(ferry::Buffer& d, std::size_t o, const void* s, std::size_t n) override {
    ++staged;
    HostTestDevice::copy_from_host(d, o, s, n);
  }
  void copy_to_host(void* d, const ferry::Buffer& s, std::size_t o, std::size_t n) override {
    ++staged;
    HostTestDevice::copy_to_host(d, s, o, n);
  }
  void copy_within(ferry::Buffer& d, std::size_t doff, const ferry::Buffer& s, std::size_t soff,
                   std::size_t n) override {
    const bool host_side = d.host_ptr() || s.host_ptr();
    if (host_side) ++dma;
    std::memcpy(raw(d) + doff, raw(s) + soff, n);
  }
};

class PinBackend final : public ferry::Backend {
 public:
  std::string name() const override { return "pin"; }
  std::vector<ferry::DeviceImpl*> devices() override { return {&d_}; }
  PinDevice d_;
};

PinDevice& pin_device() {
  static PinDevice* d = [] {
    auto b = std::make_unique<PinBackend>();
    PinDevice* p = &b->d_;
    ferry::register_backend(std::move(b));
    return p;
  }();
  d->dma = d->staged = 0;
  d->refuse = false;
  return *d;
}

std::vector<float> iota(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float(i) * 0.5f - 3.0f;
  return v;
}

TEST(PinnedMemory, PinMemoryCopiesIntoPinnedMemory) {
  PinDevice& pin = pin_device();
  ferry::Tensor a = ferry::tensor(iota(12)).reshape({3, 4});
  EXPECT_FALSE(a.is_pinned());
  ferry::Tensor p = a.pin_memory(pin.device());
  EXPECT_TRUE(p.is_pinned());
  EXPECT_TRUE(p.is_pinned(pin.device()));
  EXPECT_FALSE(p.is_pinned(ferry::Device::cpu()));
  EXPECT_TRUE(p.device().is_cpu());
  EXPECT_EQ(p.sizes(), a.sizes());
  EXPECT_EQ(p.to_vector<float>(), a.to_vector<float>());
  EXPECT_EQ(std::uintptr_t(p.storage()->buffer().host_ptr()) % ferry::kPinnedAlignment, 0u);
  // Already pinned: the same tensor. A strided view pins as a contiguous copy.
  EXPECT_TRUE(p.pin_memory(pin.device()).is_same(p));
  ferry::Tensor t = a.t().pin_memory(pin.device());
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.to_vector<float>(), a.t().contiguous().to_vector<float>());
  // pin_memory() pins for every device that gains by it: this one is among them.
  EXPECT_TRUE(a.pin_memory().is_pinned(pin.device()));
}

TEST(PinnedMemory, GradientFlowsThroughPinMemory) {
  PinDevice& pin = pin_device();
  ferry::Tensor a = ferry::tensor(iota(6));
  a.requires_grad_(true);
  ferry::Tensor p = a.pin_memory(pin.device());
  EXPECT_TRUE(p.requires_grad());
  ferry::sum(p * p).backward();
  const std::vector<float> g = a.grad().to_vector<float>(), v = iota(6);
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_FLOAT_EQ(g[i], 2 * v[i]);
}

TEST(PinnedMemory, CopiesToAndFromTheDeviceGoByDma) {
  PinDevice& pin = pin_device();
  const std::vector<float> v = iota(1000);
  ferry::Tensor p = ferry::tensor(v).pin_memory(pin.device());
  ferry::Tensor d = p.to(pin.device());
  EXPECT_EQ(pin.dma, 1);
  EXPECT_EQ(pin.staged, 0);
  // Back into the pinned tensor: the device writes it by DMA.
  p.zero_();
  p.copy_(d);
  EXPECT_EQ(pin.dma, 2);
  EXPECT_EQ(pin.staged, 0);
  EXPECT_EQ(p.to_vector<float>(), v);
  // An unpinned tensor stages.
  ferry::Tensor u = ferry::tensor(v).to(pin.device());
  EXPECT_EQ(pin.staged, 1);
  EXPECT_EQ(u.cpu().to_vector<float>(), v);
}

TEST(PinnedMemory, ViewsOfPinnedMemoryCopyFromTheirOffset) {
  PinDevice& pin = pin_device();
  const std::vector<float> v = iota(64);
  ferry::Tensor p = ferry::tensor(v).pin_memory(pin.device());
  ferry::Tensor d = p.narrow(0, 10, 20).to(pin.device());
  EXPECT_EQ(pin.dma, 1);
  EXPECT_EQ(d.cpu().to_vector<float>(), std::vector<float>(v.begin() + 10, v.begin() + 30));
}

TEST(PinnedMemory, ThePlannerCopiesPinnedStoragesByDma) {
  PinDevice& pin = pin_device();
  const std::vector<float> v = iota(300), w = iota(7);
  ferry::Tensor a = ferry::tensor(v).pin_memory(pin.device());
  ferry::Tensor b = ferry::tensor(w);  // not pinned: staged
  ferry::TransferPlan plan = ferry::plan_migration({{"a", a}, {"b", b}}, pin.device());
  const std::string e = plan.explain();
  EXPECT_NE(e.find("of which 1 storages (1.2 KiB) copied by DMA from pinned memory"),
            std::string::npos)
      << e;
  plan.execute();
  EXPECT_EQ(pin.dma, 1);
  EXPECT_GE(pin.staged, 1);
  EXPECT_EQ(a.device(), pin.device());
  EXPECT_EQ(a.cpu().to_vector<float>(), v);
  EXPECT_EQ(b.cpu().to_vector<float>(), w);
}

TEST(PinnedMemory, FreedBlocksAreCachedAndReleased) {
  PinDevice& pin = pin_device();
  ferry::empty_pinned_cache();
  const int registered = pin.registered;
  const ferry::MemoryStats s0 = ferry::pinned_memory_stats();
  { ferry::Tensor p = ferry::zeros({1000}).pin_memory(pin.device()); }
  EXPECT_EQ(pin.registered, registered + 1);
  const ferry::MemoryStats s1 = ferry::pinned_memory_stats();
  EXPECT_EQ(s1.allocated, s0.allocated);
  EXPECT_EQ(s1.reserved, s0.reserved + 4096);  // cached, still registered
  {
    ferry::Tensor p = ferry::zeros({900}).pin_memory(pin.device());  // the same capacity
    EXPECT_EQ(pin.registered, registered + 1);                       // no new registration
    EXPECT_EQ(ferry::pinned_memory_stats().cache_hits, s1.cache_hits + 1);
  }
  const int live = pin.live_registrations;
  ferry::empty_pinned_cache();
  EXPECT_EQ(pin.live_registrations, live - 1);
  EXPECT_EQ(ferry::pinned_memory_stats().reserved, ferry::pinned_memory_stats().allocated);
}

TEST(PinnedMemory, BadInputAndRefusals) {
  PinDevice& pin = pin_device();
  ferry::Tensor a = ferry::tensor(iota(10));
  EXPECT_THROW(a.to(pin.device()).pin_memory(), ferry::DeviceError);
  EXPECT_THROW(a.pin_memory(ferry::Device::cpu()), ferry::DeviceError);
  const ferry::Device nowhere = ferry::Device::unchecked("nosuchbackend", 0);
  EXPECT_THROW(a.pin_memory(nowhere), ferry::DeviceError);
  EXPECT_FALSE(a.is_pinned(nowhere));
  pin.refuse = true;
  ferry::empty_pinned_cache();
  try {
    a.pin_memory(pin.device());
    FAIL() << "a refused registration must throw";
  } catch (const ferry::UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("pin:0 cannot pin"), std::string::npos) << e.what();
  }
  pin.refuse = false;
  // A driver error while registering: the error, and nothing left registered.
  const int live = pin.live_registrations;
  ferry::testing::fail_at(0);
  EXPECT_THROW(a.pin_memory(pin.device()), ferry::BackendError);
  ferry::testing::fail_at(-1);
  EXPECT_EQ(pin.live_registrations, live);
  EXPECT_EQ(a.pin_memory(pin.device()).to_vector<float>(), iota(10));
}

// A dataset of n samples of 4 floats.
std::shared_ptr<ferry::data::TensorDataset> dataset(std::int64_t n) {
  return std::make_shared<ferry::data::TensorDataset>(
      std::vector<ferry::Tensor>{ferry::arange(0, double(n * 4)).reshape({n, 4})});
}

TEST(PinnedMemory, TheDataLoaderPinsItsBatches) {
  PinDevice& pin = pin_device();
  for (std::size_t workers : {0, 2}) {
    ferry::data::DataLoaderOptions o;
    o.batch_size = 3;
    o.num_workers = workers;
    o.pin_memory = true;  // batches stay on the CPU, pinned for every device that gains
    ferry::data::DataLoader cpu_loader(dataset(10), o);
    std::int64_t rows = 0;
    for (const ferry::data::Batch& b : cpu_loader) {
      EXPECT_TRUE(b[0].is_pinned(pin.device()));
      rows += b[0].size(0);
    }
    EXPECT_EQ(rows, 10);
    o.device = pin.device();  // pinned, then moved by DMA
    ferry::data::DataLoader loader(dataset(10), o);
    pin.dma = 0;
    std::vector<float> seen;
    for (const ferry::data::Batch& b : loader) {
      EXPECT_EQ(b[0].device(), pin.device());
      for (float x : b[0].cpu().to_vector<float>()) seen.push_back(x);
    }
    EXPECT_EQ(pin.dma, 4);
    EXPECT_EQ(seen, ferry::arange(0, 40.0).to_vector<float>());
  }
}

// The same on vulkan:0: VK_EXT_external_memory_host's import, copies by vkCmdCopyBuffer
// (also where its memory is mapped, as on lavapipe and on GPUs with a resizable BAR).
TEST(PinnedTransfer, VulkanCopiesFromAndToPinnedMemory) {
  if (!ferry::is_available("vulkan:0")) GTEST_SKIP() << "vulkan:0 is not available";
  const ferry::Device vk("vulkan:0");
  const ferry::DeviceInfo info = ferry::device_impl(vk).info();
  if (!info.caps.host_registration) GTEST_SKIP() << "vulkan:0 has no VK_EXT_external_memory_host";
  const std::vector<float> v = iota(70000);
  ferry::Tensor p = ferry::tensor(v).pin_memory(vk);
  ASSERT_TRUE(p.is_pinned(vk));
  ferry::Tensor d = p.to(vk);
  EXPECT_EQ(d.cpu().to_vector<float>(), v);
  ferry::Tensor back = ferry::zeros({70000}).pin_memory(vk);
  back.copy_(d * 2.0);
  std::vector<float> twice(v);
  for (float& x : twice) x *= 2;
  EXPECT_EQ(back.to_vector<float>(), twice);
  // A model's worth through the planner, pinned and not, in one plan.
  ferry::Tensor a = ferry::tensor(iota(5000)).pin_memory(vk), b = ferry::tensor(iota(33));
  ferry::TransferPlan plan = ferry::plan_migration({{"a", a}, {"b", b}}, vk);
  const std::string e = plan.explain();  // by DMA even where vulkan:0's memory is mapped
  EXPECT_NE(e.find("of which 1 storages (19.5 KiB) copied by DMA from pinned memory"),
            std::string::npos)
      << e;
  plan.execute();
  EXPECT_EQ(a.cpu().to_vector<float>(), iota(5000));
  EXPECT_EQ(b.cpu().to_vector<float>(), iota(33));
}

}  // namespace
