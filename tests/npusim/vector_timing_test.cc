//===- vector_timing_test.cc - npusim vector kernels in the machine's terms ===//
//
// A large elementwise Add moves 3 x 4 bytes per f32 element through the
// shared HBM: on ascend910-like (1,200 GB/s at 1 GHz = 1,200 B/cycle; 32
// cores x 256 B/cycle of MTE2/MTE3 is far above it) 16M elements take at
// least 16M x 12 / 1200 = 167,772 cycles. The vector work per core is a
// small fraction of that (one vadd repeat per 64 elements), so a
// double-buffered kernel is HBM-bound: measured 195,333 cycles for f32
// (86% of the HBM peak; two UB slots leave part of each load's 550-cycle
// completion latency exposed) and 102,218 for f16 (82%). The checks allow
// 20% over the bound. Timing-only runs, on the machine without its L2 (all
// traffic to HBM); with the L2 the same kernel is no slower (its last 32 MiB
// of writes stay in the L2 when the run ends).
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "graph/ops/shape_inference.h"
#include "sim/machine/machine.h"
#include "target/npusim/kernels/vector.h"
#include "tests/npusim/kernel_harness.h"

namespace kiln::testing {
namespace {

struct Timed {
  int64_t cycles = 0;
  double estimate = 0;
  int64_t blocks = 0;
};

Timed TimeAdd(const sim::Machine& m, DType dt, int64_t n) {
  Graph g;
  Value* a = g.AddInput("a", Type::Tensor(dt, Shape::Static({n})));
  Value* b = g.AddInput("b", Type::Tensor(dt, Shape::Static({n})));
  Node* node = g.AddNode("Add", {a, b}, 1);
  g.AddOutput(node->output(0));
  EXPECT_TRUE(InferShapes(g).ok());
  auto k = target::npusim::GenerateVectorKernel({node, &m});
  EXPECT_TRUE(k.ok()) << k.status();
  if (!k.ok()) return {};
  absl::flat_hash_map<const Value*, Tensor> feeds = {{a, Tensor(dt, {n})}, {b, Tensor(dt, {n})}};
  auto run = RunKernelOnSim(*k, *node, feeds, m, /*functional=*/false);
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return {};
  std::printf("Add %s[%lld] on %s: %.0f cycles (estimate %.0f), %lld blocks; %s\n", std::string(DTypeName(dt)).c_str(),
              static_cast<long long>(n), std::string(m.name()).c_str(), static_cast<double>(run->stats.total_cycles),
              k->estimated_cycles, static_cast<long long>(k->block_dim), k->plan.c_str());
  return {static_cast<int64_t>(run->stats.total_cycles), k->estimated_cycles, k->block_dim};
}

double HbmBound(const sim::Machine& m, double bytes) {
  return bytes / (m.chip().hbm_bandwidth_gbps() * 1000.0 / m.chip().clock_mhz());
}

sim::Machine WithoutL2() {
  sim::Machine m = sim::DefaultMachine();
  m.mutable_chip()->set_l2_size_mib(0);
  return m;
}

TEST(VectorTiming, LargeAddRunsAtTheHbmBound) {
  const sim::Machine m = WithoutL2();
  const int64_t n = 16 << 20;
  Timed t = TimeAdd(m, DType::kF32, n);
  double bound = HbmBound(m, 12.0 * n);
  double latency = 2.0 * (m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles());
  EXPECT_EQ(t.blocks, m.chip().ai_cores());
  EXPECT_GE(t.cycles, bound);
  EXPECT_LE(t.cycles, 1.2 * bound + latency) << "bound " << bound;
  // The estimate is within 20% of the simulated time.
  EXPECT_NEAR(t.estimate, static_cast<double>(t.cycles), 0.2 * t.cycles);
  EXPECT_LE(TimeAdd(sim::DefaultMachine(), DType::kF32, n).cycles, t.cycles);
}

TEST(VectorTiming, HalfPrecisionAddIsHbmBoundToo) {
  const sim::Machine m = WithoutL2();
  const int64_t n = 16 << 20;
  Timed t = TimeAdd(m, DType::kF16, n);
  double bound = HbmBound(m, 6.0 * n);
  EXPECT_GE(t.cycles, bound);
  EXPECT_LE(t.cycles, 1.25 * bound + 2000) << "bound " << bound;
}

TEST(VectorTiming, SmallAddUsesFewBlocks) {
  const sim::Machine& m = sim::DefaultMachine();
  Timed t = TimeAdd(m, DType::kF32, 1000);
  EXPECT_EQ(t.blocks, 1);
  EXPECT_GT(t.cycles, 0);
}

}  // namespace
}  // namespace kiln::testing
