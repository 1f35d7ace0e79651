//===- cube_tiling.h - Tile sizes of cube GEMM kernels by a cost model -*- C++ -*-===//
//
// The analytic cost model that picks the tiling of a GEMM on the simulated
// NPU's cube. A kernel computes C[batch, M, N] = A x B tile by tile: each
// block owns tm x tn tiles of C (taken round-robin over batch, M-tile and
// N-tile); each tile walks K in L1 stages of tk1 (double-buffered, loaded by
// MTE2) split into L0 steps of tk (double-buffered in L0A/L0B, loaded by
// MTE1, multiplied by the cube into one of two L0C accumulators, so FIXP
// writes a tile while the cube runs the next).
//
// The model is stated in the machine's own figures (CubeMachineFigures, taken
// from a sim::Machine) so it can be tested on its own: it estimates a
// launch's cycles as the busiest core's pipeline time (the slowest of MTE2,
// MTE1 and the cube per stage, each DMA stage paying the HBM latency once
// because set_flag waits for it) against the chip-wide HBM traffic over the
// shared bandwidth, plus the fill and the last tile's write-out.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "sim/machine/machine.pb.h"
#include "target/backend/tile_lowering.h"

namespace kiln::target::npusim {

// The figures of one machine the cost model uses (bytes and cycles).
struct CubeMachineFigures {
  int cores = 32;
  int64_t l1_bytes = 1 << 20, l0a_bytes = 64 << 10, l0b_bytes = 64 << 10, l0c_bytes = 256 << 10,
          ub_bytes = 256 << 10;
  double mte2_bytes_per_cycle = 256, mte1_bytes_per_cycle = 512, mte3_bytes_per_cycle = 256,
         fixp_bytes_per_cycle = 256;
  double hbm_bytes_per_cycle = 1200;  // chip-wide, shared by the cores
  double mte_burst_cycles = 0;        // between the bursts of one DMA
  double hbm_latency = 500, mte2_latency = 50, mte1_latency = 20, mte3_latency = 50, cube_latency = 10,
         fixp_latency = 20, flag_latency = 1;
  double fp16_macs_per_cycle = 4096, fp32_macs_per_cycle = 1024;
  int pipe_queue_depth = 32;  // instructions a pipe's queue holds ahead of it

  static CubeMachineFigures From(const sim::Machine& m);
};

// One GEMM as the kernel sees it: `batch` independent [M,K] x [K,N] products.
struct CubeProblem {
  int64_t batch = 1, M = 1, N = 1, K = 1;
  int in_bytes = 2;         // element size of A and B (2: f16/bf16, 4: f32)
  int out_bytes = 2;        // element size of C
  bool trans_a = false;     // A stored [K, M]
  bool trans_b = false;     // B stored [N, K]
  // A / B read as fractals (a constant laid out at compile time): a K stage
  // of a tile comes in one burst per band of 16 rows rather than one per row.
  bool a_fractal = false, b_fractal = false;
  bool epilogue_in_ub = false;  // the tile goes through UB (f32) for vector work before GM
  bool residual = false;        // the epilogue adds a tensor of Y's shape (read per tile)
  int64_t ub_reserved = 0;  // UB bytes the kernel keeps for other things (bias)
  int max_blocks = 0;       // 0: all cores
  // Convolution mode: each of the `batch` items is a unit whose tiles stay
  // on one block, after an im2col that takes unit_prologue_cycles (serial
  // with the unit's GEMM) and moves unit_prologue_hbm_bytes; B comes into L1
  // by one copy_gm_l1 per row (a scalar issue each).
  bool conv = false;
  double unit_prologue_cycles = 0, unit_prologue_hbm_bytes = 0;
  // One tile spans N (tn >= N) and leaves through UB: N holds discarded
  // columns between the rows the kernel writes.
  bool whole_n = false;
};

// A tiling and what the model says about it.
struct CubeTiling {
  int64_t tm = 16, tn = 16, tk = 16, tk1 = 16;  // C tile, L0 step and L1 stage depth (elements)
  int l0c_buffers = 2;  // 2: FIXP writes a tile while the cube runs the next; 1: larger tiles
  int64_t m_tiles = 1, n_tiles = 1, tiles = 1, blocks = 1;
  bool via_ub = false;    // tiles leave through UB (ragged edge narrower than a tile, or an epilogue)
  double cycles = 0;      // the estimate of the launch
  double compute_cycles = 0;  // the busiest core's cube time
  double hbm_cycles = 0;      // the chip's HBM traffic over its bandwidth
  std::string bound;          // "cube", "HBM", "MTE2 latency", "MTE1", "FIXP"
};

// The cycles the model gives `t` for `p` on `m` (fills t's derived fields:
// tile counts, blocks, via_ub, the estimate and its parts). Errors when the
// tiling does not fit the buffers.
absl::Status EstimateCubeTiling(const CubeProblem& p, const CubeMachineFigures& m, CubeTiling* t);

// The cheapest tiling the model finds among candidates that fit L1, L0A and
// L0B double-buffered, L0C single- or double-buffered (and UB when the tile
// goes through it).
absl::StatusOr<CubeTiling> ChooseCubeTiling(const CubeProblem& p, const CubeMachineFigures& m);

// The machine as the shared tile lowering sees it: scope capacities (L1,
// L0A, L0B, L0C, UB), the cube's MMA shapes and rates, bandwidths.
tile::TileCostFigures TileFiguresOf(const CubeMachineFigures& m);
// `t` as the shared lowering's GEMM tiling: the C tile is the block tile and
// the one group's tile, L1 stages of tk1 in two slots, L0 steps of tk in two
// (an inner loop only when a stage holds several steps).
tile::GemmTiling TileTilingOf(const CubeTiling& t);

}  // namespace kiln::target::npusim
