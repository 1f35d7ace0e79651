//===- vector_rows.cc - Row-wise vector kernels: reductions, softmax, norms ===//
//
// Each of these sees its input as rows (the kept outer index) of the
// innermost axes and works one row at a time in f32 (f16/bf16 rows convert
// on the way in and out). A row reduces by folding its whole repeats in
// halves (vadd/vmax/vmin on 256-byte repeats), one vcadd/vcmax/vcmin of the
// last repeat and a masked one of the tail; per-row statistics spread over a
// block with vbrcb and meet the row as a broadcast operand.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/ops/kernel_util.h"
#include "graph/support/status.h"
#include "target/npusim/kernels/vector_internal.h"
#include "target/npusim/kernels/vector_pipeline.h"

namespace kiln::target::npusim::vec {
namespace {

using sim::DType;

absl::Status CheckStatic(const Node& n) {
  for (const Value* v : n.inputs())
    if (v && (!v->type().is_tensor() || !v->type().shape().is_static()))
      return absl::FailedPreconditionError(absl::StrCat(n.QualifiedOp(), ": shapes are not static"));
  for (const Value* v : n.outputs())
    if (!v->type().is_tensor() || !v->type().shape().is_static())
      return absl::FailedPreconditionError(absl::StrCat(n.QualifiedOp(), ": shapes are not static"));
  return absl::OkStatus();
}

absl::Status CheckFloat(const Node& n, DType dt) {
  if (dt == DType::kF32 || dt == DType::kF16 || dt == DType::kBF16) return absl::OkStatus();
  return Unimpl(n, "the vector unit reduces only float tensors");
}

absl::Status UnusedExtraOutputs(const Node& n) {
  for (int i = 1; i < n.num_outputs(); ++i)
    if (n.output(i) && n.output(i)->has_uses()) return Unimpl(n, absl::StrCat("output ", i, " is used"));
  return absl::OkStatus();
}

// Rows and columns of x when the axes `reduced` are exactly its innermost
// axes of size > 1; nullopt otherwise.
std::optional<std::pair<int64_t, int64_t>> InnerSplit(const Dims& x, const std::vector<bool>& reduced) {
  int64_t rows = 1, cols = 1;
  bool seen_reduced = false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == 1) continue;
    if (reduced[i]) {
      seen_reduced = true;
      cols *= x[i];
    } else {
      if (seen_reduced) return std::nullopt;
      rows *= x[i];
    }
  }
  return std::make_pair(rows, cols);
}

std::string DimsText(const Dims& d) { return absl::StrCat("[", absl::StrJoin(d, ","), "]"); }

// A row kernel over [rows, cols] of input 0 with one output row of
// `out_cols`; the body gets x, out, scratch rows and statistics slots.
RowSpec BasicRows(const Node& node, int64_t rows, int64_t cols, int64_t out_cols, int temps) {
  RowSpec s;
  s.name = KernelName(node);
  s.rows = rows;
  s.ins.push_back({{InArg(0), IsaOf(node.input(0))}, cols});
  s.out = {OutArg(0), IsaOf(node.output(0))};
  s.out_cols = out_cols;
  s.ct = DType::kF32;
  s.temps = temps;
  return s;
}

// The 256-byte block after temp `t`'s row.
Ub Blk(const RowOperands& o, int t, int64_t row_cols) {
  return o.temps[t].Plus(RoundUp(row_cols * sim::DTypeSize(o.ct), 256));
}

}  // namespace

void RowReduce(Kasm& k, const std::string& kind, DType ct, Ub dst, Ub src, int64_t n, Ub scratch, Ub slot) {
  int64_t epr = 256 / sim::DTypeSize(ct);
  int64_t full = n / epr, tail = n % epr;
  std::string vc = absl::StrCat("vc", kind), vb = absl::StrCat("v", kind);
  if (full == 0) {
    k.Reduce(vc, ct, dst, src, 1, tail);
    return;
  }
  Ub a = src;
  int64_t f = full;
  if (f > 1) {
    int64_t h = (f + 1) / 2;
    k.Vec(vb, ct, V(scratch), {V(src), V(src.Plus(h * 256))}, (f - h) * epr);
    if (h > f - h) k.Vec("vmov", ct, V(scratch.Plus((f - h) * 256)), {V(src.Plus((f - h) * 256))}, epr);
    a = scratch;
    f = h;
    while (f > 1) {
      h = (f + 1) / 2;
      k.Vec(vb, ct, V(scratch), {V(scratch), V(scratch.Plus(h * 256))}, (f - h) * epr);
      f = h;
    }
  }
  k.Reduce(vc, ct, dst, a, 1, epr);
  if (tail) {
    k.Reduce(vc, ct, slot, src.Plus(full * 256), 1, tail);
    k.Vec(vb, ct, V(dst), {V(dst), V(slot)}, 1);
  }
}

bool IsReduceOp(const Node& n) {
  if (!n.domain().empty()) return false;
  return n.op() == "ReduceSum" || n.op() == "ReduceMean" || n.op() == "ReduceMax" || n.op() == "ReduceMin" ||
         n.op() == "GlobalAveragePool" || n.op() == "GlobalMaxPool";
}

absl::StatusOr<GeneratedKernel> GenerateReduce(const KernelRequest& req) {
  const Node& node = *req.node;
  KILN_RETURN_IF_ERROR(CheckStatic(node));
  DType dt = IsaOf(node.input(0));
  KILN_RETURN_IF_ERROR(CheckFloat(node, dt));
  Dims x = node.input(0)->type().shape().StaticDims();
  int rank = static_cast<int>(x.size());
  std::vector<bool> reduced(rank, false);
  std::string kind = "add";
  bool mean = false;
  const std::string& op = node.op();
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    if (rank < 2) return Unimpl(node, "rank below 2");
    if (req.x_c1hwc0) {
      // [N, C/C0, H*W, C0] (C0 channels of a 32-byte block: 16 of f16, 8 of
      // f32): reduce the middle axis; [N, C/C0, C0] is the output's NCHW order.
      if (rank != 4 || x[1] % 16 != 0) return absl::InvalidArgumentError("an NC1HWC0 input has 4 dims, C in blocks of 16");
      const int64_t c0 = 32 / sim::DTypeSize(dt);
      return GenerateReduceOuter(req, x[0] * (x[1] / c0), x[2] * x[3], c0, op == "GlobalMaxPool" ? "max" : "add",
                                 op == "GlobalAveragePool");
    }
    for (int i = 2; i < rank; ++i) reduced[i] = true;
    mean = op == "GlobalAveragePool";
    if (op == "GlobalMaxPool") kind = "max";
  } else {
    std::vector<int64_t> axes;
    bool noop = false;
    if (op == "ReduceSum") {
      if (node.input(1)) {
        if (!node.input(1)->is_constant()) return Unimpl(node, "axes are not a constant");
        const Tensor& a = node.input(1)->constant();
        for (int64_t i = 0; i < a.numel(); ++i) axes.push_back(static_cast<int64_t>(a.GetDouble(i)));
      }
      noop = node.GetInt("noop_with_empty_axes", 0) != 0;
    } else {
      axes = node.GetInts("axes", {});
    }
    if (axes.empty() && noop) {
      // The identity: a row kernel would be a copy; leave it to the caller.
      return Unimpl(node, "empty axes with noop_with_empty_axes=1 (an identity)");
    }
    if (axes.empty()) {
      std::fill(reduced.begin(), reduced.end(), true);
    } else {
      auto norm = NormalizeAxes(axes, rank);
      if (!norm.ok()) return absl::InvalidArgumentError(absl::StrCat(node.QualifiedOp(), ": ", norm.status().message()));
      for (int a : *norm) reduced[a] = true;
    }
    mean = op == "ReduceMean";
    if (op == "ReduceMax") kind = "max";
    if (op == "ReduceMin") kind = "min";
  }
  auto split = InnerSplit(x, reduced);
  if (!split) {
    // Kept, reduced, kept: [A, R, B] with the reduced axes in the middle.
    int64_t abr[3] = {1, 1, 1};
    int phase = 0;
    bool ok = true;
    for (int i = 0; i < rank && ok; ++i) {
      if (x[i] == 1) continue;
      int want = reduced[i] ? 1 : (phase == 0 ? 0 : 2);
      if (want < phase) ok = false;
      phase = want;
      abr[want] *= x[i];
    }
    if (ok && abr[2] > 1 && abr[0] * abr[1] * abr[2] > 0)
      return GenerateReduceOuter(req, abr[0], abr[1], abr[2], kind, mean);
    std::vector<int> ax;
    for (int i = 0; i < rank; ++i)
      if (reduced[i]) ax.push_back(i);
    return Unimpl(node, absl::StrCat("reduction over axes {", absl::StrJoin(ax, ","), "} of ", DimsText(x),
                                     " is not over the innermost axes"));
  }
  const int64_t rows = split->first, cols = split->second;
  if (rows * cols == 0) return Unimpl(node, "empty tensor");
  RowSpec s = BasicRows(node, rows, cols, 1, 1);
  double inv = 1.0 / static_cast<double>(cols);
  s.body = [=](Kasm& k, const RowOperands& o, Ub) {
    Ub blk = Blk(o, 0, cols);
    RowReduce(k, kind, o.ct, o.out, o.ins[0], cols, o.temps[0], blk);
    if (mean) k.Vec("vmuls", o.ct, V(o.out), {V(o.out)}, 1, inv);
  };
  s.what = absl::StrCat(op, " of ", DimsText(x), " over its last ", cols, " elements");
  return EmitRows(req, s);
}

absl::StatusOr<GeneratedKernel> GenerateSoftmax(const KernelRequest& req) {
  const Node& node = *req.node;
  KILN_RETURN_IF_ERROR(CheckStatic(node));
  DType dt = IsaOf(node.input(0));
  KILN_RETURN_IF_ERROR(CheckFloat(node, dt));
  Dims x = node.input(0)->type().shape().StaticDims();
  int rank = static_cast<int>(x.size());
  int64_t axis = node.GetInt("axis", -1);
  if (axis < 0) axis += rank;
  if (rank == 0 || axis < 0 || axis >= rank) return absl::InvalidArgumentError(absl::StrCat(node.QualifiedOp(), ": bad axis"));
  int64_t inner = 1;
  for (int i = static_cast<int>(axis) + 1; i < rank; ++i) inner *= x[i];
  if (inner != 1)
    return Unimpl(node, absl::StrCat(node.op(), " over axis ", axis, " of ", rank, " is not the innermost axis"));
  int64_t cols = x[axis], rows = 1;
  for (int i = 0; i < axis; ++i) rows *= x[i];
  if (rows * cols == 0) return Unimpl(node, "empty tensor");
  bool log = node.op() == "LogSoftmax";
  RowSpec s = BasicRows(node, rows, cols, cols, 2);
  s.body = [=](Kasm& k, const RowOperands& o, Ub) {
    DType ct = o.ct;
    Ub stat = Blk(o, 0, cols), slot = stat.Plus(32), b = Blk(o, 1, cols);
    Ub xr = o.ins[0], y = o.out;
    RowReduce(k, "max", ct, stat, xr, cols, o.temps[1], slot);
    k.Brcb(ct, b, stat);
    k.Vec("vsub", ct, V(y), {V(xr), Bcast(b)}, cols);
    if (!log) {
      k.Vec("vexp", ct, V(y), {V(y)}, cols);
      RowReduce(k, "add", ct, stat, y, cols, o.temps[1], slot);
      k.Vec("vrec", ct, V(stat), {V(stat)}, 1);
      k.Brcb(ct, b, stat);
      k.Vec("vmul", ct, V(y), {V(y), Bcast(b)}, cols);
    } else {
      k.Vec("vexp", ct, V(o.temps[0]), {V(y)}, cols);
      RowReduce(k, "add", ct, stat, o.temps[0], cols, o.temps[1], slot);
      k.Vec("vln", ct, V(stat), {V(stat)}, 1);
      k.Brcb(ct, b, stat);
      k.Vec("vsub", ct, V(y), {V(y), Bcast(b)}, cols);
    }
  };
  s.what = absl::StrCat(node.op(), " of ", DimsText(x), " over the last axis");
  return EmitRows(req, s);
}

absl::StatusOr<GeneratedKernel> GenerateLayerNorm(const KernelRequest& req) {
  const Node& node = *req.node;
  KILN_RETURN_IF_ERROR(CheckStatic(node));
  KILN_RETURN_IF_ERROR(UnusedExtraOutputs(node));
  DType dt = IsaOf(node.input(0));
  KILN_RETURN_IF_ERROR(CheckFloat(node, dt));
  Dims x = node.input(0)->type().shape().StaticDims();
  int rank = static_cast<int>(x.size());
  int64_t axis = node.GetInt("axis", -1);
  if (axis < 0) axis += rank;
  if (rank == 0 || axis < 0 || axis >= rank) return absl::InvalidArgumentError(absl::StrCat(node.QualifiedOp(), ": bad axis"));
  int64_t rows = 1, cols = 1;
  for (int i = 0; i < rank; ++i) (i < axis ? rows : cols) *= x[i];
  if (rows * cols == 0) return Unimpl(node, "empty tensor");
  bool has_bias = node.input(2) != nullptr;
  for (int i = 1; i <= (has_bias ? 2 : 1); ++i) {
    const Value* p = node.input(i);
    if (p->type().shape().NumElements() != cols)
      return Unimpl(node, absl::StrCat(i == 1 ? "Scale" : "B", " of shape ", DimsText(p->type().shape().StaticDims()),
                                       " is broadcast over the normalized shape"));
    KILN_RETURN_IF_ERROR(CheckFloat(node, IsaOf(p)));
  }
  double eps = node.GetFloat("epsilon", 1e-5f);
  RowSpec s = BasicRows(node, rows, cols, cols, 2);
  int cts = sim::DTypeSize(s.ct);
  DType ct = s.ct;
  int64_t vec = RoundUp(cols * cts, 256);
  DType sdt = IsaOf(node.input(1)), bdt = has_bias ? IsaOf(node.input(2)) : DType::kF32;
  int64_t raw_s = RoundUp(cols * sim::DTypeSize(sdt), 256), raw_b = RoundUp(cols * sim::DTypeSize(bdt), 256);
  // Resident: scale and bias in ct, then their raw loads.
  s.resident_bytes = 2 * vec + raw_s + (has_bias ? raw_b : 0);
  if (s.resident_bytes > 96 * 1024) return Unimpl(node, absl::StrCat("normalized size ", cols, " is too large"));
  s.prologue = [=](Kasm& k, Ub res) {
    Ub rs = res.Plus(2 * vec), rb = rs.Plus(raw_s);
    k.CopyIn(rs, InArg(1), -1, 0, cols * sim::DTypeSize(sdt));
    if (has_bias) k.CopyIn(rb, InArg(2), -1, 0, cols * sim::DTypeSize(bdt));
    k.SetFlag("MTE2", "VECTOR", 2);
    k.WaitFlag("MTE2", "VECTOR", 2);
    if (sdt != ct) k.Conv(ct, sdt, V(res), V(rs), cols);
    else k.Vec("vmov", ct, V(res), {V(rs)}, cols);
    if (has_bias) {
      if (bdt != ct) k.Conv(ct, bdt, V(res.Plus(vec)), V(rb), cols);
      else k.Vec("vmov", ct, V(res.Plus(vec)), {V(rb)}, cols);
    }
  };
  double inv = 1.0 / static_cast<double>(cols);
  s.body = [=](Kasm& k, const RowOperands& o, Ub res) {
    Ub stat = Blk(o, 0, cols), slot = stat.Plus(32), b = Blk(o, 1, cols);
    Ub xr = o.ins[0], y = o.out, d = o.temps[0];
    RowReduce(k, "add", ct, stat, xr, cols, o.temps[1], slot);
    k.Vec("vmuls", ct, V(stat), {V(stat)}, 1, inv);
    k.Brcb(ct, b, stat);
    k.Vec("vsub", ct, V(d), {V(xr), Bcast(b)}, cols);
    k.Vec("vmul", ct, V(y), {V(d), V(d)}, cols);
    RowReduce(k, "add", ct, stat, y, cols, o.temps[1], slot);
    k.Vec("vmuls", ct, V(stat), {V(stat)}, 1, inv);
    k.Vec("vadds", ct, V(stat), {V(stat)}, 1, eps);
    k.Vec("vrsqrt", ct, V(stat), {V(stat)}, 1);
    k.Brcb(ct, b, stat);
    k.Vec("vmul", ct, V(y), {V(d), Bcast(b)}, cols);
    k.Vec("vmul", ct, V(y), {V(y), V(res)}, cols);
    if (has_bias) k.Vec("vadd", ct, V(y), {V(y), V(res.Plus(vec))}, cols);
  };
  s.what = absl::StrCat("LayerNormalization of ", DimsText(x), " over its last ", cols, " elements");
  return EmitRows(req, s);
}

absl::StatusOr<GeneratedKernel> GenerateBatchNorm(const KernelRequest& req) {
  const Node& node = *req.node;
  KILN_RETURN_IF_ERROR(CheckStatic(node));
  KILN_RETURN_IF_ERROR(UnusedExtraOutputs(node));
  if (node.GetInt("training_mode", 0) != 0) return Unimpl(node, "training mode");
  DType dt = IsaOf(node.input(0));
  KILN_RETURN_IF_ERROR(CheckFloat(node, dt));
  Dims x = node.input(0)->type().shape().StaticDims();
  if (x.size() < 2) return Unimpl(node, "rank below 2");
  int64_t C = x[1], rows = x[0] * C, cols = 1;
  for (size_t i = 2; i < x.size(); ++i) cols *= x[i];
  if (rows * cols == 0) return Unimpl(node, "empty tensor");
  std::array<DType, 4> pdt;
  for (int i = 0; i < 4; ++i) {
    pdt[i] = IsaOf(node.input(i + 1));
    KILN_RETURN_IF_ERROR(CheckFloat(node, pdt[i]));
  }
  if (C * 32 * 2 > 96 * 1024) return Unimpl(node, absl::StrCat(C, " channels"));
  double eps = node.GetFloat("epsilon", 1e-5f);
  RowSpec s = BasicRows(node, rows, cols, cols, 0);
  DType ct = s.ct;
  int64_t cvec = RoundUp(RoundUp(C, 8) * 4, 256), raw = RoundUp(C * 4, 256), blocks = RoundUp(C, 8) * 32;
  // Resident: a and b blocks (one per channel), a and b vectors, four raw parameters.
  s.resident_bytes = 2 * blocks + 2 * cvec + 4 * raw + 4 * cvec;
  s.prologue = [=](Kasm& k, Ub res) {
    Ub ba = res, bb = res.Plus(blocks), va = res.Plus(2 * blocks), vb = va.Plus(cvec), rawp = vb.Plus(cvec),
       conv = rawp.Plus(4 * raw);
    for (int i = 0; i < 4; ++i) k.CopyIn(rawp.Plus(i * raw), InArg(i + 1), -1, 0, C * sim::DTypeSize(pdt[i]));
    k.SetFlag("MTE2", "VECTOR", 2);
    k.WaitFlag("MTE2", "VECTOR", 2);
    for (int i = 0; i < 4; ++i) {
      if (pdt[i] != ct) k.Conv(ct, pdt[i], V(conv.Plus(i * cvec)), V(rawp.Plus(i * raw)), C);
      else k.Vec("vmov", ct, V(conv.Plus(i * cvec)), {V(rawp.Plus(i * raw))}, C);
    }
    Ub scale = conv, bias = conv.Plus(cvec), mean = conv.Plus(2 * cvec), var = conv.Plus(3 * cvec);
    // a = scale / sqrt(var + eps); b = bias - mean * a.
    k.Vec("vadds", ct, V(va), {V(var)}, C, eps);
    k.Vec("vsqrt", ct, V(va), {V(va)}, C);
    k.Vec("vdiv", ct, V(va), {V(scale), V(va)}, C);
    k.Vec("vmul", ct, V(vb), {V(mean), V(va)}, C);
    k.Vec("vsub", ct, V(vb), {V(bias), V(vb)}, C);
    int64_t groups = CeilDiv(C, 8);
    for (int64_t g = 0; g < groups; g += 255) {
      int64_t r = std::min<int64_t>(255, groups - g);
      k.Brcb(ct, ba.Plus(g * 256), va.Plus(g * 32), r);
      k.Brcb(ct, bb.Plus(g * 256), vb.Plus(g * 32), r);
    }
  };
  s.body = [=](Kasm& k, const RowOperands& o, Ub res) {
    int a = k.Reg();
    k.Alu("rem", a, o.row, C);
    k.Alu("mul", a, a, 32);
    k.Alu("add", a, a, res.off);
    k.Vec("vmul", ct, V(o.out), {V(o.ins[0]), Bcast(Ub{a, 0})}, cols);
    k.Vec("vadd", ct, V(o.out), {V(o.out), Bcast(Ub{a, blocks})}, cols);
  };
  s.what = absl::StrCat("BatchNormalization of ", DimsText(x), " per channel");
  return EmitRows(req, s);
}

}  // namespace kiln::target::npusim::vec
