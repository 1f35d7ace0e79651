//===- tile_persistent_cost_model.cc - The GEMM cost model of persistent blocks ===//
//
// The cost model of TilingFigures::GemmSchedule::kPersistent (compute units
// that each run one block of a matrix kernel; docs/tile-ir.md, "The GEMM
// cost model"). A launch
// has at most one block per unit; each owns bm x bn tiles of Y taken
// round-robin over batch, M-tile and N-tile (or whole batch items, when
// their tiles stay on one block); each tile walks K in stages of bk
// (double-buffered in the stage scope, loaded by the stage engine) split
// into operand steps of tk (double-buffered in the operand scopes), the
// MMAs accumulating into one of accumulator_stages accumulators so the
// write-out of a tile overlaps the next tile's MMAs when there are two.
//
// A launch's cycles are the busiest unit's pipeline time (per stage the
// slowest of its load, its operand loads and its MMAs, each load paying the
// global latency once because the stage's hand-off waits for it), against
// the chip's global traffic over the shared bandwidth, plus the fill and
// the last tile's write-out. Every figure is the target's
// (TilingFigures: engine latencies, bursts, issue queues).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "target/backend/tile_lowering.h"
#include "target/backend/tile_lowering_shared.h"

namespace kiln::target::tile::internal {
namespace {

// The problem as the schedule sees it.
struct Shape {
  int64_t batch = 1, M = 1, N = 1, K = 1;
  int64_t in_bytes = 2, out_bytes = 2, acc_bytes = 4;
  bool trans_a = false, trans_b = false;
  int64_t mma_m = 16, mma_n = 16, mma_k = 16, granule = 16;
  double macs_per_cycle = 1;
};

// Time of the operand loads and MMAs of one operand step of kj elements of K.
struct StepTime {
  double operand = 0, mma = 0;
  int64_t operand_insts = 0;
};

StepTime OperandStep(const Shape& s, const TileCostFigures& f, const GemmTiling& t, int64_t kj) {
  StepTime st;
  const int64_t kg = RoundUp(kj, s.granule);
  // Loads: A is bm x kg, B is kg x bn; one instruction each, or one per
  // MMA block row/column where the stage's layout is reordered.
  const int64_t a_insts = s.trans_a ? t.bm / s.mma_m : 1;
  const int64_t b_insts = s.trans_b ? kg / s.mma_k : 1;
  const double bytes = static_cast<double>((t.bm + t.bn) * kg * s.in_bytes);
  st.operand_insts = a_insts + b_insts + 2;
  st.operand = bytes / f.operand_bytes_per_cycle + static_cast<double>(a_insts + b_insts) * f.latency.operand_load +
               2 * f.latency.sync;
  const double macs_per_block = static_cast<double>(s.mma_m * s.mma_n * s.mma_k);
  st.mma = f.latency.mma +
           static_cast<double>((t.bm / s.mma_m) * (t.bn / s.mma_n) * (kg / s.mma_k)) * macs_per_block /
               s.macs_per_cycle +
           f.latency.sync;
  return st;
}

absl::StatusOr<Shape> ShapeOf(const GemmProblem& p, const TileCostFigures& f) {
  const TileMma* mma = MmaFor(f, p.input);
  if (!mma) return absl::UnimplementedError(absl::StrCat(f.target.name, " has no MMA of ", DTypeName(p.input)));
  Shape s;
  s.batch = Product(p.batch);
  s.M = p.M;
  s.N = p.N;
  s.K = p.K;
  s.in_bytes = static_cast<int64_t>(DTypeSize(p.input));
  s.out_bytes = static_cast<int64_t>(DTypeSize(p.output));
  s.acc_bytes = static_cast<int64_t>(DTypeSize(mma->accumulator));
  s.trans_a = p.trans_a;
  s.trans_b = p.trans_b;
  s.mma_m = mma->m;
  s.mma_n = mma->n;
  s.mma_k = mma->k;
  s.granule = f.stage_k_granule > 0 ? f.stage_k_granule : mma->k;
  s.macs_per_cycle = f.MacsPerCycle(p.input) > 0 ? f.MacsPerCycle(p.input) : 1;
  return s;
}

// The scopes' capacities, looked up once per problem.
struct Caps {
  int64_t operand_a, operand_b, accumulator, stage, vector;
  explicit Caps(const TileCostFigures& f)
      : operand_a(Capacity(f, Scope::kOperandA)),
        operand_b(Capacity(f, Scope::kOperandB)),
        accumulator(Capacity(f, Scope::kAccumulator)),
        stage(Capacity(f, Scope::kStage)),
        vector(Capacity(f, Scope::kVector)) {}
};

// Why a tiling cannot run, or kFits: the checks an estimate makes first.
enum class Misfit { kFits, kBlocks, kGroups, kBuffers, kWidth, kVector };

bool ViaVector(const Shape& s, const GemmKernelTraits& traits, const GemmTiling& t) {
  return traits.epilogue_in_vector || t.bm > s.M || t.bn > s.N || traits.whole_n;
}

Misfit MisfitOf(const Shape& s, const Caps& caps, const GemmKernelTraits& traits, const GemmTiling& t) {
  if (t.bm <= 0 || t.bn <= 0 || t.tk <= 0 || t.bm % s.mma_m || t.bn % s.mma_n || t.tk % s.granule || t.bk % t.tk)
    return Misfit::kBlocks;
  // A persistent block's tile is its one group's.
  if (t.gm != t.bm || t.gn != t.bn) return Misfit::kGroups;
  const int64_t ib = s.in_bytes;
  // Double-buffered stage and operand scopes (across stages too), one or
  // two accumulators.
  if (2 * t.bm * t.tk * ib > caps.operand_a || 2 * t.tk * t.bn * ib > caps.operand_b || t.accumulator_stages < 1 ||
      t.accumulator_stages > 2 || t.accumulator_stages * t.bm * t.bn * s.acc_bytes > caps.accumulator ||
      2 * (t.bm + t.bn) * t.bk * ib > caps.stage)
    return Misfit::kBuffers;
  if (traits.whole_n && t.bn < s.N) return Misfit::kWidth;
  if (ViaVector(s, traits, t)) {
    int64_t vector = traits.epilogue_in_vector ? t.bm * t.bn * (2 * s.acc_bytes + s.out_bytes)
                                               : 2 * t.bm * t.bn * s.out_bytes;
    // The residual in the accumulator's dtype, and as loaded (at most that wide).
    if (traits.residual) vector += t.bm * t.bn * 2 * s.acc_bytes;
    if (vector + traits.vector_reserved > caps.vector) return Misfit::kVector;
  }
  return Misfit::kFits;
}

// The estimate of a tiling that fits (MisfitOf says kFits).
void EstimateFitting(const Shape& s, const TileCostFigures& f, const GemmKernelTraits& traits, GemmTiling* t);

}  // namespace

absl::Status EstimatePersistentGemm(const GemmProblem& p, const TileCostFigures& f, const GemmKernelTraits& traits,
                                    GemmTiling* t) {
  KILN_ASSIGN_OR_RETURN(const Shape s, ShapeOf(p, f));
  auto tiling = [&] { return absl::StrCat("tiling ", t->bm, "x", t->bn, "x", t->tk, "/", t->bk); };
  switch (MisfitOf(s, Caps(f), traits, *t)) {
    case Misfit::kFits: break;
    case Misfit::kBlocks: return absl::InvalidArgumentError(absl::StrCat(tiling(), " is not in whole MMA blocks"));
    case Misfit::kGroups: return absl::InvalidArgumentError(absl::StrCat(tiling(), ": one group per block"));
    case Misfit::kBuffers: return absl::ResourceExhaustedError(absl::StrCat(tiling(), " does not fit the buffers"));
    case Misfit::kWidth:
      return absl::InvalidArgumentError(absl::StrCat("tile width ", t->bn, " does not span N = ", s.N));
    case Misfit::kVector:
      return absl::ResourceExhaustedError(absl::StrCat("tile ", t->bm, "x", t->bn, " does not fit the vector scope"));
  }
  EstimateFitting(s, f, traits, t);
  return absl::OkStatus();
}

namespace {

void EstimateFitting(const Shape& s, const TileCostFigures& f, const GemmKernelTraits& traits, GemmTiling* t) {
  const int64_t ib = s.in_bytes;
  const int64_t m_tiles = CeilDiv(s.M, t->bm), n_tiles = CeilDiv(s.N, t->bn);
  const int64_t tiles = s.batch * m_tiles * n_tiles;
  t->via_vector = ViaVector(s, traits, *t);
  const int64_t units = f.compute_units;
  const int64_t cap = traits.max_units > 0 ? traits.max_units : units;
  t->blocks = std::max<int64_t>(1, std::min(traits.items_on_one_block ? s.batch : tiles, cap));
  const int64_t active = std::min<int64_t>(t->blocks, units);
  const int64_t items_per_unit = CeilDiv(s.batch, active);
  const int64_t tiles_per_unit = traits.items_on_one_block ? items_per_unit * m_tiles * n_tiles : CeilDiv(tiles, active);
  const int64_t rows = std::min(t->bm, s.M), cols = std::min(t->bn, s.N);

  // One stage of kc elements of K: its load time (the transfer, then the
  // global latency that the stage's hand-off waits for) and its operand
  // steps. The active units stream in step, so each gets its share of the
  // global bandwidth while they transfer and all wait out the latency together.
  const double dma_latency = f.global_latency_cycles + f.latency.stage_load + f.latency.sync;
  // With a cache that holds every operand the launch reads (A and B, each
  // batch item's), each is fetched from global memory once and the tiles'
  // re-reads hit the cache: the units load at their share of the cache's
  // bandwidth, not of global memory's.
  const double panel_bytes = static_cast<double>(tiles) * static_cast<double>((rows + cols) * s.K * ib);
  const double operand_bytes = static_cast<double>(s.batch * (s.M + s.N) * s.K * ib);
  const bool cached = f.cache_bytes > 0 && f.cache_bytes_per_cycle > 0 &&
                      operand_bytes <= static_cast<double>(f.cache_bytes) && operand_bytes < panel_bytes;
  // Cached, the operands still come from global memory once. Where A is a
  // single row block (a GEMV, a decode step's projections) B's bytes are
  // each read by one tile, so the units' loads go no faster than global
  // memory delivers them, re-reads of A aside.
  const double global_share = f.global_bytes_per_cycle / static_cast<double>(active);
  double cache_bw = f.cache_bytes_per_cycle;
  if (s.M <= s.mma_m) cache_bw = std::min(cache_bw, global_share * panel_bytes / operand_bytes);
  const double unit_bw = std::min(f.stage_bytes_per_cycle, cached ? cache_bw : global_share);
  // A DMA of n bursts takes at least n * burst_cycles.
  auto load = [&](int64_t r, int64_t c, double bursts) {
    return std::max(static_cast<double>(r * c * ib) / unit_bw, bursts * f.burst_cycles);
  };
  auto stage = [&](int64_t kc, double* stage_load, double* compute, double* mma, double* first_operand) {
    const double a_bursts = traits.a_blocked ? CeilDiv(rows, s.mma_m) : s.trans_a ? kc : (kc == s.K ? 1 : rows);
    const double b_bursts = traits.items_on_one_block ? RoundUp(kc, s.granule)  // a copy per row
                            : traits.b_blocked         ? CeilDiv(kc, s.granule)
                            : s.trans_b                ? cols
                                                       : (cols == s.N ? 1 : kc);
    *stage_load = load(rows, kc, a_bursts) + load(kc, cols, b_bursts) + dma_latency;
    *compute = 0;
    *mma = 0;
    int64_t insts = 2;
    for (int64_t k = 0; k < kc; k += t->tk) {
      const StepTime st = OperandStep(s, f, *t, std::min(t->tk, kc - k));
      if (k == 0) *first_operand = st.operand;
      *compute += std::max(st.operand, st.mma);
      *mma += st.mma;
      insts += st.operand_insts;
    }
    // A stage longer than the operand engine's queue keeps the issuing unit
    // from issuing the next stage's loads until this one's steps are nearly done.
    if (insts > f.issue_queue_depth) *stage_load += *compute;
    if (traits.items_on_one_block) *stage_load += static_cast<double>(RoundUp(kc, s.granule)) * f.latency.sync;
  };
  const int64_t ns = CeilDiv(s.K, t->bk);
  const int64_t kc_tail = s.K - (ns - 1) * t->bk;
  double full_load = 0, full_compute = 0, full_mma = 0, full_operand = 0;
  double tail_load = 0, tail_compute = 0, tail_mma = 0, tail_operand = 0;
  stage(t->bk, &full_load, &full_compute, &full_mma, &full_operand);
  stage(kc_tail, &tail_load, &tail_compute, &tail_mma, &tail_operand);
  const double n_full = static_cast<double>(ns - 1);
  double tile_time = n_full * std::max(full_load, full_compute) + std::max(tail_load, tail_compute);
  const double tile_mma = n_full * full_mma + tail_mma;
  const double tile_load = n_full * full_load + tail_load;

  // Write-out of a tile: from the accumulator straight to global memory, or
  // to the vector scope and then out.
  const double acc_bytes = static_cast<double>(t->bm * t->bn * s.acc_bytes);
  const double store_bw = f.vector_store_bytes_per_cycle > 0 ? f.vector_store_bytes_per_cycle : f.stage_bytes_per_cycle;
  double write_out = acc_bytes / f.accumulator_bytes_per_cycle + f.latency.write_out;
  if (t->via_vector) {
    write_out += static_cast<double>(rows * cols * s.out_bytes) / store_bw + f.global_latency_cycles +
                 f.latency.vector_store;
    if (traits.epilogue_in_vector) write_out += 6 * acc_bytes / f.vector_bytes_per_cycle;  // a few vector passes
    if (traits.residual)
      write_out += static_cast<double>(rows * cols * ib) / f.stage_bytes_per_cycle + f.global_latency_cycles;
  } else {
    write_out += f.global_latency_cycles;
  }
  // With one accumulator the MMAs wait for each write-out.
  tile_time = t->accumulator_stages == 2 ? std::max(tile_time, write_out) : tile_time + write_out;
  // A unit's stages run back to back: the first stage's load is exposed,
  // then each stage takes the larger of its load and the previous stage's
  // operand steps, and the last stage's steps and write-out follow.
  const double first_load = ns == 1 ? tail_load : full_load;
  const double first_stage = ns == 1 ? std::max(tail_load, tail_compute) : std::max(full_load, full_compute);
  const double fill = first_load + (ns == 1 ? tail_operand : full_operand);
  double unit_time = fill + static_cast<double>(tiles_per_unit) * tile_time - first_stage + tail_compute + write_out;
  if (traits.items_on_one_block) unit_time += static_cast<double>(items_per_unit) * traits.item_prologue_cycles;

  // The chip's global traffic: A and B panels for every tile (once each
  // when the cache holds them), Y written once.
  const double global_bytes =
      (cached ? operand_bytes : panel_bytes) +
      static_cast<double>(s.batch * s.M * s.N * (s.out_bytes + (traits.residual ? ib : 0))) +
      static_cast<double>(s.batch) * traits.item_prologue_bytes;
  t->global_cycles = global_bytes / f.global_bytes_per_cycle;
  const double global_time = t->global_cycles + dma_latency + write_out;
  t->compute_cycles = static_cast<double>(tiles_per_unit) * tile_mma;
  t->estimated_cycles = std::max(unit_time, global_time);
  const double unit_load = static_cast<double>(tiles_per_unit) * tile_load;
  const double transfer =
      static_cast<double>(tiles_per_unit) * static_cast<double>((rows + cols) * s.K * ib) / unit_bw;
  if (global_time >= unit_time || (unit_bw < f.stage_bytes_per_cycle && transfer >= 0.6 * unit_time))
    t->bound = "global memory";
  else if (t->compute_cycles >= 0.8 * unit_time) t->bound = "matrix";
  else if (unit_load >= 0.8 * unit_time) t->bound = "stage latency";
  else if (write_out >= tile_time) t->bound = "write-out";
  else t->bound = "operand loads";
}

}  // namespace

absl::StatusOr<GemmTiling> ChoosePersistentGemmTiling(const GemmProblem& p, const TileCostFigures& f,
                                                      const GemmKernelTraits& traits) {
  if (p.M <= 0 || p.N <= 0 || p.K <= 0 || Product(p.batch) <= 0)
    return absl::InvalidArgumentError(absl::StrCat("empty GEMM ", p.M, "x", p.N, "x", p.K));
  KILN_ASSIGN_OR_RETURN(const Shape s, ShapeOf(p, f));
  const Caps caps(f);
  // Tiles in whole MMA blocks up to 512 (past the matrix only where one
  // tile covers it); operand steps of 1 to 16 K granules; stages of 1 to 16
  // steps; one or two accumulators.
  const int64_t m_whole = RoundUp(p.M, s.mma_m), n_whole = RoundUp(p.N, s.mma_n), k_whole = RoundUp(p.K, s.granule);
  GemmTiling best;
  bool found = false;
  for (int64_t bm = s.mma_m; bm <= std::min<int64_t>(m_whole, 512); bm += s.mma_m) {
    for (int64_t bn = s.mma_n; bn <= std::min<int64_t>(n_whole, 512); bn += s.mma_n) {
      for (int64_t steps : {1, 2, 3, 4, 6, 8, 12, 16}) {
        const int64_t tk = steps * s.granule;
        if (tk > k_whole) continue;
        for (int64_t nsub : {1, 2, 4, 8, 16}) {
          const int64_t bk = tk * nsub;
          if (bk > RoundUp(p.K, tk) && nsub > 1) continue;
          for (int accumulators : {2, 1}) {
            GemmTiling t;
            t.bm = t.gm = bm;
            t.bn = t.gn = bn;
            t.tk = tk;
            t.bk = bk;
            t.stages = 2;
            t.operand_stages = bk > tk ? 2 : 1;  // one step per stage: no inner loop to pipeline
            t.accumulator_stages = accumulators;
            if (MisfitOf(s, caps, traits, t) != Misfit::kFits) continue;
            EstimateFitting(s, f, traits, &t);
            const bool better = !found || t.estimated_cycles < best.estimated_cycles * 0.999 ||
                                (t.estimated_cycles <= best.estimated_cycles * 1.001 &&
                                 t.global_cycles < best.global_cycles);
            if (better) {
              best = t;
              found = true;
            }
          }
        }
      }
    }
  }
  if (!found)
    return absl::ResourceExhaustedError(
        absl::StrCat("no tiling of ", p.M, "x", p.N, "x", p.K, " fits the scopes of ", f.target.name));
  return best;
}

}  // namespace kiln::target::tile::internal
