//===- cube_attention_decode.cc - One query row against a KV cache ---------===//
//
// A decode step's attention: one query row of each (batch x head) against
// its cache of L keys. The cube would waste 15 of its 16 rows on it, so it
// runs on the vector unit alone, one block per (batch x head) at a time,
// reading the cache once: per tile of 64 keys, MTE2 brings K_j and V_j into
// UB (double-buffered, the next tile's load under this tile's work) and the
// vector unit computes
//
//   s = scale (K_j q) + mask_j      (a product row by row, then vcadd)
//   m' = max(m, max s); alpha = exp(m - m'); p = exp(s - m')
//   l = alpha l + sum p;  O = alpha O + sum_rows(p_row V_j)
//
// in fp32 (f16 tiles converted in UB), and Y = O / l. Only the live part of
// the cache is read: the mask's row is loaded first, its maximum per tile
// taken (vcmax), and the scalar unit reads them (`ld`) to find the first
// and the last tile with a key not masked to -inf; the tiles outside that
// range add nothing to the softmax and are skipped (a static cache masked
// beyond the position reads only up to it).
//
// With fewer rows than cores (a small batch), each row's live tiles are
// split among up to kMaxSplit blocks (flash-decoding): each computes the
// softmax of its share as above into a partial (O, m, l) in the workspace,
// the launch's blocks meet at `sync_all`, and the row's first block
// combines the partials as the tiles were combined, then writes Y. A row of
// fewer than kSplitMinTiles live tiles runs on its first block alone.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/support/status.h"
#include "sim/machine/machine.h"
#include "target/npusim/kernels/cube.h"
#include "target/npusim/kernels/cube_attention_geometry.h"
#include "target/npusim/kernels/cube_kasm.h"

namespace kiln::target::npusim {
namespace {

// Registers.
enum Reg {
  rItem = 0, rBlockDim, rQ, rKv, rMask, rJ, rLo, rHi, rTmp, rTile, rMaskOff, rB, rH, rKvNext,
  rChunk, rN, rPer, rCnt, rWs,  // split along the cache: the block's chunk, the live tiles, per chunk, chunks with work
  kRegs
};

// Split along the cache: at most this many blocks share one query row, and
// only where its live tiles are at least kSplitMinTiles (fewer run on one
// block: the barrier and the combine would cost more than they save).
constexpr int64_t kMaxSplit = 8;
constexpr int64_t kSplitMinTiles = 3;

std::string Ub(int64_t off) { return absl::StrCat("UB[", off, "]"); }

}  // namespace

absl::StatusOr<GeneratedKernel> GenerateDecodeAttention(const KernelRequest& req) {
  const Node& n = *req.node;
  const sim::Machine& m = *req.machine;
  KILN_ASSIGN_OR_RETURN(Geometry g, GeometryOf(n, /*narrow_later=*/false, /*decode=*/true));
  const DType dt = n.input(0)->type().dtype();
  const int64_t es = static_cast<int64_t>(DTypeSize(dt));  // of Q, K, V and Y
  const bool half = dt == DType::kF16;
  const int64_t d = g.d, halves = d / 64, rep = d / 8;  // 64-element pieces of a row, blocks per fp32 row
  const int64_t tile = kAttTile * d;                     // elements of a K or V tile
  const bool mask = g.mask_es != 0;

  // UB, in bytes.
  int64_t at = 0;
  auto take = [&](int64_t bytes) {
    const int64_t off = at;
    at += (bytes + 31) / 32 * 32;
    return off;
  };
  const int64_t kv[2][2] = {{take(tile * es), take(tile * es)}, {take(tile * es), take(tile * es)}};  // [slot][k, v]
  const int64_t k32 = half ? take(tile * 4) : -1, v32 = half ? take(tile * 4) : -1;
  const int64_t prod = take(tile * 4);
  const int64_t q32 = take(d * 4), qin = half ? take(d * es) : q32;
  const int64_t mrow = mask ? take(g.l * 4) : -1, mst = mask && g.mask_es == 2 ? take(g.l * 2) : -1;
  const int64_t maxes = mask ? take(g.nk * 4) : -1;
  const int64_t s = take(kAttTile * 4), sum = take(32), tmax = take(256), tb = take(256), psb = take(256);
  const int64_t items = g.bh;
  const int64_t cores = req.max_blocks > 0 ? req.max_blocks : m.chip().ai_cores();
  // Fewer query rows than cores: each row's live tiles split among `split`
  // blocks, each a partial softmax (its O, m and l) into the workspace, a
  // barrier, and the row's first block combining them (flash-decoding).
  const int64_t split = items < cores ? std::min({cores / items, kMaxSplit, g.nk}) : 1;
  const int64_t rec = d * 4 + 64;  // a partial: O, then m and l as 8-float blocks
  int64_t m_blk, mn_blk, tmp_blk, alpha, l_blk, o, recs = -1, beta = -1;
  if (split >= 2) {
    o = take(rec);  // the block's partial as it goes out
    m_blk = o + d * 4;
    l_blk = m_blk + 32;
    mn_blk = take(32), tmp_blk = take(32), alpha = take(32), beta = take(32);
    recs = take(split * rec);
  } else {
    m_blk = take(32), mn_blk = take(32), tmp_blk = take(32), alpha = take(32), l_blk = take(32);
  }
  const int64_t pb = take(kAttTile * 32);
  if (split < 2) o = take(d * 4);
  const int64_t yout = half ? take(d * es) : o;
  if (at > m.core().ub_kib() * 1024)
    return Refuse(absl::StrCat("UB holds ", m.core().ub_kib(), " KiB; the decode tiles need ", (at + 1023) / 1024));
  const int64_t blocks = split >= 2 ? items * split : std::max<int64_t>(1, std::min(items, cores));
  std::string t = ".program decode_attention\n";
  absl::StrAppend(&t, ".regs ", static_cast<int>(kRegs), "\n");
  for (int i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(std::string line, KasmArgLine(i == 0 ? "q" : i == 1 ? "k" : "v", *n.input(i)));
    absl::StrAppend(&t, line, "\n");
  }
  if (mask) {
    KILN_ASSIGN_OR_RETURN(std::string line, KasmArgLine("mask", *n.input(3)));
    absl::StrAppend(&t, line, "\n");
  }
  KILN_ASSIGN_OR_RETURN(std::string yl, KasmArgLine("y", *n.output(0)));
  absl::StrAppend(&t, yl, "\n");
  if (split >= 2) absl::StrAppend(&t, ".arg ws s8[", items * split * rec, "]\n");
  Emitter e;
  e.L("block_idx r", rItem);
  e.L("block_dim r", rBlockDim);
  if (split >= 2) {
    // Block b: row b / split, chunk b % split (every block one row: no loop).
    e.L("rem r", rChunk, ", r", rItem, ", ", split);
    e.L("div r", rItem, ", r", rItem, ", ", split);
  }
  e.Label("item");
  e.L("bge r", rItem, ", ", items, ", done");
  // Byte offsets: Q and Y [bh, 1, d], K and V [bh, l, d], the mask's row.
  e.L("mul r", rQ, ", r", rItem, ", ", d * es);
  e.L("mul r", rKv, ", r", rItem, ", ", g.l * d * es);
  // The query row in fp32, O, m and l afresh.
  e.L("copy_gm_ub ", Ub(qin), ", ", Addr("q", rQ, 0), ", len=", d * es);
  if (mask) {
    e.L("div r", rB, ", r", rItem, ", ", g.heads);
    e.L("rem r", rH, ", r", rItem, ", ", g.heads);
    e.L("mul r", rMask, ", r", rB, ", ", g.mask_b * g.mask_es);
    e.L("mul r", rTmp, ", r", rH, ", ", g.mask_h * g.mask_es);
    e.L("add r", rMask, ", r", rMask, ", r", rTmp);
    e.L("copy_gm_ub ", Ub(g.mask_es == 2 ? mst : mrow), ", ", Addr("mask", rMask, 0), ", len=", g.l * g.mask_es);
  }
  e.L("set_flag MTE2, VECTOR, 2");
  e.L("wait_flag MTE2, VECTOR, 2");
  if (half) VecOver(e, "vconv.f32.f16", d, 4, q32, 2, qin, -1, "");
  VecOver(e, "vdup.f32", d, 4, o, 0, 0, -1, ", 0");
  e.L("vdup.f32 ", Ub(m_blk), ", -inf, mask=8");
  e.L("vdup.f32 ", Ub(l_blk), ", 0, mask=8");
  // The live tiles: from the first to the last whose mask has a key above -inf.
  e.L("mov r", rLo, ", 0");
  e.L("mov r", rHi, ", ", g.nk - 1);
  if (mask) {
    if (g.mask_es == 2) VecOver(e, "vconv.f32.f16", g.l, 4, mrow, 2, mst, -1, "");
    e.L("vcmax.f32 ", Ub(maxes), ", ", Ub(mrow), ", repeat=", g.nk);
    e.L("set_flag VECTOR, SCALAR, 0");
    e.L("wait_flag VECTOR, SCALAR, 0");
    // From each end, the tiles whose maximum is -inf.
    SkipMaskedTiles(e, "lo", rLo, rTmp, maxes, 1, absl::StrCat("bge r", rLo, ", ", g.nk - 1));
    SkipMaskedTiles(e, "hi", rHi, rTmp, maxes, -1, absl::StrCat("bge r", rLo, ", r", rHi));
  }
  if (split >= 2) {
    // n live tiles. Fewer than kSplitMinTiles: the row's first block takes
    // them all (one chunk with work). Else per = ceil(n / split) a chunk;
    // the chunks with work, ceil(n / per); this chunk's tiles
    // lo + chunk*per .. min(hi, that + per - 1). A chunk without work ends
    // here and holds no barrier back.
    e.L("sub r", rN, ", r", rHi, ", r", rLo);
    e.L("bge r", rN, ", ", kSplitMinTiles - 1, ", split_row");
    e.L("bne r", rChunk, ", 0, done");
    e.L("mov r", rCnt, ", 1");
    e.L("jmp row_set");
    e.Label("split_row");
    e.L("add r", rN, ", r", rN, ", 1");
    e.L("add r", rPer, ", r", rN, ", ", split - 1);
    e.L("div r", rPer, ", r", rPer, ", ", split);
    e.L("add r", rCnt, ", r", rN, ", r", rPer);
    e.L("sub r", rCnt, ", r", rCnt, ", 1");
    e.L("div r", rCnt, ", r", rCnt, ", r", rPer);
    e.L("bge r", rChunk, ", r", rCnt, ", done");
    e.L("mul r", rTmp, ", r", rChunk, ", r", rPer);
    e.L("add r", rLo, ", r", rLo, ", r", rTmp);
    e.L("add r", rTmp, ", r", rLo, ", r", rPer);
    e.L("sub r", rTmp, ", r", rTmp, ", 1");
    e.L("min r", rHi, ", r", rHi, ", r", rTmp);
    e.Label("row_set");
  }
  // The tiles lo..hi, two at a time (slot 0 then slot 1), the next tile's
  // K and V loading while this one computes. Flags: MTE2 -> VECTOR id s, the
  // slot's tile has arrived; VECTOR -> MTE2 id s, the slot is free again.
  auto load = [&](int slot, int reg) {
    e.L("wait_flag VECTOR, MTE2, ", slot);
    e.L("copy_gm_ub ", Ub(kv[slot][0]), ", ", Addr("k", reg, 0), ", len=", tile * es);
    e.L("copy_gm_ub ", Ub(kv[slot][1]), ", ", Addr("v", reg, 0), ", len=", tile * es);
    e.L("set_flag MTE2, VECTOR, ", slot);
  };
  auto compute = [&](int slot) {
    e.L("wait_flag MTE2, VECTOR, ", slot);
    int64_t kt = kv[slot][0], vt = kv[slot][1];
    if (half) {
      VecOver(e, "vconv.f32.f16", tile, 4, k32, 2, kt, -1, "");
      VecOver(e, "vconv.f32.f16", tile, 4, v32, 2, vt, -1, "");
      kt = k32;
      vt = v32;
    }
    // s = scale (K_j q) + mask_j.
    for (int64_t h = 0; h < halves; ++h)
      e.L("vmul.f32 ", Ub(prod + h * 256), ", ", Ub(kt + h * 256), ", ", Ub(q32 + h * 256), ", repeat=64, dst_rep_stride=",
          rep, ", src0_rep_stride=", rep, ", src1_rep_stride=0");
    if (halves == 2)
      e.L("vadd.f32 ", Ub(prod), ", ", Ub(prod), ", ", Ub(prod + 256), ", repeat=64, dst_rep_stride=", rep,
          ", src0_rep_stride=", rep, ", src1_rep_stride=", rep);
    e.L("vcadd.f32 ", Ub(s), ", ", Ub(prod), ", repeat=64, src0_rep_stride=", rep);
    e.L(absl::StrFormat("vmuls.f32 %s, %s, %.9g", Ub(s), Ub(s), g.scale));
    if (mask) e.L("vadd.f32 ", Ub(s), ", ", Ub(s), ", UB[r", rMaskOff, " + ", mrow, "]");
    // The running maximum, alpha, p.
    e.L("vcmax.f32 ", Ub(tmax), ", ", Ub(s));
    e.L("vbrcb.f32 ", Ub(tb), ", ", Ub(tmax));
    e.L("vmax.f32 ", Ub(mn_blk), ", ", Ub(m_blk), ", ", Ub(tb), ", mask=8");
    e.L("vsub.f32 ", Ub(tmp_blk), ", ", Ub(m_blk), ", ", Ub(mn_blk), ", mask=8");
    e.L("vexp.f32 ", Ub(alpha), ", ", Ub(tmp_blk), ", mask=8");
    e.L("vsub.f32 ", Ub(s), ", ", Ub(s), ", ", Ub(mn_blk), ", src1_blk_stride=0");
    e.L("vexp.f32 ", Ub(s), ", ", Ub(s));
    e.L("vcadd.f32 ", Ub(sum), ", ", Ub(s));
    e.L("vbrcb.f32 ", Ub(psb), ", ", Ub(sum));
    e.L("vmul.f32 ", Ub(l_blk), ", ", Ub(l_blk), ", ", Ub(alpha), ", mask=8");
    e.L("vadd.f32 ", Ub(l_blk), ", ", Ub(l_blk), ", ", Ub(psb), ", mask=8");
    e.L("vadds.f32 ", Ub(m_blk), ", ", Ub(mn_blk), ", 0, mask=8");
    // O = alpha O + sum over the rows of p_row V_j.
    e.L("vbrcb.f32 ", Ub(pb), ", ", Ub(s), ", repeat=8");
    for (int64_t h = 0; h < halves; ++h)
      e.L("vmul.f32 ", Ub(prod + h * 256), ", ", Ub(vt + h * 256), ", ", Ub(pb), ", repeat=64, dst_rep_stride=", rep,
          ", src0_rep_stride=", rep, ", src1_blk_stride=0, src1_rep_stride=1");
    for (int64_t rows = kAttTile / 2; rows >= 1; rows /= 2)
      VecOver(e, "vadd.f32", rows * d, 4, prod, 4, prod, prod + rows * d * 4, "");
    VecOver(e, "vmul.f32", d, 4, o, 4, o, alpha, ", src1_blk_stride=0, src1_rep_stride=0", false, true);
    VecOver(e, "vadd.f32", d, 4, o, 4, o, prod, "");
    e.L("set_flag VECTOR, MTE2, ", slot);
  };
  e.L("set_flag VECTOR, MTE2, 0");
  e.L("set_flag VECTOR, MTE2, 1");
  e.L("mov r", rJ, ", r", rLo);
  e.L("mul r", rTile, ", r", rJ, ", ", tile * es);
  e.L("add r", rTile, ", r", rTile, ", r", rKv);
  load(0, rTile);
  for (int slot = 0; slot < 2; ++slot) {
    const int other = 1 - slot;
    e.Label(absl::StrCat("tile", slot));
    e.L("blt r", rHi, ", r", rJ, ", tiles_done");
    // The next tile's load into the other slot.
    e.L("bge r", rJ, ", r", rHi, ", no_next", slot);
    e.L("add r", rKvNext, ", r", rTile, ", ", tile * es);
    load(other, rKvNext);
    e.Label(absl::StrCat("no_next", slot));
    if (mask) e.L("mul r", rMaskOff, ", r", rJ, ", ", kAttTile * 4);
    compute(slot);
    e.L("add r", rJ, ", r", rJ, ", 1");
    e.L("add r", rTile, ", r", rTile, ", ", tile * es);
  }
  e.L("jmp tile0");
  e.Label("tiles_done");
  e.L("wait_flag VECTOR, MTE2, 0");
  e.L("wait_flag VECTOR, MTE2, 1");
  // Y = O / l, out at the row's place.
  auto finish = [&](int64_t o_at, int64_t l_at) {
    VecOver(e, "vdiv.f32", d, 4, o_at, 4, o_at, l_at, ", src1_blk_stride=0, src1_rep_stride=0", false, true);
    if (half) VecOver(e, "vconv.f16.f32", d, 2, yout, 4, o_at, -1, "");
    e.L("set_flag VECTOR, MTE3, 0");
    e.L("wait_flag VECTOR, MTE3, 0");
    e.L("copy_ub_gm ", Addr("y", rQ, 0), ", ", Ub(half ? yout : o_at), ", len=", d * es);
  };
  if (split < 2) {
    finish(o, l_blk);
    e.L("pipe_barrier ALL");
    e.L("add r", rItem, ", r", rItem, ", r", rBlockDim);
    e.L("jmp item");
  } else {
    // One chunk with work: it is the whole row.
    e.L("bne r", rCnt, ", 1, partial");
    finish(o, l_blk);
    e.L("jmp done");
    // The partial out to the workspace (its record: O, m, l), the barrier,
    // and the row's chunk 0 combining the records 0 .. cnt-1 as the tiles
    // were: m' = max(m, m_i), O = e^(m-m') O + e^(m_i-m') O_i, the same for l.
    e.Label("partial");
    e.L("set_flag VECTOR, MTE3, 0");
    e.L("wait_flag VECTOR, MTE3, 0");
    e.L("mul r", rWs, ", r", rItem, ", ", split);
    e.L("add r", rWs, ", r", rWs, ", r", rChunk);
    e.L("mul r", rWs, ", r", rWs, ", ", rec);
    e.L("copy_ub_gm ", Addr("ws", rWs, 0), ", ", Ub(o), ", len=", rec);
    e.L("sync_all");
    e.L("bne r", rChunk, ", 0, done");
    e.L("mul r", rWs, ", r", rItem, ", ", split * rec);
    e.L("copy_gm_ub ", Ub(recs), ", ", Addr("ws", rWs, 0), ", len=", split * rec);
    e.L("set_flag MTE2, VECTOR, 2");
    e.L("wait_flag MTE2, VECTOR, 2");
    const int64_t m0 = recs + d * 4, l0 = m0 + 32;
    for (int64_t i = 1; i < split; ++i) {
      const int64_t oi = recs + i * rec, mi = oi + d * 4, li = mi + 32;
      e.L("blt r", rCnt, ", ", i + 1, ", combined");  // chunk i had no work
      e.L("vmax.f32 ", Ub(mn_blk), ", ", Ub(m0), ", ", Ub(mi), ", mask=8");
      e.L("vsub.f32 ", Ub(tmp_blk), ", ", Ub(m0), ", ", Ub(mn_blk), ", mask=8");
      e.L("vexp.f32 ", Ub(alpha), ", ", Ub(tmp_blk), ", mask=8");
      e.L("vsub.f32 ", Ub(tmp_blk), ", ", Ub(mi), ", ", Ub(mn_blk), ", mask=8");
      e.L("vexp.f32 ", Ub(beta), ", ", Ub(tmp_blk), ", mask=8");
      e.L("vmul.f32 ", Ub(l0), ", ", Ub(l0), ", ", Ub(alpha), ", mask=8");
      e.L("vmul.f32 ", Ub(tmp_blk), ", ", Ub(li), ", ", Ub(beta), ", mask=8");
      e.L("vadd.f32 ", Ub(l0), ", ", Ub(l0), ", ", Ub(tmp_blk), ", mask=8");
      e.L("vadds.f32 ", Ub(m0), ", ", Ub(mn_blk), ", 0, mask=8");
      VecOver(e, "vmul.f32", d, 4, recs, 4, recs, alpha, ", src1_blk_stride=0, src1_rep_stride=0", false, true);
      VecOver(e, "vmul.f32", d, 4, oi, 4, oi, beta, ", src1_blk_stride=0, src1_rep_stride=0", false, true);
      VecOver(e, "vadd.f32", d, 4, recs, 4, recs, oi, "");
    }
    e.Label("combined");
    finish(recs, l0);
  }
  e.Label("done");
  absl::StrAppend(&t, e.text());

  KILN_ASSIGN_OR_RETURN(GeneratedKernel k,
                        AssembledKernel(t, "decode_attention.kasm", "decode attention", blocks, "vector"));
  // Each block streams its heads' K and V at its share of HBM (or its MTE2
  // rate), the vector unit's passes over each tile under the next load.
  const double rate = UbLoadBytesPerCycle(m, blocks);
  const double cpr = sim::VectorCyclesPerRepeat(m, sim::Op::kVadd, 4);
  const double vec_tile = (2.0 * halves * 64 + 64 + 64 + 32 * halves * 2) * cpr + 24 * m.core().vector_latency_cycles();
  const double load_tile = 2.0 * static_cast<double>(tile * es) / rate;
  const double hbm_lat = m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles();
  if (split >= 2) {
    // A block's share of the tiles, the barrier (two L2 latencies), and the
    // combine: the records read back and a few vector passes over O each.
    const double l2_lat = static_cast<double>(m.chip().l2_hit_latency_cycles());
    k.estimated_cycles = std::ceil(static_cast<double>(g.nk) / static_cast<double>(split)) *
                             std::max(vec_tile, load_tile) +
                         3 * hbm_lat + 2 * l2_lat + hbm_lat +
                         static_cast<double>(split - 1) * 12 * m.core().vector_latency_cycles();
    k.workspace_bytes = items * split * rec;
  } else {
    k.estimated_cycles = std::ceil(static_cast<double>(items) / static_cast<double>(blocks)) *
                         (static_cast<double>(g.nk) * std::max(vec_tile, load_tile) + 3 * hbm_lat);
  }
  k.plan = absl::StrFormat(
      "decode attention: one query row against %d keys, head %d, %d heads x batches on the vector unit, %d blocks; "
      "tiles of 64 keys double-buffered%s%s",
      g.l, d, g.bh, blocks, mask ? ", only the tiles the mask leaves live" : "",
      split >= 2 ? absl::StrFormat(", a row of %d live tiles or more split among %d blocks and combined after a "
                                   "barrier",
                                   kSplitMinTiles, split)
                 : "");
  if (mask) k.steering_inputs = {3};
  return k;
}

}  // namespace kiln::target::npusim
