//===- tile_band_cost_model.h - Convolutions gathered from a band in the stage scope -*- C++ -*-===//
//
// The third schedule of the shared cost model, beside the GEMM's waves and
// persistent blocks (docs/tile-ir.md, "The GEMM cost model"): a 2-D
// convolution as an implicit GEMM whose B operand (the im2col of the
// image) is never built in memory. A unit of work is one band of `rows`
// output rows of one image and one group of output-channel tiles: the
// band's input rows come into the stage scope once, and the operand loader
// gathers each MMA step's im2col blocks from them (on a target whose
// operand loader has an im2col form). The units of one run of bands (bands the padding clips
// alike) and one channel group form a section, whose weights stay in the
// stage scope while a block walks its units; a block takes every
// blocks-th unit.
//
// A launch's cycles: the busiest block's units back to back, each as long
// as its slowest engine (the band and residual loads, the tiles' write-out,
// the MMAs and the operand gathers after the band arrives, the vector
// work), plus the weights of each section it visits, against the chip's
// global traffic over the shared bandwidth. A kernel tells the model what
// its program does beyond the problem through BandKernelTraits.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/ir/tensor.h"
#include "target/backend/tile_lowering.h"
#include "target/backend/window.h"

namespace kiln::target::tile {

// One group's convolution (window.groups == 1) in MMA blocks.
struct BandConvProblem {
  Window2d window;
  DType input = DType::kF16;   // X and W as the matrix engine reads them
  DType output = DType::kF16;  // Y
};

// Bands of output rows whose input rows the padding clips the same way.
struct BandRun {
  int64_t first = 0, count = 0;  // bands
  int64_t rows = 0;              // output rows of each band
  int64_t pad_top = 0, pad_bottom = 0, in_rows = 0;  // the band's window in X
};

// The runs of bands of `rows` output rows over the window's output.
std::vector<BandRun> BandRunsOf(const Window2d& w, int64_t rows);

struct BandTiling {
  int64_t rows = 1;      // output rows of a band
  int64_t m_blocks = 1;  // MMA blocks of pixels per tile (a band's pixels at least)
  int64_t n_blocks = 1;  // MMA blocks of output channels per tile
  int64_t k_blocks = 1;  // MMA blocks of K per operand step
  int64_t groups = 1;    // channel groups: the units of one band

  // Filled by the estimate.
  std::vector<BandRun> runs;
  int64_t bands = 1, tiles = 1, tiles_per_group = 1;
  int64_t band_rows = 0;     // input rows of the tallest band
  int64_t band_bytes = 0;    // a band in the stage scope (channel blocks x rows x W), rounded to 512
  int64_t weight_bytes = 0;  // a group's weights in the stage scope
  int64_t blocks = 1;
  double estimated_cycles = 0;
  std::string bound;  // "global memory", "matrix", "operand loads", "stage bandwidth", "write-out", "vector"
};

struct BandKernelTraits {
  // The band reaches the stage scope through the vector unit (a layout
  // conversion, one vector op per MMA block of the band) and a workspace
  // in global memory: read twice and written once, not copied straight in.
  bool band_via_vector = false;
  bool residual = false;         // each tile reads a tensor of Y's shape
  int64_t tile_vector_passes = 1;  // vector ops over each output MMA block (the write-out's, the epilogue's)
  double vector_block_cycles = 1;  // one vector op over one MMA block
  int max_units = 0;             // units the launch may use (0: all)
  // What the kernel's own buffers need of a tiling (the vector scope's
  // layout, its instructions' limits); unset: nothing more.
  std::function<bool(const BandTiling&)> fits;
};

// Estimates `t` for `p` (fills its derived fields); an error when the
// tiling does not fit the target's capacities or the kernel's.
absl::Status EstimateBandConv(const BandConvProblem& p, const TileCostFigures& f, const BandKernelTraits& traits,
                              BandTiling* t);
// The cheapest tiling the model finds (bands up to 16 MMA blocks of pixels).
absl::StatusOr<BandTiling> ChooseBandConvTiling(const BandConvProblem& p, const TileCostFigures& f,
                                                const BandKernelTraits& traits);

}  // namespace kiln::target::tile
