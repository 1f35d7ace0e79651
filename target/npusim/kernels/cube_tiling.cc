//===- cube_tiling.cc - Tile sizes of cube GEMM kernels by a cost model ---===//
#include "target/npusim/kernels/cube_tiling.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "target/npusim/kernels/kernel.h"

namespace kiln::target::npusim {
namespace {

// Time of the MTE1 and cube work of one L0 step of kj elements of K.
struct StepTime {
  double mte1 = 0, cube = 0;
  int64_t mte1_insts = 0;
};

StepTime L0Step(const CubeProblem& p, const CubeMachineFigures& m, const CubeTiling& t, int64_t kj) {
  StepTime s;
  const int64_t k16 = RoundUp(kj, 16);
  const int64_t k0 = 32 / p.in_bytes;
  // Loads: A is tm x k16, B is k16 x tn; one instruction each, or one per
  // fractal row/column where the grid is reordered.
  int64_t a_insts = p.trans_a ? t.tm / 16 : 1;
  int64_t b_insts = p.trans_b ? k16 / k0 : 1;
  double bytes = static_cast<double>((t.tm + t.tn) * k16 * p.in_bytes);
  s.mte1_insts = a_insts + b_insts + 2;
  s.mte1 = bytes / m.mte1_bytes_per_cycle + static_cast<double>(a_insts + b_insts) * m.mte1_latency + 2 * m.flag_latency;
  double macs_per_frac = 16.0 * 16.0 * static_cast<double>(k0);
  double rate = p.in_bytes == 4 ? m.fp32_macs_per_cycle : m.fp16_macs_per_cycle;
  s.cube = m.cube_latency + static_cast<double>((t.tm / 16) * (t.tn / 16) * (k16 / k0)) * macs_per_frac / rate +
           m.flag_latency;
  return s;
}

}  // namespace

CubeMachineFigures CubeMachineFigures::From(const sim::Machine& mc) {
  CubeMachineFigures f;
  const sim::Core& k = mc.core();
  const sim::Chip& c = mc.chip();
  f.cores = c.ai_cores();
  f.l1_bytes = k.l1_kib() * 1024;
  f.l0a_bytes = k.l0a_kib() * 1024;
  f.l0b_bytes = k.l0b_kib() * 1024;
  f.l0c_bytes = k.l0c_kib() * 1024;
  f.ub_bytes = k.ub_kib() * 1024;
  f.mte2_bytes_per_cycle = k.mte2_bytes_per_cycle();
  f.mte1_bytes_per_cycle = k.mte1_bytes_per_cycle();
  f.mte3_bytes_per_cycle = k.mte3_bytes_per_cycle();
  f.fixp_bytes_per_cycle = k.fixp_bytes_per_cycle();
  f.hbm_bytes_per_cycle = c.hbm_bandwidth_gbps() * 1e3 / c.clock_mhz();
  f.mte_burst_cycles = k.mte_burst_cycles();
  f.hbm_latency = static_cast<double>(c.hbm_latency_cycles());
  f.mte2_latency = static_cast<double>(k.mte2_latency_cycles());
  f.mte1_latency = static_cast<double>(k.mte1_latency_cycles());
  f.mte3_latency = static_cast<double>(k.mte3_latency_cycles());
  f.cube_latency = static_cast<double>(k.cube_latency_cycles());
  f.fixp_latency = static_cast<double>(k.fixp_latency_cycles());
  f.flag_latency = static_cast<double>(k.flag_latency_cycles());
  f.fp16_macs_per_cycle = static_cast<double>(k.cube_fp16_macs_per_cycle());
  f.fp32_macs_per_cycle = static_cast<double>(k.cube_fp32_macs_per_cycle());
  f.pipe_queue_depth = k.pipe_queue_depth();
  return f;
}

absl::Status EstimateCubeTiling(const CubeProblem& p, const CubeMachineFigures& m, CubeTiling* t) {
  if (t->tm % 16 || t->tn % 16 || t->tk % 16 || t->tk1 % t->tk || t->tm <= 0 || t->tn <= 0 || t->tk <= 0)
    return absl::InvalidArgumentError(absl::StrCat("tiling ", t->tm, "x", t->tn, "x", t->tk, "/", t->tk1,
                                                   " is not in whole 16-element fractals"));
  const int64_t ib = p.in_bytes;
  // Double-buffered L0A, L0B, L0C and L1.
  if (2 * t->tm * t->tk * ib > m.l0a_bytes || 2 * t->tk * t->tn * ib > m.l0b_bytes ||
      t->l0c_buffers * t->tm * t->tn * 4 > m.l0c_bytes || t->l0c_buffers < 1 || t->l0c_buffers > 2 || 2 * (t->tm + t->tn) * t->tk1 * ib > m.l1_bytes)
    return absl::ResourceExhaustedError(
        absl::StrCat("tiling ", t->tm, "x", t->tn, "x", t->tk, "/", t->tk1, " does not fit the buffers"));
  t->m_tiles = CeilDiv(p.M, t->tm);
  t->n_tiles = CeilDiv(p.N, t->tn);
  t->tiles = p.batch * t->m_tiles * t->n_tiles;
  if (p.whole_n && t->tn < p.N)
    return absl::InvalidArgumentError(absl::StrCat("tile width ", t->tn, " does not span N = ", p.N));
  t->via_ub = p.epilogue_in_ub || t->tm > p.M || t->tn > p.N || p.whole_n;
  if (t->via_ub) {
    int64_t ub = p.epilogue_in_ub ? t->tm * t->tn * (8 + p.out_bytes) : 2 * t->tm * t->tn * p.out_bytes;
    if (p.residual) ub += t->tm * t->tn * 8;  // f32 after conversion, and as loaded (at most f32)
    if (ub + p.ub_reserved > m.ub_bytes)
      return absl::ResourceExhaustedError(absl::StrCat("tile ", t->tm, "x", t->tn, " does not fit UB"));
  }
  int64_t cap = p.max_blocks > 0 ? p.max_blocks : m.cores;
  t->blocks = std::max<int64_t>(1, std::min(p.conv ? p.batch : t->tiles, cap));
  const int64_t active = std::min<int64_t>(t->blocks, m.cores);
  const int64_t units_per_core = CeilDiv(p.batch, active);
  const int64_t tiles_per_core =
      p.conv ? units_per_core * t->m_tiles * t->n_tiles : CeilDiv(t->tiles, active);
  const int64_t rows = std::min(t->tm, p.M), cols = std::min(t->tn, p.N);

  // One L1 stage of kc elements of K: its MTE2 time (the transfer, then the
  // HBM latency that the stage's set_flag waits for) and its L0 steps.
  // The active cores stream in step, so each gets its share of HBM while
  // they transfer and all of them wait out the latency together.
  const double dma_lat = m.hbm_latency + m.mte2_latency + m.flag_latency;
  const double core_bw = std::min(m.mte2_bytes_per_cycle, m.hbm_bytes_per_cycle / static_cast<double>(active));
  // A DMA of n bursts takes at least n * mte_burst_cycles (docs/npu.md).
  auto load = [&](int64_t r, int64_t c, double bursts) {
    return std::max(static_cast<double>(r * c * ib) / core_bw, bursts * m.mte_burst_cycles);
  };
  auto stage = [&](int64_t kc, double* mte2, double* compute, double* cube, double* first_mte1) {
    const double a_bursts = p.a_fractal ? CeilDiv(rows, 16) : p.trans_a ? kc : (kc == p.K ? 1 : rows);
    const double b_bursts = p.conv ? RoundUp(kc, 16)  // a copy per row
                            : p.b_fractal ? CeilDiv(kc, 16)
                            : p.trans_b  ? cols
                                         : (cols == p.N ? 1 : kc);
    *mte2 = load(rows, kc, a_bursts) + load(kc, cols, b_bursts) + dma_lat;
    *compute = 0;
    *cube = 0;
    int64_t insts = 2;
    for (int64_t k = 0; k < kc; k += t->tk) {
      StepTime s = L0Step(p, m, *t, std::min(t->tk, kc - k));
      if (k == 0) *first_mte1 = s.mte1;
      *compute += std::max(s.mte1, s.cube);
      *cube += s.cube;
      insts += s.mte1_insts;
    }
    // A stage longer than MTE1's queue keeps the scalar unit from issuing
    // the next stage's loads until this one's steps are nearly done.
    if (insts > m.pipe_queue_depth) *mte2 += *compute;
    if (p.conv) *mte2 += static_cast<double>(RoundUp(kc, 16)) * m.flag_latency;  // a copy issued per row
  };
  const int64_t ns = CeilDiv(p.K, t->tk1);
  const int64_t kc_tail = p.K - (ns - 1) * t->tk1;
  double full_mte2 = 0, full_compute = 0, full_cube = 0, full_mte1 = 0;
  double tail_mte2 = 0, tail_compute = 0, tail_cube = 0, tail_mte1 = 0;
  stage(t->tk1, &full_mte2, &full_compute, &full_cube, &full_mte1);
  stage(kc_tail, &tail_mte2, &tail_compute, &tail_cube, &tail_mte1);
  double tile_time = static_cast<double>(ns - 1) * std::max(full_mte2, full_compute) + std::max(tail_mte2, tail_compute);
  double tile_cube = static_cast<double>(ns - 1) * full_cube + tail_cube;
  double tile_mte2 = static_cast<double>(ns - 1) * full_mte2 + tail_mte2;

  // Write-out of a tile: FIXP straight to GM, or to UB and then MTE3.
  const double l0c_bytes = static_cast<double>(t->tm * t->tn * 4);
  double fixp = l0c_bytes / m.fixp_bytes_per_cycle + m.fixp_latency;
  if (t->via_ub) {
    fixp += static_cast<double>(rows * cols * p.out_bytes) / m.mte3_bytes_per_cycle + m.hbm_latency + m.mte3_latency;
    if (p.epilogue_in_ub) fixp += 6 * l0c_bytes / 256.0;  // a few vector passes over the f32 tile
    if (p.residual) fixp += static_cast<double>(rows * cols * ib) / m.mte2_bytes_per_cycle + m.hbm_latency;
  } else {
    fixp += m.hbm_latency;
  }
  // With one L0C buffer the cube waits for each write-out.
  tile_time = t->l0c_buffers == 2 ? std::max(tile_time, fixp) : tile_time + fixp;
  // The core's stages run back to back: the first stage's load is exposed,
  // then each stage takes the larger of its load and the previous stage's
  // L0 steps, and the last stage's steps and write-out follow.
  double first_mte2 = ns == 1 ? tail_mte2 : full_mte2;
  double first_stage = ns == 1 ? std::max(tail_mte2, tail_compute) : std::max(full_mte2, full_compute);
  double fill = first_mte2 + (ns == 1 ? tail_mte1 : full_mte1);
  double core_time =
      fill + static_cast<double>(tiles_per_core) * tile_time - first_stage + tail_compute + fixp;
  if (p.conv) core_time += static_cast<double>(units_per_core) * p.unit_prologue_cycles;

  // The chip's HBM traffic: A and B chunks for every tile, C written once.
  double hbm_bytes = static_cast<double>(t->tiles) * static_cast<double>((rows + cols) * p.K * ib) +
                     static_cast<double>(p.batch * p.M * p.N * (p.out_bytes + (p.residual ? ib : 0))) +
                     static_cast<double>(p.batch) * p.unit_prologue_hbm_bytes;
  t->hbm_cycles = hbm_bytes / m.hbm_bytes_per_cycle;
  double hbm_time = t->hbm_cycles + dma_lat + fixp;
  t->compute_cycles = static_cast<double>(tiles_per_core) * tile_cube;
  t->cycles = std::max(core_time, hbm_time);
  double core_mte2 = static_cast<double>(tiles_per_core) * tile_mte2;
  const double transfer = static_cast<double>(tiles_per_core) * static_cast<double>((rows + cols) * p.K * ib) / core_bw;
  if (hbm_time >= core_time || (core_bw < m.mte2_bytes_per_cycle && transfer >= 0.6 * core_time)) t->bound = "HBM";
  else if (t->compute_cycles >= 0.8 * core_time) t->bound = "cube";
  else if (core_mte2 >= 0.8 * core_time) t->bound = "MTE2 latency";
  else if (fixp >= tile_time) t->bound = "FIXP";
  else t->bound = "MTE1";
  return absl::OkStatus();
}

absl::StatusOr<CubeTiling> ChooseCubeTiling(const CubeProblem& p, const CubeMachineFigures& m) {
  if (p.M <= 0 || p.N <= 0 || p.K <= 0 || p.batch <= 0)
    return absl::InvalidArgumentError(absl::StrCat("empty GEMM ", p.M, "x", p.N, "x", p.K));
  const int64_t m16 = RoundUp(p.M, 16), n16 = RoundUp(p.N, 16), k16 = RoundUp(p.K, 16);
  CubeTiling best;
  bool found = false;
  double best_hbm = 0;
  for (int64_t tm = 16; tm <= std::min<int64_t>(m16, 512); tm += 16) {
    // Tiles past the matrix only where one tile covers it.
    for (int64_t tn = 16; tn <= std::min<int64_t>(n16, 512); tn += 16) {
      for (int64_t tk : {16, 32, 48, 64, 96, 128, 192, 256}) {
        if (tk > k16) continue;
        for (int64_t nsub : {1, 2, 4, 8, 16}) {
          int64_t tk1 = tk * nsub;
          if (tk1 > RoundUp(p.K, tk) && nsub > 1) continue;
          for (int l0c : {2, 1}) {
            CubeTiling t;
            t.tm = tm;
            t.tn = tn;
            t.tk = tk;
            t.tk1 = tk1;
            t.l0c_buffers = l0c;
            if (!EstimateCubeTiling(p, m, &t).ok()) continue;
            bool better = !found || t.cycles < best.cycles * 0.999 ||
                          (t.cycles <= best.cycles * 1.001 && t.hbm_cycles < best_hbm);
            if (better) {
              best = t;
              best_hbm = t.hbm_cycles;
              found = true;
            }
          }
        }
      }
    }
  }
  if (!found)
    return absl::ResourceExhaustedError(
        absl::StrCat("no tiling of ", p.M, "x", p.N, "x", p.K, " fits the buffers of this machine"));
  return best;
}

tile::TileCostFigures TileFiguresOf(const CubeMachineFigures& m) {
  tile::TileCostFigures f;
  f.target.name = "npusim";
  f.target.capacity = {{tile::Scope::kStage, m.l1_bytes},       {tile::Scope::kOperandA, m.l0a_bytes},
                       {tile::Scope::kOperandB, m.l0b_bytes},   {tile::Scope::kAccumulator, m.l0c_bytes},
                       {tile::Scope::kVector, m.ub_bytes}};
  // K0 = 32 bytes of each element type: 16 fp16/bf16, 8 fp32, 32 int8.
  f.target.mma = {{16, 16, 16, DType::kF16, DType::kF32},
                  {16, 16, 16, DType::kBF16, DType::kF32},
                  {16, 16, 8, DType::kF32, DType::kF32},
                  {16, 16, 32, DType::kI8, DType::kI32}};
  f.macs_per_cycle = {{DType::kF16, m.fp16_macs_per_cycle},
                      {DType::kBF16, m.fp16_macs_per_cycle},
                      {DType::kF32, m.fp32_macs_per_cycle},
                      {DType::kI8, 2 * m.fp16_macs_per_cycle}};
  f.compute_units = m.cores;
  f.global_bytes_per_cycle = m.hbm_bytes_per_cycle;
  f.global_latency_cycles = m.hbm_latency;
  f.stage_bytes_per_cycle = m.mte2_bytes_per_cycle;
  f.operand_bytes_per_cycle = m.mte1_bytes_per_cycle;
  f.max_group = f.target.max_group = 1;
  f.max_stages = 2;
  return f;
}

tile::GemmTiling TileTilingOf(const CubeTiling& t) {
  tile::GemmTiling g;
  g.bm = g.gm = t.tm;
  g.bn = g.gn = t.tn;
  g.bk = t.tk1;
  g.tk = t.tk;
  g.stages = 2;
  g.operand_stages = t.tk1 > t.tk ? 2 : 1;  // one step per stage: no inner loop to pipeline
  return g;
}

}  // namespace kiln::target::npusim
