//===- tile_cost_model.cc - Target figures and the GEMM cost model --------===//
//
// FiguresOf reads a TargetDescription; the GEMM cost model of the waves
// schedule (tile_persistent_cost_model.cc holds the persistent one's): a
// unit's pipeline time is the slowest of its stage loads,
// operand loads and MMA per stage, the chip's global traffic goes over the
// shared bandwidth (or through the cache, where a target has one), blocks
// run in waves over the units, and split-K spreads skinny problems.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_lowering.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "target/backend/tile_lowering_shared.h"

namespace kiln::target::tile {

using internal::Capacity;
using internal::CeilDiv;
using internal::MmaFor;
using internal::OperandTile;
using internal::Product;
using internal::RoundUp;

//===----------------------------------------------------------------------===//
// Figures
//===----------------------------------------------------------------------===//

double TileCostFigures::MacsPerCycle(DType input) const {
  for (const auto& [dt, rate] : macs_per_cycle) {
    if (dt == input) return rate;
  }
  return 0;
}

TileCostFigures FiguresOf(const TargetDescription& d) {
  TileCostFigures f;
  f.target.name = d.name;
  f.compute_units = std::max(d.compute_units, 1);
  f.clock_ghz = d.clock_ghz > 0 ? d.clock_ghz : 1;
  if (d.global_bytes_per_second > 0) f.global_bytes_per_cycle = d.global_bytes_per_second / (f.clock_ghz * 1e9);
  for (const MemoryLevel& level : d.memory) {
    if (level.scope.empty()) {
      f.cache_bytes = level.bytes;
      f.cache_bytes_per_cycle = level.bytes_per_cycle;
      continue;
    }
    std::optional<Scope> scope = ParseScope(level.scope);
    if (!scope || *scope == Scope::kGlobal) continue;
    f.target.capacity[*scope] = level.bytes;
    if (level.bytes_per_cycle <= 0) continue;
    if (*scope == Scope::kStage) f.stage_bytes_per_cycle = level.bytes_per_cycle;
    if (*scope == Scope::kOperandA) f.operand_bytes_per_cycle = level.bytes_per_cycle;
    if (*scope == Scope::kVector) f.vector_bytes_per_cycle = level.bytes_per_cycle;
    if (*scope == Scope::kAccumulator) f.accumulator_bytes_per_cycle = level.bytes_per_cycle;
  }
  if (d.vector_bytes_per_cycle > 0) f.vector_bytes_per_cycle = d.vector_bytes_per_cycle;
  for (const MmaShape& m : d.mma) {
    f.target.mma.push_back(TileMma{m.m, m.n, m.k, m.input, m.accumulator});
    auto it = std::find_if(f.macs_per_cycle.begin(), f.macs_per_cycle.end(),
                           [&](const auto& e) { return e.first == m.input; });
    if (it == f.macs_per_cycle.end()) {
      f.macs_per_cycle.emplace_back(m.input, m.macs_per_cycle);
    } else {
      it->second = std::max(it->second, m.macs_per_cycle);
    }
  }
  static_cast<TileTuning&>(f) = d.tiling;
  f.target.max_group = f.max_group;
  return f;
}

//===----------------------------------------------------------------------===//
// The GEMM cost model
//===----------------------------------------------------------------------===//

namespace internal {

const TileMma* MmaFor(const TileCostFigures& f, DType input) {
  for (const TileMma& m : f.target.mma) {
    if (m.input == input) return &m;
  }
  return nullptr;
}

int64_t Capacity(const TileCostFigures& f, Scope s) {
  auto it = f.target.capacity.find(s);
  return it == f.target.capacity.end() ? 0 : it->second;
}

std::pair<int64_t, int64_t> OperandTile(const EpilogueStep& e, const GemmTiling& t) {
  switch (e.operand) {
    case EpilogueStep::Operand::kFull: return {t.gm, t.gn};
    case EpilogueStep::Operand::kRow: return {1, t.gn};
    case EpilogueStep::Operand::kCol: return {t.gm, 1};
    default: return {0, 0};
  }
}

}  // namespace internal

namespace {

bool SplitKAllowed(const GemmProblem& p) { return p.epilogue.empty() && p.output == p.accumulator; }

}  // namespace

std::string GemmTiling::Describe() const {
  std::string out = absl::StrCat(bm, "x", bn, "x", bk, " tiles, ", gm, "x", gn, " groups");
  if (tk != bk) absl::StrAppend(&out, ", k step ", tk, operand_stages > 1 ? absl::StrCat(" x", operand_stages) : "");
  absl::StrAppend(&out, ", ", stages, stages == 1 ? " stage" : " stages");
  if (split_k > 1) absl::StrAppend(&out, ", split-K ", split_k);
  if (accumulator_stages > 1) absl::StrAppend(&out, ", ", accumulator_stages, " accumulators");
  absl::StrAppend(&out, ", est ", static_cast<int64_t>(std::llround(estimated_cycles)), " cycles (", bound, ")");
  return out;
}

absl::Status EstimateGemm(const GemmProblem& p, const TileCostFigures& f, GemmTiling* t,
                          const GemmKernelTraits& traits) {
  if (f.gemm_schedule == TilingFigures::GemmSchedule::kPersistent)
    return internal::EstimatePersistentGemm(p, f, traits, t);
  const TileMma* mma = MmaFor(f, p.input);
  if (!mma) return absl::UnimplementedError(absl::StrCat(f.target.name, " has no MMA of ", DTypeName(p.input)));
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("tiling ", t->bm, "x", t->bn, "x", t->bk, ": ", why));
  };
  if (t->bm <= 0 || t->bn <= 0 || t->bk <= 0 || t->gm <= 0 || t->gn <= 0 || t->tk <= 0) return bad("empty tiles");
  if (t->gm % mma->m || t->gn % mma->n || t->tk % mma->k) return bad("group tiles are not in units of the MMA shape");
  if (t->bm % t->gm || t->bn % t->gn || t->bk % t->tk) return bad("the block tile is not in whole group tiles");
  const int64_t groups = (t->bm / t->gm) * (t->bn / t->gn);
  if (groups > f.max_group) return bad(absl::StrCat(groups, " groups, the target runs ", f.max_group));
  if (f.max_group_accumulators > 0 && t->gm * t->gn > f.max_group_accumulators)
    return bad(absl::StrCat("a ", t->gm, "x", t->gn, " group tile holds more than ", f.max_group_accumulators,
                            " accumulators"));
  if (t->stages < 1 || t->stages > f.max_stages) return bad(absl::StrCat(t->stages, " stages"));
  if (t->operand_stages < 1 || t->operand_stages > 2 || (t->tk == t->bk && t->operand_stages != 1)) {
    return bad("operand stages");
  }
  const int64_t kt = CeilDiv(p.K, t->bk);
  if (t->split_k < 1 || kt % t->split_k || (t->split_k > 1 && !SplitKAllowed(p))) return bad("split-K");
  if (f.max_stage_per_group > 0 && (t->bm + t->bn) * t->bk > f.max_stage_per_group * groups) {
    return bad(absl::StrCat("a stage of ", (t->bm + t->bn) * t->bk, " elements, ", f.max_stage_per_group,
                            " per group at most"));
  }
  if (p.im2col && f.max_gather_per_group > 0 && t->bk * t->bn > f.max_gather_per_group * groups) {
    return bad(absl::StrCat("an im2col stage of ", t->bk * t->bn, " gathered elements, ", f.max_gather_per_group,
                            " per group at most"));
  }
  const int64_t in = static_cast<int64_t>(DTypeSize(p.input)), acc = static_cast<int64_t>(DTypeSize(p.accumulator));
  int64_t vector_bytes = 0;
  for (const EpilogueStep& e : p.epilogue) {
    auto [r, c] = OperandTile(e, *t);
    vector_bytes += r * c * acc;
  }
  const std::pair<Scope, int64_t> usage[] = {
      {Scope::kStage, t->stages * (t->bm + t->bn) * t->bk * in},
      {Scope::kOperandA, groups * t->operand_stages * t->gm * t->tk * in},
      {Scope::kOperandB, groups * t->operand_stages * t->tk * t->gn * in},
      {Scope::kAccumulator, groups * t->gm * t->gn * acc},
      {Scope::kVector, groups * vector_bytes},
  };
  for (const auto& [scope, bytes] : usage) {
    const int64_t cap = Capacity(f, scope);
    if (cap > 0 && bytes > cap) {
      return absl::ResourceExhaustedError(absl::StrCat("tiling ", t->bm, "x", t->bn, "x", t->bk, " needs ", bytes,
                                                       " bytes of ", ScopeName(scope), ", the target has ", cap));
    }
  }

  // Blocks, how many of them a unit runs together (as many as its scopes
  // hold, each scope's capacity being the unit's, up to the target's
  // resident limit), and waves of units x resident blocks.
  const int64_t mt = CeilDiv(p.M, t->bm), nt = CeilDiv(p.N, t->bn), batch = Product(p.batch);
  const int64_t kps = kt / t->split_k;
  const int64_t blocks = batch * mt * nt * t->split_k;
  int64_t resident = std::max(f.max_resident_blocks, 1);
  for (const auto& [scope, bytes] : usage) {
    const int64_t cap = Capacity(f, scope);
    if (cap > 0 && bytes > 0) resident = std::min(resident, cap / bytes);
  }
  const int64_t together = std::max<int64_t>(1, std::min(resident, CeilDiv(blocks, f.compute_units)));
  const int64_t active = std::min<int64_t>(blocks, f.compute_units);
  const int64_t in_flight = std::min<int64_t>(blocks, f.compute_units * together);
  const int64_t waves = CeilDiv(blocks, f.compute_units * together);

  // One unit's pipeline, per round (each of its blocks one stage of bk):
  // the stage loads (its share of the global bandwidth, or the cache's),
  // the operand loads of all its groups, the MMAs; overlapped as far as the
  // stages in flight allow. A unit reaches its MMA rate with groups_at_peak
  // groups at work.
  const double share = f.cache_bytes > 0 && f.cache_bytes_per_cycle > 0
                           ? f.cache_bytes_per_cycle
                           : f.global_bytes_per_cycle / static_cast<double>(active);
  const double load_bw = std::min(f.stage_bytes_per_cycle, share);
  const double peak = f.MacsPerCycle(p.input) > 0 ? f.MacsPerCycle(p.input) : 1;
  auto rate = [&](int64_t working_groups) {
    return peak * std::min(1.0, static_cast<double>(working_groups) / std::max(f.groups_at_peak, 1));
  };
  const double n_together = static_cast<double>(together);
  const double transfer = static_cast<double>((t->bm + t->bn) * t->bk * in) / load_bw;
  const double operand = static_cast<double>(groups * (t->gm + t->gn) * t->bk * in) / f.operand_bytes_per_cycle;
  const double block_macs = static_cast<double>(t->bm * t->bn * t->bk);
  const double mma_time = n_together * block_macs / rate(together * groups);
  // One group's operand loads overlap its own MMAs only when the operand
  // scope is double-buffered, but with several groups at work one group's
  // loads overlap another's MMAs.
  auto inner = [&](double mma, double opnd, int64_t working_groups) {
    return t->operand_stages > 1 || working_groups > 1 ? std::max(opnd, mma) : opnd + mma;
  };
  const double unit_inner = inner(mma_time, n_together * operand, together * groups);
  // One block's own chain: with S stages a slot is refilled S - 1 stages
  // before it is read, so the load's latency hides only behind those S - 1
  // stages; each stage also waits for its slot and hands it back
  // (stage_sync_cycles). With no more K steps than S - 1 the prologue
  // issues every load and no slot is refilled: past the first load's
  // latency (charged once per tile below) no step waits for one.
  const double latency_and_transfer = f.global_latency_cycles + transfer;
  const double block_inner = inner(block_macs / rate(groups), operand, groups) + f.stage_sync_cycles;
  const double chain = t->stages == 1        ? latency_and_transfer + block_inner
                       : kps > t->stages - 1 ? std::max(block_inner, latency_and_transfer / (t->stages - 1))
                                             : block_inner;
  const double load = n_together * transfer;
  const double stage = std::max({unit_inner + f.stage_sync_cycles, load, chain});
  const double tile_elems = static_cast<double>(t->bm * t->bn);
  const double epilogue = n_together * (tile_elems * static_cast<double>(acc * static_cast<int64_t>(
                                                         p.epilogue.size() + 1)) / f.vector_bytes_per_cycle +
                                        tile_elems * static_cast<double>(DTypeSize(p.output)) / f.stage_bytes_per_cycle);
  const double tile = latency_and_transfer + static_cast<double>(kps) * stage + epilogue;
  const double unit = static_cast<double>(waves) * tile;

  // The chip's global traffic: every block's A and B panels (the blocks of
  // a wave share them through the cache when it holds them), Y (read and
  // written back under split-K), the epilogue operands.
  const int64_t rows = std::min(t->bm, p.M), cols = std::min(t->bn, p.N);
  const double panel_k = static_cast<double>(kps * t->bk * in);
  double ab = static_cast<double>(blocks) * static_cast<double>(rows + cols) * panel_k;
  if (f.cache_bytes > 0) {
    // The blocks of a wave: whole (slice, batch item) grids when one grid
    // has fewer tiles than the wave has blocks, else kGemmRasterRows tile
    // rows by as many tile columns as the wave reaches. They walk K
    // together, so the cache needs only their stages in flight to read each
    // of their panels from global memory once per wave.
    const int64_t grid = mt * nt;
    int64_t panels = 0;  // A rows and B columns the wave reads
    if (in_flight >= grid) {
      panels = CeilDiv(in_flight, grid) * (mt * rows + nt * cols);
    } else {
      const int64_t wave_m = std::min(mt, kGemmRasterRows);
      panels = wave_m * rows + std::min(nt, CeilDiv(in_flight, wave_m)) * cols;
    }
    const double window = static_cast<double>(panels * t->bk * in * t->stages);
    if (window <= static_cast<double>(f.cache_bytes)) {
      ab = std::min(ab, static_cast<double>(panels) * panel_k * static_cast<double>(blocks) /
                            static_cast<double>(in_flight));
    }
  }
  double bytes = ab + static_cast<double>(batch * p.M * p.N) * static_cast<double>(DTypeSize(p.output)) *
                          (t->split_k > 1 ? 2.0 * t->split_k : 1.0);
  for (const EpilogueStep& e : p.epilogue) {
    if (e.arg >= 0) bytes += static_cast<double>(Product(p.args[e.arg].shape) * DTypeSize(p.args[e.arg].dtype));
  }
  t->global_cycles = bytes / f.global_bytes_per_cycle;
  t->compute_cycles = static_cast<double>(waves * kps) * mma_time;
  t->estimated_cycles = std::max(unit, t->global_cycles + f.global_latency_cycles);

  const double busiest = std::max({mma_time, load, n_together * operand});
  if (t->global_cycles + f.global_latency_cycles >= unit) t->bound = "global memory";
  else if (epilogue > static_cast<double>(kps) * stage) t->bound = "epilogue";
  else if (chain > std::max(unit_inner + f.stage_sync_cycles, load)) t->bound = "pipeline latency";
  else if (busiest == mma_time) t->bound = "matrix";
  else if (busiest == load) t->bound = load_bw < f.stage_bytes_per_cycle ? "global memory" : "stage bandwidth";
  else t->bound = "operand bandwidth";
  return absl::OkStatus();
}

absl::StatusOr<GemmTiling> ChooseGemmTiling(const GemmProblem& p, const TileCostFigures& f,
                                            const GemmKernelTraits& traits) {
  if (f.gemm_schedule == TilingFigures::GemmSchedule::kPersistent)
    return internal::ChoosePersistentGemmTiling(p, f, traits);
  const TileMma* mma = MmaFor(f, p.input);
  if (!mma) return absl::UnimplementedError(absl::StrCat(f.target.name, " has no MMA of ", DTypeName(p.input)));
  // Candidate extents: powers of two from the MMA unit up to 256, and the
  // dimension itself rounded up where it is smaller.
  auto extents = [](int64_t unit, int64_t dim) {
    std::vector<int64_t> out;
    const int64_t whole = RoundUp(dim, unit);
    for (int64_t e = unit; e <= 256 && e <= whole; e *= 2) out.push_back(e);
    if (whole < 256 && (out.empty() || out.back() != whole)) out.push_back(whole);
    return out;
  };
  auto divisors = [](int64_t extent, int64_t unit) {
    std::vector<int64_t> out;
    for (int64_t d : {1, 2, 4, 8}) {
      if (extent % d == 0 && (extent / d) % unit == 0) out.push_back(extent / d);
    }
    return out;
  };
  const int64_t base_blocks = Product(p.batch) * CeilDiv(p.M, 128) * CeilDiv(p.N, 128);
  std::vector<int> splits = {1};
  if (SplitKAllowed(p) && base_blocks < f.compute_units) splits = {1, 2, 4, 8, 16, 32};
  GemmTiling best;
  bool found = false;
  for (int64_t bm : extents(mma->m, p.M)) {
    for (int64_t bn : extents(mma->n, p.N)) {
      for (int64_t bk : extents(mma->k, p.K)) {
        for (int64_t tk : divisors(bk, mma->k)) {
          for (int64_t gm : divisors(bm, mma->m)) {
            for (int64_t gn : divisors(bn, mma->n)) {
              if ((bm / gm) * (bn / gn) > f.max_group) continue;
              for (int stages = 1; stages <= f.max_stages; ++stages) {
                for (int ostages = 1; ostages <= (tk == bk ? 1 : 2); ++ostages) {
                  for (int split : splits) {
                    GemmTiling t;
                    t.bm = bm, t.bn = bn, t.bk = bk, t.gm = gm, t.gn = gn, t.tk = tk;
                    t.stages = stages, t.operand_stages = ostages, t.split_k = split;
                    if (!EstimateGemm(p, f, &t).ok()) continue;
                    const bool better = !found || t.estimated_cycles < best.estimated_cycles * 0.999 ||
                                        (t.estimated_cycles <= best.estimated_cycles * 1.001 &&
                                         t.global_cycles < best.global_cycles * 0.999);
                    if (better) {
                      best = t;
                      found = true;
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  if (!found) {
    return absl::ResourceExhaustedError(absl::StrCat("no tiling of ", p.M, "x", p.N, "x", p.K, " fits the scopes of ",
                                                     f.target.name));
  }
  return best;
}

}  // namespace kiln::target::tile
