//===- cube_conv.cc - Convolutions on the cube via im2col -----------------===//
//
// A Conv is, per image and group, Y[Mg, Ho*Wo] = W[Mg, K] x col[K, Ho*Wo]
// with K = Cg*KH*KW in W's own (ci, kh, kw) order, so the weights are A as
// they are. The program is the GEMM of cube_matmul.cc in its convolution
// mode: units (n, g, a chunk of R output rows, a chunk of Mc output
// channels) go round-robin to the blocks; for each unit the block writes the
// chunk's im2col matrix [K16, R*Wo] into its own workspace slot, then runs
// the unit's GEMM tiles reading the slot.
//
// The im2col runs in groups of `cpi` input channels through two UB slots:
// MTE2 gathers, per channel and tap, the rectangle of valid input pixels
// (one strided DMA when the stride along W is 1; one per output row with
// element bursts otherwise), MTE3 scatters it into the tap's row of the
// slot and writes the padding border from a zeroed UB area. Which output
// rows of a chunk see padding depends on the chunk, so chunks are grouped
// into classes with the same border, and each class has its own code.
//
//===----------------------------------------------------------------------===//
#include "target/npusim/kernels/cube_conv.h"

#include <algorithm>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "sim/isa/asm.h"
#include "target/backend/window.h"
#include "target/npusim/kernels/cube_img2col.h"
#include "target/npusim/kernels/cube_kasm.h"
#include "target/npusim/kernels/cube_matmul.h"
#include "target/npusim/kernels/cube_figures.h"

namespace kiln::target::npusim {
namespace {

// UB bytes of one im2col slot (two of them, plus the zero area).
constexpr int64_t kSlotBytes = 48 << 10;

struct ConvGeom {
  int64_t N = 1, C = 1, H = 1, W = 1, Co = 1, G = 1, Cg = 1, Mg = 1;
  int64_t KH = 1, KW = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  int64_t Ho = 1, Wo = 1, P = 1, K = 1, K16 = 16;
  int es = 4;
  const char* dt = "f32";
  // Depthwise (one input and one output channel per group): super-groups of
  // S channels run as grouped convolutions with a block-diagonal [S, S*T]
  // weight (T = KH*KW taps) that each unit builds in its workspace; C, G, Cg
  // and Mg above describe the super-groups (G of them, Cg = Mg = S).
  bool depthwise = false;
  int64_t S = 0, T = 1;
};

// The chunking of one candidate and what the im2col needs for it.
struct ConvPlan {
  int64_t R = 1, chunks = 1, mchunks = 1, Mc = 1, Np = 1, cpi = 1, units = 1;
  int64_t pitch = 0, tap_bytes = 0;  // UB row pitch and bytes of one tap's rectangle
  int64_t slot_bytes = 0;            // workspace bytes per block
  int64_t zero_bytes = 0, ub_base = 0, ub_bytes = 0;
  int64_t b_bytes = 0;     // the im2col matrix's part of a slot (then the depthwise A)
  int64_t w_ub = 0;        // depthwise: UB staging of S channels' taps
  // Padded mode (strides 1): the slot holds the chunk's input rows as
  // zero-padded planes of rin rows x Wp columns (plane bytes apart) and a
  // zero row at zero_row; B row (ci, kh, kw) is plane ci shifted by
  // kh*dh*Wp + kw*dw, over R rows of Wp columns (the last Wp - Wo discarded).
  bool padded = false;
  int64_t Wp = 0, rin = 0, plane = 0, zero_row = 0, ch_bytes = 0;
  // Bytes of W per output channel (ARowBytes: channels start on bands of 16
  // when W is read as fractals).
  int64_t w_channel_bytes = 0;
};

// Valid output columns [ow0, ow1) of tap column kw.
void ValidCols(const ConvGeom& g, int64_t kw, int64_t* ow0, int64_t* ow1) {
  *ow0 = g.Wo;
  *ow1 = 0;
  for (int64_t ow = 0; ow < g.Wo; ++ow) {
    int64_t iw = ow * g.sw - g.pl + kw * g.dw;
    if (iw >= 0 && iw < g.W) {
      *ow0 = std::min(*ow0, ow);
      *ow1 = ow + 1;
    }
  }
  if (*ow1 <= *ow0) *ow0 = *ow1 = 0;
}

// Valid rows [r0, r1) of tap row kh in the chunk starting at output row oh_a.
void ValidRows(const ConvGeom& g, int64_t R, int64_t oh_a, int64_t kh, int64_t* r0, int64_t* r1) {
  *r0 = R;
  *r1 = 0;
  for (int64_t r = 0; r < R; ++r) {
    int64_t ih = (oh_a + r) * g.sh - g.pt + kh * g.dh;
    if (ih >= 0 && ih < g.H) {
      *r0 = std::min(*r0, r);
      *r1 = r + 1;
    }
  }
  if (*r1 <= *r0) *r0 = *r1 = 0;
}

int64_t ChunkStart(const ConvGeom& g, const ConvPlan& p, int64_t c) { return std::min(c * p.R, g.Ho - p.R); }

// The class of a chunk: its valid rows per tap row (padded mode: its valid
// input rows).
std::vector<int64_t> ChunkClass(const ConvGeom& g, const ConvPlan& p, int64_t c) {
  std::vector<int64_t> v;
  if (p.padded) {
    int64_t r0 = p.rin, r1 = 0;
    for (int64_t rr = 0; rr < p.rin; ++rr) {
      int64_t ih = ChunkStart(g, p, c) - g.pt + rr;
      if (ih >= 0 && ih < g.H) {
        r0 = std::min(r0, rr);
        r1 = rr + 1;
      }
    }
    if (r1 <= r0) r0 = r1 = 0;
    return {r0, r1};
  }
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    int64_t r0, r1;
    ValidRows(g, p.R, ChunkStart(g, p, c), kh, &r0, &r1);
    v.push_back(r0);
    v.push_back(r1);
  }
  return v;
}

// The taps of a group of `nch` input channels of a chunk class: where each
// tap's valid rectangle sits in X, in the UB slot and in the workspace.
struct Tap {
  int64_t row_off, r0, r1, ow0, ow1, uoff, xoff, pitch;
};

std::vector<Tap> GroupTaps(const ConvGeom& g, const ConvPlan& p, const std::vector<int64_t>& cls, int64_t nch) {
  const int64_t es = g.es;
  std::vector<Tap> taps;
  int64_t uoff = 0;
  for (int64_t ci = 0; ci < nch; ++ci) {
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        Tap t;
        t.row_off = ((ci * g.KH + kh) * g.KW + kw) * p.Np * es;
        t.r0 = cls[2 * kh];
        t.r1 = cls[2 * kh + 1];
        ValidCols(g, kw, &t.ow0, &t.ow1);
        int64_t nr = t.r1 - t.r0, nc = t.ow1 - t.ow0;
        t.pitch = g.sw == 1 ? nc * es : RoundUp(nc * es, 32);
        t.uoff = uoff;
        t.xoff = (ci * g.H * g.W + (t.r0 * g.sh + kh * g.dh) * g.W + t.ow0 * g.sw + kw * g.dw) * es;
        if (nr > 0 && nc > 0) uoff += RoundUp(nr * t.pitch, 32);
        taps.push_back(t);
      }
    }
  }
  return taps;
}

// Padded mode: MTE2 reads each channel's valid input rows (contiguous).
void EmitPaddedGathers(Emitter& e, const ConvGeom& g, const ConvPlan& p, const std::vector<int64_t>& cls,
                       int64_t nch) {
  const int64_t es = g.es, nr = cls[1] - cls[0];
  e.Line("wait_flag MTE3, MTE2, 5");
  if (nr > 0)
    for (int64_t ci = 0; ci < nch; ++ci)
      e.L("copy_gm_ub ", Addr("UB", kC6, p.ub_base + ci * p.ch_bytes), ", ",
          Addr("x", kC5, (ci * g.H * g.W + cls[0] * g.W) * es), ", len=", nr * g.W * es);
  e.Line("set_flag MTE2, MTE3, 5");
  Toggle(e, kC6, kSlotBytes);
  e.L("add ", R(kC5), ", ", R(kC5), ", ", nch * g.H * g.W * es);
}

// Padded mode: MTE3 writes each channel's plane: the rows, then the zeros
// around them.
void EmitPaddedScatters(Emitter& e, const ConvGeom& g, const ConvPlan& p, const std::vector<int64_t>& cls,
                        int64_t nch) {
  const int64_t es = g.es, r0 = cls[0], r1 = cls[1], nr = r1 - r0, row = p.Wp * es;
  e.Line("wait_flag MTE2, MTE3, 5");
  const std::string zero = absl::StrCat("UB[", p.ub_base - p.zero_bytes, "]");
  auto zeros = [&](int64_t off, int64_t nburst, int64_t len) {
    if (nburst > 0 && len > 0)
      e.L("copy_ub_gm ", Addr("ws", kC4, off), ", ", zero, ", nburst=", nburst, ", len=", len,
          ", src_stride=0, dst_stride=", row);
  };
  for (int64_t ci = 0; ci < nch; ++ci) {
    const int64_t base = ci * p.plane;
    if (nr <= 0) {
      zeros(base, p.rin, row);
      continue;
    }
    e.L("copy_ub_gm ", Addr("ws", kC4, base + (r0 * p.Wp + g.pl) * es), ", ",
        Addr("UB", kC8, p.ub_base + ci * p.ch_bytes), ", nburst=", nr, ", len=", g.W * es,
        ", src_stride=", g.W * es, ", dst_stride=", row);
    zeros(base, r0, row);
    zeros(base + r1 * row, p.rin - r1, row);
    zeros(base + r0 * row, nr, g.pl * es);
    zeros(base + r0 * row + (g.pl + g.W) * es, nr, (p.Wp - g.pl - g.W) * es);
  }
  e.Line("set_flag MTE3, MTE2, 5");
  Toggle(e, kC8, kSlotBytes);
  e.L("add ", R(kC4), ", ", R(kC4), ", ", nch * p.plane);
}

// MTE2 gathers a group's valid rectangles into the UB slot at kC6.
void EmitGathers(Emitter& e, const ConvGeom& g, const ConvPlan& p, const std::vector<int64_t>& cls, int64_t nch) {
  if (p.padded) return EmitPaddedGathers(e, g, p, cls, nch);
  const int64_t es = g.es;
  e.Line("wait_flag MTE3, MTE2, 5");
  for (const Tap& t : GroupTaps(g, p, cls, nch)) {
    int64_t nr = t.r1 - t.r0, nc = t.ow1 - t.ow0;
    if (nr <= 0 || nc <= 0) continue;
    if (g.sw == 1) {
      e.L("copy_gm_ub ", Addr("UB", kC6, p.ub_base + t.uoff), ", ", Addr("x", kC5, t.xoff), ", nburst=", nr,
          ", len=", nc * es, ", src_stride=", g.sh * g.W * es, ", dst_stride=", t.pitch);
    } else {
      for (int64_t r = 0; r < nr; ++r)
        e.L("copy_gm_ub ", Addr("UB", kC6, p.ub_base + t.uoff + r * t.pitch), ", ",
            Addr("x", kC5, t.xoff + r * g.sh * g.W * es), ", nburst=", nc, ", len=", es, ", src_stride=", g.sw * es,
            ", dst_stride=", es);
    }
  }
  e.Line("set_flag MTE2, MTE3, 5");
  Toggle(e, kC6, kSlotBytes);
  e.L("add ", R(kC5), ", ", R(kC5), ", ", nch * g.H * g.W * es);
}

// MTE3 writes a group's rows of the workspace (at kC4) from the UB slot at
// kC8: the valid rectangles and the zero borders.
void EmitScatters(Emitter& e, const ConvGeom& g, const ConvPlan& p, const std::vector<int64_t>& cls, int64_t nch) {
  if (p.padded) return EmitPaddedScatters(e, g, p, cls, nch);
  const int64_t es = g.es, row_bytes = g.Wo * es;
  e.Line("wait_flag MTE2, MTE3, 5");
  const std::string zero = absl::StrCat("UB[", p.ub_base - p.zero_bytes, "]");
  auto zeros = [&](int64_t off, int64_t nburst, int64_t len) {
    if (nburst > 0 && len > 0)
      e.L("copy_ub_gm ", Addr("ws", kC4, off), ", ", zero, ", nburst=", nburst, ", len=", len,
          ", src_stride=0, dst_stride=", row_bytes);
  };
  for (const Tap& t : GroupTaps(g, p, cls, nch)) {
    int64_t nr = t.r1 - t.r0, nc = t.ow1 - t.ow0;
    if (nr <= 0 || nc <= 0) {
      zeros(t.row_off, p.R, row_bytes);
      continue;
    }
    zeros(t.row_off, t.r0, row_bytes);
    zeros(t.row_off + t.r1 * row_bytes, p.R - t.r1, row_bytes);
    zeros(t.row_off + t.r0 * row_bytes, nr, t.ow0 * es);
    zeros(t.row_off + t.r0 * row_bytes + t.ow1 * es, nr, (g.Wo - t.ow1) * es);
    e.L("copy_ub_gm ", Addr("ws", kC4, t.row_off + t.r0 * row_bytes + t.ow0 * es), ", ",
        Addr("UB", kC8, p.ub_base + t.uoff), ", nburst=", nr, ", len=", nc * es, ", src_stride=", t.pitch,
        ", dst_stride=", row_bytes);
  }
  e.Line("set_flag MTE3, MTE2, 5");
  Toggle(e, kC8, kSlotBytes);
  e.L("add ", R(kC4), ", ", R(kC4), ", ", nch * g.KH * g.KW * p.Np * es);
}

void EmitInit(Emitter& e, const ConvGeom& g, const ConvPlan& p) {
  e.L("block_idx ", R(kTmp));
  e.L("mul ", R(kUB), ", ", R(kTmp), ", ", p.slot_bytes);
  e.L("mov ", R(kC6), ", 0");
  const int64_t zero = p.ub_base - p.zero_bytes;
  e.L("vdup.", g.es == 4 ? "f32" : "f16", " UB[", zero, "], 0, repeat=", p.zero_bytes / 256);
  e.Line("set_flag VECTOR, MTE3, 4");
  e.Line("wait_flag VECTOR, MTE3, 4");
  e.Line("set_flag MTE3, MTE2, 5");
  e.Line("set_flag MTE3, MTE2, 5");
  if (g.depthwise) {
    e.Line("set_flag MTE3, MTE2, 7");
    // 32 zero bytes after A: the last row's loads read up to them.
    e.L("copy_ub_gm ", Addr("ws", kUB, p.b_bytes + g.S * g.K * g.es), ", UB[", zero, "], len=32");
  }
  // Rows K .. K16 of the slot stay zero (padded mode: they all read one zero row).
  if (p.padded)
    e.L("copy_ub_gm ", Addr("ws", kUB, p.zero_row), ", UB[", zero, "], nburst=", p.R + 1 + CeilDiv(32 / g.es, p.Wp),
        ", len=", p.Wp * g.es,
        ", src_stride=0, dst_stride=", p.Wp * g.es);
  else if (g.K16 > g.K)
    e.L("copy_ub_gm ", Addr("ws", kUB, g.K * p.Np * g.es), ", UB[", zero, "], nburst=", (g.K16 - g.K) * p.R,
        ", len=", g.Wo * g.es, ", src_stride=0, dst_stride=", g.Wo * g.es);
}

void EmitUnit(Emitter& e, const ConvGeom& g, const ConvPlan& p) {
  const int64_t es = g.es;
  // kUnit = ((n*G + g)*chunks + c)*mchunks + mc.
  e.L("rem ", R(kC0), ", ", R(kUnit), ", ", p.mchunks);
  e.L("div ", R(kC1), ", ", R(kUnit), ", ", p.mchunks);
  e.L("rem ", R(kC2), ", ", R(kC1), ", ", p.chunks);
  e.L("div ", R(kC1), ", ", R(kC1), ", ", p.chunks);
  e.L("rem ", R(kC3), ", ", R(kC1), ", ", g.G);
  e.L("div ", R(kC1), ", ", R(kC1), ", ", g.G);  // n
  e.L("mul ", R(kC0), ", ", R(kC0), ", ", p.Mc);
  e.L("min ", R(kC0), ", ", R(kC0), ", ", g.Mg - p.Mc);  // m_a
  if (g.depthwise) {
    // The super-group's first channel (the last one shifts inward).
    e.L("mul ", R(kC3), ", ", R(kC3), ", ", g.S);
    e.L("min ", R(kC3), ", ", R(kC3), ", ", g.C - g.S);
  }
  e.L("mul ", R(kC4), ", ", R(kC3), ", ", g.depthwise ? 1 : g.Mg);
  e.L("add ", R(kC4), ", ", R(kC4), ", ", R(kC0));  // first output channel
  if (g.depthwise) e.L("add ", R(kUA), ", ", R(kUB), ", ", p.b_bytes);
  else e.L("mul ", R(kUA), ", ", R(kC4), ", ", p.w_channel_bytes);
  e.L("mul ", R(kUC), ", ", R(kC4), ", ", es);
  e.L("mul ", R(kC5), ", ", R(kC1), ", ", g.Co);
  e.L("add ", R(kC5), ", ", R(kC5), ", ", R(kC4));
  e.L("mul ", R(kUY), ", ", R(kC5), ", ", g.P * es);
  e.L("mul ", R(kC0), ", ", R(kC2), ", ", p.R);
  e.L("min ", R(kC0), ", ", R(kC0), ", ", g.Ho - p.R);  // oh_a
  e.L("mul ", R(kC5), ", ", R(kC0), ", ", g.Wo * es);
  e.L("add ", R(kUY), ", ", R(kUY), ", ", R(kC5));
  // X: the group's first plane, row oh_a*sh, less the padding.
  e.L("mul ", R(kC5), ", ", R(kC1), ", ", g.C);
  e.L("mul ", R(kC4), ", ", R(kC3), ", ", g.depthwise ? 1 : g.Cg);
  e.L("add ", R(kC5), ", ", R(kC5), ", ", R(kC4));
  e.L("mul ", R(kC5), ", ", R(kC5), ", ", g.H * g.W * es);
  e.L("mul ", R(kC4), ", ", R(kC0), ", ", g.sh * g.W * es);
  e.L("add ", R(kC5), ", ", R(kC5), ", ", R(kC4));
  e.L("sub ", R(kC5), ", ", R(kC5), ", ", (g.pt * g.W + (p.padded ? 0 : g.pl)) * es);
  e.L("mov ", R(kC4), ", ", R(kUB));
  e.L("mov ", R(kC8), ", ", R(kC6));  // the scatters take the slots in the gathers' order
  // Chunk classes: the most common one is the fall-through.
  std::map<std::vector<int64_t>, std::vector<int64_t>> classes;
  for (int64_t c = 0; c < p.chunks; ++c) classes[ChunkClass(g, p, c)].push_back(c);
  const std::vector<int64_t>* common = nullptr;
  for (const auto& [cls, cs] : classes)
    if (!common || cs.size() > common->size()) common = &cs;
  const std::string end = e.NewLabel("im2col_end");
  std::vector<std::pair<const std::vector<int64_t>*, std::string>> bodies;
  for (const auto& [cls, cs] : classes) {
    std::string label = e.NewLabel("im2col_class");
    bodies.push_back({&cls, label});
    if (&cs == common) continue;
    for (int64_t c : cs) e.L("beq ", R(kC2), ", ", c, ", ", label);
  }
  for (const auto& [cls, cs] : classes)
    if (&cs == common) e.L("jmp ", bodies[std::distance(classes.begin(), classes.find(cls))].second);
  // Groups of cpi channels (and a rest), software-pipelined: the gathers of
  // group i+1 are issued before the scatters of group i, so MTE2 and MTE3
  // overlap even though the scalar unit issues in program order.
  const int64_t full = g.Cg / p.cpi, rest = g.Cg % p.cpi;
  for (const auto& [cls, label] : bodies) {
    e.Label(label);
    EmitGathers(e, g, p, *cls, p.cpi);
    if (full > 1) {
      const std::string loop = e.NewLabel("im2col_ci");
      e.L("mov ", R(kC7), ", 1");
      e.Label(loop);
      EmitGathers(e, g, p, *cls, p.cpi);
      EmitScatters(e, g, p, *cls, p.cpi);
      e.L("add ", R(kC7), ", ", R(kC7), ", 1");
      e.L("blt ", R(kC7), ", ", full, ", ", loop);
    }
    if (rest) EmitGathers(e, g, p, *cls, rest);
    EmitScatters(e, g, p, *cls, p.cpi);
    if (rest) EmitScatters(e, g, p, *cls, rest);
    e.L("jmp ", end);
  }
  e.Label(end);
  if (g.depthwise) {
    // The block-diagonal A: zeros between the diagonal blocks, then each
    // channel's taps at row i, columns i*T .. i*T+T-1.
    const int64_t zero = p.ub_base - p.zero_bytes;
    e.Line("wait_flag MTE3, MTE2, 7");
    e.L("mul ", R(kT0), ", ", R(kC3), ", ", g.T * es);
    e.L("copy_gm_ub UB[", p.w_ub, "], w[", R(kT0), "], len=", g.S * g.T * es);
    e.Line("set_flag MTE2, MTE3, 7");
    e.Line("wait_flag MTE2, MTE3, 7");
    if (g.S > 1)
      e.L("copy_ub_gm ", Addr("ws", kUA, g.T * es), ", UB[", zero, "], nburst=", g.S - 1, ", len=", g.K * es,
          ", src_stride=0, dst_stride=", (g.K + g.T) * es);
    e.L("copy_ub_gm ws[", R(kUA), "], UB[", p.w_ub, "], nburst=", g.S, ", len=", g.T * es, ", src_stride=", g.T * es,
        ", dst_stride=", (g.K + g.T) * es);
    e.Line("set_flag MTE3, MTE2, 7");
  }
  e.Line("set_flag MTE3, MTE2, 6");
}

absl::StatusOr<std::vector<int64_t>> Dims(const Value* v) {
  if (!v->type().is_tensor() || !v->type().shape().is_static())
    return absl::FailedPreconditionError(absl::StrCat("'", v->name(), "' has no static shape"));
  return v->type().shape().StaticDims();
}

}  // namespace

absl::StatusOr<GeneratedKernel> GenerateCubeConv(const Node& group, const sim::Machine& m, int max_blocks) {
  // A Conv, or a kiln.Fused group of one whose epilogue is a Relu (FIXP's).
  KILN_ASSIGN_OR_RETURN(ConvOperands ops, ConvOperandsOf(group));
  if (!ops.steps.empty())
    return absl::UnimplementedError("a Conv through im2col in GM takes a Relu epilogue at most");
  const Node& node = *ops.conv;
  if (node.num_inputs() < 2 || !node.input(0) || !node.input(1))
    return absl::FailedPreconditionError("Conv's X or W is missing");
  const Value* x = node.input(0);
  const Value* w = node.input(1);
  const Value* bias = node.num_inputs() > 2 ? node.input(2) : nullptr;
  const Value* y = ops.y;
  for (const Value* v : {x, w, y})
    KILN_RETURN_IF_ERROR(Dims(v).status());
  DType dt = y->type().dtype();
  sim::DType idt = IsaDTypeOf(dt);
  if (!sim::IsFloat(idt))
    return absl::UnimplementedError(absl::StrCat("the cube Conv takes f32, f16 or bf16, not ", DTypeName(dt)));
  for (const Value* v : {x, w, bias})
    if (v && v->type().dtype() != dt) return absl::FailedPreconditionError("Conv operand dtypes differ");
  // The geometry is the shared backend's window reader's (target/backend/
  // window.h, which the shared GEMM reader's convolutions read too):
  // shapes, groups, strides, dilations and resolved pads; a 1-D window has
  // height 1.
  absl::StatusOr<Window2d> read = WindowOf(node);
  if (!read.ok()) {
    if (absl::IsUnimplemented(read.status()))
      return absl::UnimplementedError("the cube runs 1-D and 2-D Conv (X of rank 3 or 4) only");
    return absl::FailedPreconditionError(absl::StrCat("Conv's channels, groups or shapes do not match: ",
                                                      read.status().message()));
  }
  const Window2d& win = *read;
  ConvGeom g;
  g.es = sim::DTypeSize(idt);
  g.dt = sim::DTypeName(idt);
  g.N = win.n;
  g.C = win.c;
  g.H = win.h;
  g.W = win.w;
  g.Co = win.oc;
  g.KH = win.kernel[0];
  g.KW = win.kernel[1];
  g.Ho = win.oh;
  g.Wo = win.ow;
  g.G = win.groups;
  g.Cg = g.C / g.G;
  g.Mg = g.Co / g.G;
  if (g.Cg == 1 && g.G > 1 && g.Mg != 1)
    return absl::UnimplementedError(
        "depthwise Conv with a channel multiplier (several output channels per input channel) is not run on the cube");
  g.sh = win.stride[0];
  g.sw = win.stride[1];
  g.dh = win.dilation[0];
  g.dw = win.dilation[1];
  g.pt = win.pad_begin[0];
  g.pl = win.pad_begin[1];
  g.pb = win.pad_end[0];
  g.pr = win.pad_end[1];
  if (g.Ho != (g.H + g.pt + g.pb - (g.KH - 1) * g.dh - 1) / g.sh + 1 ||
      g.Wo != (g.W + g.pl + g.pr - (g.KW - 1) * g.dw - 1) / g.sw + 1)
    return absl::FailedPreconditionError("Conv's output shape does not match its attributes");
  if (g.N <= 0 || g.Ho <= 0 || g.Wo <= 0 || g.Co <= 0) return absl::UnimplementedError("empty Conv");
  if (g.Wo > 4095) return absl::UnimplementedError("the cube Conv takes output rows of at most 4095 pixels");
  g.P = g.Ho * g.Wo;
  g.T = g.KH * g.KW;
  if (g.Cg == 1 && g.G > 1) {
    g.depthwise = true;
    g.S = std::min<int64_t>(16, g.G);
    g.G = CeilDiv(g.C, g.S);
    g.Cg = g.Mg = g.S;
  }
  g.K = g.Cg * g.KH * g.KW;
  g.K16 = RoundUp(g.K, 16);

  const tile::TileCostFigures f = CubeFiguresOf(m);
  const int64_t ub_total = m.core().ub_kib() * 1024;
  // Output rows per chunk that fit a UB slot with one channel's taps.
  const int64_t pitch = g.sw == 1 ? g.Wo * g.es : RoundUp(g.Wo * g.es, 32);
  auto tap_bytes = [&](int64_t r) { return RoundUp(r * pitch, 32); };
  int64_t rmax = 0;
  while (rmax < g.Ho && g.KH * g.KW * tap_bytes(rmax + 1) <= kSlotBytes) ++rmax;
  // Padded mode (strides 1): rows of Wp = W + pads columns, whose chunks
  // span at most one tile (512 columns) and fit a UB slot per channel.
  const bool can_pad = g.sh == 1 && g.sw == 1;
  const int64_t wp = g.W + g.pl + g.pr;
  auto rin_of = [&](int64_t r) { return r + (g.KH - 1) * g.dh; };
  int64_t rmax_pad = 0;
  while (can_pad && rmax_pad < g.Ho && (rmax_pad + 1) * wp <= 512 &&
         RoundUp(rin_of(rmax_pad + 1) * g.W * g.es, 32) <= kSlotBytes)
    ++rmax_pad;
  if (rmax == 0 && rmax_pad == 0)
    return absl::UnimplementedError(absl::StrCat("one input channel's ", g.KH * g.KW, " taps of an output row (",
                                                 g.KH * g.KW * tap_bytes(1), " bytes) do not fit a UB slot"));

  // Arguments: the launch's (x, w, [bias], y for a Conv; a group's inputs,
  // output and body constants), then ws.
  std::vector<std::string> lines, names;
  std::vector<const Value*> values;
  int a_arg = -1, b_arg = -1, c_arg = -1, y_arg = -1;
  for (const auto& [v, name] : ops.args) {
    KILN_ASSIGN_OR_RETURN(std::string line, KasmArgLine(name, *v));
    (name == "w" ? a_arg : name == "x" ? b_arg : name == "bias" ? c_arg : y_arg) = static_cast<int>(lines.size());
    lines.push_back(line);
    names.push_back(name);
    values.push_back(name == "y" ? nullptr : v);
  }
  values.push_back(nullptr);  // the workspace

  struct Best {
    ConvPlan plan;
    GemmSpec spec;
    tile::GemmTiling tiling;
    bool found = false;
  } best;
  const double dma_lat = f.global_latency_cycles + f.latency.stage_load + f.latency.sync;
  for (bool padded : {false, true}) {
  const int64_t rm = padded ? rmax_pad : rmax;
  if (rm == 0) continue;
  std::vector<int64_t> rs;
  for (int64_t d : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64}) {
    int64_t r = std::min(rm, CeilDiv(g.Ho, d));
    if (std::find(rs.begin(), rs.end(), r) == rs.end()) rs.push_back(r);
  }
  for (int64_t r : rs) {
    for (int64_t mch : {1, 2, 4, 8, 16}) {
      if (g.depthwise && mch > 1) continue;
      ConvPlan p;
      p.R = r;
      p.padded = padded;
      p.chunks = CeilDiv(g.Ho, r);
      p.Mc = mch == 1 ? g.Mg : std::min(g.Mg, RoundUp(CeilDiv(g.Mg, mch), 16));
      p.mchunks = CeilDiv(g.Mg, p.Mc);
      if (mch > 1 && p.mchunks != mch) continue;
      p.units = g.N * g.G * p.chunks * p.mchunks;
      const int64_t k0 = 32 / g.es;
      if (padded) {
        p.Wp = wp;
        p.rin = rin_of(r);
        p.Np = r * wp;
        p.ch_bytes = RoundUp(p.rin * g.W * g.es, 32);
        p.cpi = std::max<int64_t>(1, std::min(g.Cg, kSlotBytes / p.ch_bytes));
        p.plane = RoundUp((p.rin * wp + (g.KW - 1) * g.dw + k0) * g.es, 32);
        p.zero_row = g.Cg * p.plane;
        p.b_bytes = RoundUp(p.zero_row + (r + 1 + CeilDiv(k0, wp)) * wp * g.es, 32);
      } else {
        p.Np = r * g.Wo;
        p.pitch = pitch;
        p.tap_bytes = tap_bytes(r);
        p.cpi = std::max<int64_t>(1, std::min(g.Cg, kSlotBytes / (g.KH * g.KW * p.tap_bytes)));
        p.b_bytes = RoundUp(g.K16 * p.Np * g.es + 32, 32);
      }
      p.slot_bytes = p.b_bytes + (g.depthwise ? RoundUp(g.S * g.K * g.es + 32, 32) : 0);
      p.zero_bytes = RoundUp(std::max({g.Wo, p.Wp, g.depthwise ? g.K : 0}) * g.es, 256);
      p.ub_base = ub_total - 2 * kSlotBytes;
      p.w_ub = p.ub_base - p.zero_bytes - (g.depthwise ? RoundUp(g.S * g.T * g.es, 32) : 0);
      p.ub_bytes = ub_total - p.w_ub;
      // The im2col of a unit: per group the gathers, then the scatters.
      const int64_t active = std::min<int64_t>(p.units, max_blocks > 0 ? max_blocks : f.compute_units);
      const double bw = std::min(f.stage_bytes_per_cycle, f.global_bytes_per_cycle / static_cast<double>(active));
      const int64_t groups = CeilDiv(g.Cg, p.cpi);
      // Bytes a group moves each way, and its DMA instructions.
      const double bytes = padded ? static_cast<double>(p.cpi * p.rin * wp * g.es)
                                  : static_cast<double>(p.cpi * g.KH * g.KW * p.Np * g.es);
      const double insts = padded ? static_cast<double>(p.cpi) * 6.0
                                  : static_cast<double>(p.cpi * g.KH * g.KW) *
                                        (g.sw == 1 ? 4.0 : 3.0 + static_cast<double>(r));
      const double per_group = std::max(insts, 2 * bytes / bw + dma_lat);
      GemmSpec s;
      s.name = "conv";
      s.dtype = idt;
      s.M = p.Mc;
      s.N = p.Np;
      s.K = g.K;
      s.arg_lines = lines;
      s.arg_lines.push_back(absl::StrCat(".arg ws s8[", 0, "]"));  // sized below
      s.arg_names = names;
      s.arg_names.push_back("ws");
      s.arg_values = values;
      s.a_arg = a_arg;
      s.b_arg = b_arg;
      s.c_arg = c_arg;
      s.y_arg = y_arg;
      s.c_kind = bias ? GemmSpec::CKind::kCol : GemmSpec::CKind::kNone;
      s.relu = ops.fixp_relu;
      s.max_blocks = max_blocks;
      GemmSpec::ConvMode cm;
      cm.units = p.units;
      cm.y_row_stride = g.P;
      cm.ws = "ws";
      cm.unit_cycles = static_cast<double>(groups) * per_group + dma_lat + 40;
      // Depthwise: the block-diagonal A (taps in, zeros and the diagonal out).
      if (g.depthwise) cm.unit_cycles += 2 * dma_lat + static_cast<double>(g.S * g.K * g.es) / bw;
      cm.unit_hbm_bytes = 2.0 * static_cast<double>(groups) * bytes;
      cm.ub_bytes = p.ub_bytes;
      cm.a_in_ws = g.depthwise;
      cm.a_fractal_ok = !g.depthwise && g.Mg % 16 == 0 && p.Mc % 16 == 0;
      if (padded) {
        for (int64_t k = 0; k < g.K16; ++k) {
          const int64_t ci = k / g.T, kh = (k % g.T) / g.KW, kw = k % g.KW;
          cm.b_row_offsets.push_back(k < g.K ? ci * p.plane + (kh * g.dh * wp + kw * g.dw) * g.es : p.zero_row);
        }
        cm.out_rows = r;
        cm.out_pitch = wp;
        cm.out_cols = g.Wo;
      }
      s.conv = cm;
      const CubeGemm cube = ProblemOf(s);
      auto t = tile::ChooseGemmTiling(cube.problem, f, cube.traits);
      if (!t.ok()) continue;
      if (!best.found || t->estimated_cycles < best.tiling.estimated_cycles) {
        best.plan = p;
        best.spec = s;
        best.tiling = *t;
        best.found = true;
      }
    }
  }
  }
  if (!best.found) return absl::ResourceExhaustedError("no tiling of this Conv fits the machine's buffers");
  ConvPlan& p = best.plan;
  GemmSpec& s = best.spec;
  std::vector<FractalConstant> fractals = UseFractalConstants(s, best.tiling);
  p.w_channel_bytes = ARowBytes(s);
  const int64_t ws_bytes = best.tiling.blocks * p.slot_bytes;
  s.arg_lines.back() = absl::StrCat(".arg ws s8[", ws_bytes, "]");
  auto geom = std::make_shared<ConvGeom>(g);
  auto plan = std::make_shared<ConvPlan>(p);
  s.conv->emit_init = [geom, plan](Emitter& e) { EmitInit(e, *geom, *plan); };
  s.conv->emit_unit = [geom, plan](Emitter& e) { EmitUnit(e, *geom, *plan); };
  s.conv->emit_fini = [dw = g.depthwise](Emitter& e) {
    e.Line("wait_flag MTE3, MTE2, 5");
    e.Line("wait_flag MTE3, MTE2, 5");
    if (dw) e.Line("wait_flag MTE3, MTE2, 7");
  };
  KILN_ASSIGN_OR_RETURN(std::string text, GemmKasm(s, best.tiling, m));
  auto file = sim::Assemble(text, "conv.kasm");
  if (!file.ok())
    return absl::InternalError(absl::StrCat("generated cube Conv does not assemble: ", file.status().message()));
  GeneratedKernel k;
  k.program = std::move(file->program);
  k.block_dim = best.tiling.blocks;
  k.engine = "cube";
  k.workspace_bytes = ws_bytes;
  k.estimated_cycles = best.tiling.estimated_cycles;
  k.fractal_constants = std::move(fractals);
  k.constant_args = ops.constant_args;
  const tile::GemmTiling& t = best.tiling;
  const std::string kind = g.depthwise ? absl::StrCat(" depthwise (block-diagonal super-groups of ", g.S, " channels)")
                           : g.G > 1   ? absl::StrCat(" group ", g.G)
                                       : std::string();
  k.plan = absl::StrCat(
      "conv ", g.KH, "x", g.KW, "/", g.sh, "x", g.sw, " ", g.N, "x", g.C, "x", g.H, "x", g.W, " -> ", g.Co, "x", g.Ho,
      "x", g.Wo, kind, " ", g.dt,
      p.padded ? ": im2col as shifted rows of zero-padded input in GM (" : ": im2col in GM (", p.units, " units of ",
      p.R, " output rows x ", p.Mc, " channels, workspace ", ws_bytes, " B; the units write ",
      static_cast<int64_t>(s.conv->unit_hbm_bytes * static_cast<double>(p.units) / 2.0),
      " B to it, and the GEMM reads its B there), GEMM ", p.Mc, "x", p.Np, "x", g.K, " per unit: tiles ", t.bm, "x", t.bn,
      "x", t.tk, " (K stages of ", t.bk, "), ", t.blocks, " blocks", t.via_vector ? ", written through UB" : "",
      s.a_fractal ? ", W as fractals" : "", s.relu ? ", FIXP applies the Relu" : "", ", est. ",
      static_cast<int64_t>(t.estimated_cycles), " cycles (", PipeOfBound(t.bound), "-bound)");
  return k;
}

}  // namespace kiln::target::npusim
