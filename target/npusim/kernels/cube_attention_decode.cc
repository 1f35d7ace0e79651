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
enum Reg { rItem = 0, rBlockDim, rQ, rKv, rMask, rJ, rLo, rHi, rTmp, rTile, rMaskOff, rB, rH, rKvNext, kRegs };

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
  const int64_t m_blk = take(32), mn_blk = take(32), tmp_blk = take(32), alpha = take(32), l_blk = take(32);
  const int64_t pb = take(kAttTile * 32);
  const int64_t o = take(d * 4), yout = half ? take(d * es) : o;
  if (at > m.core().ub_kib() * 1024)
    return Refuse(absl::StrCat("UB holds ", m.core().ub_kib(), " KiB; the decode tiles need ", (at + 1023) / 1024));

  const int64_t items = g.bh;
  const int64_t cores = req.max_blocks > 0 ? req.max_blocks : m.chip().ai_cores();
  const int64_t blocks = std::max<int64_t>(1, std::min(items, cores));
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
  Emitter e;
  e.L("block_idx r", rItem);
  e.L("block_dim r", rBlockDim);
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
    // -inf in fp32 is the word 0xff800000.
    constexpr int64_t kNegInfWord = -8388608;
    // From each end, the tiles whose maximum is -inf (their words compared as integers).
    auto scan = [&](const char* label, int reg, const std::string& stop, int step) {
      const std::string done = absl::StrCat(label, "_done");
      e.Label(label);
      e.L(stop, ", ", done);
      e.L("mul r", rTmp, ", r", reg, ", 4");
      e.L("ld.s32 r", rTmp, ", UB[r", rTmp, " + ", maxes, "]");
      e.L("bne r", rTmp, ", ", kNegInfWord, ", ", done);
      e.L("add r", reg, ", r", reg, ", ", step);
      e.L("jmp ", label);
      e.Label(done);
    };
    scan("lo", rLo, absl::StrCat("bge r", rLo, ", ", g.nk - 1), 1);
    scan("hi", rHi, absl::StrCat("bge r", rLo, ", r", rHi), -1);
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
  // Y = O / l.
  VecOver(e, "vdiv.f32", d, 4, o, 4, o, l_blk, ", src1_blk_stride=0, src1_rep_stride=0", false, true);
  if (half) VecOver(e, "vconv.f16.f32", d, 2, yout, 4, o, -1, "");
  e.L("set_flag VECTOR, MTE3, 0");
  e.L("wait_flag VECTOR, MTE3, 0");
  e.L("copy_ub_gm ", Addr("y", rQ, 0), ", ", Ub(yout), ", len=", d * es);
  e.L("pipe_barrier ALL");
  e.L("add r", rItem, ", r", rItem, ", r", rBlockDim);
  e.L("jmp item");
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
  k.estimated_cycles = std::ceil(static_cast<double>(items) / static_cast<double>(blocks)) *
                       (static_cast<double>(g.nk) * std::max(vec_tile, load_tile) + 3 * hbm_lat);
  k.plan = absl::StrFormat(
      "decode attention: one query row against %d keys, head %d, %d heads x batches on the vector unit, %d blocks; "
      "tiles of 64 keys double-buffered%s",
      g.l, d, g.bh, blocks, mask ? ", only the tiles the mask leaves live" : "");
  if (mask) k.steering_inputs = {3};
  return k;
}

}  // namespace kiln::target::npusim
