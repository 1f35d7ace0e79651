//===- persistent_cost_model_test.cc - The GEMM cost model of persistent blocks ===//
//
// target/backend/tile_persistent_cost_model.cc on its own, with the figures
// of a 910-like AI core (32 cores; L1 1 MiB, L0A/L0B 64 KiB, L0C 256 KiB,
// UB 256 KiB; MTE2 256, MTE1 512, MTE3 256 and FIXP 256 bytes per cycle;
// HBM 1200 bytes per cycle at 500 cycles; a 16x16x16 fp16 cube at 4096
// MACs per cycle).
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include "target/backend/tile_lowering.h"
#include "tests/tile/tile_test_targets.h"

namespace kiln::target::tile {
namespace {

// The AI core with the persistent schedule's figures.
TargetDescription AiCoreLike() {
  TargetDescription d = NpusimLike();
  d.name = "aicore";
  d.tiling.max_stages = 2;
  d.tiling.global_latency_cycles = 500;
  d.tiling.gemm_schedule = TilingFigures::GemmSchedule::kPersistent;
  d.tiling.latency = {.stage_load = 50, .operand_load = 20, .mma = 10, .write_out = 20, .vector_store = 50, .sync = 1};
  d.tiling.vector_store_bytes_per_cycle = 256;
  d.tiling.issue_queue_depth = 32;
  d.tiling.stage_k_granule = 16;
  return d;
}

GemmProblem Square(int64_t n, DType dt = DType::kF16) {
  GemmProblem p;
  p.M = p.N = p.K = n;
  p.input = p.output = dt;
  return p;
}

TEST(PersistentGemm, FiguresComeFromTheDescription) {
  const TileCostFigures f = FiguresOf(AiCoreLike());
  EXPECT_EQ(f.gemm_schedule, TilingFigures::GemmSchedule::kPersistent);
  EXPECT_EQ(f.compute_units, 32);
  EXPECT_DOUBLE_EQ(f.global_bytes_per_cycle, 1200);
  EXPECT_DOUBLE_EQ(f.accumulator_bytes_per_cycle, 256);
  EXPECT_DOUBLE_EQ(f.latency.stage_load, 50);
}

TEST(PersistentGemm, ChosenTilesFitDoubleBuffered) {
  const TileCostFigures f = FiguresOf(AiCoreLike());
  for (int64_t n : {16, 100, 512, 1024, 4096}) {
    for (DType dt : {DType::kF16, DType::kF32}) {
      const int64_t bytes = static_cast<int64_t>(DTypeSize(dt));
      auto t = ChooseGemmTiling(Square(n, dt), f);
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_LE(2 * t->bm * t->tk * bytes, 64 << 10);
      EXPECT_LE(2 * t->tk * t->bn * bytes, 64 << 10);
      EXPECT_LE(t->accumulator_stages * t->bm * t->bn * 4, 256 << 10);
      EXPECT_LE(2 * (t->bm + t->bn) * t->bk * bytes, 1 << 20);
      EXPECT_EQ(t->bk % t->tk, 0);
      EXPECT_EQ(t->gm, t->bm);  // one group per block
      EXPECT_GT(t->estimated_cycles, 0);
    }
  }
}

TEST(PersistentGemm, LargeGemmOnOneUnitIsMatrixBound) {
  GemmKernelTraits one;
  one.max_units = 1;
  auto t = ChooseGemmTiling(Square(1024), FiguresOf(AiCoreLike()), one);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->blocks, 1);
  EXPECT_EQ(t->bound, "matrix");
  // 1024^3 MACs at 4096 per cycle, within the fills and latencies.
  const double ideal = 1024.0 * 1024 * 1024 / 4096;
  EXPECT_GE(t->estimated_cycles, ideal);
  EXPECT_LE(t->estimated_cycles, ideal / 0.9);
}

TEST(PersistentGemm, LargeGemmOnAllUnitsIsGlobalMemoryBound) {
  TileCostFigures f = FiguresOf(AiCoreLike());
  auto t = ChooseGemmTiling(Square(1024), f);
  ASSERT_TRUE(t.ok());
  EXPECT_GE(t->blocks, 16);
  EXPECT_EQ(t->bound, "global memory");
  EXPECT_GE(t->estimated_cycles, t->global_cycles);
  // Faster HBM moves the bound to the cube.
  f.global_bytes_per_cycle = 1e6;
  auto fast = ChooseGemmTiling(Square(4096), f);
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->bound, "matrix");
}

TEST(PersistentGemm, SmallerBuffersGiveSmallerTiles) {
  TargetDescription small = AiCoreLike();
  small.memory[2].bytes = small.memory[3].bytes = 16 << 10;
  small.memory[4].bytes = 64 << 10;
  auto tb = ChooseGemmTiling(Square(2048), FiguresOf(AiCoreLike()));
  auto ts = ChooseGemmTiling(Square(2048), FiguresOf(small));
  ASSERT_TRUE(tb.ok() && ts.ok());
  EXPECT_LT(ts->bm * ts->bn, tb->bm * tb->bn);
  EXPECT_GT(ts->estimated_cycles, tb->estimated_cycles);
}

TEST(PersistentGemm, LatencyOfTheStageLoadCosts) {
  // Each stage's load waits out its own latency: a slower MTE2 start costs
  // cycles on one unit, whatever the tiling.
  TargetDescription slow = AiCoreLike();
  slow.tiling.latency.stage_load = 2000;
  GemmKernelTraits one;
  one.max_units = 1;
  auto fast = ChooseGemmTiling(Square(256), FiguresOf(AiCoreLike()), one);
  auto late = ChooseGemmTiling(Square(256), FiguresOf(slow), one);
  ASSERT_TRUE(fast.ok() && late.ok());
  EXPECT_GT(late->estimated_cycles, fast->estimated_cycles + 2000);
}

TEST(PersistentGemm, RaggedShapesTileTheMatrix) {
  GemmProblem p = Square(1);
  p.M = 5;
  p.N = 1000;
  p.K = 33;
  auto t = ChooseGemmTiling(p, FiguresOf(AiCoreLike()));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->bm, 16);        // never wider than the matrix rounded to an MMA block
  EXPECT_TRUE(t->via_vector);  // 5 rows: the tile leaves through UB
  EXPECT_GE((1000 + t->bn - 1) / t->bn * t->bn, 1000);
}

TEST(PersistentGemm, RejectsTilesThatDoNotFit) {
  const TileCostFigures f = FiguresOf(AiCoreLike());
  GemmTiling t;
  t.bm = t.gm = 512;
  t.bn = t.gn = 512;
  t.tk = t.bk = 64;
  EXPECT_FALSE(EstimateGemm(Square(1024), f, &t).ok());
  t.bm = t.gm = 24;  // not whole MMA blocks
  EXPECT_FALSE(EstimateGemm(Square(1024), f, &t).ok());
}

TEST(PersistentGemm, AnEpilogueThroughTheVectorScopeMustFitIt) {
  // A 256x256 f32 tile with an epilogue in UB takes 256*256*(8+2) bytes: more than 256 KiB.
  const TileCostFigures f = FiguresOf(AiCoreLike());
  GemmKernelTraits ub;
  ub.epilogue_in_vector = true;
  GemmTiling t;
  t.bm = t.gm = t.bn = t.gn = 256;
  t.tk = t.bk = 32;
  EXPECT_TRUE(EstimateGemm(Square(1024), f, &t).ok());
  EXPECT_FALSE(EstimateGemm(Square(1024), f, &t, ub).ok());
  auto chosen = ChooseGemmTiling(Square(1024), f, ub);
  ASSERT_TRUE(chosen.ok());
  EXPECT_TRUE(chosen->via_vector);
  EXPECT_LE(chosen->bm * chosen->bn * 10, 256 << 10);
}

// A cache that holds every operand speeds the tiles' re-reads, not the
// compulsory reads: a GEMV's weights (A one row block, each byte of B read
// by one tile) come from global memory once at its bandwidth however fast
// the cache, while a square GEMM's re-reads go at the cache's.
TEST(PersistentGemm, ACacheDoesNotSpeedAGemvsCompulsoryReads) {
  GemmProblem gemv;
  gemv.M = 1;
  gemv.N = 3072;
  gemv.K = 768;
  gemv.input = gemv.output = DType::kF32;
  auto estimate = [&](const GemmProblem& p, double cache_bytes_per_cycle) {
    TileCostFigures f = FiguresOf(AiCoreLike());
    f.cache_bytes = 32 << 20;
    f.cache_bytes_per_cycle = cache_bytes_per_cycle;
    auto t = ChooseGemmTiling(p, f);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? t->estimated_cycles : 0.0;
  };
  const double slow = estimate(gemv, 100), fast = estimate(gemv, 1000);
  EXPECT_DOUBLE_EQ(slow, fast);
  // No faster than the weights' bytes at the global bandwidth.
  EXPECT_GE(fast, 3072.0 * 768 * 4 / 1200);
  // A square GEMM's re-reads still go faster with a faster cache.
  EXPECT_LT(estimate(Square(1024), 1000), estimate(Square(1024), 40));
}

}  // namespace
}  // namespace kiln::target::tile
