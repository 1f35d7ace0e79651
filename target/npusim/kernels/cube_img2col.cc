//===- cube_img2col.cc - Convolutions through img2col from L1 ------------===//
//
// See cube_img2col.h for the program's shape. Every unit of a block runs the
// same code for its "run" (a stretch of bands whose input rows are clipped
// by the padding the same way, so the img2col attributes are immediates)
// and its output-channel group; registers carry the image and band.
//
// Flags (producer -> consumer, event): each pair is a counting hand-off;
// the "free" directions are set ahead at the start and taken back at the end.
//   MTE2 -> VECTOR 0 / VECTOR -> MTE2 0   NCHW rows in UB / the rows' slot free
//   VECTOR -> MTE3 1 / MTE3 -> VECTOR 1   C1HWC0 rows in UB / their slot free
//   MTE3 -> MTE2 0 / MTE2 -> MTE3 0       the band is in the workspace / its slot free
//   MTE2 -> MTE1 1 / MTE1 -> MTE2 1       the band is in L1 / L1's band free
//   MTE2 -> MTE1 2 / MTE1 -> MTE2 2       a group's weights in L1 / their region free
//   MTE1 -> CUBE 0 / CUBE -> MTE1 0       an L0A/L0B step / its slots free
//   CUBE -> FIXP 0 / FIXP -> CUBE 0       a tile in L0C / the L0C buffer free
//   FIXP -> VECTOR 0 / VECTOR -> FIXP 0   a tile in UB / its UB slot free
//   VECTOR -> MTE3 0 / MTE3 -> VECTOR 0   a tile's channel rows / their slot free
//   MTE2 -> VECTOR 2, VECTOR -> FIXP 1    the bias in UB (sent with the first
//                                         band) / converted for FIXP (once)
//
// With the input in NC1HWC0 (ConvLayouts::x_c1hwc0) the band is one copy
// from X into L1 and the conversion's flags go unused; with the output in
// NC1HWC0 VECTOR reorders the tile's [pixel][channel] rows into 16-channel
// blocks of pixels (`vmov` with block strides) instead of transposing them.
//
//===----------------------------------------------------------------------===//
#include "target/npusim/kernels/cube_img2col.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/support/status.h"
#include "sim/isa/asm.h"
#include "target/backend/tile_band_cost_model.h"
#include "target/backend/window.h"
#include "target/npusim/kernels/cube_kasm.h"
#include "target/npusim/kernels/cube_figures.h"

namespace kiln::target::npusim {
namespace {

// Registers of the program.
enum Reg {
  rJ = 0,        // the unit within its section
  rBlockDim = 1,
  rBlock = 2,
  rN = 3,        // image
  rBand = 4,     // band index
  rX = 5,        // byte offset of the band's first input row in X
  rY = 6,        // byte offset of the band's first output row in Y
  rWs = 7,       // the block's workspace slot
  rL0A = 8,      // L0A slot toggle
  rL0B = 9,      // L0B slot toggle
  rL0C = 10,     // L0C buffer toggle
  rOut = 11,     // UB tile slot toggle
  rT = 12,       // scratch
  rFirst = 13,   // 1 until the section's weights are on their way
  rBias = 14,    // 1 until the bias is converted for FIXP
  rSrc = 15,     // the looped K steps: the L1 offset of their first c1 of the band
  rWk = 16,      // ... and of their first row of the group's weights
  rIter = 17,    // ... and the periods left
  kNumRegs = 18,
};

struct Geom {
  int64_t N, C, H, W, Co, KH, KW, Ho, Wo, sh, sw, dh, dw, pt, pl, pb, pr;
  int64_t C1, K1, N1;  // input channel fractals, k-fractals, output channel fractals
  bool bias = false;
  std::string dt;
  int64_t es = 2;   // element bytes
  int64_t c0 = 16;  // channels of a 32-byte block: C0 of C1HWC0, the k of a fractal
  bool xc = false, yc = false;  // X, Y in NC1HWC0
  // Argument names of X, W and the bias, the residual's (empty: none), and
  // the fused epilogue.
  std::string x = "x", w = "w", b = "bias", res = "";
  bool fixp_relu = false;
  std::vector<ConvStep> steps = {};  // on the vector unit, after FIXP
};

using Run = tile::BandRun;

struct Plan {
  int64_t R = 1, Mt = 1, Nt = 1, Kt = 1, G = 1;  // band rows, fractals of a tile and step, channel groups
  int64_t bands = 1, tiles = 1, tiles_per_group = 1;
  int64_t rb_max = 0, pin = 0, batch = 1;  // input rows, UB row pitch (pixels), c1s per conversion
  std::vector<Run> runs;
  // UB layout.
  int64_t ub_in = 0, ub_t = 0, ub_bias16 = 0, ub_bias = 0, ub_out = 0, ub_outT = 0, ub_res = 0, ub_tile = 0;
  // The band as C1HWC0, rounded up to 512 bytes: a block's workspace slot,
  // and L1 up to its group's weights [K1, group fractals].
  int64_t band_bytes = 0, l1_w_bytes = 0;
  bool zero_pad_once = false;  // channels past C are zeroed in UB once (one conversion batch)
  int64_t blocks = 1;
  double cycles = 0;
};

// The plan of a band tiling of the shared cost model: its figures, and the
// layout of UB (false when the tiling does not fit it, or the program's
// instructions cannot express it).
bool Layout(const Geom& g, const tile::TileCostFigures& f, const tile::BandTiling& t, Plan& p) {
  p.R = t.rows;
  p.Mt = t.m_blocks;
  p.Nt = t.n_blocks;
  p.Kt = t.k_blocks;
  p.G = t.groups;
  p.runs = t.runs;
  p.bands = t.bands;
  p.tiles = t.tiles;
  p.tiles_per_group = t.tiles_per_group;
  p.rb_max = t.band_rows;
  p.band_bytes = t.band_bytes;
  p.l1_w_bytes = t.weight_bytes;
  p.blocks = t.blocks;
  p.cycles = t.estimated_cycles;
  p.pin = RoundUp(p.rb_max * g.W, 16);
  if (!g.xc && p.pin / g.c0 > 255) return false;  // one vtranspose per c1
  if (p.Mt > 255) return false;                   // an MMA's m in fractals
  if (p.Mt * 16 / g.c0 > 255) return false;       // one vtranspose per channel block of a tile
  // UB: NCHW rows and their C1HWC0 form for `batch` c1s, the bias (as
  // loaded, then f32 and zero past Cout for FIXP), two tiles as FIXP writes
  // them and two transposed.
  const int64_t tile_px = p.Mt * 16, tile_ch = p.Nt * 16;
  p.ub_tile = tile_px * tile_ch * g.es;
  p.ub_bias16 = 0;
  p.ub_bias = RoundUp(g.Co * g.es, 32);
  p.ub_out = p.ub_bias + g.N1 * 16 * 4;
  p.ub_outT = p.ub_out + 2 * p.ub_tile;
  p.ub_res = p.ub_outT + 2 * p.ub_tile;  // the residual of a unit's tiles, in the output's layout
  p.ub_in = p.ub_res + (g.res.empty() ? 0 : p.tiles_per_group * p.ub_tile);
  if (g.xc) {
    // The band comes from X as it is: no conversion buffers.
    p.batch = g.C1;
    p.ub_t = p.ub_in;
    if (p.ub_in > ScopeBytes(f, tile::Scope::kVector)) return false;
  } else {
    const int64_t per_c1 = g.c0 * p.pin * g.es;  // NCHW rows of one c1, and the same again transposed
    p.batch = std::min<int64_t>(g.C1, (ScopeBytes(f, tile::Scope::kVector) - p.ub_in) / (2 * per_c1));
    if (p.batch <= 0) return false;
    p.batch = CeilDiv(g.C1, CeilDiv(g.C1, p.batch));  // even batches
    p.zero_pad_once = p.batch == g.C1;
    p.ub_t = p.ub_in + p.batch * per_c1;
    if (p.ub_t + p.batch * per_c1 > ScopeBytes(f, tile::Scope::kVector)) return false;
  }
  return true;
}

std::string Flag(absl::string_view op, absl::string_view from, absl::string_view to, int ev) {
  return absl::StrCat(op, " ", from, ", ", to, ", ", ev);
}

class Program {
 public:
  Program(const Geom& g, const Plan& p) : g_(g), p_(p) {}

  std::string Emit(const std::vector<std::string>& arg_lines) {
    e_.text() = absl::StrCat(".program conv_img2col\n.regs ", static_cast<int>(kNumRegs), "\n");
    for (const std::string& l : arg_lines) absl::StrAppend(&e_.text(), l, "\n");
    Init();
    int64_t base = 0;  // units of the sections before
    for (const Run& run : p_.runs)
      for (int64_t cg = 0; cg < p_.G; ++cg) {
        Section(run, cg, base);
        base += g_.N * run.count;
      }
    Fini();
    return e_.text();
  }

 private:
  void Init() {
    e_.L("block_idx ", R(rBlock));
    e_.L("block_dim ", R(rBlockDim));
    if (!g_.xc) e_.L("mul ", R(rWs), ", ", R(rBlock), ", ", p_.band_bytes);  // the conversion's workspace slot
    for (int r : {rL0A, rL0B, rL0C, rOut}) e_.L("mov ", R(r), ", 0");
    // The bias as f32 (zero past Cout), for FIXP. MTE2 tells VECTOR it is
    // in UB with the block's first band (Convert): no hand-off of its own
    // before the first band. FIXP waits for its conversion.
    Dup("f32", p_.ub_bias, g_.N1 * 16);
    if (g_.bias) e_.L("copy_gm_ub UB[", p_.ub_bias16, "], ", g_.b, "[0], len=", g_.Co * g_.es);
    e_.L("mov ", R(rBias), ", ", g_.bias ? 1 : 0);
    // With one conversion batch, the rows of channels past C are never
    // written: zero them once.
    if (!g_.xc && p_.zero_pad_once && g_.C < g_.C1 * g_.c0)
      Dup(ElemType(), p_.ub_in + g_.C * p_.pin * g_.es, (g_.C1 * g_.c0 - g_.C) * p_.pin);
    FreeFlags("set_flag");
    if (g_.bias) {
      e_.Line(Flag("wait_flag", "MTE2", "VECTOR", 2));
      VecOver(e_, g_.es == 4 ? std::string("vmov.f32") : absl::StrCat("vconv.f32.", g_.dt), g_.Co, 4, p_.ub_bias,
              static_cast<int>(g_.es), p_.ub_bias16, -1, "");
      e_.Line(Flag("set_flag", "VECTOR", "FIXP", 1));
      e_.Line(Flag("wait_flag", "VECTOR", "FIXP", 1));
    }
  }

  // Zeros `n` elements of `dt` (f16 or f32) at UB[at].
  void Dup(absl::string_view dt, int64_t at, int64_t n) {
    VecOver(e_, absl::StrCat("vdup.", dt), n, dt == "f32" ? 4 : 2, at, 0, 0, -1, ", 0.0");
  }
  // The vector dtype that moves the image's elements: f16 for 16-bit ones
  // (zeros are the same bits in bf16), f32.
  const char* ElemType() const { return g_.es == 4 ? "f32" : "f16"; }

  void Fini() { FreeFlags("wait_flag"); }

  // The "free" directions of the hand-offs (see the table at the top), set
  // ahead at the start (two for double-buffered slots) and taken back at
  // the end.
  void FreeFlags(absl::string_view op) {
    struct Free { const char* from; const char* to; int ev; int count; };
    static const Free kFree[] = {{"VECTOR", "MTE2", 0, 1}, {"MTE3", "VECTOR", 1, 1}, {"MTE2", "MTE3", 0, 1},
                                 {"MTE1", "MTE2", 1, 1},   {"MTE1", "MTE2", 2, 1},   {"CUBE", "MTE1", 0, 2},
                                 {"FIXP", "CUBE", 0, 2},   {"VECTOR", "FIXP", 0, 2}, {"MTE3", "VECTOR", 0, 2}};
    for (int round = 0; round < 2; ++round) {
      for (const Free& f : kFree)
        if (round < f.count) e_.Line(Flag(op, f.from, f.to, f.ev));
      if (!g_.res.empty() && round == 0) e_.Line(Flag(op, "VECTOR", "MTE2", 3));  // the residual's region free
    }
  }

  // The units of one run and channel group: unit j (image j / count, band
  // first + j % count) is global unit base + j; a block takes every
  // block_dim-th global unit.
  void Section(const Run& run, int64_t cg, int64_t base) {
    const int64_t units = g_.N * run.count;
    const std::string loop = e_.NewLabel("unit"), done = e_.NewLabel("done");
    // j = (block - base) mod block_dim, in [0, block_dim).
    e_.L("sub ", R(rJ), ", ", R(rBlock), ", ", base);
    e_.L("rem ", R(rJ), ", ", R(rJ), ", ", R(rBlockDim));
    e_.L("add ", R(rJ), ", ", R(rJ), ", ", R(rBlockDim));
    e_.L("rem ", R(rJ), ", ", R(rJ), ", ", R(rBlockDim));
    const std::string skip = e_.NewLabel("skip");
    e_.L("bge ", R(rJ), ", ", units, ", ", skip);
    // The group's weights: rows of the fractal grid [K1, N1], its columns.
    // The first unit's band conversion copies them in (Convert), so that
    // they travel while the band's rows go through UB.
    const int64_t t0 = cg * p_.tiles_per_group, t1 = std::min(p_.tiles, t0 + p_.tiles_per_group);
    const int64_t cols = std::min(g_.N1, t1 * p_.Nt) - t0 * p_.Nt;
    e_.Line(Flag("wait_flag", "MTE2", "MTE1", 2));
    e_.L("mov ", R(rFirst), ", 1");
    e_.Label(loop);
    e_.L("bge ", R(rJ), ", ", units, ", ", done);
    e_.L("div ", R(rN), ", ", R(rJ), ", ", run.count);
    e_.L("rem ", R(rBand), ", ", R(rJ), ", ", run.count);
    e_.L("add ", R(rBand), ", ", R(rBand), ", ", run.first);
    // rX: (n*C*H + band*R*sh - pt + pad_top) * W * es, or in NC1HWC0
    // (n*C1*H + ...) * W * 32 (the band's first row of c1 0).
    e_.L("mul ", R(rX), ", ", R(rN), ", ", (g_.xc ? g_.C1 : g_.C) * g_.H);
    e_.L("mul ", R(rT), ", ", R(rBand), ", ", p_.R * g_.sh);
    e_.L("add ", R(rX), ", ", R(rX), ", ", R(rT));
    e_.L("add ", R(rX), ", ", R(rX), ", ", run.pad_top - g_.pt);
    e_.L("mul ", R(rX), ", ", R(rX), ", ", g_.W * (g_.xc ? 32 : g_.es));
    // rY: (n*Co*Ho + band*R) * Wo * es, or (n*Co/c0*Ho + band*R) * Wo * 32.
    e_.L("mul ", R(rY), ", ", R(rN), ", ", (g_.yc ? g_.Co / g_.c0 : g_.Co) * g_.Ho);
    e_.L("mul ", R(rT), ", ", R(rBand), ", ", p_.R);
    e_.L("add ", R(rY), ", ", R(rY), ", ", R(rT));
    e_.L("mul ", R(rY), ", ", R(rY), ", ", g_.Wo * (g_.yc ? 32 : g_.es));
    Convert(run, t0, cols);
    Residual(run, t0, t1);
    for (int64_t t = t0; t < t1; ++t) Tile(run, t, t0, cols, t == t0, t == t1 - 1);
    e_.L("add ", R(rJ), ", ", R(rJ), ", ", R(rBlockDim));
    e_.L("jmp ", loop);
    e_.Label(done);
    e_.Line(Flag("set_flag", "MTE1", "MTE2", 2));
    e_.Label(skip);
  }

  // The band's input rows, NCHW -> C1HWC0 through UB into the workspace
  // slot, then into L1. In a section's first unit, the weights of its group
  // (fractal columns from `t0`, `cols` wide) go into L1 between the first
  // rows' copy and the band's: their transfer overlaps the conversion, and
  // one flag hand-off covers both.
  void Convert(const Run& run, int64_t t0, int64_t cols) {
    const int64_t px = run.in_rows * g_.W, hw_bytes = g_.H * g_.W * g_.es, c0 = g_.c0;
    if (g_.xc) {
      // X is NC1HWC0: each c1's rows of the band are contiguous in X.
      e_.Line(Flag("wait_flag", "MTE1", "MTE2", 1));
      e_.L("copy_gm_l1 L1[0], ", Addr(g_.x, rX, 0), ", nburst=", g_.C1, ", len=", px * 32, ", src_stride=",
           g_.H * g_.W * 32, ", dst_stride=", px * 32);
      WeightsIn(t0, cols);
      e_.Line(Flag("set_flag", "MTE2", "MTE1", 1));
      WeightsTold();
      BiasSent();
      return;
    }
    for (int64_t c1 = 0; c1 < g_.C1; c1 += p_.batch) {
      const int64_t nc1 = std::min(p_.batch, g_.C1 - c1);
      const int64_t rows = std::min(nc1 * c0, g_.C - c1 * c0);
      e_.Line(Flag("wait_flag", "VECTOR", "MTE2", 0));
      e_.L("copy_gm_ub UB[", p_.ub_in, "], ", Addr(g_.x, rX, c1 * c0 * hw_bytes), ", nburst=", rows, ", len=",
           px * g_.es, ", src_stride=", hw_bytes, ", dst_stride=", p_.pin * g_.es);
      e_.Line(Flag("set_flag", "MTE2", "VECTOR", 0));
      if (c1 == 0) {
        BiasSent();
        WeightsIn(t0, cols);
      }
      e_.Line(Flag("wait_flag", "MTE2", "VECTOR", 0));
      if (rows < nc1 * c0 && !p_.zero_pad_once) {
        // Channels past C read as zeros.
        Dup(ElemType(), p_.ub_in + rows * p_.pin * g_.es, (nc1 * c0 - rows) * p_.pin);
      }
      e_.Line(Flag("wait_flag", "MTE3", "VECTOR", 1));
      // Each repeat turns c0 channel rows of c0 pixels into the pixels' blocks.
      for (int64_t i = 0; i < nc1; ++i)
        e_.L("vtranspose.", g_.dt, " UB[", p_.ub_t + i * p_.pin * 32, "], UB[", p_.ub_in + i * c0 * p_.pin * g_.es,
             "], repeat=", p_.pin / c0, ", src0_blk_stride=", p_.pin / c0, ", src0_rep_stride=1");
      e_.Line(Flag("set_flag", "VECTOR", "MTE2", 0));
      e_.Line(Flag("set_flag", "VECTOR", "MTE3", 1));
      if (c1 == 0) e_.Line(Flag("wait_flag", "MTE2", "MTE3", 0));
      e_.Line(Flag("wait_flag", "VECTOR", "MTE3", 1));
      e_.L("copy_ub_gm ", Addr("ws", rWs, c1 * px * 32), ", UB[", p_.ub_t, "], nburst=", nc1, ", len=", px * 32,
           ", src_stride=", p_.pin * 32, ", dst_stride=", px * 32);
      e_.Line(Flag("set_flag", "MTE3", "VECTOR", 1));
    }
    e_.Line(Flag("set_flag", "MTE3", "MTE2", 0));
    e_.Line(Flag("wait_flag", "MTE3", "MTE2", 0));
    e_.Line(Flag("wait_flag", "MTE1", "MTE2", 1));
    e_.L("copy_gm_l1 L1[0], ", Addr("ws", rWs, 0), ", len=", g_.C1 * px * 32);
    e_.Line(Flag("set_flag", "MTE2", "MTE1", 1));
    WeightsTold();
    e_.Line(Flag("set_flag", "MTE2", "MTE3", 0));
  }

  // In a section's first unit: the group's weights into L1 (fractal
  // columns from `t0`, `cols` wide), and then the hand-off to MTE1.
  void WeightsIn(int64_t t0, int64_t cols) {
    const std::string later = e_.NewLabel("weights_loaded");
    e_.L("beq ", R(rFirst), ", 0, ", later);
    e_.Line(Flag("wait_flag", "MTE1", "MTE2", 2));
    e_.L("copy_gm_l1 L1[", p_.band_bytes, "], ", g_.w, "[", t0 * p_.Nt * 512, "], nburst=", g_.K1, ", len=", cols * 512,
         ", src_stride=", g_.N1 * 512, ", dst_stride=", cols * 512);
    e_.Label(later);
  }
  void WeightsTold() {
    const std::string later = e_.NewLabel("weights_told");
    e_.L("beq ", R(rFirst), ", 0, ", later);
    e_.Line(Flag("set_flag", "MTE2", "MTE1", 2));
    e_.L("mov ", R(rFirst), ", 0");
    e_.Label(later);
  }
  // In the block's first unit: the bias (copied in Init) is in UB.
  void BiasSent() {
    if (!g_.bias) return;
    const std::string later = e_.NewLabel("bias_sent");
    e_.L("beq ", R(rBias), ", 0, ", later);
    e_.Line(Flag("set_flag", "MTE2", "VECTOR", 2));
    e_.L("mov ", R(rBias), ", 0");
    e_.Label(later);
  }

  // MTE2: the residual of the unit's tiles [t0, t1) in one copy, each
  // tile's part laid out as the tile goes out (its channel rows, or its
  // 16-channel blocks, of Mt*16 pixels): one HBM latency per unit, where a
  // copy per tile would wait one out per tile (a set_flag after a copy
  // holds MTE2 until the data has landed).
  void Residual(const Run& run, int64_t t0, int64_t t1) {
    if (g_.res.empty()) return;
    const int64_t n1 = t0 * p_.Nt, blocks = std::min(g_.N1, t1 * p_.Nt) - n1;
    e_.Line(Flag("wait_flag", "VECTOR", "MTE2", 3));
    if (g_.yc)  // the c0-channel blocks of the tiles' 16-channel blocks
      e_.L("copy_gm_ub UB[", p_.ub_res, "], ", Addr(g_.res, rY, n1 * 16 / g_.c0 * g_.Ho * g_.Wo * 32), ", nburst=",
           blocks * 16 / g_.c0, ", len=", run.rows * g_.Wo * 32, ", src_stride=", g_.Ho * g_.Wo * 32,
           ", dst_stride=", p_.Mt * 16 * 32);
    else
      e_.L("copy_gm_ub UB[", p_.ub_res, "], ", Addr(g_.res, rY, n1 * 16 * g_.Ho * g_.Wo * g_.es), ", nburst=",
           std::min(blocks * 16, g_.Co - n1 * 16), ", len=", run.rows * g_.Wo * g_.es, ", src_stride=",
           g_.Ho * g_.Wo * g_.es, ", dst_stride=", p_.Mt * 16 * g_.es);
    e_.Line(Flag("set_flag", "MTE2", "VECTOR", 3));
  }

  // Output channels [t*Nt*16, ...) of the unit: the K steps, then the tile out.
  // `t0`, `cols`: the group's first tile and its fractal columns in L1.
  //
  // K step s covers k-fractals [s*Kt, s*Kt + kt) over (c1, kh, kw): its
  // img2col attributes repeat every P = lcm(Kt, KH*KW) / Kt steps, which
  // cover whole c1 planes of the band in L1. Where that saves code, the
  // first period runs as written (its first step starts the accumulation),
  // the periods after it in a loop whose registers move the image and the
  // weights in L1 by a period's planes and rows, and the steps after the
  // last full period as written.
  void Tile(const Run& run, int64_t t, int64_t t0, int64_t cols, bool first_tile, bool last_tile) {
    const int64_t n1 = t * p_.Nt, nt = std::min(p_.Nt, g_.N1 - n1);
    const int64_t steps = CeilDiv(g_.K1, p_.Kt);
    const int64_t channels = std::min(nt * 16, g_.Co - n1 * 16);
    const int64_t taps = g_.KH * g_.KW, span = std::lcm(p_.Kt, taps), period = span / p_.Kt;
    const int64_t planes = span / taps, plane_bytes = run.in_rows * g_.W * 32, w_row = cols * 512;
    // The periods after the first, all full, that the loop runs.
    int64_t looped = g_.K1 / span - 1;
    if (looped < 2) looped = 0;
    const int64_t w_base = p_.band_bytes + (n1 - t0 * p_.Nt) * 512;
    if (looped == 0) {
      for (int64_t s = 0; s < steps; ++s)
        Step(run, s, s * p_.Kt, g_.C1, -1, w_base + s * p_.Kt * w_row, nt, cols, first_tile,
             last_tile && s == steps - 1);
    } else {
      for (int64_t s = 0; s < period; ++s)
        Step(run, s, s * p_.Kt, g_.C1, -1, w_base + s * p_.Kt * w_row, nt, cols, first_tile, false);
      e_.L("mov ", R(rSrc), ", ", planes * plane_bytes);
      e_.L("mov ", R(rWk), ", ", w_base + span * w_row);
      e_.L("mov ", R(rIter), ", ", looped);
      const std::string loop = e_.NewLabel("k_period");
      e_.Label(loop);
      for (int64_t j = 0; j < period; ++j)
        Step(run, period + j, j * p_.Kt, planes, rSrc, j * p_.Kt * w_row, nt, cols, false, false);
      e_.L("add ", R(rSrc), ", ", R(rSrc), ", ", planes * plane_bytes);
      e_.L("add ", R(rWk), ", ", R(rWk), ", ", span * w_row);
      e_.L("sub ", R(rIter), ", ", R(rIter), ", 1");
      e_.L("bne ", R(rIter), ", 0, ", loop);
      const int64_t done = (looped + 1) * period, k_done = done * p_.Kt;  // steps and k-fractals before the tail
      for (int64_t s = done; s < steps; ++s)
        Step(run, s, s * p_.Kt - k_done, g_.C1 - k_done / taps, rSrc, (s * p_.Kt - k_done) * w_row, nt, cols,
             false, false);
      // The last step's image rows are in L0A: L1's band is free (MTE1 runs its queue in order).
      if (last_tile) e_.Line(Flag("set_flag", "MTE1", "MTE2", 1));
    }
    e_.Line(Flag("set_flag", "CUBE", "FIXP", 0));
    // FIXP: bias, f32 -> f16/bf16, into a UB tile [Mt*16 pixels, nt*16 channels].
    e_.Line(Flag("wait_flag", "CUBE", "FIXP", 0));
    e_.Line(Flag("wait_flag", "VECTOR", "FIXP", 0));
    e_.L("fixp.", g_.dt, ".f32 ", Addr("UB", rOut, p_.ub_out), ", ", Addr("L0C", rL0C, 0),
         ", UB[", p_.ub_bias + n1 * 16 * 4, "], m=", p_.Mt, ", n=", nt, g_.fixp_relu ? ", relu=1" : "");
    e_.Line(Flag("set_flag", "FIXP", "CUBE", 0));
    e_.Line(Flag("set_flag", "FIXP", "VECTOR", 0));
    Toggle(e_, rL0C, p_.Mt * p_.Nt * 1024);
    // VECTOR: channel rows [nt*16, Mt*16].
    e_.Line(Flag("wait_flag", "FIXP", "VECTOR", 0));
    e_.Line(Flag("wait_flag", "MTE3", "VECTOR", 0));
    for (int64_t cb = 0; cb < nt; ++cb) {
      if (g_.yc) {
        // Block q (c0 channels) of each pixel's row, the pixels one after
        // another: 8 pixels per repeat.
        const int64_t pixel_row = nt * 16 / g_.c0;  // blocks
        for (int64_t q = cb * 16 / g_.c0; q < (cb + 1) * 16 / g_.c0; ++q)
          for (int64_t r0 = 0; r0 < 2 * p_.Mt; r0 += 255)
            e_.L("vmov.", ElemType(), " ", Addr("UB", rOut, p_.ub_outT + (q * p_.Mt * 16 + r0 * 8) * 32), ", ",
                 Addr("UB", rOut, p_.ub_out + (r0 * 8 * pixel_row + q) * 32), ", repeat=",
                 std::min<int64_t>(255, 2 * p_.Mt - r0), ", src0_blk_stride=", pixel_row, ", src0_rep_stride=",
                 8 * pixel_row);
        continue;
      }
      // Channel block q of c0 channels: each repeat turns c0 pixels' rows
      // (nt*16 channels each) into the block's channel rows (Mt*16 pixels).
      const int64_t pixel_row = nt * 16 * g_.es / 32, channel_row = p_.Mt * 16 * g_.es / 32;  // in blocks
      for (int64_t q = cb * 16 / g_.c0; q < (cb + 1) * 16 / g_.c0; ++q)
        e_.L("vtranspose.", g_.dt, " ", Addr("UB", rOut, p_.ub_outT + q * g_.c0 * channel_row * 32), ", ",
             Addr("UB", rOut, p_.ub_out + q * 32), ", repeat=", p_.Mt * 16 / g_.c0, ", dst_blk_stride=", channel_row,
             ", dst_rep_stride=1, src0_blk_stride=", pixel_row, ", src0_rep_stride=", g_.c0 * pixel_row);
    }
    Epilogue(nt, t - t0, first_tile, last_tile);
    e_.Line(Flag("set_flag", "VECTOR", "FIXP", 0));
    e_.Line(Flag("set_flag", "VECTOR", "MTE3", 0));
    // MTE3: the band's rows of each valid channel.
    e_.Line(Flag("wait_flag", "VECTOR", "MTE3", 0));
    if (g_.yc) {
      // Each 16-channel block's band of pixels is contiguous in Y.
      e_.L("copy_ub_gm ", Addr("y", rY, n1 * 16 / g_.c0 * g_.Ho * g_.Wo * 32), ", ", Addr("UB", rOut, p_.ub_outT),
           ", nburst=", nt * 16 / g_.c0, ", len=", run.rows * g_.Wo * 32, ", src_stride=", p_.Mt * 16 * 32,
           ", dst_stride=", g_.Ho * g_.Wo * 32);
    } else {
      e_.L("copy_ub_gm ", Addr("y", rY, n1 * 16 * g_.Ho * g_.Wo * g_.es), ", ", Addr("UB", rOut, p_.ub_outT),
           ", nburst=", channels, ", len=", run.rows * g_.Wo * g_.es, ", src_stride=", p_.Mt * 16 * g_.es,
           ", dst_stride=", g_.Ho * g_.Wo * g_.es);
    }
    e_.Line(Flag("set_flag", "MTE3", "VECTOR", 0));
    Toggle(e_, rOut, p_.ub_tile);
  }

  // K step `s` of a tile: the k-fractals [k_start, k_start + kt) of an
  // image of `c1` planes at L1[base] (base: register `base_reg`, 0 where it
  // is -1), the weights' rows at L1[base of rWk + w_off] (rWk where
  // `base_reg` is not -1), then the MMA (the first step starts the
  // accumulation). `wait_band`: the step waits for the band; `hand_back`:
  // it hands L1 back to MTE2.
  void Step(const Run& run, int64_t s, int64_t k_start, int64_t c1, int base_reg, int64_t w_off, int64_t nt,
            int64_t cols, bool wait_band, bool hand_back) {
    const int64_t k0 = s * p_.Kt, kt = std::min(p_.Kt, g_.K1 - k0);
    const int64_t l0a_half = p_.Mt * p_.Kt * 512, l0b_half = p_.Kt * p_.Nt * 512;
    const std::string src = base_reg < 0 ? std::string("L1[0]") : Addr("L1", base_reg, 0);
    const std::string wts = base_reg < 0 ? absl::StrCat("L1[", w_off, "]") : Addr("L1", rWk, w_off);
    // MTE1: the step's im2col rows and weights.
    if (s == 0 && wait_band) e_.Line(Flag("wait_flag", "MTE2", "MTE1", 1));
    e_.Line(Flag("wait_flag", "CUBE", "MTE1", 0));
    e_.L("img2col.", g_.dt, " ", Addr("L0A", rL0A, 0), ", ", src, ", h=", run.in_rows, ", w=", g_.W, ", c1=", c1,
         ", kh=", g_.KH, ", kw=", g_.KW, ", stride_h=", g_.sh, ", stride_w=", g_.sw, ", pad_top=", run.pad_top,
         ", pad_bottom=", run.pad_bottom, ", pad_left=", g_.pl, ", pad_right=", g_.pr, ", dil_h=", g_.dh,
         ", dil_w=", g_.dw, ", m=", p_.Mt, ", k_start=", k_start, ", k=", kt);
    e_.L("load_l0b.", g_.dt, " ", Addr("L0B", rL0B, 0), ", ", wts, ", rows=", kt, ", cols=", nt,
         ", src_row_stride=", cols, g_.es == 4 ? "" : ", transpose=1");
    if (hand_back) e_.Line(Flag("set_flag", "MTE1", "MTE2", 1));
    e_.Line(Flag("set_flag", "MTE1", "CUBE", 0));
    // CUBE.
    e_.Line(Flag("wait_flag", "MTE1", "CUBE", 0));
    if (s == 0) e_.Line(Flag("wait_flag", "FIXP", "CUBE", 0));
    e_.L("mmad.", g_.dt, " ", Addr("L0C", rL0C, 0), ", ", Addr("L0A", rL0A, 0), ", ", Addr("L0B", rL0B, 0), ", m=", p_.Mt,
         ", k=", kt, ", n=", nt, ", init=", s == 0 ? 1 : 0);
    e_.Line(Flag("set_flag", "CUBE", "MTE1", 0));
    Toggle(e_, rL0A, l0a_half);
    Toggle(e_, rL0B, l0b_half);
  }

  // The fused epilogue's vector steps over the tile in its outgoing layout
  // (nt*16 channels of Mt*16 pixels either way: one contiguous stretch).
  void Epilogue(int64_t nt, int64_t tile_in_unit, bool first_tile, bool last_tile) {
    if (g_.steps.empty()) return;
    if (!g_.res.empty() && first_tile) e_.Line(Flag("wait_flag", "MTE2", "VECTOR", 3));
    const int64_t repeats = nt * p_.Mt * g_.es;  // of 256 bytes
    const int64_t res = p_.ub_res + tile_in_unit * p_.ub_tile;
    for (const ConvStep& s : g_.steps) {
      for (int64_t r0 = 0; r0 < repeats; r0 += 255) {
        const std::string out = Addr("UB", rOut, p_.ub_outT + r0 * 256);
        const std::string reps = absl::StrCat(", repeat=", std::min<int64_t>(255, repeats - r0));
        switch (s.kind) {
          case ConvStep::kAdd:
            e_.L("vadd.", g_.dt, " ", out, ", ", out, ", UB[", res + r0 * 256, "]", reps);
            break;
          case ConvStep::kRelu:
            e_.L("vrelu.", g_.dt, " ", out, ", ", out, reps);
            break;
          case ConvStep::kMaxs:
          case ConvStep::kMins:
            e_.L(s.kind == ConvStep::kMaxs ? "vmaxs." : "vmins.", g_.dt, " ", out, ", ", out, ", ", s.scalar, reps);
            break;
        }
      }
    }
    if (!g_.res.empty() && last_tile) e_.Line(Flag("set_flag", "VECTOR", "MTE2", 3));
  }

  const Geom& g_;
  const Plan& p_;
  Emitter e_;
};

}  // namespace

absl::StatusOr<ConvOperands> ConvOperandsOf(const Node& node) {
  ConvOperands o;
  if (node.domain().empty() && node.op() == "Conv" && node.num_outputs() == 1) {
    o.conv = &node;
    o.x = node.input(0);
    o.w = node.input(1);
    o.bias = node.input(2);
    o.y = node.output(0);
    o.args = {{o.x, "x"}, {o.w, "w"}};
    if (o.bias) o.args.push_back({o.bias, "bias"});
    o.args.push_back({o.y, "y"});
    return o;
  }
  auto unfit = [](absl::string_view why) {
    return absl::UnimplementedError(absl::StrCat(
        "img2col runs a Conv, or a fused Conv followed by Relu, Clip to constants and one residual Add; ", why));
  };
  const Attribute* attr = node.attr("body");
  const Graph* body = attr ? attr->g() : nullptr;
  if (node.domain() != "kiln" || node.op() != "Fused" || !body) return unfit("this is neither");
  std::vector<const Node*> nodes;
  for (const Node* n : body->nodes()) nodes.push_back(n);
  if (nodes.empty() || !nodes[0]->domain().empty() || nodes[0]->op() != "Conv") return unfit("the body starts otherwise");
  if (node.num_outputs() != 1 || body->outputs().size() != 1) return unfit("the group has more outputs");
  o.conv = nodes[0];
  const Value* cur = o.conv->output(0);
  const Value* res = nullptr;  // in the body
  for (size_t i = 1; i < nodes.size(); ++i) {
    const Node* e = nodes[i];
    if (cur->uses().size() != 1 || e->num_outputs() != 1 || !e->domain().empty() || e->input(0) == nullptr)
      return unfit("it is not one chain");
    if (e->op() == "Relu" && e->input(0) == cur) {
      o.steps.push_back({ConvStep::kRelu});
    } else if (e->op() == "Clip" && e->input(0) == cur) {
      for (int k = 1; k <= 2; ++k) {
        if (!e->input(k)) continue;
        std::optional<double> c = ConstScalar(e->input(k));
        if (!c) return unfit("a Clip bound is not a constant");
        o.steps.push_back({k == 1 ? ConvStep::kMaxs : ConvStep::kMins, *c});
      }
    } else if (e->op() == "Add" && e->num_inputs() == 2 && !res && (e->input(0) == cur || e->input(1) == cur)) {
      res = e->input(0) == cur ? e->input(1) : e->input(0);
      if (res == cur || !(res->type() == cur->type()) || res->is_constant())
        return unfit("the Add's other operand is not a residual tensor of the output's type");
      o.steps.push_back({ConvStep::kAdd});
    } else {
      return unfit(absl::StrCat("not ", e->op()));
    }
    if (!(e->output(0)->type() == cur->type())) return unfit("the epilogue changes the type");
    cur = e->output(0);
  }
  if (body->outputs()[0] != cur) return unfit("the group's output is not the chain's end");
  // Leading Relus (and a Clip's lower bound of 0) are FIXP's relu.
  while (!o.steps.empty() &&
         (o.steps.front().kind == ConvStep::kRelu || (o.steps.front().kind == ConvStep::kMaxs && o.steps.front().scalar == 0))) {
    o.fixp_relu = true;
    o.steps.erase(o.steps.begin());
  }
  // The body's inputs are the node's; what each is to the kernel.
  const Value* bx = o.conv->input(0);
  const Value* bw = o.conv->input(1);
  const Value* bb = o.conv->input(2);
  for (int i = 0; i < node.num_inputs(); ++i) {
    const Value* b = i < static_cast<int>(body->inputs().size()) ? body->inputs()[i] : nullptr;
    const Value* v = node.input(i);
    std::string role = b == bx ? "x" : b == bw ? "w" : b == bb ? "bias" : b == res ? "res" : "";
    if (role.empty() || !v) return unfit("a group input has no role in it");
    o.args.push_back({v, role});
    if (b == bx) o.x = v;  // and maybe the residual too (an identity block)
    if (b == bw) o.w = v;
    if (b == bb) o.bias = v;
    if (b == res) o.res = v;
  }
  o.y = node.output(0);
  o.args.push_back({o.y, "y"});
  // Body constants the kernel reads from global memory (small weights and
  // biases are copied into the body).
  for (const auto& [b, role] : {std::pair<const Value*, const char*>{bw, "w"}, {bb, "bias"}}) {
    if (!b || !b->is_constant()) continue;
    o.constant_args.push_back(b);
    o.args.push_back({b, role});
    (b == bw ? o.w : o.bias) = b;
  }
  if (!o.x || !o.w || (bb && !o.bias) || (res && !o.res)) return unfit("an operand is not a group input");
  if (node.input(0) != o.x) return unfit("the convolution's input is not the group's first");
  return o;
}

namespace {

// The kernel, or with `emit` false only whether there is one (its tiling
// chosen, no program made).
absl::StatusOr<GeneratedKernel> Img2ColConv(const Node& node, const sim::Machine& m, int max_blocks,
                                            ConvLayouts layouts, bool emit) {
  KILN_ASSIGN_OR_RETURN(ConvOperands ops, ConvOperandsOf(node));
  const Node& conv = *ops.conv;
  const Value* x = conv.input(0);
  const Value* w = conv.input(1);
  const Value* bias = conv.input(2);
  const Value* y = ops.y;
  for (const Value* v : {x, w, bias, y})
    if (v && (!v->type().is_tensor() || !v->type().shape().is_static()))
      return absl::UnimplementedError("img2col needs static shapes");
  const DType dt = y->type().dtype();
  if (dt != DType::kF16 && dt != DType::kBF16 && dt != DType::kF32)
    return absl::UnimplementedError("img2col reads f16, bf16 or f32 images");
  for (const Value* v : {x, w, bias})
    if (v && v->type().dtype() != dt) return absl::UnimplementedError("Conv operand dtypes differ");
  if (!ops.w->constant_data())
    return absl::UnimplementedError("img2col needs constant weights (laid out as fractals at compile time)");
  if (x->type().shape().rank() != 4 || w->type().shape().rank() != 4 || y->type().shape().rank() != 4)
    return absl::UnimplementedError("img2col runs 2-D Conv");
  if (conv.GetInt("group", 1) != 1) return absl::UnimplementedError("img2col runs one-group Conv");
  // The geometry is the shared backend's window reader's (target/backend/window.h).
  absl::StatusOr<Window2d> read = WindowOf(conv);
  if (!read.ok()) return absl::FailedPreconditionError(absl::StrCat("Conv's channels do not match: ", read.status().message()));
  const Window2d& win = *read;
  Geom g{win.n, win.c, win.h, win.w, win.oc, win.kernel[0], win.kernel[1], win.oh, win.ow, win.stride[0],
         win.stride[1], win.dilation[0], win.dilation[1], win.pad_begin[0], win.pad_begin[1], win.pad_end[0],
         win.pad_end[1], 0, 0, 0, bias != nullptr, sim::DTypeName(IsaDTypeOf(dt))};
  if (g.N <= 0 || g.Ho <= 0 || g.Wo <= 0 || g.Co <= 0) return absl::UnimplementedError("empty Conv");
  g.xc = layouts.x_c1hwc0;
  g.yc = layouts.y_c1hwc0;
  if ((g.xc && g.C % 16 != 0) || (g.yc && g.Co % 16 != 0))
    return absl::InvalidArgumentError("NC1HWC0 tensors of img2col have channels in whole blocks of 16");
  if (g.yc && dt == DType::kBF16) return absl::UnimplementedError("img2col writes NC1HWC0 outputs of f16 and f32 only");
  // C1HWC0 puts a 32-byte block of channels at each pixel: 16 of 16-bit
  // elements, 8 of f32 (one k-fractal of an f32 MMA).
  g.es = static_cast<int64_t>(DTypeSize(dt));
  g.c0 = 32 / g.es;
  g.C1 = CeilDiv(g.C, g.c0);
  g.K1 = g.C1 * g.KH * g.KW;
  g.N1 = CeilDiv(g.Co, 16);
  if (g.H * g.W * g.es > std::numeric_limits<int32_t>::max()) return absl::UnimplementedError("image too large");
  // An f32 image of fewer channels than a block (an RGB stem) fills C/8 of
  // each k-fractal; the im2col in GM packs its C*KH*KW taps densely instead.
  if (dt == DType::kF32 && g.C < g.c0 && !g.xc)
    return absl::UnimplementedError("an f32 image of fewer than 8 channels runs through the im2col in GM");
  g.fixp_relu = ops.fixp_relu;
  g.steps = ops.steps;
  if (!g.steps.empty() && dt == DType::kBF16)
    return absl::UnimplementedError("img2col's vector epilogue computes on f16 and f32 only");
  if (ops.res) g.res = ops.res == ops.x ? g.x : "res";

  // The tiling is the shared cost model's band schedule
  // (target/backend/tile_band_cost_model.h); the program adds the band's
  // conversion on the vector unit (unless X is NC1HWC0), the residual, the
  // vector epilogue, and its UB layout.
  const tile::TileCostFigures f = CubeFiguresOf(m);
  const double vec_rate = std::max(1.0, static_cast<double>(m.core().vector_bytes_per_cycle()));
  tile::BandConvProblem problem;
  problem.window = win;
  problem.input = dt;
  problem.output = dt;
  tile::BandKernelTraits traits;
  traits.band_via_vector = !g.xc;
  traits.residual = !g.res.empty();
  traits.tile_vector_passes = 1 + static_cast<int64_t>(g.steps.size());
  traits.vector_block_cycles = 2.0 * std::ceil(256.0 / vec_rate);  // a 512-byte block in 256-byte repeats
  traits.max_units = max_blocks;
  traits.fits = [&g, &f](const tile::BandTiling& t) {
    Plan p;
    return Layout(g, f, t, p);
  };
  absl::StatusOr<tile::BandTiling> chosen = tile::ChooseBandConvTiling(problem, f, traits);
  if (!chosen.ok()) return absl::UnimplementedError("no img2col tiling fits the core's buffers");
  Plan best;
  if (!Layout(g, f, *chosen, best)) return absl::InternalError("img2col: the chosen tiling does not lay out");
  if (!emit) {
    GeneratedKernel planned;
    planned.block_dim = best.blocks;
    planned.estimated_cycles = best.cycles;
    return planned;
  }

  std::vector<std::string> lines;
  FractalConstant fc;
  fc.rows = g.K1 * g.c0;
  fc.cols = g.Co;
  fc.conv_weight = true;
  const std::vector<int64_t> wimg = FractalConstantDims(fc, static_cast<int>(g.es));
  int w_arg = -1;
  for (size_t i = 0; i < ops.args.size(); ++i) {
    const std::string& role = ops.args[i].second;
    std::string dims;
    if (role == "x") dims = absl::StrCat(g.N, ",", g.C, ",", g.H, ",", g.W);
    else if (role == "w") dims = absl::StrJoin(wimg, ",");
    else if (role == "bias") dims = absl::StrCat(g.Co);
    else dims = absl::StrCat(g.N, ",", g.Co, ",", g.Ho, ",", g.Wo);  // res, y
    if (role == "w") w_arg = static_cast<int>(i);
    lines.push_back(absl::StrCat(".arg ", role, " ", g.dt, "[", dims, "]"));
  }
  const int64_t ws_bytes = g.xc ? 0 : best.band_bytes * best.blocks;
  if (ws_bytes > 0) lines.push_back(absl::StrCat(".arg ws s8[", ws_bytes, "]"));

  Program prog(g, best);
  const std::string text = prog.Emit(lines);
  auto file = sim::Assemble(text, "conv_img2col.kasm");
  if (!file.ok()) return absl::InternalError(absl::StrCat("img2col Conv program: ", file.status().message()));
  GeneratedKernel k;
  k.program = std::move(file->program);
  k.block_dim = best.blocks;
  k.engine = "cube";
  k.workspace_bytes = ws_bytes;
  k.estimated_cycles = best.cycles;
  k.constant_args = ops.constant_args;
  fc.arg = w_arg;
  k.fractal_constants.push_back(fc);
  const std::string in =
      g.xc ? std::string("input NC1HWC0 into L1 as it is")
           : absl::StrCat("C1HWC0 by vtranspose in ", CeilDiv(g.C1, best.batch), " batch",
                          CeilDiv(g.C1, best.batch) > 1 ? "es" : "", ", workspace ", ws_bytes, " B");
  k.plan = absl::StrCat("img2col from L1: bands of ", best.R, " output rows (", best.Mt, " x 16 pixels), ",
                        best.Nt * 16, "-channel tiles in ", best.G, " group", best.G > 1 ? "s" : "",
                        ", K steps of ", best.Kt * g.c0, ", ", in, g.yc ? ", output NC1HWC0" : "", ", W as fractals");
  if (g.fixp_relu) absl::StrAppend(&k.plan, ", relu on FIXP");
  if (!g.steps.empty()) {
    std::vector<std::string> names;
    for (const ConvStep& s : g.steps)
      names.push_back(s.kind == ConvStep::kAdd ? "residual add" : s.kind == ConvStep::kRelu ? "relu" : s.kind == ConvStep::kMaxs ? "max" : "min");
    absl::StrAppend(&k.plan, ", ", absl::StrJoin(names, " + "), " on the vector unit");
  }
  return k;
}

}  // namespace

absl::StatusOr<GeneratedKernel> GenerateImg2ColConv(const Node& node, const sim::Machine& m, int max_blocks,
                                                    ConvLayouts layouts) {
  return Img2ColConv(node, m, max_blocks, layouts, /*emit=*/true);
}

absl::Status Img2ColConvRuns(const Node& node, const sim::Machine& m, int max_blocks, ConvLayouts layouts) {
  return Img2ColConv(node, m, max_blocks, layouts, /*emit=*/false).status();
}

}  // namespace kiln::target::npusim
