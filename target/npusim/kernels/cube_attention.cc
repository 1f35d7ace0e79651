//===- cube_attention.cc - kiln.Attention as one kernel, FlashAttention's schedule -===//
//
// One block per (batch x head, 64-row tile of Q) at a time. Its Q tile
// stays in L0A; the K and V tiles of 64 keys stream past it:
//
//   cube    S_j = Q K_j^T (fp32 in L0C; FIXP brings it to UB)
//   vector  S_j = scale S_j + mask; m' = max(m, rowmax S_j); alpha = exp(m - m');
//           P_j = exp(S_j - m'); l = alpha l + rowsum P_j; P_j to fp16
//   MTE3/2  P_j through a workspace in GM (the L2 holds it) into L1: the
//           vector unit cannot write L1; it writes P as L0A's fractals, so
//           the round trip is two contiguous copies
//   cube    O_j = P_j V_j; vector O = alpha O + O_j
//
// and at the end Y = O / l, in fp16. The S x S scores never reach HBM
// (only a 64 x 64 fp16 tile of P at a time, which the L2 absorbs). The
// tiles are double-buffered and the program is a software pipeline: the
// cube's S_{j+2} and O_j are issued around the vector unit's softmax of
// S_{j+1}, so the cube and the vector unit work at once. Each (row tile,
// key tiles) body is straight-line code whose flags PipeSync derives from
// the buffers each instruction touches; a causal attention has a body per
// row tile (its key tiles end at the diagonal, whose tile adds a
// triangular mask); a masked one with more keys than queries (a prefill
// into a static cache) a body for each count of key tiles, the row tile
// running the one that ends at its last live key tile (EmitLiveScan); the
// others one body for all.
//
// Runs: f16 or f32 Q, K, V (K not transposed) with the same batch dims, head size
// a multiple of 16 up to 128, sequence lengths multiples of 64; no mask, a
// causal one, or an additive f16/f32 mask whose rows and batch dims are
// the scores' or 1. The rest is split back into MatMul, Softmax and MatMul.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/support/status.h"
#include "sim/machine/machine.h"
#include "target/npusim/kernels/cube.h"
#include "target/npusim/kernels/cube_attention_geometry.h"
#include "target/backend/tile_lowering.h"
#include "target/npusim/kernels/cube_figures.h"
#include "target/npusim/kernels/cube_kasm.h"
#include "target/npusim/kernels/pipe_sync.h"

namespace kiln::target::npusim {
namespace {

using sim::Pipe;

constexpr int64_t kMaxBodyTiles = 2200;  // key tiles over all bodies (the program is unrolled)
// Key tiles whose K and V one load brings into L1: a DMA's completion
// latency (HBM's) is paid by the flag after it, once per group.
constexpr int64_t kGroup = 4;


// Registers of the attention program.
enum Reg { rItem = 0, rBlockDim, rBh, rI, rQ, rKv, rTmp, rMask, rWs, rB, rH, kRegs };

// Buffer offsets (bytes) in each on-chip memory.
struct Layout {
  int64_t l1_q, l1_k[2], l1_v[2], l1_p[2];
  int64_t l0a_q, l0a_p[2];
  int64_t l0b_k[2], l0b_v[2];
  int64_t l0c_s[2], l0c_o[2];
  int64_t ub_s[2], ub_p[2], ub_pv[2], ub_o, ub_oh, ub_mk[2], ub_mst[2], ub_tri;
  int64_t ub_rmax, ub_rsum, ub_m[2], ub_alpha[2], ub_l, ub_tmp, ub_bm, ub_balpha[2], ub_bl;
  int64_t ws_slot;  // bytes of one P slot in the workspace
  int l0b_slots = 2;
};

absl::StatusOr<Layout> LayoutOf(const Geometry& g, const sim::Machine& m) {
  const sim::Core& c = m.core();
  Layout y;
  const int64_t qt = kAttTile * g.d * g.es, pt = kAttTile * kAttTile * g.es;  // a [64, d] and a [64, 64] tile
  int64_t at = 0;
  auto take = [&](int64_t bytes, int64_t align) {
    at = (at + align - 1) / align * align;
    const int64_t off = at;
    at += bytes;
    return off;
  };
  auto fits = [&](const char* what, int64_t kib) -> absl::Status {
    if (at > kib * 1024) return Refuse(absl::StrCat(what, " holds ", kib, " KiB; the tiles need ", (at + 1023) / 1024));
    return absl::OkStatus();
  };
  at = 0;
  y.l1_q = take(qt, 32);
  for (int s = 0; s < 2; ++s)
    y.l1_k[s] = take(qt * kGroup, 32), y.l1_v[s] = take(qt * kGroup, 32), y.l1_p[s] = take(pt, 32);
  KILN_RETURN_IF_ERROR(fits("L1", c.l1_kib()));
  at = 0;
  y.l0a_q = take(qt, 512);
  for (int s = 0; s < 2; ++s) y.l0a_p[s] = take(pt, 512);
  KILN_RETURN_IF_ERROR(fits("L0A", c.l0a_kib()));
  at = 0;
  // K's and V's tiles double-buffered where four fit (f32 at head size 128 takes one of each).
  y.l0b_slots = 4 * qt <= c.l0b_kib() * 1024 ? 2 : 1;
  for (int s = 0; s < y.l0b_slots; ++s) y.l0b_k[s] = take(qt, 512), y.l0b_v[s] = take(qt, 512);
  KILN_RETURN_IF_ERROR(fits("L0B", c.l0b_kib()));
  at = 0;
  for (int s = 0; s < 2; ++s) y.l0c_s[s] = take(kAttTile * kAttTile * 4, 512), y.l0c_o[s] = take(kAttTile * g.d * 4, 512);
  KILN_RETURN_IF_ERROR(fits("L0C", c.l0c_kib()));
  at = 0;
  const int64_t row = kAttTile * 4;  // a row statistic: 64 fp32
  for (int s = 0; s < 2; ++s) {
    y.ub_s[s] = take(kAttTile * kAttTile * 4, 32);
    y.ub_p[s] = take(pt, 32);
    y.ub_pv[s] = take(kAttTile * g.d * 4, 32);
    y.ub_m[s] = take(row, 32);
    y.ub_alpha[s] = take(row, 32);
    y.ub_balpha[s] = take(kAttTile * 32, 32);
    if (g.mask_es) y.ub_mk[s] = take(kAttTile * kAttTile * 4, 32);
    if (g.mask_es == 2) y.ub_mst[s] = take(pt, 32);
  }
  y.ub_o = take(kAttTile * g.d * 4, 32);
  y.ub_oh = g.es == 2 ? take(qt, 32) : y.ub_o;
  y.ub_rmax = take(row, 32);
  y.ub_rsum = take(row, 32);
  y.ub_l = take(row, 32);
  y.ub_tmp = take(row, 32);
  y.ub_bm = take(kAttTile * 32, 32);
  y.ub_bl = take(kAttTile * 32, 32);
  if (g.causal) y.ub_tri = take(kAttTile * kAttTile * 4, 32);
  KILN_RETURN_IF_ERROR(fits("UB", c.ub_kib()));
  y.ws_slot = pt;
  return y;
}

std::string Ub(int64_t off) { return absl::StrCat("UB[", off, "]"); }
// The mask of the 64-column piece h of a row of d fp32 values (none when whole).
std::string HalfMask(int64_t d, int64_t h) {
  const int64_t cols = std::min<int64_t>(64, d - 64 * h);
  return cols == 64 ? "" : absl::StrCat(", mask=", cols);
}
std::string S(const char* what, int slot) { return absl::StrCat(what, slot); }

// One body: the row tile whose registers are set, against key tiles
// 0 .. nk-1, the last of which is on the diagonal when `diagonal`.
void EmitBody(std::string& t, const Geometry& g, const Layout& y, int64_t nk, bool diagonal) {
  PipeSync p;
  // Fractals: K0 = 32 bytes of elements along K; D in K0s (Q's columns, K^T's
  // rows), D in 16s (V's columns, O's), the 64 keys in K0s (P's columns).
  const int64_t k0 = 32 / g.es, kq = g.d / k0, d1 = g.d / 16, kp = kAttTile / k0, halves = (g.d + 63) / 64;
  const int64_t tile_bytes = kAttTile * g.d * g.es;
  const std::string dt = g.es == 2 ? "f16" : "f32";
  auto bslot = [&](int s) { return s % y.l0b_slots; };
  const std::string qa = Addr("q", rQ, 0);
  // The Q tile, resident in L0A for the whole body; O, m and l start afresh.
  p.Add(Pipe::kMte2, absl::StrCat("nd2nz.", dt, " L1[", y.l1_q, "], ", qa, ", rows=64, cols=", g.d), {}, {"L1.q"});
  p.Add(Pipe::kMte1, absl::StrCat("load_l0a.", dt, " L0A[", y.l0a_q, "], L1[", y.l1_q, "], rows=4, cols=", kq), {"L1.q"},
        {"L0A.q"});
  auto vec = [&](const std::string& text, std::vector<std::string> reads, std::vector<std::string> writes) {
    p.Add(Pipe::kVector, text, reads, writes);
  };
  {
    Emitter e;
    VecOver(e, "vdup.f32", kAttTile * g.d, 4, y.ub_o, 0, 0, -1, ", 0");
    VecOver(e, "vdup.f32", kAttTile, 4, y.ub_m[0], 0, 0, -1, ", -inf");
    VecOver(e, "vdup.f32", kAttTile, 4, y.ub_l, 0, 0, -1, ", 0");
    p.AddLines(Pipe::kVector, e.text(), {}, {"UB.o", "UB.m0", "UB.l"});
  }
  // Stage A of key tile j: S_j = Q K_j^T into UB (and its mask tile).
  // Key tile j's place in L1: its group's slot and its offset there.
  auto group_slot = [&](int64_t j) { return static_cast<int>((j / kGroup) % 2); };
  auto in_group = [&](int64_t j) { return (j % kGroup) * tile_bytes; };
  auto stage_a = [&](int64_t j) {
    const int s = static_cast<int>(j % 2), gs = group_slot(j);
    if (j % kGroup == 0) {
      const int64_t rows = kAttTile * std::min(kGroup, nk - j);
      for (const char* x : {"k", "v"})
        p.Add(Pipe::kMte2,
              absl::StrCat("nd2nz.", dt, " L1[", x[0] == 'k' ? y.l1_k[gs] : y.l1_v[gs], "], ",
                           Addr(x, rKv, j * tile_bytes),
                           ", rows=", rows, ", cols=", g.d),
              {}, {S(x[0] == 'k' ? "L1.k" : "L1.v", gs)});
    }
    for (int64_t c = 0; c < kq; ++c)
      p.Add(Pipe::kMte1,
            absl::StrCat("load_l0b.", dt, " L0B[", y.l0b_k[bslot(s)] + c * 4 * 512, "], L1[",
                         y.l1_k[gs] + in_group(j) + c * 512, "], rows=4, cols=1, src_row_stride=", kq),
            {S("L1.k", gs)}, {S("L0B.k", bslot(s))});
    p.Add(Pipe::kCube,
          absl::StrCat("mmad.", dt, " L0C[", y.l0c_s[s], "], L0A[", y.l0a_q, "], L0B[", y.l0b_k[bslot(s)], "], m=4, k=",
                       kq, ", n=4, init=1"),
          {"L0A.q", S("L0B.k", bslot(s))}, {S("L0C.s", s)});
    p.Add(Pipe::kFixp, absl::StrCat("fixp.f32.f32 ", Ub(y.ub_s[s]), ", L0C[", y.l0c_s[s], "], m=4, n=4"),
          {S("L0C.s", s)}, {S("UB.s", s)});
    if (g.mask_es) {
      const int64_t dst = g.mask_es == 2 ? y.ub_mst[s] : y.ub_mk[s];
      p.Add(Pipe::kMte2,
            absl::StrCat("copy_gm_ub ", Ub(dst), ", ", Addr("mask", rMask, j * kAttTile * g.mask_es),
                         ", nburst=64, len=", kAttTile * g.mask_es, ", src_stride=", g.mask_row * g.mask_es,
                         ", dst_stride=", kAttTile * g.mask_es),
            {}, {g.mask_es == 2 ? S("UB.mst", s) : S("UB.mk", s)});
      if (g.mask_es == 2) {
        Emitter e;
        VecOver(e, "vconv.f32.f16", kAttTile * kAttTile, 4, y.ub_mk[s], 2, y.ub_mst[s], -1, "");
        p.AddLines(Pipe::kVector, e.text(), {S("UB.mst", s)}, {S("UB.mk", s)});
      }
    }
  };
  // Stage B: the online softmax of S_j; P_j out to the workspace.
  auto stage_b = [&](int64_t j) {
    const int s = static_cast<int>(j % 2);
    const std::string us = S("UB.s", s);
    const int64_t sb = y.ub_s[s], n = kAttTile * kAttTile;
    Emitter e;
    auto flush = [&](std::vector<std::string> reads, std::vector<std::string> writes) {
      p.AddLines(Pipe::kVector, e.text(), reads, writes);
      e.text().clear();
    };
    if (g.scale != 1.0) VecOver(e, "vmuls.f32", n, 4, sb, 4, sb, -1, absl::StrFormat(", %.9g", g.scale));
    flush({us}, {us});
    if (g.mask_es) {
      VecOver(e, "vadd.f32", n, 4, sb, 4, sb, y.ub_mk[s], "");
      flush({us, S("UB.mk", s)}, {us});
    }
    if (diagonal && j == nk - 1) {
      VecOver(e, "vadd.f32", n, 4, sb, 4, sb, y.ub_tri, "");
      flush({us, "UB.tri"}, {us});
    }
    const int64_t m_old = y.ub_m[s], m_new = y.ub_m[1 - s];
    e.L("vcmax.f32 ", Ub(y.ub_rmax), ", ", Ub(sb), ", repeat=64");
    flush({us}, {"UB.rmax"});
    e.L("vmax.f32 ", Ub(m_new), ", ", Ub(m_old), ", ", Ub(y.ub_rmax));
    flush({S("UB.m", s), "UB.rmax"}, {S("UB.m", 1 - s)});
    e.L("vsub.f32 ", Ub(y.ub_tmp), ", ", Ub(m_old), ", ", Ub(m_new));
    e.L("vexp.f32 ", Ub(y.ub_alpha[s]), ", ", Ub(y.ub_tmp));
    flush({S("UB.m", s), S("UB.m", 1 - s)}, {"UB.tmp", S("UB.alpha", s)});
    e.L("vbrcb.f32 ", Ub(y.ub_bm), ", ", Ub(m_new), ", repeat=8");
    flush({S("UB.m", 1 - s)}, {"UB.bm"});
    e.L("vsub.f32 ", Ub(sb), ", ", Ub(sb), ", ", Ub(y.ub_bm), ", repeat=64, src1_blk_stride=0, src1_rep_stride=1");
    VecOver(e, "vexp.f32", n, 4, sb, 4, sb, -1, "");
    flush({us, "UB.bm"}, {us});
    e.L("vcadd.f32 ", Ub(y.ub_rsum), ", ", Ub(sb), ", repeat=64");
    e.L("vmul.f32 ", Ub(y.ub_l), ", ", Ub(y.ub_l), ", ", Ub(y.ub_alpha[s]));
    e.L("vadd.f32 ", Ub(y.ub_l), ", ", Ub(y.ub_l), ", ", Ub(y.ub_rsum));
    flush({us, S("UB.alpha", s), "UB.l"}, {"UB.rsum", "UB.l"});
    // P as the fractals L0A takes (16 x K0, row-major, a row of them per 16
    // rows): each row's 32-byte blocks a fractal apart; f16 converted, f32 copied.
    for (int64_t rg = 0; rg < 4; ++rg)
      e.L(g.es == 2 ? "vconv.f16.f32 " : "vadds.f32 ", Ub(y.ub_p[s] + rg * 16 * kAttTile * g.es), ", ",
          Ub(sb + rg * 16 * 256), g.es == 2 ? "" : ", 0", ", repeat=16, dst_blk_stride=16, dst_rep_stride=1");
    flush({us}, {S("UB.p", s)});
    e.L("vbrcb.f32 ", Ub(y.ub_balpha[s]), ", ", Ub(y.ub_alpha[s]), ", repeat=8");
    flush({S("UB.alpha", s)}, {S("UB.balpha", s)});
    p.Add(Pipe::kMte3,
          absl::StrCat("copy_ub_gm ", Addr("ws", rWs, s * y.ws_slot), ", ", Ub(y.ub_p[s]), ", len=", y.ws_slot),
          {S("UB.p", s)}, {S("GM.p", s)});
  };
  // Stage C: O_j = P_j V_j.
  auto stage_c = [&](int64_t j) {
    const int s = static_cast<int>(j % 2);
    p.Add(Pipe::kMte2,
          absl::StrCat("copy_gm_l1 L1[", y.l1_p[s], "], ", Addr("ws", rWs, s * y.ws_slot), ", len=", y.ws_slot),
          {S("GM.p", s)}, {S("L1.p", s)});
    p.Add(Pipe::kMte1, absl::StrCat("load_l0a.", dt, " L0A[", y.l0a_p[s], "], L1[", y.l1_p[s], "], rows=4, cols=", kp),
          {S("L1.p", s)}, {S("L0A.p", s)});
    const int gs = group_slot(j);
    p.Add(Pipe::kMte1,
          absl::StrCat("load_l0b.", dt, " L0B[", y.l0b_v[bslot(s)], "], L1[", y.l1_v[gs] + in_group(j),
                       "], rows=4, cols=", d1, ", src_row_stride=", kq, ", transpose=1"),
          {S("L1.v", gs)}, {S("L0B.v", bslot(s))});
    p.Add(Pipe::kCube,
          absl::StrCat("mmad.", dt, " L0C[", y.l0c_o[s], "], L0A[", y.l0a_p[s], "], L0B[", y.l0b_v[bslot(s)], "], m=4, k=",
                       kp, ", n=", d1, ", init=1"),
          {S("L0A.p", s), S("L0B.v", bslot(s))}, {S("L0C.o", s)});
    p.Add(Pipe::kFixp, absl::StrCat("fixp.f32.f32 ", Ub(y.ub_pv[s]), ", L0C[", y.l0c_o[s], "], m=4, n=", d1),
          {S("L0C.o", s)}, {S("UB.pv", s)});
  };
  // Stage D: O = alpha O + O_j on the vector unit.
  auto stage_d = [&](int64_t j) {
    const int s = static_cast<int>(j % 2);
    const int64_t rep = g.d * 4 / 32;  // blocks per row of O
    for (int64_t h = 0; h < halves; ++h)
      vec(absl::StrCat("vmul.f32 ", Ub(y.ub_o + h * 256), ", ", Ub(y.ub_o + h * 256), ", ", Ub(y.ub_balpha[s]),
                       ", repeat=64", HalfMask(g.d, h), ", dst_rep_stride=", rep, ", src0_rep_stride=", rep,
                       ", src1_blk_stride=0, src1_rep_stride=1"),
          {"UB.o", S("UB.balpha", s)}, {"UB.o"});
    Emitter e;
    VecOver(e, "vadd.f32", kAttTile * g.d, 4, y.ub_o, 4, y.ub_o, y.ub_pv[s], "");
    p.AddLines(Pipe::kVector, e.text(), {"UB.o", S("UB.pv", s)}, {"UB.o"});
  };
  // The software pipeline: A_0, A_1, B_0, then per step A_{j+2}, D_{j-1},
  // B_{j+1}, C_j: the cube's S_{j+2} and O_j go around the vector unit's
  // softmax of S_{j+1}, which with the update of O by O_{j-1} covers P_j's
  // round trip through the workspace.
  stage_a(0);
  if (nk > 1) stage_a(1);
  stage_b(0);
  for (int64_t j = 0; j < nk; ++j) {
    if (j + 2 < nk) stage_a(j + 2);
    if (j >= 1) stage_d(j - 1);
    if (j + 1 < nk) stage_b(j + 1);
    stage_c(j);
  }
  stage_d(nk - 1);
  // Y = O / l, in Y's dtype.
  {
    const int64_t rep = g.d * 4 / 32;
    vec(absl::StrCat("vbrcb.f32 ", Ub(y.ub_bl), ", ", Ub(y.ub_l), ", repeat=8"), {"UB.l"}, {"UB.bl"});
    for (int64_t h = 0; h < halves; ++h)
      vec(absl::StrCat("vdiv.f32 ", Ub(y.ub_o + h * 256), ", ", Ub(y.ub_o + h * 256), ", ", Ub(y.ub_bl),
                       ", repeat=64", HalfMask(g.d, h), ", dst_rep_stride=", rep, ", src0_rep_stride=", rep,
                       ", src1_blk_stride=0, src1_rep_stride=1"),
          {"UB.o", "UB.bl"}, {"UB.o"});
    Emitter e;
    if (g.es == 2) {
      VecOver(e, "vconv.f16.f32", kAttTile * g.d, 2, y.ub_oh, 4, y.ub_o, -1, "");
      p.AddLines(Pipe::kVector, e.text(), {"UB.o"}, {"UB.oh"});
    }
    p.Add(Pipe::kMte3, absl::StrCat("copy_ub_gm ", Addr("y", rQ, 0), ", ", Ub(y.ub_oh), ", len=", tile_bytes),
          {g.es == 2 ? "UB.oh" : "UB.o"}, {});
  }
  absl::StrAppend(&t, p.Emit());
  // The next row tile reuses every buffer: let this one drain first.
  absl::StrAppend(&t, "  pipe_barrier ALL\n");
}

// The last key tile that the mask leaves live for the row tile whose mask
// offset is in rMask, into rB: the elementwise maximum of the tile's mask
// rows (one row where the mask has one for all), each key tile's maximum
// (`vcmax`), and the scalar unit (`ld`) stepping back from the last tile
// over those at -inf. UB is free at a row tile's start (the last body
// drained, and a body writes every buffer before it reads it).
void EmitLiveScan(std::string& t, const Geometry& g) {
  const int64_t rows = g.mask_row == 0 ? 1 : kAttTile, row_bytes = g.l * g.mask_es;
  const int64_t acc = 0, maxes = RoundUp(g.l * 4, 32), conv = maxes + RoundUp(g.nk * 4, 32);
  const int64_t buf = conv + (g.mask_es == 2 ? g.l * 4 : 0);
  const int64_t chunk = std::clamp<int64_t>((int64_t{128} << 10) / row_bytes, 1, rows);
  Emitter e;
  for (int64_t c0 = 0; c0 < rows; c0 += chunk) {
    const int64_t n = std::min(chunk, rows - c0);
    if (c0 > 0) {  // the staging rows read
      e.L("set_flag VECTOR, MTE2, 0");
      e.L("wait_flag VECTOR, MTE2, 0");
    }
    e.L("copy_gm_ub ", Ub(buf), ", ", Addr("mask", rMask, c0 * g.mask_row * g.mask_es), ", nburst=", n, ", len=",
        row_bytes, ", src_stride=", g.mask_row * g.mask_es, ", dst_stride=", row_bytes);
    e.L("set_flag MTE2, VECTOR, 0");
    e.L("wait_flag MTE2, VECTOR, 0");
    for (int64_t r = 0; r < n; ++r) {
      int64_t row = buf + r * row_bytes;
      if (g.mask_es == 2) {
        VecOver(e, "vconv.f32.f16", g.l, 4, conv, 2, row, -1, "");
        row = conv;
      }
      if (c0 + r == 0) VecOver(e, "vadds.f32", g.l, 4, acc, 4, row, -1, ", 0");
      else VecOver(e, "vmax.f32", g.l, 4, acc, 4, acc, row, "");
    }
  }
  e.L("vcmax.f32 ", Ub(maxes), ", ", Ub(acc), ", repeat=", g.nk);
  e.L("set_flag VECTOR, SCALAR, 0");
  e.L("wait_flag VECTOR, SCALAR, 0");
  e.L("mov r", rB, ", ", g.nk - 1);
  SkipMaskedTiles(e, "live_hi", rB, rTmp, maxes, -1, absl::StrCat("beq r", rB, ", 0"));
  absl::StrAppend(&t, e.text());
}

// The triangle of -inf above the diagonal of a 64 x 64 tile, once per block.
void EmitTriangle(std::string& t, const Layout& y) {
  Emitter e;
  for (int64_t r = 0; r < kAttTile; ++r) {
    const int64_t row = y.ub_tri + r * kAttTile * 4;
    e.L("vdup.f32 ", Ub(row), ", -inf");
    e.L("vdup.f32 ", Ub(row), ", 0, mask=", r + 1);
  }
  absl::StrAppend(&t, e.text(), "  pipe_barrier ALL\n");
}

}  // namespace

bool AttentionRunsFused(const Node& n, const sim::Machine& m) {
  if (GeometryOf(n, /*narrow_later=*/true, /*decode=*/true).ok()) return true;
  absl::StatusOr<Geometry> g = GeometryOf(n, /*narrow_later=*/true, /*decode=*/false);
  return g.ok() && LayoutOf(*g, m).ok() && (g->causal ? g->nq * (g->nq + 1) / 2 : g->nk) <= kMaxBodyTiles;
}

bool AttentionRunsAsDecode(const Node& n) { return GeometryOf(n, /*narrow_later=*/true, /*decode=*/true).ok(); }

bool AttentionRunsAsIs(const Node& n) {
  return GeometryOf(n, /*narrow_later=*/true, /*decode=*/true).ok() ||
         GeometryOf(n, /*narrow_later=*/true, /*decode=*/false).ok();
}

absl::StatusOr<GeneratedKernel> GenerateCubeAttention(const KernelRequest& req) {
  const Node& n = *req.node;
  const sim::Machine& m = *req.machine;
  if (GeometryOf(n, /*narrow_later=*/false, /*decode=*/true).ok()) return GenerateDecodeAttention(req);
  KILN_ASSIGN_OR_RETURN(Geometry g, GeometryOf(n, /*narrow_later=*/false, /*decode=*/false));
  KILN_ASSIGN_OR_RETURN(Layout y, LayoutOf(g, m));
  auto live_scan = [](const Geometry& g) {
    return g.mask_es != 0 && !g.causal && g.l > g.s && g.nk >= 2 && g.nk * (g.nk + 1) / 2 <= kMaxBodyTiles;
  };
  const int64_t body_tiles = g.causal ? g.nq * (g.nq + 1) / 2 : g.nk;
  if (body_tiles > kMaxBodyTiles)
    return Refuse(absl::StrCat(body_tiles, " key tiles of straight-line code (at most ", kMaxBodyTiles, ")"));
  const int64_t items = g.bh * g.nq;
  const int64_t cores = req.max_blocks > 0 ? req.max_blocks : m.chip().ai_cores();
  const int64_t blocks = std::max<int64_t>(1, std::min(items, cores));
  const bool has_mask = g.mask_es != 0;

  std::string t = ".program attention\n";
  absl::StrAppend(&t, ".regs ", static_cast<int>(kRegs), "\n");
  for (int i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(std::string line, KasmArgLine(i == 0 ? "q" : i == 1 ? "k" : "v", *n.input(i)));
    absl::StrAppend(&t, line, "\n");
  }
  if (n.num_inputs() > 3 && n.input(3)) {
    KILN_ASSIGN_OR_RETURN(std::string line, KasmArgLine("mask", *n.input(3)));
    absl::StrAppend(&t, line, "\n");
  }
  KILN_ASSIGN_OR_RETURN(std::string yl, KasmArgLine("y", *n.output(0)));
  absl::StrAppend(&t, yl, "\n.arg ws s8[", blocks * 2 * y.ws_slot, "]\n");
  absl::StrAppend(&t, "  block_idx r", rItem, "\n  block_dim r", rBlockDim, "\n  mul r", rWs, ", r", rItem, ", ",
                  2 * y.ws_slot, "\n");
  if (g.causal) EmitTriangle(t, y);
  // Items: (batch x head, row tile); causal ones heaviest (last row tiles) first.
  absl::StrAppend(&t, "item:\n  bge r", rItem, ", ", items, ", done\n");
  if (g.causal) {
    absl::StrAppend(&t, "  div r", rI, ", r", rItem, ", ", g.bh, "\n  rem r", rBh, ", r", rItem, ", ", g.bh, "\n  mul r",
                    rI, ", r", rI, ", -1\n  add r", rI, ", r", rI, ", ", g.nq - 1, "\n");
  } else {
    absl::StrAppend(&t, "  div r", rBh, ", r", rItem, ", ", g.nq, "\n  rem r", rI, ", r", rItem, ", ", g.nq, "\n");
  }
  // Byte offsets: Q and Y [bh, s, d], K and V [bh, l, d], the mask's.
  absl::StrAppend(&t, "  mul r", rQ, ", r", rBh, ", ", g.s * g.d * g.es, "\n  mul r", rTmp, ", r", rI, ", ",
                  kAttTile * g.d * g.es, "\n  add r", rQ, ", r", rQ, ", r", rTmp, "\n  mul r", rKv, ", r", rBh, ", ",
                  g.l * g.d * g.es, "\n");
  if (has_mask) {
    absl::StrAppend(&t, "  div r", rB, ", r", rBh, ", ", g.heads, "\n  rem r", rH, ", r", rBh, ", ", g.heads,
                    "\n  mul r", rMask, ", r", rB, ", ", g.mask_b * g.mask_es, "\n  mul r", rTmp, ", r", rH, ", ",
                    g.mask_h * g.mask_es, "\n  add r", rMask, ", r", rMask, ", r", rTmp, "\n  mul r", rTmp, ", r", rI,
                    ", ", kAttTile * g.mask_row * g.mask_es, "\n  add r", rMask, ", r", rMask, ", r", rTmp, "\n");
  }
  // More keys than queries under a mask (a static cache masked beyond the
  // position): a body for each count of key tiles, and each row tile runs
  // the one that ends at its last live tile (EmitLiveScan). The tiles past
  // it add nothing to the softmax (their scores are -inf in every row).
  const bool scan = live_scan(g);
  if (scan) {
    EmitLiveScan(t, g);
    for (int64_t hi = 0; hi + 1 < g.nk; ++hi) absl::StrAppend(&t, "  beq r", rB, ", ", hi, ", keys", hi + 1, "\n");
    for (int64_t nk = g.nk; nk >= 1; --nk) {
      absl::StrAppend(&t, "keys", nk, ":\n");
      EmitBody(t, g, y, nk, /*diagonal=*/false);
      absl::StrAppend(&t, "  jmp next\n");
    }
  } else if (g.causal) {
    for (int64_t i = 0; i + 1 < g.nq; ++i) absl::StrAppend(&t, "  beq r", rI, ", ", i, ", body", i, "\n");
    for (int64_t i = g.nq - 1; i >= 0; --i) {
      absl::StrAppend(&t, "body", i, ":\n");
      const int64_t nk = std::min(i + 1, g.nk);
      EmitBody(t, g, y, nk, /*diagonal=*/i < g.nk);
      absl::StrAppend(&t, "  jmp next\n");
    }
  } else {
    EmitBody(t, g, y, g.nk, /*diagonal=*/false);
  }
  absl::StrAppend(&t, "next:\n  add r", rItem, ", r", rItem, ", r", rBlockDim, "\n  jmp item\ndone:\n");

  KILN_ASSIGN_OR_RETURN(GeneratedKernel k, AssembledKernel(t, "attention.kasm", "attention", blocks, "cube"));
  k.workspace_bytes = blocks * 2 * y.ws_slot;  // the `ws` argument: two P tiles per block
  if (scan) k.steering_inputs = {3};  // the mask picks the body: computed in a timing-only run too
  // The schedule as the tile IR states it (for `kiln tile`), where it does
  // (causal too: the IR masks each tile, this kernel skips the tiles past
  // the diagonal, which the IR's meaning allows).
  if (req.want_tile_ir)
    if (absl::StatusOr<tile::TileKernel> tk = tile::LowerAttention(n, CubeFiguresOf(m)); tk.ok())
      k.tile_ir = tile::Print(*tk);
  // Per key tile: the cube's two products, the vector unit's passes over
  // the 64 x 64 scores and the 64 x d output; the slower of the two sets
  // the pace once the pipeline fills.
  const auto cpr = [&](sim::Op op) { return sim::VectorCyclesPerRepeat(m, op, 4); };
  const double lat = static_cast<double>(m.core().vector_latency_cycles());
  const double score_passes = (g.scale != 1.0) + has_mask + 1;  // scale, mask, max
  const double vec_tile = 64 * (score_passes * cpr(sim::Op::kVadd) + cpr(sim::Op::kVsub) + cpr(sim::Op::kVexp) +
                                cpr(sim::Op::kVcadd) + cpr(sim::Op::kVconv)) +
                          static_cast<double>(64 * g.d / 64) * 2 * cpr(sim::Op::kVadd) + 16 * lat;
  const double cube_tile =
      2.0 * (static_cast<double>(m.core().cube_latency_cycles()) + 16.0 * (g.d / 16) * (g.es == 4 ? 2 : 1));
  const double per_tile = std::max(vec_tile, cube_tile);
  const double tiles_per_item = g.causal ? (g.nq + 1) / 2.0 : static_cast<double>(g.nk);
  const double hbm_lat = m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles();
  k.estimated_cycles = std::ceil(static_cast<double>(items) / blocks) * (tiles_per_item * per_tile + 4 * hbm_lat);
  k.plan = absl::StrFormat(
      "fused attention %dx%d over %d keys, head %d, %d heads x batches: 64x64 tiles, online softmax on the vector "
      "unit, P through a %d KiB workspace per block, %d blocks%s%s",
      g.s, g.s, g.l, g.d, g.bh, 2 * y.ws_slot / 1024, blocks, g.causal ? ", causal" : "",
      !has_mask ? "" : scan ? ", masked (only up to the last key tile the mask leaves live)" : ", masked");
  return k;
}

}  // namespace kiln::target::npusim
