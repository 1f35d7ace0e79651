//===- cube_tiling_test.cc - The cube GEMM tiling cost model on its own ---===//
#include "target/npusim/kernels/cube_tiling.h"

#include <gtest/gtest.h>

#include "sim/machine/machine.h"

namespace kiln::target::npusim {
namespace {

CubeProblem Square(int64_t n, int in_bytes = 2) {
  CubeProblem p;
  p.M = p.N = p.K = n;
  p.in_bytes = p.out_bytes = in_bytes;
  return p;
}

TEST(CubeTiling, FiguresComeFromTheMachine) {
  CubeMachineFigures f = CubeMachineFigures::From(sim::DefaultMachine());
  EXPECT_EQ(f.cores, 32);
  EXPECT_EQ(f.l0a_bytes, 64 * 1024);
  EXPECT_EQ(f.l0c_bytes, 256 * 1024);
  EXPECT_DOUBLE_EQ(f.hbm_bytes_per_cycle, 1200);
  EXPECT_DOUBLE_EQ(f.fp16_macs_per_cycle, 4096);
}

TEST(CubeTiling, ChosenTilesFitDoubleBuffered) {
  CubeMachineFigures f;
  for (int64_t n : {16, 100, 512, 1024, 4096}) {
    for (int bytes : {2, 4}) {
      auto t = ChooseCubeTiling(Square(n, bytes), f);
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_LE(2 * t->tm * t->tk * bytes, f.l0a_bytes);
      EXPECT_LE(2 * t->tk * t->tn * bytes, f.l0b_bytes);
      EXPECT_LE(t->l0c_buffers * t->tm * t->tn * 4, f.l0c_bytes);
      EXPECT_LE(2 * (t->tm + t->tn) * t->tk1 * bytes, f.l1_bytes);
      EXPECT_EQ(t->tk1 % t->tk, 0);
      EXPECT_GT(t->cycles, 0);
    }
  }
}

TEST(CubeTiling, LargeGemmOnOneCoreIsCubeBound) {
  CubeMachineFigures f;
  CubeProblem p = Square(1024);
  p.max_blocks = 1;
  auto t = ChooseCubeTiling(p, f);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->blocks, 1);
  EXPECT_EQ(t->bound, "cube");
  // 1024^3 MACs at 4096 per cycle, within the fills and latencies.
  double ideal = 1024.0 * 1024 * 1024 / 4096;
  EXPECT_GE(t->cycles, ideal);
  EXPECT_LE(t->cycles, ideal / 0.9);
}

TEST(CubeTiling, LargeGemmOnAllCoresIsHbmBound) {
  CubeMachineFigures f;
  auto t = ChooseCubeTiling(Square(1024), f);
  ASSERT_TRUE(t.ok());
  EXPECT_GE(t->blocks, 16);
  EXPECT_EQ(t->bound, "HBM");
  EXPECT_GE(t->cycles, t->hbm_cycles);
  // Faster HBM moves the bound to the cube.
  f.hbm_bytes_per_cycle = 1e6;
  auto fast = ChooseCubeTiling(Square(4096), f);
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->bound, "cube");
}

TEST(CubeTiling, SmallerBuffersGiveSmallerTiles) {
  CubeMachineFigures big, small;
  small.l0a_bytes = small.l0b_bytes = 16 * 1024;
  small.l0c_bytes = 64 * 1024;
  CubeProblem p = Square(2048);
  auto tb = ChooseCubeTiling(p, big);
  auto ts = ChooseCubeTiling(p, small);
  ASSERT_TRUE(tb.ok() && ts.ok());
  EXPECT_LT(ts->tm * ts->tn, tb->tm * tb->tn);
  EXPECT_GT(ts->cycles, tb->cycles);
}

TEST(CubeTiling, RaggedShapesTileTheMatrix) {
  CubeMachineFigures f;
  CubeProblem p;
  p.M = 5;
  p.N = 1000;
  p.K = 33;
  auto t = ChooseCubeTiling(p, f);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->tm, 16);  // never wider than the matrix rounded to a fractal
  EXPECT_TRUE(t->via_ub);  // 5 rows: the tile leaves through UB
  EXPECT_EQ(t->m_tiles, 1);
  EXPECT_GE(t->n_tiles * t->tn, 1000);
}

TEST(CubeTiling, RejectsTilesThatDoNotFit) {
  CubeMachineFigures f;
  CubeTiling t;
  t.tm = 512;
  t.tn = 512;
  t.tk = 64;
  t.tk1 = 64;
  EXPECT_FALSE(EstimateCubeTiling(Square(1024), f, &t).ok());
  t.tm = 24;  // not whole fractals
  EXPECT_FALSE(EstimateCubeTiling(Square(1024), f, &t).ok());
}

}  // namespace
}  // namespace kiln::target::npusim
