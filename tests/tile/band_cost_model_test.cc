//===- band_cost_model_test.cc - Convolutions gathered from a band in the stage scope ===//
//
// target/backend/tile_band_cost_model.cc on its own, with the figures of a
// 910-like AI core (tests/tile/tile_test_targets.h: 32 cores, L1 1 MiB,
// L0A/L0B 64 KiB, L0C 256 KiB, UB 256 KiB, a 16x16x16 fp16 cube at 4096
// MACs per cycle, HBM 1200 bytes per cycle) and the persistent schedule's
// engine latencies.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_band_cost_model.h"

#include <gtest/gtest.h>

#include "tests/tile/tile_test_targets.h"

namespace kiln::target::tile {
namespace {

TileCostFigures AiCore() {
  TargetDescription d = NpusimLike();
  d.tiling.global_latency_cycles = 500;
  d.tiling.gemm_schedule = TilingFigures::GemmSchedule::kPersistent;
  d.tiling.latency = {.stage_load = 50, .operand_load = 20, .mma = 10, .write_out = 20, .vector_store = 50, .sync = 1};
  d.tiling.vector_store_bytes_per_cycle = 256;
  return FiguresOf(d);
}

// A KxK convolution at stride 1 with "same" padding on an HxH image.
BandConvProblem Conv(int64_t n, int64_t c, int64_t h, int64_t oc, int64_t k) {
  BandConvProblem p;
  Window2d& w = p.window;
  w.n = n;
  w.c = c;
  w.h = w.w = h;
  w.oc = oc;
  w.oh = w.ow = h;
  w.kernel[0] = w.kernel[1] = k;
  w.pad_begin[0] = w.pad_begin[1] = w.pad_end[0] = w.pad_end[1] = k / 2;
  return p;
}

TEST(BandConv, RunsGroupBandsThePaddingClipsAlike) {
  const Window2d w = Conv(1, 16, 8, 16, 3).window;
  // Bands of 2 rows: the first clipped at the top, two alike, the last at the bottom.
  std::vector<BandRun> runs = BandRunsOf(w, 2);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].pad_top, 1);
  EXPECT_EQ(runs[0].in_rows, 3);
  EXPECT_EQ(runs[1].first, 1);
  EXPECT_EQ(runs[1].count, 2);
  EXPECT_EQ(runs[1].in_rows, 4);
  EXPECT_EQ(runs[2].pad_bottom, 1);
  EXPECT_EQ(runs[2].in_rows, 3);
  // Bands of 3 rows: the last has 2 and a run of its own.
  runs = BandRunsOf(w, 3);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[2].rows, 2);
  EXPECT_TRUE(BandRunsOf(w, 0).empty());
}

TEST(BandConv, ChosenTilingsFitEveryScope) {
  const TileCostFigures f = AiCore();
  for (const BandConvProblem& p : {Conv(1, 64, 56, 64, 3), Conv(8, 3, 224, 64, 7), Conv(1, 512, 7, 512, 3),
                                   Conv(2, 128, 28, 256, 1)}) {
    auto t = ChooseBandConvTiling(p, f, {});
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_LE(2 * t->m_blocks * t->k_blocks * 512, 64 << 10);
    EXPECT_LE(2 * t->k_blocks * t->n_blocks * 512, 64 << 10);
    EXPECT_LE(2 * t->m_blocks * t->n_blocks * 1024, 256 << 10);
    EXPECT_LE(t->band_bytes + t->weight_bytes, 1 << 20);
    EXPECT_GE(t->m_blocks * 16, t->rows * p.window.ow);  // a tile holds its band's pixels
    EXPECT_LE(t->blocks, 32);
    EXPECT_GT(t->estimated_cycles, 0);
  }
}

TEST(BandConv, NoFasterThanTheCubeOrTheWeights) {
  // 64 channels in and out, 3x3 over 8 images of 56x56: many bands, small
  // weights, so the cube bounds it.
  const BandConvProblem p = Conv(8, 64, 56, 64, 3);
  auto t = ChooseBandConvTiling(p, AiCore(), {});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GE(t->estimated_cycles, 64.0 * 64 * 9 * 56 * 56 * 8 / (32 * 4096.0));
  EXPECT_EQ(t->bound, "matrix");
  // 512 channels over one 14x14 image: each block reads 4.5 MiB of weights
  // for a few bands, so global memory bounds it.
  auto deep = ChooseBandConvTiling(Conv(1, 512, 14, 512, 3), AiCore(), {});
  ASSERT_TRUE(deep.ok()) << deep.status();
  EXPECT_GE(deep->estimated_cycles, 512.0 * 512 * 9 * 14 * 14 / (32 * 4096.0));
  EXPECT_EQ(deep->bound, "global memory");
}

TEST(BandConv, ABandThroughTheVectorUnitCostsItsRoundTrip) {
  const TileCostFigures f = AiCore();
  const BandConvProblem p = Conv(4, 64, 56, 64, 3);
  auto direct = ChooseBandConvTiling(p, f, {});
  ASSERT_TRUE(direct.ok()) << direct.status();
  BandTiling same = *direct;
  BandKernelTraits converted;
  converted.band_via_vector = true;
  ASSERT_TRUE(EstimateBandConv(p, f, converted, &same).ok());
  EXPECT_GT(same.estimated_cycles, direct->estimated_cycles);
  // A residual read per unit costs a load's latency at least.
  BandTiling with_residual = *direct;
  BandKernelTraits residual;
  residual.residual = true;
  ASSERT_TRUE(EstimateBandConv(p, f, residual, &with_residual).ok());
  EXPECT_GT(with_residual.estimated_cycles, direct->estimated_cycles);
}

TEST(BandConv, FewerUnitsTakeLonger) {
  const TileCostFigures f = AiCore();
  const BandConvProblem p = Conv(4, 64, 56, 64, 3);
  auto all = ChooseBandConvTiling(p, f, {});
  BandKernelTraits one;
  one.max_units = 1;
  auto single = ChooseBandConvTiling(p, f, one);
  ASSERT_TRUE(all.ok() && single.ok());
  EXPECT_EQ(single->blocks, 1);
  EXPECT_GT(all->blocks, 1);
  EXPECT_GT(single->estimated_cycles, 4 * all->estimated_cycles);
}

TEST(BandConv, TheChoiceIsTheCheapestCandidate) {
  const TileCostFigures f = AiCore();
  const BandConvProblem p = Conv(1, 64, 56, 128, 3);
  auto best = ChooseBandConvTiling(p, f, {});
  ASSERT_TRUE(best.ok()) << best.status();
  for (int64_t rows : {1, 2, 4})
    for (int64_t nt : {1, 2, 4})
      for (int64_t kt : {1, 2, 4, 8}) {
        BandTiling t;
        t.rows = rows;
        t.m_blocks = (rows * 56 + 15) / 16;
        t.n_blocks = nt;
        t.k_blocks = kt;
        if (EstimateBandConv(p, f, {}, &t).ok()) {
          EXPECT_GE(t.estimated_cycles, best->estimated_cycles);
        }
      }
}

TEST(BandConv, RefusalsSayWhy) {
  const TileCostFigures f = AiCore();
  // A band of a 4096-wide, 512-channel image is 12 MiB: no stage holds it.
  auto wide = ChooseBandConvTiling(Conv(1, 512, 4096, 16, 3), f, {});
  EXPECT_EQ(wide.status().code(), absl::StatusCode::kResourceExhausted);
  // A kernel whose own buffers take no tiling.
  BandKernelTraits none;
  none.fits = [](const BandTiling&) { return false; };
  EXPECT_FALSE(ChooseBandConvTiling(Conv(1, 16, 8, 16, 3), f, none).ok());
  // Grouped convolutions and dtypes without an MMA are another schedule's.
  BandConvProblem grouped = Conv(1, 32, 8, 32, 3);
  grouped.window.groups = 2;
  EXPECT_EQ(ChooseBandConvTiling(grouped, f, {}).status().code(), absl::StatusCode::kUnimplemented);
  BandConvProblem i32 = Conv(1, 16, 8, 16, 3);
  i32.input = DType::kI32;
  EXPECT_EQ(ChooseBandConvTiling(i32, f, {}).status().code(), absl::StatusCode::kUnimplemented);
  // A tile narrower than its band.
  BandTiling narrow;
  narrow.rows = 4;
  narrow.m_blocks = 1;
  EXPECT_EQ(EstimateBandConv(Conv(1, 16, 8, 16, 3), f, {}, &narrow).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::target::tile
