//===- cube_matmul.cc - GEMM kernels on the cube --------------------------===//
//
// The program (docs/npusim-kernels.md, "cube"): block b takes tiles b,
// b + block_dim, ... of C (flattened over batch, M-tile, N-tile). Edge tiles
// shift inward (m0 = min(mt*tm, M - tm)) so every tile is whole; two tiles
// overlapping there compute the same values. Where one tile is wider than
// the matrix (M or N below the tile), tiles leave through UB and MTE3 writes
// only the valid rows and columns.
//
// Per tile, K runs in L1 stages of tk1 (two slots, MTE2 `nd2nz` of A and B)
// split into L0 steps of tk (two slots in L0A/L0B, MTE1 loads, one `mmad`
// each) accumulating into one of two L0C buffers, so FIXP writes tile i
// while the cube runs tile i+1. Every buffer hand-off is a counting flag:
// producer and consumer take the slots in the same order, so one event id
// per direction serves both slots, and the slot address lives in a register.
//
//===----------------------------------------------------------------------===//
#include "target/npusim/kernels/cube_matmul.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/ops/matmul.h"
#include "graph/support/status.h"
#include "sim/isa/asm.h"
#include "target/npusim/kernels/cube_kasm.h"

namespace kiln::target::npusim {
namespace {

std::string FloatImm(float v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  return absl::StrFormat("%.9g", v);
}

// Buffers and sizes shared by the emitting functions.
struct Layout {
  const GemmSpec* s = nullptr;
  tile::GemmTiling t;
  int es = 2;       // element bytes of A, B and C
  int64_t k0 = 16;  // elements of K per fractal
  const char* dt = "f16";
  int y_es = 2;            // element bytes of Y
  const char* ydt = "f16";
  std::string a, b, c, y;  // argument names
  int64_t rows = 0, cols = 0;  // valid rows / columns of every tile
  int64_t l1_half = 0, l0a_half = 0, l0b_half = 0, l0c_half = 0;
  int64_t l1_b = 0;  // B's offset in an L1 slot
  bool via_ub = false, epilogue = false, bias = false, res = false;
  bool loads = false;      // the epilogue's MTE2 brings C or a residual per tile (flags 2)
  std::string r;           // the residual's argument
  int r_es = 2;            // and its element bytes
  const char* rdt = "f16";
  // UB: fixp bias (raw C, f32 bias), output slots, the epilogue's areas.
  int64_t ub_raw = 0, ub_tmp = 0, ub_bias = 0, ub_out = 0, ub_out_half = 0;
  int64_t ub_gelu = 0;  // the GELU's scratch tile (f32)
  int64_t ub_acc = 0, ub_cf = 0, ub_craw = 0, ub_ctmp = 0, ub_eout = 0;
  int64_t ub_rf = 0, ub_rraw = 0;  // the residual tile in f32 and as loaded
};

int64_t Align(int64_t v, int64_t a) { return RoundUp(v, a); }

// Whether operand A (`a`) or B of `s` is a constant the program may read as
// its fractal image, whatever the tiling: a whole matrix (no batch of its
// own) of f32/f16/bf16; for a convolution only its weights, where allowed.
bool FractalCandidate(const GemmSpec& s, bool a) {
  const int arg = a ? s.a_arg : s.b_arg;
  const Value* v = arg >= 0 && arg < static_cast<int>(s.arg_values.size()) ? s.arg_values[arg] : nullptr;
  if (!ConstantData(v) || sim::DTypeSize(s.dtype) < 2) return false;
  if (a ? s.lda : s.ldb) return false;  // a strided view
  const std::vector<int64_t>& strides = a ? s.a_batch_stride : s.b_batch_stride;
  if (!std::all_of(strides.begin(), strides.end(), [](int64_t d) { return d == 0; })) return false;
  const int64_t n = v->type().shape().NumElements();
  if (s.conv) return a && s.conv->a_fractal_ok && !s.trans_a && n % s.K == 0;
  return a ? (s.trans_a ? n == s.M * s.K : n % s.K == 0) : n == s.K * s.N;
}

// Adds `c_ub` (f32, laid out for the C kind) to the f32 tile at ub_acc.
void EmitEpilogueAdd(Emitter& e, const Layout& L) {
  const GemmSpec& s = *L.s;
  const int64_t tm = L.t.bm, tn = L.t.bn, row_blocks = tn / 8;
  switch (s.c_kind) {
    case GemmSpec::CKind::kFull:
      VecOver(e, "vadd.f32", tm * tn, 4, L.ub_acc, 4, L.ub_acc, L.ub_cf, "");
      break;
    case GemmSpec::CKind::kScalar:
      VecOver(e, "vadd.f32", tm * tn, 4, L.ub_acc, 4, L.ub_acc, L.ub_cf, ", src1_blk_stride=0, src1_rep_stride=0",
              false, true);
      break;
    case GemmSpec::CKind::kRow:
    case GemmSpec::CKind::kCol:
      // One instruction per 64-column chunk, a repeat per row.
      for (int64_t c = 0; c < tn; c += 64) {
        int64_t mask = std::min<int64_t>(64, tn - c);
        for (int64_t r = 0; r < L.rows; r += 255) {
          int64_t reps = std::min<int64_t>(255, L.rows - r);
          int64_t off = (r * tn + c) * 4;
          std::string src1 = s.c_kind == GemmSpec::CKind::kRow
                                 ? absl::StrCat("UB[", L.ub_cf + c * 4, "]")
                                 : absl::StrCat("UB[", L.ub_cf + r * 32, "]");
          std::string strides =
              s.c_kind == GemmSpec::CKind::kRow ? ", src1_rep_stride=0" : ", src1_blk_stride=0, src1_rep_stride=1";
          e.L("vadd.f32 UB[", L.ub_acc + off, "], UB[", L.ub_acc + off, "], ", src1, ", repeat=", reps,
              mask != 64 ? absl::StrCat(", mask=", mask) : "", ", dst_rep_stride=", row_blocks,
              ", src0_rep_stride=", row_blocks, strides);
        }
      }
      break;
    case GemmSpec::CKind::kNone:
      break;
  }
}

// C (raw, in UB at `raw`) to f32 times beta at `dst`: `n` elements, or one
// element broadcast over all `n` when `scalar`.
void EmitCToF32(Emitter& e, const Layout& L, int64_t raw, int64_t tmp, int64_t dst, int64_t n, bool scalar) {
  const GemmSpec& s = *L.s;
  std::string strides;
  int64_t src = raw;
  if (scalar) {
    // Broadcast element 0 over a block, then read that block for every element.
    e.L("vbrcb.", L.es == 4 ? "f32" : "f16", " UB[", tmp, "], UB[", raw, "]");
    src = tmp;
    strides = ", src0_blk_stride=0, src0_rep_stride=0";
  }
  if (L.es == 4) {
    VecOver(e, "vmuls.f32", n, 4, dst, 4, src, -1, absl::StrCat(", ", FloatImm(s.beta), strides), scalar);
  } else {
    VecOver(e, absl::StrCat("vconv.f32.", L.dt), n, 4, dst, 2, src, -1, strides, scalar);
    if (s.beta != 1.0f) VecOver(e, "vmuls.f32", n, 4, dst, 4, dst, -1, absl::StrCat(", ", FloatImm(s.beta)));
  }
}

}  // namespace

namespace {

// The graph dtype of a cube operand's ISA dtype (f32, f16 or bf16).
DType GraphDTypeOf(sim::DType t) {
  switch (t) {
    case sim::DType::kF32: return DType::kF32;
    case sim::DType::kBF16: return DType::kBF16;
    default: return DType::kF16;
  }
}

}  // namespace

CubeGemm ProblemOf(const GemmSpec& s) {
  CubeGemm g;
  tile::GemmProblem& p = g.problem;
  tile::GemmKernelTraits& k = g.traits;
  p.name = s.name;
  int64_t batch = 1;
  for (int64_t d : s.batch_dims) batch *= d;
  if (batch > 1) p.batch = {batch};
  p.M = s.M;
  p.N = s.N;
  p.K = s.K;
  p.input = GraphDTypeOf(s.dtype);
  p.output = GraphDTypeOf(s.YDType());
  p.trans_a = s.trans_a;
  p.trans_b = s.trans_b;
  k.a_blocked = FractalCandidate(s, true);
  k.b_blocked = FractalCandidate(s, false);
  const bool c_in_fixp = (s.c_kind == GemmSpec::CKind::kRow || s.c_kind == GemmSpec::CKind::kScalar) && s.alpha == 1.0f;
  k.epilogue_in_vector = s.alpha != 1.0f || (s.c_kind != GemmSpec::CKind::kNone && !c_in_fixp) || s.r_arg >= 0 ||
                         s.gelu != GemmSpec::Gelu::kNone;
  k.residual = s.r_arg >= 0;
  k.vector_reserved = c_in_fixp ? 8192 : 0;
  k.max_units = s.max_blocks;
  if (s.conv) {
    p.batch = s.conv->units > 1 ? std::vector<int64_t>{s.conv->units} : std::vector<int64_t>{};
    k.items_on_one_block = true;
    k.item_prologue_cycles = s.conv->unit_cycles;
    k.item_prologue_bytes = s.conv->unit_hbm_bytes;
    k.vector_reserved += s.conv->ub_bytes;
    if (s.conv->out_rows > 0) k.whole_n = true;
  }
  return g;
}

absl::StatusOr<std::string> GemmKasm(const GemmSpec& s, const tile::GemmTiling& tiling, const sim::Machine& m) {
  Layout L;
  L.s = &s;
  L.t = tiling;
  const tile::GemmTiling& t = L.t;
  L.es = sim::DTypeSize(s.dtype);
  L.k0 = 32 / L.es;
  L.dt = sim::DTypeName(s.dtype);
  L.y_es = sim::DTypeSize(s.YDType());
  L.ydt = sim::DTypeName(s.YDType());
  L.a = s.arg_names[s.a_arg];
  L.b = s.arg_names[s.b_arg];
  L.y = s.arg_names[s.y_arg];
  if (s.c_arg >= 0) L.c = s.arg_names[s.c_arg];
  L.rows = std::min(t.bm, s.M);
  L.cols = std::min(t.bn, s.N);
  const sim::Core& core = m.core();
  L.l1_half = core.l1_kib() * 512;
  L.l0a_half = core.l0a_kib() * 512;
  L.l0b_half = core.l0b_kib() * 512;
  L.l0c_half = t.accumulator_stages == 2 ? core.l0c_kib() * 512 : 0;
  L.l1_b = Align(t.bm * t.bk * L.es, 512);
  const CubeGemm prob = ProblemOf(s);
  L.epilogue = prob.traits.epilogue_in_vector;
  L.res = s.r_arg >= 0;
  if (L.res) L.r = s.arg_names[s.r_arg];
  L.r_es = sim::DTypeSize(s.RDType());
  L.rdt = sim::DTypeName(s.RDType());
  if (L.res && s.conv) return absl::InternalError("a convolution takes no residual here");
  L.loads = L.epilogue && (s.c_kind != GemmSpec::CKind::kNone || L.res);
  L.bias = s.c_kind != GemmSpec::CKind::kNone && !L.epilogue;
  L.via_ub = t.via_vector;
  if (L.bias) {
    L.ub_raw = 0;      // raw C row (tn elements at most 512: 2 KiB)
    L.ub_tmp = 2048;   // a broadcast block for a scalar C
    L.ub_bias = 4096;  // f32 bias, tn elements (2 KiB)
    L.ub_out = 8192;
  }
  if (L.via_ub && !L.epilogue) {
    L.ub_out_half = Align(t.bm * t.bn * L.y_es, 32);
  }
  if (L.epilogue) {
    int64_t tile4 = t.bm * t.bn * 4;
    L.ub_acc = 0;
    L.ub_cf = Align(tile4, 32);
    int64_t cf = s.c_kind == GemmSpec::CKind::kFull ? tile4
                 : s.c_kind == GemmSpec::CKind::kRow ? t.bn * 4
                 : s.c_kind == GemmSpec::CKind::kCol ? RoundUp(t.bm, 8) * 32
                                                     : 256;
    L.ub_craw = L.ub_cf + Align(cf, 32);
    int64_t craw = s.c_kind == GemmSpec::CKind::kFull ? t.bm * t.bn * L.es
                   : s.c_kind == GemmSpec::CKind::kRow ? t.bn * L.es
                   : s.c_kind == GemmSpec::CKind::kCol ? RoundUp(t.bm, 64) * L.es
                                                       : 32;
    L.ub_ctmp = L.ub_craw + Align(craw, 32);
    int64_t ctmp = s.c_kind == GemmSpec::CKind::kCol ? RoundUp(t.bm, 64) * 4 : 256;
    L.ub_eout = L.ub_ctmp + Align(ctmp, 32);
    L.ub_rf = L.ub_eout + Align(t.bm * t.bn * L.y_es, 32);
    L.ub_rraw = L.ub_rf + (L.r_es == 4 ? 0 : Align(tile4, 32));  // f32: added as loaded
    int64_t end = L.res ? L.ub_rraw + t.bm * t.bn * L.r_es : L.ub_rf;
    if (s.gelu != GemmSpec::Gelu::kNone) {  // the GELU's scratch tile
      L.ub_gelu = Align(end, 32);
      end = L.ub_gelu + tile4;
    }
    if (end > core.ub_kib() * 1024) return absl::ResourceExhaustedError("the epilogue's tile does not fit UB");
  }

  const int64_t tm16 = t.bm / 16, tn16 = t.bn / 16;
  const int64_t k1 = CeilDiv(s.K, L.k0), n1 = CeilDiv(s.N, L.k0);  // fractal columns of A's and B's images
  if ((s.a_fractal && (s.trans_a || t.bk % L.k0)) || (s.b_fractal && (s.trans_b || t.bk % 16)))
    return absl::InternalError("a fractal operand needs K stages of whole fractals");
  const bool shift_m = t.bm <= s.M, shift_n = t.bn <= s.N;
  Emitter e;
  e.text() = absl::StrCat("// ", s.name, ": ", t.bm, "x", t.bn, "x", t.tk, " tiles, K stages of ", t.bk, "\n.program ",
                          s.name, "\n.regs ", static_cast<int>(kNumCubeRegs), "\n");
  for (const std::string& line : s.arg_lines) absl::StrAppend(&e.text(), line, "\n");

  const GemmSpec::ConvMode* cv = s.conv ? &*s.conv : nullptr;
  const int64_t ys = cv ? cv->y_row_stride : s.N;  // elements between rows of Y
  const int64_t m_tiles = CeilDiv(s.M, t.bm), n_tiles = CeilDiv(s.N, t.bn);
  const int64_t tiles_per_unit = m_tiles * n_tiles;
  const int64_t tiles = (prob.problem.batch.empty() ? 1 : prob.problem.batch[0]) * tiles_per_unit;
  e.L("block_idx ", R(cv ? kUnit : kTile));
  e.L("block_dim ", R(kBlockDim));
  for (int r : {kL1, kL0A, kL0B, kL0C, kUbOut}) e.L("mov ", R(r), ", 0");
  // Every slot starts free.
  for (int i = 0; i < 2; ++i) {
    e.Line("set_flag MTE1, MTE2, 0");
    e.Line("set_flag CUBE, MTE1, 0");
    if (i < t.accumulator_stages) e.Line("set_flag FIXP, CUBE, 0");
  }
  if (L.bias) {
    e.Line("set_flag VECTOR, MTE2, 1");
    e.Line("set_flag FIXP, VECTOR, 1");
  }
  if (L.via_ub && !L.epilogue) {
    e.Line("set_flag MTE3, FIXP, 3");
    e.Line("set_flag MTE3, FIXP, 3");
  }
  if (L.epilogue) {
    if (L.loads) e.Line("set_flag VECTOR, MTE2, 2");
    e.Line("set_flag VECTOR, FIXP, 2");
    e.Line("set_flag MTE3, VECTOR, 2");
  }

  const std::string unit_loop = e.NewLabel("unit"), tile_loop = e.NewLabel("tile"), done = e.NewLabel("done");
  if (cv) {
    cv->emit_init(e);
    e.Label(unit_loop);
    e.L("bge ", R(kUnit), ", ", cv->units, ", ", done);
    cv->emit_unit(e);
    e.Line("wait_flag MTE3, MTE2, 6");
    e.L("mov ", R(kTile), ", 0");
  }
  e.Label(tile_loop);
  if (!cv) e.L("bge ", R(kTile), ", ", tiles, ", ", done);
  // Decode the tile: nt, mt, batch index.
  e.L("rem ", R(kT0), ", ", R(kTile), ", ", n_tiles);
  e.L("div ", R(kT1), ", ", R(kTile), ", ", n_tiles);
  e.L("rem ", R(kT2), ", ", R(kT1), ", ", m_tiles);
  e.L("div ", R(kT3), ", ", R(kT1), ", ", m_tiles);
  e.L("mul ", R(kT0), ", ", R(kT0), ", ", t.bn);  // n0
  if (shift_n && n_tiles > 1) e.L("min ", R(kT0), ", ", R(kT0), ", ", s.N - t.bn);
  e.L("mul ", R(kT2), ", ", R(kT2), ", ", t.bm);  // m0
  if (shift_m && m_tiles > 1) e.L("min ", R(kT2), ", ", R(kT2), ", ", s.M - t.bm);
  // Batch offsets (bytes) of A and B.
  e.L("mov ", R(kAOff), ", ", cv ? R(kUA) : "0");
  e.L("mov ", R(kBOff), ", ", cv ? R(kUB) : "0");
  const int nb = cv ? 0 : static_cast<int>(s.batch_dims.size());
  if (nb > 0) {
    e.L("mov ", R(kT1), ", ", R(kT3));  // remaining batch index
    for (int d = nb - 1; d >= 0; --d) {
      int64_t dim = s.batch_dims[d];
      if (dim == 1) continue;
      e.L("rem ", R(kT4), ", ", R(kT1), ", ", dim);
      e.L("div ", R(kT1), ", ", R(kT1), ", ", dim);
      if (s.a_batch_stride[d]) {
        e.L("mul ", R(kT5), ", ", R(kT4), ", ", s.a_batch_stride[d] * L.es);
        e.L("add ", R(kAOff), ", ", R(kAOff), ", ", R(kT5));
      }
      if (s.b_batch_stride[d]) {
        e.L("mul ", R(kT5), ", ", R(kT4), ", ", s.b_batch_stride[d] * L.es);
        e.L("add ", R(kBOff), ", ", R(kBOff), ", ", R(kT5));
      }
    }
  }
  // A: + m0 rows (or columns when transposed); B: + n0 columns (or rows).
  // Fractal images: m0 / 16 bands of K1 fractals; n0 / K0 fractals.
  e.L("mul ", R(kT4), ", ", R(kT2), ", ", s.trans_a ? L.es : ARowBytes(s));
  e.L("add ", R(kAOff), ", ", R(kAOff), ", ", R(kT4));
  e.L("mul ", R(kT4), ", ", R(kT0), ", ", s.b_fractal ? 512 / L.k0 : (s.trans_b ? s.BRowStride() : 1) * L.es);
  e.L("add ", R(kBOff), ", ", R(kBOff), ", ", R(kT4));
  // Y: batch*M*N + m0*N + n0 (conv: the unit's offset + m0*ys + n0).
  if (cv) e.L("mov ", R(kYOff), ", ", R(kUY));
  else e.L("mul ", R(kYOff), ", ", R(kT3), ", ", s.M * s.N * L.y_es);
  e.L("mul ", R(kT4), ", ", R(kT2), ", ", ys * L.y_es);
  e.L("add ", R(kYOff), ", ", R(kYOff), ", ", R(kT4));
  e.L("mul ", R(kT4), ", ", R(kT0), ", ", L.y_es);
  e.L("add ", R(kYOff), ", ", R(kYOff), ", ", R(kT4));
  // C: its offset for this tile.
  switch (s.c_kind) {
    case GemmSpec::CKind::kFull:
      e.L("mul ", R(kCOff), ", ", R(kT2), ", ", s.N * L.es);
      e.L("mul ", R(kT4), ", ", R(kT0), ", ", L.es);
      e.L("add ", R(kCOff), ", ", R(kCOff), ", ", R(kT4));
      break;
    case GemmSpec::CKind::kRow: e.L("mul ", R(kCOff), ", ", R(kT0), ", ", L.es); break;
    case GemmSpec::CKind::kCol:
      e.L("mul ", R(kCOff), ", ", R(kT2), ", ", L.es);
      if (cv) e.L("add ", R(kCOff), ", ", R(kCOff), ", ", R(kUC));
      break;
    default: break;
  }

  // One L1 stage of kc elements of K.
  const int64_t ns = CeilDiv(s.K, t.bk);
  const bool b_rows = cv && !cv->b_row_offsets.empty();
  auto stage = [&](int64_t kc, bool first, int64_t kstart) {
    const int64_t gk = CeilDiv(kc, L.k0);  // K fractals of the stage
    e.Line("wait_flag MTE1, MTE2, 0");
    if (cv && cv->a_in_ws) {
      // A built in the workspace (row-major, finite past K): a copy per row.
      const int64_t gka = CeilDiv(kc, L.k0);
      for (int64_t r = 0; r < L.rows; ++r)
        e.L("copy_gm_l1 L1[", R(kL1), " + ", (r / 16) * gka * 512 + (r % 16) * 32, "], ", cv->ws, "[", R(kAOff),
            " + ", r * s.K * L.es, "], nburst=", gka, ", len=32, src_stride=32, dst_stride=512");
    } else if (s.a_fractal) {
      // Each band of 16 rows: the stage's K fractals, one run of GM.
      const int64_t ga = CeilDiv(kc, L.k0);
      e.L("copy_gm_l1 L1[", R(kL1), "], ", L.a, "[", R(kAOff), "], nburst=", CeilDiv(L.rows, 16), ", len=", ga * 512,
          ", src_stride=", k1 * 512, ", dst_stride=", ga * 512);
    } else if (!s.trans_a)
      e.L("nd2nz.", L.dt, " L1[", R(kL1), "], ", L.a, "[", R(kAOff), "], rows=", L.rows, ", cols=", kc,
          ", src_row_stride=", s.ARowStride());
    else
      e.L("nd2nz.", L.dt, " L1[", R(kL1), "], ", L.a, "[", R(kAOff), "], rows=", kc, ", cols=", L.rows,
          ", src_row_stride=", s.ARowStride());
    if (cv) {
      // The workspace holds B row-major (rows past K are zeros): a copy per
      // row puts its 32-byte pieces into the row of their fractals.
      const int64_t nf = CeilDiv(L.cols, L.k0);
      for (int64_t r = 0; r < RoundUp(kc, 16); ++r)
        e.L("copy_gm_l1 L1[", R(kL1), " + ", L.l1_b + (r / 16) * nf * 512 + (r % 16) * 32, "], ", cv->ws, "[", R(kBOff),
            " + ", b_rows ? cv->b_row_offsets[kstart + r] : r * s.N * L.es, "], nburst=", nf,
            ", len=32, src_stride=32, dst_stride=512");
    } else if (s.b_fractal) {
      // Each band of 16 rows of K: the tile's column fractals, one run of GM.
      const int64_t gb = CeilDiv(L.cols, L.k0);
      e.L("copy_gm_l1 L1[", R(kL1), " + ", L.l1_b, "], ", L.b, "[", R(kBOff), "], nburst=", CeilDiv(kc, 16),
          ", len=", gb * 512, ", src_stride=", n1 * 512, ", dst_stride=", gb * 512);
    } else if (!s.trans_b)
      e.L("nd2nz.", L.dt, " L1[", R(kL1), " + ", L.l1_b, "], ", L.b, "[", R(kBOff), "], rows=", kc, ", cols=", L.cols,
          ", src_row_stride=", s.BRowStride());
    else
      e.L("nd2nz.", L.dt, " L1[", R(kL1), " + ", L.l1_b, "], ", L.b, "[", R(kBOff), "], rows=", L.cols, ", cols=", kc,
          ", src_row_stride=", s.BRowStride());
    e.Line("set_flag MTE2, MTE1, 0");
    e.L("add ", R(kAOff), ", ", R(kAOff), ", ",
        s.a_fractal ? kc / L.k0 * 512 : (s.trans_a ? kc * s.ARowStride() : kc) * L.es);
    if (!b_rows)
      e.L("add ", R(kBOff), ", ", R(kBOff), ", ",
          s.b_fractal ? kc / 16 * n1 * 512 : (s.trans_b ? kc : kc * s.BRowStride()) * L.es);
    const int64_t nsub = CeilDiv(kc, t.tk);
    // Fractal-grid row lengths of the L1 images (nd2nz: ceil(cols / K0)).
    const int64_t ga = s.trans_a ? CeilDiv(L.rows, L.k0) : gk;
    const int64_t gb = s.trans_b ? gk : CeilDiv(L.cols, L.k0);
    for (int64_t j = 0; j < nsub; ++j) {
      const int64_t kj = std::min(t.tk, kc - j * t.tk);
      const int64_t kf = CeilDiv(kj, L.k0);     // mmad k
      const int64_t kf16 = CeilDiv(kj, 16);     // 16x16 squares of a transposing load
      const int64_t kpos = j * t.tk / L.k0;     // first K fractal column of this step
      const int64_t kpos16 = j * t.tk / 16;     // first 16-row band of this step
      if (j == 0) e.Line("wait_flag MTE2, MTE1, 0");
      e.Line("wait_flag CUBE, MTE1, 0");
      if (!s.trans_a) {
        e.L("load_l0a.", L.dt, " L0A[", R(kL0A), "], L1[", R(kL1), " + ", kpos * 512, "], rows=", tm16, ", cols=", kf,
            ", src_row_stride=", ga);
      } else {
        // A^T in L1 is kc x rows: one transposing load per 16 rows of A.
        const int64_t per_sq = L.es == 2 ? 1 : 2;  // source fractals per 16 columns
        for (int64_t m1 = 0; m1 < tm16; ++m1)
          e.L("load_l0a.", L.dt, " L0A[", R(kL0A), " + ", m1 * kf * 512, "], L1[", R(kL1), " + ",
              (kpos16 * ga + m1 * per_sq) * 512, "], rows=", kf16, ", cols=1, src_row_stride=", ga, ", transpose=1");
      }
      if (!s.trans_b) {
        e.L("load_l0b.", L.dt, " L0B[", R(kL0B), "], L1[", R(kL1), " + ", L.l1_b + kpos16 * gb * 512, "], rows=", kf16,
            ", cols=", tn16, ", src_row_stride=", gb, ", transpose=1");
      } else {
        // B is N x K in L1: its fractals are already in L0B form; reorder the grid.
        for (int64_t k1 = 0; k1 < kf; ++k1)
          e.L("load_l0b.", L.dt, " L0B[", R(kL0B), " + ", k1 * tn16 * 512, "], L1[", R(kL1), " + ",
              L.l1_b + (kpos + k1) * 512, "], rows=", tn16, ", cols=1, src_row_stride=", gb);
      }
      if (j == nsub - 1) e.Line("set_flag MTE1, MTE2, 0");
      e.Line("set_flag MTE1, CUBE, 0");
      if (first && j == 0) e.Line("wait_flag FIXP, CUBE, 0");
      e.Line("wait_flag MTE1, CUBE, 0");
      e.L("mmad.", L.dt, " L0C[", R(kL0C), "], L0A[", R(kL0A), "], L0B[", R(kL0B), "], m=", tm16, ", k=", kf, ", n=", tn16,
          first && j == 0 ? ", init=1" : "");
      e.Line("set_flag CUBE, MTE1, 0");
      Toggle(e, kL0A, L.l0a_half);
      Toggle(e, kL0B, L.l0b_half);
    }
    Toggle(e, kL1, L.l1_half);
  };
  if (b_rows) {
    for (int64_t st = 0; st < ns; ++st) stage(std::min(t.bk, s.K - st * t.bk), st == 0, st * t.bk);
  } else {
  stage(ns == 1 ? s.K : t.bk, true, 0);
  if (ns > 2) {
    const std::string loop = e.NewLabel("stage"), end = e.NewLabel("stage_end");
    e.L("mov ", R(kStage), ", 1");
    e.Label(loop);
    e.L("bge ", R(kStage), ", ", ns - 1, ", ", end);
    stage(t.bk, false, 0);
    e.L("add ", R(kStage), ", ", R(kStage), ", 1");
    e.L("jmp ", loop);
    e.Label(end);
  }
  if (ns > 1) stage(s.K - (ns - 1) * t.bk, false, 0);
  }
  e.Line("set_flag CUBE, FIXP, 0");
  // Copies of the tile at UB[ub] to Y: its valid rows and columns, or, with
  // out_rows, the first out_cols columns of each of its rows of out_pitch.
  auto write_rows = [&](const std::string& ub_reg, int64_t ub) {
    if (cv && cv->out_rows > 0 && ((cv->out_pitch * L.y_es) % 32 || L.rows < cv->out_rows)) {
      // A copy per row of the tile (UB rows start on 32-byte blocks).
      for (int64_t i = 0; i < L.rows; ++i)
        e.L("copy_ub_gm ", L.y, "[", R(kYOff), " + ", i * ys * L.y_es, "], UB[", ub_reg, ub + i * t.bn * L.y_es,
            "], nburst=", cv->out_rows, ", len=", cv->out_cols * L.y_es, ", src_stride=", cv->out_pitch * L.y_es,
            ", dst_stride=", cv->out_cols * L.y_es);
    } else if (cv && cv->out_rows > 0) {
      for (int64_t r = 0; r < cv->out_rows; ++r)
        e.L("copy_ub_gm ", L.y, "[", R(kYOff), " + ", r * cv->out_cols * L.y_es, "], UB[", ub_reg,
            ub + r * cv->out_pitch * L.y_es, "], nburst=", L.rows, ", len=", cv->out_cols * L.y_es,
            ", src_stride=", t.bn * L.y_es, ", dst_stride=", ys * L.y_es);
    } else {
      e.L("copy_ub_gm ", L.y, "[", R(kYOff), "], UB[", ub_reg, ub, "], nburst=", L.rows, ", len=", L.cols * L.y_es,
          ", src_stride=", t.bn * L.y_es, ", dst_stride=", ys * L.y_es);
    }
  };

  // The tile's write-out.
  const std::string relu = s.relu ? ", relu=1" : "";
  if (L.bias) {
    const bool scalar = s.c_kind == GemmSpec::CKind::kScalar;
    e.Line("wait_flag VECTOR, MTE2, 1");
    e.L("copy_gm_ub UB[", L.ub_raw, "], ", L.c, "[", scalar ? std::string("0") : R(kCOff), "], len=",
        (scalar ? 1 : L.cols) * L.es);
    e.Line("set_flag MTE2, VECTOR, 1");
    e.Line("wait_flag MTE2, VECTOR, 1");
    e.Line("wait_flag FIXP, VECTOR, 1");
    EmitCToF32(e, L, L.ub_raw, L.ub_tmp, L.ub_bias, t.bn, scalar);
    e.Line("set_flag VECTOR, MTE2, 1");
    e.Line("set_flag VECTOR, FIXP, 1");
    e.Line("wait_flag VECTOR, FIXP, 1");
  }
  const std::string bias_op = L.bias ? absl::StrCat(", UB[", L.ub_bias, "]") : "";
  e.Line("wait_flag CUBE, FIXP, 0");
  if (L.epilogue) {
    const bool has_c = s.c_kind != GemmSpec::CKind::kNone;
    const bool scalar = s.c_kind == GemmSpec::CKind::kScalar;
    if (L.loads) e.Line("wait_flag VECTOR, MTE2, 2");
    if (L.res) {
      // MTE2 brings the tile's residual, laid out as Y (at Y's offset in its elements).
      e.L("div ", R(kT5), ", ", R(kYOff), ", ", L.y_es);
      e.L("mul ", R(kT5), ", ", R(kT5), ", ", L.r_es);
      e.L("copy_gm_ub UB[", L.ub_rraw, "], ", L.r, "[", R(kT5), "], nburst=", L.rows, ", len=", L.cols * L.r_es,
          ", src_stride=", s.N * L.r_es, ", dst_stride=", t.bn * L.r_es);
    }
    if (has_c) {
      // MTE2 brings the tile's C.
      switch (s.c_kind) {
        case GemmSpec::CKind::kFull:
          e.L("copy_gm_ub UB[", L.ub_craw, "], ", L.c, "[", R(kCOff), "], nburst=", L.rows, ", len=", L.cols * L.es,
              ", src_stride=", s.N * L.es, ", dst_stride=", t.bn * L.es);
          break;
        case GemmSpec::CKind::kRow:
          e.L("copy_gm_ub UB[", L.ub_craw, "], ", L.c, "[", R(kCOff), "], len=", L.cols * L.es);
          break;
        case GemmSpec::CKind::kCol:
          e.L("copy_gm_ub UB[", L.ub_craw, "], ", L.c, "[", R(kCOff), "], len=", L.rows * L.es);
          break;
        default:
          e.L("copy_gm_ub UB[", L.ub_craw, "], ", L.c, "[0], len=", L.es);
      }
    }
    if (L.loads) e.Line("set_flag MTE2, VECTOR, 2");
    e.Line("wait_flag VECTOR, FIXP, 2");
    e.L("fixp.f32.f32 UB[", L.ub_acc, "], L0C[", R(kL0C), "], m=", tm16, ", n=", tn16);
    e.Line("set_flag FIXP, CUBE, 0");
    e.Line("set_flag FIXP, VECTOR, 2");
    e.Line("wait_flag FIXP, VECTOR, 2");
    if (s.alpha != 1.0f)
      VecOver(e, "vmuls.f32", t.bm * t.bn, 4, L.ub_acc, 4, L.ub_acc, -1, absl::StrCat(", ", FloatImm(s.alpha)));
    if (L.loads) e.Line("wait_flag MTE2, VECTOR, 2");
    if (has_c) {
      switch (s.c_kind) {
        case GemmSpec::CKind::kFull: EmitCToF32(e, L, L.ub_craw, 0, L.ub_cf, t.bm * t.bn, false); break;
        case GemmSpec::CKind::kRow: EmitCToF32(e, L, L.ub_craw, 0, L.ub_cf, t.bn, false); break;
        case GemmSpec::CKind::kCol:
          EmitCToF32(e, L, L.ub_craw, 0, L.ub_ctmp, RoundUp(L.rows, 8), false);
          e.L("vbrcb.f32 UB[", L.ub_cf, "], UB[", L.ub_ctmp, "], repeat=", CeilDiv(L.rows, 8));
          break;
        default: EmitCToF32(e, L, L.ub_craw, L.ub_ctmp, L.ub_cf, 64, scalar); break;
      }
    }
    if (L.res && L.r_es != 4)
      VecOver(e, absl::StrCat("vconv.f32.", L.rdt), t.bm * t.bn, 4, L.ub_rf, L.r_es, L.ub_rraw, -1, "");
    if (has_c) EmitEpilogueAdd(e, L);
    if (L.res) VecOver(e, "vadd.f32", t.bm * t.bn, 4, L.ub_acc, 4, L.ub_acc, L.r_es == 4 ? L.ub_rraw : L.ub_rf, "");
    if (L.loads) e.Line("set_flag VECTOR, MTE2, 2");
    if (s.gelu != GemmSpec::Gelu::kNone) {
      // GELU over the tile: x = acc, g the scratch.
      const int64_t n = t.bm * t.bn, x = L.ub_acc, g = L.ub_gelu;
      auto scalar = [](double v) { return absl::StrCat(", ", FloatImm(static_cast<float>(v))); };
      if (s.gelu == GemmSpec::Gelu::kTanh) {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        VecOver(e, "vmul.f32", n, 4, g, 4, x, x, "");
        VecOver(e, "vmul.f32", n, 4, g, 4, g, x, "");
        VecOver(e, "vmuls.f32", n, 4, g, 4, g, -1, scalar(0.044715));
        VecOver(e, "vadd.f32", n, 4, g, 4, g, x, "");
        VecOver(e, "vmuls.f32", n, 4, g, 4, g, -1, scalar(0.7978845608028654));
        VecOver(e, "vtanh.f32", n, 4, g, 4, g, -1, "");
      } else {  // 0.5 x (1 + erf(x / sqrt(2)))
        VecOver(e, "vmuls.f32", n, 4, g, 4, x, -1, scalar(1.0 / std::sqrt(2.0)));
        VecOver(e, "verf.f32", n, 4, g, 4, g, -1, "");
      }
      VecOver(e, "vadds.f32", n, 4, g, 4, g, -1, scalar(1.0));
      VecOver(e, "vmul.f32", n, 4, g, 4, g, x, "");
      VecOver(e, "vmuls.f32", n, 4, x, 4, g, -1, scalar(0.5));
    }
    if (s.relu) VecOver(e, "vrelu.f32", t.bm * t.bn, 4, L.ub_acc, 4, L.ub_acc, -1, "");
    e.Line("wait_flag MTE3, VECTOR, 2");
    if (L.y_es == 4) VecOver(e, "vmov.f32", t.bm * t.bn, 4, L.ub_eout, 4, L.ub_acc, -1, "");
    else VecOver(e, absl::StrCat("vconv.", L.ydt, ".f32"), t.bm * t.bn, L.y_es, L.ub_eout, 4, L.ub_acc, -1, "");
    e.Line("set_flag VECTOR, FIXP, 2");
    e.Line("set_flag VECTOR, MTE3, 2");
    e.Line("wait_flag VECTOR, MTE3, 2");
    write_rows("", L.ub_eout);
    e.Line("set_flag MTE3, VECTOR, 2");
  } else if (L.via_ub) {
    e.Line("wait_flag MTE3, FIXP, 3");
    e.L("fixp.", L.ydt, ".f32 UB[", R(kUbOut), " + ", L.ub_out, "], L0C[", R(kL0C), "]", bias_op, ", m=", tm16,
        ", n=", tn16, relu);
    e.Line("set_flag FIXP, CUBE, 0");
    if (L.bias) e.Line("set_flag FIXP, VECTOR, 1");
    e.Line("set_flag FIXP, MTE3, 3");
    e.Line("wait_flag FIXP, MTE3, 3");
    write_rows(absl::StrCat(R(kUbOut), " + "), L.ub_out);
    e.Line("set_flag MTE3, FIXP, 3");
    Toggle(e, kUbOut, L.ub_out_half);
  } else {
    e.L("fixp.", L.ydt, ".f32 ", L.y, "[", R(kYOff), "], L0C[", R(kL0C), "]", bias_op, ", m=", tm16, ", n=", tn16,
        ", dst_row_stride=", ys, relu);
    e.Line("set_flag FIXP, CUBE, 0");
    if (L.bias) e.Line("set_flag FIXP, VECTOR, 1");
  }
  if (L.l0c_half) Toggle(e, kL0C, L.l0c_half);
  if (cv) {
    e.L("add ", R(kTile), ", ", R(kTile), ", 1");
    e.L("blt ", R(kTile), ", ", tiles_per_unit, ", ", tile_loop);
    e.L("add ", R(kUnit), ", ", R(kUnit), ", ", R(kBlockDim));
    e.L("jmp ", unit_loop);
  } else {
    e.L("add ", R(kTile), ", ", R(kTile), ", ", R(kBlockDim));
    e.L("jmp ", tile_loop);
  }
  e.Label(done);
  if (cv) cv->emit_fini(e);
  // Take back the flags that marked slots free.
  for (int i = 0; i < 2; ++i) {
    e.Line("wait_flag MTE1, MTE2, 0");
    e.Line("wait_flag CUBE, MTE1, 0");
    if (i < t.accumulator_stages) e.Line("wait_flag FIXP, CUBE, 0");
  }
  if (L.bias) {
    e.Line("wait_flag VECTOR, MTE2, 1");
    e.Line("wait_flag FIXP, VECTOR, 1");
  }
  if (L.via_ub && !L.epilogue) {
    e.Line("wait_flag MTE3, FIXP, 3");
    e.Line("wait_flag MTE3, FIXP, 3");
  }
  if (L.epilogue) {
    if (L.loads) e.Line("wait_flag VECTOR, MTE2, 2");
    e.Line("wait_flag VECTOR, FIXP, 2");
    e.Line("wait_flag MTE3, VECTOR, 2");
  }
  return e.text();
}

}  // namespace kiln::target::npusim

namespace kiln::target::npusim {

int64_t ARowBytes(const GemmSpec& s) {
  const int64_t es = sim::DTypeSize(s.dtype);
  return s.a_fractal ? CeilDiv(s.K, 32 / es) * 32 : s.ARowStride() * es;
}

std::vector<FractalConstant> UseFractalConstants(GemmSpec& s, const tile::GemmTiling& t) {
  std::vector<FractalConstant> out;
  const int es = sim::DTypeSize(s.dtype);
  const int64_t k0 = 32 / es;
  auto use = [&](int arg, int64_t rows, int64_t cols, bool transpose) {
    const std::vector<int64_t> d = FractalDims(rows, cols, es);
    s.arg_lines[arg] = absl::StrCat(".arg ", s.arg_names[arg], " ", sim::DTypeName(s.dtype), "[",
                                    absl::StrJoin(d, ","), "]");
    out.push_back(FractalConstant{arg, rows, cols, transpose});
  };
  // A: every tile's rows start on a band of 16, K stages on whole fractals.
  if (FractalCandidate(s, true) && t.bk % k0 == 0 && (t.bm >= s.M || s.M % 16 == 0)) {
    const int64_t n = s.arg_values[s.a_arg]->type().shape().NumElements();
    use(s.a_arg, s.trans_a ? s.M : n / s.K, s.K, s.trans_a);
    s.a_fractal = true;
    s.trans_a = false;
  }
  // B: every tile's columns start on a fractal, K stages on bands of 16.
  if (FractalCandidate(s, false) && t.bk % 16 == 0 && (t.bn >= s.N || s.N % k0 == 0)) {
    use(s.b_arg, s.K, s.N, s.trans_b);
    s.b_fractal = true;
    s.trans_b = false;
  }
  return out;
}

absl::StatusOr<GeneratedKernel> GenerateGemm(const GemmSpec& spec, const sim::Machine& m, tile::GemmTiling* chosen) {
  const CubeGemm p = ProblemOf(spec);
  KILN_ASSIGN_OR_RETURN(tile::GemmTiling t, tile::ChooseGemmTiling(p.problem, CubeFiguresOf(m), p.traits));
  if (chosen) *chosen = t;
  GemmSpec s = spec;
  std::vector<FractalConstant> fractals = UseFractalConstants(s, t);
  KILN_ASSIGN_OR_RETURN(std::string text, GemmKasm(s, t, m));
  auto file = sim::Assemble(text, absl::StrCat(s.name, ".kasm"));
  if (!file.ok())
    return absl::InternalError(absl::StrCat("generated cube program does not assemble: ", file.status().message()));
  GeneratedKernel k;
  k.program = std::move(file->program);
  k.block_dim = t.blocks;
  k.engine = "cube";
  k.estimated_cycles = t.estimated_cycles;
  k.fractal_constants = std::move(fractals);
  std::string shape = absl::StrCat(s.M, "x", s.N, "x", s.K);
  if (!p.problem.batch.empty()) shape = absl::StrCat(p.problem.batch[0], "x", shape);
  k.plan = absl::StrCat(s.name, " ", shape, " ", sim::DTypeName(s.dtype), ": tiles ", t.bm, "x", t.bn, "x", t.tk,
                        " (K stages of ", t.bk, "), ", t.blocks, " blocks, double-buffered",
                        t.accumulator_stages == 1 ? " (one L0C buffer)" : "",
                        t.via_vector ? ", written through UB" : "", s.a_fractal ? ", A as fractals" : "",
                        s.b_fractal ? ", B as fractals" : "", s.trans_a ? ", A read transposed" : "",
                        s.trans_b ? ", B read transposed" : "",
                        s.alpha != 1.0f ? absl::StrCat(", scaled by ", s.alpha) : "",
                        s.r_arg >= 0 ? ", adds a residual" : "",
                        s.gelu == GemmSpec::Gelu::kTanh  ? ", GELU (tanh)"
                        : s.gelu == GemmSpec::Gelu::kErf ? ", GELU"
                                                          : "",
                        s.YDType() != s.dtype ? absl::StrCat(", writes ", sim::DTypeName(s.YDType())) : "",
                        ", est. ", static_cast<int64_t>(t.estimated_cycles), " cycles (", PipeOfBound(t.bound), "-bound)");
  return k;
}

}  // namespace kiln::target::npusim
