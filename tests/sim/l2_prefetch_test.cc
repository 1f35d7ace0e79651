//===- l2_prefetch_test.cc - Reading device memory into the L2 ahead -----===//
//
// The rules of docs/npu.md ("L2 prefetches"): a prefetch reads a range's
// lines from HBM into the L2 (HBM's latency, then its bytes at HBM's
// bandwidth; one right behind another on its stream continues its requests
// without the latency), so a kernel that reads the range after it hits the
// L2; lines already held cost nothing; a kernel racing its prefetch reads
// from HBM only what the prefetch has not started, and waits for a piece in
// flight, so no byte is read twice; a chip without an L2 does nothing; bad
// ranges are refused when the prefetch is enqueued.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <functional>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "graph/support/status.h"
#include "sim/machine/machine.h"
#include "sim/model/device.h"
#include "tests/sim/sim_test_util.h"

namespace kiln::sim {
namespace {

using testing::Load;

constexpr int64_t kBytes = 1 << 20;
const std::string kRead = ".program t\n.arg x f16[524288]\n  copy_gm_ub UB[0], x[0], len=65536\n"
                          "  copy_gm_ub UB[0], x[983040], len=65536\n";

// A prefetch of the first `bytes` of `l`'s first argument on a stream of
// its own, then `l`'s kernel (one block) on another, after what `before`
// enqueues (an event to wait for, an AICPU task); the run's figures.
absl::StatusOr<RunStats> RunWithPrefetch(testing::Loaded& l, int64_t bytes,
                                         const std::function<absl::Status(Device&, StreamId compute,
                                                                          StreamId ahead)>& before) {
  Device& dev = *l.dev;
  const StreamId compute = dev.CreateStream(), ahead = dev.CreateStream();
  KILN_RETURN_IF_ERROR(dev.PrefetchL2(ahead, l.addrs[0], bytes));
  KILN_RETURN_IF_ERROR(before(dev, compute, ahead));
  KILN_RETURN_IF_ERROR(dev.Launch(compute, l.kernel, 1, l.addrs));
  return dev.Run();
}

TEST(L2Prefetch, AKernelAfterItsPrefetchHitsTheL2) {
  Machine m = DefaultMachine();
  auto l = Load(kRead, m);
  ASSERT_TRUE(l);
  auto r = RunWithPrefetch(*l, kBytes, [](Device& dev, StreamId compute, StreamId ahead) {
    const EventId fetched = dev.CreateEvent();
    KILN_RETURN_IF_ERROR(dev.RecordEvent(ahead, fetched));
    return dev.WaitEvent(compute, fetched);
  });
  ASSERT_TRUE(r.ok()) << r.status();
  // HBM's latency, then the megabyte at HBM's bandwidth (alone on it).
  const double fetch = m.chip().hbm_latency_cycles() + kBytes / HbmBytesPerCycle(m);
  ASSERT_EQ(r->kernels.size(), 1u);
  EXPECT_NEAR(r->kernels[0].start_cycle, fetch, 1.0);
  EXPECT_EQ(r->l2_prefetch_bytes, kBytes);
  EXPECT_EQ(r->hbm_read_bytes, kBytes);  // the prefetch's, and nothing of the kernel's
  EXPECT_EQ(r->kernels[0].hbm_read_bytes, 0);
  EXPECT_EQ(r->kernels[0].l2_hit_bytes, 2 * 65536);

  // The same kernel without the prefetch reads HBM and takes longer.
  auto cold = Load(kRead, m);
  auto rc = cold->Run();
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(rc->kernels[0].hbm_read_bytes, 2 * 65536);
  const double with = r->kernels[0].end_cycle - r->kernels[0].start_cycle;
  const double without = rc->kernels[0].end_cycle - rc->kernels[0].start_cycle;
  EXPECT_LT(with, without - (m.chip().hbm_latency_cycles() - m.chip().l2_hit_latency_cycles()) + 1);
}

// A device with a megabyte allocated and a stream: nothing else.
struct Bare {
  std::unique_ptr<Device> dev;
  DevAddr a = 0;
  StreamId s = -1;
};
Bare MakeBare(const Machine& m) {
  Bare b;
  auto d = Device::Create(m);
  EXPECT_TRUE(d.ok()) << d.status();
  b.dev = *std::move(d);
  auto a = b.dev->Malloc(kBytes);
  EXPECT_TRUE(a.ok());
  b.a = *a;
  b.s = b.dev->CreateStream();
  return b;
}

TEST(L2Prefetch, LinesAlreadyHeldCostNothing) {
  Machine m = DefaultMachine();
  Bare b = MakeBare(m);
  Device& dev = *b.dev;
  const DevAddr a = b.a;
  const StreamId s = b.s;
  ASSERT_TRUE(dev.PrefetchL2(s, a, kBytes).ok());
  ASSERT_TRUE(dev.PrefetchL2(s, a, kBytes / 2).ok());  // held since the first
  auto r = dev.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->l2_prefetch_bytes, kBytes);
  EXPECT_EQ(r->hbm_read_bytes, kBytes);
  // The second, right behind the first, continues its requests: no
  // latency of its own, and nothing moves.
  EXPECT_NEAR(r->total_cycles, m.chip().hbm_latency_cycles() + kBytes / HbmBytesPerCycle(m), 1.0);
  // Each run starts with a cold L2: the same figures again.
  ASSERT_TRUE(dev.PrefetchL2(s, a, kBytes).ok());
  auto again = dev.Run();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->l2_prefetch_bytes, kBytes);
}

TEST(L2Prefetch, AKernelRacingItsPrefetchReadsNoByteTwice) {
  // The kernel starts with its prefetch, on another stream: what it reads
  // before the prefetch's pieces have started it reads from HBM, and the
  // prefetch then skips those lines; together they read the megabyte once.
  Machine m = DefaultMachine();
  auto l = Load(kRead, m);
  ASSERT_TRUE(l);
  auto r = RunWithPrefetch(*l, kBytes, [](Device&, StreamId, StreamId) { return absl::OkStatus(); });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->hbm_read_bytes, kBytes);
  EXPECT_EQ(r->l2_prefetch_bytes + r->kernels[0].hbm_read_bytes, kBytes);
  EXPECT_GT(r->kernels[0].hbm_read_bytes, 0);  // its first load went out before any piece had started
}

TEST(L2Prefetch, AKernelReadingAPieceInFlightWaitsForIt) {
  // HBM at 64 B/cycle: each 64 KiB piece of the prefetch is 1024 cycles in
  // flight, the third from 500 + 2048 cycles on. The kernel starts after an
  // AICPU task, with the third piece in flight, and reads it first: it
  // waits for the piece and hits (a miss merged with the fill outstanding
  // for its lines), then reads the first two, arrived. No line crosses from
  // HBM twice.
  Machine m = DefaultMachine();
  m.mutable_chip()->set_hbm_bandwidth_gbps(64 * m.chip().clock_mhz() / 1e3);
  const double piece = 65536 / 64.0, latency = m.chip().hbm_latency_cycles();
  auto l = Load(".program t\n.arg x f16[131072]\n  copy_gm_ub UB[0], x[131072], len=65536\n"
                "  copy_gm_ub UB[0], x[0], len=65536\n  copy_gm_ub UB[0], x[65536], len=65536\n", m);
  ASSERT_TRUE(l);
  auto r = RunWithPrefetch(*l, 4 * 65536, [](Device& dev, StreamId compute, StreamId) {
    return dev.LaunchAicpu(compute, "delay", 0, [](Device&) { return absl::OkStatus(); });
  });
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GT(r->kernels[0].start_cycle, latency + 2 * piece);
  ASSERT_LT(r->kernels[0].start_cycle, latency + 3 * piece);
  EXPECT_EQ(r->kernels[0].hbm_read_bytes, 0);
  EXPECT_EQ(r->kernels[0].l2_hit_bytes, 3 * 65536);
  EXPECT_EQ(r->hbm_read_bytes, 4 * 65536);
  EXPECT_EQ(r->l2_prefetch_bytes, 4 * 65536);
  // Its first load completes after the piece has arrived.
  EXPECT_GE(r->kernels[0].end_cycle, latency + 3 * piece);
}

TEST(L2Prefetch, WithoutAnL2ItDoesNothing) {
  Machine m = DefaultMachine();
  m.mutable_chip()->set_l2_size_mib(0);
  Bare b = MakeBare(m);
  ASSERT_TRUE(b.dev->PrefetchL2(b.s, b.a, kBytes).ok());
  Device& dev = *b.dev;
  auto r = dev.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->l2_prefetch_bytes, 0);
  EXPECT_EQ(r->hbm_read_bytes, 0);
  EXPECT_EQ(r->total_cycles, 0);
}

TEST(L2Prefetch, BadRangesAreRefusedWhenEnqueued) {
  Bare b = MakeBare(DefaultMachine());
  EXPECT_FALSE(b.dev->PrefetchL2(b.s, b.a, -1).ok());
  EXPECT_FALSE(b.dev->PrefetchL2(b.s, b.a, 2 * kBytes).ok());  // past its allocation
  EXPECT_FALSE(b.dev->PrefetchL2(b.s + 1, b.a, kBytes).ok());
  EXPECT_TRUE(b.dev->PrefetchL2(b.s, b.a, 0).ok());
}

}  // namespace
}  // namespace kiln::sim
