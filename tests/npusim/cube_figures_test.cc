//===- cube_figures_test.cc - The machine's figures the cube kernels tile by ===//
#include "target/npusim/kernels/cube_figures.h"

#include <gtest/gtest.h>

#include "sim/machine/machine.h"

namespace kiln::target::npusim {
namespace {

TEST(CubeFigures, ComeFromTheMachine) {
  sim::Machine m = sim::DefaultMachine();
  tile::TileCostFigures f = CubeFiguresOf(m);
  EXPECT_EQ(f.gemm_schedule, TilingFigures::GemmSchedule::kPersistent);
  EXPECT_EQ(f.compute_units, 32);
  EXPECT_EQ(ScopeBytes(f, tile::Scope::kOperandA), 64 * 1024);
  EXPECT_EQ(ScopeBytes(f, tile::Scope::kAccumulator), 256 * 1024);
  EXPECT_DOUBLE_EQ(f.global_bytes_per_cycle, 1200);
  EXPECT_DOUBLE_EQ(f.MacsPerCycle(DType::kF16), 4096);
  EXPECT_DOUBLE_EQ(f.latency.stage_load, static_cast<double>(m.core().mte2_latency_cycles()));
  // A machine file with other figures tiles by them.
  m.mutable_core()->set_l0a_kib(32);
  m.mutable_chip()->set_ai_cores(8);
  f = CubeFiguresOf(m);
  EXPECT_EQ(ScopeBytes(f, tile::Scope::kOperandA), 32 * 1024);
  EXPECT_EQ(f.compute_units, 8);
}

TEST(CubeFigures, BoundsNameThePipes) {
  EXPECT_EQ(PipeOfBound("global memory"), "HBM");
  EXPECT_EQ(PipeOfBound("matrix"), "cube");
  EXPECT_EQ(PipeOfBound("write-out"), "FIXP");
}

}  // namespace
}  // namespace kiln::target::npusim
