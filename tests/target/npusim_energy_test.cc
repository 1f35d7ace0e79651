//===- npusim_energy_test.cc - A run's energy against a chip's envelope ---===//
//
// The check of the energy figures (docs/npu.md, "Energy") as a test: a
// full-chip fp16 GEMM draws more than the chip's static power and less
// than the Ascend 910's published 310 W, as it runs and with its energy
// spent at the cube's peak rate; its kernel's energy is its MACs' and at
// most three times that (HBM traffic included); and the
// tasks report carries each kernel's energy and the run's total.
//
//===----------------------------------------------------------------------===//
#include "sim/model/energy.h"
#include "target/api/tasks_report.h"
#include "tests/target/npusim_test_util.h"

namespace kiln::npusim_test {
namespace {

TEST(NpusimEnergy, AFullChipFp16GemmDrawsWithinThePowerEnvelope) {
  constexpr int64_t n = 2048;
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({n, n}));
  Value* w = g.AddConstant("w", Random({n, n}, 7));
  g.AddOutput(g.AddNode("MatMul", {x, w}, {"y"})->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  auto a = CompileNarrow(m, target::Precision::kFp16);
  ASSERT_TRUE(a.ok()) << a.status();
  auto loaded = runtime::LoadedModel::FromArtifact(*a, "gemm.kiln", target::NpusimModuleLoader());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  target::RunOptions timing;
  timing.functional = false;
  ASSERT_TRUE((*loaded)->Run({Random({n, n}, 8)}, timing).ok());
  const target::NpusimExecutable* npu = target::NpusimOf(**loaded);
  ASSERT_NE(npu, nullptr);
  const sim::RunStats& s = npu->summary().stats;
  const sim::Machine& machine = npu->machine();

  // The GEMM kernel keeps the cube busy on every core (bound by HBM: the
  // model has no L2, so its operands' re-reads come from HBM).
  const sim::KernelStats* gemm = nullptr;
  for (const sim::KernelStats& k : s.kernels)
    if (k.cube_macs > 0) gemm = &k;
  ASSERT_NE(gemm, nullptr);
  const double cores = machine.chip().ai_cores();
  const double cycles = gemm->end_cycle - gemm->start_cycle;
  EXPECT_GT(gemm->cube_macs / (gemm->cube_peak_macs_per_cycle * cycles * cores), 0.4);

  // Its power as it ran, and as it would be with the same energy spent in
  // the least time the cube needs at its peak on every core: between the
  // static power and the envelope.
  const double hz = machine.chip().clock_mhz() * 1e6;
  const double at_peak_s = gemm->cube_macs / (gemm->cube_peak_macs_per_cycle * cores) / hz;
  const double ran = sim::KernelEnergyJ(*gemm) / (cycles / hz) + sim::StaticWatts(machine);
  const double peak = sim::KernelEnergyJ(*gemm) / at_peak_s + sim::StaticWatts(machine);
  EXPECT_GT(ran, sim::StaticWatts(machine) + 50);
  EXPECT_LT(ran, peak);
  EXPECT_LT(peak, 310);
  // Its energy: the MACs' and, with the HBM traffic, less than three times that.
  const double macs_j = static_cast<double>(gemm->cube_macs) * machine.energy().cube_fp16_pj_per_mac() * 1e-12;
  EXPECT_GT(sim::KernelEnergyJ(*gemm), macs_j);
  EXPECT_LT(sim::KernelEnergyJ(*gemm), 3 * macs_j);

  // The run's energy: its kernels', the host link's and the static power's.
  const sim::RunEnergy e = sim::EnergyOf(s, machine);
  EXPECT_NEAR(e.static_j, sim::StaticWatts(machine) * s.seconds, 1e-12);
  EXPECT_GT(e.host_link_j, 0);
  // The tasks report: each kernel's energy and the run's.
  auto csv = npu->Report(target::ReportKind::kTasksCsv, "gemm");
  ASSERT_TRUE(csv.ok());
  auto report = target::ParseTasksCsv(*csv, "gemm.csv");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NEAR(report->total.energy_uj, e.total_j() * 1e6, 1e-2);
  bool kernel_energy = false;
  for (const target::TaskReportRow& t : report->tasks) kernel_energy |= t.energy_uj > 0;
  EXPECT_TRUE(kernel_energy);
}

}  // namespace
}  // namespace kiln::npusim_test
