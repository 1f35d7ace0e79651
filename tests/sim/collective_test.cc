//===- collective_test.cc - AllReduce over the chip links, in the spec's terms ===//
//
// Each test states a rule of docs/npu.md ("Collectives") and checks the
// model keeps it: a reduce-scatter then an all-gather, each phase
// ceil((chips - 1) / links) rounds of the link latency plus a chunk of
// ceil(bytes / chips) bytes over one link; one collective at a time on the
// links; collectives overlap the rest of the chip; the function runs with
// the device's memory when the collective completes.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "graph/support/status.h"
#include "gtest/gtest.h"
#include "sim/machine/machine.h"
#include "sim/model/device.h"
#include "sim/model/report.h"
#include "tests/sim/sim_test_util.h"

namespace kiln::sim {
namespace {

// The default machine's figures: 1 us = 1000 cycles of latency and
// 30 GB/s = 30 bytes per cycle on each link. A message of 8 * 30 * 4096 bytes
// splits into 8 chunks of 4096 cycles each.
constexpr int64_t kBytes = 8 * 30 * 4096;

double Latency(const Machine& m) { return UsToCycles(m, m.chip_links().latency_us()); }

// One AllReduce of kBytes among 8 chips on a full mesh (m's links): a
// reduce-scatter and an all-gather round of a chunk each.
double FullMeshCycles(const Machine& m) { return 2 * (Latency(m) + (kBytes / 8) / ChipLinkBytesPerCycle(m)); }

std::unique_ptr<Device> NewDevice(const Machine& m) {
  auto d = Device::Create(m);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *std::move(d) : nullptr;
}

std::function<absl::Status(Device&)> Nothing() {
  return [](Device&) { return absl::OkStatus(); };
}

// Two collectives of kBytes among 8 chips on stream `s`, "grads" then "moments".
void EnqueueGradsAndMoments(Device& dev, StreamId s) {
  ASSERT_TRUE(dev.AllReduce(s, "grads", kBytes, 8, Nothing()).ok());
  ASSERT_TRUE(dev.AllReduce(s, "moments", kBytes, 8, Nothing()).ok());
}

TEST(CollectiveTest, FullMeshTakesOneRoundPerPhase) {
  // 8 chips and 7 links: each chip reaches all its peers at once, so the
  // reduce-scatter and the all-gather are one exchange of a chunk each.
  Machine m = DefaultMachine();
  ASSERT_EQ(m.chip_links().count(), 7);
  EXPECT_DOUBLE_EQ(ChipLinkBytesPerCycle(m), 30.0);
  const double expected = FullMeshCycles(m);
  EXPECT_DOUBLE_EQ(expected, 2 * (1000 + 4096));
  auto c = AllReduceCycles(m, kBytes, 8);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(*c, expected);

  auto dev = NewDevice(m);
  ASSERT_TRUE(dev);
  StreamId s = dev->CreateStream();
  ASSERT_TRUE(dev->AllReduce(s, "grads", kBytes, 8, Nothing()).ok());
  auto r = dev->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->total_cycles, expected);
  EXPECT_EQ(r->collectives, 1);
  EXPECT_EQ(r->collective_bytes, kBytes);
  ASSERT_EQ(r->collective_spans.size(), 1u);
  EXPECT_DOUBLE_EQ(r->collective_spans[0].first, 0);
  EXPECT_DOUBLE_EQ(r->collective_spans[0].second, expected);
  // No HBM traffic is charged for the collective.
  EXPECT_EQ(r->hbm_read_bytes + r->hbm_write_bytes, 0);
}

TEST(CollectiveTest, ChunksRoundUpToWholeBytes) {
  // One byte more than 8 equal chunks: each chunk is one byte longer.
  Machine m = DefaultMachine();
  auto c = AllReduceCycles(m, kBytes + 1, 8);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(*c, 2 * (Latency(m) + (kBytes / 8 + 1) / ChipLinkBytesPerCycle(m)));
  // An empty message still pays the latency of both phases.
  auto empty = AllReduceCycles(m, 0, 8);
  ASSERT_TRUE(empty.ok());
  EXPECT_DOUBLE_EQ(*empty, 2 * Latency(m));
}

TEST(CollectiveTest, RingTakesChipsMinusOneRoundsPerPhase) {
  // One link per chip: a ring, chips - 1 rounds in each phase.
  Machine ring = DefaultMachine();
  ring.mutable_chip_links()->set_count(1);
  const double step = Latency(ring) + (kBytes / 8) / ChipLinkBytesPerCycle(ring);
  auto c = AllReduceCycles(ring, kBytes, 8);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(*c, 2 * 7 * step);
  auto dev = NewDevice(ring);
  ASSERT_TRUE(dev);
  StreamId s = dev->CreateStream();
  ASSERT_TRUE(dev->AllReduce(s, "grads", kBytes, 8, Nothing()).ok());
  auto r = dev->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->total_cycles, 2 * 7 * step);

  // Three links: ceil(7 / 3) = 3 rounds per phase.
  Machine three = DefaultMachine();
  three.mutable_chip_links()->set_count(3);
  auto c3 = AllReduceCycles(three, kBytes, 8);
  ASSERT_TRUE(c3.ok());
  EXPECT_DOUBLE_EQ(*c3, 2 * 3 * step);

  // Links beyond chips - 1 do not help: 4 chips on 7 links is one round of
  // a quarter of the message.
  auto c4 = AllReduceCycles(DefaultMachine(), kBytes, 4);
  ASSERT_TRUE(c4.ok());
  EXPECT_DOUBLE_EQ(*c4, 2 * (Latency(ring) + (kBytes / 4) / ChipLinkBytesPerCycle(ring)));
}

TEST(CollectiveTest, OneChipCostsNothingAndStillRunsFn) {
  // Even on a machine without chip links: one chip exchanges nothing.
  Machine m = DefaultMachine();
  m.mutable_chip_links()->set_count(0);
  auto c = AllReduceCycles(m, kBytes, 1);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(*c, 0);
  auto dev = NewDevice(m);
  ASSERT_TRUE(dev);
  StreamId s = dev->CreateStream();
  int calls = 0;
  ASSERT_TRUE(dev->AllReduce(s, "solo", kBytes, 1, [&](Device&) {
                   ++calls;
                   return absl::OkStatus();
                 }).ok());
  auto r = dev->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->total_cycles, 0);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r->collectives, 1);
}

TEST(CollectiveTest, TwoCollectivesOnTwoStreamsSerializeOnTheLinks) {
  Machine m = DefaultMachine();
  const double one = FullMeshCycles(m);
  auto dev = NewDevice(m);
  ASSERT_TRUE(dev);
  StreamId s0 = dev->CreateStream(), s1 = dev->CreateStream();
  ASSERT_TRUE(dev->AllReduce(s0, "a", kBytes, 8, Nothing()).ok());
  ASSERT_TRUE(dev->AllReduce(s1, "b", kBytes, 8, Nothing()).ok());
  auto r = dev->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->total_cycles, 2 * one);
  ASSERT_EQ(r->collective_spans.size(), 2u);
  EXPECT_DOUBLE_EQ(r->collective_spans[0].first, 0);
  EXPECT_DOUBLE_EQ(r->collective_spans[0].second, one);
  EXPECT_DOUBLE_EQ(r->collective_spans[1].first, one);
  EXPECT_DOUBLE_EQ(r->collective_spans[1].second, 2 * one);
  EXPECT_EQ(r->collectives, 2);
  EXPECT_EQ(r->collective_bytes, 2 * kBytes);
}

TEST(CollectiveTest, CollectiveOverlapsAKernelOnAnotherStream) {
  Machine m = DefaultMachine();
  const double collective = FullMeshCycles(m);
  const double kernel = m.core().cube_latency_cycles() + 8 * 8 * 8;
  auto dev = NewDevice(m);
  ASSERT_TRUE(dev);
  auto f = Assemble(".program k\n  mmad.f16 L0C[0], L0A[0], L0B[0], m=8, k=8, n=8, init=1\n", "k");
  ASSERT_TRUE(f.ok()) << f.status();
  auto k = dev->LoadProgram(f->program);
  ASSERT_TRUE(k.ok()) << k.status();
  StreamId s0 = dev->CreateStream(), s1 = dev->CreateStream();
  ASSERT_TRUE(dev->AllReduce(s0, "grads", kBytes, 8, Nothing()).ok());
  ASSERT_TRUE(dev->Launch(s1, *k, 1, {}).ok());
  auto r = dev->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  // The total is the longer of the two, not their sum.
  EXPECT_DOUBLE_EQ(r->total_cycles, std::max(collective, kernel));
  ASSERT_EQ(r->kernels.size(), 1u);
  EXPECT_DOUBLE_EQ(r->kernels[0].start_cycle, 0);
  EXPECT_DOUBLE_EQ(r->kernels[0].end_cycle, kernel);
}

TEST(CollectiveTest, CollectiveOverlapsAnAicpuTaskOnAnotherStream) {
  Machine m = DefaultMachine();
  const double collective = 2 * Latency(m);  // 2 chips, an empty message: the latency of each phase
  const Aicpu& a = m.aicpu();
  const double aicpu = (a.launch_cycles() + 40000 / a.ops_per_cycle()) * m.chip().clock_mhz() / a.clock_mhz();
  ASSERT_GT(aicpu, collective);
  auto dev = NewDevice(m);
  ASSERT_TRUE(dev);
  StreamId s0 = dev->CreateStream(), s1 = dev->CreateStream();
  ASSERT_TRUE(dev->AllReduce(s0, "grads", 0, 2, Nothing()).ok());
  ASSERT_TRUE(dev->LaunchAicpu(s1, "task", 40000, Nothing()).ok());
  auto r = dev->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->total_cycles, std::max(collective, aicpu), 1e-3);
  ASSERT_EQ(r->collective_spans.size(), 1u);
  EXPECT_DOUBLE_EQ(r->collective_spans[0].first, 0);
  EXPECT_DOUBLE_EQ(r->collective_spans[0].second, collective);
}

TEST(CollectiveTest, FnSeesDeviceMemoryAndItsWritesStay) {
  // fn plays the reduction: with every chip holding the same gradients, the
  // sum over 2 chips is twice this chip's values.
  Machine m = DefaultMachine();
  auto dev = NewDevice(m);
  ASSERT_TRUE(dev);
  const int64_t n = 1024, bytes = n * sizeof(float);
  auto buf = dev->Malloc(bytes);
  ASSERT_TRUE(buf.ok());
  std::vector<float> host(n);
  for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>(i) * 0.5f;
  ASSERT_TRUE(dev->Write(*buf, host.data(), bytes).ok());
  auto twice = [&](Device& d) -> absl::Status {
    std::vector<float> v(n);
    KILN_RETURN_IF_ERROR(d.Read(*buf, v.data(), bytes));
    for (float& x : v) x *= 2;
    return d.Write(*buf, v.data(), bytes);
  };
  StreamId s = dev->CreateStream();
  ASSERT_TRUE(dev->AllReduce(s, "grads", bytes, 2, twice).ok());
  auto r = dev->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<float> back(n);
  ASSERT_TRUE(dev->Read(*buf, back.data(), bytes).ok());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 2 * host[i]) << i;

  // A timing-only run calls fn too (as it does an AICPU task's), with the same cycles.
  RunOptions timing;
  timing.functional = false;
  ASSERT_TRUE(dev->AllReduce(s, "grads", bytes, 2, twice).ok());
  auto t = dev->Run(timing);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->total_cycles, r->total_cycles);
  ASSERT_TRUE(dev->Read(*buf, back.data(), bytes).ok());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 4 * host[i]) << i;
}

TEST(CollectiveTest, AnErrorFromFnFailsTheRunNamingTheCollective) {
  auto dev = NewDevice(DefaultMachine());
  ASSERT_TRUE(dev);
  StreamId s = dev->CreateStream();
  ASSERT_TRUE(dev->AllReduce(s, "grads", 1024, 8, [](Device&) { return absl::InvalidArgumentError("boom"); }).ok());
  auto r = dev->Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "AllReduce grads: boom");
  // The device runs again after the failed run, with the links free.
  ASSERT_TRUE(dev->AllReduce(s, "grads", 1024, 8, Nothing()).ok());
  auto again = dev->Run();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->collectives, 1);
}

TEST(CollectiveTest, NoChipLinksIsRefusedAtEnqueue) {
  Machine m = DefaultMachine();
  m.mutable_chip_links()->set_count(0);
  auto c = AllReduceCycles(m, 1024, 8);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "the machine has no chip links (chip_links.count = 0): an AllReduce among 8 chips cannot run");
  auto dev = NewDevice(m);
  ASSERT_TRUE(dev);
  StreamId s = dev->CreateStream();
  absl::Status st = dev->AllReduce(s, "grads", 1024, 8, Nothing());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("AllReduce grads: the machine has no chip links (chip_links.count = 0): an "
                              "AllReduce among 8 chips cannot run"),
            std::string::npos)
      << st;
  // Nothing was enqueued: the run is empty.
  auto r = dev->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->collectives, 0);
}

TEST(CollectiveTest, BadArgumentsAreRefused) {
  Machine m = DefaultMachine();
  for (int chips : {0, -1}) {
    auto c = AllReduceCycles(m, 1024, chips);
    ASSERT_FALSE(c.ok()) << chips;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  }
  auto neg = AllReduceCycles(m, -1, 8);
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().code(), absl::StatusCode::kInvalidArgument);
  auto neg1 = AllReduceCycles(m, -1, 1);  // even where nothing would move
  ASSERT_FALSE(neg1.ok());

  auto dev = NewDevice(m);
  ASSERT_TRUE(dev);
  StreamId s = dev->CreateStream();
  EXPECT_FALSE(dev->AllReduce(s + 1, "grads", 1024, 8, Nothing()).ok());
  absl::Status chips0 = dev->AllReduce(s, "grads", 1024, 0, Nothing());
  ASSERT_FALSE(chips0.ok());
  EXPECT_NE(chips0.message().find("AllReduce grads: "), std::string::npos) << chips0;
  EXPECT_FALSE(dev->AllReduce(s, "grads", -1, 8, Nothing()).ok());
}

TEST(CollectiveTest, TraceHasAChipLinksTrackWithOneSlicePerCollective) {
  Machine m = DefaultMachine();
  const double one = FullMeshCycles(m);
  auto dev = NewDevice(m);
  ASSERT_TRUE(dev);
  StreamId s = dev->CreateStream();
  EnqueueGradsAndMoments(*dev, s);
  RunOptions o;
  o.trace = true;
  auto r = dev->Run(o);
  ASSERT_TRUE(r.ok()) << r.status();
  const Trace& t = dev->trace();
  std::vector<Trace::Slice> links;
  bool host_slice = false;
  for (const Trace::Slice& sl : t.slices()) {
    if (sl.pid == Trace::kLinks) links.push_back(sl);
    if (sl.pid == Trace::kHost && t.labels()[sl.label] == "AllReduce grads") host_slice = true;
  }
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[0].tid, 0);
  EXPECT_EQ(t.labels()[links[0].label], "grads");
  EXPECT_DOUBLE_EQ(links[0].start, 0);
  EXPECT_DOUBLE_EQ(links[0].end, one);
  EXPECT_EQ(t.labels()[links[1].label], "moments");
  EXPECT_DOUBLE_EQ(links[1].start, one);
  EXPECT_DOUBLE_EQ(links[1].end, 2 * one);
  EXPECT_TRUE(host_slice);
  std::string json = t.ToJson(m.chip().clock_mhz());
  EXPECT_NE(json.find(R"("args":{"name":"Chip links"})"), std::string::npos);
  EXPECT_NE(json.find(R"("args":{"name":"AllReduce"})"), std::string::npos);
  EXPECT_NE(json.find(absl::StrCat(R"("name":"grads","cat":"op","pid":)", Trace::kLinks)), std::string::npos);
}

TEST(CollectiveTest, ReportNamesTheCollectives) {
  Machine m = DefaultMachine();
  const double one = FullMeshCycles(m);
  auto dev = NewDevice(m);
  ASSERT_TRUE(dev);
  StreamId s = dev->CreateStream();
  EnqueueGradsAndMoments(*dev, s);
  auto r = dev->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  std::string text = ReportText(*r, m);
  EXPECT_NE(text.find(absl::StrCat(", AllReduce 2 (", 2 * kBytes, " B, ", 2 * one, " cycles on the chip links)\n")),
            std::string::npos)
      << text;
  // A run without collectives reports as before.
  ASSERT_TRUE(dev->LaunchAicpu(s, "task", 0, Nothing()).ok());
  auto plain = dev->Run();
  ASSERT_TRUE(plain.ok());
  std::string plain_text = ReportText(*plain, m);
  EXPECT_EQ(plain_text.find("AllReduce"), std::string::npos) << plain_text;
  EXPECT_NE(plain_text.find("AICPU tasks 1\n"), std::string::npos) << plain_text;
}

}  // namespace
}  // namespace kiln::sim
