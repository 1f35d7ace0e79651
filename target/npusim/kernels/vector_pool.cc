//===- vector_pool.cc - MaxPool and AveragePool on the vector unit --------===//
//
// 2-D pooling of NCHW tensors. Vector operands start on 32-byte blocks and
// stride in whole blocks, so the shifted and strided windows of a row come
// from the DMA engines, which address global memory by the byte:
//
// 1. Padding. Each block copies its planes, converted to f32, into its share
//    of a global workspace laid out as padded planes of PR = L*sh rows of
//    RW = M*sw columns, the image at (pt, pl), the border filled with the pad
//    value (-FLT_MAX for MaxPool, 0 for AveragePool). L >= OH and M >= OW
//    are chosen so that every window of every output lies inside its padded
//    plane, and M is a multiple of 16 elements, so rows stay block aligned.
// 2. Pooling. Output rows are "virtual rows" v = plane * L + oh (rows
//    oh >= OH are never written). For a tile of virtual rows, MTE2 gathers,
//    for each kernel column kw, element (r, j) = padded (r, j*sw + kw*dw)
//    of the padded rows r the tile needs: one strided DMA (bursts of one
//    element, or one burst when sw = 1) since consecutive rows continue the
//    same stride (RW = M*sw). The vector unit combines the KW gathers
//    elementwise (vmax / vadd), then the KH rows of each window with
//    row-strided repeats (dst_rep_stride M, src_rep_stride sh*M in blocks),
//    scales averages by a resident plane of 1/count, converts, and MTE3
//    writes each plane's OH x OW rows.
//
// Both phases are double-buffered (flags V->MTE2 / MTE2->V / V->MTE3 /
// MTE3->V, two credits each way); between them, a set_flag MTE3 -> MTE2
// makes the workspace writes visible to the gathers.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/support/status.h"
#include "sim/machine/machine.h"
#include "target/backend/window.h"
#include "target/npusim/kernels/vector_internal.h"
#include "target/npusim/kernels/vector_pipeline.h"

namespace kiln::target::npusim::vec {
namespace {

using sim::DType;

constexpr const char* kV = "VECTOR";
constexpr const char* kM2 = "MTE2";
constexpr const char* kM3 = "MTE3";

struct Dim {
  int64_t in = 0, out = 0, k = 1, s = 1, d = 1, pb = 0, pe = 0;
  int64_t Need() const { return (out - 1) * s + (k - 1) * d + 1; }
  // Per output index: the kernel taps inside the image, and (count_include_pad)
  // those inside the image and its pads, as the reference counts them.
  int64_t Valid(int64_t o) const {
    int64_t c = 0;
    for (int64_t t = 0; t < k; ++t) {
      int64_t x = o * s - pb + t * d;
      c += x >= 0 && x < in;
    }
    return c;
  }
  int64_t Incl(int64_t o) const {
    int64_t c = 0;
    for (int64_t t = 0; t < k; ++t) c += o * s - pb + t * d < in + pe;
    return c;
  }
};

// Emits op over `rows` rows of `elems` f32 elements: dst row t at
// dst + t*dp, src row t at src + t*sp (pitches in elements, multiples of 8;
// a pitch of 0 repeats one row). `imm` for the scalar forms.
void RowsOp(Kasm& k, absl::string_view op, Ub dst, const std::vector<Ub>& srcs, const std::vector<int64_t>& sp,
            int64_t dp, int64_t rows, int64_t elems, std::optional<double> imm = std::nullopt) {
  const int64_t epr = 64;
  std::string mn = absl::StrCat(op, ".f32");
  for (int64_t c = 0; c * epr < elems; ++c) {
    int64_t mask = std::min(epr, elems - c * epr);
    for (int64_t r0 = 0; r0 < rows; r0 += 255) {
      int64_t rep = std::min<int64_t>(255, rows - r0);
      std::string extra = absl::StrCat("dst_rep_stride=", dp / 8);
      std::vector<Ub> s;
      for (size_t i = 0; i < srcs.size(); ++i) {
        s.push_back(srcs[i].Plus((r0 * sp[i] + c * epr) * 4));
        absl::StrAppend(&extra, ", src", i, "_rep_stride=", sp[i] / 8);
      }
      k.Raw(mn, dst.Plus((r0 * dp + c * epr) * 4), s, rep, mask, epr, extra, imm);
    }
  }
}

// Writes the static f32 values `v` at dst (dst block aligned): runs of
// uniform blocks with one vdup, other blocks with vdups of shrinking masks.
void StaticVector(Kasm& k, Ub dst, const std::vector<double>& v) {
  const int64_t n = static_cast<int64_t>(v.size()), nb = CeilDiv(n, 8);
  auto uniform = [&](int64_t b) {
    for (int64_t i = b * 8; i < std::min(n, b * 8 + 8); ++i)
      if (v[i] != v[b * 8]) return false;
    return true;
  };
  int64_t b = 0;
  while (b < nb) {
    if (uniform(b)) {
      int64_t e = b + 1;
      while (e < nb && uniform(e) && v[e * 8] == v[b * 8]) ++e;
      k.Vec("vdup", DType::kF32, V(dst.Plus(b * 32)), {}, std::min(n, e * 8) - b * 8, v[b * 8]);
      b = e;
      continue;
    }
    int64_t last = std::min(n, b * 8 + 8) - 1;
    k.Raw("vdup.f32", dst.Plus(b * 32), {}, 1, last - b * 8 + 1, 64, "", v[last]);
    for (int64_t i = last - 1; i >= b * 8; --i)
      if (v[i] != v[i + 1]) k.Raw("vdup.f32", dst.Plus(b * 32), {}, 1, i - b * 8 + 1, 64, "", v[i]);
    ++b;
  }
}

}  // namespace

bool IsPoolOp(const Node& n) { return n.domain().empty() && (n.op() == "MaxPool" || n.op() == "AveragePool"); }

absl::StatusOr<GeneratedKernel> GeneratePool(const KernelRequest& req) {
  const Node& node = *req.node;
  const sim::Machine& m = *req.machine;
  const bool is_max = node.op() == "MaxPool";
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!x || !x->type().is_tensor() || !x->type().shape().is_static() || !y->type().shape().is_static())
    return absl::FailedPreconditionError(absl::StrCat(node.QualifiedOp(), ": shapes are not static"));
  if (node.num_outputs() > 1 && node.output(1) && node.output(1)->has_uses())
    return Unimpl(node, "the Indices output is used (the vector kernel computes only the values)");
  Dims xd = x->type().shape().StaticDims(), yd = y->type().shape().StaticDims();
  if (xd.size() != 4) return Unimpl(node, absl::StrCat("only 2-D pooling of NCHW tensors (rank ", xd.size(), ")"));
  const DType dt = IsaOf(x);
  if (dt != DType::kF32 && dt != DType::kF16 && dt != DType::kBF16)
    return Unimpl(node, "the vector unit pools only f32, f16 and bf16 tensors");
  for (int64_t v : xd)
    if (v == 0) return Unimpl(node, "empty tensor");
  absl::StatusOr<Window2d> win = WindowOf(node);
  if (!win.ok()) return win.status();
  Dim dm[2];
  for (int i = 0; i < 2; ++i) {
    Dim& d = dm[i];
    d.in = xd[2 + i];
    d.out = yd[2 + i];
    d.k = win->kernel[i];
    d.s = win->stride[i];
    d.d = win->dilation[i];
    d.pb = win->pad_begin[i];
    d.pe = win->pad_end[i];
  }
  const bool include_pad = node.GetInt("count_include_pad", 0) != 0;
  const Dim& dh = dm[0];
  const Dim& dw = dm[1];
  const int64_t P = xd[0] * xd[1], H = dh.in, W = dw.in, OH = dh.out, OW = dw.out, KH = dh.k, KW = dw.k;
  const int64_t sh = dh.s, sw = dw.s;
  const int in_es = sim::DTypeSize(dt), out_es = in_es;

  // The padded plane in the workspace (f32).
  const int64_t M = RoundUp(std::max(OW, CeilDiv(std::max(dw.Need(), dw.pb + W), sw)), 16);
  const int64_t L = std::max(OH, CeilDiv(std::max(dh.Need(), dh.pb + H), sh));
  const int64_t RW = M * sw, PR = L * sh, plane_ws = PR * RW;
  if (M > 4095) return Unimpl(node, absl::StrCat("rows of ", W, " elements are too long"));

  const auto split = SplitBlocks(P, Cores(req), 1, 1);
  const int64_t blocks = split.first, per = split.second, last = P - (blocks - 1) * per;
  const int64_t ws_block = RoundUp((per * plane_ws + 2 * RW + 64) * 4, 512);

  // UB plan. Fixed: the pad row; staging: two slots of raw + f32 rows.
  const int64_t ub = UbBytes(m);
  const int64_t pad_bytes = RoundUp(RW * 4, 256);
  const int64_t PP = RoundUp(H * W, 16);
  const int64_t stage_budget = ub / 4;
  int64_t Qs = stage_budget / (2 * (RoundUp(PP * in_es, 256) + RoundUp(PP * 4, 256)));
  Qs = std::min<int64_t>({Qs, per, 4095});
  int64_t Rs = H;
  if (Qs < 1) {
    Qs = 1;
    Rs = std::min<int64_t>(4095, stage_budget / (2 * (W * (in_es + 4) + 512)));
    if (Rs < 1) return Unimpl(node, absl::StrCat("rows of ", W, " elements do not fit UB"));
  }
  const int64_t stage_raw = Qs > 1 || Rs == H ? RoundUp(Qs * PP * in_es, 256) : RoundUp(Rs * W * in_es, 256);
  const int64_t stage_f32 = Qs > 1 || Rs == H ? RoundUp(Qs * PP * 4, 256) : RoundUp(Rs * W * 4, 256);
  const int64_t stage_slot = stage_raw + stage_f32;

  // Pooling tiles: Tq planes of L virtual rows, or T rows of one plane.
  auto slot_bytes = [&](int64_t V) {
    int64_t rin = (V - 1) * sh + (KH - 1) * dh.d + 1;
    int64_t b = KW * RoundUp(rin * M * 4, 256) + RoundUp(V * M * 4, 256);
    if (out_es != 4) b += RoundUp(V * M * out_es, 256);
    return b;
  };
  const int64_t avail = ub - 1024 - pad_bytes - 2 * stage_slot;
  auto fits = [&](int64_t V, int64_t rplane_rows) {
    int64_t r = is_max ? 0 : RoundUp(rplane_rows * M * 4, 256);
    return 2 * slot_bytes(V) + r <= avail;
  };
  int64_t Tq = 0, T = OH;
  for (int64_t q = std::min<int64_t>(per, 64); q >= 1; --q)
    if (fits((q - 1) * L + OH, q * L)) {
      Tq = q;
      break;
    }
  if (Tq == 0) {
    Tq = 1;
    T = 0;
    for (int64_t t = OH - 1; t >= 1; --t)
      if (fits(t, OH)) {
        T = t;
        break;
      }
    if (T == 0) return Unimpl(node, absl::StrCat("one output row of ", OW, " elements does not fit UB"));
  }
  const int64_t Vmax = T == OH ? (Tq - 1) * L + OH : T;
  const int64_t rplane_rows = T == OH ? Tq * L : OH;

  Kasm k(absl::StrCat("vec_", node.op()), m);
  KILN_RETURN_IF_ERROR(AddNodeArgs(k, node));
  k.AddArg(absl::StrCat(".arg ws s8[", blocks * ws_block, "]"));

  // UB layout.
  int64_t off = 0;
  const Ub pad{-1, off};
  off += pad_bytes;
  const int64_t st_base = off;
  off += 2 * stage_slot;
  const int64_t rplane = off;
  if (!is_max) off += RoundUp(rplane_rows * M * 4, 256);
  const int64_t tile_base = off;
  const int64_t rin_max = (Vmax - 1) * sh + (KH - 1) * dh.d + 1;
  const int64_t g_bytes = RoundUp(rin_max * M * 4, 256), o_bytes = RoundUp(Vmax * M * 4, 256);
  const int64_t tslot = slot_bytes(Vmax);
  if (tile_base + 2 * tslot > ub) return absl::InternalError("pool: UB plan overflows");

  const int blk = k.Reg(), p0 = k.Reg(), slot = k.Reg(), slot_size = k.Reg(), wsb = k.Reg();
  const int plane = k.Reg(), row = k.Reg(), i1 = k.Reg(), i2 = k.Reg(), ga = k.Reg(), gb = k.Reg(), t0 = k.Reg();
  k.Op(absl::StrCat("block_idx r", blk));
  k.Alu("mul", p0, blk, per);
  k.Alu("mul", wsb, blk, ws_block);
  const double pad_f32 = is_max ? static_cast<double>(-FLT_MAX) : 0.0;

  // Resident 1/count plane for AveragePool (period L rows).
  if (!is_max) {
    std::vector<double> cw(M, 1.0);
    for (int64_t j = 0; j < OW; ++j) cw[j] = static_cast<double>(include_pad ? dw.Incl(j) : dw.Valid(j));
    Ub rp{-1, rplane};
    StaticVector(k, rp, cw);  // row 0 holds cw for now
    // Rows by runs of equal vertical counts (row 0 last: it is the source).
    std::vector<double> ch(L, 1.0);
    for (int64_t o = 0; o < OH; ++o) ch[o] = static_cast<double>(include_pad ? dh.Incl(o) : dh.Valid(o));
    int64_t prow = std::min<int64_t>(L, rplane_rows);
    for (int64_t r = 1; r < prow;) {
      int64_t e = r + 1;
      while (e < prow && ch[e] == ch[r]) ++e;
      RowsOp(k, "vmuls", rp.Plus(r * M * 4), {rp}, {0}, M, e - r, M, ch[r]);
      r = e;
    }
    k.Vec("vmuls", DType::kF32, V(rp), {V(rp)}, M, ch[0]);
    for (int64_t q = 1; q * L < rplane_rows; ++q)
      k.Vec("vmov", DType::kF32, V(rp.Plus(q * L * M * 4)), {V(rp)}, std::min(L, rplane_rows - q * L) * M);
    k.Vec("vrec", DType::kF32, V(rp), {V(rp)}, rplane_rows * M);
  }

  // Phase 1: the pad borders, then the planes, into the workspace.
  k.Vec("vdup", DType::kF32, V(pad), {}, RW, pad_f32);
  k.SetFlag(kV, kM3, 7);
  k.WaitFlag(kV, kM3, 7);
  auto border = [&](int64_t cnt) {
    auto rows_of_planes = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t q = 0; q < cnt; q += 4095)
          k.CopyOut("ws", wsb, (q * plane_ws + r * RW) * 4, pad, RW * 4, std::min<int64_t>(4095, cnt - q), 0,
                    plane_ws * 4);
    };
    rows_of_planes(0, dh.pb);
    rows_of_planes(dh.pb + H, PR);
    auto cols = [&](int64_t c0, int64_t n) {
      if (n <= 0) return;
      for (int64_t r = 0; r < cnt * PR; r += 4095)
        k.CopyOut("ws", wsb, (r * RW + c0) * 4, pad, n * 4, std::min<int64_t>(4095, cnt * PR - r), 0, RW * 4);
    };
    cols(0, dw.pb);
    cols(dw.pb + W, RW - dw.pb - W);
  };
  PerBlock(k, blk, blocks, per, last, border);

  // Loops over `cnt` planes: groups of q whole planes (nr == rows), or each
  // plane in chunks of r rows. emit(nq, nr) uses `plane` and `row`.
  auto plane_loop = [&](int64_t cnt, int64_t rows, int64_t q, int64_t r,
                        const std::function<void(int64_t, int64_t)>& emit) {
    k.Mov(plane, 0);
    k.Mov(row, 0);
    if (r >= rows) {
      int64_t full = cnt / q, tail = cnt % q;
      if (full > 0) {
        k.Mov(i1, 0);
        std::string l = k.NewLabel("planes");
        k.Label(l);
        emit(q, rows);
        k.Alu("add", plane, plane, q);
        k.Alu("add", i1, i1, 1);
        k.Op(absl::StrCat("blt r", i1, ", ", full, ", ", l));
      }
      if (tail) emit(tail, rows);
      return;
    }
    int64_t full = rows / r, tail = rows % r;
    k.Mov(i1, 0);
    std::string lp = k.NewLabel("plane");
    k.Label(lp);
    k.Mov(row, 0);
    if (full > 0) {
      k.Mov(i2, 0);
      std::string lr = k.NewLabel("rows");
      k.Label(lr);
      emit(1, r);
      k.Alu("add", row, row, r);
      k.Alu("add", i2, i2, 1);
      k.Op(absl::StrCat("blt r", i2, ", ", full, ", ", lr));
    }
    if (tail) emit(1, tail);
    k.Alu("add", plane, plane, 1);
    k.Alu("add", i1, i1, 1);
    k.Op(absl::StrCat("blt r", i1, ", ", cnt, ", ", lp));
  };

  k.Mov(slot, 0);
  k.Mov(slot_size, stage_slot);
  for (int i = 0; i < 2; ++i) k.SetFlag(kV, kM2, 4);
  for (int i = 0; i < 2; ++i) k.SetFlag(kM3, kV, 5);
  auto stage = [&](int64_t nq, int64_t nr) {
    // ga = X byte offset of (p0 + plane, row); gb = ws byte offset of (plane, pt + row, pl).
    k.AluR("add", ga, p0, plane);
    k.Alu("mul", ga, ga, H);
    k.AluR("add", ga, ga, row);
    k.Alu("mul", ga, ga, W * in_es);
    k.Alu("mul", gb, plane, PR);
    k.AluR("add", gb, gb, row);
    k.Alu("mul", gb, gb, RW * 4);
    k.AluR("add", gb, gb, wsb);
    Ub raw{slot, st_base}, f32{slot, st_base + stage_raw};
    k.WaitFlag(kV, kM2, 4);
    if (nr == H) k.CopyIn(raw, InArg(0), ga, 0, H * W * in_es, nq, H * W * in_es, PP * in_es);
    else k.CopyIn(raw, InArg(0), ga, 0, nr * W * in_es);
    k.SetFlag(kM2, kV, 4);
    k.WaitFlag(kM2, kV, 4);
    k.WaitFlag(kM3, kV, 5);
    int64_t n = nr == H ? nq * PP : nr * W;
    if (dt == DType::kF32) k.CopyBits(DType::kF32, f32, raw, n);
    else k.Conv(DType::kF32, dt, V(f32), V(raw), n);
    k.SetFlag(kV, kM2, 4);
    k.SetFlag(kV, kM3, 5);
    k.WaitFlag(kV, kM3, 5);
    for (int64_t q = 0; q < nq; ++q)
      k.CopyOut("ws", gb, (q * plane_ws + dh.pb * RW + dw.pb) * 4, f32.Plus(q * PP * 4), W * 4, nr, W * 4, RW * 4);
    k.SetFlag(kM3, kV, 5);
    k.AluR("sub", slot, slot_size, slot);
  };
  PerBlock(k, blk, blocks, per, last, [&](int64_t cnt) { plane_loop(cnt, H, std::min(Qs, cnt), Rs, stage); });
  for (int i = 0; i < 2; ++i) k.WaitFlag(kV, kM2, 4);
  for (int i = 0; i < 2; ++i) k.WaitFlag(kM3, kV, 5);
  // The workspace is written before any gather reads it.
  k.SetFlag(kM3, kM2, 6);
  k.WaitFlag(kM3, kM2, 6);

  // Phase 2: the pooling tiles.
  k.Mov(slot, tile_base);
  k.Mov(slot_size, 2 * tile_base + tslot);
  Prologue(k);
  const char* op = is_max ? "vmax" : "vadd";
  double tile_vec = 0;
  auto tile = [&](int64_t nq, int64_t nr) {
    const int64_t Vr = (nq - 1) * L + nr, rin = (Vr - 1) * sh + (KH - 1) * dh.d + 1;
    // ga = ws byte offset of padded row (plane*L + row)*sh; gb = out byte offset.
    k.Alu("mul", ga, plane, L);
    k.AluR("add", ga, ga, row);
    k.Alu("mul", ga, ga, sh * RW * 4);
    k.AluR("add", ga, ga, wsb);
    k.AluR("add", gb, p0, plane);
    k.Alu("mul", gb, gb, OH);
    k.AluR("add", gb, gb, row);
    k.Alu("mul", gb, gb, OW * out_es);
    auto G = [&](int64_t kw) { return Ub{slot, kw * g_bytes}; };
    Ub O{slot, KW * g_bytes}, Oraw{slot, KW * g_bytes + o_bytes};
    k.WaitFlag(kV, kM2, 0);
    for (int64_t kw = 0; kw < KW; ++kw) {
      int64_t col = kw * dw.d;
      if (sw == 1) {
        k.CopyIn(G(kw), "ws", ga, col * 4, rin * M * 4);
      } else {
        int64_t rp = std::max<int64_t>(1, 4095 / M);
        for (int64_t r = 0; r < rin; r += rp) {
          int64_t nrow = std::min(rp, rin - r);
          k.CopyIn(G(kw).Plus(r * M * 4), "ws", ga, (r * RW + col) * 4, 4, nrow * M, sw * 4, 4);
        }
      }
    }
    k.SetFlag(kM2, kV, 0);
    k.WaitFlag(kM2, kV, 0);
    k.WaitFlag(kM3, kV, 1);
    double v0 = k.vector_cycles();
    for (int64_t kw = 1; kw < KW; ++kw) k.Vec(op, DType::kF32, V(G(0)), {V(G(0)), V(G(kw))}, rin * M);
    auto grow = [&](int64_t kh) { return G(0).Plus(kh * dh.d * M * 4); };
    if (KH == 1) {
      RowsOp(k, "vmov", O, {grow(0)}, {sh * M}, M, Vr, M);
    } else if (sh == 1) {
      k.Vec(op, DType::kF32, V(O), {V(grow(0)), V(grow(1))}, Vr * M);
      for (int64_t kh = 2; kh < KH; ++kh) k.Vec(op, DType::kF32, V(O), {V(O), V(grow(kh))}, Vr * M);
    } else {
      RowsOp(k, op, O, {grow(0), grow(1)}, {sh * M, sh * M}, M, Vr, M);
      for (int64_t kh = 2; kh < KH; ++kh) RowsOp(k, op, O, {O, grow(kh)}, {M, sh * M}, M, Vr, M);
    }
    if (!is_max) {
      if (T == OH) {
        k.Vec("vmul", DType::kF32, V(O), {V(O), V(Ub{-1, rplane})}, Vr * M);
      } else {
        k.Alu("mul", t0, row, M * 4);
        k.Vec("vmul", DType::kF32, V(O), {V(O), V(Ub{t0, rplane})}, Vr * M);
      }
    }
    Ub src = O;
    if (dt != DType::kF32) {
      k.Conv(dt, DType::kF32, V(Oraw), V(O), Vr * M);
      src = Oraw;
    }
    tile_vec = std::max(tile_vec, k.vector_cycles() - v0);
    k.SetFlag(kV, kM2, 0);
    k.SetFlag(kV, kM3, 1);
    k.WaitFlag(kV, kM3, 1);
    for (int64_t q = 0; q < nq; ++q)
      k.CopyOut(OutArg(0), gb, q * OH * OW * out_es, src.Plus(q * L * M * out_es), OW * out_es, nr, M * out_es,
                OW * out_es);
    k.SetFlag(kM3, kV, 1);
    k.AluR("sub", slot, slot_size, slot);
  };
  PerBlock(k, blk, blocks, per, last, [&](int64_t cnt) {
    plane_loop(cnt, OH, T == OH ? std::min(Tq, cnt) : 1, T, tile);
  });
  Epilogue(k);

  GeneratedKernel g;
  KILN_ASSIGN_OR_RETURN(g.program, k.Finish());
  g.block_dim = blocks;
  g.engine = "vector";
  g.workspace_bytes = blocks * ws_block;
  // Estimate: phase 1 moves the input in and the padded planes out; phase 2
  // gathers KW copies of the rows each tile needs and writes the output.
  const double hbm_rate = HbmBytesPerCycle(m), mte = sim::GmUbBytesPerCycle(m);
  const double tiles = T == OH ? static_cast<double>(CeilDiv(per, Tq)) : static_cast<double>(per * CeilDiv(OH, T));
  const double rin_t = static_cast<double>(rin_max);
  const double p1 = static_cast<double>(per) * (H * W * in_es + plane_ws * 4);
  const double p2 = tiles * (KW * rin_t * M * 4 + static_cast<double>(Vmax) * OW * out_es);
  const double lat = 2.0 * static_cast<double>(m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles());
  const double core = std::max((p1 + p2) / mte, tiles * tile_vec);
  const double chip = static_cast<double>(blocks) * (p1 + p2) / hbm_rate;
  g.estimated_cycles = std::max(core, chip) + 3 * lat;
  g.plan = absl::StrCat(node.op(), " ", KH, "x", KW, "/", sh, "x", sw, " of [", absl::StrJoin(xd, ","),
                        "]: padded f32 planes of ", PR, "x", RW, " in the workspace, ", blocks, " blocks of ", per,
                        " planes, tiles of ", T == OH ? absl::StrCat(Tq, " planes") : absl::StrCat(T, " rows"),
                        " (gathers of ", KW, " strided copies, row-strided vector combines)");
  return g;
}

}  // namespace kiln::target::npusim::vec
