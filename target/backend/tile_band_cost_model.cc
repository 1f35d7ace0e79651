//===- tile_band_cost_model.cc - Convolutions gathered from a band in the stage scope ===//
//
// See tile_band_cost_model.h for the schedule. Sizes are in MMA blocks: a
// pixel block of mma.m output pixels, a channel block of mma.k input
// channels (K is channel blocks x KH x KW), an output block of mma.n
// channels.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_band_cost_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "target/backend/tile_lowering_shared.h"

namespace kiln::target::tile {
namespace {

using internal::Capacity;
using internal::CeilDiv;
using internal::RoundUp;

// The problem in MMA blocks.
struct Blocks {
  int64_t m = 16, n = 16, k = 16;   // the MMA's shape
  int64_t in_bytes = 2, out_bytes = 2, acc_bytes = 4;
  int64_t c1 = 1;   // channel blocks of X
  int64_t k1 = 1;   // blocks of K: c1 x KH x KW
  int64_t n1 = 1;   // output channel blocks
  double macs_per_cycle = 1;
};

absl::StatusOr<Blocks> BlocksOf(const BandConvProblem& p, const TileCostFigures& f) {
  const TileMma* mma = internal::MmaFor(f, p.input);
  if (!mma) return absl::UnimplementedError(absl::StrCat(f.target.name, " has no MMA of ", DTypeName(p.input)));
  const Window2d& w = p.window;
  if (w.groups != 1) return absl::UnimplementedError("the band schedule runs one-group convolutions");
  if (w.n <= 0 || w.c <= 0 || w.oc <= 0 || w.oh <= 0 || w.ow <= 0)
    return absl::InvalidArgumentError("an empty convolution");
  Blocks b;
  b.m = mma->m;
  b.n = mma->n;
  b.k = mma->k;
  b.in_bytes = static_cast<int64_t>(DTypeSize(p.input));
  b.out_bytes = static_cast<int64_t>(DTypeSize(p.output));
  b.acc_bytes = static_cast<int64_t>(DTypeSize(mma->accumulator));
  b.c1 = CeilDiv(w.c, b.k);
  b.k1 = b.c1 * w.kernel[0] * w.kernel[1];
  b.n1 = CeilDiv(w.oc, b.n);
  b.macs_per_cycle = f.MacsPerCycle(p.input) > 0 ? f.MacsPerCycle(p.input) : 1;
  return b;
}

}  // namespace

std::vector<BandRun> BandRunsOf(const Window2d& w, int64_t rows) {
  std::vector<BandRun> runs;
  if (rows <= 0) return runs;
  const int64_t kh = w.kernel[0], sh = w.stride[0], dh = w.dilation[0], pt = w.pad_begin[0];
  const int64_t bands = CeilDiv(w.oh, rows);
  for (int64_t b = 0; b < bands; ++b) {
    BandRun r;
    r.first = b;
    r.count = 1;
    r.rows = std::min(rows, w.oh - b * rows);
    const int64_t ih0 = b * rows * sh - pt;
    const int64_t ih1 = (b * rows + r.rows - 1) * sh - pt + (kh - 1) * dh + 1;
    r.pad_top = std::max<int64_t>(0, -ih0);
    r.pad_bottom = std::max<int64_t>(0, ih1 - w.h);
    r.in_rows = std::min(ih1, w.h) - std::max<int64_t>(ih0, 0);
    if (!runs.empty()) {
      BandRun& q = runs.back();
      if (q.rows == r.rows && q.pad_top == r.pad_top && q.pad_bottom == r.pad_bottom && q.in_rows == r.in_rows &&
          q.first + q.count == b) {
        ++q.count;
        continue;
      }
    }
    runs.push_back(r);
  }
  return runs;
}

absl::Status EstimateBandConv(const BandConvProblem& p, const TileCostFigures& f, const BandKernelTraits& traits,
                              BandTiling* t) {
  KILN_ASSIGN_OR_RETURN(const Blocks b, BlocksOf(p, f));
  const Window2d& w = p.window;
  auto tiling = [&] {
    return absl::StrCat("band tiling ", t->rows, " rows, ", t->m_blocks, "x", t->n_blocks, "x", t->k_blocks, "/",
                        t->groups);
  };
  if (t->rows <= 0 || t->m_blocks <= 0 || t->n_blocks <= 0 || t->k_blocks <= 0 || t->groups <= 0)
    return absl::InvalidArgumentError(absl::StrCat(tiling(), " is empty"));
  t->runs = BandRunsOf(w, t->rows);
  t->bands = CeilDiv(w.oh, t->rows);
  t->band_rows = 0;
  for (const BandRun& r : t->runs) {
    if (r.in_rows <= 0) return absl::InvalidArgumentError(absl::StrCat(tiling(), ": a band reads no input row"));
    t->band_rows = std::max(t->band_rows, r.in_rows);
  }
  t->tiles = CeilDiv(b.n1, t->n_blocks);
  t->tiles_per_group = CeilDiv(t->tiles, t->groups);
  if ((t->groups - 1) * t->tiles_per_group >= t->tiles)
    return absl::InvalidArgumentError(absl::StrCat(tiling(), ": a channel group is empty"));
  const int64_t tile_px = t->m_blocks * b.m, tile_ch = t->n_blocks * b.n;
  if (tile_px < t->rows * w.ow)
    return absl::InvalidArgumentError(absl::StrCat(tiling(), ": a tile does not hold the band's pixels"));
  // Operand scopes: two slots each; the accumulator: two tiles.
  const int64_t a_block = b.m * b.k * b.in_bytes, b_block = b.k * b.n * b.in_bytes;
  if (2 * t->m_blocks * t->k_blocks * a_block > Capacity(f, Scope::kOperandA) ||
      2 * t->k_blocks * t->n_blocks * b_block > Capacity(f, Scope::kOperandB) ||
      2 * t->m_blocks * t->n_blocks * b.m * b.n * b.acc_bytes > Capacity(f, Scope::kAccumulator))
    return absl::ResourceExhaustedError(absl::StrCat(tiling(), " does not fit the operand buffers"));
  // The stage scope: the band, then the weights of a channel group.
  const int64_t channel_block_bytes = b.k * b.in_bytes;
  t->band_bytes = RoundUp(b.c1 * t->band_rows * w.w * channel_block_bytes, a_block);
  t->weight_bytes = b.k1 * std::min(b.n1, t->tiles_per_group * t->n_blocks) * b_block;
  if (t->band_bytes + t->weight_bytes > Capacity(f, Scope::kStage))
    return absl::ResourceExhaustedError(absl::StrCat(tiling(), " does not fit the stage buffer"));
  if (traits.fits && !traits.fits(*t))
    return absl::ResourceExhaustedError(absl::StrCat(tiling(), " does not fit the kernel's buffers"));

  // Each block's units run back to back; a unit's engines overlap.
  const int64_t units = w.n * t->bands * t->groups;
  int64_t cores = f.compute_units;
  if (traits.max_units > 0) cores = std::min<int64_t>(cores, traits.max_units);
  t->blocks = std::min(units, cores);
  const double band = static_cast<double>(b.c1 * t->band_rows * w.w * channel_block_bytes);  // unrounded
  const double steps = static_cast<double>(t->tiles_per_group * CeilDiv(b.k1, t->k_blocks));
  const double out_bytes = static_cast<double>(t->tiles_per_group * tile_ch * t->rows * w.ow * b.out_bytes);
  const double stage_in = (traits.band_via_vector ? band * 2 : band) + (traits.residual ? out_bytes : 0.0);
  const double store_out = (traits.band_via_vector ? band : 0.0) + out_bytes;
  const double block_macs = static_cast<double>(b.m * b.n * b.k);
  const double mma = steps * static_cast<double>(t->m_blocks * t->k_blocks * t->n_blocks) * block_macs /
                         b.macs_per_cycle +
                     steps * f.latency.mma;
  const double operand = steps * (static_cast<double>((t->m_blocks * a_block + t->n_blocks * b_block) * t->k_blocks) /
                                      f.operand_bytes_per_cycle +
                                  f.latency.operand_load);
  const int64_t band_pixel_blocks = RoundUp(t->band_rows * w.w, b.m) / b.m;
  const double vector =
      static_cast<double>((traits.band_via_vector ? b.c1 * band_pixel_blocks : 0) +
                          t->tiles_per_group * t->n_blocks * t->m_blocks * traits.tile_vector_passes) *
      traits.vector_block_cycles;
  const double dma_lat = f.global_latency_cycles + f.latency.stage_load;
  // The band's copy into the stage waits for the previous unit's last gather.
  const double band_in = dma_lat + band / f.stage_bytes_per_cycle;
  // Each tile's write holds the store engine until it lands, and a unit's
  // residual holds the load engine once.
  const double tile_out =
      static_cast<double>(t->tiles_per_group) * (f.global_latency_cycles + f.latency.vector_store);
  const double res_in = traits.residual ? dma_lat : 0.0;
  const double store_rate =
      f.vector_store_bytes_per_cycle > 0 ? f.vector_store_bytes_per_cycle : f.stage_bytes_per_cycle;
  const double load_time = stage_in / f.stage_bytes_per_cycle + res_in;
  const double store_time = store_out / store_rate + tile_out;
  const double unit = std::max({load_time, store_time, mma + band_in, operand + band_in, vector});
  const double per_block_units = static_cast<double>(CeilDiv(units, t->blocks));
  // Each block loads the weights of the sections it has units of.
  const double sections = static_cast<double>(
      std::min<int64_t>(t->groups * static_cast<int64_t>(t->runs.size()), CeilDiv(units, t->blocks)));
  const double weights = sections * (dma_lat + static_cast<double>(t->weight_bytes) / f.stage_bytes_per_cycle);
  const double global = (static_cast<double>(units) * (stage_in + store_out) +
                         sections * static_cast<double>(t->blocks * t->weight_bytes)) /
                        f.global_bytes_per_cycle;
  const double block_time = per_block_units * unit + weights;
  t->estimated_cycles = std::max(block_time, global) + 3 * dma_lat + 2 * f.global_latency_cycles;
  if (global >= block_time) t->bound = "global memory";
  else if (unit == mma + band_in) t->bound = "matrix";
  else if (unit == operand + band_in) t->bound = "operand loads";
  else if (unit == load_time) t->bound = "stage bandwidth";
  else if (unit == store_time) t->bound = "vector store";
  else t->bound = "vector";
  return absl::OkStatus();
}

absl::StatusOr<BandTiling> ChooseBandConvTiling(const BandConvProblem& p, const TileCostFigures& f,
                                                const BandKernelTraits& traits) {
  KILN_ASSIGN_OR_RETURN(const Blocks b, BlocksOf(p, f));
  const Window2d& w = p.window;
  BandTiling best;
  bool found = false;
  for (int64_t rows = 1; rows <= w.oh; ++rows) {
    if (rows > 1 && (rows - 1) * w.ow >= 16 * b.m) break;  // bands up to 16 blocks of pixels
    for (int64_t nt : {1, 2, 4, 8, 16}) {
      if (nt > 1 && (nt / 2) >= b.n1) break;
      for (int64_t kt : {1, 2, 4, 8, 16, 32}) {
        if (kt > 1 && (kt / 2) >= b.k1) break;
        for (int64_t g = 1; g <= CeilDiv(b.n1, nt); g *= 2) {
          BandTiling t;
          t.rows = rows;
          t.m_blocks = CeilDiv(rows * w.ow, b.m);
          t.n_blocks = nt;
          t.k_blocks = kt;
          t.groups = g;
          if (!EstimateBandConv(p, f, traits, &t).ok()) continue;
          if (!found || t.estimated_cycles < best.estimated_cycles) {
            best = std::move(t);
            found = true;
          }
        }
      }
    }
  }
  if (!found) return absl::ResourceExhaustedError("no band tiling fits the target's buffers");
  return best;
}

}  // namespace kiln::target::tile
