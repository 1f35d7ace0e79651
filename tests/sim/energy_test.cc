//===- energy_test.cc - The energy of each action -------------------------===//
//
// Rules of docs/npu.md ("Energy") in the model's own terms, with the
// ascend910-like figures: an mmad's energy is its MACs' plus its L0 bytes';
// a copy from GM is charged in HBM and in the buffer it writes; a vector
// instruction its elements' (by width) and its UB bytes'; figures of zero
// make actions free; a run's energy adds the static power over its time;
// a traced run has a power counter at least the static power.
//
//===----------------------------------------------------------------------===//
#include "sim/model/energy.h"

#include <string>

#include "gtest/gtest.h"
#include "sim/isa/asm.h"
#include "sim/machine/machine.h"
#include "sim/model/exec.h"

namespace kiln::sim {
namespace {

Inst Parse1(const std::string& line) {
  auto p = Assemble(".program p\n.regs 4\n.block_dim 1\n.arg a f32[65536]\n  " + line + "\n", "t.kasm");
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? p->program.insts[0] : Inst{};
}

TEST(Energy, AnMmadIsItsMacsAndItsL0Bytes) {
  const Machine m = DefaultMachine();
  // m=k=n=1 fractal: 16x16x16 MACs; A and B one 512-byte fractal each; C a
  // 16x16 fp32 fractal (1 KiB) read and written.
  const Cost c = InstCost(Parse1("mmad.f16 L0C[0], L0A[0], L0B[0], m=1, k=1, n=1"), m);
  EXPECT_EQ(c.macs, 4096);
  EXPECT_DOUBLE_EQ(c.energy_pj, 4096 * 0.5 + (512 + 512 + 2 * 1024) * 0.8);
  const Cost f32 = InstCost(Parse1("mmad.f32 L0C[0], L0A[0], L0B[0], m=1, k=1, n=1"), m);
  EXPECT_DOUBLE_EQ(f32.energy_pj, f32.macs * 1.15 + (512 + 512 + 2 * 1024) * 0.8);
}

TEST(Energy, ACopyIsChargedInHbmAndInTheBufferItWrites) {
  const Machine m = DefaultMachine();
  EXPECT_DOUBLE_EQ(InstCost(Parse1("copy_gm_ub UB[0], a[0], len=1024"), m).energy_pj, 1024 * (31.2 + 1.5));
  EXPECT_DOUBLE_EQ(InstCost(Parse1("copy_gm_l1 L1[0], a[0], len=1024"), m).energy_pj, 1024 * (31.2 + 3.1));
  EXPECT_DOUBLE_EQ(InstCost(Parse1("copy_ub_gm a[0], UB[0], len=1024"), m).energy_pj, 1024 * (1.5 + 31.2));
}

TEST(Energy, AVectorInstructionIsItsElementsAndItsUbBytes) {
  const Machine m = DefaultMachine();
  // Two repeats of 128 fp16 elements, three UB operands of 256 bytes a repeat.
  EXPECT_DOUBLE_EQ(InstCost(Parse1("vadd.f16 UB[0], UB[512], UB[1024], repeat=2"), m).energy_pj,
                   256 * 0.25 + 2 * 256 * 3 * 1.5);
  // fp32 elements cost twice; a special function its own figure.
  EXPECT_DOUBLE_EQ(InstCost(Parse1("vadd.f32 UB[0], UB[512], UB[1024], repeat=2"), m).energy_pj,
                   128 * 0.25 * 2 + 2 * 256 * 3 * 1.5);
  EXPECT_DOUBLE_EQ(InstCost(Parse1("vexp.f16 UB[0], UB[512], repeat=1"), m).energy_pj, 128 * 1.0 + 256 * 2 * 1.5);
}

TEST(Energy, FiguresOfZeroMakeActionsFree) {
  auto m = ParseMachine("energy { cube_fp16_pj_per_mac: 0 l0_pj_per_byte: 0 }", "zero.textproto");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_DOUBLE_EQ(InstCost(Parse1("mmad.f16 L0C[0], L0A[0], L0B[0], m=1, k=1, n=1"), *m).energy_pj, 0);
  EXPECT_FALSE(ParseMachine("energy { hbm_pj_per_byte: -1 }", "neg.textproto").ok());
}

TEST(Energy, ARunAddsTheStaticPowerOverItsTime) {
  const Machine m = DefaultMachine();
  EXPECT_DOUBLE_EQ(StaticWatts(m), 40 + 32 * 1.5);
  RunStats s;
  s.seconds = 1e-3;
  s.kernels.resize(1);
  s.kernels[0].pipes[static_cast<int>(Pipe::kCube)].energy_pj = 5e6;
  s.kernels[0].pipes[static_cast<int>(Pipe::kMte2)].energy_pj = 1e6;
  s.h2d_bytes = 1000;
  s.d2d_bytes = 10;
  const RunEnergy e = EnergyOf(s, m);
  EXPECT_DOUBLE_EQ(e.kernels_j, 6e-6);
  EXPECT_DOUBLE_EQ(e.static_j, 88e-3);
  EXPECT_DOUBLE_EQ(e.host_link_j, 1000 * 40e-12);
  EXPECT_DOUBLE_EQ(e.copies_j, 2 * 10 * 31.2e-12);
  EXPECT_DOUBLE_EQ(e.total_j(), e.kernels_j + e.static_j + e.host_link_j + e.copies_j);
}

TEST(Energy, ATraceHasTheChipsPowerPerWindow) {
  Trace t;
  TraceOptions o;  // 100-cycle windows
  t.Reset(o);
  t.set_enabled(true);
  t.SetPower(88, 1000);  // 1 GHz: a window is 100 ns
  t.Energy(0, 100, 1e6);    // 1 uJ over the first window: 10 W more
  t.Energy(150, 250, 4e6);  // 4 uJ, half in each of the next two windows: 20 W more
  const std::vector<Trace::Series> series = t.CounterSeries(t.WrittenSpan());
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(t.labels()[series[0].label], "chip power W");
  // Written where the value changes: 98 W, 108 W for two windows, then the static power.
  ASSERT_EQ(series[0].samples.size(), 3u);
  EXPECT_EQ(series[0].samples[0], std::make_pair(0.0, 98.0));
  EXPECT_EQ(series[0].samples[1].first, 100);
  EXPECT_NEAR(series[0].samples[1].second, 108, 1e-9);
  EXPECT_EQ(series[0].samples[2], std::make_pair(300.0, 88.0));
}

}  // namespace
}  // namespace kiln::sim
