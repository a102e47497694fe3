// Barrier placement (Note [Barrier placement]) on random command sequences, against a
// brute-force model, plus a check that the masks returned order every hazard in the whole run.
#include <gtest/gtest.h>

#include <algorithm>
#include <bitset>
#include <optional>
#include <random>
#include <vector>

#include "vulkan/barrier_tracker.hpp"

using namespace ferry::vulkan;

namespace {

using Bytes = std::bitset<64>;  // ranges stay below 32 bytes; a whole-size range runs to 64

Bytes bytes_of(const Range& r) {
  Bytes b;
  const std::uint64_t end =
      r.size == kWholeSize ? 64 : std::min<std::uint64_t>(64, r.offset + r.size);
  for (std::uint64_t i = r.offset; i < end; ++i) b.set(i);
  return b;
}

// One access by one command (a host read is a command of stage host).
struct Acc {
  std::size_t cmd;
  std::uint64_t buffer;
  Bytes bytes;
  bool write;
  Stage stage;
  AccessMask bit;
};

bool conflict(const Acc& a, const Acc& b) {
  return a.buffer == b.buffer && (a.bytes & b.bytes).any() && (a.write || b.write);
}

struct Cmd {
  bool host_read = false;
  Stage stage = Stage::compute;
  std::vector<Use> uses;
  std::vector<Range> ranges;  // host reads
};

std::vector<Cmd> random_sequence(std::mt19937_64& rng, int max_len) {
  auto pick = [&](int n) { return int(rng() % std::uint64_t(n)); };
  auto range = [&] {
    Range r{std::uint64_t(pick(3)), std::uint64_t(pick(24)), std::uint64_t(1 + pick(8))};
    if (pick(10) == 0) r.size = kWholeSize;
    if (pick(20) == 0) r.size = 0;
    return r;
  };
  std::vector<Cmd> seq(1 + pick(max_len));
  for (Cmd& c : seq) {
    c.host_read = pick(10) == 0;
    c.stage = pick(10) < 7 ? Stage::compute : Stage::transfer;
    const int n = 1 + pick(3);
    for (int i = 0; i < n; ++i) {
      if (c.host_read)
        c.ranges.push_back(range());
      else
        c.uses.push_back({range(), pick(2) ? Access::write : Access::read});
    }
  }
  return seq;
}

std::vector<Acc> accesses_of(const Cmd& c, std::size_t index) {
  std::vector<Acc> out;
  for (const Range& r : c.ranges) {
    out.push_back({index, r.buffer, bytes_of(r), false, Stage::host, mask(AccessBit::host_read)});
  }
  for (const Use& u : c.uses) {
    const bool write = u.access == Access::write;
    out.push_back(
        {index, u.range.buffer, bytes_of(u.range), write, c.stage, access_bit(c.stage, u.access)});
  }
  return out;
}

// The brute-force model: scan every access since the last barrier (device) or host barrier.
std::optional<Barrier> model_barrier(const std::vector<Acc>& since, const std::vector<Acc>& now,
                                     bool host_read) {
  bool raw = false, waw = false, war = false;
  for (const Acc& n : now) {
    for (const Acc& h : since) {
      if (!conflict(h, n)) continue;
      (h.write ? (n.write ? waw : raw) : war) = true;
    }
  }
  if (!raw && !waw && !war) return std::nullopt;
  Barrier b;
  for (const Acc& h : since) {
    b.src_stages |= mask(h.stage);
    if (h.write) b.src_access |= h.bit;
  }
  if (host_read) {
    b.dst_stages = mask(Stage::host);
    b.dst_access = mask(AccessBit::host_read);
    b.kind = BarrierKind::host_read;
  } else {
    b.dst_stages = kDeviceStages;
    b.dst_access = b.src_access ? kDeviceAccess : 0;
    b.kind = raw ? BarrierKind::raw : waw ? BarrierKind::waw : BarrierKind::war;
  }
  return b;
}

// Whether `b`, recorded between a and a later c, orders a before c (and, for a write, makes it
// available and visible to c). Stricter than Vulkan (no chains through several barriers).
bool orders(const Barrier& b, const Acc& a, const Acc& c) {
  auto stage_in = [](StageMask m, Stage s) {
    return (m & mask(s)) || (s != Stage::host && (m & mask(Stage::all_commands)));
  };
  auto access_in = [](AccessMask m, const Acc& x) {
    if (m & x.bit) return true;
    if (x.stage == Stage::host) return false;
    return (m & mask(x.write ? AccessBit::memory_write : AccessBit::memory_read)) != 0;
  };
  if (!stage_in(b.src_stages, a.stage) || !stage_in(b.dst_stages, c.stage)) return false;
  return !a.write || (access_in(b.src_access, a) && access_in(b.dst_access, c));
}

// Every conflicting pair in the run has a barrier between them that orders it.
void expect_sound(const std::vector<Cmd>& seq, const std::vector<std::optional<Barrier>>& got) {
  std::vector<Acc> all;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    for (const Acc& a : accesses_of(seq[i], i)) all.push_back(a);
  }
  for (const Acc& a : all) {
    for (const Acc& c : all) {
      // A host read happens after the host waited for the queue and before it submits more
      // work, so nothing recorded later can race with it.
      if (c.cmd <= a.cmd || a.stage == Stage::host || !conflict(a, c)) continue;
      bool ordered = false;
      for (std::size_t k = a.cmd + 1; k <= c.cmd && !ordered; ++k) {
        ordered = got[k] && orders(*got[k], a, c);
      }
      ASSERT_TRUE(ordered) << "hazard between command " << a.cmd << " and " << c.cmd;
    }
  }
}

}  // namespace

TEST(VulkanBarrierModel, RandomSequencesMatchTheBruteForceModel) {
  std::mt19937_64 rng(20240607);
  std::uint64_t barriers = 0;
  for (int run = 0; run < 3000; ++run) {
    const std::vector<Cmd> seq = random_sequence(rng, 40);
    BarrierTracker t;
    std::vector<Acc> device_since, host_since;  // the model's state
    std::vector<std::optional<Barrier>> got;
    for (std::size_t i = 0; i < seq.size(); ++i) {
      const Cmd& c = seq[i];
      const std::vector<Acc> now = accesses_of(c, i);
      got.push_back(c.host_read ? t.before_host_read(c.ranges) : t.before(c.stage, c.uses));
      const auto want = model_barrier(c.host_read ? host_since : device_since, now, c.host_read);
      ASSERT_EQ(got.back(), want) << "run " << run << ", command " << i;
      if (want) (c.host_read ? host_since : device_since).clear();
      for (const Acc& a : now) {
        if (c.host_read) continue;
        device_since.push_back(a);
        if (a.write) host_since.push_back(a);
      }
      barriers += want.has_value();
    }
    if (run % 3 == 0) expect_sound(seq, got);
    ASSERT_EQ(
        t.stats().barriers(),
        std::size_t(std::count_if(got.begin(), got.end(), [](auto& b) { return b.has_value(); })));
  }
  EXPECT_GT(barriers, 10000u) << "the sequences exercise hazards";
}

TEST(VulkanBarrierModel, SerializeModeIsSound) {
  std::mt19937_64 rng(7);
  for (int run = 0; run < 300; ++run) {
    const std::vector<Cmd> seq = random_sequence(rng, 30);
    BarrierTracker t(/*serialize=*/true);
    std::vector<std::optional<Barrier>> got;
    for (const Cmd& c : seq) {
      got.push_back(c.host_read ? t.before_host_read(c.ranges) : t.before(c.stage, c.uses));
    }
    expect_sound(seq, got);
  }
}

TEST(VulkanBarrierModel, LongSequencesWithManyBuffersMatchTheModel) {
  // Fewer, longer runs: state that lives across hundreds of commands between barriers.
  std::mt19937_64 rng(99);
  for (int run = 0; run < 20; ++run) {
    BarrierTracker t;
    std::vector<Acc> since;
    for (std::size_t i = 0; i < 2000; ++i) {
      Cmd c;
      c.stage = rng() % 2 ? Stage::compute : Stage::transfer;
      // Mostly reads of 32 buffers, few writes: long stretches without a barrier.
      for (int u = 0; u < 3; ++u) {
        const Range r{rng() % 32, rng() % 24, 1 + rng() % 8};
        c.uses.push_back({r, rng() % 16 == 0 ? Access::write : Access::read});
      }
      const std::vector<Acc> now = accesses_of(c, i);
      const auto want = model_barrier(since, now, false);
      ASSERT_EQ(t.before(c.stage, c.uses), want) << "run " << run << ", command " << i;
      if (want) since.clear();
      since.insert(since.end(), now.begin(), now.end());
    }
  }
}
