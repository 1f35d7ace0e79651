//===- timing_test.cc - Timing rules of the NPU model, in the spec's terms ===//
//
// Each test states a rule of docs/npu.md and checks the model keeps it
// exactly (or, for the double-buffered GEMM, within the overlap it promises).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/isa/asm.h"
#include "sim/machine/machine.h"
#include "sim/model/device.h"
#include "sim/model/exec.h"
#include "tests/sim/sim_test_util.h"

namespace kiln::sim {
namespace {

using testing::Load;

// The slices of one pipe of core 0, in time order.
std::vector<Trace::Slice> PipeSlices(const Device& d, Pipe p, int core = 0) {
  std::vector<Trace::Slice> out;
  for (const Trace::Slice& s : d.trace().slices())
    if (s.pid == core && s.tid == static_cast<int>(p)) out.push_back(s);
  return out;
}

RunOptions Traced() {
  RunOptions o;
  o.trace = true;
  return o;
}

TEST(TimingTest, MmadTakesItsFractalStepsAtTheCubeRate) {
  Machine m = DefaultMachine();
  const double lat = m.core().cube_latency_cycles();
  struct Case { const char* dt; double cycles_per_step; };
  // fp16/bf16: 16x16x16 MACs per step at 4096/cycle; int8: 16x16x32 at 8192; fp32: 16x16x8 at 1024.
  for (Case c : {Case{"f16", 1}, Case{"bf16", 1}, Case{"s8", 1}, Case{"f32", 2}}) {
    SCOPED_TRACE(c.dt);
    auto l = Load(absl::StrCat(".program t\n  mmad.", c.dt, " L0C[0], L0A[0], L0B[0], m=2, k=3, n=4, init=1\n"), m);
    ASSERT_TRUE(l);
    auto r = l->Run(Traced());
    ASSERT_TRUE(r.ok()) << r.status();
    auto cube = PipeSlices(*l->dev, Pipe::kCube);
    ASSERT_EQ(cube.size(), 1u);
    EXPECT_DOUBLE_EQ(cube[0].start, 0);
    EXPECT_DOUBLE_EQ(cube[0].end - cube[0].start, lat + 2 * 3 * 4 * c.cycles_per_step);
    EXPECT_DOUBLE_EQ(r->total_cycles, lat + 2 * 3 * 4 * c.cycles_per_step);
    EXPECT_EQ(r->kernels[0].cube_macs, 2 * 3 * 4 * 16 * 16 * (c.dt == std::string("s8") ? 32 : c.dt == std::string("f32") ? 8 : 16));
  }
}

// A vtranspose repeat moves a 512-byte matrix: two 256-byte repeats' time.
TEST(TimingTest, VtransposeTakesTwoRepeatsPerMatrix) {
  Machine m = DefaultMachine();
  const double per_repeat = std::ceil(256.0 / m.core().vector_bytes_per_cycle());
  auto l = Load(".program t\n  vtranspose.f16 UB[0], UB[8192], repeat=5\n", m);
  ASSERT_TRUE(l);
  auto r = l->Run(Traced());
  ASSERT_TRUE(r.ok()) << r.status();
  auto vec = PipeSlices(*l->dev, Pipe::kVector);
  ASSERT_EQ(vec.size(), 1u);
  EXPECT_DOUBLE_EQ(vec[0].end - vec[0].start, m.core().vector_latency_cycles() + 5 * 2 * per_repeat);
}

// A vtranspose.f32 repeat moves a 256-byte 8x8 matrix: one repeat's time.
TEST(TimingTest, VtransposeF32TakesOneRepeatPerMatrix) {
  Machine m = DefaultMachine();
  const double per_repeat = std::ceil(256.0 / m.core().vector_bytes_per_cycle());
  auto l = Load(".program t\n  vtranspose.f32 UB[0], UB[8192], repeat=5\n", m);
  ASSERT_TRUE(l);
  auto r = l->Run(Traced());
  ASSERT_TRUE(r.ok()) << r.status();
  auto vec = PipeSlices(*l->dev, Pipe::kVector);
  ASSERT_EQ(vec.size(), 1u);
  EXPECT_DOUBLE_EQ(vec[0].end - vec[0].start, m.core().vector_latency_cycles() + 5 * per_repeat);
}

TEST(TimingTest, ExpAndLnTakeTheMachinesElementRateWhereItGivesOne) {
  // One instruction of 4 repeats on a vector unit of 256 B/cycle: plain, 4
  // cycles; special, twice that; exp and ln at 64 elements a cycle take a
  // 64-element fp32 repeat in 1 cycle and a 128-element fp16 one in 2.
  Machine m = DefaultMachine();
  auto busy = [&](const Machine& mm, const std::string& line) {
    auto p = Assemble(".program p\n.regs 4\n.block_dim 1\n  " + line + "\n", "t.kasm");
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? InstCost(p->program.insts[0], mm).busy : -1;
  };
  EXPECT_DOUBLE_EQ(busy(m, "vexp.f32 UB[0], UB[1024], repeat=4"), 8);
  EXPECT_DOUBLE_EQ(busy(m, "vadd.f32 UB[0], UB[1024], UB[2048], repeat=4"), 4);
  m.mutable_core()->set_vector_exp_ln_elements_per_cycle(64);
  EXPECT_DOUBLE_EQ(busy(m, "vexp.f32 UB[0], UB[1024], repeat=4"), 4);
  EXPECT_DOUBLE_EQ(busy(m, "vln.f16 UB[0], UB[1024], repeat=4"), 8);
  EXPECT_DOUBLE_EQ(busy(m, "vdiv.f32 UB[0], UB[1024], UB[2048], repeat=4"), 8);  // division keeps its factor
}

TEST(TimingTest, VectorInstructionsTakeTheMachinesFloorsAndFp16SpecialCycles) {
  // The 910B's measured shapes: any instruction at least 3 cycles, a plain
  // one on 2-byte elements at least 6, and an fp16 division 4 more than its
  // repeats; exp and ln at their element rate take no extra.
  Machine m = DefaultMachine();
  auto busy = [&](const std::string& line) {
    auto p = Assemble(".program p\n.regs 4\n.block_dim 1\n  " + line + "\n", "t.kasm");
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? InstCost(p->program.insts[0], m).busy : -1;
  };
  EXPECT_DOUBLE_EQ(busy("vadd.f16 UB[0], UB[1024], UB[2048], repeat=2"), 2);  // no floors by default
  m.mutable_core()->set_vector_min_cycles(3);
  m.mutable_core()->set_vector_fp16_min_cycles(6);
  m.mutable_core()->set_vector_fp16_special_extra_cycles(4);
  m.mutable_core()->set_vector_exp_ln_elements_per_cycle(64);
  EXPECT_DOUBLE_EQ(busy("vadd.f32 UB[0], UB[1024], UB[2048], repeat=2"), 3);
  EXPECT_DOUBLE_EQ(busy("vadd.f32 UB[0], UB[1024], UB[2048], repeat=8"), 8);
  EXPECT_DOUBLE_EQ(busy("vmul.f16 UB[0], UB[1024], UB[2048], repeat=2"), 6);
  EXPECT_DOUBLE_EQ(busy("vmul.f16 UB[0], UB[1024], UB[2048], repeat=10"), 10);
  EXPECT_DOUBLE_EQ(busy("vdiv.f16 UB[0], UB[1024], UB[2048], repeat=2"), 4 + 2 * 2);
  EXPECT_DOUBLE_EQ(busy("vdiv.f32 UB[0], UB[1024], UB[2048], repeat=2"), 2 * 2);
  EXPECT_DOUBLE_EQ(busy("vexp.f16 UB[0], UB[1024], repeat=2"), 4);  // 2 x 128 elements at 64 a cycle
  EXPECT_DOUBLE_EQ(busy("vexp.f32 UB[0], UB[1024], repeat=1"), 3);  // 1 cycle, raised to the floor
}

TEST(TimingTest, DmaTakesLatencyPlusBytesOverBandwidth) {
  Machine m = DefaultMachine();
  const double latency = m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles();
  const double bytes = 65536;
  auto l = Load(".program t\n.arg x f16[32768]\n  copy_gm_ub UB[0], x[0], len=65536\n", m);
  ASSERT_TRUE(l);
  auto r = l->Run(Traced());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->total_cycles, latency + bytes / m.core().mte2_bytes_per_cycle());
  auto mte2 = PipeSlices(*l->dev, Pipe::kMte2);
  ASSERT_EQ(mte2.size(), 1u);
  EXPECT_DOUBLE_EQ(mte2[0].end - mte2[0].start, bytes / m.core().mte2_bytes_per_cycle());
  EXPECT_EQ(r->hbm_read_bytes, 65536);
}

TEST(TimingTest, UbCopiesMoveTheirFirstBytesAtTheirFastRate) {
  // 64 KiB GM -> UB with its first 16 KiB at 512 B/cycle and the rest at
  // 128 takes 32 + 384 cycles of bytes and 30 more to start; UB -> GM the
  // same bytes at 256 then 64. Without the fields, one rate.
  Machine m = DefaultMachine();
  m.mutable_core()->set_mte2_ub_bytes_per_cycle(128);
  m.mutable_core()->set_mte3_bytes_per_cycle(64);
  auto cost = [&](const Machine& mm, const std::string& line) {
    auto p = Assemble(".program p\n.regs 4\n.block_dim 1\n.arg x f16[32768]\n  " + line + "\n", "t.kasm");
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? InstCost(p->program.insts[0], mm) : Cost{};
  };
  const std::string in = "copy_gm_ub UB[0], x[0], len=65536", out = "copy_ub_gm x[0], UB[0], len=65536";
  EXPECT_DOUBLE_EQ(65536 / cost(m, in).rate_cap, 512);
  EXPECT_DOUBLE_EQ(65536 / cost(m, out).rate_cap, 1024);
  const double start = cost(m, in).latency;
  m.mutable_core()->set_mte2_ub_fast_bytes(16384);
  m.mutable_core()->set_mte2_ub_fast_bytes_per_cycle(512);
  m.mutable_core()->set_mte2_ub_extra_latency_cycles(30);
  m.mutable_core()->set_mte3_fast_bytes(16384);
  m.mutable_core()->set_mte3_fast_bytes_per_cycle(256);
  EXPECT_DOUBLE_EQ(65536 / cost(m, in).rate_cap, 32 + 384);
  EXPECT_DOUBLE_EQ(cost(m, in).latency, start + 30);
  EXPECT_DOUBLE_EQ(65536 / cost(m, out).rate_cap, 64 + 768);
  // A copy within the fast bytes moves at the fast rate alone.
  EXPECT_DOUBLE_EQ(4096 / cost(m, "copy_gm_ub UB[0], x[0], len=4096").rate_cap, 8);
}

TEST(TimingTest, ShortBurstsLeavePipeBandwidthUnused) {
  // With 2-cycle bursts, 256 rows of 64 bytes, 128 bytes apart in GM: 256
  // bursts, one every 2 cycles, so the copy moves 64 / 2 = 32 bytes per cycle; the same
  // bytes contiguous in GM are one burst at the pipe's 256.
  Machine m = DefaultMachine();
  const double latency = m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles();
  m.mutable_core()->set_mte_burst_cycles(2);
  auto strided = Load(".program t\n.arg x f16[16384]\n  copy_gm_ub UB[0], x[0], nburst=256, len=64, src_stride=128, "
                      "dst_stride=64\n", m);
  auto contiguous = Load(".program t\n.arg x f16[16384]\n  copy_gm_ub UB[0], x[0], nburst=256, len=64, src_stride=64, "
                         "dst_stride=128\n", m);
  auto rows = Load(".program t\n.arg x f16[16384]\n  nd2nz.f16 L1[0], x[0], rows=256, cols=32, src_row_stride=64\n", m);
  ASSERT_TRUE(strided && contiguous && rows);
  auto rs = strided->Run(Traced());
  auto rc = contiguous->Run(Traced());
  auto rr = rows->Run(Traced());
  ASSERT_TRUE(rs.ok() && rc.ok() && rr.ok());
  EXPECT_DOUBLE_EQ(rs->total_cycles, latency + 256 * 2);
  EXPECT_DOUBLE_EQ(rc->total_cycles, latency + 16384 / m.core().mte2_bytes_per_cycle());
  EXPECT_DOUBLE_EQ(rr->total_cycles, latency + 256 * 2);  // nd2nz: one burst per source row
  // With no burst gap (the default machine) the rows cost only their bytes.
  m.mutable_core()->set_mte_burst_cycles(0);
  auto free_bursts = Load(".program t\n.arg x f16[16384]\n  copy_gm_ub UB[0], x[0], nburst=256, len=64, "
                          "src_stride=128, dst_stride=64\n", m);
  ASSERT_TRUE(free_bursts);
  auto rf = free_bursts->Run(Traced());
  ASSERT_TRUE(rf.ok());
  EXPECT_DOUBLE_EQ(rf->total_cycles, latency + 16384 / m.core().mte2_bytes_per_cycle());
}

TEST(TimingTest, CoresStreamingAtOnceShareHbm) {
  // HBM as fast as one core's MTE2: two cores streaming at once each get half.
  Machine m = DefaultMachine();
  m.mutable_chip()->set_hbm_bandwidth_gbps(m.core().mte2_bytes_per_cycle() * m.chip().clock_mhz() / 1e3);
  const double latency = m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles();
  const double bw = m.core().mte2_bytes_per_cycle();
  const char* prog = ".program t\n.arg x f16[65536]\n  block_idx r0\n  mul r0, r0, 65536\n"
                     "  copy_gm_ub UB[0], x[r0], len=65536\n";
  auto one = Load(prog, m);
  ASSERT_TRUE(one);
  auto r1 = one->Run(Traced(), 1);
  ASSERT_TRUE(r1.ok()) << r1.status();
  // block_idx and mul take 2 scalar cycles before the copy issues.
  EXPECT_DOUBLE_EQ(r1->total_cycles, 2 + latency + 65536 / bw);
  auto two = Load(prog, m);
  ASSERT_TRUE(two);
  auto r2 = two->Run(Traced(), 2);
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_DOUBLE_EQ(r2->total_cycles, 2 + latency + 65536 / (bw / 2));
  for (int core = 0; core < 2; ++core) {
    auto s = PipeSlices(*two->dev, Pipe::kMte2, core);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_DOUBLE_EQ(s[0].end - s[0].start, 65536 / (bw / 2));
  }
  // With the default HBM (1200 B/cycle) two cores do not contend.
  auto wide = Load(prog);
  auto r3 = wide->Run({}, 2);
  ASSERT_TRUE(r3.ok());
  EXPECT_DOUBLE_EQ(r3->total_cycles, r1->total_cycles);
}

TEST(TimingTest, BlocksBeyondTheCoreCountQueue) {
  Machine m = DefaultMachine();
  m.mutable_chip()->set_ai_cores(2);
  auto l = Load(".program t\n  mmad.f16 L0C[0], L0A[0], L0B[0], m=4, k=4, n=4, init=1\n", m);
  ASSERT_TRUE(l);
  auto r = l->Run({}, 5);
  ASSERT_TRUE(r.ok()) << r.status();
  double one = m.core().cube_latency_cycles() + 64;
  EXPECT_DOUBLE_EQ(r->total_cycles, 3 * one);  // waves of 2, 2 and 1 blocks
  EXPECT_EQ(r->kernels[0].cores_used, 2);
  EXPECT_EQ(r->kernels[0].pipes[static_cast<int>(Pipe::kCube)].instructions, 5);
}

TEST(TimingTest, WaitFlagReleasesWhenItsSetFlagRetires) {
  Machine m = DefaultMachine();
  auto l = Load(R"(.program t
.arg x f16[4096]
  copy_gm_ub UB[0], x[0], len=8192
  set_flag MTE2, VECTOR, 0
  wait_flag MTE2, VECTOR, 0
  vadd.f16 UB[8192], UB[0], UB[0], repeat=32
)", m);
  ASSERT_TRUE(l);
  auto r = l->Run(Traced());
  ASSERT_TRUE(r.ok()) << r.status();
  auto mte2 = PipeSlices(*l->dev, Pipe::kMte2);
  auto vec = PipeSlices(*l->dev, Pipe::kVector);
  ASSERT_EQ(mte2.size(), 2u);  // copy, set_flag
  ASSERT_EQ(vec.size(), 2u);   // wait_flag, vadd
  // The set retires once the copy completes (its transfer plus latency) and the flag latency passes.
  double copy_done = mte2[0].end + m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles();
  EXPECT_DOUBLE_EQ(mte2[1].end, copy_done + m.core().flag_latency_cycles());
  EXPECT_DOUBLE_EQ(vec[0].end, mte2[1].end);
  EXPECT_DOUBLE_EQ(vec[1].start, mte2[1].end);
  EXPECT_GE(vec[0].flow_in, 0);
  EXPECT_EQ(vec[0].flow_in, mte2[1].flow_out);
  EXPECT_DOUBLE_EQ(r->kernels[0].pipes[static_cast<int>(Pipe::kVector)].stall_cycles, vec[0].end - vec[0].start);
}

TEST(TimingTest, DoubleBufferedGemmOverlapsLoadsWithTheCube) {
  // A slower MTE2 makes the GEMM load-bound: 8 chunks of 2 x 16 KiB at 64 B/cycle.
  Machine m = DefaultMachine();
  m.mutable_core()->set_mte2_bytes_per_cycle(64);
  m.mutable_chip()->set_hbm_latency_cycles(0);
  m.mutable_core()->set_mte2_latency_cycles(0);
  auto l = Load(testing::ReadSource("examples/npu/gemm_double_buffer.kasm"), m);
  ASSERT_TRUE(l);
  auto r = l->Run(Traced());
  ASSERT_TRUE(r.ok()) << r.status();
  const double chunks = 8;
  const double load = chunks * 2 * 16384 / 64.0;                          // MTE2, per core
  const double mte1_chunk = 2 * (m.core().mte1_latency_cycles() + 16384 / m.core().mte1_bytes_per_cycle());
  const double cube_chunk = m.core().cube_latency_cycles() + 8 * 4 * 8;
  const double compute = chunks * cube_chunk;
  const double fixp = m.core().fixp_latency_cycles() + 65536 / m.core().fixp_bytes_per_cycle() +
                      m.chip().hbm_latency_cycles();
  const double sum = load + chunks * mte1_chunk + compute + fixp;
  const double overlapped = std::max(load, compute) + mte1_chunk + cube_chunk + fixp;
  EXPECT_GT(r->total_cycles, std::max(load, compute));
  EXPECT_LE(r->total_cycles, overlapped * 1.02) << "sum would be " << sum;
  EXPECT_LT(r->total_cycles, 0.8 * sum);
  // The cube runs while MTE2 loads: some mmad overlaps some load in time.
  bool overlap = false;
  for (const auto& c : PipeSlices(*l->dev, Pipe::kCube))
    for (const auto& d : PipeSlices(*l->dev, Pipe::kMte2))
      overlap |= c.program && d.program && c.start < d.end && d.start < c.end &&
                 c.program->insts[c.pc].op == Op::kMmad && d.program->insts[d.pc].op == Op::kNd2Nz;
  EXPECT_TRUE(overlap);
}

TEST(TimingTest, TimingOnlyGivesTheSameCycles) {
  auto a = Load(testing::ReadSource("examples/npu/gemm_double_buffer.kasm"));
  auto b = Load(testing::ReadSource("examples/npu/gemm_double_buffer.kasm"));
  auto ra = a->Run();
  RunOptions t;
  t.functional = false;
  auto rb = b->Run(t);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_DOUBLE_EQ(ra->total_cycles, rb->total_cycles);
  EXPECT_EQ(ra->instructions, rb->instructions);
  // Timing only leaves the output untouched.
  for (float v : b->Values<float>("C")) ASSERT_EQ(v, 0.0f);
}

// A kernel whose branch reads data it loaded (`ld`) takes the data's branch
// in a timing-only run only when its launch computes (Device::Launch's
// `computes`); otherwise it reads 0 and takes the other, as a timing-only
// run of a decode attention read its whole cache.
TEST(TimingTest, ALaunchThatComputesTakesItsDataBranchInATimingOnlyRun) {
  const std::string text = R"(.program steer
.arg x s32[8]
  copy_gm_ub UB[0], x[0], len=32
  set_flag MTE2, SCALAR, 0
  wait_flag MTE2, SCALAR, 0
  ld.s32 r1, UB[0]
  bne r1, 0, done
  mov r2, 0
loop:
  add r2, r2, 1
  blt r2, 1000, loop
done:
)";
  auto run = [&](bool functional, bool computes) -> double {
    auto l = Load(text);
    if (!l) return -1;
    const int32_t one[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    EXPECT_TRUE(l->dev->Write(l->addrs[0], one, sizeof one).ok());
    StreamId s = l->dev->CreateStream();
    EXPECT_TRUE(l->dev->Launch(s, l->kernel, 1, l->addrs, computes).ok());
    RunOptions o;
    o.functional = functional;
    auto r = l->dev->Run(o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->total_cycles : -1;
  };
  const double functional = run(true, false);
  EXPECT_GT(run(false, false), functional + 1000);  // read 0: the loop
  EXPECT_DOUBLE_EQ(run(false, true), functional);    // read 1, as the functional run
  EXPECT_DOUBLE_EQ(run(true, true), functional);
}

TEST(TimingTest, DeadlockIsReportedNotHung) {
  auto l = Load(testing::ReadSource("examples/npu/deadlock.kasm"));
  ASSERT_TRUE(l);
  auto r = l->Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  std::string msg(r.status().message());
  EXPECT_NE(msg.find("deadlock at cycle"), std::string::npos) << msg;
  EXPECT_NE(msg.find("core 0 CUBE pc 5 (wait_flag MTE1, CUBE, 0) waits for flag MTE1->CUBE event 0"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("core 0 SCALAR pc 7 waits for the end of the block"), std::string::npos) << msg;
  // The device is usable again after the failed run.
  auto again = l->Run();
  EXPECT_FALSE(again.ok());
}

TEST(TimingTest, RunawayProgramHitsTheCycleLimit) {
  auto l = Load(".program t\nloop:\n  add r1, r1, 1\n  jmp loop\n");
  ASSERT_TRUE(l);
  RunOptions o;
  o.cycle_limit = 100000;
  auto r = l->Run(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("cycle limit of 100000 cycles reached"), std::string::npos) << r.status();
}

TEST(TimingTest, LaunchChecksArgumentMemory) {
  auto l = Load(".program t\n.arg x f16[1024]\n  copy_gm_ub UB[0], x[0], len=32\n");
  ASSERT_TRUE(l);
  StreamId s = l->dev->CreateStream();
  absl::Status st = l->dev->Launch(s, l->kernel, 1, {l->addrs[0] + 1024});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bad memory access"), std::string::npos) << st;
}

TEST(TimingTest, HostCopiesAreTimedOverPcieAndOverlapCompute) {
  Machine m = DefaultMachine();
  auto d = Device::Create(m);
  ASSERT_TRUE(d.ok());
  Device& dev = **d;
  const int64_t bytes = 1 << 20;
  auto buf = dev.Malloc(bytes);
  ASSERT_TRUE(buf.ok());
  std::vector<uint8_t> host(bytes, 7), back(bytes, 0);
  StreamId s0 = dev.CreateStream();
  ASSERT_TRUE(dev.CopyH2D(s0, *buf, host.data(), bytes).ok());
  auto r = dev.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  const double copy = UsToCycles(m, m.host_link().latency_us()) + bytes / HostLinkBytesPerCycle(m);
  EXPECT_DOUBLE_EQ(r->total_cycles, copy);
  EXPECT_EQ(r->h2d_bytes, bytes);

  // H2D and D2H use the two directions of the link at once; an event orders them.
  StreamId s1 = dev.CreateStream();
  EventId e = dev.CreateEvent();
  ASSERT_TRUE(dev.CopyH2D(s0, *buf, host.data(), bytes).ok());
  ASSERT_TRUE(dev.RecordEvent(s0, e).ok());
  ASSERT_TRUE(dev.WaitEvent(s1, e).ok());
  ASSERT_TRUE(dev.CopyD2H(s1, back.data(), *buf, bytes).ok());
  auto ordered = dev.Run();
  ASSERT_TRUE(ordered.ok()) << ordered.status();
  EXPECT_DOUBLE_EQ(ordered->total_cycles, 2 * copy);
  EXPECT_EQ(back, host);

  ASSERT_TRUE(dev.CopyH2D(s0, *buf, host.data(), bytes).ok());
  ASSERT_TRUE(dev.CopyD2H(s1, back.data(), *buf, bytes).ok());
  auto parallel = dev.Run();
  ASSERT_TRUE(parallel.ok()) << parallel.status();
  EXPECT_DOUBLE_EQ(parallel->total_cycles, copy);

  // A kernel on another stream runs while the copy is in flight.
  auto f = Assemble(".program k\n  mmad.f16 L0C[0], L0A[0], L0B[0], m=8, k=8, n=8, init=1\n", "k");
  ASSERT_TRUE(f.ok());
  auto k = dev.LoadProgram(f->program);
  ASSERT_TRUE(k.ok());
  ASSERT_TRUE(dev.CopyH2D(s0, *buf, host.data(), bytes).ok());
  ASSERT_TRUE(dev.Launch(s1, *k, 1, {}).ok());
  auto both = dev.Run();
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_DOUBLE_EQ(both->total_cycles, copy);
  EXPECT_DOUBLE_EQ(both->kernels[0].end_cycle, m.core().cube_latency_cycles() + 512);
}

// A device copy reads and writes its bytes through HBM (2 * bytes at the
// HBM bandwidth, shared with what else is in flight), then the HBM latency.
TEST(TimingTest, DeviceCopiesGoThroughHbm) {
  Machine m = DefaultMachine();
  auto d = Device::Create(m);
  ASSERT_TRUE(d.ok());
  Device& dev = **d;
  const int64_t bytes = 1 << 20;
  auto a = dev.Malloc(bytes), b = dev.Malloc(bytes), c = dev.Malloc(bytes);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::vector<uint8_t> data(bytes);
  for (int64_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 13);
  ASSERT_TRUE(dev.Write(*a, data.data(), bytes).ok());
  StreamId s0 = dev.CreateStream(), s1 = dev.CreateStream();
  ASSERT_TRUE(dev.CopyD2D(s0, *b, *a, bytes).ok());
  auto r = dev.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  const double latency = static_cast<double>(m.chip().hbm_latency_cycles());
  EXPECT_NEAR(r->total_cycles, latency + 2.0 * bytes / HbmBytesPerCycle(m), 0.01);  // the time resolution
  EXPECT_EQ(r->d2d_bytes, bytes);
  EXPECT_EQ(r->h2d_bytes, 0);
  std::vector<uint8_t> back(bytes);
  ASSERT_TRUE(dev.Read(*b, back.data(), bytes).ok());
  EXPECT_EQ(back, data);

  // Two copies at once share the bandwidth: both end when four times the
  // bytes have gone through.
  ASSERT_TRUE(dev.CopyD2D(s0, *b, *a, bytes).ok());
  ASSERT_TRUE(dev.CopyD2D(s1, *c, *a, bytes).ok());
  auto both = dev.Run();
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_NEAR(both->total_cycles, latency + 4.0 * bytes / HbmBytesPerCycle(m), 0.01);
  EXPECT_EQ(both->d2d_bytes, 2 * bytes);

  // Addresses outside memory are refused when the copy is enqueued.
  EXPECT_FALSE(dev.CopyD2D(s0, *b + bytes, *a, bytes).ok());
  EXPECT_FALSE(dev.CopyD2D(s0, *b, *a, -1).ok());
}

// The L2 (docs/npu.md, "L2"): what a kernel read or wrote earlier in the
// run is served at the L2's bandwidth and hit latency; HBM sees the misses
// and the dirty lines evicted.
TEST(TimingTest, AReReadOfAResidentTileIsAnL2Hit) {
  Machine m = DefaultMachine();
  m.mutable_chip()->set_l2_bandwidth_gbps(128 * m.chip().clock_mhz() / 1e3);  // 128 B/cycle: hits L2-bound
  auto l = Load(".program t\n.arg x f16[32768]\n  copy_gm_ub UB[0], x[0], len=65536\n"
                "  copy_gm_l1 L1[0], x[0], len=65536\n", m);
  ASSERT_TRUE(l);
  auto r = l->Run(Traced());
  ASSERT_TRUE(r.ok()) << r.status();
  auto mte2 = PipeSlices(*l->dev, Pipe::kMte2);
  ASSERT_EQ(mte2.size(), 2u);  // to UB, then to L1 (two ops: their slices stay apart)
  EXPECT_DOUBLE_EQ(mte2[0].end - mte2[0].start, 65536 / m.core().mte2_bytes_per_cycle());  // from HBM
  EXPECT_DOUBLE_EQ(mte2[1].end - mte2[1].start, 65536 / 128.0);                            // from the L2
  // The hit completes after the L2's latency, not HBM's.
  EXPECT_DOUBLE_EQ(r->total_cycles, mte2[1].end + m.chip().l2_hit_latency_cycles() + m.core().mte2_latency_cycles());
  EXPECT_EQ(r->hbm_read_bytes, 65536);
  EXPECT_EQ(r->l2_hit_bytes, 65536);
  // Each run starts cold: the same figures again.
  auto again = l->Run();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->hbm_read_bytes, 65536);
  EXPECT_DOUBLE_EQ(again->total_cycles, r->total_cycles);
  // At the default L2 bandwidth the hit ends (512 + 250) before the miss
  // it follows (256 + 550): the pipe is busy from the first start to the
  // last completion, and the hit adds nothing to that.
  Machine fast = DefaultMachine();
  auto f = Load(".program t\n.arg x f16[32768]\n  copy_gm_ub UB[0], x[0], len=65536\n"
                "  copy_gm_l1 L1[0], x[0], len=65536\n", fast);
  auto rf = f->Run();
  ASSERT_TRUE(rf.ok());
  const double miss_done = 65536 / fast.core().mte2_bytes_per_cycle() + fast.chip().hbm_latency_cycles() +
                           fast.core().mte2_latency_cycles();
  EXPECT_DOUBLE_EQ(rf->total_cycles, miss_done);
  EXPECT_DOUBLE_EQ(rf->kernels[0].pipes[static_cast<int>(Pipe::kMte2)].busy_cycles, miss_done);
  // Without an L2 both reads go to HBM.
  m.mutable_chip()->set_l2_size_mib(0);
  auto none = Load(".program t\n.arg x f16[32768]\n  copy_gm_ub UB[0], x[0], len=65536\n"
                   "  copy_gm_l1 L1[0], x[0], len=65536\n", m);
  auto rn = none->Run();
  ASSERT_TRUE(rn.ok());
  EXPECT_EQ(rn->hbm_read_bytes, 2 * 65536);
  EXPECT_EQ(rn->l2_hit_bytes, 0);
  EXPECT_DOUBLE_EQ(rn->total_cycles, 2 * 65536 / m.core().mte2_bytes_per_cycle() + m.chip().hbm_latency_cycles() +
                                         m.core().mte2_latency_cycles());
}

TEST(TimingTest, PostedFixpWritesTakeTheirIntervalOrTheirBytes) {
  // With core.fixp_gm_write_min_cycles a FIXP write to GM completes when its
  // bytes have left FIXP, after at least that many cycles: no L2 or HBM
  // latency, so a small write costs the interval and a large one its bytes.
  Machine m = DefaultMachine();
  m.mutable_core()->set_fixp_gm_write_min_cycles(200);
  const double rate = m.core().fixp_bytes_per_cycle(), latency = m.core().fixp_latency_cycles();
  for (const int n : {1, 64}) {  // 1 KiB: 4 cycles of bytes at 256 B/cycle; 64 KiB: 256 cycles
    SCOPED_TRACE(n);
    const std::string kasm = absl::StrCat(".program t\n.arg y f32[", 256 * n, "]\n  fixp.f32.f32 y[0], L0C[0], m=1, n=", n,
                                          "\n");
    auto posted = Load(kasm, m);
    ASSERT_TRUE(posted);
    auto r = posted->Run(Traced());
    ASSERT_TRUE(r.ok()) << r.status();
    auto fixp = PipeSlices(*posted->dev, Pipe::kFixp);
    ASSERT_EQ(fixp.size(), 1u);
    EXPECT_DOUBLE_EQ(fixp[0].end - fixp[0].start, std::max(200.0, 1024 * n / rate));
    EXPECT_DOUBLE_EQ(r->total_cycles, fixp[0].end + latency);
    // Without it the write waits for the L2 to take it (a write allocates its lines there).
    auto plain = Load(kasm, DefaultMachine());
    auto rp = plain->Run();
    ASSERT_TRUE(rp.ok());
    EXPECT_DOUBLE_EQ(rp->total_cycles, fixp[0].start + 1024 * n / rate + latency + m.chip().l2_hit_latency_cycles());
  }
}

TEST(TimingTest, AWorkingSetBeyondTheL2Misses) {
  // A 1 MiB L2; 2 MiB read in 64 KiB pieces, then the first piece again:
  // by then LRU has evicted it.
  Machine m = DefaultMachine();
  m.mutable_chip()->set_l2_size_mib(1);
  std::string prog = ".program t\n.arg x f16[1048576]\n";
  for (int i = 0; i <= 32; ++i) prog += "  copy_gm_ub UB[0], x[" + std::to_string((i % 32) * 65536) + "], len=65536\n";
  auto l = Load(prog, m);
  ASSERT_TRUE(l);
  auto r = l->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->hbm_read_bytes, 33 * 65536);
  EXPECT_EQ(r->l2_hit_bytes, 0);
  // With 4 MiB the same program's last read hits.
  m.mutable_chip()->set_l2_size_mib(4);
  auto big = Load(prog, m);
  auto rb = big->Run();
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(rb->hbm_read_bytes, 32 * 65536);
  EXPECT_EQ(rb->l2_hit_bytes, 65536);
}

TEST(TimingTest, WritesStayInTheL2UntilEvicted) {
  Machine m = DefaultMachine();
  auto l = Load(R"(.program t
.arg y f16[32768]
  copy_ub_gm y[0], UB[0], len=65536
  set_flag MTE3, MTE2, 0
  wait_flag MTE3, MTE2, 0
  copy_gm_ub UB[65536], y[0], len=65536
)", m);
  ASSERT_TRUE(l);
  auto r = l->Run(Traced());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->hbm_write_bytes, 0);
  EXPECT_EQ(r->hbm_read_bytes, 0);
  EXPECT_EQ(r->l2_write_bytes, 65536);
  EXPECT_EQ(r->l2_hit_bytes, 65536);
  auto mte3 = PipeSlices(*l->dev, Pipe::kMte3);
  auto mte2 = PipeSlices(*l->dev, Pipe::kMte2);
  ASSERT_EQ(mte3.size(), 2u);  // copy, set_flag
  // The write completes after the L2's latency; the flag follows it.
  EXPECT_DOUBLE_EQ(mte3[1].end, mte3[0].end + m.chip().l2_hit_latency_cycles() + m.core().mte3_latency_cycles() +
                                    m.core().flag_latency_cycles());
  // The trace has the L2's bandwidth counter.
  bool counted = false;
  for (const auto& c : l->dev->trace().counters()) counted |= c.pid == Trace::kL2;
  EXPECT_TRUE(counted);
}

TEST(TimingTest, AicpuTasksRunWithTheirCost) {
  Machine m = DefaultMachine();
  auto d = Device::Create(m);
  ASSERT_TRUE(d.ok());
  Device& dev = **d;
  auto buf = dev.Malloc(4);
  ASSERT_TRUE(buf.ok());
  StreamId s = dev.CreateStream();
  ASSERT_TRUE(dev.LaunchAicpu(s, "set42", 4000, [&](Device& d) {
                  int32_t v = 42;
                  return d.Write(*buf, &v, 4);
                }).ok());
  auto r = dev.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  const Aicpu& a = m.aicpu();
  double aicpu_cycles = a.launch_cycles() + 4000 / a.ops_per_cycle();
  EXPECT_NEAR(r->total_cycles, aicpu_cycles * m.chip().clock_mhz() / a.clock_mhz(), 1e-3);
  int32_t v = 0;
  ASSERT_TRUE(dev.Read(*buf, &v, 4).ok());
  EXPECT_EQ(v, 42);
  EXPECT_EQ(r->aicpu_tasks, 1);
  // A failing task fails the run with its message.
  ASSERT_TRUE(dev.LaunchAicpu(s, "bad", 1, [](Device&) { return absl::InvalidArgumentError("boom"); }).ok());
  auto bad = dev.Run();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "AICPU task bad: boom");
}

}  // namespace
}  // namespace kiln::sim

namespace kiln::sim {
namespace {

// Block b spins 200*b iterations of three scalar instructions, then (with
// `barrier`) reaches sync_all; block `skipper` (-1: none) ends at once.
std::string Staggered(bool barrier, int skipper = -1) {
  return absl::StrCat(".program staggered\n.block_dim 4\n  block_idx r0\n",
                      skipper >= 0 ? absl::StrCat("  beq r0, ", skipper, ", done\n") : "", R"(  mul r1, r0, 200
  mov r2, 0
spin:
  bge r2, r1, spun
  add r2, r2, 1
  jmp spin
spun:
)",
                      barrier ? "  sync_all\n" : "", "done:\n");
}

// sync_all releases every block when the last one not ended reaches it,
// after twice the L2's hit latency (each arrival written to a word in GM
// and the release read back through the L2): the launch ends that much
// after the latest block's arrival.
TEST(TimingTest, SyncAllReleasesTheBlocksTwoL2LatenciesAfterTheLastArrives) {
  const Machine m = DefaultMachine();
  auto cycles = [&](const std::string& text) {
    auto l = testing::Load(text, m);
    if (!l) return -1.0;
    auto r = l->Run();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->total_cycles : -1.0;
  };
  const double without = cycles(Staggered(false)), with = cycles(Staggered(true));
  ASSERT_GT(without, 600 * 3 * m.core().scalar_latency_cycles());  // block 3's spin
  EXPECT_NEAR(with - without, 2.0 * static_cast<double>(m.chip().l2_hit_latency_cycles()), 2.0);
  // A block that ends without reaching the barrier no longer holds it
  // back: the others pass when the last of them (block 2) arrives.
  const double skip_last = cycles(Staggered(true, 3)), without_last = cycles(Staggered(false, 3));
  EXPECT_NEAR(skip_last - without_last, 2.0 * static_cast<double>(m.chip().l2_hit_latency_cycles()), 2.0);
  EXPECT_LT(skip_last, with - 500);
}

// A barrier needs every block running at once: a launch of more blocks
// than the AI cores is refused at its sync_all, not hung.
TEST(TimingTest, SyncAllInALaunchOfMoreBlocksThanCoresIsRefused) {
  const Machine m = DefaultMachine();
  auto l = testing::Load(Staggered(true), m);
  ASSERT_TRUE(l);
  auto r = l->Run({}, m.chip().ai_cores() + 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("a barrier needs every block running at once"), std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace kiln::sim
